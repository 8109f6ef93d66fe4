//! The counters kactors collects on AMD Instinct GPUs, grouped one `--pmc` group per
//! rocprofv3 invocation, and the device's counter list they are checked against.

use std::collections::BTreeSet;

pub(crate) const SQ_WAVES: &str = "SQ_WAVES";
pub(crate) const SQ_INSTS_VALU: &str = "SQ_INSTS_VALU";
pub(crate) const SQ_INSTS_SALU: &str = "SQ_INSTS_SALU";
pub(crate) const SQ_INSTS_VMEM_RD: &str = "SQ_INSTS_VMEM_RD";
pub(crate) const SQ_INSTS_VMEM_WR: &str = "SQ_INSTS_VMEM_WR";
pub(crate) const SQ_INSTS_LDS: &str = "SQ_INSTS_LDS";
pub(crate) const SQ_WAIT_INST_ANY: &str = "SQ_WAIT_INST_ANY";
pub(crate) const TCC_HIT_SUM: &str = "TCC_HIT_sum";
pub(crate) const TCC_MISS_SUM: &str = "TCC_MISS_sum";
/// Derived counters, in KB (1024 bytes) [profilers.md 1.6].
pub(crate) const FETCH_SIZE: &str = "FETCH_SIZE";
pub(crate) const WRITE_SIZE: &str = "WRITE_SIZE";
pub(crate) const MFMA_MOPS_F16: &str = "SQ_INSTS_VALU_MFMA_MOPS_F16";
pub(crate) const MFMA_MOPS_BF16: &str = "SQ_INSTS_VALU_MFMA_MOPS_BF16";
pub(crate) const MFMA_MOPS_F32: &str = "SQ_INSTS_VALU_MFMA_MOPS_F32";
pub(crate) const MFMA_MOPS_F64: &str = "SQ_INSTS_VALU_MFMA_MOPS_F64";
pub(crate) const SQ_VALU_MFMA_BUSY_CYCLES: &str = "SQ_VALU_MFMA_BUSY_CYCLES";
pub(crate) const SQ_INSTS_MFMA: &str = "SQ_INSTS_MFMA";

/// The compute-work counters, requested only where the device lists them. All are SQ events;
/// six fit the eight SQ counter registers of gfx9 in one pass [INFERRED from profilers.md 1.6,
/// not run on hardware].
const COMPUTE_WORK_COUNTERS: [&str; 6] = [
    MFMA_MOPS_F16,
    MFMA_MOPS_BF16,
    MFMA_MOPS_F32,
    MFMA_MOPS_F64,
    SQ_VALU_MFMA_BUSY_CYCLES,
    SQ_INSTS_MFMA,
];

/// The counters of one `--pmc` group: collected together in one rocprofv3 invocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CounterGroup {
    counters: Vec<String>,
}

impl CounterGroup {
    /// # Panics
    /// On an empty group: rocprofv3 rejects `--pmc` without counters, so an empty group is a
    /// bug in the caller, not a runtime condition.
    pub fn new<S: Into<String>>(counters: impl IntoIterator<Item = S>) -> Self {
        let counters: Vec<String> = counters.into_iter().map(Into::into).collect();
        assert!(!counters.is_empty(), "a counter group needs a counter");
        Self { counters }
    }

    pub fn counters(&self) -> &[String] {
        &self.counters
    }
}

/// The two spellings of the L2-to-memory (EA) request counters [profilers.md 1.6].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EaNaming {
    /// `TCC_EA0_RDREQ_sum`, `TCC_EA0_WRREQ_sum`: gfx940/941/942 and gfx950 (MI300, MI350).
    Ea0,
    /// `TCC_EA_RDREQ_sum`, `TCC_EA_WRREQ_sum`: gfx90a and older gfx9 (MI200, MI100).
    Ea,
}

