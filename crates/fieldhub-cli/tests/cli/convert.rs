//! `fieldhub convert`: logs between candump, ASC, BLF and MDF4 through the
//! command. Checks against python-can and asammdf: python/tests/test_convert.py
//! and test_blf.py.

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
fn a_log_converted_through_asc_blf_and_mdf4_comes_back_byte_for_byte() {
    let scratch = Scratch::new("convert-round-trip");
    let path = |name: &str| scratch.path(name);
    std::fs::write(path("in.log"), LOG).unwrap();
    for (from, to) in [("in.log", "a.asc"), ("a.asc", "b.blf"), ("b.blf", "c.mf4"), ("c.mf4", "d.log")] {
        let out = convert(&[&path(from), &path(to)]);
        assert!(out.status.success(), "{from} → {to}: {}", String::from_utf8_lossy(&out.stderr));
        assert!(String::from_utf8_lossy(&out.stderr).starts_with("6 frames from"), "{out:?}");
    }
    assert_eq!(std::fs::read_to_string(path("d.log")).unwrap(), LOG);
    for binary in ["b.blf", "c.mf4"] {
        let stdout = convert(&[&path(binary), Path::new("-")]);
        assert_eq!(String::from_utf8_lossy(&stdout.stdout), LOG, "{binary}");
    }
}

#[test]
fn convert_names_what_it_cannot_do_and_the_fix() {
    let scratch = Scratch::new("convert-errors");
    let input = scratch.path("in.log");
    std::fs::write(&input, LOG).unwrap();
    for (output, to, message) in [
        ("out.trc", None, "name it .log, .asc, .blf or .mf4, or pass --to candump|asc|blf|mf4"),
        ("-", Some("mf4"), "MDF4 is binary and written whole"),
        ("-", Some("blf"), "BLF is binary"),
    ] {
        let mut command = FIELDHUB.command();
        command.arg("convert").arg(&input).arg(output);
        if let Some(to) = to {
            command.args(["--to", to]);
        }
        let out = command.output().unwrap();
        assert_eq!(out.status.code(), Some(1));
        assert!(String::from_utf8_lossy(&out.stderr).contains(message), "{out:?}");
    }
    // A damaged MDF4 file is named with the block that is wrong.
    std::fs::write(scratch.path("bad.mf4"), b"MDF     4.10    fieldhub").unwrap();
    let out = convert(&[&scratch.path("bad.mf4"), &scratch.path("x.log")]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("not an MDF file"), "{out:?}");
    // A BLF file cut inside its first object: named with the object's offset.
    let blf = scratch.path("whole.blf");
    assert!(convert(&[&input, &blf]).status.success());
    let bytes = std::fs::read(&blf).unwrap();
    std::fs::write(scratch.path("cut.blf"), &bytes[..bytes.len() - 10]).unwrap();
    let out = convert(&[&scratch.path("cut.blf"), &scratch.path("x.log")]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("BLF at byte 144: the file ends inside an object"),
        "{out:?}"
    );
}
