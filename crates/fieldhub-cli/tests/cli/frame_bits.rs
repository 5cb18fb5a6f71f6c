//! `fieldhub frame-bits` prints what the timing vectors say.

use crate::FIELDHUB;

#[test]
fn frame_bits_json_matches_a_timing_vector() {
    let out = FIELDHUB
        .command()
        .args(["frame-bits", "123##1DEADBEEF", "--bitrate", "500000", "--data-bitrate", "2000000", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((answer["bits"].as_u64(), answer["stuff_bits"].as_u64()), (Some(95), Some(7)));
    assert_eq!(answer["duration_ns"].as_u64(), Some(30 * 2000 + 65 * 500));
}

#[test]
fn frame_bits_rejects_bad_frames_with_the_reason() {
    let out = FIELDHUB.command().args(["frame-bits", "123#1"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("pairs of hex digits"));
}

/// A CAN XL frame's figures are its timing vector's
/// (`spec/vectors/timing/canxl_bit_timing.json`, first entry).
#[test]
fn frame_bits_prints_a_can_xl_frames_length_at_the_xl_data_rate() {
    let out = FIELDHUB
        .command()
        .args(["frame-bits", "00123#80:00:00000000#55", "--bitrate", "500000", "--xl-data-bitrate", "10000000"])
        .arg("--json")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let figures = ["bits", "stuff_bits", "nominal_bits", "data_bits", "duration_ns"].map(|k| answer[k].as_u64());
    assert_eq!(figures, [168, 11, 34, 134, 81_400].map(Some));
}

#[test]
fn frame_bits_gives_a_raw_frame_the_stated_model() {
    let out = FIELDHUB
        .command()
        .args(["frame-bits", "R00000011#0A0B0C", "--bitrate", "19200", "--bits-per-byte", "11"])
        .args(["--overhead-bits", "39", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // 39 + 3 · 11 = 72 bits at 19,200 bit/s.
    assert_eq!(
        (answer["bits"].as_u64(), answer["duration_ns"].as_u64()),
        (Some(72), Some(72 * 1_000_000_000 / 19_200))
    );
    let out = FIELDHUB.command().args(["frame-bits", "R00000011#0A", "--bits-per-byte", "0"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--bits-per-byte must be positive"));
}
