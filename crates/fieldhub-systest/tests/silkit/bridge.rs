//! A hub channel on a SIL Kit CAN network, with the real `sil-kit-registry`
//! and real SIL Kit participants (`tests/silkit/silkit_peer.c`): frames cross
//! both ways, every kind and flag, in order, none lost, duplicated or
//! echoed back; SIL Kit's frames take their bit time on a timed channel,
//! obey fault rules and contend with native frames by identifier; a classic
//! channel drops SIL Kit's CAN FD frames, reported once; a registry that
//! comes after the hub is joined.
//!
//! Needs SIL Kit: `make test-silkit` fetches it, builds the peers and runs
//! this with `FIELDHUB_SILKIT_LIB`, `FIELDHUB_SILKIT_REGISTRY` and
//! `FIELDHUB_SILKIT_PEER` set; a missing one fails the test.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::FIELDHUB;
use fieldhub_client::{Client, Frame, FrameFlags, Port, PortConfig};
use fieldhub_proto::bits::FrameBits;
use fieldhub_testkit::silkit::{free_port, start_registry, Process, SilKit};
use fieldhub_testkit::{occupy_bus, ok, HubProcess, PATIENCE};

/// Frames each way.
const FRAMES: u32 = 5000;
/// The tags the peer's payloads start with (see silkit_peer.c).
const PEER_TAG: u8 = 0x5C;
const HUB_TAG: u8 = 0xF1;
const START_ID: u32 = 0x7FF;
const READY_ID: u32 = 0x7FE;
const DONE_ID: u32 = 0x7FD;
const GO_ID: u32 = 0x7FC;
/// The channel key of a CAN FD channel.
const FD: &str = "protocol = \"canfd\"\n";
/// SIL Kit's flag bits (silkit/capi/Can.h).
const IDE: u32 = 1 << 9;
const FDF: u32 = 1 << 12;
const BRS: u32 = 1 << 13;
const ESI: u32 = 1 << 14;

fn start_peer(silkit: &SilKit, role: &str, uri: &str, name: &str, count: u32) -> Process {
    let child = Command::new(&silkit.peer)
        .args([role, uri, "CAN1", name, &count.to_string()])
        .env("LD_LIBRARY_PATH", std::path::Path::new(&silkit.library).parent().unwrap())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start silkit_peer");
    Process(child)
}

/// A hub with one channel `can0` (with `channel_keys`) on the SIL Kit
/// network CAN1 of `uri`.
fn start_hub(silkit: &SilKit, uri: &str, channel_keys: &str) -> HubProcess {
    let config = format!(
        "[[channel]]\nname = \"can0\"\n{channel_keys}\n[[silkit]]\nchannel = \"can0\"\nregistry = \"{uri}\"\nnetwork = \"CAN1\"\n"
    );
    FIELDHUB.start_with_env(Some(&config), &[], &[("FIELDHUB_SILKIT_LIB", &silkit.library)])
}

/// A client with a lossless CAN FD port on can0.
fn listener(hub: &HubProcess) -> (Client, Port) {
    let client = hub.client("test");
    let port =
        client.open_port_with("can0", &PortConfig { fd: true, block_on_overflow: true, ..Default::default() }).unwrap();
    (client, port)
}

/// The next `count` frames from the SIL Kit sender peer, in order. A frame
/// with the hub side's tag is this client's own come back: an echo.
fn peer_frames(client: &Client, hub: &HubProcess, count: usize) -> Vec<fieldhub_client::Received> {
    let mut got = Vec::with_capacity(count);
    while got.len() < count {
        let Some(received) = client.recv(Some(PATIENCE)).unwrap() else {
            panic!("stalled after {} frames from SIL Kit; hub log: {:#?}", got.len(), hub.log())
        };
        assert!(!tagged(&received.frame, HUB_TAG), "an echo: {:?}", received.frame);
        if tagged(&received.frame, PEER_TAG) {
            got.push(received);
        }
    }
    got
}

fn end_peer(client: &Client, port: &Port, peer: &mut Process, name: &str) {
    client.send(port, &Frame::can(DONE_ID, false, &[]).unwrap()).unwrap();
    assert!(peer.0.wait().unwrap().success(), "the {name} peer failed");
}

