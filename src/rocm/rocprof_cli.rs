//! What the installed rocprofv3 accepts, read from its own `--help` and `--version`, and the
//! command lines kactors builds from that.
//!
//! Flags moved between releases (profilers.md 1.8): `--pmc` arrived in ROCm 6.3, `-f` and
//! `--version` in 7.0, `--list-metrics` became `--list-avail` in 6.4. Rather than trusting a
//! version table, the options are read from the help text of the binary that will run.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::fmt;
use std::path::Path;

use super::counter_groups::CounterGroup;

/// rocprofiler-sdk version as printed by `rocprofv3 --version` (`version: 1.3.5`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct RocprofVersion {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
}

impl RocprofVersion {
    /// The rocprofv3 of ROCm 10.x (rocprofiler-sdk 1.3.5), the oldest one kactors supports.
    pub const SUPPORTED_FLOOR: Self = Self {
        major: 1,
        minor: 3,
        patch: 5,
    };

    /// Reads `1.3.5`, `1.0.0-rc2`, `1.1` (patch 0); `None` for anything without `major.minor`.
    pub fn parse(text: &str) -> Option<Self> {
        let numeric: String = text
            .trim()
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.')
            .collect();
        let mut parts = numeric.split('.');
        let major = parts.next()?.parse().ok()?;
        let minor = parts.next()?.parse().ok()?;
        let patch = match parts.next() {
            Some("") | None => 0,
            Some(patch) => patch.parse().ok()?,
        };
        Some(Self {
            major,
            minor,
            patch,
        })
    }
}

impl fmt::Display for RocprofVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RocprofCliError {
    #[error(
        "installed rocprofv3 has no {option} option (its --help does not list it); \
         kactors needs it for {purpose}"
    )]
    MissingOption {
        option: &'static str,
        purpose: &'static str,
    },
}

/// The options of the installed rocprofv3 that kactors cares about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RocprofCapabilities {
    /// `None` when `--version` failed (before ROCm 7.0 it does not exist) or printed no
    /// `version:` line.
    pub version: Option<RocprofVersion>,
    pub output_format_long: bool,
    pub output_format_short: bool,
    pub pmc: bool,
    pub kernel_include_regex: bool,
    pub kernel_trace: bool,
    pub stats: bool,
    pub list_avail: bool,
    pub list_metrics: bool,
    pub list_short: bool,
}

impl RocprofCapabilities {
    /// `help` is the stdout of `rocprofv3 --help`; `version_output` the stdout of
    /// `rocprofv3 --version` when it exited 0 (pass `None` otherwise).
    pub fn from_help(help: &str, version_output: Option<&str>) -> Self {
        let options = help_options(help);
        let has = |name: &str| options.contains(name);
        Self {
            version: version_output.and_then(parse_version_output),
            output_format_long: has("--output-format"),
            output_format_short: has("-f"),
            pmc: has("--pmc"),
            kernel_include_regex: has("--kernel-include-regex"),
            kernel_trace: has("--kernel-trace"),
            stats: has("--stats"),
            list_avail: has("--list-avail"),
            list_metrics: has("--list-metrics"),
            list_short: has("-L"),
        }
    }

    /// Lines for the log and the run report: an unsupported or unknown version, and what
    /// kactors does without the options it would like to have.
    pub fn warnings(&self) -> Vec<String> {
        let floor = RocprofVersion::SUPPORTED_FLOOR;
        let mut warnings = Vec::new();
        match self.version {
            Some(version) if version < floor => warnings.push(format!(
                "rocprofv3 {version} is older than {floor} (ROCm 10.1), the oldest version \
                 kactors is tested against; flags are chosen from its --help"
            )),
            Some(_) => {}
            None => warnings.push(format!(
                "rocprofv3 version unknown (`rocprofv3 --version` failed or printed no \
                 version, as before ROCm 7.0); kactors supports {floor} (ROCm 10.1) and newer \
                 and chooses flags from its --help"
            )),
        }
        if !self.pmc {
            warnings.push(
                "rocprofv3 has no --pmc option (ROCm 6.2 or older): counter passes cannot run, \
                 only the timing pass"
                    .to_owned(),
            );
        } else if !self.kernel_include_regex {
            warnings.push(
                "rocprofv3 has no --kernel-include-regex option: counters are collected for \
                 every kernel and the kernels under test are selected from the file"
                    .to_owned(),
            );
        }
        warnings
    }

