//! The hub as SIL Kit's network simulator (`[[silkit]] mode = "simulator"`),
//! with the real `sil-kit-registry` and real SIL Kit participants
//! (`tests/silkit/silkit_netsim_peer.c`): SIL Kit participants and fieldhub
//! clients share one total order; a SIL Kit sender hears `Transmitted` only
//! once its frame is on the bus, at the frame's place in that order; SIL Kit
//! participants arbitrate among themselves by identifier and their frame
//! events carry the channel's bit timing; a flood is delivered or answered
//! `TransmitQueueFull`, never lost.
//!
//! Needs SIL Kit: `make test-silkit` fetches it, builds the peers and runs
//! this with `FIELDHUB_SILKIT_LIB`, `FIELDHUB_SILKIT_REGISTRY` and
//! `FIELDHUB_SILKIT_NETSIM_PEER` set; a missing one fails the test.

use std::collections::HashSet;
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::FIELDHUB;
use fieldhub_client::{Client, Frame, Port, PortConfig, Received};
use fieldhub_proto::bits::FrameBits;
use fieldhub_testkit::silkit::{start_registry, Process, SilKit};
use fieldhub_testkit::{occupy_bus, HubProcess, PATIENCE};

/// The payload tags: SIL Kit peers' frames and the fieldhub clients'.
const PEER_TAG: u8 = 0x5E;
const HUB_TAG: u8 = 0xF1;
const START_ID: u32 = 0x7FF;
const READY_ID: u32 = 0x7FE;
const DONE_ID: u32 = 0x7FD;
pub(super) const GO_ID: u32 = 0x7FC;
const FIN_ID: u32 = 0x7FB;
/// Frames that keep the bus busy: after GO in arbitration, ignored by the
/// peers (they answer only START, GO and DONE).
const BLOCK_ID: u32 = READY_ID;
/// `SilKit_CanTransmitStatus` values.
pub(super) const TRANSMITTED: u32 = 1;
pub(super) const CANCELED: u32 = 2;
const QUEUE_FULL: u32 = 4;

/// A SIL Kit participant of silkit_netsim_peer.c.
pub(super) struct Peer {
    process: Process,
    role: u8,
}

/// `window`: requests the peer keeps unanswered at most (0: a flood).
pub(super) fn start_peer(silkit: &SilKit, uri: &str, role: u8, count: u32, id: u32, window: u32) -> Peer {
    start_peer_with(silkit, uri, role, count, id, window, &[])
}

fn start_peer_with(silkit: &SilKit, uri: &str, role: u8, count: u32, id: u32, window: u32, extra: &[&str]) -> Peer {
    let child = Command::new(&silkit.peer)
        .args([uri, "CAN1", &format!("peer-{}", role as char), &(role as char).to_string(), &count.to_string()])
        .args([format!("{id:X}"), window.to_string()])
        .args(extra)
        .env("LD_LIBRARY_PATH", std::path::Path::new(&silkit.library).parent().unwrap())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start silkit_netsim_peer");
    Peer { process: Process(child), role }
}

/// A hub simulating SIL Kit network CAN1 of `uri` on channel `can0`.
pub(super) fn start_hub(silkit: &SilKit, uri: &str, channel_keys: &str) -> HubProcess {
    let config = format!(
        "[[channel]]\nname = \"can0\"\n{channel_keys}\n[[silkit]]\nchannel = \"can0\"\nregistry = \"{uri}\"\n\
         network = \"CAN1\"\nmode = \"simulator\"\n"
    );
    let hub = FIELDHUB.start_with_env(Some(&config), &[], &[("FIELDHUB_SILKIT_LIB", &silkit.library)]);
    hub.wait_for_log("SIL Kit network simulated");
    hub
}

/// A client with a lossless port on can0 that also receives its own frames.
pub(super) fn client(hub: &HubProcess, name: &str) -> (Client, Port) {
    let client = hub.client(name);
    let config = PortConfig { block_on_overflow: true, receive_own: true, ..Default::default() };
    let port = client.open_port_with("can0", &config).unwrap();
    (client, port)
}