impl EaNaming {
    pub fn read_requests(self) -> &'static str {
        match self {
            Self::Ea0 => "TCC_EA0_RDREQ_sum",
            Self::Ea => "TCC_EA_RDREQ_sum",
        }
    }

    pub fn write_requests(self) -> &'static str {
        match self {
            Self::Ea0 => "TCC_EA0_WRREQ_sum",
            Self::Ea => "TCC_EA_WRREQ_sum",
        }
    }

    fn other(self) -> Self {
        match self {
            Self::Ea0 => Self::Ea,
            Self::Ea => Self::Ea0,
        }
    }
}

/// The EA spellings to try, in order: the one of the device's architecture, then the other as
/// the retry when the first pass exits non-zero or without counter rows.
///
/// `gfx_target` is TARGET_GRAPHICS_VERSION from device discovery (`gfx942`; a feature suffix
/// such as `gfx90a:sramecc+:xnack-` is ignored). An unknown or absent target tries `TCC_EA0_*`
/// first, as on the MI300/MI350 parts kactors is mostly run on, then `TCC_EA_*`.
pub fn ea_name_attempts(gfx_target: Option<&str>) -> Vec<EaNaming> {
    let first = gfx_target.and_then(ea_naming_of_target);
    match first {
        Some(naming) => vec![naming, naming.other()],
        None => vec![EaNaming::Ea0, EaNaming::Ea],
    }
}

fn ea_naming_of_target(gfx_target: &str) -> Option<EaNaming> {
    let target = gfx_target
        .split(':')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    let generation = target.strip_prefix("gfx9")?;
    if generation.len() != 2 {
        return None;
    }
    if generation.starts_with('4') || generation.starts_with('5') {
        Some(EaNaming::Ea0)
    } else if generation.starts_with('0') {
        Some(EaNaming::Ea)
    } else {
        None
    }
}

/// One counter pass of a profile: its group, and for the EA passes the group in the other
/// spelling as the retry. Only the last attempt's failure fails the pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CounterPass {
    attempts: Vec<CounterGroup>,
}

impl CounterPass {
    fn single(group: CounterGroup) -> Self {
        Self {
            attempts: vec![group],
        }
    }

    /// Never empty; run them in order until one succeeds.
    pub fn attempts(&self) -> &[CounterGroup] {
        &self.attempts
    }
}

/// The counter passes of one profile, each group alone (FETCH_SIZE and WRITE_SIZE share TCC
/// hardware on gfx942/gfx950 and cannot go together). `available` is what `rocprofv3 -L`
/// listed (see [`parse_available_counters`]); the compute-work pass is added only with the
/// counters it lists, so a device without them gets no such pass instead of a failing one.
pub fn counter_pass_plan(
    gfx_target: Option<&str>,
    available: &BTreeSet<String>,
) -> Vec<CounterPass> {
    let ea_attempts = ea_name_attempts(gfx_target);
    let mut passes = vec![
        CounterPass::single(CounterGroup::new([
            SQ_WAVES,
            SQ_INSTS_VALU,
            SQ_INSTS_SALU,
            SQ_INSTS_VMEM_RD,
            SQ_INSTS_VMEM_WR,
            SQ_INSTS_LDS,
            SQ_WAIT_INST_ANY,
        ])),
        CounterPass::single(CounterGroup::new([TCC_HIT_SUM, TCC_MISS_SUM])),
        CounterPass {
            attempts: ea_attempts
                .iter()
                .map(|naming| CounterGroup::new([naming.read_requests()]))
                .collect(),
        },
        CounterPass {
            attempts: ea_attempts
                .iter()
                .map(|naming| CounterGroup::new([naming.write_requests()]))
                .collect(),
        },
        CounterPass::single(CounterGroup::new([FETCH_SIZE])),
        CounterPass::single(CounterGroup::new([WRITE_SIZE])),
    ];
    let compute_work: Vec<&str> = COMPUTE_WORK_COUNTERS
        .into_iter()
        .filter(|name| available.contains(*name))
        .collect();
    if !compute_work.is_empty() {
        passes.push(CounterPass::single(CounterGroup::new(compute_work)));
    }
    passes
}

