//! The configured Python's answers: its version, torch (a build for the platform's vendor) and
//! triton, and the kernel directory's problem.py imported.

use std::path::Path;

use serde_json::Value;

use crate::devices::Pin;
use crate::vendor::Vendor;

use super::probe::{Probe, ProbeRunner, text};
use super::report::CheckLine;

/// The Python, torch and triton lines, and whether torch works for the platform: without it,
/// the device and problem.py checks would only repeat the torch failure.
pub(super) struct EnvironmentLines {
    pub(super) lines: Vec<CheckLine>,
    pub(super) torch_works: bool,
}

pub(super) async fn environment_check(
    runner: &ProbeRunner<'_>,
    python: &Path,
    vendor: Vendor,
) -> EnvironmentLines {
    let probe = Probe::python(python, &["environment"], None, "python environment check");
    let answer = match runner.run(probe).await.and_then(|run| run.answer()) {
        Ok(answer) => answer,
        Err(reason) => {
            return EnvironmentLines {
                lines: vec![CheckLine::fail(
                    format!("python {}", python.display()),
                    format!(
                        "{reason}; install Python 3, or name the interpreter with --python or \
                         the configuration key python"
                    ),
                )],
                torch_works: false,
            };
        }
    };
    let mut lines = vec![CheckLine::ok(format!(
        "python {}: Python {} ({})",
        python.display(),
        text(&answer["python"]),
        text(&answer["executable"])
    ))];
    let torch = torch_line(&answer["torch"], vendor, python);
    let torch_works = torch.passed();
    lines.push(torch);
    let triton = &answer["triton"];
    lines.push(match triton["version"].as_str() {
        Some(version) => CheckLine::ok(format!("triton {version} imports")),
        None => CheckLine::fail(
            "triton imports",
            format!(
                "{}; install triton into {}",
                text(&triton["error"]),
                python.display()
            ),
        ),
    });
    EnvironmentLines { lines, torch_works }
}

fn torch_line(torch: &Value, vendor: Vendor, python: &Path) -> CheckLine {
    let Some(version) = torch["version"].as_str() else {
        return CheckLine::fail(
            "torch imports",
            format!(
                "{}; install a {} build of torch into {}",
                text(&torch["error"]),
                build_name(vendor),
                python.display()
            ),
        );
    };
    let (build, label) = match vendor {
        Vendor::Rocm => (torch["hip"].as_str(), "HIP"),
        Vendor::Nvidia => (torch["cuda"].as_str(), "CUDA"),
    };
    match build {
        Some(build) => CheckLine::ok(format!("torch {version} imports ({label} {build})")),
        None => CheckLine::fail(
            format!("torch {version} imports"),
            format!(
                "it is not a {} build, so it cannot use the {vendor} GPUs; install a {} build of \
                 torch into {}",
                build_name(vendor),
                build_name(vendor),
                python.display()
            ),
        ),
    }
}

pub(super) fn build_name(vendor: Vendor) -> &'static str {
    match vendor {
        Vendor::Rocm => "ROCm",
        Vendor::Nvidia => "CUDA",
    }
}

pub(super) async fn problem_check(
    runner: &ProbeRunner<'_>,
    python: &Path,
    dir: &Path,
    pin: &Pin,
) -> CheckLine {
    let what = format!("{} imports", dir.join("problem.py").display());
    // The child runs in the scratch folder: a relative kernel directory would name another.
    let dir_arg = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    let dir_arg = dir_arg.to_string_lossy();
    let probe = Probe::python(
        python,
        &["problem", &dir_arg],
        Some(pin),
        "problem.py check",
    );
    let answer = runner.answer_about(probe, &what, |error| {
        format!(
            "importing it failed with `{error}`; fix problem.py, or install what it imports into \
             {}",
            python.display()
        )
    });
    let answer = match answer.await {
        Ok(answer) => answer,
        Err(line) => return line,
    };
    let missing: Vec<&str> = answer["missing"]
        .as_array()
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if missing.is_empty() {
        CheckLine::ok(format!(
            "{what}: Model, get_inputs and get_init_inputs are callable"
        ))
    } else {
        CheckLine::fail(
            what,
            format!(
                "after the import, {} {} not callable; define {} at the top level of problem.py",
                missing.join(", "),
                if missing.len() == 1 { "is" } else { "are" },
                if missing.len() == 1 { "it" } else { "them" }
            ),
        )
    }
}