/// Send START until every peer answered READY through the simulator.
pub(super) fn wait_until_simulated(client: &Client, port: &Port, peers: &[&Peer]) {
    let start = Frame::can(START_ID, false, &[]).unwrap();
    let mut ready = HashSet::new();
    let deadline = Instant::now() + PATIENCE;
    while !peers.iter().all(|p| ready.contains(&p.role)) {
        assert!(Instant::now() < deadline, "the SIL Kit peers never answered through the simulator: {ready:?}");
        client.send(port, &start).unwrap();
        while let Some(r) = client.recv(Some(Duration::from_millis(200))).unwrap() {
            if let (READY_ID, [role]) = (r.frame.id(), r.frame.data()) {
                ready.insert(*role);
            }
        }
    }
}

/// A numbered frame: (tag or role, n) from its payload.
pub(super) fn number(frame: &Frame) -> Option<(u8, u32)> {
    match frame.data() {
        [PEER_TAG, role, n @ ..] if n.len() == 6 => Some((*role, u32::from_le_bytes(n[..4].try_into().unwrap()))),
        [HUB_TAG, who, n @ ..] if n.len() == 6 => Some((*who, u32::from_le_bytes(n[..4].try_into().unwrap()))),
        _ => None,
    }
}

fn hub_frame(who: u8, n: u32) -> Frame {
    let mut data = [HUB_TAG, who, 0, 0, 0, 0, 0, 0];
    data[2..6].copy_from_slice(&n.to_le_bytes());
    Frame::can(0x180 + n % 16, false, &data).unwrap()
}

/// Every frame the client receives until each of `peers` said FIN and
/// `native` more numbered frames of fieldhub clients came: the numbered
/// ones, in order.
pub(super) fn collect(client: &Client, hub: &HubProcess, peers: usize, native: usize) -> Vec<Received> {
    let (mut got, mut fins, mut natives) = (Vec::new(), 0, 0);
    while fins < peers || natives < native {
        let Some(r) = client.recv(Some(PATIENCE)).unwrap() else {
            panic!("stalled after {} frames ({fins} FIN); hub log: {:#?}", got.len(), hub.log())
        };
        match (r.frame.id(), number(&r.frame)) {
            (FIN_ID, _) => fins += 1,
            (_, Some(_)) => {
                natives += usize::from(r.frame.data()[0] == HUB_TAG);
                got.push(r);
            }
            _ => {}
        }
    }
    got
}

/// End a peer and parse what it saw: its lines, split into words.
pub(super) fn finish(client: &Client, port: &Port, peer: &mut Peer) -> Vec<Vec<String>> {
    client.send(port, &Frame::can(DONE_ID, false, &[]).unwrap()).unwrap();
    let mut out = String::new();
    peer.process.0.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    assert!(peer.process.0.wait().unwrap().success(), "peer {} failed", peer.role as char);
    out.lines().map(|l| l.split(' ').map(str::to_owned).collect()).collect()
}

/// The frames a peer's frame events show, as (tag or role, n), with their
/// timestamps, in the order SIL Kit showed them.
pub(super) fn shown_frames(lines: &[Vec<String>]) -> Vec<((u8, u32), u64)> {
    lines
        .iter()
        .filter(|w| w[0] == "F")
        .map(|w| {
            let frame = Frame::can(u32::from_str_radix(&w[2], 16).unwrap(), false, &hex_bytes(&w[3])).unwrap();
            (number(&frame).expect("a numbered frame"), w[4].parse().unwrap())
        })
        .collect()
}

