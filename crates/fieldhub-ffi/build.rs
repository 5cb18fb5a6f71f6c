//! Gives the shared library its versioned soname, `libfieldhub.so.<ABI major>`,
//! so programs linked against it keep working across compatible updates and
//! refuse to start against an incompatible one.

/// Bumped only for a change that breaks binary compatibility of the C API.
/// Must match `FIELDHUB_SOVERSION` in `c/CMakeLists.txt`.
const ABI_MAJOR: u32 = 0;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if os == "linux" || os == "android" || os.ends_with("bsd") {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libfieldhub.so.{ABI_MAJOR}");
    }
}
