//! The hub's imports point one way (ARCHITECTURE.md, "fieldhub-hub"): every
//! `crate::…` and `super::…` path in the non-test code of `src/` is an edge
//! from the file that names it to the module it names. Between the layers,
//! an edge may only point down [`LAYERS`]; inside a layer's folder, the files
//! form no cycle (a folder's `mod.rs` declares and re-exports its children,
//! so a child that names an item of `mod.rs` closes a cycle too).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The hub's layers, top to bottom: each may use the ones below it, never
/// one above. `""` is the crate root (`lib.rs`: `Hub`, which wires them).
const LAYERS: &[&str] =
    &["", "check", "control", "federation", "transport", "session", "bus_thread", "recording", "config", "fatal"];

/// A module path (`config::access`) → its file, for every file of `src/`.
fn modules(src: &Path) -> BTreeMap<String, PathBuf> {
    let mut found = BTreeMap::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let relative = path.strip_prefix(src).unwrap().with_extension("");
            let mut parts: Vec<String> = relative.iter().map(|p| p.to_string_lossy().into_owned()).collect();
            if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
                parts.pop();
            }
            found.insert(parts.join("::"), path);
        }
    }
    found
}

/// The file's text without its `#[cfg(test)]` items: tests may reach anywhere.
fn non_test_code(text: &str) -> String {
    let mut kept = String::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        // Comments name modules too (doc links), but they import nothing.
        if line.trim_start().starts_with("//") {
            continue;
        }
        if line.trim() != "#[cfg(test)]" {
            kept.push_str(line);
            kept.push('\n');
            continue;
        }
        // Skip the item that follows: to its closing brace at the same
        // indentation, or to its `;` for a one-line item.
        let indent = line.len() - line.trim_start().len();
        for item in lines.by_ref() {
            let trimmed = item.trim_end();
            let at_indent = trimmed.len() - trimmed.trim_start().len() == indent;
            if trimmed.ends_with(';') && at_indent && !trimmed.trim_start().starts_with("#[") {
                break;
            }
            if at_indent && trimmed.trim_start().starts_with('}') {
                break;
            }
        }
    }
    kept
}

/// Every path after `prefix` in `code`: `prefix::a::b`, or each name of
/// `prefix::{a, b::c}` (one level of braces).
fn paths_after(code: &str, prefix: &str) -> Vec<String> {
    let mut paths = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find(prefix) {
        let before = rest[..at].chars().next_back();
        rest = &rest[at + prefix.len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        if let Some(list) = rest.strip_prefix('{') {
            let end = list.find('}').unwrap_or(list.len());
            for name in list[..end].split(',') {
                let name: String =
                    name.trim().chars().take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':').collect();
                if !name.is_empty() {
                    paths.push(name);
                }
            }
        } else {
            let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':').collect();
            paths.push(name.trim_end_matches(':').to_owned());
        }
    }
    paths
}

/// The longest module of `modules` that `path` (from the crate root) names.
fn module_of(path: &[&str], modules: &BTreeMap<String, PathBuf>) -> String {
    (0..=path.len()).rev().map(|n| path[..n].join("::")).find(|m| modules.contains_key(m)).unwrap_or_default()
}

/// The layer of a module: its first segment.
fn layer(module: &str) -> &str {
    module.split("::").next().unwrap_or("")
}

