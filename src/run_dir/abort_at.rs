//! The tests' way to kill a run at a chosen record: `KACTORS_TEST_ABORT_AT=<record type>:<n>`
//! makes the process kill itself (SIGKILL, as an OOM kill would) just before it journals the
//! n-th record of that type. Only a build with the `test-hooks` feature reads the variable;
//! the test build has it (the package's dev-dependency on itself turns it on), the shipped
//! binary does not, so no variable in a user's environment can kill a real run.

/// The variable the hook reads.
#[cfg(feature = "test-hooks")]
pub const ABORT_AT_VARIABLE: &str = "KACTORS_TEST_ABORT_AT";

#[cfg(feature = "test-hooks")]
#[derive(Debug)]
pub(super) struct AbortAt {
    record_type: String,
    nth: u64,
    seen: u64,
}

#[cfg(feature = "test-hooks")]
impl AbortAt {
    pub(super) fn from_environment() -> Option<AbortAt> {
        let value = std::env::var(ABORT_AT_VARIABLE).ok()?;
        let (record_type, nth) = value.rsplit_once(':')?;
        Some(AbortAt {
            record_type: record_type.to_string(),
            nth: nth.parse().ok().filter(|n| *n > 0)?,
            seen: 0,
        })
    }

    pub(super) fn before(&mut self, record: &serde_json::Value) {
        if record["type"] != self.record_type.as_str() {
            return;
        }
        self.seen += 1;
        if self.seen == self.nth {
            let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
        }
    }
}

/// Without the feature there is no hook: nothing is read, nothing is ever aborted.
#[cfg(not(feature = "test-hooks"))]
#[derive(Debug)]
pub(super) enum AbortAt {}

#[cfg(not(feature = "test-hooks"))]
impl AbortAt {
    pub(super) fn from_environment() -> Option<AbortAt> {
        None
    }

    pub(super) fn before(&mut self, _record: &serde_json::Value) {
        match *self {}
    }
}
