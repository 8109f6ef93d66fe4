//! `kactors completions SHELL`: the shell's completion script for every command and flag, on
//! stdout, from clap's own description of the command line.

use clap::CommandFactory;

use crate::cli::{Cli, CompletionsArgs};
use crate::console;

pub(super) fn completions(args: CompletionsArgs) {
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut Cli::command(), "kactors", &mut script);
    // Through `console`, so that a closed stdout drops the script rather than panicking.
    console::out(String::from_utf8_lossy(&script).trim_end());
}
