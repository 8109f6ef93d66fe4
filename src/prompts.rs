//! The prompts, rendered from minijinja templates in templates/. kactors' own templates are
//! compiled in; a configuration's `templates:` replaces any of them by a file.
//!
//! Every figure a prompt states comes from the run: the GPU's from its spec table row
//! (data/gpu_specs.yaml), the tolerance from the verifier's settings, the times and the profile
//! from the journal's records. The templates hold words, never numbers about a GPU.

use std::collections::BTreeMap;
use std::path::PathBuf;

use actors::analysis::AnalyzedBottleneck;
use actors::model::CandidateId;
use actors::ports::{
    AnalysisContext, AttemptOutcome, Lesson, ProfileSummary, PromptBuilder, ProposalContext,
    ReferenceTimes, RefinementContext, ReflexionContext, RenderedPrompt, SeedContext,
};
use actors::profile::{InstructionMix, KernelProfile};
use minijinja::{Environment, Value, context};
use serde::Serialize;

use crate::devices::GpuSpec;
use crate::nvidia::{MetricSection as MetricSectionKind, NCU_METRICS};
use crate::vendor::{Platform, Vendor};

/// kactors' templates by name: the names `templates:` may replace. `platform` is the platform
/// guidance that every prompt asking for code includes.
const SHIPPED: &[(&str, &str)] = &[
    ("system", include_str!("../templates/system.j2")),
    ("platform", include_str!("../templates/platform.j2")),
    ("optimization", include_str!("../templates/optimization.j2")),
    ("analysis", include_str!("../templates/analysis.j2")),
    ("refinement", include_str!("../templates/refinement.j2")),
    ("reflexion", include_str!("../templates/reflexion.j2")),
    ("seed", include_str!("../templates/seed.j2")),
    (
        "seed_refinement",
        include_str!("../templates/seed_refinement.j2"),
    ),
];

/// An error the model is shown in full up to this many characters; longer ones keep their end,
/// where a Python traceback says what went wrong.
const MAX_ERROR_CHARS: usize = 4000;
/// A failure reason in the list of recent attempts.
const MAX_LESSON_REASON_CHARS: usize = 300;

#[derive(Debug, thiserror::Error)]
pub enum PromptError {
    #[error("failed to read template `{name}`: {source}")]
    Read {
        name: String,
        #[source]
        source: crate::user_file::UserFileError,
    },
    #[error("template `{name}` does not parse: {message}")]
    Syntax { name: String, message: String },
    #[error(
        "unknown dtype `{0}` for the prompts: expected bfloat16, float16, float32, float8 or float64 (or bf16, fp16, fp32, fp8, fp64)"
    )]
    UnknownDtype(String),
    #[error(
        "the GPU spec row `{row}` is for {row_vendor} GPUs, but the run's platform is {platform}"
    )]
    VendorMismatch {
        row: String,
        row_vendor: &'static str,
        platform: Platform,
    },
}

/// What the prompts need to know about the run, beyond each request's own context.
#[derive(Clone, Copy, Debug)]
pub struct PromptFacts<'a> {
    pub platform: Platform,
    /// The spec table row of the run's GPU; `None` on the noop platform or for a GPU the table
    /// does not know, and then the prompts state no GPU figure at all.
    pub gpu: Option<&'a GpuSpec>,
    /// The dtype the problem runs in, as the evaluator casts it (`bfloat16`, `torch.float16`,
    /// `fp32`, ...).
    pub dtype: &'a str,
    /// The tolerance the verifier applies, as it should be read: `atol=rtol=1e-2 (bfloat16)`.
    pub tolerance: &'a str,
    /// problem.py: the PyTorch reference the kernel must match.
    pub problem_source: &'a str,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dtype {
    Bfloat16,
    Float16,
    Float32,
    Float8,
    Float64,
}

