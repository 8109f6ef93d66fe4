//! The per-device evaluator: the Python child (templates/evaluator.py) and kactors' side of its
//! protocol (docs/evaluator-protocol.md).

mod client;
pub mod protocol;

pub use client::{
    DeviceSlot, EvaluatorSetup, PeakBandwidth, PythonEvaluator, PythonEvaluatorFactory,
};

/// The evaluator script and the aten allowlist, compiled in and written into each run
/// directory, so an installed binary needs no source tree.
pub const EVALUATOR_SCRIPT: &str = include_str!("../templates/evaluator.py");
/// The evaluator's package, written beside the script as `kactors_evaluator/<module>`: the
/// script is only its entry point (templates/kactors_evaluator/__init__.py lists the rooms).
pub const EVALUATOR_PACKAGE: &[(&str, &str)] = &[
    (
        "__init__.py",
        include_str!("../templates/kactors_evaluator/__init__.py"),
    ),
    (
        "allowlist.py",
        include_str!("../templates/kactors_evaluator/allowlist.py"),
    ),
    (
        "audit.py",
        include_str!("../templates/kactors_evaluator/audit.py"),
    ),
    (
        "checks.py",
        include_str!("../templates/kactors_evaluator/checks.py"),
    ),
    (
        "compiled.py",
        include_str!("../templates/kactors_evaluator/compiled.py"),
    ),
    (
        "core.py",
        include_str!("../templates/kactors_evaluator/core.py"),
    ),
    (
        "draws.py",
        include_str!("../templates/kactors_evaluator/draws.py"),
    ),
    (
        "gpu.py",
        include_str!("../templates/kactors_evaluator/gpu.py"),
    ),
    (
        "protocol.py",
        include_str!("../templates/kactors_evaluator/protocol.py"),
    ),
    (
        "snapshots.py",
        include_str!("../templates/kactors_evaluator/snapshots.py"),
    ),
    (
        "timing.py",
        include_str!("../templates/kactors_evaluator/timing.py"),
    ),
    (
        "verify.py",
        include_str!("../templates/kactors_evaluator/verify.py"),
    ),
    (
        "zygote.py",
        include_str!("../templates/kactors_evaluator/zygote.py"),
    ),
];
pub const ATEN_ALLOWLIST: &str = include_str!("../data/aten_allowlist.yaml");
pub const PROFILE_WRAPPER: &str = include_str!("../templates/profile_wrapper.py");
/// How both of them load, bind and call a candidate's kernel_function; written beside them.
pub const KERNEL_CALL: &str = include_str!("../templates/kernel_call.py");

#[cfg(test)]
mod tests {
    use super::EVALUATOR_PACKAGE;

    /// A module added to the package but not to the list would be missing from every run's
    /// tools/: the evaluator would fail to import it on the GPU, never in CI.
    #[test]
    fn every_module_of_the_evaluator_package_is_shipped() {
        let folder =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("templates/kactors_evaluator");
        let mut on_disk: Vec<String> = std::fs::read_dir(&folder)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|name| name.ends_with(".py"))
            .collect();
        on_disk.sort();
        let shipped: Vec<String> = EVALUATOR_PACKAGE
            .iter()
            .map(|(name, _)| name.to_string())
            .collect();
        assert_eq!(shipped, on_disk);
    }
}
