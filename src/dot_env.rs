//! API keys from a `.env` file in the working directory, for an HTTP provider whose key is not
//! in the environment (the environment wins). `KEY=VALUE` lines, blank lines and `#` comments
//! ignored, an optional `export ` before the key, the value optionally in single or double
//! quotes. The file is read through the bounded reader, never written; its values never
//! print (errors name the file and the line, never what is on it), and never enter kactors'
//! environment, so no child can inherit them.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use crate::user_file::{self, MAX_SETTINGS_BYTES, UserFileError};

/// The file's name, in the working directory.
pub const FILE_NAME: &str = ".env";

#[derive(Debug, thiserror::Error)]
pub enum DotEnvError {
    #[error(transparent)]
    File(#[from] UserFileError),
    #[error(
        "{path}, line {line}: not a KEY=VALUE line ({why}); .env holds lines such as \
         OPENAI_API_KEY=sk-…, blank lines and # comments"
    )]
    Line {
        path: PathBuf,
        line: usize,
        why: &'static str,
    },
}

/// The variables of a `.env` file (none when there is no file).
pub struct DotEnv {
    path: PathBuf,
    values: BTreeMap<String, String>,
}

// The values are keys: a Debug of them would print them.
impl fmt::Debug for DotEnv {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DotEnv")
            .field("path", &self.path)
            .field("names", &self.values.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl DotEnv {
    /// `dir/.env`, read if it is there.
    pub fn load(dir: &Path) -> Result<DotEnv, DotEnvError> {
        let path = std::path::absolute(dir.join(FILE_NAME)).unwrap_or_else(|_| dir.join(FILE_NAME));
        let text = match user_file::read_text(&path, MAX_SETTINGS_BYTES) {
            Ok(text) => text,
            Err(error) if error.is_missing() => String::new(),
            Err(error) => return Err(error.into()),
        };
        let values = parse(&text).map_err(|(line, why)| DotEnvError::Line {
            path: path.clone(),
            line,
            why,
        })?;
        Ok(DotEnv { path, values })
    }

    /// Where the file is (or would be).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A variable: from the environment if it is set there and not blank, else from the file.
    pub fn get(&self, name: &str) -> Option<String> {
        std::env::var(name)
            .ok()
            .filter(|value| !value.trim().is_empty())
            .or_else(|| self.values.get(name).cloned())
    }
}

fn is_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|first| first.is_ascii_alphabetic() || first == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The variables of a `.env` text, or the first line (from 1) that is not one, and why.
fn parse(text: &str) -> Result<BTreeMap<String, String>, (usize, &'static str)> {
    let mut values = BTreeMap::new();
    for (index, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").map_or(line, str::trim_start);
        let Some((name, value)) = line.split_once('=') else {
            return Err((index + 1, "it has no `=`"));
        };
        let name = name.trim();
        if !is_name(name) {
            return Err((index + 1, "the name before `=` is not a variable name"));
        }
        let value = value.trim();
        let value = match value.chars().next() {
            Some(quote @ ('"' | '\'')) => match value[1..].find(quote) {
                Some(end) => &value[1..=end],
                None => return Err((index + 1, "its quote is not closed")),
            },
            // An unquoted value ends where a comment starts.
            _ => value.split(" #").next().unwrap_or_default().trim_end(),
        };
        values.insert(name.to_string(), value.to_string());
    }
    Ok(values)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_line_form_is_read_and_comments_and_blank_lines_are_not() {
        let text = "# keys for kactors\n\nOPENAI_API_KEY=sk-plain # the project's\n\
                    export ANTHROPIC_API_KEY = \"sk-ant quoted # not a comment\"\n\
                    export  OTHER='single'\nEMPTY=\n";
        let values = parse(text).unwrap();
        let expected: BTreeMap<String, String> = [
            ("ANTHROPIC_API_KEY", "sk-ant quoted # not a comment"),
            ("EMPTY", ""),
            ("OPENAI_API_KEY", "sk-plain"),
            ("OTHER", "single"),
        ]
        .into_iter()
        .map(|(name, value)| (name.to_string(), value.to_string()))
        .collect();
        assert_eq!(values, expected);
    }

    #[test]
    fn a_line_that_is_not_a_variable_is_refused_by_its_number_without_its_text() {
        for (text, line, why) in [
            ("A=1\nsk-secret-on-its-own\n", 2, "it has no `=`"),
            (
                "9LIVES=1\n",
                1,
                "the name before `=` is not a variable name",
            ),
            ("\nKEY=\"sk-secret\n", 2, "its quote is not closed"),
        ] {
            assert_eq!(parse(text), Err((line, why)), "{text:?}");
        }
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(".env"), "sk-secret-on-its-own\n").unwrap();
        let message = DotEnv::load(dir.path()).unwrap_err().to_string();
        assert!(
            message.contains(".env, line 1: not a KEY=VALUE line"),
            "{message}"
        );
        assert!(!message.contains("sk-secret"), "{message}");
    }

    #[test]
    fn no_file_is_no_variables_and_the_values_never_print() {
        let dir = tempfile::tempdir().unwrap();
        let empty = DotEnv::load(dir.path()).unwrap();
        assert_eq!(empty.get("KACTORS_TEST_DOT_ENV_UNSET"), None);
        std::fs::write(
            dir.path().join(".env"),
            "KACTORS_TEST_DOT_ENV_ONLY=sk-from-the-file\n",
        )
        .unwrap();
        let loaded = DotEnv::load(dir.path()).unwrap();
        assert_eq!(
            loaded.get("KACTORS_TEST_DOT_ENV_ONLY").as_deref(),
            Some("sk-from-the-file")
        );
        assert!(!format!("{loaded:?}").contains("sk-from-the-file"));
        // kactors' own environment, which every child's is made from, never holds it.
        assert!(std::env::var_os("KACTORS_TEST_DOT_ENV_ONLY").is_none());
    }
}
