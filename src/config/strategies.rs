//! Finding a strategy's file: `--strategy NAME` is `configs/NAME.yaml`. The shipped files are
//! compiled into the binary so that an installed kactors works from any directory; a
//! `--config-dir` (or KACTORS_CONFIG_DIR) adds files and overrides shipped ones of the same name.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::schema::ConfigError;
use crate::user_file::{MAX_SETTINGS_BYTES, read_text};

const SHIPPED: &[(&str, &str)] = &[
    ("amd", include_str!("../../configs/amd.yaml")),
    (
        "beam_search",
        include_str!("../../configs/beam_search.yaml"),
    ),
    ("greedy", include_str!("../../configs/greedy.yaml")),
    ("noop", include_str!("../../configs/noop.yaml")),
    ("nvidia", include_str!("../../configs/nvidia.yaml")),
];

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StrategySource {
    Shipped,
    File(PathBuf),
}

#[derive(Clone, Debug)]
pub struct StrategyFile {
    pub name: String,
    pub source: StrategySource,
    pub text: String,
}

impl StrategyFile {
    /// How errors and run.yaml name the file.
    pub fn display_name(&self) -> String {
        match &self.source {
            StrategySource::Shipped => format!("configs/{}.yaml (built in)", self.name),
            StrategySource::File(path) => path.display().to_string(),
        }
    }

    /// Where paths inside the file (templates) are relative to; none for a shipped file.
    pub fn directory(&self) -> Option<&Path> {
        match &self.source {
            StrategySource::Shipped => None,
            StrategySource::File(path) => path.parent(),
        }
    }
}

pub struct Strategies {
    config_dir: Option<PathBuf>,
}

impl Strategies {
    pub fn new(config_dir: Option<PathBuf>) -> Self {
        Strategies { config_dir }
    }

    /// Every strategy that can be used, by name: shipped ones, overridden by the config dir's.
    pub fn all(&self) -> Result<Vec<StrategyFile>, ConfigError> {
        let mut found: BTreeMap<String, StrategyFile> = SHIPPED
            .iter()
            .map(|(name, text)| {
                let file = StrategyFile {
                    name: name.to_string(),
                    source: StrategySource::Shipped,
                    text: text.to_string(),
                };
                (name.to_string(), file)
            })
            .collect();
        if let Some(dir) = &self.config_dir {
            let entries = std::fs::read_dir(dir).map_err(|source| ConfigError::Read {
                path: dir.clone(),
                source,
            })?;
            for entry in entries {
                let path = entry
                    .map_err(|source| ConfigError::Read {
                        path: dir.clone(),
                        source,
                    })?
                    .path();
                let Some(name) = path.file_stem().and_then(|s| s.to_str()) else {
                    continue;
                };
                if path.extension().is_none_or(|ext| ext != "yaml") {
                    continue;
                }
                let text = read_text(&path, MAX_SETTINGS_BYTES)?;
                found.insert(
                    name.to_string(),
                    StrategyFile {
                        name: name.to_string(),
                        source: StrategySource::File(path),
                        text,
                    },
                );
            }
        }
        Ok(found.into_values().collect())
    }

    pub fn find(&self, name: &str) -> Result<StrategyFile, ConfigError> {
        let all = self.all()?;
        let names: Vec<String> = all.iter().map(|file| file.name.clone()).collect();
        let valid: Vec<&str> = names.iter().map(String::as_str).collect();
        let nearest = super::schema::nearest(name, &valid).map(str::to_string);
        all.into_iter()
            .find(|file| file.name == name)
            .ok_or_else(|| ConfigError::UnknownStrategy {
                name: name.to_string(),
                nearest,
                available: names.join(", "),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse_config;

    #[test]
    fn every_shipped_strategy_parses() {
        for file in Strategies::new(None).all().unwrap() {
            parse_config(&file.display_name(), &file.text).unwrap_or_else(|e| panic!("{e}"));
        }
    }

    /// Issue 22: a shipped strategy for GPUs uses every visible device unless a flag says
    /// otherwise; greedy keeps its one worker (one parent, two proposals a round).
    #[test]
    fn shipped_gpu_strategies_set_no_worker_count() {
        for name in ["beam_search", "nvidia", "amd"] {
            let file = Strategies::new(None).find(name).unwrap();
            let config = parse_config(&file.display_name(), &file.text).unwrap();
            assert_eq!(config.num_workers, None, "{name}");
        }
    }

    #[test]
    fn a_config_dir_adds_and_overrides_strategies() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("mine.yaml"), "strategy: greedy\n").unwrap();
        std::fs::write(
            dir.path().join("noop.yaml"),
            "platform: noop\nmax_rounds: 1\n",
        )
        .unwrap();
        let strategies = Strategies::new(Some(dir.path().to_path_buf()));
        assert!(matches!(
            strategies.find("mine").unwrap().source,
            StrategySource::File(_)
        ));
        assert_eq!(
            strategies.find("noop").unwrap().text,
            "platform: noop\nmax_rounds: 1\n"
        );
        assert!(matches!(
            strategies.find("nvidia").unwrap().source,
            StrategySource::Shipped
        ));
    }

    #[test]
    fn an_unknown_strategy_lists_the_ones_there_are() {
        let message = Strategies::new(None)
            .find("fastest")
            .unwrap_err()
            .to_string();
        assert_eq!(
            message,
            "unknown strategy `fastest`: expected one of amd, beam_search, greedy, noop, nvidia (configs/<name>.yaml, built in or in --config-dir)"
        );
        // Issue 22: a typo is answered with the strategy it is one of.
        let typo = Strategies::new(None).find("nvdia").unwrap_err().to_string();
        assert!(
            typo.starts_with("unknown strategy `nvdia`: did you mean `nvidia`? expected one of"),
            "{typo}"
        );
    }
}
