//! Names the commit the binary was built from, for `kactors --version`: git's, when the source
//! is a git checkout and git runs; otherwise "unknown" (a source tarball, a machine without
//! git), never a failed build.

use std::path::PathBuf;
use std::process::Command;

/// One line of git's answer, if git runs here and answers.
fn git(args: &[&str]) -> Option<String> {
    let output = Command::new("git").args(args).output().ok()?;
    if !output.status.success() {
        return None;
    }
    let line = String::from_utf8(output.stdout).ok()?.trim().to_string();
    (!line.is_empty()).then_some(line)
}

fn main() {
    let commit = git(&["rev-parse", "--short=12", "HEAD"])
        .filter(|hash| hash.chars().all(|c| c.is_ascii_hexdigit()))
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=KACTORS_COMMIT={commit}");
    // Built again when HEAD moves: a new commit, a checkout (in a worktree too, whose refs
    // live in the common folder).
    println!("cargo:rerun-if-changed=build.rs");
    for (flag, inside) in [
        ("--git-dir", "HEAD"),
        ("--git-common-dir", "refs/heads"),
        ("--git-common-dir", "packed-refs"),
    ] {
        if let Some(dir) = git(&["rev-parse", flag]) {
            let path = PathBuf::from(dir).join(inside);
            if path.exists() {
                println!("cargo:rerun-if-changed={}", path.display());
            }
        }
    }
}
