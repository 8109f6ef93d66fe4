//! Profiling on AMD Instinct GPUs with rocprofv3: command lines, output files, CSV parsing,
//! selecting the measured call, the roofline, and the `KernelProfiler` that runs the passes
//! through the profiling core (`crate::profiling`), the only other part of kactors it imports.

mod counter_groups;
mod csv_tables;
mod output_files;
mod profile;
mod profiler;
mod rocm_roofline;
mod rocprof_cli;
mod selection;

pub use counter_groups::{
    CounterGroup, CounterPass, EaNaming, counter_pass_plan, ea_name_attempts,
    parse_available_counters,
};
pub use csv_tables::{
    CounterSample, KernelDispatch, KernelStatsRow, KernelTrace, RocprofCsvError,
    parse_counter_collection, parse_kernel_stats, parse_kernel_trace, read_counter_collection,
    read_kernel_stats, read_kernel_trace,
};
pub use output_files::{OutputKind, RocprofOutputError, find_outputs};
pub use profile::{RocmProfile, RocmProfileError, TimingPass, read_counter_pass, read_timing_pass};
pub use profiler::{
    RocmDeviceFacts, RocprofNotFound, RocprofProfiler, RocprofSettings, resolve_rocprof_bin,
};
pub use rocm_roofline::{
    RocmPeaks, RocmRoofline, RooflineInputError, instruction_mix, rocm_metrics, rocm_roofline,
};
pub use rocprof_cli::{
    RocprofCapabilities, RocprofCliError, RocprofVersion, counter_pass_args, timing_pass_args,
};
pub use selection::{
    KernelsUnderTest, MeasuredDispatch, SelectionError, measured_counters, measured_dispatches,
    measured_duration_ms,
};
