//! `fieldhub dump`'s candump options against a real hub, as candump's usage
//! text documents them (`-T`, `-a`, `-c`; the line layouts themselves are
//! the unit tests' of `dump.rs`).

use std::process::Stdio;

use crate::FIELDHUB;

/// candump -T MS: "terminate after MS if no frames were received" — with
/// status 0, whatever it printed before.
#[test]
fn dump_t_ends_after_the_idle_time_with_status_0() {
    let hub = FIELDHUB.start();
    let out = FIELDHUB.command().args(["dump", "--hub", &hub.url, "-T", "100", "can0"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stdout.is_empty());
}

#[test]
fn dump_a_and_c_print_the_ascii_column_and_the_channels_colour() {
    let hub = FIELDHUB.start();
    let dump = FIELDHUB
        .command()
        .args(["dump", "--hub", &hub.url, "-n", "1", "-a", "-c", "can0"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    hub.wait_for_log("port opened");
    let sent = FIELDHUB.command().args(["send", "--hub", &hub.url, "can0", "123#48690A"]).output().unwrap();
    assert!(sent.status.success());
    let out = dump.wait_with_output().unwrap();
    let line = String::from_utf8(out.stdout).unwrap();
    assert!(line.starts_with("  \x1b[34mcan0\x1b[0m  123   [3]  48 69 0A"), "{line:?}");
    assert!(line.ends_with("  'Hi.'\n"), "{line:?}");
}
