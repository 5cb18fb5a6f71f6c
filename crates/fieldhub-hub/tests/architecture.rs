//! ARCHITECTURE.md stays true as the code moves: every file or folder it
//! names in backticks (`bus/control.rs`, `crates/fieldhub-bus`, `tests/vm/`)
//! exists — at the repository's root, in a folder whose section names it,
//! or (for a module's short path) somewhere under that folder.

use std::path::{Path, PathBuf};

/// Files of `dir` and below, as paths relative to `dir`.
fn files_under(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(at) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&at) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            let relative = path.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                found.push(format!("{relative}/"));
                dirs.push(path);
            } else {
                found.push(relative);
            }
        }
    }
    found
}

/// Whether a backticked word names a file or folder: it has a `/` or a
/// file extension of ours, and no spaces, `::`, `=` or URL parts.
fn names_a_path(word: &str) -> bool {
    let plain = !word.contains(' ') && !word.contains("::") && !word.contains('=') && !word.contains("//");
    let extension = [".rs", ".md", ".toml", ".js", ".py", ".sh", ".mk", ".yaml", ".json", ".c", ".h"];
    let pathlike = word.contains('/') || extension.iter().any(|e| word.ends_with(e));
    plain && pathlike && !word.starts_with('/') && !word.starts_with('-') && !word.contains('*') && !word.contains('{')
}

#[test]
fn every_path_architecture_md_names_exists() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let text = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    // The folders the current section is about (its heading's paths), and
    // every file under them.
    let mut sections: Vec<PathBuf> = Vec::new();
    let mut section_files: Vec<String> = Vec::new();
    let mut missing = Vec::new();
    for line in text.lines() {
        if line.starts_with("### ") {
            sections = line.split('`').skip(1).step_by(2).map(|dir| root.join(dir)).collect();
            section_files = sections.iter().flat_map(|dir| files_under(dir)).collect();
        }
        for (i, word) in line.split('`').enumerate() {
            if i % 2 == 0 || !names_a_path(word) {
                continue;
            }
            let bare = word.trim_end_matches('/');
            let exists = root.join(bare).exists()
                || sections.iter().any(|dir| dir.join(bare).exists())
                || section_files.iter().any(|f| f.trim_end_matches('/').ends_with(&format!("/{bare}")));
            if !exists {
                let under: Vec<_> = sections.iter().map(|d| d.strip_prefix(&root).unwrap_or(d).display()).collect();
                missing.push(format!("{word} (section {under:?})"));
            }
        }
    }
    assert!(missing.is_empty(), "ARCHITECTURE.md names paths that do not exist:\n  {}", missing.join("\n  "));
}

#[test]
fn a_path_is_told_from_code() {
    assert!(names_a_path("bus/control.rs"));
    assert!(names_a_path("tests/vm/"));
    assert!(!names_a_path("Access::Full"));
    assert!(!names_a_path("tcp://HOST:PORT"));
    assert!(!names_a_path("[hub] time = \"virtual\""));
}
