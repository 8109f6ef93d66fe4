//! The writer thread's care of the disk: a candidate's caches removed once it can no longer
//! become a parent, and the run directory measured for the report.

use std::time::{Duration, SystemTime};

use actix::prelude::*;

use super::{Collector, Command, Writer};
use crate::journal::{Event, JournalRecord, whole_millis};
use crate::model::CandidateId;

/// How often the run directory is measured for the report at most: a measurement walks every
/// file of the run directory.
const MEASURE_EVERY: Duration = Duration::from_secs(60);

/// The candidate can no longer become a parent: the caches in its folder are removed (on the
/// writer thread) and, when there were any, `caches_removed` journaled with what they held.
#[derive(Message)]
#[rtype(result = "()")]
pub struct RemoveCaches {
    pub candidate: CandidateId,
}

impl Handler<RemoveCaches> for Collector {
    type Result = ();

    fn handle(&mut self, message: RemoveCaches, _: &mut Context<Self>) {
        let t = whole_millis(self.clock.now());
        let _ = self
            .commands
            .send(Command::RemoveCaches(message.candidate, t));
    }
}

impl Writer<'_> {
    /// Removes a candidate's caches and, when there were any, journals `caches_removed` at `t`
    /// (when the Collector was told).
    pub(super) fn remove_caches(&mut self, candidate: CandidateId, t: SystemTime) {
        match self.store.remove_candidate_caches(candidate) {
            Ok(removed) if !removed.paths.is_empty() => self.append(&JournalRecord {
                t,
                event: Event::CachesRemoved {
                    candidate,
                    paths: removed.paths,
                    bytes: removed.bytes,
                },
            }),
            Ok(_) => {}
            // A cache left behind costs disk, not the run: it goes on.
            Err(error) => {
                tracing::warn!("failed to remove the caches of candidate {candidate}: {error}")
            }
        }
    }

    /// Measures the run directory unless it was measured less than `MEASURE_EVERY` before `t`.
    pub(super) fn measure_if_due(&mut self, t: SystemTime) {
        let due = self
            .measured_at
            .is_none_or(|last| t.duration_since(last).unwrap_or_default() >= MEASURE_EVERY);
        if due {
            self.measure(t);
        }
    }

    /// Journals what the run directory holds now, for the report.
    pub(super) fn measure(&mut self, t: SystemTime) {
        self.measured_at = Some(t);
        match self.store.measure() {
            Ok(bytes) => self.append(&JournalRecord {
                t,
                event: Event::RunDirMeasured { bytes },
            }),
            Err(error) => tracing::warn!("failed to measure the run directory: {error}"),
        }
    }
}
