//! The Python parts that need neither torch nor a GPU, tested with plain python3: the
//! evaluator's (issue 11, issue 10's memory item), tests/python/test_evaluator_parts.py, and
//! kernel_call.py's, through which the evaluator and the profiled wrapper both call a candidate
//! (issue 12), tests/python/test_kernel_call.py.

use std::path::Path;
use std::process::Command;

/// Runs one file of Python unit tests and checks that all `count` of them ran and passed.
fn check(file: &str, count: usize) {
    let tests = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/python")
        .join(file);
    let output = Command::new("python3")
        .args(["-m", "unittest", "-v"])
        .arg(&tests)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env_remove("KACTORS_KERNEL_CALL_RECORD")
        .output()
        .expect("python3 runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains(&format!("Ran {count} tests")), "{stderr}");
}

#[test]
fn the_evaluators_python_parts_pass_their_unit_tests() {
    check("test_evaluator_parts.py", 20);
}

#[test]
fn kernel_call_binds_and_records_a_call_alike_for_the_evaluator_and_the_wrapper() {
    check("test_kernel_call.py", 18);
}
