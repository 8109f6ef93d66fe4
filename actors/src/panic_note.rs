//! The message of the latest panic, for the Supervisor's report of an actor that died.
//!
//! actix gives no supervision we can use: a panic inside a handler ends that actor's task, and
//! the actor is dropped after tokio has caught the panic. What was said is kept here by a panic
//! hook (installed once per process, chained to the hook before it) until the dead actor's
//! guard reads it.

use std::sync::{Mutex, Once};

static LATEST: Mutex<Option<String>> = Mutex::new(None);
static INSTALL: Once = Once::new();

/// Installs the hook, once; the hook before it (the default one prints to stderr) still runs.
pub fn install() {
    INSTALL.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let payload = info.payload();
            let text = payload
                .downcast_ref::<&str>()
                .map(|text| text.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic without a message".into());
            let message = match info.location() {
                Some(at) => format!("{text} (at {}:{})", at.file(), at.line()),
                None => text,
            };
            if let Ok(mut latest) = LATEST.lock() {
                *latest = Some(message);
            }
            previous(info);
        }));
    });
}

/// The latest panic's message and where it happened, if any panic was seen since `install`.
pub fn latest() -> Option<String> {
    LATEST.lock().ok().and_then(|latest| latest.clone())
}
