//! Selecting the measured call from everything the profiled process ran.
//!
//! The wrapper warms the kernel up (Triton compiles and autotunes there, launching the same
//! kernel names many times), then makes the measured call, and records the names of the Triton
//! kernels that call launched: the kernels under test. The process also runs PyTorch's `at::`
//! kernels and runtime helpers (`__amd_rocclr_*`). The measured call is, for each kernel under
//! test, its last dispatch: the greatest Dispatch_Id, or where a trace has no Dispatch_Id
//! column (ROCm 6.2) the latest Start_Timestamp.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::csv_tables::{CounterSample, KernelDispatch, KernelTrace};

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SelectionError {
    #[error("the wrapper recorded no Triton kernel launched by the measured call")]
    NoKernelsRecorded,
    #[error(
        "recorded kernel \"{name}\" is a PyTorch or runtime kernel, not a Triton kernel under test"
    )]
    NotATritonKernel { name: String },
    #[error(
        "{path} has no dispatch of kernel under test {kernel}: not a profile of the measured call"
    )]
    NoDispatch { path: String, kernel: String },
    #[error("{path} has no counter rows of kernel under test {kernel}")]
    NoCounterRows { path: String, kernel: String },
}

/// The Triton kernels the measured call launched, as the wrapper recorded them: non-empty,
/// without duplicates, never an `at::` kernel or runtime helper.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelsUnderTest {
    names: Vec<String>,
}

impl KernelsUnderTest {
    pub fn new<S: AsRef<str>>(
        recorded: impl IntoIterator<Item = S>,
    ) -> Result<Self, SelectionError> {
        let mut names: Vec<String> = Vec::new();
        for name in recorded {
            let name = name.as_ref().trim();
            if name.is_empty() || names.iter().any(|known| known == name) {
                continue;
            }
            if is_framework_kernel(name) {
                return Err(SelectionError::NotATritonKernel {
                    name: name.to_owned(),
                });
            }
            names.push(name.to_owned());
        }
        if names.is_empty() {
            return Err(SelectionError::NoKernelsRecorded);
        }
        Ok(Self { names })
    }

    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The recorded kernel a profiler row belongs to, if any. rocprofv3 prints the name it
    /// got from the code object; for a Triton kernel that is the recorded name itself. Also
    /// accepted, as forms a release might print: the name followed by an argument list
    /// (`NAME(...)`), by the code-object symbol suffix (`NAME.kd`), or preceded by a return
    /// type (`void NAME(...)`). A name merely starting with a recorded one (`NAME_2`) is a
    /// different kernel, and `at::`/`__amd_rocclr_*` rows never match.
    pub fn matching(&self, profiler_name: &str) -> Option<&str> {
        let profiler_name = profiler_name.trim();
        if is_framework_kernel(profiler_name) {
            return None;
        }
        let unqualified = profiler_name.strip_prefix("void ").unwrap_or(profiler_name);
        self.names
            .iter()
            .find(|name| {
                unqualified.strip_prefix(name.as_str()).is_some_and(|rest| {
                    rest.is_empty() || rest.starts_with('(') || rest.starts_with(".kd")
                })
            })
            .map(String::as_str)
    }

    /// `--kernel-include-regex` for counter passes: each recorded name as a whole identifier
    /// anywhere in the kernel name (rocprofv3 applies it with `std::regex_search`, ECMAScript
    /// syntax). Looser than [`Self::matching`] on purpose: the regex only saves collection
    /// work, the rows are selected from the file afterwards, and a name printed in a form
    /// nobody foresaw must not lose the measured dispatch's counters.
    pub fn include_regex(&self) -> String {
        let alternatives: Vec<String> = self.names.iter().map(|name| escape_regex(name)).collect();
        format!(
            "(^|[^A-Za-z0-9_])({})($|[^A-Za-z0-9_])",
            alternatives.join("|")
        )
    }
}

fn is_framework_kernel(name: &str) -> bool {
    let name = name.strip_prefix("void ").unwrap_or(name);
    name.starts_with("at::") || name.starts_with("__amd_rocclr_")
}

