//! Lines for the person at the terminal, on stdout or stderr. Either can be closed under us
//! (`kactors strategies | head -1`, a dead log shipper, a dropped ssh session): a line that
//! cannot be written is dropped, never a panic (`println!` would exit 101), as ripgrep treats a
//! broken pipe. The run directory, not the terminal, is the record.

use std::fmt::Display;
use std::io::{self, ErrorKind, Write};

/// Writes one line to stdout and flushes it. A reader that went away ends printing quietly;
/// any other failure is said once on stderr.
pub fn out(line: impl Display) {
    if let Err(error) = write_line(&mut io::stdout().lock(), line)
        && error.kind() != ErrorKind::BrokenPipe
    {
        err(format_args!(
            "kactors: warning: failed to write to stdout: {error}"
        ));
    }
}

/// Writes one line to stderr; a stderr that cannot be written drops it.
pub fn err(line: impl Display) {
    let _ = write_line(&mut io::stderr().lock(), line);
}

fn write_line(writer: &mut impl Write, line: impl Display) -> io::Result<()> {
    writeln!(writer, "{line}").and_then(|()| writer.flush())
}
