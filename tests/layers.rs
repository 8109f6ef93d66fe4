//! The import directions ARCHITECTURE.md states ("Which layer may import which"), read from the
//! code's own `crate::` and `super::` paths outside its test modules, and the one vendor type
//! (issue 12, sections 4 and 5). A change that breaks one fails here, naming the file and what
//! it imports.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn rust_files(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, found);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            found.push(path);
        }
    }
}

/// `src/nvidia/ncu.rs` is `nvidia::ncu`, `src/profiling.rs` is `profiling`.
fn module_of(src: &Path, file: &Path) -> String {
    let relative = file.strip_prefix(src).unwrap().with_extension("");
    relative
        .components()
        .map(|part| part.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("::")
}

/// The code a module compiles outside its tests: line comments (doc links) and the trailing
/// `mod tests` left out.
fn code_of(file: &Path) -> String {
    let text = std::fs::read_to_string(file).unwrap();
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(start) => &text[..start],
        None => &text,
    };
    text.lines()
        .map(|line| line.find("//").map_or(line, |start| &line[..start]))
        .collect::<Vec<_>>()
        .join("\n")
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The paths of a path tree such as `a::{b::c, d}` at the start of `text`.
fn path_tree(text: &str) -> Vec<Vec<String>> {
    let mut segments = Vec::new();
    let mut rest = text;
    loop {
        let length = rest.find(|c: char| !is_ident(c)).unwrap_or(rest.len());
        if length > 0 {
            segments.push(rest[..length].to_string());
        }
        rest = rest[length..].trim_start();
        if let Some(after) = rest.strip_prefix("::") {
            rest = after.trim_start();
            if let Some(group) = rest.strip_prefix('{') {
                return group_members(group)
                    .into_iter()
                    .flat_map(|member| path_tree(member.trim()))
                    .map(|tail| segments.iter().cloned().chain(tail).collect())
                    .collect();
            }
        } else {
            return vec![segments];
        }
    }
}

/// The comma-separated members of a `{...}` group whose opening brace is already consumed.
fn group_members(text: &str) -> Vec<&str> {
    let (mut depth, mut start, mut members) = (0, 0, Vec::new());
    for (index, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                members.push(&text[start..index]);
                return members;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                members.push(&text[start..index]);
                start = index + 1;
            }
            _ => {}
        }
    }
    members
}

/// The crate's modules that `module`'s code names through `crate::` or `super::` paths: for
/// each path, the longest prefix that is a module of its own file.
fn imports(module: &str, code: &str, modules: &BTreeSet<String>) -> BTreeSet<String> {
    let own: Vec<&str> = module.split("::").collect();
    let mut found = BTreeSet::new();
    for (start, _) in code
        .match_indices("crate::")
        .chain(code.match_indices("super::"))
    {
        if code[..start].ends_with(is_ident) {
            continue;
        }
        for path in path_tree(&code[start..]) {
            let mut full: Vec<&str> = Vec::new();
            for (index, segment) in path.iter().enumerate() {
                match (index, segment.as_str()) {
                    (0, "crate") => {}
                    (0, "super") => full.extend(&own[..own.len() - 1]),
                    (_, "super") => {
                        full.pop();
                    }
                    (_, name) => full.push(name),
                }
            }
            while !full.is_empty() {
                let candidate = full.join("::");
                if modules.contains(&candidate) {
                    if candidate != module {
                        found.insert(candidate);
                    }
                    break;
                }
                full.pop();
            }
        }
    }
    found
}

/// Every module of the crate whose sources are in `src_dir` (src, or actors/src) and what it
/// imports.
fn import_graph_of(src_dir: &str) -> BTreeMap<String, BTreeSet<String>> {
    let src = root().join(src_dir);
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let modules: BTreeSet<String> = files.iter().map(|file| module_of(&src, file)).collect();
    files
        .iter()
        .map(|file| {
            let module = module_of(&src, file);
            let imported = imports(&module, &code_of(file), &modules);
            (module, imported)
        })
        .collect()
}

fn import_graph() -> BTreeMap<String, BTreeSet<String>> {
    import_graph_of("src")
}

/// Whether `module` is `prefix` or inside it.
fn under(module: &str, prefix: &str) -> bool {
    module == prefix || module.starts_with(&format!("{prefix}::"))
}

/// No module under `from` imports one under `never`.
fn check_never(graph: &BTreeMap<String, BTreeSet<String>>, from: &str, never: &str) {
    for (module, imported) in graph.iter().filter(|(module, _)| under(module, from)) {
        let wrong: Vec<&String> = imported.iter().filter(|name| under(name, never)).collect();
        assert!(
            wrong.is_empty(),
            "{module} imports {wrong:?}: {from} must never import {never}"
        );
    }
}

fn top(module: &str) -> &str {
    module.split("::").next().unwrap_or(module)
}

/// Each module under `layer` imports, outside itself, only modules under `allowed`.
fn check_layer(graph: &BTreeMap<String, BTreeSet<String>>, layer: &str, allowed: &[&str]) {
    for (module, imported) in graph.iter().filter(|(module, _)| top(module) == layer) {
        let outside: Vec<&String> = imported
            .iter()
            .filter(|name| top(name) != layer && !allowed.contains(&top(name)))
            .collect();
        assert!(
            outside.is_empty(),
            "{module} imports {outside:?}; {layer} may import only {allowed:?}"
        );
    }
}

