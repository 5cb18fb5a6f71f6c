//! `include/fieldhub.h` compiles, warning-free and pedantic, as every C and
//! C++ dialect a firmware or legacy project may build with: C89, C99, C11
//! and C++98 onwards. Needs gcc and g++: a missing one fails its test,
//! naming the package to install.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A translation unit that includes the header and uses every type and a
/// status code, written in the common subset of C89 and C++98.
const USES_EVERY_TYPE: &str = r#"#include <fieldhub.h>

int uses_every_type(void);

int uses_every_type(void) {
    fh_frame frame;
    fh_meta meta;
    fh_filter filter;
    fh_port_status status;
    fh_port port = 0;
    fh_status ok = FH_OK;
    frame.len = 0;
    meta.seq = 0;
    filter.can_id = 0;
    status.rx_dropped = 0;
    return frame.len + (int)meta.seq + (int)filter.can_id + (int)status.rx_dropped + (int)port + (int)ok;
}
"#;

fn include_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../include")
}

fn compiler_present(compiler: &str) -> bool {
    Command::new(compiler).arg("--version").output().is_ok_and(|o| o.status.success())
}

/// Compile the unit as `language` (`c` or `c++`) under `std`; panic with
/// the compiler's words if it warns or fails.
fn assert_compiles(compiler: &str, language: &str, std: &str) {
    let dir = std::env::temp_dir().join(format!("fieldhub-header-{}-{std}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("create a scratch directory");
    let source = dir.join(if language == "c" { "unit.c" } else { "unit.cpp" });
    std::fs::write(&source, USES_EVERY_TYPE).expect("write the test unit");
    let output = Command::new(compiler)
        .args(["-x", language, &format!("-std={std}"), "-pedantic", "-Wall", "-Wextra", "-Werror", "-fsyntax-only"])
        .arg("-I")
        .arg(include_dir())
        .arg(&source)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {compiler}: {e}"));
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        output.status.success(),
        "fieldhub.h does not compile cleanly with {compiler} -std={std} -pedantic -Werror:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn the_header_compiles_pedantically_as_c89_c99_and_c11() {
    assert!(compiler_present("gcc"), "gcc is needed to check that fieldhub.h compiles as C: install gcc (Debian: gcc)");
    for std in ["c89", "c99", "c11"] {
        assert_compiles("gcc", "c", std);
    }
}

#[test]
fn the_header_compiles_pedantically_as_cxx98_and_later() {
    assert!(
        compiler_present("g++"),
        "g++ is needed to check that fieldhub.h compiles as C++: install g++ (Debian: g++)"
    );
    for std in ["c++98", "c++11", "c++17"] {
        assert_compiles("g++", "c++", std);
    }
}