/// Counter names from the output of `rocprofv3 -L`, whose layout depends on the release.
/// Recognised (and the only assumption made about the text):
/// - 7.0 and later (`rocprofv3-avail info --pmc`): a `Counter_Name <spaces>:<tab>NAME` line
///   per counter;
/// - 6.x (`--list-metrics`, printed by the tool library): a `gpu-agentN:<tab>NAME` line per
///   counter;
/// - `rocprofv3-avail list --pmc`: a `PMC <spaces>:` line followed by lines of names separated
///   by spaces, up to the next line with a `:`.
///
/// The counters of every GPU listed are merged. Anything else (descriptions, expressions,
/// agent properties) is ignored, so unknown text yields fewer names, never invented ones.
pub fn parse_available_counters(list_output: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut in_name_grid = false;
    for line in list_output.lines() {
        let Some((key, value)) = line.split_once(':') else {
            if in_name_grid {
                names.extend(
                    line.split_whitespace()
                        .filter(|token| is_counter_name(token))
                        .map(str::to_owned),
                );
            }
            continue;
        };
        let key = key.trim();
        let value = value.trim();
        in_name_grid = key == "PMC" && value.is_empty();
        let names_a_counter = key == "Counter_Name"
            || key
                .strip_prefix("gpu-agent")
                .is_some_and(|id| id.chars().all(|c| c.is_ascii_digit()));
        if names_a_counter && is_counter_name(value) {
            names.insert(value.to_owned());
        }
    }
    names
}

