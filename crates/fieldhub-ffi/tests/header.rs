//! The committed C header `include/fieldhub.h` is what cbindgen generates from
//! this crate, made portable to C89 and C++98 ([`portable`]). Set
//! `FIELDHUB_BLESS=1` to rewrite it after changing the API.
//!
//! Its lists of hub URL forms are documentation comments, which cannot be
//! made from the client's table of forms (`fieldhub_client::url::SCHEMES`)
//! as the messages are; they and `docs/c-api.md`'s list are checked
//! against it instead ([`every_url_form_is_named_where_the_c_api_lists_them`]).

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

#[test]
fn every_url_form_is_named_where_the_c_api_lists_them() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let header = std::fs::read_to_string(root.join("include/fieldhub.h")).expect("read include/fieldhub.h");
    let guide = std::fs::read_to_string(root.join("docs/c-api.md")).expect("read docs/c-api.md");
    let lists = [
        ("FH_ERR_INVALID_URL's comment", comment_before(&header, "FH_ERR_INVALID_URL = ")),
        ("fh_connect's comment", comment_before(&header, "int fh_connect(")),
        (
            "docs/c-api.md",
            guide
                .split("\n\n")
                .find(|p| p.contains("(`FH_ERR_INVALID_URL`)"))
                .expect("c-api.md explains FH_ERR_INVALID_URL"),
        ),
    ];
    for (place, text) in lists {
        for scheme in fieldhub_client::url::SCHEMES {
            assert!(text.contains(&format!("`{}`", scheme.form)), "{place} does not name {}:\n{text}", scheme.form);
        }
    }
}

/// The documentation comment right before `marker` in the header.
fn comment_before<'a>(header: &'a str, marker: &str) -> &'a str {
    let end = header.find(marker).unwrap_or_else(|| panic!("the header has no {marker}"));
    let start = header[..end].rfind("/**").unwrap_or_else(|| panic!("no comment before {marker}"));
    &header[start..end]
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