impl Dtype {
    fn parse(text: &str) -> Option<Self> {
        let lower = text.trim().to_ascii_lowercase();
        let name = lower.strip_prefix("torch.").unwrap_or(&lower);
        Some(match name {
            "bfloat16" | "bf16" => Dtype::Bfloat16,
            "float16" | "fp16" | "f16" | "half" => Dtype::Float16,
            "float32" | "fp32" | "f32" | "float" => Dtype::Float32,
            "float64" | "fp64" | "f64" | "double" => Dtype::Float64,
            _ if name.starts_with("float8") || name.starts_with("fp8") => Dtype::Float8,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Dtype::Bfloat16 => "bfloat16",
            Dtype::Float16 => "float16",
            Dtype::Float32 => "float32",
            Dtype::Float8 => "float8",
            Dtype::Float64 => "float64",
        }
    }
}

/// The GPU's figures as the prompts state them: one device's share of its package's, from its
/// spec table row.
#[derive(Clone, Debug, PartialEq, Serialize)]
struct GpuFigures {
    name: String,
    architecture: String,
    vendor: &'static str,
    /// `SM` or `CU`.
    compute_unit: &'static str,
    compute_units: u32,
    /// `warp` or `wavefront`.
    warp: &'static str,
    warp_size: u32,
    memory_bandwidth_gb_per_s: f64,
    l2_cache_mb: f64,
    memory_gb: f64,
    memory_type: String,
    fp32_vector_tflops: f64,
    /// The matrix unit's dense peak for the run's dtype; `None` where the row has none.
    matrix_tflops: Option<f64>,
    /// The precision `matrix_tflops` is for, as the vendor names it (`BF16`, `TF32`, ...).
    matrix_precision: &'static str,
    /// `tensor cores` or `matrix cores`.
    matrix_unit: &'static str,
    /// Devices per package where more than one: the figures are one device's share.
    devices_per_package: Option<u32>,
}

impl GpuFigures {
    fn of(row: &GpuSpec, dtype: Dtype) -> Self {
        let share = f64::from(row.gpus_per_package.max(1));
        let (matrix_tflops, matrix_precision) = match (dtype, row.vendor) {
            (Dtype::Bfloat16, _) => (Some(row.bf16_tflops), "BF16"),
            (Dtype::Float16, _) => (Some(row.fp16_tflops), "FP16"),
            (Dtype::Float32, Vendor::Nvidia) => (Some(row.fp32_matrix_tflops), "TF32"),
            (Dtype::Float32, Vendor::Rocm) => (Some(row.fp32_matrix_tflops), "FP32"),
            (Dtype::Float8, _) => (row.fp8_tflops, "FP8"),
            (Dtype::Float64, _) => (None, "FP64"),
        };
        let nvidia = row.vendor == Vendor::Nvidia;
        GpuFigures {
            name: row.name.clone(),
            architecture: row.architecture.clone(),
            vendor: row.vendor.name(),
            compute_unit: if nvidia { "SM" } else { "CU" },
            compute_units: row.compute_units / row.gpus_per_package.max(1),
            warp: if nvidia { "warp" } else { "wavefront" },
            warp_size: row.warp_size,
            memory_bandwidth_gb_per_s: row.memory_bandwidth_gb_per_s / share,
            l2_cache_mb: row.l2_cache_mb / share,
            memory_gb: row.memory_gb / share,
            memory_type: row.memory_type.clone(),
            fp32_vector_tflops: row.fp32_vector_tflops / share,
            matrix_tflops: matrix_tflops.map(|tflops| tflops / share),
            matrix_precision,
            matrix_unit: if nvidia {
                "tensor cores"
            } else {
                "matrix cores"
            },
            devices_per_package: (row.gpus_per_package > 1).then_some(row.gpus_per_package),
        }
    }
}

/// What every template may use besides its request's context.
#[derive(Clone, Debug, Serialize)]
struct RunFacts {
    /// `noop`, `nvidia` or `rocm`.
    platform: String,
    simulated: bool,
    gpu: Option<GpuFigures>,
    dtype: &'static str,
    tolerance: String,
    problem: String,
}

pub struct Prompts {
    environment: Environment<'static>,
    facts: RunFacts,
}

impl Prompts {
    /// The shipped templates, each replaced by the file `overrides` names for it.
    pub fn new(
        overrides: &BTreeMap<String, PathBuf>,
        facts: &PromptFacts<'_>,
    ) -> Result<Self, PromptError> {
        let dtype = Dtype::parse(facts.dtype)
            .ok_or_else(|| PromptError::UnknownDtype(facts.dtype.into()))?;
        if let (Some(row), Some(vendor)) = (facts.gpu, facts.platform.vendor())
            && row.vendor != vendor
        {
            return Err(PromptError::VendorMismatch {
                row: row.name.clone(),
                row_vendor: match row.vendor {
                    Vendor::Nvidia => "NVIDIA",
                    Vendor::Rocm => "AMD",
                },
                platform: facts.platform,
            });
        }
        let mut environment = Environment::new();
        environment.set_undefined_behavior(minijinja::UndefinedBehavior::Strict);
        environment.set_trim_blocks(true);
        environment.set_lstrip_blocks(true);
        environment.add_filter("figure", figure);
        environment.add_filter("ms", milliseconds);
        for (name, shipped) in SHIPPED {
            let text = match overrides.get(*name) {
                Some(path) => {
                    crate::user_file::read_text(path, crate::user_file::MAX_SETTINGS_BYTES)
                        .map_err(|source| PromptError::Read {
                            name: name.to_string(),
                            source,
                        })?
                }
                None => shipped.to_string(),
            };
            environment
                .add_template_owned(name.to_string(), text)
                .map_err(|error| PromptError::Syntax {
                    name: name.to_string(),
                    message: error.to_string(),
                })?;
        }
        Ok(Prompts {
            environment,
            facts: RunFacts {
                platform: facts.platform.to_string(),
                simulated: facts.platform == Platform::Noop,
                gpu: facts.gpu.map(|row| GpuFigures::of(row, dtype)),
                dtype: dtype.name(),
                tolerance: facts.tolerance.to_string(),
                problem: facts.problem_source.trim_end().to_string(),
            },
        })
    }