/// Frame `n` of a numbered stream, as silkit_peer.c builds it: the kind
/// follows `n % 4` so every flag crosses.
fn numbered(tag: u8, n: u32) -> Frame {
    let mut data = [n as u8; 64];
    data[0] = tag;
    data[1..5].copy_from_slice(&n.to_le_bytes());
    match n % 4 {
        0 => Frame::can(0x100 + n % 0x100, false, &data[..5]),
        1 => Frame::can(0x100_0000 + n, true, &data[..5]),
        2 => Frame::can_fd(0x200, FrameFlags::BRS, &data[..12]),
        _ => Frame::can_fd(0x2000 + n, FrameFlags::ESI | FrameFlags::EXTENDED, &data[..64]),
    }
    .unwrap()
}

/// The recorder's line for a frame: "ID FLAGS DLC HEXDATA" with SIL Kit's flags.
fn silkit_line(frame: &Frame) -> String {
    let flags = [
        (frame.is_extended(), IDE),
        (frame.is_fd(), FDF),
        (frame.flags().contains(FrameFlags::BRS), BRS),
        (frame.flags().contains(FrameFlags::ESI), ESI),
    ]
    .iter()
    .filter(|(set, _)| *set)
    .fold(0, |all, (_, bit)| all | bit);
    let data: String = frame.data().iter().map(|b| format!("{b:02X}")).collect();
    format!("{:X} {flags:X} {} {data}", frame.id(), frame.dlc())
}

fn tagged(frame: &Frame, tag: u8) -> bool {
    frame.data().first() == Some(&tag)
}

/// Send START until every peer of `roles` (b'S' sender, b'R' recorder)
/// answered READY: from then on they and the bridge know each other both
/// ways (the sender waits for GO).
fn wait_until_peers_ready(client: &Client, port: &Port, roles: &[u8]) {
    let start = Frame::can(START_ID, false, &[]).unwrap();
    let mut ready = Vec::new();
    let deadline = Instant::now() + PATIENCE;
    while !roles.iter().all(|r| ready.contains(r)) {
        assert!(Instant::now() < deadline, "the SIL Kit peers never answered (ready: {ready:?})");
        client.send(port, &start).unwrap();
        // Look again for a while before asking once more.
        while let Some(r) = client.recv(Some(Duration::from_millis(200))).unwrap() {
            if let (READY_ID, [role]) = (r.frame.id(), r.frame.data()) {
                ready.push(*role);
            }
        }
    }
}

#[test]
fn frames_cross_both_ways_in_order_none_lost_duplicated_or_echoed() {
    let silkit = SilKit::from_env("FIELDHUB_SILKIT_PEER");
    let (_registry, uri) = start_registry(&silkit, 0);
    let hub = start_hub(&silkit, &uri, FD);
    hub.wait_for_log("SIL Kit network joined");
    let mut sender = start_peer(&silkit, "send", &uri, "peer-send", FRAMES);
    let mut recorder = start_peer(&silkit, "record", &uri, "peer-record", FRAMES);
    let (client, port) = listener(&hub);
    wait_until_peers_ready(&client, &port, b"SR");
    client.send(&port, &Frame::can(GO_ID, false, &[]).unwrap()).unwrap();

    // Both ways at once: this client's frames to the recorder while the
    // sender's frames come in.
    let from_peer = std::thread::scope(|s| {
        s.spawn(|| (0..FRAMES).for_each(|n| client.send(&port, &numbered(HUB_TAG, n)).unwrap()));
        peer_frames(&client, &hub, FRAMES as usize)
    });
    for (n, received) in from_peer.iter().enumerate() {
        assert!(received.frame == numbered(PEER_TAG, n as u32), "frame {n} from SIL Kit: {:?}", received.frame);
    }

    let mut recorded = String::new();
    recorder.0.stdout.take().unwrap().read_to_string(&mut recorded).unwrap();
    let lines: Vec<&str> = recorded.lines().collect();
    assert_eq!(lines.len(), FRAMES as usize, "the recorder's frames from the hub");
    for (n, line) in lines.iter().enumerate() {
        assert_eq!(*line, silkit_line(&numbered(HUB_TAG, n as u32)), "frame {n} to SIL Kit");
    }

    end_peer(&client, &port, &mut sender, "sender");
    end_peer(&client, &port, &mut recorder, "recorder");
    // Everything the hub delivered is here once a flush returns: no frame of
    // this client came back (an echo), none from SIL Kit came twice.
    client.flush().unwrap();
    let mut others = Vec::new();
    while let Some(r) = client.try_recv().unwrap() {
        others.push(r.frame);
    }
    let stray: Vec<_> = others.iter().filter(|f| tagged(f, HUB_TAG) || tagged(f, PEER_TAG)).collect();
    assert!(stray.is_empty(), "{} frames echoed or duplicated, first {:?}", stray.len(), stray[0]);
    assert!(others.iter().all(|f| f.id() == READY_ID), "unexpected frames: {others:?}");
    // Leaving the simulation does not hold the hub's shutdown.
    assert!(hub.terminate().success(), "the hub did not stop cleanly");
}

