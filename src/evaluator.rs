//! The per-device evaluator: the Python child (templates/evaluator.py) and kactors' side of its
//! protocol (docs/evaluator-protocol.md).

mod client;
pub mod protocol;

pub use client::{DeviceSlot, EvaluatorSetup, PythonEvaluator, PythonEvaluatorFactory};

/// The evaluator script and the aten allowlist, compiled in and written into each run
/// directory, so an installed binary needs no source tree.
pub const EVALUATOR_SCRIPT: &str = include_str!("../templates/evaluator.py");
pub const ATEN_ALLOWLIST: &str = include_str!("../data/aten_allowlist.yaml");
pub const PROFILE_WRAPPER: &str = include_str!("../templates/profile_wrapper.py");
/// How both of them load, bind and call a candidate's kernel_function; written beside them.
pub const KERNEL_CALL: &str = include_str!("../templates/kernel_call.py");
