//! `kactors strategies`: every strategy that loads, with its platform and search.

use crate::cli::StrategiesArgs;
use crate::config::{CliOverrides, Strategies};
use crate::console;

use super::CommandError;
use super::settings::{platform_name, settings_of};

/// `kactors strategies`: every strategy that loads. A file of the config dir that is not one
/// (KernelAgent keeps a technique taxonomy beside its configurations) is skipped and named with
/// the reason, on stderr, or under `skipped` with `--json`.
pub(super) fn strategies(args: StrategiesArgs) -> Result<(), CommandError> {
    let mut rows = Vec::new();
    let mut skipped = Vec::new();
    for file in Strategies::new(args.config_dir.config_dir).all()? {
        let settings = match settings_of(&file, &CliOverrides::default()) {
            Ok(settings) => settings,
            Err(error) => {
                skipped.push(serde_json::json!({
                    "file": file.display_name(),
                    "reason": error.to_string(),
                }));
                continue;
            }
        };
        let search = settings.search;
        rows.push(serde_json::json!({
            "name": file.name,
            "platform": platform_name(settings.platform),
            "search": format!("{} {}×{}", search.strategy, search.num_top_kernels, search.num_bottlenecks),
            "file": file.display_name(),
        }));
    }
    if args.json {
        console::out(serde_json::json!({ "strategies": rows, "skipped": skipped }));
        return Ok(());
    }
    const HEADER: [&str; 4] = ["STRATEGY", "PLATFORM", "SEARCH (N×M)", "FILE"];
    let name_width = rows
        .iter()
        .map(|row| row["name"].as_str().unwrap_or_default().chars().count())
        .chain([HEADER[0].len()])
        .max()
        .unwrap_or(0);
    let line = |cells: [&str; 4]| {
        console::out(format_args!(
            "{:<name_width$} {:<9} {:<20} {}",
            cells[0], cells[1], cells[2], cells[3]
        ));
    };
    line(HEADER);
    for row in &rows {
        let cell = |key: &str| row[key].as_str().unwrap_or_default().to_string();
        line([
            &cell("name"),
            &cell("platform"),
            &cell("search"),
            &cell("file"),
        ]);
    }
    for file in &skipped {
        console::err(format_args!(
            "kactors: warning: skipped {}",
            file["reason"].as_str().unwrap_or_default()
        ));
    }
    Ok(())
}