/// Two SIL Kit participants and two fieldhub clients each send 2,500
/// numbered frames at once: all four see one identical order, each
/// sender's frames in its order, none lost or duplicated; a SIL Kit
/// sender's `Transmitted` comes right after its frame, at that frame's
/// place in the order, with its user context.
#[test]
fn silkit_participants_and_fieldhub_clients_share_one_order() {
    const EACH: u32 = 2_500;
    let silkit = SilKit::from_env("FIELDHUB_SILKIT_NETSIM_PEER");
    let (_registry, uri) = start_registry(&silkit, 0);
    let hub = start_hub(&silkit, &uri, "protocol = \"canfd\"\n");
    let mut a = start_peer(&silkit, &uri, b'A', EACH, 0x100, 32);
    let mut b = start_peer(&silkit, &uri, b'B', EACH, 0x200, 32);
    let (c, c_port) = client(&hub, "native-c");
    let (d, d_port) = client(&hub, "native-d");
    wait_until_simulated(&c, &c_port, &[&a, &b]);
    c.send(&c_port, &Frame::can(GO_ID, false, &[]).unwrap()).unwrap();
    let order = std::thread::scope(|s| {
        s.spawn(|| (0..EACH).for_each(|n| c.send(&c_port, &hub_frame(b'C', n)).unwrap()));
        s.spawn(|| (0..EACH).for_each(|n| d.send(&d_port, &hub_frame(b'D', n)).unwrap()));
        let seen_by_d = s.spawn(|| collect(&d, &hub, 2, 2 * EACH as usize));
        let seen_by_c = collect(&c, &hub, 2, 2 * EACH as usize);
        let seen_by_d = seen_by_d.join().unwrap();
        let numbers = |seen: &[Received]| seen.iter().map(|r| number(&r.frame).unwrap()).collect::<Vec<_>>();
        assert_eq!(numbers(&seen_by_c), numbers(&seen_by_d), "the fieldhub clients saw different orders");
        numbers(&seen_by_c)
    });
    assert_eq!(order.len(), 4 * EACH as usize, "lost or duplicated frames");
    for who in [b'A', b'B', b'C', b'D'] {
        let own: Vec<u32> = order.iter().filter(|(w, _)| *w == who).map(|(_, n)| *n).collect();
        assert_eq!(own, (0..EACH).collect::<Vec<_>>(), "{} out of its order", who as char);
    }
    for peer in [&mut a, &mut b] {
        let lines = finish(&c, &c_port, peer);
        let shown: Vec<(u8, u32)> = shown_frames(&lines).into_iter().map(|(n, _)| n).collect();
        assert_eq!(shown, order, "peer {} saw another order", peer.role as char);
        // Each own frame event (T) is followed by its Transmitted event.
        let mut acks = 0;
        for (k, words) in lines.iter().enumerate().filter(|(_, w)| w[0] == "F" && w[1] == "T") {
            let ack = &lines[k + 1];
            let n = u32::from_le_bytes(hex_bytes(&words[3])[2..6].try_into().unwrap());
            assert_eq!(ack[0], "A", "no transmit event after own frame {n}");
            assert_eq!(ack[1].parse::<u32>().unwrap(), TRANSMITTED);
            assert_eq!((ack[2].as_str(), ack[3].parse::<u32>().unwrap()), (words[2].as_str(), n + 1));
            assert_eq!(ack[4], words[4], "the transmit event's time is the frame's");
            acks += 1;
        }
        assert_eq!(acks, EACH);
        assert_eq!(lines.iter().filter(|w| w[0] == "A").count(), EACH as usize, "answered once each");
    }
}

pub(super) fn hex_bytes(text: &str) -> Vec<u8> {
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap()).collect()
}

