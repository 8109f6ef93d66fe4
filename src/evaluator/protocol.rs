//! The messages between kactors and its per-device evaluator child (`templates/evaluator.py`,
//! or `tests/fixtures/standin_evaluator.py` in CI): line-delimited JSON, requests on the
//! child's file descriptor 3, replies on its descriptor 4. docs/evaluator-protocol.md is the
//! contract; these are its Rust types.
//!
//! Replies are read in two steps, never with untagged enums: a small header says what a line is
//! (`type`, and for a reply `ok`), then the line is read again as the struct that the header and
//! the pending request call for. Each reply answers the request sent before it, so the caller
//! passes that request to [`parse_reply`].

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The `--config` JSON object of the evaluator (and of the stand-in).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvaluatorConfig {
    /// data/aten_allowlist.yaml.
    pub allowlist: PathBuf,
    /// `bfloat16`, `float16` or `float32` (or bf16, fp16, fp32); None: problem.DTYPE, else bf16.
    pub dtype: Option<String>,
    /// None: 1e-2 for bf16 and fp16, 1e-4 for fp32.
    pub atol: Option<f64>,
    pub rtol: Option<f64>,
    /// Input draws, with seeds 0 .. seeds - 1.
    pub seeds: u32,
    pub benchmark_warmup: u32,
    pub benchmark_repeat: u32,
    /// None: twice the device's L2, at least 256 MiB.
    pub l2_flush_bytes: Option<u64>,
    /// The first draw's seed; the draws are `first_seed .. first_seed + seeds - 1`. The
    /// finale's re-check takes seeds no search evaluator drew (issue 18).
    #[serde(default)]
    pub first_seed: u32,
    /// The bound on ||actual - expected|| / ||expected||; None: the dtype's default tolerance.
    #[serde(default)]
    pub rel_l2: Option<f64>,
}

/// The `--config` JSON object of `templates/profile_wrapper.py`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileWrapperConfig {
    pub dtype: Option<String>,
    pub seed: u32,
    /// Calls before the measured one (compile and autotune happen there); at least 1.
    pub warmup_calls: u32,
    /// The candidate's Triton cache, so that warming up finds its compiled kernels.
    pub triton_cache_dir: Option<PathBuf>,
}

/// A request line. `id` is chosen by kactors and echoed by the reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum Request {
    Verify {
        id: u64,
        candidate: PathBuf,
        cache_dir: PathBuf,
        /// The candidate's code, which a sandboxed evaluator writes to `candidate` (in its
        /// scratch) before it loads it: it may not read the run directory's candidates/.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        source: Option<String>,
    },
    Time {
        id: u64,
        candidate: PathBuf,
        /// As in `Verify`: used only when a restarted child must load the candidate again.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        source: Option<String>,
        /// Used only when a restarted child must load the candidate again.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cache_dir: Option<PathBuf>,
        /// None: the config's benchmark_warmup.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        warmup: Option<u32>,
        /// None: the config's benchmark_repeat.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        repeat: Option<u32>,
    },
    TimeReference {
        id: u64,
        which: ReferenceKind,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        warmup: Option<u32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        repeat: Option<u32>,
    },
    Shutdown {
        id: u64,
    },
}

impl Request {
    pub fn id(&self) -> u64 {
        match self {
            Request::Verify { id, .. }
            | Request::Time { id, .. }
            | Request::TimeReference { id, .. }
            | Request::Shutdown { id } => *id,
        }
    }

    /// The request as one protocol line, newline included.
    pub fn to_line(&self) -> String {
        let mut line = serde_json::to_string(self)
            .expect("a request holds only strings, paths and numbers, which JSON can represent");
        line.push('\n');
        line
    }
}

/// What `time_reference` times: the PyTorch model as it is, or under torch.compile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReferenceKind {
    Eager,
    Compile,
}