    /// Renders the system template and `name` with the run's facts, the round and candidate
    /// every prompt is about, and the prompt's own `values`.
    fn render(
        &self,
        name: &str,
        round: u32,
        candidate: CandidateId,
        values: Value,
    ) -> Result<RenderedPrompt, String> {
        let about = context! { round => round, candidate => candidate.0 };
        let values = context! { ..about, ..values, ..Value::from_serialize(&self.facts) };
        let render = |template: &str| {
            self.environment
                .get_template(template)
                .and_then(|template| template.render(&values))
                .map_err(|error| format!("template `{template}`: {error}"))
        };
        Ok(RenderedPrompt {
            system: render("system")?,
            user: render(name)?,
        })
    }
}

/// A figure without trailing zeros, at most two decimals: `4800`, `989.5`, `0.33`.
fn figure(value: f64) -> String {
    let text = format!("{value:.2}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    match text {
        "-0" => "0".to_string(),
        _ => text.to_string(),
    }
}

fn milliseconds(value: f64) -> String {
    format!("{value:.4}")
}

/// The end of `text` when it is longer than `limit` characters, marked with an ellipsis.
fn tail(text: &str, limit: usize) -> String {
    let count = text.chars().count();
    if count <= limit {
        return text.to_string();
    }
    let skipped: usize = text.chars().take(count - limit).map(char::len_utf8).sum();
    format!("…{}", &text[skipped..])
}

fn bottleneck_value(bottleneck: &Option<AnalyzedBottleneck>) -> Value {
    Value::from_serialize(bottleneck)
}

/// The profile as the prompts state it: the verdict with its evidence, and on ROCm the
/// instruction mix under its own name (a mix, not a speed of light).
#[derive(Serialize)]
struct ProfileView {
    bottleneck: String,
    analysis: String,
    instruction_mix: Option<InstructionMix>,
}

fn profile_view(profile: &Option<ProfileSummary>) -> Option<ProfileView> {
    let profile = profile.as_ref()?;
    Some(ProfileView {
        bottleneck: profile.bottleneck.clone(),
        analysis: profile.analysis.clone(),
        instruction_mix: profile
            .details
            .as_ref()
            .and_then(|details| details.instruction_mix)
            .filter(InstructionMix::is_available),
    })
}

#[derive(Clone, Debug, PartialEq, Serialize)]
struct Metric {
    name: String,
    value: String,
}

/// One group of a profile's figures under the vendor's own names.
#[derive(Clone, Debug, PartialEq, Serialize)]
struct MetricSection {
    title: String,
    metrics: Vec<Metric>,
}

/// The sections of the ncu metrics kactors collects (`nvidia::NCU_METRICS`), with their titles,
/// in the order the analysis prompt shows them.
const NCU_SECTIONS: &[(MetricSectionKind, &str)] = &[
    (MetricSectionKind::Sol, "Speed of light and duration"),
    (MetricSectionKind::Memory, "Memory"),
    (
        MetricSectionKind::Occupancy,
        "Occupancy and launch configuration",
    ),
    (
        MetricSectionKind::Stalls,
        "Warp stalls (share of active warps per cycle)",
    ),
];

/// rocprofv3 counters by hardware block prefix, in the order the analysis prompt shows them.
const ROCM_COUNTER_BLOCKS: &[(&str, &str)] = &[
    (
        "SQ_",
        "Shader sequencer (SQ): waves, instructions and waits",
    ),
    ("TCP_", "Vector L1 cache (TCP)"),
    ("TCC_", "L2 cache (TCC)"),
    ("TA_", "Texture addresser (TA)"),
    ("TD_", "Texture data (TD)"),
    ("GRBM_", "Graphics register bus manager (GRBM)"),
];

/// The derived size counters, in KB of 1024 bytes.
const ROCM_SIZE_COUNTERS: &[&str] = &["FETCH_SIZE", "WRITE_SIZE"];

/// Figures by name, in name order; a figure that is not a finite number is not stated.
fn metrics_of(figures: &BTreeMap<String, f64>) -> Vec<Metric> {
    figures
        .iter()
        .filter(|(_, value)| value.is_finite())
        .map(|(name, value)| Metric {
            name: name.clone(),
            value: figure(*value),
        })
        .collect()
}

fn push_section(sections: &mut Vec<MetricSection>, title: &str, metrics: Vec<Metric>) {
    if !metrics.is_empty() {
        sections.push(MetricSection {
            title: title.to_string(),
            metrics,
        });
    }
}

/// An NVIDIA profile's figures: its `metrics`, under their ncu names, by the section
/// `NCU_METRICS` gives each; a name it does not list goes last, under "Other metrics".
fn ncu_sections(profile: &KernelProfile) -> Vec<MetricSection> {
    let metrics = metrics_of(&profile.metrics);
    let section_of = |name: &str| {
        NCU_METRICS
            .iter()
            .find(|metric| metric.name == name)
            .map(|metric| metric.section)
    };
    let mut sections = Vec::new();
    for (kind, title) in NCU_SECTIONS {
        let members = metrics
            .iter()
            .filter(|metric| section_of(&metric.name) == Some(*kind))
            .cloned()
            .collect();
        push_section(&mut sections, title, members);
    }
    let others = metrics
        .iter()
        .filter(|metric| section_of(&metric.name).is_none())
        .cloned()
        .collect();
    push_section(&mut sections, "Other metrics", others);
    sections
}

/// A ROCm profile's figures: rocprofv3 counters by hardware block, the size counters, then the
/// figures kactors derived from them. The instruction mix is stated apart, as a mix.
fn rocprof_sections(profile: &KernelProfile) -> Vec<MetricSection> {
    let counters = metrics_of(&profile.counters);
    let mut sections = Vec::new();
    let mut placed = vec![false; counters.len()];
    for (prefix, title) in ROCM_COUNTER_BLOCKS {
        let block = counters
            .iter()
            .enumerate()
            .filter(|(_, metric)| metric.name.starts_with(prefix))
            .map(|(index, metric)| {
                placed[index] = true;
                metric.clone()
            })
            .collect();
        push_section(&mut sections, title, block);
    }
    let sizes = counters
        .iter()
        .enumerate()
        .filter(|(_, metric)| ROCM_SIZE_COUNTERS.contains(&metric.name.as_str()))
        .map(|(index, metric)| {
            placed[index] = true;
            Metric {
                name: metric.name.clone(),
                value: format!("{} KB", metric.value),
            }
        })
        .collect();
    push_section(&mut sections, "Memory traffic (derived counters)", sizes);
    let others = counters
        .iter()
        .zip(&placed)
        .filter(|(_, placed)| !**placed)
        .map(|(metric, _)| metric.clone())
        .collect();
    push_section(&mut sections, "Other counters", others);
    push_section(
        &mut sections,
        "Derived by kactors from the counters",
        metrics_of(&profile.metrics),
    );
    sections
}

/// The profile's figures in the groups its vendor's profiler gives them; none without a
/// profile, or for a summary whose details could not be read back from an older journal.
fn metric_sections(profile: &Option<ProfileSummary>) -> Vec<MetricSection> {
    let Some(details) = profile
        .as_ref()
        .and_then(|profile| profile.details.as_ref())
    else {
        return Vec::new();
    };
    match details.vendor {
        Vendor::Nvidia => ncu_sections(details),
        Vendor::Rocm => rocprof_sections(details),
    }
}

#[derive(Serialize)]
struct LessonView {
    candidate: u64,
    parent: u64,
    bottleneck: Option<String>,
    verified: bool,
    time_ms: Option<f64>,
    reason: Option<String>,
    lesson: String,
}

fn lesson_view(lesson: &Lesson) -> LessonView {
    let (time_ms, reason) = outcome_parts(&lesson.outcome, MAX_LESSON_REASON_CHARS);
    LessonView {
        candidate: lesson.candidate.0,
        parent: lesson.parent.0,
        bottleneck: lesson.bottleneck.clone(),
        verified: time_ms.is_some(),
        time_ms,
        reason,
        lesson: lesson.lesson.clone(),
    }
}

fn outcome_parts(outcome: &AttemptOutcome, limit: usize) -> (Option<f64>, Option<String>) {
    match outcome {
        AttemptOutcome::Verified { time_ms } => (Some(*time_ms), None),
        AttemptOutcome::Failed { reason } => (None, Some(tail(reason, limit))),
    }
}

fn reference_values(reference: &ReferenceTimes) -> Value {
    context! {
        eager_ms => reference.eager_ms,
        compile_ms => reference.compile_ms,
    }
}

impl PromptBuilder for Prompts {
    fn optimization(&self, c: &ProposalContext) -> Result<RenderedPrompt, String> {
        let values = context! {
            proposal_index => c.proposal_index,
            proposals => c.proposals,
            parent => c.parent.0,
            parent_time_ms => c.parent_time_ms,
            best_time_ms => c.best_time_ms,
            initial_time_ms => c.initial_time_ms,
            reference => reference_values(&c.reference),
            profile => Value::from_serialize(profile_view(&c.profile)),
            bottleneck => bottleneck_value(&c.bottleneck),
            lessons => Value::from_serialize(c.recent_lessons.iter().map(lesson_view).collect::<Vec<_>>()),
            previous_error => c.previous_error.as_deref().map(|e| tail(e, MAX_ERROR_CHARS)),
            parent_source => c.parent_source.text().trim_end(),
        };
        self.render("optimization", c.round, c.candidate, values)
    }