/// On a timed channel SIL Kit's frames take the bus for their exact bit
/// time, and a fault rule on the bridge's port applies to them: the frames
/// it drops are counted on the port and logged.
#[test]
fn frames_from_silkit_take_their_bit_time_and_obey_fault_rules() {
    const COUNT: u32 = 2000;
    let silkit = SilKit::from_env("FIELDHUB_SILKIT_PEER");
    let (_registry, uri) = start_registry(&silkit, 0);
    let hub = start_hub(&silkit, &uri, &format!("{FD}bitrate = 500000\ndata_bitrate = 2000000\ntiming = \"timed\"\n"));
    hub.wait_for_log("SIL Kit network joined");
    // The bridge's port is named like the participant.
    let rule = serde_json::json!({"channel": "can0", "at": "sender", "sender": "fieldhub-can0",
        "id": 0x200, "mask": 0x7FF, "extended": false, "action": {"type": "drop"}});
    ok(&hub, "POST", "/api/v1/faults", Some(rule));
    let mut sender = start_peer(&silkit, "send", &uri, "peer-send", COUNT);
    let (client, port) = listener(&hub);
    wait_until_peers_ready(&client, &port, b"S");
    client.send(&port, &Frame::can(GO_ID, false, &[]).unwrap()).unwrap();

    // Kind 2 (11-bit id 0x200) is dropped as it leaves the bridge's port.
    let expected: Vec<Frame> = (0..COUNT).filter(|n| n % 4 != 2).map(|n| numbered(PEER_TAG, n)).collect();
    let got = peer_frames(&client, &hub, expected.len());
    for (k, (received, frame)) in got.iter().zip(&expected).enumerate() {
        assert!(received.frame == *frame, "frame {k}: {:?}", received.frame);
    }
    for k in 1..got.len() {
        let gap = got[k].meta.timestamp_ns - got[k - 1].meta.timestamp_ns;
        let bit_time = FrameBits::of(&got[k].frame).duration_ns(500_000, 2_000_000);
        assert!(gap >= bit_time, "frame {k} ended {gap} ns after the one before, its bit time is {bit_time} ns");
    }
    // SIL Kit acknowledged each dropped frame to its sender when it was sent;
    // the hub cannot answer otherwise, so it counts the drops on the bridge's
    // port and logs them.
    let stats = ok(&hub, "GET", "/api/v1/stats", None);
    let ports = stats["ports"].as_array().unwrap();
    let bridge =
        ports.iter().find(|p| p["name"] == "fieldhub-can0").unwrap_or_else(|| panic!("no bridge port: {stats}"));
    assert_eq!(bridge["tx_dropped_by_reason"], serde_json::json!({"fault_rule": COUNT / 4}), "{stats}");
    hub.wait_for_log("frames from SIL Kit dropped by a fault rule");
    end_peer(&client, &port, &mut sender, "sender");
}

/// A hub started before its registry keeps trying and joins once the
/// registry is there.
#[test]
fn a_registry_that_comes_later_is_joined_when_it_comes() {
    const COUNT: u32 = 100;
    let silkit = SilKit::from_env("FIELDHUB_SILKIT_PEER");
    let port = free_port();
    let hub = start_hub(&silkit, &format!("silkit://127.0.0.1:{port}"), FD);
    hub.wait_for_log("cannot join SIL Kit; retrying");
    let (_registry, uri) = start_registry(&silkit, port);
    hub.wait_for_log("SIL Kit network joined");
    let mut sender = start_peer(&silkit, "send", &uri, "peer-send", COUNT);
    let (client, port) = listener(&hub);
    wait_until_peers_ready(&client, &port, b"S");
    client.send(&port, &Frame::can(GO_ID, false, &[]).unwrap()).unwrap();
    let got = peer_frames(&client, &hub, COUNT as usize);
    assert!(got.iter().enumerate().all(|(n, r)| r.frame == numbered(PEER_TAG, n as u32)));
    end_peer(&client, &port, &mut sender, "sender");
}

