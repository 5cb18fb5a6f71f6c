//! `fieldhub convert`: logs between candump, ASC and MDF4 through the
//! command. Checks against python-can and asammdf: python/tests/test_convert.py.

use std::path::Path;

use crate::record_replay::Scratch;
use crate::FIELDHUB;

/// Every frame kind, on two channels, with candump's microseconds.
const LOG: &str = "\
(1700000000.000001) can0 123#DEADBEEF
(1700000000.250000) fd0 1ABCDEF0##3000102030405060708090A0B
(1700000000.500000) can0 7FF#R3
(1700000000.750000) can0 20000080#0000000000000000
(1700000001.000000) fd0 042##0
(1700000001.000000) can0 7FF#1122334455667788_C
";

fn convert(args: &[&Path]) -> std::process::Output {
    FIELDHUB.command().arg("convert").args(args).output().unwrap()
}

#[test]
fn a_log_converted_through_asc_and_mdf4_comes_back_byte_for_byte() {
    let scratch = Scratch::new("convert-round-trip");
    let path = |name: &str| scratch.path(name);
    std::fs::write(path("in.log"), LOG).unwrap();
    for (from, to) in [("in.log", "a.asc"), ("a.asc", "b.mf4"), ("b.mf4", "c.log")] {
        let out = convert(&[&path(from), &path(to)]);
        assert!(out.status.success(), "{from} → {to}: {}", String::from_utf8_lossy(&out.stderr));
        assert!(String::from_utf8_lossy(&out.stderr).starts_with("6 frames from"), "{out:?}");
    }
    assert_eq!(std::fs::read_to_string(path("c.log")).unwrap(), LOG);
    let stdout = convert(&[&path("b.mf4"), Path::new("-")]);
    assert_eq!(String::from_utf8_lossy(&stdout.stdout), LOG);
}

#[test]
fn convert_names_what_it_cannot_do_and_the_fix() {
    let scratch = Scratch::new("convert-errors");
    let input = scratch.path("in.log");
    std::fs::write(&input, LOG).unwrap();
    for (output, message) in [
        ("out.blf", "name it .log, .asc or .mf4, or pass --to candump|asc|mf4"),
        ("-", "MDF4 is binary and written whole"),
    ] {
        let mut command = FIELDHUB.command();
        command.arg("convert").arg(&input).arg(output);
        if output == "-" {
            command.args(["--to", "mf4"]);
        }
        let out = command.output().unwrap();
        assert_eq!(out.status.code(), Some(1));
        assert!(String::from_utf8_lossy(&out.stderr).contains(message), "{out:?}");
    }
    // A damaged MDF4 file is named with the block that is wrong.
    std::fs::write(scratch.path("bad.mf4"), b"MDF     4.10    fieldhub").unwrap();
    let out = convert(&[&scratch.path("bad.mf4"), &scratch.path("x.log")]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("not an MDF file"), "{out:?}");
}
