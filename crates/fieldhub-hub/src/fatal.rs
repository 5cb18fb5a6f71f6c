//! The hub's panic policy: a panic on any hub thread ends the process.
//!
//! The hub's threads (bus, reactor, control server, recorders) depend on one
//! another; one that died would leave a hub that accepts connections but
//! never answers (503s, a frozen bus) and then exits 0. So the hook that a
//! process running a hub installs ([`exit_on_panic`]: `fieldhub hub`,
//! `python -m fieldhub hub`) writes one line naming the thread, the message
//! and the location to stderr (whatever `FIELDHUB_LOG` says) and exits with
//! [`PANIC_EXIT_CODE`]. [`crate::Hub::start`] does not install it: a process
//! that embeds a hub among other work chooses its own policy.

use std::io::Write;
use std::path::PathBuf;

/// Exit code after a panic: `EX_SOFTWARE` from sysexits.h, "internal
/// software error" — distinct from the 1 of a refused configuration.
pub const PANIC_EXIT_CODE: i32 = 70;

/// Install the hook. Rust's default hook runs first, so
/// `RUST_BACKTRACE=1` still prints a backtrace. `ready_file` (`--ready-file`)
/// is removed before the exit, as on a clean stop: its addresses die with
/// the hub.
pub fn exit_on_panic(ready_file: Option<PathBuf>) {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        default(info);
        if let Some(path) = &ready_file {
            let _ = std::fs::remove_file(path);
        }
        let thread = std::thread::current();
        let message = info
            .payload()
            .downcast_ref::<&str>()
            .copied()
            .or_else(|| info.payload().downcast_ref::<String>().map(String::as_str));
        let location = info.location().map(|l| (l.file(), l.line(), l.column()));
        // Not eprintln!: a closed stderr must not turn this into a second panic.
        let _ = writeln!(std::io::stderr(), "{}", fatal_line(thread.name(), message, location));
        std::process::exit(PANIC_EXIT_CODE);
    }));
}

/// The line logged for a panic.
fn fatal_line(thread: Option<&str>, message: Option<&str>, location: Option<(&str, u32, u32)>) -> String {
    let thread = thread.unwrap_or("<unnamed>");
    let message = message.unwrap_or("<no message>");
    let at = location.map_or_else(|| "an unknown location".to_owned(), |(f, l, c)| format!("{f}:{l}:{c}"));
    format!(
        "fatal: hub thread '{thread}' panicked at {at}: {message}; the hub stops (exit code {PANIC_EXIT_CODE}) — \
         this is a bug, please report it with this line"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fatal_line_names_thread_location_message_and_exit_code() {
        let line =
            fatal_line(Some("fh-bus"), Some("byte index 1 is not a char boundary"), Some(("src/fault.rs", 7, 9)));
        assert_eq!(
            line,
            "fatal: hub thread 'fh-bus' panicked at src/fault.rs:7:9: byte index 1 is not a char boundary; \
             the hub stops (exit code 70) — this is a bug, please report it with this line"
        );
    }

    #[test]
    fn the_fatal_line_says_what_it_does_not_know() {
        let line = fatal_line(None, None, None);
        assert!(
            line.starts_with("fatal: hub thread '<unnamed>' panicked at an unknown location: <no message>;"),
            "{line}"
        );
    }
}
