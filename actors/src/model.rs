//! Plain data shared by the actors and the adapters: devices, candidates, verdicts, timings.
//! Nothing here does I/O.

use std::fmt;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The GPU vendor whose devices, tools and profiler a run uses. The noop platform has none.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Vendor {
    Nvidia,
    Rocm,
}

impl Vendor {
    /// The word configurations, the journal and the JSON output use: `nvidia` or `rocm`.
    pub fn name(self) -> &'static str {
        match self {
            Vendor::Nvidia => "nvidia",
            Vendor::Rocm => "rocm",
        }
    }
}

impl fmt::Display for Vendor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A device a GpuWorker is pinned to: an nvidia-smi index on NVIDIA, a HIP id on AMD, a simulated
/// slot on the noop platform; under the Slurm launcher a dense index over the allocation's
/// devices, which `run_started`'s device table maps to a node and Slurm's index there.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct DeviceId(pub u32);

impl fmt::Display for DeviceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Candidates are numbered over the whole run: 0 is the initial kernel, proposals count from 1
/// in order of parent, then proposal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct CandidateId(pub u64);

impl CandidateId {
    pub const INITIAL: CandidateId = CandidateId(0);
}

impl fmt::Display for CandidateId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A kernel's Python source. Cheap to clone; compared by content.
#[derive(Clone)]
pub struct KernelSource(Arc<SourceText>);

struct SourceText {
    text: Box<str>,
    /// Its `same_code_key`, worked out the first time it is asked for: a source is compared
    /// with every kernel of the beam it meets and with every earlier proposal, and a resume
    /// meets every proposal of the run, so tokenizing it each time was most of a resume's fold.
    same_code: OnceLock<crate::tokens::SameCodeKey>,
}

impl KernelSource {
    pub fn new(text: impl Into<Box<str>>) -> Self {
        KernelSource(Arc::new(SourceText {
            text: text.into(),
            same_code: OnceLock::new(),
        }))
    }

    pub fn text(&self) -> &str {
        &self.0.text
    }

    /// Its fingerprint as the same kernel (`tokens::same_code_key`), tokenized once.
    pub fn same_code_key(&self) -> &crate::tokens::SameCodeKey {
        self.0
            .same_code
            .get_or_init(|| crate::tokens::same_code_key(&self.0.text))
    }

    /// A stable 64-bit FNV-1a digest of the source. Stable across Rust versions and runs, unlike
    /// `DefaultHasher`, because the noop platform's simulated figures and the journal depend on it.
    pub fn digest(&self) -> u64 {
        fnv1a(self.0.text.as_bytes())
    }
}

impl PartialEq for KernelSource {
    fn eq(&self, other: &Self) -> bool {
        self.text() == other.text()
    }
}

impl Eq for KernelSource {}

impl std::hash::Hash for KernelSource {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.text().hash(state);
    }
}

impl fmt::Debug for KernelSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("KernelSource").field(&self.text()).finish()
    }
}

pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in bytes {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// The words that start the reason of a candidate caught changing the evaluator's state
/// (issue 11): replacing a function it uses, writing into its references, leaving a thread. The
/// report counts the candidates whose reason carries them.
pub const TAMPERED: &str = "tampered with the evaluator's state";

/// Whether a failed candidate's reason says it tampered with the evaluator's state.
pub fn is_tampering(reason: &str) -> bool {
    reason.contains(TAMPERED)
}

/// The outcome of checking a candidate against the PyTorch reference.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Verdict {
    Passed {
        max_abs_err: f64,
        max_rel_err: f64,
        /// ||actual - expected|| / ||expected||, the largest over the outputs compared
        /// (issue 18); None where the evaluator does not report it (noop, older journals).
        #[serde(default)]
        rel_l2_err: Option<f64>,
        /// The tolerance the outputs were judged by, in words (it scales with the reference).
        #[serde(default)]
        rule: Option<String>,
    },
    Failed {
        reason: String,
    },
}

impl Verdict {
    pub fn passed(&self) -> bool {
        matches!(self, Verdict::Passed { .. })
    }
}

/// Device time of one candidate: the median of the timed runs and their spread.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Timing {
    pub median_ms: f64,
    pub min_ms: f64,
    pub max_ms: f64,
    pub samples: u32,
}

/// Whether a figure was measured on a device or modelled by the noop platform. Every verdict and
/// time carries it so that a simulated number is never mistaken for a measured one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Provenance {
    Measured,
    Simulated,
}

/// What the platform's evaluator said about one verification step.
#[derive(Clone, Debug, PartialEq)]
pub struct VerifyOutcome {
    pub verdict: Verdict,
    pub provenance: Provenance,
    /// The Triton kernels the candidate launched: the kernels a profile of it measures.
    pub launched_kernels: Vec<String>,
    /// What its checked call ran, compiled (issue 23); None where the evaluator could not tell.
    pub compiled: Option<CompiledCode>,
}

/// How a `candidate_finished` reason of a compiled duplicate begins (the search writes it, the
/// report counts by it).
pub const SAME_COMPILED_CODE: &str = "same compiled code as candidate";

/// The fingerprint of what one call of a candidate put on the device: its kernels' compiled
/// code with their launch configurations, in order (docs/evaluator-protocol.md says how it is
/// taken). Two candidates with the same one run the same work: the later is not timed.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct CompiledCode(String);

impl CompiledCode {
    /// A SHA-256 in hex, as the evaluator writes it; anything else is no fingerprint.
    pub fn parse(text: &str) -> Option<CompiledCode> {
        (text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit()))
            .then(|| CompiledCode(text.to_ascii_lowercase()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for CompiledCode {
    type Error = String;

    fn try_from(text: String) -> Result<Self, Self::Error> {
        CompiledCode::parse(&text).ok_or_else(|| {
            format!("compiled {text:?} is not a fingerprint: 64 hexadecimal digits are accepted")
        })
    }
}

impl From<CompiledCode> for String {
    fn from(code: CompiledCode) -> String {
        code.0
    }
}

/// What the platform's evaluator said about one timing step.
#[derive(Clone, Debug, PartialEq)]
pub struct TimeOutcome {
    pub timing: Timing,
    pub provenance: Provenance,
    /// The device's speed of light for the problem (`speed_of_light`), when it has one: the
    /// timing was checked against it.
    pub floor_ms: Option<f64>,
}

/// A kernel that was verified and timed: a beam member or a candidate for one.
#[derive(Clone, Debug, PartialEq)]
pub struct RankedKernel {
    pub id: CandidateId,
    pub source: KernelSource,
    pub time_ms: f64,
    /// The Triton kernels it launches, as its verification saw them.
    pub launched_kernels: Vec<String>,
}

/// PyTorch's own implementations of the problem, timed like the candidates for comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reference {
    /// The problem's Model, run by PyTorch eagerly.
    Eager,
    /// The same Model under torch.compile.
    Compile,
}

/// How long an evaluation step may take before the Watchdog ends it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StepDeadline(pub Duration);

/// What an LLM request asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RequestKind {
    Optimize,
    /// A seed kernel written from problem.py alone (generation, round 0).
    Seed,
    Analysis,
    Refine,
    Reflexion,
}

/// The tokens a provider reported for one request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TokenUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}