/// A classic channel cannot carry SIL Kit's CAN FD frames: they are dropped
/// and reported once, the classic ones cross in order.
#[test]
fn on_a_classic_channel_silkit_fd_frames_are_dropped_and_reported_once() {
    const COUNT: u32 = 200;
    let silkit = SilKit::from_env("FIELDHUB_SILKIT_PEER");
    let (_registry, uri) = start_registry(&silkit, 0);
    let hub = start_hub(&silkit, &uri, "protocol = \"can\"\n");
    hub.wait_for_log("SIL Kit network joined");
    let mut sender = start_peer(&silkit, "send", &uri, "peer-send", COUNT);
    let (client, port) = listener(&hub);
    wait_until_peers_ready(&client, &port, b"S");
    client.send(&port, &Frame::can(GO_ID, false, &[]).unwrap()).unwrap();
    // Kinds 0 and 1 are classic, 2 and 3 CAN FD.
    let expected: Vec<Frame> = (0..COUNT).filter(|n| n % 4 < 2).map(|n| numbered(PEER_TAG, n)).collect();
    let got = peer_frames(&client, &hub, expected.len());
    assert!(got.iter().zip(&expected).all(|(r, f)| r.frame == *f));
    end_peer(&client, &port, &mut sender, "sender");
    client.flush().unwrap();
    let log = hub.log();
    let reports = log.iter().filter(|l| l.contains("dropping CAN FD frames from SIL Kit")).count();
    assert_eq!(reports, 1, "{log:#?}");
    assert!(!log.iter().any(|l| l.contains("the bus reports")), "{log:#?}");
}

/// The bridge's port contends for the bus like any port: frames pending
/// together go lowest identifier first, a port's own frames in their
/// order, each frame ending its bit time after the one before.
#[test]
fn silkit_frames_and_native_frames_pending_together_go_in_arbitration_order() {
    let silkit = SilKit::from_env("FIELDHUB_SILKIT_PEER");
    let (_registry, uri) = start_registry(&silkit, 0);
    // At 500 bit/s an 8-byte frame keeps the bus busy for about 220 ms.
    let hub = start_hub(&silkit, &uri, "bitrate = 500\ntiming = \"timed\"\n");
    hub.wait_for_log("SIL Kit network joined");
    // The sender's burst: 0x100, then 0x1000001 (29-bit, base bits 0x040).
    let mut sender = start_peer(&silkit, "send", &uri, "peer-send", 2);
    let (client, port) = listener(&hub);
    wait_until_peers_ready(&client, &port, b"S");
    let contender = hub.client("contender");
    let c = contender.open_port("can0").unwrap();
    let blocker = hub.client("blocker");
    let blocks = occupy_bus(&blocker, "can0", 0x7FF);
    // GO wins the bus after the first block. The sender (which waits for GO)
    // and the contender (which waits to see GO) answer while GO or the
    // second block is on the bus, so their frames contend together.
    client.send(&port, &Frame::can(GO_ID, false, &[]).unwrap()).unwrap();
    let native = Frame::can(0x0C0, false, &[0xC0]).unwrap();
    std::thread::scope(|s| {
        s.spawn(|| {
            while contender.recv(Some(PATIENCE)).unwrap().expect("GO reaches the contender").frame.id() != GO_ID {}
            contender.send(&c, &native).unwrap();
        });
    });
    let mut order = Vec::new();
    while order.len() < 6 {
        let received = client.recv(Some(PATIENCE)).unwrap().expect("the frames pending together");
        if received.frame.id() != READY_ID {
            order.push(received);
        }
    }
    let frames: Vec<Frame> = order.iter().map(|r| r.frame.clone()).collect();
    // The native 0x0C0 wins over SIL Kit's 0x100 though sent later; SIL
    // Kit's 29-bit frame (base bits 0x040) waits behind its port's 0x100;
    // the blocks (0x7FF) go in their order, the third after all of them.
    let contenders = [native.clone(), numbered(PEER_TAG, 0), numbered(PEER_TAG, 1)];
    let first = frames.iter().position(|f| *f == native).unwrap_or_else(|| panic!("{frames:?}"));
    assert_eq!(frames[first..first + 3], contenders, "{frames:?}");
    let blocks_seen: Vec<Frame> = frames.iter().filter(|f| f.id() == 0x7FF).cloned().collect();
    assert_eq!(blocks_seen, blocks, "{frames:?}");
    assert_eq!(frames[5], blocks[2], "{frames:?}");
    // From the third frame on each follows the one before without a gap
    // (the first two follow GO, which this client does not receive).
    for k in 2..order.len() {
        let gap = order[k].meta.timestamp_ns - order[k - 1].meta.timestamp_ns;
        assert_eq!(gap, FrameBits::of(&order[k].frame).duration_ns(500, 500), "frame {k}: {frames:?}");
    }
    end_peer(&client, &port, &mut sender, "sender");
}
