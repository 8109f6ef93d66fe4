//! The run's profiler, whichever the vendor: the dispatch over the vendors' profilers that
//! `kactors profile` and the run's Profiler actor share. It sits above `nvidia` and `rocm` so
//! that the profiling core below them never names a vendor.

use std::rc::Rc;

use crate::nvidia::NcuProfiler;
use crate::profiling::{ProfileReport, ProfileTarget};
use crate::rocm::RocprofProfiler;

/// The run's profiler, whichever the vendor.
#[derive(Clone)]
pub enum PlatformProfiler {
    Nvidia(Rc<NcuProfiler>),
    Rocm(Rc<RocprofProfiler>),
}

/// Profiles `target` once and returns issue 5's report, failed or not. The passes are watched
/// by a Watchdog actor, so this runs inside an actix System, with the profiler's setup holding a
/// Watchdog started there (see `profiling::standalone_watchdog`); tests/profilers.rs shows it.
pub async fn profile_once(profiler: &PlatformProfiler, target: ProfileTarget) -> ProfileReport {
    match profiler {
        PlatformProfiler::Nvidia(profiler) => profiler.profile_target(&target).await.report,
        PlatformProfiler::Rocm(profiler) => profiler.profile_target(&target).await.report,
    }
}
