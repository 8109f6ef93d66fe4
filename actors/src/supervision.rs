//! What the Manager tells the Supervisor, and how it reaches it: the Supervisor imports the
//! Manager and starts it with a `SupervisorLink` of recipients, so the Manager never names the
//! Supervisor.

use actix::prelude::*;

use crate::gpu_worker::GpuWorker;
use crate::journal::RunOutcome;
use crate::model::{DeviceId, RankedKernel};
use crate::search_state::SearchState;

/// Sent by the Manager when the search is over, for whatever reason.
#[derive(Message)]
#[rtype(result = "()")]
pub struct RunDone {
    pub outcome: RunOutcome,
    pub reason: String,
    pub best: Option<RankedKernel>,
    pub initial_ms: Option<f64>,
    pub search: Option<SearchState>,
}

/// A worker's mailbox closed; answered with its replacement, or why there is none.
#[derive(Message)]
#[rtype(result = "Result<Addr<GpuWorker>, String>")]
pub struct RestartWorker {
    pub device: DeviceId,
    pub dead: Addr<GpuWorker>,
}

/// The Manager's actor is gone without having finished the run (a handler panicked): its guard
/// says so as it is dropped.
#[derive(Message)]
#[rtype(result = "()")]
pub struct ManagerDied {
    pub message: String,
}

/// Tells the Supervisor that the Manager died if it is dropped before the run was done: a
/// panicking handler ends the actor silently otherwise, and the run would hang.
pub struct DeathNotice {
    supervisor: Recipient<ManagerDied>,
    armed: bool,
}

impl DeathNotice {
    pub fn new(supervisor: Recipient<ManagerDied>) -> Self {
        DeathNotice {
            supervisor,
            armed: true,
        }
    }

    /// The run's end went to the Supervisor: nothing is said when the Manager goes.
    pub fn disarm(&mut self) {
        self.armed = false;
    }

    pub fn armed(&self) -> bool {
        self.armed
    }
}

impl Drop for DeathNotice {
    fn drop(&mut self) {
        if self.armed {
            let message = crate::panic_note::latest()
                .unwrap_or_else(|| "it stopped before the run was done".into());
            self.supervisor.do_send(ManagerDied { message });
        }
    }
}

/// The Supervisor as the Manager sees it: where each of its messages goes.
#[derive(Clone)]
pub struct SupervisorLink {
    pub done: Recipient<RunDone>,
    pub restart: Recipient<RestartWorker>,
    pub died: Recipient<ManagerDied>,
    /// A child failed for want of disk space: the same stop as a record that cannot be written.
    pub records_failed: Recipient<crate::collector::RecordsFailed>,
    /// The workers' evaluators, which start a lost node agent again (or say it is gone).
    pub evaluators: std::rc::Rc<dyn crate::ports::EvaluatorFactory>,
}
