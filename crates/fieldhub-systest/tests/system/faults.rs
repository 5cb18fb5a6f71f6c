//! Fault rules, shorts and forced error states on real traffic through a
//! real hub, driven through the control API.

use crate::FIELDHUB;
use fieldhub_client::{Client, Frame, Port, PortConfig, Received};
use fieldhub_testkit::*;
use serde_json::{json, Value};

struct Bench {
    hub: HubProcess,
    sender: Client,
    tx: Port,
    listener: Client,
    witness: Client,
}

/// A hub with a sender "ecu" and two receivers "listener" and "witness" on can0.
fn bench(config: Option<&str>) -> Bench {
    bench_with(config, &[])
}

fn bench_with(config: Option<&str>, extra: &[&str]) -> Bench {
    let hub = FIELDHUB.start_with(config, extra);
    let sender = hub.client("ecu");
    let tx = sender.open_port_with("can0", &PortConfig { name: Some("ecu".into()), ..lossless() }).unwrap();
    let listener = hub.client("listener");
    listener.open_port_with("can0", &PortConfig { name: Some("listener".into()), ..lossless() }).unwrap();
    let witness = hub.client("witness");
    witness.open_port_with("can0", &PortConfig { name: Some("witness".into()), ..lossless() }).unwrap();
    Bench { hub, sender, tx, listener, witness }
}

impl Bench {
    fn rule(&self, rule: Value) -> u64 {
        ok(&self.hub, "POST", "/api/v1/faults", Some(rule))["id"].as_u64().unwrap()
    }

    fn counters(&self, id: u64) -> (u64, u64) {
        let rules = ok(&self.hub, "GET", "/api/v1/faults", None);
        let rule = rules.as_array().unwrap().iter().find(|r| r["id"] == id).unwrap();
        (rule["matched"].as_u64().unwrap(), rule["applied"].as_u64().unwrap())
    }

    /// Send `frames`; returns how many of them the hub reported off the bus.
    fn send(&self, frames: impl IntoIterator<Item = Frame>) -> u64 {
        for frame in frames {
            self.sender.send(&self.tx, &frame).unwrap();
        }
        flush_all(&self.sender)
    }

    fn port(&self, name: &str) -> Value {
        let ports = ok(&self.hub, "GET", "/api/v1/ports", None);
        ports.as_array().unwrap().iter().find(|p| p["name"] == name).cloned().unwrap()
    }
}

/// Everything a client has received so far (after a barrier).
fn drain(client: &Client) -> Vec<Received> {
    flush_all(client);
    let mut got = Vec::new();
    while let Some(r) = client.try_recv().unwrap() {
        got.push(r);
    }
    got
}

fn traffic(n: u32) -> Vec<Frame> {
    (0..n).flat_map(|i| [numbered(0x100, 1, i), numbered(0x200, 2, i)]).collect()
}

/// Counters of the 0x100 frames that got through.
fn survivors(got: &[Received]) -> Vec<u32> {
    got.iter().filter(|r| r.frame.id() == 0x100).map(|r| number_of(&r.frame).1).collect()
}

fn seeded_drop_run(seed: u64) -> Vec<u32> {
    let b = bench(None);
    let id = b.rule(json!({"channel": "can0", "at": "bus", "id": 0x100, "mask": 0x7FF,
                           "action": {"type": "drop"}, "probability": 0.1, "seed": seed}));
    let reported = b.send(traffic(2000));
    let got = drain(&b.listener);
    assert_eq!(got.iter().filter(|r| r.frame.id() == 0x200).count(), 2000, "other ids untouched");
    let kept = survivors(&got);
    assert_eq!(reported, 2000 - kept.len() as u64, "every dropped frame reported to its sender");
    assert_eq!(survivors(&drain(&b.witness)), kept, "a bus drop is the same for every receiver");
    let (matched, applied) = b.counters(id);
    assert_eq!((matched, applied), (2000, 2000 - kept.len() as u64));
    assert!(kept.windows(2).all(|w| w[0] < w[1]), "order kept among survivors");
    kept
}

