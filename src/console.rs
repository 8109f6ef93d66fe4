//! Lines for the person at the terminal, on stdout or stderr. Either can be closed under us (a
//! dead log shipper after `| head`, a dropped ssh session): a line that cannot be written is
//! dropped, never a panic. The run directory, not the terminal, is the record.

use std::io::{self, Write};

/// Writes one line to stdout; false when it could not be written.
pub fn out(line: impl std::fmt::Display) -> bool {
    write_line(&mut io::stdout().lock(), line)
}

/// Writes one line to stderr; false when it could not be written.
pub fn err(line: impl std::fmt::Display) -> bool {
    write_line(&mut io::stderr().lock(), line)
}

pub(crate) fn write_line(writer: &mut impl Write, line: impl std::fmt::Display) -> bool {
    writeln!(writer, "{line}")
        .and_then(|()| writer.flush())
        .is_ok()
}