/// Two SIL Kit participants queue frames while the bus is busy: they go
/// lowest identifier first, each sender's in its order, and the frame
/// events' timestamps are each frame's bit time apart.
#[test]
fn silkit_participants_arbitrate_by_identifier_with_the_channels_bit_timing() {
    let silkit = SilKit::from_env("FIELDHUB_SILKIT_NETSIM_PEER");
    let (_registry, uri) = start_registry(&silkit, 0);
    // At 500 bit/s an 8-byte frame keeps the bus busy for about 220 ms.
    let hub = start_hub(&silkit, &uri, "bitrate = 500\ntiming = \"timed\"\n");
    let mut high = start_peer(&silkit, &uri, b'H', 2, 0x300, 0);
    let mut low = start_peer(&silkit, &uri, b'L', 2, 0x100, 0);
    let (client, port) = client(&hub, "observer");
    wait_until_simulated(&client, &port, &[&high, &low]);
    let blocker = hub.client("blocker");
    occupy_bus(&blocker, "can0", BLOCK_ID);
    // GO wins after the first block; both peers answer while GO or the
    // second block is on the bus, so their frames contend together.
    client.send(&port, &Frame::can(GO_ID, false, &[]).unwrap()).unwrap();
    let order = collect(&client, &hub, 2, 0);
    let ids: Vec<u32> = order.iter().map(|r| r.frame.id()).collect();
    assert_eq!(ids, [0x100, 0x101, 0x300, 0x301], "not in arbitration order");
    for peer in [&mut high, &mut low] {
        let lines = finish(&client, &port, peer);
        let shown = shown_frames(&lines);
        let roles: Vec<(u8, u32)> = shown.iter().map(|(n, _)| *n).collect();
        assert_eq!(roles, [(b'L', 0), (b'L', 1), (b'H', 0), (b'H', 1)], "peer {}", peer.role as char);
        for k in 1..shown.len() {
            let gap = shown[k].1 - shown[k - 1].1;
            assert_eq!(gap, FrameBits::of(&order[k].frame).duration_ns(500, 500), "frame {k} of {shown:?}");
        }
    }
}

/// A SIL Kit participant floods the network far beyond its controller's
/// queue: every request is answered once — `Transmitted` for exactly the
/// frames the bus carried (in order), `TransmitQueueFull` for the rest.
#[test]
fn a_flood_from_silkit_is_delivered_or_answered_queue_full() {
    const FLOOD: u32 = 3_000;
    let silkit = SilKit::from_env("FIELDHUB_SILKIT_NETSIM_PEER");
    let (_registry, uri) = start_registry(&silkit, 0);
    let hub = start_hub(&silkit, &uri, "bitrate = 125000\ntiming = \"timed\"\n");
    let mut flooder = start_peer(&silkit, &uri, b'F', FLOOD, 0x100, 0);
    let (client, port) = client(&hub, "observer");
    wait_until_simulated(&client, &port, &[&flooder]);
    client.send(&port, &Frame::can(GO_ID, false, &[]).unwrap()).unwrap();
    let carried: Vec<u32> = collect(&client, &hub, 1, 0).iter().map(|r| number(&r.frame).unwrap().1).collect();
    let lines = finish(&client, &port, &mut flooder);
    let answers: Vec<(u32, u32)> = lines
        .iter()
        .filter(|w| w[0] == "A")
        .map(|w| (w[1].parse().unwrap(), w[3].parse::<u32>().unwrap() - 1))
        .collect();
    assert_eq!(answers.len(), FLOOD as usize, "a request without an answer");
    let mut answered: Vec<u32> = answers.iter().map(|(_, n)| *n).collect();
    answered.sort_unstable();
    assert_eq!(answered, (0..FLOOD).collect::<Vec<_>>(), "each request answered exactly once");
    let transmitted: Vec<u32> = answers.iter().filter(|(s, _)| *s == TRANSMITTED).map(|(_, n)| *n).collect();
    assert_eq!(transmitted, carried, "Transmitted for exactly the frames on the bus, in their order");
    let full = answers.iter().filter(|(s, _)| *s == QUEUE_FULL).count();
    assert_eq!(full + carried.len(), FLOOD as usize, "the others answered TransmitQueueFull");
    assert!(full > 0, "the flood never filled the controller's queue");
}

