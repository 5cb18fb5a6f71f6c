//! Compiles the portable C client's codec (`c/portable/`) and the C side of
//! its fuzz target (`src/portable_c.c`) into this crate, with the `cc`
//! crate and the system's C compiler: the fuzzer tests the C code itself,
//! not a copy of it. libFuzzer's coverage guidance sees only the Rust side
//! of the target (GCC has no `trace-pc-guard` instrumentation); the C code
//! is checked by the differential assertions, not steered to.

fn main() {
    let portable = "../../c/portable";
    for file in ["fieldhub_portable.c", "fieldhub_portable.h"] {
        println!("cargo:rerun-if-changed={portable}/{file}");
    }
    println!("cargo:rerun-if-changed=src/portable_c.c");
    cc::Build::new()
        .file(format!("{portable}/fieldhub_portable.c"))
        .file("src/portable_c.c")
        .include(portable)
        .std("c99")
        .warnings(true)
        .warnings_into_errors(true)
        .compile("fieldhub_portable");
}
