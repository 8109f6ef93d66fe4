//! What the commands print on stdout. A closed stdout (`kactors strategies | head -1`, a reader
//! that went away) is not an error: printing stops quietly, as ripgrep treats a broken pipe,
//! where `println!` would panic and exit 101.

use std::fmt::Display;
use std::io::{ErrorKind, Write};

/// Writes `text` followed by a newline to stdout and flushes it.
pub fn print_line(text: impl Display) {
    let mut stdout = std::io::stdout().lock();
    let written = writeln!(stdout, "{text}").and_then(|()| stdout.flush());
    if let Err(error) = written
        && error.kind() != ErrorKind::BrokenPipe
    {
        let _ = writeln!(
            std::io::stderr(),
            "kactors: warning: failed to write to stdout: {error}"
        );
    }
}