#[test]
fn seeded_drop_rule_replays_the_same_decisions_and_another_seed_does_not() {
    let first = seeded_drop_run(42);
    let again = seeded_drop_run(42);
    let other = seeded_drop_run(7);
    let dropped = 2000 - first.len();
    assert!((100..=300).contains(&dropped), "10% of 2000, got {dropped}");
    assert_eq!(first, again, "same seed, same traffic, same decisions");
    assert_ne!(first, other, "another seed decides differently");
}

#[test]
fn receiver_drop_affects_only_that_receiver() {
    let b = bench(None);
    b.rule(json!({"channel": "can0", "at": "receiver", "receiver": "listener", "id": 0x100, "mask": 0x7FF,
                  "action": {"type": "drop"}}));
    b.send(traffic(500));
    assert!(survivors(&drain(&b.listener)).is_empty());
    assert_eq!(survivors(&drain(&b.witness)).len(), 500);
}

#[test]
fn sender_delay_holds_frames_back_by_the_given_time() {
    let b = bench(None);
    b.rule(json!({"channel": "can0", "at": "sender", "id": 0x100, "mask": 0x7FF, "count": 1,
                  "action": {"type": "delay", "ms": 200.0}}));
    // A marker on the bus (flushed) before the held frame is even sent:
    // the held frame reached the hub after the marker's time, so its own
    // time is at least the hold after the marker's, however loaded the
    // machine. (Against the frame that overtook it the gap can be shorter:
    // that one leaves whenever the bus thread gets to it.)
    b.send([numbered(0x300, 3, 0)]);
    b.send([numbered(0x100, 1, 0), numbered(0x200, 2, 0)]);
    let got = recv_n(&b.listener, 3);
    assert_eq!(got[0].frame.id(), 0x300);
    // The 0x200 frame overtook the held one; the hub's clock shows the hold.
    assert_eq!(got[1].frame.id(), 0x200);
    assert_eq!(got[2].frame.id(), 0x100);
    assert!(got[2].meta.timestamp_ns - got[0].meta.timestamp_ns >= 200_000_000);
    assert!(got[2].meta.seq > got[1].meta.seq);
}

#[test]
fn corrupting_the_next_three_frames_gives_error_frames_retransmission_and_error_counts() {
    let b = bench(None);
    let id = b.rule(json!({"channel": "can0", "at": "bus", "id": 0x200, "mask": 0x7FF, "count": 3,
                           "action": {"type": "corrupt"}}));
    b.send((0..10).map(|i| numbered(0x200, 2, i)));
    let got = recv_n(&b.listener, 13);
    let errors: Vec<&Received> = got.iter().filter(|r| r.frame.is_error()).collect();
    assert_eq!(errors.len(), 3, "one error frame per destroyed transmission");
    let delivered: Vec<u32> = got.iter().filter(|r| !r.frame.is_error()).map(|r| number_of(&r.frame).1).collect();
    assert_eq!(delivered, (0..10).collect::<Vec<_>>(), "retransmitted: nothing lost, nothing doubled");
    assert_eq!(b.counters(id), (3, 3));
    let ecu = b.port("ecu");
    // TEC: +8 three times, then −1 per successful transmission (10).
    assert_eq!((ecu["tec"].as_u64(), ecu["error_state"].as_str()), (Some(14), Some("active")));
    assert_eq!(b.port("listener")["rec"].as_u64(), Some(0), "REC +3, then −1 per good frame");
}

