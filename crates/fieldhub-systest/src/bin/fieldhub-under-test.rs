//! The hub under test: the `fieldhub` command, built as a binary of this
//! package so that Cargo gives the system tests its path
//! (`CARGO_BIN_EXE_fieldhub-under-test`, known only to a package's own
//! tests) and rebuilds it with them. It is `crates/fieldhub-cli/src/main.rs`
//! line for line, but for one thing: it tells the command line it is
//! `fieldhub`, so usage and error texts name the program as users see it.

use std::process::ExitCode;

fn main() -> ExitCode {
    // Clap takes the program's name from the first argument's file name.
    let args = std::iter::once(std::ffi::OsString::from("fieldhub")).chain(std::env::args_os().skip(1));
    match fieldhub_bench::Launcher::current() {
        Ok(this_command) => ExitCode::from(fieldhub_cli::run(args, this_command)),
        Err(e) => {
            eprintln!("error: cannot find the fieldhub executable: {e}");
            ExitCode::FAILURE
        }
    }
}
