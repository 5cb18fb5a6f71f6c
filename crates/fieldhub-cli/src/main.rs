//! The `fieldhub` binary: the command of `fieldhub_cli::run`.

use std::process::ExitCode;

fn main() -> ExitCode {
    match fieldhub_cli::Launcher::current() {
        Ok(this_command) => ExitCode::from(fieldhub_cli::run(std::env::args_os(), this_command)),
        Err(e) => {
            eprintln!("error: cannot find the fieldhub executable: {e}");
            ExitCode::FAILURE
        }
    }
}