/// A SIL Kit participant stops its controller: the simulator answers with
/// the state change, cancels what the stopped controller asks to send (no
/// frame of it reaches the bus), and answers its restart.
#[test]
fn a_stopped_controller_hears_its_state_and_its_requests_are_canceled() {
    const FRAMES: u32 = 5;
    let silkit = SilKit::from_env("FIELDHUB_SILKIT_NETSIM_PEER");
    let (_registry, uri) = start_registry(&silkit, 0);
    let hub = start_hub(&silkit, &uri, "");
    let mut peer = start_peer_with(&silkit, &uri, b'S', FRAMES, 0x100, 0, &["stopped"]);
    let (client, port) = client(&hub, "observer");
    wait_until_simulated(&client, &port, &[&peer]);
    client.send(&port, &Frame::can(GO_ID, false, &[]).unwrap()).unwrap();
    assert!(collect(&client, &hub, 1, 0).is_empty(), "a stopped controller's frame reached the bus");
    let lines = finish(&client, &port, &mut peer);
    let stopped = lines.iter().position(|w| w[..] == ["S", "1"]).unwrap_or_else(|| panic!("no Stopped: {lines:?}"));
    let after: Vec<&Vec<String>> = lines[stopped + 1..].iter().collect();
    assert_eq!(after.len(), FRAMES as usize + 1, "{lines:?}");
    for (n, words) in after[..FRAMES as usize].iter().enumerate() {
        assert_eq!((words[0].as_str(), words[1].parse::<u32>().unwrap()), ("A", CANCELED), "{lines:?}");
        assert_eq!(words[3].parse::<usize>().unwrap(), n + 1, "answered in order: {lines:?}");
    }
    assert_eq!(after[FRAMES as usize][..], ["S", "2"], "no Started after the restart: {lines:?}");
}

/// On an ideal channel the answer to a SIL Kit request is produced from
/// SIL Kit's own thread, the one that handed the frame to the bus — no
/// bridge or delivery thread in between (issue 35). A participant sends
/// its frames one at a time, each waiting for its `Transmitted`; the
/// hub's last line counts where the bus's items were produced.
#[test]
fn on_an_ideal_channel_answers_are_produced_from_silkits_own_thread() {
    const FRAMES: u32 = 200;
    let silkit = SilKit::from_env("FIELDHUB_SILKIT_NETSIM_PEER");
    let (_registry, uri) = start_registry(&silkit, 0);
    let hub = start_hub(&silkit, &uri, "");
    let mut peer = start_peer(&silkit, &uri, b'I', FRAMES, 0x100, 1);
    let (client, port) = client(&hub, "observer");
    wait_until_simulated(&client, &port, &[&peer]);
    client.send(&port, &Frame::can(GO_ID, false, &[]).unwrap()).unwrap();
    assert_eq!(collect(&client, &hub, 1, 0).len(), FRAMES as usize, "every frame on the bus");
    let lines = finish(&client, &port, &mut peer);
    let transmitted = lines.iter().filter(|w| w[0] == "A" && w[1].parse::<u32>().unwrap() == TRANSMITTED).count();
    assert_eq!(transmitted, FRAMES as usize, "each request answered Transmitted: {lines:?}");
    // SIGTERM: the hub stops, and the simulator says what it produced.
    let stopped = Command::new("kill").args(["-TERM", &hub.pid().to_string()]).status().unwrap();
    assert!(stopped.success());
    let left = hub.wait_for_log("SIL Kit simulator left");
    let count = |key: &str| -> u64 {
        let value = left.split(' ').find_map(|word| word.strip_prefix(key));
        value.unwrap_or_else(|| panic!("no {key} in {left:?}")).parse().unwrap()
    };
    let (inline, by_thread) = (count("produced_inline="), count("produced_by_thread="));
    assert!(inline + by_thread >= u64::from(FRAMES), "each frame's echo produced: {left}");
    assert!(inline > 0, "no answer produced from SIL Kit's thread: {left}");
}
