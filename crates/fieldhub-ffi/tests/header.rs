//! The committed C header `include/fieldhub.h` is what cbindgen generates from
//! this crate. Set `FIELDHUB_BLESS=1` to rewrite it after changing the API.

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
    let generated = String::from_utf8(generated).expect("cbindgen writes UTF-8");
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
