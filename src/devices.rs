//! GPU discovery, visibility masks, worker pinning, GPU locks and the GPU spec table (issue 3).

mod device;
mod environment;
mod error;
#[cfg(test)]
mod fake_tools;
#[cfg(test)]
pub(crate) use fake_tools::fake_h200;
mod lock;
mod masks;
mod nvidia;
mod pin;
mod provenance;
mod rocm;
mod select;
mod specs;
mod tool;

pub use device::{Device, DeviceKind, DeviceReport, DeviceSelection, DevicesReport};
pub use environment::HostEnvironment;
pub use error::DeviceError;
pub use lock::{DeviceLocks, GpuLock, LockedDevice, lock_devices};
pub use pin::Pin;
pub use provenance::{GpuState, gpu_state};
pub use select::{DeviceRequest, select_devices, workers_note};
pub use specs::{GpuSpec, SpecMatch, spec_by_name, spec_table};
// The Slurm tools run before actors start the same way the GPU tools do.
pub(crate) use error::ToolFailure;
pub(crate) use tool::{TOOL_TIMEOUT, find_executable, run_tool};