/// The child's first line: it is ready, or it could not start.
#[derive(Debug, Clone, PartialEq)]
pub enum Startup {
    Ready(Box<Ready>),
    Failed(StartupFailure),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ready {
    pub device: DeviceDescription,
    pub versions: Versions,
    /// `bfloat16`, `float16` or `float32`.
    pub dtype: String,
    pub draws: u32,
    pub atol: f64,
    pub rtol: f64,
    /// The relative L2 bound (issue 18); absent from older evaluators and the stand-in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rel_l2: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_seed: Option<u32>,
    pub l2_flush_bytes: u64,
    pub setup_s: f64,
    /// The draws asked for; `draws` is fewer when they did not all fit in the device's memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seeds: Option<u32>,
    /// How the number of draws was decided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryPlan>,
    /// Every tensor the evaluator child keeps and its checksum at start: kactors compares each
    /// reply's checksums with these, which no candidate can reach.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub integrity: Option<StartIntegrity>,
    /// Which child of the zygote this is: 0 first, one more after each restart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryPlan {
    /// What the child could hold on the device after its first draw: the allocator's share
    /// plus the free memory, within a cap where one is set.
    pub available_bytes: u64,
    /// The estimated peak for 1, 2, … `seeds` draws.
    pub needed_bytes: Vec<u64>,
    pub inputs_bytes: u64,
    pub outputs_bytes: u64,
    pub first_draw_peak_bytes: u64,
    pub flush_bytes: u64,
    /// The device's L2, as torch reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub l2_bytes: Option<u64>,
    /// problem.py's `MIN_BYTES`: a smaller floor the problem declares (issue 18).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub declared_min_bytes: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StartIntegrity {
    /// `draw 0 input 0`, `draw 0 reference 0`, …, `L2 flush buffer`.
    pub tensors: Vec<String>,
    /// 16 hex digits each, in the order of `tensors`.
    pub checksums: Vec<String>,
}

/// The checksums a reply carries, taken after the candidate's code last ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplyIntegrity {
    pub checksums: Vec<String>,
    /// The audit's seconds (checksums, state snapshot, threads, memory).
    #[serde(default)]
    pub audit_s: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceDescription {
    pub name: String,
    /// `GPU-…` on NVIDIA; the stand-in reports the device pin verbatim.
    pub uuid: Option<String>,
    /// `00000000:00:06.0`, as nvidia-smi prints it.
    pub pci_bus_id: Option<String>,
    /// torch's device index (0: the pin leaves one device visible).
    pub index: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Versions {
    pub python: String,
    pub torch: String,
    pub triton: String,
    /// None on ROCm.
    pub cuda: Option<String>,
    /// None on CUDA.
    pub hip: Option<String>,
    pub driver: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StartupFailure {
    pub error: String,
    pub traceback: Option<String>,
}

/// A reply to one request.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    /// None when the child could not read the request line as a JSON object.
    pub id: Option<u64>,
    /// The request's wall time inside the child.
    pub seconds: f64,
    pub outcome: ReplyOutcome,
    /// The checksums of the child's tensors after a candidate's code ran (verify and time).
    pub integrity: Option<ReplyIntegrity>,
    /// What the candidate changed in the evaluator's state, when its audit found a change: the
    /// verdict's reason then starts with "tampered with the evaluator's state".
    pub tampered: Option<String>,
    /// The child exits after this reply and the zygote forks a fresh one, whose `ready` comes
    /// before the next reply.
    pub restarting: bool,
}

/// A line from the evaluator while a request is pending: the reply, or a fresh child's first
/// line (the zygote restarted it) that comes before the reply.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    Started(Startup),
    Reply(Box<Reply>),
}

#[derive(Debug, Clone, PartialEq)]
pub enum ReplyOutcome {
    Verified(VerifyVerdict),
    /// The answer to `time` and to `time_reference`.
    Timed(TimeOutcome),
    ShutDown,
    /// The request raised; the child lives on unless `fatal`.
    Failed(RequestFailure),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VerifyVerdict {
    pub passed: bool,
    /// The largest over the draws compared; None when no output was compared.
    pub max_abs_err: Option<f64>,
    pub max_rel_err: Option<f64>,
    /// The largest ||actual - expected|| / ||expected|| over the outputs compared.
    #[serde(default)]
    pub rel_l2_err: Option<f64>,
    /// The tolerance the outputs were judged by, in words.
    #[serde(default)]
    pub rule: Option<String>,
    /// Why it failed; None when it passed.
    pub reason: Option<String>,
    /// The Triton kernels of the checked calls, in first-launch order.
    pub launched: Vec<String>,
    /// The aten operations of the checked calls, such as `aten.empty.memory_format`.
    pub aten_ops: Vec<String>,
    /// The first call: compile, autotune and one run. None when it never ran.
    pub compile_s: Option<f64>,
    /// The checked calls.
    pub run_s: Option<f64>,
    /// The first checked call's fingerprint (issue 23): a SHA-256 in hex, or None when the
    /// evaluator could not take one.
    #[serde(default)]
    pub compiled: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum TimeOutcome {
    Timed(TimingStats),
    /// The candidate (or the reference) broke a rule while being timed.
    Rejected {
        reason: String,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimingStats {
    pub median_ms: f64,
    pub min_ms: f64,
    pub max_ms: f64,
    pub p25_ms: f64,
    pub p75_ms: f64,
    pub samples: u32,
    /// The fewest Triton launches of one timed call (0 for PyTorch eager).
    pub launches_per_call: u32,
    /// The median of a few calls after the timed ones on content the kernel had been shown
    /// before (issue 18); absent for PyTorch's references and from the stand-in unless asked.
    #[serde(default)]
    pub seen_content_ms: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestFailure {
    /// `ExceptionType: message`.
    pub error: String,
    pub traceback: Option<String>,
    /// The device context is unusable: the child exits (status 3) after this reply.
    #[serde(default)]
    pub fatal: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum ProtocolError {
    #[error("evaluator line is not a valid {what}: {source}; the line: {line}")]
    Malformed {
        what: &'static str,
        line: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("expected {expected} from the evaluator, got a message of type {got:?}: {line}")]
    UnexpectedType {
        expected: &'static str,
        got: String,
        line: String,
    },
    #[error("evaluator reply answers request {got}, but request {expected} was pending")]
    WrongId { expected: u64, got: u64 },
    #[error("evaluator rejected a timed candidate without a reason: {line}")]
    RejectionWithoutReason { line: String },
}

/// Reads the child's first line.
pub fn parse_startup(line: &str) -> Result<Startup, ProtocolError> {
    match read::<MessageHeader>(line, "message header")?.kind.as_str() {
        "ready" => Ok(Startup::Ready(Box::new(read(line, "ready message")?))),
        "startup_failed" => Ok(Startup::Failed(read(line, "startup_failed message")?)),
        other => Err(unexpected("a ready or startup_failed message", other, line)),
    }
}

/// Reads the reply to `pending`, the request sent last.
pub fn parse_reply(line: &str, pending: &Request) -> Result<Reply, ProtocolError> {
    let header: ReplyHeader = read(line, "reply header")?;
    if header.kind != "reply" {
        return Err(unexpected("a reply", &header.kind, line));
    }
    if let Some(got) = header.id
        && got != pending.id()
    {
        return Err(ProtocolError::WrongId {
            expected: pending.id(),
            got,
        });
    }
    let outcome = if !header.ok {
        ReplyOutcome::Failed(read(line, "failed reply")?)
    } else {
        match pending {
            Request::Verify { .. } => ReplyOutcome::Verified(read(line, "verify reply")?),
            Request::Time { .. } | Request::TimeReference { .. } => {
                ReplyOutcome::Timed(read_time_outcome(line)?)
            }
            Request::Shutdown { .. } => ReplyOutcome::ShutDown,
        }
    };
    Ok(Reply {
        id: header.id,
        seconds: header.seconds,
        outcome,
        integrity: header.integrity,
        tampered: header.tampered,
        restarting: header.restarting,
    })
}

/// Reads a line that came while `pending` was waiting for its reply.
pub fn parse_incoming(line: &str, pending: &Request) -> Result<Incoming, ProtocolError> {
    match read::<MessageHeader>(line, "message header")?.kind.as_str() {
        "ready" | "startup_failed" => Ok(Incoming::Started(parse_startup(line)?)),
        _ => Ok(Incoming::Reply(Box::new(parse_reply(line, pending)?))),
    }
}

fn read_time_outcome(line: &str) -> Result<TimeOutcome, ProtocolError> {
    let verdict: TimeVerdict = read(line, "time reply")?;
    if verdict.passed {
        return Ok(TimeOutcome::Timed(read(line, "time reply with timings")?));
    }
    match verdict.reason {
        Some(reason) => Ok(TimeOutcome::Rejected { reason }),
        None => Err(ProtocolError::RejectionWithoutReason {
            line: excerpt(line),
        }),
    }
}

#[derive(Deserialize)]
struct MessageHeader {
    #[serde(rename = "type")]
    kind: String,
}

#[derive(Deserialize)]
struct ReplyHeader {
    #[serde(rename = "type")]
    kind: String,
    id: Option<u64>,
    ok: bool,
    seconds: f64,
    #[serde(default)]
    integrity: Option<ReplyIntegrity>,
    #[serde(default)]
    tampered: Option<String>,
    #[serde(default)]
    restarting: bool,
}

#[derive(Deserialize)]
struct TimeVerdict {
    passed: bool,
    reason: Option<String>,
}

fn read<T: for<'de> Deserialize<'de>>(line: &str, what: &'static str) -> Result<T, ProtocolError> {
    serde_json::from_str(line).map_err(|source| ProtocolError::Malformed {
        what,
        line: excerpt(line),
        source,
    })
}

fn unexpected(expected: &'static str, got: &str, line: &str) -> ProtocolError {
    ProtocolError::UnexpectedType {
        expected,
        got: got.to_owned(),
        line: excerpt(line),
    }
}

/// Enough of a line to recognise it in an error message; tracebacks can be long.
fn excerpt(line: &str) -> String {
    actors::text::cut(line.trim_end(), 300)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> Vec<String> {
        let path = format!(
            "{}/tests/fixtures/evaluator/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        text.lines().map(str::to_owned).collect()
    }

    fn request(line: &str) -> Request {
        serde_json::from_str(line).unwrap_or_else(|e| panic!("request {line}: {e}"))
    }

    /// Pairs each reply of a recorded session with the request it answers; a `ready` line (a
    /// child's start, also after a restart) answers none.
    fn replay(requests: &str, replies: &str) -> (Vec<Startup>, Vec<(Request, Reply)>) {
        let requests = fixture(requests);
        let mut requests = requests.iter();
        let mut startups = Vec::new();
        let mut answered = Vec::new();
        for line in fixture(replies) {
            let kind: serde_json::Value = serde_json::from_str(&line).unwrap();
            if kind["type"] == "reply" {
                let pending = request(requests.next().expect("a request for every reply"));
                let reply = parse_reply(&line, &pending).unwrap_or_else(|e| panic!("{e}"));
                answered.push((pending, reply));
            } else {
                startups.push(parse_startup(&line).unwrap_or_else(|e| panic!("{e}")));
            }
        }
        (startups, answered)
    }

    fn verdict(reply: &Reply) -> &VerifyVerdict {
        match &reply.outcome {
            ReplyOutcome::Verified(verdict) => verdict,
            other => panic!("expected a verify verdict, got {other:?}"),
        }
    }

    fn timing(reply: &Reply) -> &TimingStats {
        match &reply.outcome {
            ReplyOutcome::Timed(TimeOutcome::Timed(stats)) => stats,
            other => panic!("expected timings, got {other:?}"),
        }
    }

    fn failure(reply: &Reply) -> &RequestFailure {
        match &reply.outcome {
            ReplyOutcome::Failed(failure) => failure,
            other => panic!("expected a failed request, got {other:?}"),
        }
    }

    fn rejection(reply: &Reply) -> &str {
        match &reply.outcome {
            ReplyOutcome::Timed(TimeOutcome::Rejected { reason }) => reason,
            other => panic!("expected a rejection, got {other:?}"),
        }
    }

    #[test]
    fn h200_matvec_session_with_a_crashing_candidate() {
        let (startups, answered) =
            replay("h200-matvec-requests.jsonl", "h200-matvec-replies.jsonl");
        // The child started twice: once, and again after the fatal crash.
        assert_eq!(startups.len(), 2);
        let Startup::Ready(ready) = &startups[0] else {
            panic!("{:?}", startups[0])
        };
        assert_eq!(ready.device.name, "NVIDIA H200");
        assert_eq!(
            ready.device.uuid.as_deref(),
            Some("GPU-7c23cb43-ca24-623e-1e9a-98a93fd992a0")
        );
        assert_eq!(ready.device.pci_bus_id.as_deref(), Some("00000000:00:06.0"));
        assert_eq!(ready.versions.torch, "2.11.0+cu130");
        assert_eq!(ready.versions.triton, "3.6.0");
        assert_eq!(ready.versions.cuda.as_deref(), Some("13.0"));
        assert_eq!(ready.versions.hip, None);
        assert_eq!(ready.versions.driver.as_deref(), Some("580.159.04"));
        assert_eq!((ready.dtype.as_str(), ready.draws), ("bfloat16", 3));
        assert_eq!(
            (ready.atol, ready.rtol, ready.l2_flush_bytes),
            (0.01, 0.01, 268_435_456)
        );

        let [initial, initial_time, wrong, crash, eager] = &answered[..] else {
            panic!("five replies expected, got {}", answered.len())
        };
        let passed = verdict(&initial.1);
        assert!(passed.passed);
        assert_eq!(passed.reason, None);
        assert_eq!(passed.launched, ["_matvec_row_block_kernel"]);
        assert_eq!(passed.aten_ops, ["aten.empty.memory_format"]);
        assert_eq!(passed.max_abs_err, Some(1024.0));
        assert!(passed.compile_s.is_some() && passed.run_s.is_some());
        let stats = timing(&initial_time.1);
        assert_eq!((stats.samples, stats.launches_per_call), (20, 1));
        assert!(stats.min_ms <= stats.p25_ms && stats.p25_ms <= stats.median_ms);
        assert!(stats.median_ms <= stats.p75_ms && stats.p75_ms <= stats.max_ms);

        let wrong = verdict(&wrong.1);
        assert!(!wrong.passed);
        assert_eq!(
            (wrong.max_abs_err, wrong.max_rel_err),
            (Some(65536.0), Some(0.25))
        );
        assert!(
            wrong
                .reason
                .as_deref()
                .is_some_and(|r| r.starts_with("2048 of 2048 output"))
        );

        let crash = failure(&crash.1);
        assert!(crash.fatal);
        assert!(
            crash
                .error
                .contains("an illegal memory access was encountered"),
            "{crash:?}"
        );
        assert!(
            crash
                .traceback
                .as_deref()
                .is_some_and(|t| t.starts_with("Traceback"))
        );

        assert!(matches!(
            eager.0,
            Request::TimeReference {
                which: ReferenceKind::Eager,
                ..
            }
        ));
        assert_eq!(timing(&eager.1).launches_per_call, 0);
    }

    #[test]
    fn h200_rejections_and_failures() {
        let (startups, answered) = replay("h200-tiny-requests.jsonl", "h200-tiny-replies.jsonl");
        assert!(startups.is_empty());
        let reason = |index: usize| {
            let reason = verdict(&answered[index].1).reason.clone();
            reason.unwrap_or_else(|| panic!("reply {index} has no reason"))
        };
        assert!(
            reason(0).starts_with(
                "kernel_function ran PyTorch operations that are not allowed: \
                 aten.mul.Tensor, aten.add.Tensor"
            ),
            "{}",
            reason(0)
        );
        assert!(reason(1).starts_with("kernel_function returned the same output buffer"));
        assert!(rejection(&answered[2].1).contains("none of the kernels verified (axpy)"));
        assert_eq!(timing(&answered[3].1).samples, 30);
        let raised = failure(&answered[4].1);
        assert_eq!(raised.error, "ValueError: candidate raised on purpose");
        assert!(!raised.fatal);
        assert!(rejection(&answered[5].1).contains("parameter 'weight' is neither"));
        assert!(failure(&answered[6].1).error.starts_with("SyntaxError: "));
        assert!(matches!(
            answered[7].0,
            Request::TimeReference {
                which: ReferenceKind::Compile,
                ..
            }
        ));
        assert_eq!(timing(&answered[7].1).launches_per_call, 1);
    }

    #[test]
    fn standin_session() {
        let requests: Vec<String> = fixture("standin-requests.jsonl");
        let replies = fixture("standin-replies.jsonl");
        let Startup::Ready(ready) = parse_startup(&replies[0]).unwrap() else {
            panic!()
        };
        assert_eq!(
            ready.device.uuid.as_deref(),
            Some("GPU-5beddb9d-b3cb-7e53-54c9-13c55d854a1f")
        );
        assert_eq!(ready.versions.torch, "standin");
        assert_eq!(ready.device.pci_bus_id, None);
        // One reply per request line; the stand-in died (fatal) after the last one.
        assert_eq!(replies.len() - 1, requests.len());
        let outcomes: Vec<Reply> = requests
            .iter()
            .zip(&replies[1..])
            .map(|(sent, line)| {
                // The line the child could not read is answered with id null.
                let pending = serde_json::from_str(sent).unwrap_or(Request::Shutdown { id: 8 });
                parse_reply(line, &pending).unwrap_or_else(|e| panic!("{e}"))
            })
            .collect();
        assert!(verdict(&outcomes[0]).passed);
        assert_eq!(timing(&outcomes[1]).median_ms, 1.5);
        assert_eq!(timing(&outcomes[2]).median_ms, 3.5);
        assert_eq!(timing(&outcomes[3]).samples, 10);
        let failed = verdict(&outcomes[4]);
        assert_eq!(
            failed.reason.as_deref(),
            Some("max abs err 1.5 exceeds atol=0.01")
        );
        assert_eq!(
            rejection(&outcomes[5]),
            "timed call 3 launched no Triton kernel"
        );
        assert!(!failure(&outcomes[6]).fatal);
        assert_eq!(outcomes[7].id, None);
        assert!(failure(&outcomes[7]).error.starts_with("JSONDecodeError"));
        assert!(failure(&outcomes[8]).fatal);
    }

    #[test]
    fn standin_startup_failure() {
        let line = &fixture("standin-startup-failed.jsonl")[0];
        let Startup::Failed(failure) = parse_startup(line).unwrap() else {
            panic!("{line}")
        };
        assert_eq!(
            failure.error,
            "StandinError: problem.py asked the stand-in to fail at start-up"
        );
        assert!(failure.traceback.is_some());
    }

    #[test]
    fn requests_serialize_as_the_evaluator_reads_them() {
        let check = |request: Request, expected: &str| {
            let line = request.to_line();
            assert!(line.ends_with('\n') && !line[..line.len() - 1].contains('\n'));
            let written: serde_json::Value = serde_json::from_str(&line).unwrap();
            let expected: serde_json::Value = serde_json::from_str(expected).unwrap();
            assert_eq!(written, expected);
            assert_eq!(serde_json::from_str::<Request>(&line).unwrap(), request);
        };
        check(
            Request::Verify {
                id: 1,
                candidate: "c/kernel.py".into(),
                source: None,
                cache_dir: "c/tc".into(),
            },
            r#"{"op":"verify","id":1,"candidate":"c/kernel.py","cache_dir":"c/tc"}"#,
        );
        check(
            Request::Time {
                id: 2,
                candidate: "c/kernel.py".into(),
                source: None,
                cache_dir: None,
                warmup: Some(25),
                repeat: Some(100),
            },
            r#"{"op":"time","id":2,"candidate":"c/kernel.py","warmup":25,"repeat":100}"#,
        );
        // Left out, not null: the evaluator then uses its config's counts.
        check(
            Request::Time {
                id: 3,
                candidate: "c/kernel.py".into(),
                source: None,
                cache_dir: Some("c/tc".into()),
                warmup: None,
                repeat: None,
            },
            r#"{"op":"time","id":3,"candidate":"c/kernel.py","cache_dir":"c/tc"}"#,
        );
        check(
            Request::TimeReference {
                id: 4,
                which: ReferenceKind::Compile,
                warmup: None,
                repeat: None,
            },
            r#"{"op":"time_reference","id":4,"which":"compile"}"#,
        );
        check(Request::Shutdown { id: 5 }, r#"{"op":"shutdown","id":5}"#);
    }

    #[test]
    fn every_recorded_request_round_trips() {
        for name in ["h200-matvec-requests.jsonl", "h200-tiny-requests.jsonl"] {
            for line in fixture(name) {
                let parsed = request(&line);
                let original: serde_json::Value = serde_json::from_str(&line).unwrap();
                let written: serde_json::Value = serde_json::from_str(&parsed.to_line()).unwrap();
                assert_eq!(written, original, "{name}");
            }
        }
    }

    #[test]
    fn replies_round_trip_through_their_structs() {
        let (startups, answered) =
            replay("h200-matvec-requests.jsonl", "h200-matvec-replies.jsonl");
        let Startup::Ready(ready) = &startups[0] else {
            panic!()
        };
        let again: Ready = serde_json::from_str(&serde_json::to_string(ready).unwrap()).unwrap();
        assert_eq!(&again, ready.as_ref());
        for (_, reply) in &answered {
            match &reply.outcome {
                ReplyOutcome::Verified(v) => {
                    let json = serde_json::to_string(v).unwrap();
                    assert_eq!(&serde_json::from_str::<VerifyVerdict>(&json).unwrap(), v);
                }
                ReplyOutcome::Timed(TimeOutcome::Timed(t)) => {
                    let json = serde_json::to_string(t).unwrap();
                    assert_eq!(&serde_json::from_str::<TimingStats>(&json).unwrap(), t);
                }
                ReplyOutcome::Failed(f) => {
                    let json = serde_json::to_string(f).unwrap();
                    assert_eq!(&serde_json::from_str::<RequestFailure>(&json).unwrap(), f);
                }
                other => panic!("unexpected {other:?}"),
            }
        }
    }

    #[test]
    fn config_serializes_with_every_key_the_evaluator_accepts() {
        let config = EvaluatorConfig {
            allowlist: "data/aten_allowlist.yaml".into(),
            dtype: None,
            atol: None,
            rtol: Some(0.02),
            seeds: 3,
            benchmark_warmup: 25,
            benchmark_repeat: 100,
            l2_flush_bytes: None,
            first_seed: 3,
            rel_l2: None,
        };
        let written: serde_json::Value = serde_json::to_value(&config).unwrap();
        let expected: serde_json::Value = serde_json::from_str(
            r#"{"allowlist":"data/aten_allowlist.yaml","dtype":null,"atol":null,"rtol":0.02,
                "seeds":3,"benchmark_warmup":25,"benchmark_repeat":100,"l2_flush_bytes":null,
                "first_seed":3,"rel_l2":null}"#,
        )
        .unwrap();
        assert_eq!(written, expected);
        let wrapper = ProfileWrapperConfig {
            dtype: Some("bf16".into()),
            seed: 0,
            warmup_calls: 3,
            triton_cache_dir: Some("c/tc".into()),
        };
        let written = serde_json::to_value(&wrapper).unwrap();
        assert_eq!(
            written,
            serde_json::json!({"dtype":"bf16","seed":0,"warmup_calls":3,"triton_cache_dir":"c/tc"})
        );
    }

    #[test]
    fn broken_lines_are_errors_naming_the_line() {
        let verify = Request::Verify {
            id: 7,
            candidate: "k.py".into(),
            source: None,
            cache_dir: "tc".into(),
        };
        let time = Request::Time {
            id: 7,
            candidate: "k.py".into(),
            source: None,
            cache_dir: None,
            warmup: None,
            repeat: None,
        };
        let check = |line: &str, pending: &Request, expected: &str| {
            let error = parse_reply(line, pending).expect_err(line).to_string();
            assert!(error.starts_with(expected), "{error}");
        };
        check(
            "standin noise {not json",
            &verify,
            "evaluator line is not a valid reply header",
        );
        check(
            r#"{"type":"reply","id":7}"#,
            &verify,
            "evaluator line is not a valid reply header",
        );
        check(
            r#"{"type":"ready","id":7,"ok":true,"seconds":0}"#,
            &verify,
            r#"expected a reply from the evaluator, got a message of type "ready""#,
        );
        check(
            r#"{"type":"reply","id":6,"ok":true,"seconds":0.1,"passed":true}"#,
            &verify,
            "evaluator reply answers request 6, but request 7 was pending",
        );
        check(
            r#"{"type":"reply","id":7,"ok":true,"seconds":0.1,"passed":true,"reason":null}"#,
            &verify,
            "evaluator line is not a valid verify reply: missing field `launched`",
        );
        check(
            r#"{"type":"reply","id":7,"ok":true,"seconds":0.1,"passed":true,"reason":null,"median_ms":1.0}"#,
            &time,
            "evaluator line is not a valid time reply with timings: missing field `min_ms`",
        );
        check(
            r#"{"type":"reply","id":7,"ok":true,"seconds":0.1,"passed":false,"reason":null}"#,
            &time,
            "evaluator rejected a timed candidate without a reason",
        );
        check(
            r#"{"type":"reply","id":7,"ok":false,"seconds":0.1}"#,
            &time,
            "evaluator line is not a valid failed reply: missing field `error`",
        );
        let error = parse_startup(r#"{"type":"reply","id":1,"ok":true,"seconds":0}"#)
            .expect_err("a reply is no start-up line")
            .to_string();
        assert!(
            error.starts_with("expected a ready or startup_failed message"),
            "{error}"
        );
        let long = format!(
            r#"{{"type":"startup_failed","traceback":"{}"}}"#,
            "x".repeat(1000)
        );
        let error = parse_startup(&long)
            .expect_err("no error field")
            .to_string();
        assert!(
            error.contains("missing field `error`") && error.ends_with('…'),
            "{error}"
        );
    }

    #[test]
    fn a_failed_reply_without_fatal_is_not_fatal() {
        let pending = Request::Shutdown { id: 1 };
        let reply = parse_reply(
            r#"{"type":"reply","id":1,"ok":false,"seconds":0,"error":"E: x"}"#,
            &pending,
        )
        .unwrap();
        assert_eq!(
            reply.outcome,
            ReplyOutcome::Failed(RequestFailure {
                error: "E: x".into(),
                traceback: None,
                fatal: false
            })
        );
        let reply = parse_reply(
            r#"{"type":"reply","id":1,"ok":true,"seconds":0.0}"#,
            &pending,
        )
        .unwrap();
        assert_eq!(
            reply,
            Reply {
                id: Some(1),
                seconds: 0.0,
                outcome: ReplyOutcome::ShutDown,
                integrity: None,
                tampered: None,
                restarting: false,
            }
        );
    }

    #[test]
    fn a_fresh_childs_ready_may_come_before_the_reply() {
        let verify = |id| Request::Verify {
            id,
            candidate: "k.py".into(),
            source: None,
            cache_dir: "tc".into(),
        };
        let pending = verify(3);
        let replies = fixture("standin-zygote-replies.jsonl");
        let Incoming::Reply(tampered) = parse_incoming(&replies[2], &pending).unwrap() else {
            panic!("{}", replies[2])
        };
        assert!(tampered.restarting);
        assert_eq!(
            tampered.tampered.as_deref(),
            Some("draw 0 reference 0 changed")
        );
        assert!(
            verdict(&tampered)
                .reason
                .as_deref()
                .is_some_and(|r| r.starts_with("tampered with the evaluator's state: ")),
            "{tampered:?}"
        );
        let Incoming::Started(Startup::Ready(ready)) =
            parse_incoming(&replies[3], &pending).unwrap()
        else {
            panic!("{}", replies[3])
        };
        assert_eq!(ready.generation, Some(1));
        assert_eq!((ready.draws, ready.seeds), (2, Some(3)));
        let integrity = ready
            .integrity
            .as_ref()
            .expect("the ready message's checksums");
        assert_eq!(integrity.tensors.len(), integrity.checksums.len());
        let memory = ready.memory.as_ref().expect("the memory plan");
        assert_eq!(memory.needed_bytes.len(), 3);
        assert!(memory.needed_bytes[2] > memory.available_bytes);
        let Incoming::Reply(passed) = parse_incoming(&replies[4], &verify(4)).unwrap() else {
            panic!("{}", replies[4])
        };
        assert!(!passed.restarting && passed.tampered.is_none());
        assert_eq!(
            passed.integrity.map(|i| i.checksums),
            Some(integrity.checksums.clone())
        );
        // The journal keeps what the ready message said, memory and checksums included.
        let again: Ready = serde_json::from_str(&serde_json::to_string(&ready).unwrap()).unwrap();
        assert_eq!(&again, ready.as_ref());
    }
}