    fn analysis(&self, c: &AnalysisContext) -> Result<RenderedPrompt, String> {
        let values = context! {
            time_ms => c.time_ms,
            reference => reference_values(&c.reference),
            num_bottlenecks => c.num_bottlenecks,
            profile => Value::from_serialize(profile_view(&c.profile)),
            metric_sections => Value::from_serialize(metric_sections(&c.profile)),
            source => c.source.text().trim_end(),
        };
        self.render("analysis", c.round, c.candidate, values)
    }

    fn refinement(&self, c: &RefinementContext) -> Result<RenderedPrompt, String> {
        let values = context! {
            parent => c.parent.0,
            attempt => c.attempt,
            max_refinements => c.max_refinements,
            error => tail(&c.error, MAX_ERROR_CHARS),
            bottleneck => bottleneck_value(&c.bottleneck),
            failed_source => c.failed_source.text().trim_end(),
        };
        self.render("refinement", c.round, c.candidate, values)
    }

    fn seed(&self, c: &SeedContext) -> Result<RenderedPrompt, String> {
        let attempts: Vec<Value> = c
            .attempts
            .iter()
            .map(|attempt| {
                context! {
                    source => attempt.source.text().trim_end(),
                    error => tail(&attempt.error, MAX_ERROR_CHARS),
                }
            })
            .collect();
        let values = context! {
            seed_index => c.seed_index,
            num_seeds => c.num_seeds,
            attempt => c.attempt,
            max_refinements => c.max_refinements,
            attempts => attempts,
        };
        let name = if c.attempt == 0 {
            "seed"
        } else {
            "seed_refinement"
        };
        self.render(name, 0, c.candidate, values)
    }