#[test]
fn each_layer_imports_only_the_layers_below_it() {
    let graph = import_graph();
    check_layer(&graph, "vendor", &[]);
    check_layer(
        &graph,
        "profiling",
        &["process", "sandbox", "signals", "devices", "vendor"],
    );
    check_layer(&graph, "sandbox", &["process"]);
    check_layer(&graph, "nvidia", &["profiling", "devices"]);
    check_layer(&graph, "rocm", &["profiling", "devices"]);
    check_layer(
        &graph,
        "platform_profiler",
        &["nvidia", "rocm", "profiling"],
    );
    check_layer(&graph, "devices", &["process", "vendor"]);
    check_layer(&graph, "config", &["llm", "sandbox", "vendor"]);
    check_layer(&graph, "prompts", &["devices", "nvidia", "vendor"]);
    check_layer(&graph, "slurm", &["config", "devices", "process"]);
    check_layer(
        &graph,
        "agent",
        &[
            "check",
            "config",
            "devices",
            "platform",
            "process",
            "profiling",
            "slurm",
            "vendor",
        ],
    );
}

/// The files of one folder import each other in one direction only.
fn check_no_circle_in(graph: &BTreeMap<String, BTreeSet<String>>, folder: &str) {
    let prefix = format!("{folder}::");
    let siblings: BTreeMap<&str, Vec<&str>> = graph
        .iter()
        .filter(|(module, _)| module.starts_with(&prefix))
        .map(|(module, imported)| {
            let inside = imported
                .iter()
                .filter(|name| name.starts_with(&prefix))
                .map(String::as_str)
                .collect();
            (module.as_str(), inside)
        })
        .collect();
    fn visit<'a>(
        module: &'a str,
        siblings: &BTreeMap<&'a str, Vec<&'a str>>,
        path: &mut Vec<&'a str>,
        done: &mut BTreeSet<&'a str>,
    ) {
        if let Some(at) = path.iter().position(|seen| *seen == module) {
            panic!("import circle: {} -> {module}", path[at..].join(" -> "));
        }
        if !done.insert(module) {
            return;
        }
        path.push(module);
        for next in siblings.get(module).into_iter().flatten() {
            visit(next, siblings, path, done);
        }
        path.pop();
    }
    let mut done = BTreeSet::new();
    for module in siblings.keys() {
        visit(module, &siblings, &mut Vec::new(), &mut done);
    }
}

#[test]
fn no_import_circle_among_the_files_of_the_vendor_profiling_slurm_and_agent_folders() {
    let graph = import_graph();
    for folder in ["nvidia", "rocm", "profiling", "devices", "slurm", "agent"] {
        check_no_circle_in(&graph, folder);
    }
}

#[test]
fn the_import_reader_sees_groups_nested_paths_and_super() {
    let modules: BTreeSet<String> = ["nvidia", "nvidia::ncu", "nvidia::profile", "profiling"]
        .into_iter()
        .map(String::from)
        .collect();
    let code = "use super::{ncu::{A, B}, profile::C};\nfn f() { crate::profiling::run(); }";
    assert_eq!(
        imports("nvidia::profiler", code, &modules),
        BTreeSet::from([
            "nvidia::ncu".to_string(),
            "nvidia::profile".to_string(),
            "profiling".to_string()
        ])
    );
    assert_eq!(
        imports("nvidia", "use crate::nvidia::ncu;", &modules),
        BTreeSet::from(["nvidia::ncu".to_string()])
    );
}

/// The names of the enums declared in `code` whose variants include the unit variants
/// `Nvidia` and `Rocm`: a vendor, written out once more.
fn vendor_enums(code: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (start, _) in code.match_indices("enum ") {
        let rest = &code[start + 5..];
        let name: String = rest.chars().take_while(|c| is_ident(*c)).collect();
        let Some(open) = rest.find('{') else { continue };
        let body = &rest[open + 1..];
        let body = &body[..body.find("\n}").unwrap_or(body.len())];
        let unit = |variant: &str| {
            body.lines()
                .any(|line| line.trim() == format!("{variant},"))
        };
        if unit("Nvidia") && unit("Rocm") {
            found.push(name);
        }
    }
    found
}

#[test]
fn the_vendor_is_one_type() {
    let mut files = Vec::new();
    rust_files(&root().join("src"), &mut files);
    rust_files(&root().join("actors/src"), &mut files);
    let declared: Vec<String> = files
        .iter()
        .flat_map(|file| {
            let relative = file.strip_prefix(root()).unwrap().display().to_string();
            vendor_enums(&code_of(file))
                .into_iter()
                .map(move |name| format!("{relative}: {name}"))
        })
        .collect();
    assert_eq!(declared, ["actors/src/model.rs: Vendor"]);
}

#[test]
fn the_wire_formats_and_the_retry_loop_never_import_the_http_provider() {
    let graph = import_graph();
    for lower in [
        "llm::anthropic",
        "llm::openai",
        "llm::retry",
        "llm::attempt",
        "llm::retry_after",
    ] {
        check_never(&graph, lower, "llm::http");
    }
    check_never(&graph, "llm::anthropic", "llm::openai");
    check_never(&graph, "llm::openai", "llm::anthropic");
    for upper in ["llm::retry", "llm::anthropic", "llm::openai"] {
        check_never(&graph, "llm::attempt", upper);
    }
}

#[test]
fn the_journal_never_imports_the_ports_and_the_manager_never_the_supervisor() {
    let graph = import_graph_of("actors/src");
    check_never(&graph, "journal", "ports");
    check_never(&graph, "manager", "supervisor");
    check_never(&graph, "supervision", "supervisor");
    check_never(&graph, "supervision", "manager");
}

#[test]
fn the_device_pin_sits_below_its_users() {
    let graph = import_graph();
    for user in ["evaluator", "profiling", "platform", "check", "commands"] {
        check_never(&graph, "devices", user);
    }
    check_never(&graph, "process", "devices");
}
