//! The evaluator's Python parts that need neither torch nor a GPU (issue 11, issue 10's memory
//! item), tested with plain python3: tests/python/test_evaluator_parts.py.

use std::path::Path;
use std::process::Command;

#[test]
fn the_evaluators_python_parts_pass_their_unit_tests() {
    let tests = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/test_evaluator_parts.py");
    let output = Command::new("python3")
        .args(["-m", "unittest", "-v"])
        .arg(&tests)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("python3 runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("Ran 15 tests"), "{stderr}");
}