#[test]
fn flip_and_modify_change_what_receivers_get() {
    let b = bench(None);
    b.rule(json!({"channel": "can0", "at": "bus", "id": 0x100, "mask": 0x7FF, "action": {"type": "flip", "byte": 0, "mask": 0x80}}));
    b.rule(json!({"channel": "can0", "at": "receiver", "receiver": "witness", "id": 0x200, "mask": 0x7FF,
                  "action": {"type": "modify", "id": {"op": "xor", "value": 0x001}, "data": {"op": "and", "value": 0x0F},
                             "checksum": {"byte": 4, "kind": "xor"}}}));
    b.send([
        Frame::can(0x100, false, &[0x01, 2]).unwrap(),
        Frame::can(0x200, false, &[0xF1, 0xF2, 0xF3, 0xF4, 0xAA]).unwrap(),
    ]);
    let listener: Vec<Frame> = recv_n(&b.listener, 2).into_iter().map(|r| r.frame).collect();
    assert_eq!(
        listener,
        [
            Frame::can(0x100, false, &[0x81, 2]).unwrap(),
            Frame::can(0x200, false, &[0xF1, 0xF2, 0xF3, 0xF4, 0xAA]).unwrap()
        ]
    );
    let witness: Vec<Frame> = recv_n(&b.witness, 2).into_iter().map(|r| r.frame).collect();
    // Checksum byte 4 = 1 ^ 2 ^ 3 ^ 4 = 4.
    assert_eq!(witness[1], Frame::can(0x201, false, &[1, 2, 3, 4, 4]).unwrap());
}

#[test]
fn duplicate_delivers_extra_copies_with_the_same_sequence_number() {
    let b = bench(None);
    b.rule(json!({"channel": "can0", "at": "receiver", "receiver": "listener", "data": "01", "data_mask": "FF",
                  "action": {"type": "duplicate", "copies": 1}}));
    b.send(traffic(50));
    let got = drain(&b.listener);
    let ones: Vec<&Received> = got.iter().filter(|r| r.frame.data()[0] == 1).collect();
    assert_eq!(ones.len(), 100);
    assert!(ones.chunks(2).all(|pair| pair[0].meta == pair[1].meta), "copies share seq and timestamp");
    assert_eq!(drain(&b.witness).len(), 100, "the witness gets each frame once");
}

#[test]
fn short_stops_all_traffic_and_transmitters_go_bus_off_until_cleared() {
    // Without automatic recovery the bus-off state stays until it is cleared.
    let b = bench(Some("[[channel]]\nname = \"can0\"\nauto_bus_off_recovery = false\n"));
    ok(&b.hub, "POST", "/api/v1/channels/can0/short", None);
    b.sender.send(&b.tx, &numbered(0x100, 1, 0)).unwrap();
    // 32 failed attempts take the sender to bus-off; every attempt shows
    // receivers an error frame and no data frame gets through.
    let errors = recv_n(&b.listener, 32);
    assert!(errors.iter().all(|r| r.frame.is_error()));
    let ecu = b.port("ecu");
    assert_eq!(
        (ecu["error_state"].as_str(), ecu["tec"].as_u64(), ecu["tx_dropped"].as_u64()),
        (Some("bus_off"), Some(256), Some(1))
    );
    assert!(drain(&b.sender).iter().all(|r| r.frame.is_error()), "the transmitter sees the errors too");
    ok(&b.hub, "POST", "/api/v1/channels/can0/unshort", None);
    ok(&b.hub, "POST", "/api/v1/ports/ecu/state", Some(json!({"state": "error_active"})));
    b.send([numbered(0x300, 3, 1)]);
    let next: Vec<Received> = drain(&b.witness).into_iter().filter(|r| !r.frame.is_error()).collect();
    assert_eq!(next.len(), 1, "after the short is cleared and the port recovered, traffic flows: {next:?}");
    assert_eq!(number_of(&next[0].frame), (3, 1));
}

#[test]
fn forced_states_and_automatic_bus_off_recovery() {
    let b = bench(None);
    let state = |s: &str| ok(&b.hub, "POST", "/api/v1/ports/ecu/state", Some(json!({"state": s})));
    let passive = state("error_passive");
    assert_eq!((passive["error_state"].as_str(), passive["tec"].as_u64()), (Some("passive"), Some(128)));
    let off = state("bus_off");
    assert_eq!(off["error_state"], "bus_off");
    // 128 × 11 recessive bits at 500 kbit/s (2.8 ms) later the port is back,
    // counters reset. A frame that came meanwhile was dropped at once and its
    // sender told (docs/frame-fate.md); one that came after is on the bus:
    // either way it is accounted for.
    let reported = b.send([numbered(0x100, 1, 0)]);
    wait_until(deadline(), "the port recovers from bus-off", || b.port("ecu")["error_state"] == "active");
    let delivered = drain(&b.listener).iter().filter(|r| !r.frame.is_error()).count() as u64;
    assert_eq!(reported + delivered, 1, "{reported} reported dropped, {delivered} on the bus");
    let back = b.port("ecu");
    assert_eq!((back["error_state"].as_str(), back["tec"].as_u64()), (Some("active"), Some(0)));
    assert_eq!(b.send([numbered(0x100, 1, 1)]), 0);
    let got = recv_n(&b.listener, 1);
    assert_eq!(number_of(&got[0].frame), (1, 1), "the recovered port sends again");
    assert_eq!(state("error_active")["error_state"], "active");
}

