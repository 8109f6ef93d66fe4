//! How every command reads a strategy: its file found (built in, or in `--config-dir`), read key
//! by key, and resolved with what the command line overrides. One way for all five commands, so
//! that `kactors check` reads a strategy exactly as the `kactors run` it vouches for.

use crate::cli::ConfigDirArg;
use crate::config::{
    CliOverrides, ConfigError, RunSettings, Strategies, StrategyFile, parse_config, resolve,
};
use crate::vendor::PlatformRequest;

/// A strategy's file and the settings resolved from it.
pub(super) struct LoadedStrategy {
    pub file: StrategyFile,
    pub settings: RunSettings,
}

/// The strategy named `name`, found and resolved with `overrides`. Its warnings are in
/// `settings.warnings`, for the command to print or not.
pub(super) fn load_strategy(
    config_dir: &ConfigDirArg,
    name: &str,
    overrides: &CliOverrides,
) -> Result<LoadedStrategy, ConfigError> {
    let file = Strategies::new(config_dir.config_dir.clone()).find(name)?;
    let settings = settings_of(&file, overrides)?;
    Ok(LoadedStrategy { file, settings })
}

/// The settings of one strategy file, read and resolved with `overrides`.
pub(super) fn settings_of(
    file: &StrategyFile,
    overrides: &CliOverrides,
) -> Result<RunSettings, ConfigError> {
    let config = parse_config(&file.display_name(), &file.text)?;
    resolve(file, &config, overrides)
}

/// The platform as the commands name it: `detected` when the strategy names none.
pub(super) fn platform_name(platform: PlatformRequest) -> &'static str {
    match platform {
        PlatformRequest::Detect => "detected",
        PlatformRequest::Exactly(platform) => platform.name(),
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    fn config_dir(files: &[(&str, &str)]) -> (tempfile::TempDir, ConfigDirArg) {
        let temp = tempfile::tempdir().unwrap();
        for (name, text) in files {
            std::fs::write(temp.path().join(name), text).unwrap();
        }
        let arg = ConfigDirArg {
            config_dir: Some(temp.path().to_path_buf()),
        };
        (temp, arg)
    }

    #[test]
    fn a_strategy_is_found_and_resolved_with_the_command_lines_overrides() {
        let (temp, dir) = config_dir(&[("mine.yaml", "platform: noop\nmax_rounds: 2\n")]);
        let overrides = CliOverrides {
            python: Some(PathBuf::from("/opt/python")),
            max_rounds: Some(7),
            ..CliOverrides::default()
        };
        let loaded = load_strategy(&dir, "mine", &overrides).unwrap();
        assert_eq!(
            loaded.file.display_name(),
            temp.path().join("mine.yaml").display().to_string()
        );
        assert_eq!(loaded.settings.strategy, "mine");
        assert_eq!(loaded.settings.python, PathBuf::from("/opt/python"));
        assert_eq!(loaded.settings.search.max_rounds, 7, "the flag wins");
        assert_eq!(platform_name(loaded.settings.platform), "noop");
        let defaults = settings_of(&loaded.file, &CliOverrides::default()).unwrap();
        assert_eq!(defaults.search.max_rounds, 2, "the file's own value");
        assert_eq!(defaults.python, PathBuf::from("python3"));
    }

    #[test]
    fn each_step_of_loading_names_what_is_wrong() {
        let (_temp, dir) = config_dir(&[
            ("typo.yaml", "platfrom: noop\n"),
            ("zero.yaml", "platform: noop\n"),
        ]);
        let unknown = load_strategy(&dir, "nope", &CliOverrides::default());
        assert!(
            matches!(unknown, Err(ConfigError::UnknownStrategy { ref name, .. }) if name == "nope"),
            "{:?}",
            unknown.err()
        );
        let typo = load_strategy(&dir, "typo", &CliOverrides::default()).err();
        assert!(
            typo.as_ref()
                .is_some_and(|error| error.to_string().contains("did you mean `platform`?")),
            "{typo:?}"
        );
        let zero_rounds = CliOverrides {
            max_rounds: Some(0),
            ..CliOverrides::default()
        };
        let refused = load_strategy(&dir, "zero", &zero_rounds).err();
        assert!(
            matches!(
                refused,
                Some(ConfigError::InvalidFlag {
                    flag: "--max-rounds",
                    ..
                })
            ),
            "{refused:?}"
        );
    }
}
