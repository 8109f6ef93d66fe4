//! The Profiler: runs a kernel's profiler passes (ncu, rocprofv3) on a device whose GpuWorker
//! holds it for the duration. Hung passes are the Watchdog's business: the adapter registers each
//! pass's process group there.

use std::rc::Rc;

use actix::prelude::*;

use crate::ports::{KernelProfiler, ProfileError, ProfileJob, ProfileSummary};

#[derive(Message)]
#[rtype(result = "Result<ProfileSummary, ProfileError>")]
pub struct RunProfile(pub ProfileJob);

/// Stop; answered once stopped. A pass still running belongs to a worker that has already
/// shut down, and the Watchdog ends its group next.
#[derive(Message)]
#[rtype(result = "()")]
pub struct CloseProfiler;

pub struct Profiler {
    backend: Rc<dyn KernelProfiler>,
}

impl Profiler {
    pub fn new(backend: Rc<dyn KernelProfiler>) -> Self {
        Profiler { backend }
    }
}

impl Actor for Profiler {
    type Context = Context<Self>;
}

impl Handler<RunProfile> for Profiler {
    type Result = ResponseFuture<Result<ProfileSummary, ProfileError>>;

    fn handle(&mut self, message: RunProfile, _: &mut Context<Self>) -> Self::Result {
        self.backend.clone().profile(message.0)
    }
}

impl Handler<CloseProfiler> for Profiler {
    type Result = ();

    fn handle(&mut self, _: CloseProfiler, ctx: &mut Context<Self>) {
        ctx.stop();
    }
}