/// Every edge `from → to` between modules of the crate.
fn edges(src: &Path) -> BTreeSet<(String, String)> {
    let modules = modules(src);
    let mut edges = BTreeSet::new();
    for (module, file) in &modules {
        let code = non_test_code(&std::fs::read_to_string(file).unwrap());
        let is_folder = file.file_name().is_some_and(|n| n == "mod.rs" || n == "lib.rs");
        // `super` of a folder's mod.rs is the folder's parent; of a file, its folder.
        let here: Vec<&str> = if module.is_empty() { Vec::new() } else { module.split("::").collect() };
        let parent = if is_folder { &here[..here.len().saturating_sub(1)] } else { &here[..here.len() - 1] };
        let mut named: Vec<Vec<String>> = Vec::new();
        for path in paths_after(&code, "crate::") {
            named.push(path.split("::").map(str::to_owned).collect());
        }
        for path in paths_after(&code, "super::") {
            let mut full: Vec<String> = parent.iter().map(|s| (*s).to_owned()).collect();
            let mut segments = path.split("::").peekable();
            // `super::super::x`
            while segments.peek() == Some(&"super") {
                segments.next();
                full.pop();
            }
            full.extend(segments.map(str::to_owned));
            named.push(full);
        }
        for path in named {
            let path: Vec<&str> = path.iter().map(String::as_str).filter(|s| !s.is_empty()).collect();
            edges.insert((module.clone(), module_of(&path, &modules)));
        }
        // A folder's `mod.rs` uses the children it declares (it re-exports
        // them), so a child that names an item of `mod.rs` closes a cycle.
        if is_folder {
            for line in code.lines() {
                let line = line.trim();
                let declared = line.strip_prefix("pub mod ").or_else(|| line.strip_prefix("mod "));
                let declared = declared.or_else(|| line.strip_prefix("pub(crate) mod "));
                if let Some(child) = declared.and_then(|d| d.strip_suffix(';')) {
                    let child = if module.is_empty() { child.to_owned() } else { format!("{module}::{child}") };
                    edges.insert((module.clone(), child));
                }
            }
        }
    }
    edges.retain(|(from, to)| from != to);
    edges
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn listing(edges: &BTreeSet<(String, String)>) -> String {
    edges.iter().map(|(from, to)| format!("  {from} -> {to}\n")).collect()
}

#[test]
fn every_layer_imports_only_the_layers_below_it() {
    let edges = edges(&src());
    let rank = |module: &str| LAYERS.iter().position(|l| *l == layer(module));
    for (from, _) in &edges {
        assert!(rank(from).is_some(), "module {from} is in no layer: add its folder to LAYERS and ARCHITECTURE.md");
    }
    let upward: BTreeSet<_> =
        edges.iter().filter(|(from, to)| layer(from) != layer(to) && rank(from) >= rank(to)).cloned().collect();
    assert!(
        upward.is_empty(),
        "imports that point up the layers {LAYERS:?}:\n{}\nevery edge:\n{}",
        listing(&upward),
        listing(&edges)
    );
}

#[test]
fn the_files_of_a_layer_form_no_cycle() {
    let edges = edges(&src());
    let inside: Vec<(String, String)> = edges.iter().filter(|(from, to)| layer(from) == layer(to)).cloned().collect();
    // Depth-first search for a back edge.
    let mut next: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (from, to) in &inside {
        next.entry(from).or_default().push(to);
    }
    fn visit<'a>(
        at: &'a str,
        next: &BTreeMap<&'a str, Vec<&'a str>>,
        path: &mut Vec<&'a str>,
        done: &mut BTreeSet<&'a str>,
    ) -> Option<Vec<String>> {
        if let Some(start) = path.iter().position(|m| *m == at) {
            let mut cycle: Vec<String> = path[start..].iter().map(|m| (*m).to_owned()).collect();
            cycle.push(at.to_owned());
            return Some(cycle);
        }
        if !done.insert(at) {
            return None;
        }
        path.push(at);
        for to in next.get(at).into_iter().flatten() {
            if let Some(cycle) = visit(to, next, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        None
    }
    let mut done = BTreeSet::new();
    for start in next.keys() {
        if let Some(cycle) = visit(start, &next, &mut Vec::new(), &mut done) {
            panic!("an import cycle: {}\nedges inside layers:\n{}", cycle.join(" -> "), listing(&edges));
        }
    }
}

#[test]
fn the_edge_finder_reads_braces_super_and_skips_tests() {
    let code = "use super::{a, b::c};\nuse crate::x::y;\n#[cfg(test)]\nmod tests {\n    use crate::z;\n}\n";
    let kept = non_test_code(code);
    assert_eq!(paths_after(&kept, "super::"), ["a", "b::c"]);
    assert_eq!(paths_after(&kept, "crate::"), ["x::y"]);
}