    /// The arguments that list the counters of the device (`-L` on every release;
    /// its long name changed from `--list-metrics` to `--list-avail`).
    pub fn list_counters_args(&self) -> Result<Vec<OsString>, RocprofCliError> {
        let flag = if self.list_short {
            "-L"
        } else if self.list_avail {
            "--list-avail"
        } else if self.list_metrics {
            "--list-metrics"
        } else {
            return Err(RocprofCliError::MissingOption {
                option: "-L/--list-avail",
                purpose: "listing the counters the device offers",
            });
        };
        Ok(vec![flag.into()])
    }

    fn output_format_flag(&self) -> &'static str {
        // `--output-format` exists on every release; `-f` only since 7.0. Prefer the long one
        // unless the help text shows only the short one.
        if self.output_format_short && !self.output_format_long {
            "-f"
        } else {
            "--output-format"
        }
    }
}

/// `rocprofv3 --kernel-trace --stats --output-format csv -d DIR -o PREFIX -- <python> ARGS`.
///
/// `wrapper_args` is the wrapper script followed by its own arguments. Give `prefix` a `%pid%`
/// (e.g. `timing_%pid%`): every process that loads HIP is profiled and writes its own files, and
/// a per-process name makes a second profiled process visible instead of letting it overwrite
/// the first one's file (`find_outputs` then refuses to choose).
pub fn timing_pass_args(
    capabilities: &RocprofCapabilities,
    out_dir: &Path,
    prefix: &str,
    python: &Path,
    wrapper_args: &[OsString],
) -> Result<Vec<OsString>, RocprofCliError> {
    if !capabilities.kernel_trace {
        return Err(RocprofCliError::MissingOption {
            option: "--kernel-trace",
            purpose: "the timing pass",
        });
    }
    if !capabilities.stats {
        return Err(RocprofCliError::MissingOption {
            option: "--stats",
            purpose: "the timing pass",
        });
    }
    let mut args: Vec<OsString> = vec!["--kernel-trace".into(), "--stats".into()];
    push_output_args(&mut args, capabilities, out_dir, prefix);
    push_application(&mut args, python, wrapper_args);
    Ok(args)
}

/// `rocprofv3 --pmc C1 C2 .. [--kernel-include-regex RE] --output-format csv -d DIR -o PREFIX
/// -- <python> ARGS`: one counter group per invocation, so a group that cannot be collected
/// fails alone. The regex is dropped where rocprofv3 does not accept it (the kernels under test
/// are selected from the file in any case).
pub fn counter_pass_args(
    capabilities: &RocprofCapabilities,
    group: &CounterGroup,
    kernel_regex: Option<&str>,
    out_dir: &Path,
    prefix: &str,
    python: &Path,
    wrapper_args: &[OsString],
) -> Result<Vec<OsString>, RocprofCliError> {
    if !capabilities.pmc {
        return Err(RocprofCliError::MissingOption {
            option: "--pmc",
            purpose: "counter passes (ROCm 6.3 or newer)",
        });
    }
    let mut args: Vec<OsString> = vec!["--pmc".into()];
    args.extend(group.counters().iter().map(OsString::from));
    if let Some(regex) = kernel_regex.filter(|_| capabilities.kernel_include_regex) {
        args.push("--kernel-include-regex".into());
        args.push(regex.into());
    }
    push_output_args(&mut args, capabilities, out_dir, prefix);
    push_application(&mut args, python, wrapper_args);
    Ok(args)
}

fn push_output_args(
    args: &mut Vec<OsString>,
    capabilities: &RocprofCapabilities,
    out_dir: &Path,
    prefix: &str,
) {
    args.push(capabilities.output_format_flag().into());
    args.push("csv".into());
    args.push("-d".into());
    args.push(out_dir.into());
    args.push("-o".into());
    args.push(prefix.into());
}

