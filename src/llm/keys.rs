//! API keys: read from the environment (or the `.env` file `dot_env` reads for the command),
//! never printed, scrubbed from what a server echoes.

use std::fmt;

/// An API key read from the environment or `.env`. It prints as `[redacted]` so that no Debug or
/// Display of a settings value, error or log line can carry it.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    pub fn new(key: String) -> ApiKey {
        ApiKey(key)
    }

    /// The key itself, for the one header that must carry it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// `text` with every occurrence of the key replaced, for server messages that echo it.
    pub fn scrub(&self, text: &str) -> String {
        if self.0.is_empty() {
            return text.to_string();
        }
        text.replace(&self.0, "[redacted]")
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

impl fmt::Display for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_api_key_never_prints_and_is_scrubbed_from_messages() {
        let key = ApiKey::new("sk-secret".to_string());
        assert_eq!(format!("{key} {key:?}"), "[redacted] [redacted]");
        assert_eq!(
            key.scrub("bad key sk-secret given"),
            "bad key [redacted] given"
        );
        assert_eq!(ApiKey::new(String::new()).scrub("as it is"), "as it is");
    }
}
