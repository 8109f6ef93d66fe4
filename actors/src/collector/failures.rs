//! How the Collector's writer thread reports a failed write: the first failure once, to the
//! Supervisor and to the answers the thread may no longer give; the rest to the debug log.

use std::sync::Arc;

use actix::prelude::*;
use tokio::sync::watch;

use super::RecordsFailed;

/// The first failure to write the run directory; later ones go to the log's debug level only,
/// so that a full disk makes one line, not thousands.
#[derive(Default)]
pub(super) struct FirstError {
    pub(super) first: Option<String>,
    reported: bool,
}

impl FirstError {
    pub(super) fn note<T>(
        &mut self,
        result: std::io::Result<T>,
        what: &str,
        failed: &Reporter,
    ) -> Result<T, String> {
        result.map_err(|error| {
            let message = format!("failed to write {what}: {error}");
            if self.reported {
                tracing::debug!("{message}");
            } else {
                self.reported = true;
                // Into kactors.log only: `run` ends with the one line a user sees about it.
                tracing::info!("{message}");
                failed.failed(message.clone());
            }
            self.first.get_or_insert_with(|| message.clone());
            message
        })
    }
}

/// Tells the Supervisor of a failure, and keeps it for the answers the thread may not give.
#[derive(Clone)]
pub(super) struct Reporter {
    pub(super) failed: Recipient<RecordsFailed>,
    pub(super) failure: Arc<watch::Sender<Option<String>>>,
}

impl Reporter {
    pub(super) fn failed(&self, message: String) {
        self.failure.send_if_modified(|first| {
            let unset = first.is_none();
            first.get_or_insert_with(|| message.clone());
            unset
        });
        self.failed.do_send(RecordsFailed { message });
    }
}
