//! ARCHITECTURE.md's "Which layer may import which", checked against the code's own imports
//! (issue 12 §5: the import circles llm/http ↔ anthropic/openai/retry, journal ↔ ports and
//! manager ↔ supervisor are broken, and stay broken).
//!
//! What a module imports is read from its files outside their tests: every `use` tree and every
//! `crate::…` path in the code, `super::…` and `self::…` resolved against the file's own module.
//! Comments are skipped.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// A module path inside one crate, from its root: `["llm", "http"]`.
type ModulePath = Vec<String>;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.rs` file under `dir`, with its module path (`src/llm/http.rs` is `llm::http`,
/// `src/llm.rs` is `llm`, `src/lib.rs` and `src/main.rs` the root).
fn modules(dir: &Path) -> Vec<(PathBuf, ModulePath)> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(folder) = pending.pop() {
        for entry in std::fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|ext| ext == "rs") {
                let relative = path.strip_prefix(dir).unwrap().with_extension("");
                let mut module: ModulePath = relative
                    .iter()
                    .map(|part| part.to_string_lossy().into_owned())
                    .collect();
                if module == ["lib"] || module == ["main"] {
                    module.clear();
                }
                found.push((path, module));
            }
        }
    }
    found.sort();
    found
}

/// The file's code outside its tests, without comments.
fn code_of(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let code = text.split("#[cfg(test)]").next().unwrap_or_default();
    code.lines()
        .map(|line| line.split("//").next().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The paths a `use` tree names, flattened: `crate::{a::B, c::{d, e}}` gives `crate::a::B`,
/// `crate::c::d` and `crate::c::e`.
fn flatten(tree: &str) -> Vec<String> {
    let tree: String = tree.chars().filter(|c| !c.is_whitespace()).collect();
    let Some(open) = tree.find('{') else {
        return vec![tree];
    };
    let prefix = &tree[..open];
    let inner = &tree[open + 1..tree.rfind('}').unwrap()];
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (index, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[start..index]);
                start = index + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts
        .into_iter()
        .filter(|part| !part.is_empty())
        .flat_map(|part| flatten(&format!("{prefix}{part}")))
        .collect()
}

/// The `use` trees of the code: each statement from its `use` keyword to its `;`.
fn use_trees(code: &str) -> Vec<&str> {
    const KEYWORDS: [&str; 4] = ["use ", "pub use ", "pub(crate) use ", "pub(super) use "];
    code.split(';')
        .filter_map(|statement| {
            let mut offset = 0;
            let mut tree = None;
            for line in statement.split_inclusive('\n') {
                let trimmed = line.trim_start();
                let indent = line.len() - trimmed.len();
                if let Some(keyword) = KEYWORDS.iter().find(|k| trimmed.starts_with(**k)) {
                    tree = Some(&statement[offset + indent + keyword.len()..]);
                }
                offset += line.len();
            }
            tree
        })
        .collect()
}

/// The modules of its own crate that the file of `module` refers to, as absolute paths.
/// `known` is every module of the crate: a `use` path that starts with a child of a module
/// file's own module (`use http::HttpProvider` in llm.rs) is that child's.
fn imports(
    path: &Path,
    module: &ModulePath,
    is_mod_file: bool,
    known: &BTreeSet<ModulePath>,
) -> BTreeSet<ModulePath> {
    let code = code_of(path);
    let mut paths: Vec<String> = use_trees(&code).into_iter().flat_map(flatten).collect();
    // Paths written in the code itself: `crate::panic_note::latest()`.
    for (index, _) in code.match_indices("crate::") {
        let rest: String = code[index..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
            .collect();
        paths.push(rest);
    }
    // `super` of a folder's file (`llm/http.rs`) is the folder's module (`llm`); `super` of a
    // module file (`llm.rs`) is its parent (the root).
    let parent: ModulePath = module[..module.len().saturating_sub(1)].to_vec();
    paths
        .into_iter()
        .filter_map(|path| {
            let mut segments = path.split("::").filter(|s| !s.is_empty()).peekable();
            let first = *segments.peek()?;
            let child: ModulePath = module.iter().cloned().chain([first.to_string()]).collect();
            let mut resolved: ModulePath = match first {
                "crate" => Vec::new(),
                "super" => parent.clone(),
                "self" => module.clone(),
                _ if is_mod_file && known.contains(&child) => {
                    // The first segment is the child itself: keep it.
                    module.clone()
                }
                _ => return None,
            };
            if matches!(first, "crate" | "super" | "self") {
                segments.next();
            }
            for segment in segments {
                match segment {
                    "super" => {
                        resolved.pop();
                    }
                    "self" | "*" => {}
                    name => resolved.push(name.to_string()),
                }
            }
            Some(resolved)
        })
        .collect()
}

/// Every import of the crate in `src_dir`: (importing module, imported path).
fn graph(src_dir: &str) -> Vec<(ModulePath, ModulePath)> {
    let dir = root().join(src_dir);
    let all = modules(&dir);
    let known: BTreeSet<ModulePath> = all.iter().map(|(_, module)| module.clone()).collect();
    all.iter()
        .flat_map(|(path, module)| {
            // A module file has a folder of its children beside it (or is the crate's root).
            let is_mod_file = module.is_empty() || path.with_extension("").is_dir();
            imports(path, module, is_mod_file, &known)
                .into_iter()
                .map(move |imported| (module.clone(), imported))
        })
        .collect()
}

fn within(path: &ModulePath, prefix: &str) -> bool {
    let prefix: Vec<&str> = prefix.split("::").collect();
    path.len() >= prefix.len() && path.iter().zip(&prefix).all(|(a, b)| a == b)
}

/// No module at or under `from` imports anything at or under `never`.
fn check(src_dir: &str, from: &str, never: &str) {
    let offending: Vec<String> = graph(src_dir)
        .into_iter()
        .filter(|(importer, imported)| within(importer, from) && within(imported, never))
        .map(|(importer, imported)| {
            format!("{} imports {}", importer.join("::"), imported.join("::"))
        })
        .collect();
    assert!(
        offending.is_empty(),
        "{src_dir}: {from} must not import {never} (ARCHITECTURE.md, \"Which layer may import \
         which\"): {offending:#?}"
    );
}

#[test]
fn the_wire_formats_and_the_retry_loop_never_import_the_http_provider() {
    for lower in [
        "llm::anthropic",
        "llm::openai",
        "llm::retry",
        "llm::attempt",
        "llm::retry_after",
    ] {
        check("src", lower, "llm::http");
    }
    check("src", "llm::anthropic", "llm::openai");
    check("src", "llm::openai", "llm::anthropic");
    for upper in ["llm::retry", "llm::anthropic", "llm::openai"] {
        check("src", "llm::attempt", upper);
    }
}

#[test]
fn the_journal_never_imports_the_ports() {
    check("actors/src", "journal", "ports");
}

#[test]
fn the_manager_never_imports_the_supervisor() {
    check("actors/src", "manager", "supervisor");
    check("actors/src", "supervision", "supervisor");
    check("actors/src", "supervision", "manager");
}

#[test]
fn the_device_pin_sits_below_its_users() {
    for user in ["evaluator", "profiling", "platform", "check", "commands"] {
        check("src", "devices", user);
    }
    check("src", "process", "devices");
}

#[test]
fn the_checker_sees_each_kind_of_import() {
    // A `use` tree, a path in the code, `super::` from a folder's file and from a module file.
    let imported: BTreeSet<String> = graph("src")
        .into_iter()
        .filter(|(importer, _)| within(importer, "llm"))
        .map(|(importer, imported)| format!("{} -> {}", importer.join("::"), imported.join("::")))
        .collect();
    for expected in [
        "llm::http -> llm::anthropic::Anthropic",
        "llm::http -> llm::attempt::WireFormat",
        "llm -> llm::http::HttpProvider",
    ] {
        assert!(imported.contains(expected), "{expected} in {imported:#?}");
    }
}