fn push_application(args: &mut Vec<OsString>, python: &Path, wrapper_args: &[OsString]) {
    args.push("--".into());
    args.push(python.into());
    args.extend(wrapper_args.iter().cloned());
}

/// Option names from argparse help: a line that starts with `-` lists the option's names,
/// separated by `, `, before the first run of two spaces (where its description starts).
/// Both argparse layouts are read: `-f {csv,..} [..], --output-format {csv,..}` (Python before
/// 3.13) and `-f, --output-format {csv,..}` (3.13 and later). Options only mentioned inside
/// descriptions (e.g. the old `--list-counters`) are not options.
fn help_options(help: &str) -> BTreeSet<String> {
    let mut options = BTreeSet::new();
    for line in help.lines() {
        let line = line.trim_start();
        if !line.starts_with('-') {
            continue;
        }
        let invocation = line.split("  ").next().unwrap_or_default();
        for part in invocation.split(", ") {
            let Some(token) = part.split_whitespace().next() else {
                continue;
            };
            let name = token.split(['=', '[']).next().unwrap_or_default();
            if is_option_name(name) {
                options.insert(name.to_owned());
            }
        }
    }
    options
}

fn is_option_name(token: &str) -> bool {
    let body = token
        .strip_prefix("--")
        .or_else(|| token.strip_prefix('-'))
        .unwrap_or_default();
    body.starts_with(|c: char| c.is_ascii_alphabetic())
        && body.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
}

