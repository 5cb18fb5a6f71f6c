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

#[test]
fn frame_bits_refuses_can_xl_and_raw_frames_it_has_no_bit_model_for() {
    for frame in ["00123#80:00:00000000#A5", "R00000011#0A0B"] {
        let out = FIELDHUB.command().args(["frame-bits", frame]).output().unwrap();
        assert!(!out.status.success(), "{frame}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("CAN XL and raw frames have no bit model yet"), "{frame}: {stderr}");
    }
}
