//! The checks that `kactors check` prints and that `kactors run` makes before it starts
//! ([`preflight`]): the Python interpreter, torch and triton, each pinned device as torch sees
//! it under its pin, the profiler, and the kernel directory. Each finding is one line, `ok
//! <what>` or `FAIL <what>: <how to fix>`.
//!
//! Every question to Python or a profiler is a child process through `crate::process`: its own
//! process group, an environment without credentials (plus the device pin where a device is
//! asked about), its output in a scratch folder that is removed afterwards, and a deadline
//! after which its whole group is ended. Nothing is written into the kernel directory: Python
//! runs with PYTHONDONTWRITEBYTECODE=1 and its working directory in the scratch folder.
//!
//! `report.rs` holds the lines; `preflight.rs` decides which checks a platform needs and puts
//! their lines in order; `probe.rs` runs one question as a child (the Python side is
//! templates/check_probe.py); `python.rs` reads Python's, torch's, triton's and problem.py's
//! answers; `torch_device.rs` matches each device torch sees to the one kactors listed;
//! `nvidia.rs` and `rocm.rs` check the vendors' profilers; `sandbox.rs` prints what the sandbox
//! for candidate code gets on this machine.

mod nvidia;
mod preflight;
mod probe;
mod python;
mod report;
mod rocm;
mod sandbox;
mod torch_device;

pub use preflight::{layout_line, preflight};
pub use report::{CheckLine, CheckReport};
