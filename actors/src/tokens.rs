//! When two proposals are the same kernel: LLMs often return a kernel again with other comments,
//! blank lines or spacing. Two sources are the same when their Python token streams are
//! (comments, blank lines, trailing whitespace and spacing inside a line ignored; indentation
//! and every name, number, string and operator kept). A source that does not tokenize (a
//! syntax error) is compared by its text, trailing whitespace and blank lines aside.

use std::fmt::{self, Write as _};

use rustpython_parser::{Mode, lexer::lex};
use sha2::{Digest, Sha256};

/// A fingerprint of a source's token stream (its SHA-256): equal for the same kernel written
/// differently. 32 bytes, not hex: a run keeps one for every candidate it made.
pub type SameCodeKey = [u8; 32];

/// A source's `SameCodeKey`.
pub fn same_code_key(source: &str) -> SameCodeKey {
    #[cfg(test)]
    TOKENIZED.with(|count| count.set(count.get() + 1));
    // The canonical stream goes straight into the hash: a resume keys every proposal again,
    // and building it as a string, a formatted token at a time, was most of that cost.
    let mut canonical = HashWriter(Sha256::new());
    for token in lex(source, Mode::Module) {
        // The lexer, built without its full-lexer feature, yields neither comments nor the
        // newlines of blank lines.
        let Ok((token, _)) = token else {
            return text_key(source);
        };
        let _ = writeln!(canonical, "{token:?}");
    }
    canonical.0.finalize().into()
}

#[cfg(test)]
thread_local! {
    /// How many sources this thread has tokenized: what tests of the key's caching count.
    pub static TOKENIZED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// A `fmt::Write` that hashes what is written to it.
struct HashWriter(Sha256);

impl fmt::Write for HashWriter {
    fn write_str(&mut self, text: &str) -> fmt::Result {
        self.0.update(text.as_bytes());
        Ok(())
    }
}

fn text_key(source: &str) -> SameCodeKey {
    let lines: Vec<&str> = source
        .lines()
        .map(str::trim_end)
        .filter(|line| !line.is_empty())
        .collect();
    Sha256::digest(format!("text\n{}", lines.join("\n"))).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn same(a: &str, b: &str) -> bool {
        same_code_key(a) == same_code_key(b)
    }

    #[test]
    fn comments_blank_lines_and_spacing_do_not_make_another_kernel() {
        let kernel = "import triton\n\ndef kernel_function(a, b):\n    return a + b\n";
        assert!(same(
            kernel,
            "# a faster kernel\nimport triton\n\n\n\ndef kernel_function(a,b):  # fused\n    return a+b   \n\n"
        ));
    }

    #[test]
    fn names_numbers_strings_operators_and_indentation_do() {
        let kernel = "def kernel_function(a, b):\n    if a:\n        return a + b\n    return b\n";
        for other in [
            "def kernel_function(a, c):\n    if a:\n        return a + c\n    return c\n",
            "def kernel_function(a, b):\n    if a:\n        return a - b\n    return b\n",
            "def kernel_function(a, b):\n    if a:\n        return a + b\n        return b\n",
            "def kernel_function(a, b):\n    if a:\n        return a + b\n    return b  # '#'\n    x = '#'\n",
        ] {
            assert!(!same(kernel, other), "{other}");
        }
        assert!(!same("BLOCK = 128\n", "BLOCK = 256\n"));
        assert!(!same("s = 'a # b'\n", "s = 'a'\n"));
    }

    #[test]
    fn a_source_that_does_not_tokenize_is_compared_by_its_text() {
        assert!(same("def f(:\n  'open\n", "def f(:   \n\n  'open\n"));
        assert!(!same("def f(:\n  'open\n", "def g(:\n  'open\n"));
    }
}