    fn reflexion(&self, c: &ReflexionContext) -> Result<RenderedPrompt, String> {
        let (time_ms, reason) = outcome_parts(&c.outcome, MAX_ERROR_CHARS);
        let values = context! {
            parent => c.parent.0,
            parent_time_ms => c.parent_time_ms,
            verified => time_ms.is_some(),
            time_ms => time_ms,
            reason => reason,
            bottleneck => bottleneck_value(&c.bottleneck),
            source => c.source.text().trim_end(),
        };
        self.render("reflexion", c.round, c.candidate, values)
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use actors::model::KernelSource;

    use super::*;
    use crate::devices::spec_by_name;
    use crate::nvidia::{parse_ncu_csv, summarize};
    use crate::profiling::RooflineThresholds;
    use crate::rocm::{KernelsUnderTest, RocmPeaks, RocmProfile};

    fn fixture(path: &str) -> String {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(path);
        std::fs::read_to_string(&path)
            .unwrap_or_else(|error| panic!("reading {}: {error}", path.display()))
    }

    fn kernel() -> KernelSource {
        KernelSource::new(fixture("prompts/kernel.py"))
    }

    fn problem() -> String {
        fixture("prompts/problem.py")
    }

    fn prompts(platform: Platform, gpu: Option<&str>) -> Prompts {
        let problem = problem();
        let facts = PromptFacts {
            platform,
            gpu: gpu.map(|name| spec_by_name(name).expect("a row of the spec table")),
            dtype: "torch.bfloat16",
            tolerance: "atol=rtol=1e-2 (bfloat16)",
            problem_source: &problem,
        };
        Prompts::new(&BTreeMap::new(), &facts).unwrap()
    }

    /// A profile summary as the platforms' profilers give it: the typed profile, and the
    /// roofline sentence their analysis starts with.
    fn summary(profiler: &str, details: KernelProfile, evidence: &str) -> ProfileSummary {
        ProfileSummary {
            bottleneck: details.roofline.bottleneck.name().to_string(),
            analysis: format!(
                "{profiler} profile of the measured call (kernels {}; {:.4} ms of device time): \
                 {evidence}",
                details.kernels.join(", "),
                details.duration_ms,
            ),
            duration_ms: Some(details.duration_ms),
            at_roofline: details.roofline.at_roofline,
            details: Some(details),
        }
    }

    /// The matmul of the H200 capture, as the NVIDIA profiler makes it: every ncu metric under
    /// its own name.
    fn nvidia_profile() -> ProfileSummary {
        let report = parse_ncu_csv(&fixture("ncu-2025.3.1-h200/measured_call_raw.log.csv"))
            .expect("the capture parses");
        let profile = summarize(&report, &["matmul_kernel".to_string()]).expect("a profile");
        summary(
            "Nsight Compute",
            profile.kernel_profile(),
            &profile.verdict.evidence,
        )
    }

    /// A bf16 matmul on an MI300X, made from counters the way the ROCm profiler does.
    fn rocm_profile() -> ProfileSummary {
        let counters: BTreeMap<String, f64> = [
            ("SQ_WAVES", 16384.0),
            ("SQ_INSTS_VALU", 9.1e8),
            ("SQ_INSTS_SALU", 1.2e8),
            ("SQ_INSTS_VMEM_RD", 6.4e7),
            ("SQ_INSTS_VMEM_WR", 1.6e6),
            ("SQ_INSTS_LDS", 2.6e8),
            ("SQ_WAIT_INST_ANY", 3.3e9),
            ("SQ_INSTS_VALU_MFMA_MOPS_BF16", 2.68e8),
            ("TCC_HIT_sum", 5.1e7),
            ("TCC_MISS_sum", 1.3e7),
            ("TCC_EA0_RDREQ_sum", 1.4e7),
            ("FETCH_SIZE", 917504.0),
            ("WRITE_SIZE", 32768.0),
            ("GRBM_GUI_ACTIVE", 1.9e6),
        ]
        .into_iter()
        .map(|(name, value)| (name.to_string(), value))
        .collect();
        let row = spec_by_name("AMD Instinct MI300X").unwrap();
        let peaks = RocmPeaks {
            peak_bandwidth_gbps: row.memory_bandwidth_gb_per_s,
            peak_tflops_by_dtype: BTreeMap::from([("bf16".to_string(), row.bf16_tflops)]),
        };
        let kernels = KernelsUnderTest::new(["matmul_kernel"]).unwrap();
        let profile = RocmProfile::from_measurements(
            &kernels,
            0.42,
            counters,
            &peaks,
            "bf16",
            RooflineThresholds::ROCM,
        );
        let (details, evidence) = profile.judged().expect("a roofline");
        summary("rocprofv3", details, evidence)
    }

    fn bottleneck(title: &str) -> AnalyzedBottleneck {
        AnalyzedBottleneck {
            title: title.into(),
            causes: vec!["each program reloads its B tiles from HBM".into()],
            fixes: vec![
                "group programs along M so B tiles stay in L2".into(),
                "autotune BLOCK_M, BLOCK_N and num_stages".into(),
            ],
        }
    }

    fn lessons() -> Vec<Lesson> {
        vec![
            Lesson {
                candidate: CandidateId(3),
                parent: CandidateId(0),
                bottleneck: Some("Low occupancy".into()),
                outcome: AttemptOutcome::Verified { time_ms: 0.61 },
                lesson: "try: num_warps=8 with 128x128 tiles".into(),
            },
            Lesson {
                candidate: CandidateId(4),
                parent: CandidateId(0),
                bottleneck: None,
                outcome: AttemptOutcome::Failed {
                    reason: "verification failed: max abs error 3.2 > atol".into(),
                },
                lesson: "avoid: accumulating in bfloat16".into(),
            },
        ]
    }

    fn proposal(profile: Option<ProfileSummary>, rich: bool) -> ProposalContext {
        ProposalContext {
            candidate: CandidateId(7),
            round: 2,
            parent: CandidateId(3),
            parent_source: kernel(),
            parent_time_ms: 0.61,
            best_time_ms: 0.61,
            initial_time_ms: 0.84,
            reference: if rich {
                ReferenceTimes {
                    eager_ms: Some(0.52),
                    compile_ms: Some(0.49),
                }
            } else {
                ReferenceTimes::default()
            },
            proposal_index: 1,
            proposals: 2,
            profile,
            bottleneck: rich.then(|| bottleneck("B tiles reloaded from HBM")),
            recent_lessons: if rich { lessons() } else { Vec::new() },
            previous_error: rich.then(|| "verification failed: max abs error 3.2 > atol".into()),
        }
    }

    fn analysis(profile: Option<ProfileSummary>) -> AnalysisContext {
        AnalysisContext {
            candidate: CandidateId(3),
            round: 2,
            source: kernel(),
            time_ms: 0.61,
            reference: ReferenceTimes {
                eager_ms: Some(0.52),
                compile_ms: None,
            },
            profile,
            num_bottlenecks: 2,
        }
    }

    fn refinement() -> RefinementContext {
        RefinementContext {
            candidate: CandidateId(7),
            round: 2,
            parent: CandidateId(3),
            attempt: 1,
            max_refinements: 3,
            failed_source: kernel(),
            error: "verification failed: output has NaN at [0, 17]".into(),
            bottleneck: Some(bottleneck("B tiles reloaded from HBM")),
        }
    }

    fn reflexion(verified: bool) -> ReflexionContext {
        ReflexionContext {
            candidate: CandidateId(7),
            round: 2,
            parent: CandidateId(3),
            parent_time_ms: 0.61,
            source: kernel(),
            outcome: if verified {
                AttemptOutcome::Verified { time_ms: 0.55 }
            } else {
                AttemptOutcome::Failed {
                    reason: "evaluator crashed: an illegal memory access was encountered".into(),
                }
            },
            bottleneck: Some(bottleneck("B tiles reloaded from HBM")),
        }
    }

    /// Compares `actual` with the snapshot tests/fixtures/prompts/<name>; `UPDATE_SNAPSHOTS=1`
    /// writes it instead. A mismatch names the first differing line and leaves the rendering
    /// beside the snapshot as <name>.new, to diff.
    fn check_snapshot(name: &str, actual: &str) {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/prompts")
            .join(name);
        if std::env::var_os("UPDATE_SNAPSHOTS").is_some_and(|value| value == "1") {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, actual).unwrap();
            return;
        }
        let expected = std::fs::read_to_string(&path).unwrap_or_else(|error| {
            panic!(
                "no snapshot {} ({error}): run with UPDATE_SNAPSHOTS=1 to write it",
                path.display()
            )
        });
        if expected == actual {
            return;
        }
        let new = path.with_extension("md.new");
        std::fs::write(&new, actual).unwrap();
        let (line, want, got) = expected
            .lines()
            .chain(std::iter::repeat("<end of text>"))
            .zip(actual.lines().chain(std::iter::repeat("<end of text>")))
            .enumerate()
            .find(|(_, (want, got))| want != got)
            .map(|(index, (want, got))| (index + 1, want, got))
            .unwrap_or((0, "", "(only the line endings differ)"));
        panic!(
            "prompt snapshot {} differs at line {line}:\n  snapshot: {want}\n  rendered: {got}\n\
             the rendering is in {}: `diff {} {}`; run with UPDATE_SNAPSHOTS=1 to accept it",
            path.display(),
            new.display(),
            path.display(),
            new.display()
        );
    }

