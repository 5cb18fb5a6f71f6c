//! A frame's fate in the simulator mode (`spec/protocol.md` 6.9,
//! `docs/silkit.md`), with the real `sil-kit-registry` and real SIL Kit
//! participants (`tests/silkit/silkit_netsim_peer.c`): every transmit
//! request of a SIL Kit controller is answered exactly once — `Transmitted`
//! when its frame is on the bus, `Canceled` as soon as the bus drops it (a
//! fault rule, bus-off), never waiting for a later frame of the controller.
//!
//! A peer sends FIN only once every request of it is answered, and prints
//! its events only then; an unanswered request fails the peer (after its
//! own patience) and stalls `collect`, so the tests fail rather than pass
//! without the answers.
//!
//! Needs SIL Kit: `make test-silkit` fetches it, builds the peers and runs
//! this with `FIELDHUB_SILKIT_LIB`, `FIELDHUB_SILKIT_REGISTRY` and
//! `FIELDHUB_SILKIT_NETSIM_PEER` set; a missing one fails the test.

use fieldhub_client::Frame;
use fieldhub_testkit::ok;
use fieldhub_testkit::silkit::{start_registry, SilKit};
use serde_json::json;

use crate::simulator::{
    client, collect, finish, hex_bytes, number, shown_frames, start_hub, start_peer, wait_until_simulated, CANCELED,
    GO_ID, TRANSMITTED,
};

/// The numbers of the `count` frames a rule with `seed` drops at
/// `probability`, when it matches exactly those frames, in order.
fn dropped_by(seed: u64, probability: f64, count: u32) -> Vec<u32> {
    let mut dice = fieldhub_bus::fault::Dice::new(seed);
    (0..count).filter(|_| dice.roll() < probability).collect()
}

/// A drop rule at the sender for the numbered frames of the peer with
/// `role` only (its payload starts with the peers' tag and its role).
fn drop_rule(role: u8, probability: f64, seed: u64) -> serde_json::Value {
    json!({"channel": "can0", "at": "sender", "data": format!("5E{role:02X}"), "action": {"type": "drop"},
        "probability": probability, "seed": seed})
}

/// A peer's transmit events (`A` lines): (status, frame number), in the
/// order SIL Kit called it.
fn answers(lines: &[Vec<String>]) -> Vec<(u32, u32)> {
    lines.iter().filter(|w| w[0] == "A").map(|w| (w[1].parse().unwrap(), w[3].parse::<u32>().unwrap() - 1)).collect()
}

/// Two SIL Kit participants send 300 numbered frames each (at most 32
/// unanswered) through seeded drop rules at their senders (probability
/// 0.25; seeds 1, 2 and 3 for A and 101, 102 and 103 for B: 60 to 82
/// frames dropped per sender, and with seed 102 B's last two frames): every
/// request is answered exactly once and in request order; `Canceled` for
/// exactly the frames the rule's dice drop, which no receiver sees;
/// `Transmitted` for the others, right after the sender's own frame event;
/// the fieldhub observer and both participants see the transmitted frames in
/// one order.
#[test]
fn seeded_drops_are_canceled_and_the_rest_transmitted_in_one_order() {
    const COUNT: u32 = 300;
    const PROBABILITY: f64 = 0.25;
    let silkit = SilKit::from_env("FIELDHUB_SILKIT_NETSIM_PEER");
    let mut last_frame_dropped = false;
    for seed in [1, 2, 3] {
        let (_registry, uri) = start_registry(&silkit, 0);
        let hub = start_hub(&silkit, &uri, "bitrate = 500000\ntiming = \"timed\"\n");
        let rules = [(b'A', seed), (b'B', seed + 100)];
        for (role, rule_seed) in rules {
            ok(&hub, "POST", "/api/v1/faults", Some(drop_rule(role, PROBABILITY, rule_seed)));
        }
        let mut a = start_peer(&silkit, &uri, b'A', COUNT, 0x100, 32);
        let mut b = start_peer(&silkit, &uri, b'B', COUNT, 0x200, 32);
        let (observer, port) = client(&hub, "observer");
        wait_until_simulated(&observer, &port, &[&a, &b]);
        observer.send(&port, &Frame::can(GO_ID, false, &[]).unwrap()).unwrap();
        let order: Vec<(u8, u32)> = collect(&observer, &hub, 2, 0).iter().map(|r| number(&r.frame).unwrap()).collect();
        for (role, rule_seed) in rules {
            let dropped = dropped_by(rule_seed, PROBABILITY, COUNT);
            last_frame_dropped |= dropped.last() == Some(&(COUNT - 1));
            let carried: Vec<u32> = order.iter().filter(|(r, _)| *r == role).map(|(_, n)| *n).collect();
            let expected: Vec<u32> = (0..COUNT).filter(|n| !dropped.contains(n)).collect();
            assert_eq!(carried, expected, "seed {rule_seed}: {}'s frames on the bus", role as char);
        }
        for (peer, (role, rule_seed)) in [&mut a, &mut b].into_iter().zip(rules) {
            let context = format!("seed {rule_seed}, peer {}", role as char);
            let lines = finish(&observer, &port, peer);
            let answered = answers(&lines);
            let numbers: Vec<u32> = answered.iter().map(|(_, n)| *n).collect();
            assert_eq!(numbers, (0..COUNT).collect::<Vec<_>>(), "{context}: once each, in request order");
            let canceled: Vec<u32> = answered.iter().filter(|(s, _)| *s == CANCELED).map(|(_, n)| *n).collect();
            assert_eq!(canceled, dropped_by(rule_seed, PROBABILITY, COUNT), "{context}: Canceled");
            assert!(answered.iter().all(|(s, _)| [TRANSMITTED, CANCELED].contains(s)), "{context}: {answered:?}");
            let shown: Vec<(u8, u32)> = shown_frames(&lines).into_iter().map(|(n, _)| n).collect();
            assert_eq!(shown, order, "{context}: another order than the observer's");
            for (k, words) in lines.iter().enumerate().filter(|(_, w)| w[0] == "F" && w[1] == "T") {
                let n = u32::from_le_bytes(hex_bytes(&words[3])[2..6].try_into().unwrap());
                let context_of_n = (n + 1).to_string();
                let ack = &lines[k + 1];
                assert_eq!(ack[..4], ["A", "1", words[2].as_str(), context_of_n.as_str()], "{context}: frame {n}");
            }
        }
    }
    assert!(last_frame_dropped, "no run dropped a sender's last frame: choose seeds that do");
}

