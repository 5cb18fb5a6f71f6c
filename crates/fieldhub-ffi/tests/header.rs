//! The committed C header `include/fieldhub.h` is what cbindgen generates from
//! this crate, made portable to C89 and C++98 ([`portable`]). Set
//! `FIELDHUB_BLESS=1` to rewrite it after changing the API.

use std::path::Path;

#[test]
fn header_is_up_to_date() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml")).expect("read cbindgen.toml");
    let mut generated = Vec::new();
    cbindgen::Builder::new()
        .with_crate(crate_dir)
        .with_config(config)
        .generate()
        .expect("cbindgen generates the header")
        .write(&mut generated);
    let generated = portable(&String::from_utf8(generated).expect("cbindgen writes UTF-8"));
    let committed_path = crate_dir.join("../../include/fieldhub.h");
    if std::env::var_os("FIELDHUB_BLESS").is_some() {
        std::fs::write(&committed_path, &generated).expect("write include/fieldhub.h");
        return;
    }
    let committed = std::fs::read_to_string(&committed_path).unwrap_or_default();
    assert!(
        committed == generated,
        "include/fieldhub.h is stale: the C API changed. Regenerate it with \
         `FIELDHUB_BLESS=1 cargo test -p fieldhub-ffi --test header` and commit it."
    );
}

/// cbindgen's output made valid C89 and C++98, which it has no settings
/// for (`header_standards.rs` compiles the result):
/// - its own `// …` comments (after `#endif` and `extern "C"`'s brace)
///   become `/* … */`: C89 has no line comments;
/// - the comma after an enum's last enumerator goes: C89 and C++98 reject it.
fn portable(generated: &str) -> String {
    let mut lines: Vec<String> = Vec::new();
    let mut in_enum = false;
    for line in generated.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("typedef enum") || trimmed.starts_with("enum ") {
            in_enum = true;
        }
        if in_enum && trimmed.starts_with('}') {
            in_enum = false;
            // The last enumerator is the last line before the brace that is
            // not documentation.
            if let Some(last) = lines.iter_mut().rev().find(|l| !l.trim().is_empty()) {
                if let Some(stripped) = last.strip_suffix(',') {
                    *last = stripped.to_owned();
                }
            }
        }
        let is_comment = trimmed.starts_with("/*") || trimmed.starts_with('*');
        match line.find("//") {
            // `tcp://…` in code would be in a string; in comments it stays.
            Some(at) if !is_comment && !line[..at].ends_with(':') => {
                let (code, comment) = line.split_at(at);
                lines.push(format!("{code}/* {} */", comment.trim_start_matches('/').trim()));
            }
            _ => lines.push(line.to_owned()),
        }
    }
    let mut text = lines.join("\n");
    if generated.ends_with('\n') {
        text.push('\n');
    }
    text
}