    fn check_platform(folder: &str, prompts: &Prompts, profile: Option<ProfileSummary>) {
        let rich = profile.is_some();
        let rendered = [
            (
                "optimization",
                prompts.optimization(&proposal(profile.clone(), rich)),
            ),
            ("analysis", prompts.analysis(&analysis(profile))),
            ("refinement", prompts.refinement(&refinement())),
            ("reflexion", prompts.reflexion(&reflexion(rich))),
        ];
        let mut system = None;
        for (name, prompt) in rendered {
            let prompt = prompt.unwrap_or_else(|error| panic!("{folder}/{name}: {error}"));
            check_snapshot(&format!("{folder}/{name}.md"), &prompt.user);
            let first = system.get_or_insert_with(|| prompt.system.clone());
            assert_eq!(*first, prompt.system, "one system prompt for every request");
        }
        check_snapshot(&format!("{folder}/system.md"), &system.unwrap());
    }

    #[test]
    fn nvidia_prompts_match_their_snapshots() {
        let prompts = prompts(Platform::Vendor(Vendor::Nvidia), Some("NVIDIA H200"));
        check_platform("nvidia", &prompts, Some(nvidia_profile()));
    }

    #[test]
    fn rocm_prompts_match_their_snapshots() {
        let prompts = prompts(Platform::Vendor(Vendor::Rocm), Some("AMD Instinct MI300X"));
        check_platform("rocm", &prompts, Some(rocm_profile()));
    }

