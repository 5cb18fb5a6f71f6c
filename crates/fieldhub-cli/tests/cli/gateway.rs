//! `fieldhub ctl gateway add|remove` against a real hub: a CAN↔LIN gateway
//! added while the hub runs carries a CAN frame into its LIN slot; removed,
//! it carries no more (the frame stays on CAN, the slot goes unanswered) and
//! its last counters say what it carried; a bad table is refused naming its
//! key, and a gateway that is not there by its number.

use std::time::{Duration, Instant};

use crate::FIELDHUB;
use fieldhub_client::{Client, Frame, FrameFlags};
use fieldhub_proto::lin::Checksum;
use fieldhub_testkit::*;
use serde_json::Value;

/// CAN `body`; LIN `doors` whose 0x20 (the BCM's lamp command, 2 bytes) has
/// a 10 ms slot.
const CONFIG: &str = r#"
[[channel]]
name = "body"
bitrate = 500000

[[channel]]
name = "doors"
protocol = "lin"
bitrate = 19200
timing = "timed"

[channel.lin]
schedule = [{ id = 0x20, delay_ms = 10 }]
frames = [{ name = "Lamp", id = 0x20, length = 2, checksum = "enhanced", publishers = ["BCM"] }]
"#;

fn ctl(hub: &HubProcess, args: &[&str]) -> std::process::Output {
    FIELDHUB.command().args(["ctl", "--hub", &hub.url]).args(args).output().expect("run fieldhub ctl")
}

/// Its JSON output, after checking it succeeded.
fn json_of(out: std::process::Output) -> Value {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("JSON on stdout")
}

/// Its error, after checking it failed.
fn refusal_of(out: std::process::Output) -> String {
    assert!(!out.status.success(), "refused: {}", String::from_utf8_lossy(&out.stdout));
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The LIN responses with data `reader` gets within `window` (headers no
/// one answered left out).
fn responses_within(reader: &Client, window: Duration) -> Vec<Frame> {
    let until = Instant::now() + window;
    let mut got = Vec::new();
    while let Some(left) = until.checked_duration_since(Instant::now()) {
        match reader.recv(Some(left)).unwrap() {
            Some(rx) if !rx.frame.flags().contains(FrameFlags::LIN_NO_RESPONSE) => got.push(rx.frame),
            Some(_) => {}
            None => break,
        }
    }
    got
}

#[test]
fn ctl_gateway_add_carries_can_frames_into_lin_slots_and_remove_stops_them() {
    let hub = FIELDHUB.start_with(Some(CONFIG), &[]);
    let (bcm, lin_rx, can_rx) = (hub.client("bcm"), hub.client("lin-rx"), hub.client("can-rx"));
    let bcm_port = bcm.open_port("body").unwrap();
    lin_rx.open_port("doors").unwrap();
    can_rx.open_port("body").unwrap();

    let added =
        json_of(ctl(&hub, &["gateway", "add", "body", "doors", "--can-id", "120", "--lin-id", "20", "--node", "BCM"]));
    assert_eq!((added["gateway"].as_u64(), added["direction"].as_str()), (Some(0), Some("can-to-lin")), "{added}");
    bcm.send(&bcm_port, &Frame::can(0x120, false, &[0xA1, 0xB2]).unwrap()).unwrap();
    bcm.flush().unwrap();
    // The next 0x20 slot (within 10 ms) carries it; a second is patience.
    let lamp = Frame::lin(0x20, Checksum::Enhanced, &[0xA1, 0xB2]).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut crossed = Vec::new();
    while crossed.is_empty() && Instant::now() < deadline {
        crossed = responses_within(&lin_rx, Duration::from_millis(100));
    }
    assert_eq!(crossed, [lamp]);

    let removed = json_of(ctl(&hub, &["gateway", "remove", "0"]));
    assert_eq!((removed["removed"].as_bool(), removed["carried"].as_u64()), (Some(true), Some(1)), "{removed}");
    assert_eq!(json_of(ctl(&hub, &["gateways"])), serde_json::json!([]));
    let _ = responses_within(&lin_rx, Duration::from_millis(30));
    let after = Frame::can(0x120, false, &[0xC3, 0xD4]).unwrap();
    bcm.send(&bcm_port, &after).unwrap();
    bcm.flush().unwrap();
    // Twenty slots of 0x20 go by unanswered; the frame was on CAN.
    assert_eq!(responses_within(&lin_rx, Duration::from_millis(200)), []);
    let on_can: Vec<Frame> =
        std::iter::from_fn(|| can_rx.recv(Some(Duration::from_secs(1))).unwrap()).map(|rx| rx.frame).collect();
    assert_eq!(on_can.last(), Some(&after), "{on_can:?}");
}

#[test]
fn ctl_gateway_refuses_a_bad_table_naming_its_key_and_an_unknown_number() {
    let hub = FIELDHUB.start_with(Some(CONFIG), &[]);
    let out = ctl(&hub, &["gateway", "add", "body", "doors", "--can-id", "120", "--lin-id", "40", "--node", "BCM"]);
    let why = refusal_of(out);
    assert!(why.contains("lin_id: 0x40 is not a LIN frame identifier (0..=0x3F)"), "{why}");
    let why = refusal_of(ctl(&hub, &["gateway", "add", "body", "doors", "--can-id", "120", "--lin-id", "20"]));
    assert!(why.contains("node: LIN frame 0x20 on 'doors' is published by BCM: name the node"), "{why}");
    let why = refusal_of(ctl(&hub, &["gateway", "add", "body", "body", "--can-id", "120", "--lin-id", "20"]));
    assert!(why.contains("to: 'body' and 'body' are both CAN channels"), "{why}");
    let why = refusal_of(ctl(&hub, &["gateway", "remove", "7"]));
    assert!(why.contains("no gateway 7"), "{why}");
    assert_eq!(json_of(ctl(&hub, &["gateways"])), serde_json::json!([]));
}