const LONELY: &str = "[[channel]]\nname = \"can0\"\nno_ack = true\n";

#[test]
fn lone_sender_with_no_ack_emulation_never_succeeds() {
    let hub = FIELDHUB.start_with(Some(LONELY), &[]);
    let lone = hub.client("lone");
    let port = lone.open_port_with("can0", &PortConfig { name: Some("lone".into()), ..Default::default() }).unwrap();
    lone.send(&port, &numbered(0x100, 1, 0)).unwrap();
    let seen = recv_n(&lone, 20);
    assert!(seen.iter().all(|r| r.frame.is_error()), "only errors: {seen:?}");
    assert_eq!(seen.iter().filter(|r| r.frame.id() == 0x20).count(), 19, "ACK errors, and one report of error-passive");
    let ports = ok(&hub, "GET", "/api/v1/ports", None);
    let me = &ports[0];
    assert_eq!(
        (me["error_state"].as_str(), me["tec"].as_u64(), me["tx_frames"].as_u64()),
        (Some("passive"), Some(128), Some(0))
    );
    // Somebody plugs in: the frame finally gets its ACK.
    let peer = hub.client("peer");
    peer.open_port("can0").unwrap();
    let got = recv_n(&peer, 1);
    assert_eq!(number_of(&got[0].frame), (1, 0));
}

#[test]
fn bad_fault_rules_are_refused_with_reasons() {
    let b = bench(None);
    let cases = [
        (json!({"channel": "nope", "at": "bus", "action": {"type": "drop"}}), 404, "no channel named 'nope'"),
        (json!({"channel": "can0", "at": "bus", "action": {"type": "drop"}, "probability": 2.0}), 422, "probability"),
        (json!({"channel": "can0", "at": "bus", "action": {"type": "explode"}}), 400, "explode"),
        (json!({"channel": "can0", "at": "sideways", "action": {"type": "drop"}}), 400, "sideways"),
        (json!({"channel": "can0", "at": "bus", "receiver": "listener", "action": {"type": "drop"}}), 422, "receiver"),
        (json!({"channel": "can0", "at": "bus", "sender": "ghost", "action": {"type": "drop"}}), 422, "ghost"),
        (json!({"channel": "can0", "at": "bus", "data": "0", "action": {"type": "drop"}}), 400, "hex"),
        (json!({"channel": "can0", "at": "bus", "data": "0é0", "action": {"type": "drop"}}), 400, "data: 'é'"),
        (
            json!({"channel": "can0", "at": "bus", "data": "00", "data_mask": "0é0", "action": {"type": "drop"}}),
            400,
            "data_mask",
        ),
        (json!({"channel": "can0", "at": "bus", "after_ms": 1e308, "action": {"type": "drop"}}), 422, "after_ms"),
        (json!({"channel": "can0", "at": "bus", "for_ms": 1e308, "action": {"type": "drop"}}), 422, "for_ms"),
        (json!({"channel": "can0", "at": "bus", "action": {"type": "delay", "ms": -1.0}}), 422, "delay"),
        (json!({"channel": "can0", "at": "bus", "action": {"type": "duplicate", "copies": 0}}), 422, "copies"),
    ];
    for (rule, status, reason) in cases {
        let (got, answer) = api(&b.hub, "POST", "/api/v1/faults", Some(rule.clone()));
        assert_eq!(got, status, "{rule}: {answer}");
        assert!(answer["error"].as_str().unwrap().contains(reason), "{rule}: {answer}");
    }
    let (status, _) = api(&b.hub, "DELETE", "/api/v1/faults/99", None);
    assert_eq!(status, 404);
    let (status, answer) = api(&b.hub, "POST", "/api/v1/ports/ecu/state", Some(json!({"state": "sleepy"})));
    assert_eq!(status, 400, "{answer}");
    b.send(traffic(10));
    assert_eq!(drain(&b.listener).len(), 20, "the bus carries on");
}