    #[test]
    fn noop_prompts_match_their_snapshots() {
        check_platform("noop", &prompts(Platform::Noop, None), None);
    }

    #[test]
    fn the_gpu_figures_come_from_the_spec_row() {
        let mut row = spec_by_name("NVIDIA H200").unwrap().clone();
        row.memory_bandwidth_gb_per_s = 1234.5;
        row.bf16_tflops = 777.0;
        row.compute_units = 99;
        let problem = problem();
        let facts = PromptFacts {
            platform: Platform::Vendor(Vendor::Nvidia),
            gpu: Some(&row),
            dtype: "bf16",
            tolerance: "atol=rtol=1e-2 (bfloat16)",
            problem_source: &problem,
        };
        let user = Prompts::new(&BTreeMap::new(), &facts)
            .unwrap()
            .optimization(&proposal(None, false))
            .unwrap()
            .user;
        assert!(
            user.contains("Peak memory bandwidth: 1234.5 GB/s"),
            "{user}"
        );
        assert!(
            user.contains("777 TFLOPS dense on the tensor cores (BF16)"),
            "{user}"
        );
        assert!(user.contains("99 SMs"), "{user}");
        assert!(user.contains("the NVIDIA H200 has 99 SMs"), "{user}");
        assert!(!user.contains("4800"), "{user}");
    }

    #[test]
    fn a_device_of_a_two_die_package_gets_half_of_its_figures() {
        let row = spec_by_name("AMD Instinct MI250X").unwrap();
        let figures = GpuFigures::of(row, Dtype::Float16);
        assert_eq!(figures.devices_per_package, Some(2));
        assert_eq!(figures.compute_units, row.compute_units / 2);
        assert_eq!(
            figures.memory_bandwidth_gb_per_s,
            row.memory_bandwidth_gb_per_s / 2.0
        );
        assert_eq!(figures.matrix_tflops, Some(row.fp16_tflops / 2.0));
        assert_eq!((figures.warp, figures.warp_size), ("wavefront", 64));
    }

    #[test]
    fn each_dtype_takes_its_own_peak() {
        let h200 = spec_by_name("NVIDIA H200").unwrap();
        let check = |dtype: &str, expected: (Option<f64>, &str)| {
            let figures = GpuFigures::of(h200, Dtype::parse(dtype).unwrap());
            assert_eq!(
                (figures.matrix_tflops, figures.matrix_precision),
                expected,
                "{dtype}"
            );
        };
        check("torch.bfloat16", (Some(h200.bf16_tflops), "BF16"));
        check("half", (Some(h200.fp16_tflops), "FP16"));
        check("float32", (Some(h200.fp32_matrix_tflops), "TF32"));
        check("float8_e4m3fn", (h200.fp8_tflops, "FP8"));
        check("fp64", (None, "FP64"));
    }

    #[test]
    fn facts_that_cannot_be_true_are_refused() {
        let problem = problem();
        let facts = |platform, gpu, dtype| PromptFacts {
            platform,
            gpu,
            dtype,
            tolerance: "atol=rtol=1e-2 (bfloat16)",
            problem_source: &problem,
        };
        let error = Prompts::new(&BTreeMap::new(), &facts(Platform::Noop, None, "int8"))
            .err()
            .unwrap();
        assert!(
            error.to_string().starts_with("unknown dtype `int8`"),
            "{error}"
        );
        let mi300x = spec_by_name("AMD Instinct MI300X");
        let error = Prompts::new(
            &BTreeMap::new(),
            &facts(Platform::Vendor(Vendor::Nvidia), mi300x, "bf16"),
        )
        .err()
        .unwrap();
        assert_eq!(
            error.to_string(),
            "the GPU spec row `AMD Instinct MI300X` is for AMD GPUs, but the run's platform is nvidia"
        );
    }

    #[test]
    fn ncu_metrics_are_grouped_by_section_under_their_names() {
        let sections = metric_sections(&Some(nvidia_profile()));
        let titles: Vec<&str> = sections.iter().map(|s| s.title.as_str()).collect();
        assert_eq!(
            titles,
            vec![
                "Speed of light and duration",
                "Memory",
                "Occupancy and launch configuration",
                "Warp stalls (share of active warps per cycle)",
            ]
        );
        let listed: usize = sections.iter().map(|s| s.metrics.len()).sum();
        assert_eq!(listed, NCU_METRICS.len(), "every collected metric, once");
        assert!(sections[0].metrics.iter().any(|m| m.name
            == "sm__throughput.avg.pct_of_peak_sustained_elapsed"
            && m.value == "75.71"));
    }

