//! The Nsight Compute 2025.3.1 captures from an H200 under tests/fixtures/ncu-2025.3.1-h200,
//! which the ncu command line, the CSV parser and the summary are all tested against.

use super::ncu_csv::{NcuReport, parse_ncu_csv};

/// The capture `name`, as ncu wrote it.
pub(crate) fn text(name: &str) -> String {
    let path = format!(
        "{}/tests/fixtures/ncu-2025.3.1-h200/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("reading {path}: {error}"))
}

/// The capture `name`, parsed.
pub(crate) fn parsed(name: &str) -> NcuReport {
    parse_ncu_csv(&text(name)).unwrap_or_else(|error| panic!("{name}: {error}"))
}