fn is_counter_name(token: &str) -> bool {
    token.starts_with(|c: char| c.is_ascii_alphabetic())
        && token.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `rocprofv3 -L` on ROCm 7.x: `rocprofv3-avail info --pmc` prints each counter with
    /// `{:20}:\t{}` lines (rocprofv3/avail.py).
    const LIST_AVAIL_7X: &str = "GPU:0
Name:gfx942
Counter_Name        :\tSQ_WAVES
Description         :\tCount number of waves sent to SQs. (per-simd, emulated, global)
Block               :\tSQ
Dimensions          :\tDIMENSION_INSTANCE[0:0] DIMENSION_SHADER_ENGINE[0:31]


Counter_Name        :\tSQ_INSTS_VALU_MFMA_MOPS_BF16
Description         :\tNumber of VALU matrix with the performed math operation being BF16 in the unit of 512
Block               :\tSQ
Dimensions          :\tDIMENSION_INSTANCE[0:0] DIMENSION_SHADER_ENGINE[0:31]


Counter_Name        :\tFETCH_SIZE
Description         :\tThe total kilobytes fetched from the video memory.
Expression          :\t(TCC_BUBBLE_sum*128+(TCC_EA0_RDREQ_sum-TCC_BUBBLE_sum-TCC_EA0_RDREQ_32B_sum)*64)/1024
Dimensions          :\tDIMENSION_INSTANCE[0:0]


";

    /// `rocprofv3 -L` on ROCm 6.x (tool.cpp `list_metrics`).
    const LIST_METRICS_6X: &str = "gpu-agent1:\tSQ_WAVES
Description:\tCount number of waves sent to SQs.
Block:\tSQ
Dimensions:\tDIMENSION_INSTANCE[0:0]\tDIMENSION_SHADER_ENGINE[0:31]

gpu-agent1:\tSQ_INSTS_MFMA
Description: Number of MFMA instructions
Expression: SQ_INSTS_VALU_MFMA_I8+SQ_INSTS_VALU_MFMA_F16
Dimensions: DIMENSION_INSTANCE[0:0]

";

    /// `rocprofv3-avail list --pmc`.
    const AVAIL_LIST_GRID: &str = "GPU                           :\t0
Name                          :\tgfx90a
PMC                           :

SQ_WAVES                      SQ_INSTS_VALU                 TCC_EA_RDREQ_sum
SQ_VALU_MFMA_BUSY_CYCLES
GPU                           :\t1
";

    fn names(list: &[&str]) -> BTreeSet<String> {
        list.iter().map(|name| (*name).to_owned()).collect()
    }

    #[test]
    fn counters_from_the_7x_listing() {
        assert_eq!(
            parse_available_counters(LIST_AVAIL_7X),
            names(&["FETCH_SIZE", "SQ_INSTS_VALU_MFMA_MOPS_BF16", "SQ_WAVES"])
        );
    }

    #[test]
    fn counters_from_the_6x_listing() {
        assert_eq!(
            parse_available_counters(LIST_METRICS_6X),
            names(&["SQ_INSTS_MFMA", "SQ_WAVES"])
        );
    }

    #[test]
    fn counters_from_the_avail_grid() {
        assert_eq!(
            parse_available_counters(AVAIL_LIST_GRID),
            names(&[
                "SQ_INSTS_VALU",
                "SQ_VALU_MFMA_BUSY_CYCLES",
                "SQ_WAVES",
                "TCC_EA_RDREQ_sum"
            ])
        );
    }

    #[test]
    fn unknown_text_yields_no_counters() {
        assert!(parse_available_counters("Fatal error: no GPU agents\n").is_empty());
        assert!(parse_available_counters("").is_empty());
    }

    #[test]
    fn ea_name_by_architecture_with_the_other_as_retry() {
        use EaNaming::{Ea, Ea0};
        let check = |target: Option<&str>, expected: [EaNaming; 2]| {
            assert_eq!(ea_name_attempts(target), expected, "{target:?}");
        };
        check(Some("gfx942"), [Ea0, Ea]);
        check(Some("gfx950"), [Ea0, Ea]);
        check(Some("gfx940"), [Ea0, Ea]);
        check(Some("gfx90a"), [Ea, Ea0]);
        check(Some("gfx90a:sramecc+:xnack-"), [Ea, Ea0]);
        check(Some("gfx908"), [Ea, Ea0]);
        check(Some("GFX906"), [Ea, Ea0]);
        check(Some("gfx1100"), [Ea0, Ea]);
        check(Some(""), [Ea0, Ea]);
        check(None, [Ea0, Ea]);
    }

    fn plan_groups(plan: &[CounterPass]) -> Vec<Vec<Vec<String>>> {
        plan.iter()
            .map(|pass| {
                pass.attempts()
                    .iter()
                    .map(|group| group.counters().to_vec())
                    .collect()
            })
            .collect()
    }

    #[test]
    fn plan_on_gfx90a_without_compute_counters() {
        let plan = counter_pass_plan(Some("gfx90a"), &BTreeSet::new());
        let groups = plan_groups(&plan);
        assert_eq!(groups.len(), 6);
        assert_eq!(
            groups[0][0],
            [
                "SQ_WAVES",
                "SQ_INSTS_VALU",
                "SQ_INSTS_SALU",
                "SQ_INSTS_VMEM_RD",
                "SQ_INSTS_VMEM_WR",
                "SQ_INSTS_LDS",
                "SQ_WAIT_INST_ANY"
            ]
        );
        assert_eq!(groups[1], [["TCC_HIT_sum", "TCC_MISS_sum"]]);
        assert_eq!(groups[2], [["TCC_EA_RDREQ_sum"], ["TCC_EA0_RDREQ_sum"]]);
        assert_eq!(groups[3], [["TCC_EA_WRREQ_sum"], ["TCC_EA0_WRREQ_sum"]]);
        assert_eq!(groups[4], [["FETCH_SIZE"]]);
        assert_eq!(groups[5], [["WRITE_SIZE"]]);
    }

    #[test]
    fn plan_adds_only_the_listed_compute_counters() {
        let available = parse_available_counters(LIST_AVAIL_7X);
        let plan = counter_pass_plan(Some("gfx942"), &available);
        let groups = plan_groups(&plan);
        assert_eq!(groups.len(), 7);
        assert_eq!(groups[2], [["TCC_EA0_RDREQ_sum"], ["TCC_EA_RDREQ_sum"]]);
        assert_eq!(groups[6], [["SQ_INSTS_VALU_MFMA_MOPS_BF16"]]);
    }
}