    #[test]
    fn an_ncu_metric_outside_the_collected_list_is_listed_apart() {
        let mut profile = nvidia_profile();
        profile.details.as_mut().expect("a profile").metrics = BTreeMap::from([
            ("dram__bytes_read.sum".to_string(), 1024.0),
            ("smsp__inst_executed.sum".to_string(), 5.0e6),
        ]);
        let sections = metric_sections(&Some(profile));
        assert_eq!(
            sections,
            vec![
                MetricSection {
                    title: "Memory".into(),
                    metrics: vec![Metric {
                        name: "dram__bytes_read.sum".into(),
                        value: "1024".into()
                    }],
                },
                MetricSection {
                    title: "Other metrics".into(),
                    metrics: vec![Metric {
                        name: "smsp__inst_executed.sum".into(),
                        value: "5000000".into()
                    }],
                },
            ]
        );
    }

    #[test]
    fn rocprof_counters_are_grouped_by_hardware_block() {
        let sections = metric_sections(&Some(rocm_profile()));
        let names = |title: &str| -> Vec<String> {
            sections
                .iter()
                .find(|s| s.title == title)
                .unwrap_or_else(|| panic!("no section {title}"))
                .metrics
                .iter()
                .map(|m| format!("{}={}", m.name, m.value))
                .collect()
        };
        assert_eq!(
            names("L2 cache (TCC)"),
            vec![
                "TCC_EA0_RDREQ_sum=14000000",
                "TCC_HIT_sum=51000000",
                "TCC_MISS_sum=13000000"
            ]
        );
        assert_eq!(
            names("Memory traffic (derived counters)"),
            vec!["FETCH_SIZE=917504 KB", "WRITE_SIZE=32768 KB"]
        );
        assert_eq!(
            names("Graphics register bus manager (GRBM)"),
            vec!["GRBM_GUI_ACTIVE=1900000"]
        );
        assert!(
            names("Derived by kactors from the counters")
                .iter()
                .any(|m| m.starts_with("l2_hit_pct="))
        );
    }

    #[test]
    fn a_profile_without_readable_details_states_its_verdict_and_no_figures() {
        let mut profile = rocm_profile();
        profile.details = None;
        assert_eq!(metric_sections(&Some(profile.clone())), vec![]);
        let view = profile_view(&Some(profile)).expect("a view of the verdict");
        assert_eq!(view.bottleneck, "memory");
        assert!(view.instruction_mix.is_none());
        assert_eq!(metric_sections(&None), vec![]);
    }

    #[test]
    fn figures_that_are_not_numbers_are_not_stated() {
        let mut profile = nvidia_profile();
        profile.details.as_mut().expect("a profile").metrics = BTreeMap::from([
            ("dram__bytes_read.sum".to_string(), f64::NAN),
            ("lts__t_sector_hit_rate.pct".to_string(), 42.5),
        ]);
        let sections = metric_sections(&Some(profile));
        let stated: Vec<&str> = sections
            .iter()
            .flat_map(|section| section.metrics.iter().map(|metric| metric.name.as_str()))
            .collect();
        assert_eq!(stated, ["lts__t_sector_hit_rate.pct"]);
    }

    #[test]
    fn figures_and_errors_are_stated_compactly() {
        assert_eq!(figure(4800.0), "4800");
        assert_eq!(figure(989.5), "989.5");
        assert_eq!(figure(1.0 / 3.0), "0.33");
        assert_eq!(figure(-0.001), "0");
        assert_eq!(tail("short", 10), "short");
        assert_eq!(tail("Traceback: ... IndexError", 10), "…IndexError");
    }

    /// Prompts for a simulated run whose `template` is replaced by a file holding `text`.
    fn prompts_with_template_file(template: &str, text: &str) -> Prompts {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(format!("{template}.j2"));
        std::fs::write(&path, text).unwrap();
        let overrides = BTreeMap::from([(template.to_string(), path)]);
        let problem = problem();
        let facts = PromptFacts {
            platform: Platform::Noop,
            gpu: None,
            dtype: "bf16",
            tolerance: "atol=rtol=1e-2 (bfloat16)",
            problem_source: &problem,
        };
        Prompts::new(&overrides, &facts).unwrap()
    }

    #[test]
    fn a_template_file_replaces_the_shipped_one() {
        let prompts = prompts_with_template_file(
            "optimization",
            "parent {{ parent }} at {{ parent_time_ms|ms }} on {{ platform }}",
        );
        assert_eq!(
            prompts.optimization(&proposal(None, false)).unwrap().user,
            "parent 3 at 0.6100 on noop"
        );
    }

    #[test]
    fn an_unknown_variable_in_a_template_is_an_error_not_an_empty_string() {
        let error = prompts_with_template_file("reflexion", "{{ not_a_variable }}")
            .reflexion(&reflexion(true))
            .unwrap_err();
        assert!(error.contains("template `reflexion`"), "{error}");
    }
}