fn escape_regex(name: &str) -> String {
    let mut escaped = String::with_capacity(name.len());
    for c in name.chars() {
        if c.is_ascii_punctuation() && c != '_' {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped
}

/// The measured call's dispatch of one kernel under test.
#[derive(Debug, Clone, PartialEq)]
pub struct MeasuredDispatch {
    pub kernel: String,
    pub dispatch: KernelDispatch,
}

/// For each kernel under test, its last dispatch in the trace.
pub fn measured_dispatches(
    trace: &KernelTrace,
    kernels: &KernelsUnderTest,
) -> Result<Vec<MeasuredDispatch>, SelectionError> {
    kernels
        .names()
        .iter()
        .map(|kernel| {
            trace
                .dispatches
                .iter()
                .filter(|dispatch| kernels.matching(&dispatch.kernel_name) == Some(kernel))
                .max_by_key(|dispatch| (dispatch.dispatch_id, dispatch.start_ns))
                .map(|dispatch| MeasuredDispatch {
                    kernel: kernel.clone(),
                    dispatch: dispatch.clone(),
                })
                .ok_or_else(|| SelectionError::NoDispatch {
                    path: display(&trace.path),
                    kernel: kernel.clone(),
                })
        })
        .collect()
}

/// The measured call's device time: End - Start of each kernel under test's last dispatch,
/// summed over the kernels under test (a split kernel is main plus reduce).
pub fn measured_duration_ms(measured: &[MeasuredDispatch]) -> f64 {
    let total_ns: u64 = measured
        .iter()
        .map(|measured| measured.dispatch.duration_ns())
        .sum();
    total_ns as f64 / 1e6
}

/// The counters of the measured call from one counter file: for each kernel under test the rows
/// of its greatest Dispatch_Id (never a sum over dispatches), then summed across the kernels
/// under test, since together they are one call's work.
///
/// Rows of one dispatch and counter are summed: rocprofv3 writes one row per dispatch and
/// counter with the dimension instances already summed, so more than one can only be a release
/// writing instances separately. A counter missing from any kernel's measured dispatch is left
/// out (absent, never 0): part of the call's work would understate it.
pub fn measured_counters(
    samples: &[CounterSample],
    kernels: &KernelsUnderTest,
    path: &Path,
) -> Result<BTreeMap<String, f64>, SelectionError> {
    let mut per_kernel = Vec::new();
    for kernel in kernels.names() {
        let rows: Vec<&CounterSample> = samples
            .iter()
            .filter(|sample| kernels.matching(&sample.kernel_name) == Some(kernel))
            .collect();
        let Some(last_dispatch) = rows.iter().map(|sample| sample.dispatch_id).max() else {
            return Err(SelectionError::NoCounterRows {
                path: display(path),
                kernel: kernel.clone(),
            });
        };
        let mut values: BTreeMap<String, f64> = BTreeMap::new();
        for sample in rows
            .iter()
            .filter(|sample| sample.dispatch_id == last_dispatch)
        {
            *values.entry(sample.counter.clone()).or_default() += sample.value;
        }
        per_kernel.push(values);
    }
    let in_every_kernel: BTreeSet<&String> = per_kernel
        .iter()
        .flat_map(BTreeMap::keys)
        .filter(|counter| {
            per_kernel
                .iter()
                .all(|values| values.contains_key(*counter))
        })
        .collect();
    Ok(in_every_kernel
        .into_iter()
        .map(|counter| {
            let total = per_kernel.iter().map(|values| values[counter]).sum();
            (counter.clone(), total)
        })
        .collect())
}

fn display(path: &Path) -> String {
    path.display().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn kernels(names: &[&str]) -> KernelsUnderTest {
        KernelsUnderTest::new(names.iter().copied()).unwrap()
    }

    fn trace(dispatches: Vec<KernelDispatch>) -> KernelTrace {
        KernelTrace {
            path: PathBuf::from("t_kernel_trace.csv"),
            dispatches,
        }
    }

    #[test]
    fn recorded_names_are_checked() {
        assert_eq!(
            KernelsUnderTest::new(Vec::<String>::new()),
            Err(SelectionError::NoKernelsRecorded)
        );
        assert_eq!(
            KernelsUnderTest::new([" ", ""]),
            Err(SelectionError::NoKernelsRecorded)
        );
        assert!(matches!(
            KernelsUnderTest::new(["k", "at::native::vectorized_elementwise_kernel"]),
            Err(SelectionError::NotATritonKernel { .. })
        ));
        assert_eq!(kernels(&["a", " a ", "b"]).names(), ["a", "b"]);
    }

    #[test]
    fn name_matching_rule() {
        let under_test = kernels(&["matvec_kernel", "reduce_kernel"]);
        let check = |profiler_name: &str, expected: Option<&str>| {
            assert_eq!(
                under_test.matching(profiler_name),
                expected,
                "{profiler_name}"
            );
        };
        check("matvec_kernel", Some("matvec_kernel"));
        check("matvec_kernel(float*, float*, int)", Some("matvec_kernel"));
        check("matvec_kernel.kd", Some("matvec_kernel"));
        check("void matvec_kernel(float*)", Some("matvec_kernel"));
        check(" reduce_kernel ", Some("reduce_kernel"));
        check("matvec_kernel_2", None);
        check("matvec", None);
        check("at::native::matvec_kernel", None);
        check("__amd_rocclr_fillBufferAligned", None);
    }

    #[test]
    fn include_regex_escapes_and_anchors() {
        assert_eq!(
            kernels(&["matvec_kernel", "odd.name"]).include_regex(),
            "(^|[^A-Za-z0-9_])(matvec_kernel|odd\\.name)($|[^A-Za-z0-9_])"
        );
    }

    #[test]
    fn last_dispatch_by_dispatch_id_then_start() {
        let under_test = kernels(&["k"]);
        let with_ids = trace(vec![
            KernelDispatch::new("k", Some(3), 100, 200),
            KernelDispatch::new("k", Some(9), 300, 350),
            KernelDispatch::new("at::elementwise", Some(10), 400, 900),
            KernelDispatch::new("k", Some(5), 500, 700),
        ]);
        let measured = measured_dispatches(&with_ids, &under_test).unwrap();
        assert_eq!(measured[0].dispatch.dispatch_id, Some(9));
        assert_eq!(measured_duration_ms(&measured), 50.0 / 1e6);

        let without_ids = trace(vec![
            KernelDispatch::new("k", None, 100, 200),
            KernelDispatch::new("k", None, 500, 650),
            KernelDispatch::new("k", None, 300, 350),
        ]);
        let measured = measured_dispatches(&without_ids, &under_test).unwrap();
        assert_eq!(measured[0].dispatch.start_ns, 500);
    }

    #[test]
    fn split_kernel_duration_is_the_sum() {
        let under_test = kernels(&["main_kernel", "reduce_kernel"]);
        let measured = measured_dispatches(
            &trace(vec![
                KernelDispatch::new("main_kernel", Some(1), 0, 5_000_000),
                KernelDispatch::new("reduce_kernel", Some(2), 5_000_000, 5_100_000),
                KernelDispatch::new("main_kernel", Some(3), 6_000_000, 7_000_000),
                KernelDispatch::new("reduce_kernel", Some(4), 7_000_000, 7_050_000),
            ]),
            &under_test,
        )
        .unwrap();
        assert_eq!(measured_duration_ms(&measured), 1.05);
    }

    #[test]
    fn trace_without_a_kernel_under_test_is_an_error() {
        let error = measured_dispatches(
            &trace(vec![KernelDispatch::new("at::fill", Some(1), 0, 5)]),
            &kernels(&["k"]),
        )
        .unwrap_err();
        assert_eq!(
            error.to_string(),
            "t_kernel_trace.csv has no dispatch of kernel under test k: not a profile of the \
             measured call"
        );
    }

    #[test]
    fn counters_of_the_last_dispatch_summed_across_kernels() {
        let samples = [
            CounterSample::new(1, "main", "FETCH_SIZE", 900.0),
            CounterSample::new(1, "main", "SQ_WAVES", 9.0),
            CounterSample::new(2, "at::copy", "FETCH_SIZE", 5000.0),
            CounterSample::new(3, "main", "FETCH_SIZE", 100.0),
            CounterSample::new(3, "main", "SQ_WAVES", 1.0),
            CounterSample::new(4, "reduce", "FETCH_SIZE", 10.0),
            CounterSample::new(6, "reduce.kd", "FETCH_SIZE", 20.0),
            CounterSample::new(6, "reduce.kd", "FETCH_SIZE", 2.0),
        ];
        let counters =
            measured_counters(&samples, &kernels(&["main", "reduce"]), Path::new("c.csv")).unwrap();
        assert_eq!(
            counters,
            BTreeMap::from([("FETCH_SIZE".to_owned(), 122.0)]),
            "SQ_WAVES is missing from reduce's dispatch, so it is absent"
        );
    }

    #[test]
    fn no_rows_of_a_kernel_under_test_is_an_error() {
        let error = measured_counters(
            &[CounterSample::new(1, "main", "FETCH_SIZE", 1.0)],
            &kernels(&["main", "reduce"]),
            Path::new("c.csv"),
        )
        .unwrap_err();
        assert_eq!(
            error,
            SelectionError::NoCounterRows {
                path: "c.csv".to_owned(),
                kernel: "reduce".to_owned()
            }
        );
    }
}
