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
    found.extend(child_imports(module, code, modules));
    found
}

/// The child modules `module` names in `use child::...` (or `use self::child::...`), such as
/// a parent's re-export of what its child defines: a file that imports the parent's name
/// depends on the child as much as if it named the child.
fn child_imports(module: &str, code: &str, modules: &BTreeSet<String>) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for (start, _) in code.match_indices("use ") {
        if code[..start].ends_with(is_ident) {
            continue;
        }
        for path in path_tree(&code[start + "use ".len()..]) {
            let path: Vec<&str> = path
                .iter()
                .map(String::as_str)
                .skip_while(|segment| *segment == "self")
                .collect();
            let Some(child) = path.first() else {
                continue;
            };
            let candidate = format!("{module}::{child}");
            if modules.contains(&candidate) {
                found.insert(candidate);
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
    check_layer(&graph, "user_file", &[]);
    check_layer(&graph, "bench", &["user_file"]);
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
    check_layer(&graph, "config", &["llm", "sandbox", "user_file", "vendor"]);
    check_layer(
        &graph,
        "prompts",
        &["devices", "nvidia", "user_file", "vendor"],
    );
    check_layer(&graph, "slurm", &["config", "devices", "process"]);
    check_layer(
        &graph,
        "agent",
        &[
            "check",
            "config",
            "console",
            "devices",
            "platform",
            "process",
            "profiling",
            "slurm",
            "vendor",
        ],
    );
    check_layer(
        &graph,
        "placement",
        &[
            "agent", "check", "config", "console", "devices", "gpus", "platform", "sandbox",
            "slurm", "vendor",
        ],
    );
}

/// The files of one folder import each other in one direction only, and so do those of each
/// folder inside it. A file that imports something inside a sibling folder (or its parent
/// file, which re-exports it) imports that sibling; a folder's own files may use their parent
/// file, the folder's face to the rest.
fn check_no_circle_in(graph: &BTreeMap<String, BTreeSet<String>>, folder: &str) {
    let prefix = format!("{folder}::");
    let sibling_of = |name: &str| -> Option<String> {
        let rest = name.strip_prefix(&prefix)?;
        let child = rest.split("::").next()?;
        Some(format!("{prefix}{child}"))
    };
    let mut owned: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, imported) in graph {
        let Some(sibling) = sibling_of(module) else {
            continue;
        };
        let targets: Vec<String> = imported
            .iter()
            .filter_map(|name| sibling_of(name))
            .filter(|target| *target != sibling)
            .collect();
        owned.entry(sibling).or_default().extend(targets);
    }
    for sibling in owned.keys() {
        let is_folder = graph
            .keys()
            .any(|module| under(module, sibling) && module != sibling);
        if is_folder {
            check_no_circle_in(graph, sibling);
        }
    }
    let siblings: BTreeMap<&str, Vec<&str>> = owned
        .iter()
        .map(|(module, targets)| {
            (
                module.as_str(),
                targets.iter().map(String::as_str).collect(),
            )
        })
        .collect();
    fn visit<'a>(
        module: &'a str,
        siblings: &BTreeMap<&'a str, Vec<&'a str>>,
        path: &mut Vec<&'a str>,
        done: &mut BTreeSet<&'a str>,
        circles: &mut Vec<String>,
    ) {
        if let Some(at) = path.iter().position(|seen| *seen == module) {
            circles.push(format!("{} -> {module}", path[at..].join(" -> ")));
            return;
        }
        if !done.insert(module) {
            return;
        }
        path.push(module);
        for next in siblings.get(module).into_iter().flatten() {
            visit(next, siblings, path, done, circles);
        }
        path.pop();
    }
    let mut done = BTreeSet::new();
    let mut circles = Vec::new();
    for module in siblings.keys() {
        visit(module, &siblings, &mut Vec::new(), &mut done, &mut circles);
    }
    assert!(circles.is_empty(), "import circles: {circles:#?}");
}

#[test]
fn no_import_circle_among_the_files_of_the_vendor_profiling_slurm_agent_commands_and_process_folders()
 {
    let graph = import_graph();
    for folder in [
        "nvidia",
        "rocm",
        "profiling",
        "devices",
        "slurm",
        "agent",
        "commands",
        "process",
    ] {
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
    // A parent's re-export of its child is an import of the child.
    assert_eq!(
        imports(
            "nvidia",
            "pub(crate) use profile::{C, D};\nuse self::ncu::A;",
            &modules
        ),
        BTreeSet::from(["nvidia::ncu".to_string(), "nvidia::profile".to_string()])
    );
}

/// What the actors crate must never name outside its tests: the search and the actors reach
/// processes, files, the network, the environment and the clock only through their ports
/// (ARCHITECTURE.md, "The purity rule").
const IMPURE: [&str; 6] = [
    "std::process",
    "std::fs",
    "std::net",
    "std::env",
    "Instant::now",
    "SystemTime::now",
];

/// The names of IMPURE that `code` uses, `std::{fs, env::var}` groups included.
fn impure_names(code: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for (start, _) in code.match_indices("std::") {
        if code[..start].ends_with(is_ident) {
            continue;
        }
        for path in path_tree(&code[start..]) {
            let name = path.iter().take(2).cloned().collect::<Vec<_>>().join("::");
            if IMPURE.contains(&name.as_str()) {
                found.insert(name);
            }
        }
    }
    for clock in ["Instant::now", "SystemTime::now"] {
        if code
            .match_indices(clock)
            .any(|(start, _)| !code[..start].ends_with(is_ident))
        {
            found.insert(clock.to_string());
        }
    }
    found
}

#[test]
fn the_reader_of_impure_names_sees_groups_and_clocks() {
    let code =
        "use std::{fs, io, env::var};\nlet t = std::time::Instant::now();\nMyInstant::now();";
    assert_eq!(
        impure_names(code),
        BTreeSet::from([
            "Instant::now".to_string(),
            "std::env".to_string(),
            "std::fs".to_string()
        ])
    );
}

/// Issue 21: the purity rule, as a test.
#[test]
fn the_actors_crate_names_no_process_file_network_environment_or_clock_outside_its_tests() {
    let src = root().join("actors/src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let impure: BTreeMap<String, BTreeSet<String>> = files
        .iter()
        .map(|file| (module_of(&src, file), impure_names(&code_of(file))))
        .filter(|(_, names)| !names.is_empty())
        .collect();
    assert!(
        impure.is_empty(),
        "actors/src names what only the ports may reach: {impure:#?}"
    );
}

/// Issue 21: a resume is folded in one place. The commands pass the Manager plain facts and
/// the records; they never fold the journal themselves nor extract code from a kept reply
/// (the provider does, behind its port, once the run directory has read it).
#[test]
fn the_commands_fold_no_journal_and_extract_no_code() {
    let src = root().join("src/commands");
    let mut files = vec![root().join("src/commands.rs")];
    rust_files(&src, &mut files);
    let named: BTreeMap<String, Vec<&str>> = files
        .iter()
        .map(|file| {
            let code = code_of(file);
            let names = ["SearchState", "extract_kernel_code"]
                .into_iter()
                .filter(|name| code.contains(name))
                .collect::<Vec<_>>();
            (file.display().to_string(), names)
        })
        .filter(|(_, names)| !names.is_empty())
        .collect();
    assert!(
        named.is_empty(),
        "src/commands does what the Manager, the run directory or the provider do: {named:#?}"
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