#[test]
fn hub_side_recording_captures_faults_and_replays_identically() {
    let dir = std::env::temp_dir().join(format!("fieldhub-rec-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let b = bench_with(None, &["--recordings-dir", dir.to_str().unwrap()]);
    let path = dir.join("session.log");
    let started = ok(&b.hub, "POST", "/api/v1/recordings", Some(json!({"path": "session.log", "channels": ["can0"]})));
    b.rule(
        json!({"channel": "can0", "at": "bus", "id": 0x200, "mask": 0x7FF, "count": 2, "action": {"type": "corrupt"}}),
    );
    b.send(traffic(300));
    let heard = recv_n(&b.listener, 602);
    let stopped = ok(&b.hub, "DELETE", &format!("/api/v1/recordings/{}", started["id"]), None);
    assert_eq!((stopped["frames"].as_u64(), stopped["dropped"].as_u64()), (Some(602), Some(0)));
    let reader = fieldhub_log::open(&path, None, &Default::default()).unwrap();
    let recorded: Vec<fieldhub_log::Record> = reader.collect::<Result<_, _>>().unwrap();
    assert_eq!(recorded.len(), 602);
    for (record, live) in recorded.iter().zip(&heard) {
        assert_eq!((record.channel.as_str(), &record.frame), ("can0", &live.frame));
        assert_eq!(record.timestamp_ns / 1000, live.meta.timestamp_ns / 1000);
    }
    assert_eq!(recorded.iter().filter(|r| r.frame.is_error()).count(), 2, "the corrupted attempts are in the log");

    // Replay it onto can1 of a fresh hub and hear the same frames in the same order.
    let hub2 = FIELDHUB.start();
    let far = hub2.client("far");
    far.open_port_with("can1", &lossless()).unwrap();
    let out = FIELDHUB
        .command()
        .args(["replay", "--hub", &hub2.url, "--fast", "--map", "can0=can1"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let replayed: Vec<Frame> = recv_n(&far, 602).into_iter().map(|r| r.frame).collect();
    assert_eq!(replayed, recorded.iter().map(|r| r.frame.clone()).collect::<Vec<_>>());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn transmit_errors_walk_a_port_through_passive_and_bus_off_to_recovery_with_socketcan_reports() {
    let b = bench(None);
    b.rule(json!({"channel": "can0", "at": "bus", "count": 32, "action": {"type": "corrupt"}}));
    b.sender.send(&b.tx, &numbered(0x100, 1, 0)).unwrap();
    // The sender sees 32 corruption error frames and three state reports:
    // error-passive at TEC 128, bus-off at TEC 256, restarted after recovery.
    let seen: Vec<Frame> = recv_n(&b.sender, 35).into_iter().map(|r| r.frame).collect();
    let reports: Vec<(u32, u8, u8, u8)> =
        seen.iter().filter(|f| f.id() != 0x08).map(|f| (f.id(), f.data()[1], f.data()[6], f.data()[7])).collect();
    assert_eq!(
        reports,
        [(0x204, 0x20, 128, 0), (0x240, 0, 255, 0), (0x300, 0, 0, 0)],
        "CAN_ERR_CRTL|CNT tx-passive, CAN_ERR_BUSOFF|CNT, CAN_ERR_RESTARTED|CNT"
    );
    let ecu = b.port("ecu");
    assert_eq!(
        (ecu["error_state"].as_str(), ecu["tec"].as_u64(), ecu["tx_dropped"].as_u64()),
        (Some("active"), Some(0), Some(1))
    );
    // Receivers counted one receive error per destroyed frame, then nothing
    // got through: REC stays at 32.
    assert_eq!(b.port("listener")["rec"].as_u64(), Some(32));
}
