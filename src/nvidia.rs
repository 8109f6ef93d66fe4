//! NVIDIA GPUs: Nsight Compute profiles of the measured call.

#[cfg(test)]
mod h200_captures;
pub mod ncu;
pub mod ncu_csv;
pub mod profile;
pub mod profiler;

pub use ncu::{
    Combine, KernelNames, KernelNamesError, MetricSection, NCU_ENV, NCU_METRICS, NcuInvocation,
    NcuMetric, NcuNotFound, ncu_command_args, resolve_ncu_bin,
};
pub use ncu_csv::{NcuKernelResult, NcuParseError, NcuReport, parse_ncu_csv};
pub use profile::{
    NcuFailure, NvidiaProfile, ProfiledDevice, ProfiledLaunch, SummaryError, is_permanent,
    summarize,
};
pub use profiler::NcuProfiler;