/// A SIL Kit participant's only frame is dropped by a fault rule: nothing
/// comes after it, and it is answered `Canceled` all the same, reaches no
/// receiver, and the hub counts it as dropped by a fault rule.
#[test]
fn a_single_dropped_frame_with_nothing_behind_it_is_canceled() {
    let silkit = SilKit::from_env("FIELDHUB_SILKIT_NETSIM_PEER");
    let (_registry, uri) = start_registry(&silkit, 0);
    let hub = start_hub(&silkit, &uri, "");
    ok(&hub, "POST", "/api/v1/faults", Some(drop_rule(b'S', 1.0, 0)));
    let mut peer = start_peer(&silkit, &uri, b'S', 1, 0x100, 0);
    let (observer, port) = client(&hub, "observer");
    wait_until_simulated(&observer, &port, &[&peer]);
    observer.send(&port, &Frame::can(GO_ID, false, &[]).unwrap()).unwrap();
    assert!(collect(&observer, &hub, 1, 0).is_empty(), "the dropped frame reached the bus");
    let lines = finish(&observer, &port, &mut peer);
    assert_eq!(answers(&lines), [(CANCELED, 0)], "{lines:?}");
    assert!(lines.iter().all(|w| w[0] != "F"), "a frame event: {lines:?}");
    // The controller's port is gone with its peer; its channel keeps the count.
    let stats = ok(&hub, "GET", "/api/v1/stats", None);
    assert_eq!(stats["channels"][0]["tx_dropped_by_reason"], json!({"fault_rule": 1}), "{stats}");
}

/// A SIL Kit controller the hub holds bus-off (the channel does not
/// recover by itself): each frame it sends is dropped as it comes and
/// answered `Canceled` at once, in order, and none reaches a receiver.
#[test]
fn the_frames_of_a_bus_off_controller_are_canceled_at_once() {
    const COUNT: u32 = 5;
    let silkit = SilKit::from_env("FIELDHUB_SILKIT_NETSIM_PEER");
    let (_registry, uri) = start_registry(&silkit, 0);
    let hub = start_hub(&silkit, &uri, "auto_bus_off_recovery = false\n");
    let mut peer = start_peer(&silkit, &uri, b'O', COUNT, 0x100, 0);
    let (observer, port) = client(&hub, "observer");
    wait_until_simulated(&observer, &port, &[&peer]);
    let stats = ok(&hub, "GET", "/api/v1/stats", None);
    let name = stats["ports"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["name"].as_str())
        .find(|name| name.starts_with("silkit-CAN1-"))
        .unwrap_or_else(|| panic!("no port of the SIL Kit controller: {stats}"))
        .to_owned();
    ok(&hub, "POST", &format!("/api/v1/ports/{name}/state"), Some(json!({"state": "bus_off"})));
    // A bus-off controller still hears the bus; its FIN would be dropped
    // too, so the peer's events are read once it has every answer.
    observer.send(&port, &Frame::can(GO_ID, false, &[]).unwrap()).unwrap();
    let lines = finish(&observer, &port, &mut peer);
    let canceled: Vec<(u32, u32)> = (0..COUNT).map(|n| (CANCELED, n)).collect();
    assert_eq!(answers(&lines), canceled, "{lines:?}");
    assert!(lines.iter().all(|w| w[0] != "F"), "a frame event: {lines:?}");
    // The observer's own frame comes back after anything sequenced before it.
    let marker = Frame::can(0x7F0, false, &[]).unwrap();
    observer.send(&port, &marker).unwrap();
    loop {
        let received = observer.recv(Some(fieldhub_testkit::PATIENCE)).unwrap().expect("the observer's own frame");
        assert!(number(&received.frame).is_none(), "a frame of the bus-off controller: {:?}", received.frame);
        if received.frame.id() == marker.id() {
            break;
        }
    }
}