/// `rocprofv3 --version` prints `{key:>16}: {value}` lines; the `version` key is the
/// rocprofiler-sdk version (`rocm_version` is the ROCm release).
fn parse_version_output(output: &str) -> Option<RocprofVersion> {
    output.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        (key.trim() == "version")
            .then(|| RocprofVersion::parse(value))
            .flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rocm::counter_groups::CounterGroup;
    use std::path::PathBuf;

    /// Help text in the layout of the ROCm 7.x/10.x rocprofv3 (argparse, RawTextHelpFormatter,
    /// width 120), abridged; option lines as in its source.
    const HELP_10X: &str = "\
usage: rocprofv3 [options] -- <application> [application options]

ROCProfilerV3 Run Script

options:
  -h, --help            show this help message and exit
  -v, --version         Print the version information and exit

I/O options:
  -o OUTPUT_FILE, --output-file OUTPUT_FILE
                        For the output file name. If nothing specified default path is `%hostname%/%pid%`
  -d OUTPUT_DIRECTORY, --output-directory OUTPUT_DIRECTORY
                        For adding output path where the output files will be saved.
  -f {csv,json,pftrace,otf2,rocpd} [{csv,json,pftrace,otf2,rocpd} ...], --output-format {csv,json,pftrace,otf2,rocpd} [{csv,json,pftrace,otf2,rocpd} ...]
                        For adding output format (supported formats: csv, json, pftrace, otf2, rocpd).
Basic tracing options:
  --kernel-trace [BOOL]
                        For collecting Kernel Dispatch Traces
Counter collection options:
  --pmc [PMC ...]       Specify Performance Monitoring Counters to collect (space-separated).
Post-processing tracing options:
  --stats [BOOL]        For collecting statistics of enabled tracing types. Must be combined with one or more tracing options.
Filtering options:
  --kernel-include-regex REGULAR_EXPRESSION
                        Include the kernels matching this filter from counter-collection and thread-trace data
Display options:
  -L [BOOL], --list-avail [BOOL]
                        List available PC sampling configurations, SPM configurations, and metrics for counter
                        collection. In earlier rocprof versions, this was known as --list-basic, --list-derived and --list-counters
";

    /// The same options in the Python 3.13+ argparse layout (names first, metavar once).
    const HELP_PY313: &str = "\
options:
  -f, --output-format {csv,json,pftrace,otf2,rocpd} [{csv,json,pftrace,otf2,rocpd} ...]
                        For adding output format
  --kernel-trace [BOOL]
  --stats [BOOL]
  --pmc [PMC ...]
  -L, --list-avail [BOOL]
";

    /// ROCm 6.2: no --pmc, no -f, no --version, `-L/--list-metrics`.
    const HELP_62: &str = "\
usage: rocprofv3 [options] -- <application> [application options]
  -i INPUT, --input INPUT
                        Input file for run configuration (JSON or YAML) or counter collection (TXT)
  --output-format {csv,json,pftrace,otf2} [{csv,json,pftrace,otf2} ...]
                        For adding output format (supported formats: csv, json, pftrace, otf2)
  --kernel-trace [BOOL]
                        For Collecting Kernel Dispatch Traces
  --stats [BOOL]        For Collecting statistics of enabled tracing types
  -L [BOOL], --list-metrics [BOOL]
                        List metrics for counter collection
";

    const VERSION_OUTPUT: &str = "            version: 1.3.5
       git_revision: 0a1b2c3
       library_arch: x86_64-linux-gnu
       rocm_version: 10.1.0
";

    fn args_to_strings(args: &[OsString]) -> Vec<String> {
        args.iter()
            .map(|arg| arg.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn reads_the_10x_help_and_version() {
        let capabilities = RocprofCapabilities::from_help(HELP_10X, Some(VERSION_OUTPUT));
        assert_eq!(
            capabilities,
            RocprofCapabilities {
                version: Some(RocprofVersion {
                    major: 1,
                    minor: 3,
                    patch: 5
                }),
                output_format_long: true,
                output_format_short: true,
                pmc: true,
                kernel_include_regex: true,
                kernel_trace: true,
                stats: true,
                list_avail: true,
                list_metrics: false,
                list_short: true,
            }
        );
        assert!(capabilities.warnings().is_empty());
    }

    #[test]
    fn option_mentioned_in_a_description_is_not_an_option() {
        let capabilities = RocprofCapabilities::from_help(HELP_10X, None);
        assert!(!help_options(HELP_10X).contains("--list-counters"));
        assert!(!capabilities.list_metrics);
    }

    #[test]
    fn reads_the_python_313_layout() {
        let capabilities = RocprofCapabilities::from_help(HELP_PY313, None);
        assert!(capabilities.output_format_short && capabilities.output_format_long);
        assert!(capabilities.pmc && capabilities.kernel_trace && capabilities.stats);
        assert!(capabilities.list_short && capabilities.list_avail);
    }

    #[test]
    fn reads_the_62_help_and_warns() {
        let capabilities = RocprofCapabilities::from_help(HELP_62, None);
        assert!(!capabilities.pmc);
        assert!(!capabilities.kernel_include_regex);
        assert!(!capabilities.output_format_short);
        assert!(capabilities.list_metrics && !capabilities.list_avail);
        let warnings = capabilities.warnings();
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(warnings[0].contains("version unknown"));
        assert!(warnings[1].contains("no --pmc"));
    }

    #[test]
    fn warns_below_the_floor() {
        let capabilities = RocprofCapabilities::from_help(HELP_10X, Some("    version: 1.1.0\n"));
        let warnings = capabilities.warnings();
        assert_eq!(warnings.len(), 1);
        assert!(
            warnings[0].contains("1.1.0 is older than 1.3.5"),
            "{warnings:?}"
        );
    }

    #[test]
    fn version_parsing() {
        let check = |text: &str, expected: Option<(u32, u32, u32)>| {
            let parsed = RocprofVersion::parse(text).map(|v| (v.major, v.minor, v.patch));
            assert_eq!(parsed, expected, "{text:?}");
        };
        check("1.3.5", Some((1, 3, 5)));
        check(" 1.0.0-rc2", Some((1, 0, 0)));
        check("1.1", Some((1, 1, 0)));
        check("@FULL_VERSION_STRING@", None);
        check("", None);
        assert!(RocprofVersion::parse("1.3.4") < Some(RocprofVersion::SUPPORTED_FLOOR));
        assert!(RocprofVersion::parse("1.10.0") > Some(RocprofVersion::SUPPORTED_FLOOR));
        assert_eq!(parse_version_output("usage: rocprofv3\n"), None);
    }

    #[test]
    fn timing_pass_command_line() {
        let capabilities = RocprofCapabilities::from_help(HELP_10X, Some(VERSION_OUTPUT));
        let args = timing_pass_args(
            &capabilities,
            Path::new("/run/p/timing"),
            "timing_%pid%",
            Path::new("/venv/bin/python"),
            &["wrapper.py".into(), "--kernel".into(), "k.py".into()],
        )
        .unwrap();
        assert_eq!(
            args_to_strings(&args),
            [
                "--kernel-trace",
                "--stats",
                "--output-format",
                "csv",
                "-d",
                "/run/p/timing",
                "-o",
                "timing_%pid%",
                "--",
                "/venv/bin/python",
                "wrapper.py",
                "--kernel",
                "k.py"
            ]
        );
    }

    #[test]
    fn counter_pass_command_line_with_and_without_regex_support() {
        let group = CounterGroup::new(["FETCH_SIZE"]);
        let python = PathBuf::from("python3");
        let new = RocprofCapabilities::from_help(HELP_10X, Some(VERSION_OUTPUT));
        let args = counter_pass_args(
            &new,
            &group,
            Some("^(k)($|[^A-Za-z0-9_])"),
            Path::new("out"),
            "pmc_%pid%",
            &python,
            &["w.py".into()],
        )
        .unwrap();
        assert_eq!(
            args_to_strings(&args),
            [
                "--pmc",
                "FETCH_SIZE",
                "--kernel-include-regex",
                "^(k)($|[^A-Za-z0-9_])",
                "--output-format",
                "csv",
                "-d",
                "out",
                "-o",
                "pmc_%pid%",
                "--",
                "python3",
                "w.py"
            ]
        );

        let mut without_regex = new.clone();
        without_regex.kernel_include_regex = false;
        let args = counter_pass_args(
            &without_regex,
            &group,
            Some("^k"),
            Path::new("out"),
            "p",
            &python,
            &[],
        )
        .unwrap();
        assert!(!args_to_strings(&args).contains(&"--kernel-include-regex".to_owned()));
    }

    #[test]
    fn short_output_format_flag_only_when_the_long_one_is_missing() {
        let mut capabilities = RocprofCapabilities::from_help(HELP_10X, None);
        assert_eq!(capabilities.output_format_flag(), "--output-format");
        capabilities.output_format_long = false;
        assert_eq!(capabilities.output_format_flag(), "-f");
    }

    #[test]
    fn counter_pass_needs_pmc() {
        let capabilities = RocprofCapabilities::from_help(HELP_62, None);
        let error = counter_pass_args(
            &capabilities,
            &CounterGroup::new(["FETCH_SIZE"]),
            None,
            Path::new("out"),
            "p",
            Path::new("python3"),
            &[],
        )
        .unwrap_err();
        assert!(error.to_string().contains("no --pmc option"), "{error}");
    }

    #[test]
    fn timing_pass_needs_kernel_trace() {
        let capabilities = RocprofCapabilities::from_help("usage: rocprof [options]\n", None);
        let error = timing_pass_args(
            &capabilities,
            Path::new("out"),
            "p",
            Path::new("python3"),
            &[],
        )
        .unwrap_err();
        assert!(error.to_string().contains("--kernel-trace"), "{error}");
    }

    #[test]
    fn list_counters_flag() {
        let args = RocprofCapabilities::from_help(HELP_62, None)
            .list_counters_args()
            .unwrap();
        assert_eq!(args_to_strings(&args), ["-L"]);
        let mut capabilities = RocprofCapabilities::from_help(HELP_62, None);
        capabilities.list_short = false;
        assert_eq!(
            args_to_strings(&capabilities.list_counters_args().unwrap()),
            ["--list-metrics"]
        );
        assert!(
            RocprofCapabilities::from_help("", None)
                .list_counters_args()
                .is_err()
        );
    }
}
