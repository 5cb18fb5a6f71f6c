//! A hub channel on a SIL Kit CAN network, with the real `sil-kit-registry`
//! and real SIL Kit participants (`tests/silkit/silkit_peer.c`): frames cross
//! both ways, every kind and flag, in order, none lost, duplicated or
//! echoed back.
//!
//! Needs SIL Kit: `make test-silkit` fetches it, builds the peer and runs
//! this with `FIELDHUB_SILKIT_LIB`, `FIELDHUB_SILKIT_REGISTRY` and
//! `FIELDHUB_SILKIT_PEER` set (and `FIELDHUB_SILKIT_REQUIRED=1`, so a
//! missing one fails). Without them the test says so and passes.

mod common;

use std::io::Read;
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{HubProcess, PATIENCE};
use fieldhub_client::{Client, Frame, FrameFlags, Port, PortConfig};

/// Frames each way.
const FRAMES: u32 = 5000;
/// The tags the peer's payloads start with (see silkit_peer.c).
const PEER_TAG: u8 = 0x5C;
const HUB_TAG: u8 = 0xF1;
const START_ID: u32 = 0x7FF;
const READY_ID: u32 = 0x7FE;
const DONE_ID: u32 = 0x7FD;
const GO_ID: u32 = 0x7FC;
/// SIL Kit's flag bits (silkit/capi/Can.h).
const IDE: u32 = 1 << 9;
const FDF: u32 = 1 << 12;
const BRS: u32 = 1 << 13;
const ESI: u32 = 1 << 14;

/// Where `make test-silkit` put SIL Kit and the peer.
struct SilKit {
    library: String,
    registry: String,
    peer: String,
}

impl SilKit {
    /// The paths from the environment, or `None` (with the reason printed)
    /// when SIL Kit is not set up and not required.
    fn from_env() -> Option<Self> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        match (var("FIELDHUB_SILKIT_LIB"), var("FIELDHUB_SILKIT_REGISTRY"), var("FIELDHUB_SILKIT_PEER")) {
            (Some(library), Some(registry), Some(peer)) => Some(Self { library, registry, peer }),
            _ if var("FIELDHUB_SILKIT_REQUIRED").is_some() => {
                panic!("FIELDHUB_SILKIT_LIB, FIELDHUB_SILKIT_REGISTRY and FIELDHUB_SILKIT_PEER must be set")
            }
            _ => {
                println!(
                    "skipped: needs SIL Kit (FIELDHUB_SILKIT_LIB, FIELDHUB_SILKIT_REGISTRY, FIELDHUB_SILKIT_PEER); \
                     `make test-silkit` sets them up and runs this"
                );
                None
            }
        }
    }
}

/// A child process killed when the test ends, however it ends.
struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A `sil-kit-registry` on a free loopback port; its `silkit://` URI.
fn start_registry(silkit: &SilKit) -> (Process, String) {
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let uri = format!("silkit://127.0.0.1:{port}");
    let child = Command::new(&silkit.registry)
        .args(["--listen-uri", &uri])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start sil-kit-registry");
    let deadline = Instant::now() + PATIENCE;
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "sil-kit-registry never listened on {uri}");
        std::thread::sleep(Duration::from_millis(20));
    }
    (Process(child), uri)
}

fn start_peer(silkit: &SilKit, role: &str, uri: &str, name: &str) -> Process {
    let child = Command::new(&silkit.peer)
        .args([role, uri, "CAN1", name, &FRAMES.to_string()])
        .env("LD_LIBRARY_PATH", std::path::Path::new(&silkit.library).parent().unwrap())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start silkit_peer");
    Process(child)
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

/// Send START until both peers answered READY: from then on they and the
/// bridge know each other both ways (the sender waits for GO).
fn wait_until_peers_ready(client: &Client, port: &Port) {
    let start = Frame::can(START_ID, false, &[]).unwrap();
    let mut ready = (false, false);
    let deadline = Instant::now() + PATIENCE;
    while ready != (true, true) {
        assert!(Instant::now() < deadline, "the SIL Kit peers never answered (ready: {ready:?})");
        client.send(port, &start).unwrap();
        // Look again for a while before asking once more.
        while let Some(r) = client.recv(Some(Duration::from_millis(200))).unwrap() {
            match (r.frame.id(), r.frame.data()) {
                (READY_ID, [b'S']) => ready.0 = true,
                (READY_ID, [b'R']) => ready.1 = true,
                _ => {}
            }
        }
    }
}

#[test]
fn frames_cross_both_ways_in_order_none_lost_duplicated_or_echoed() {
    let Some(silkit) = SilKit::from_env() else { return };
    let (_registry, uri) = start_registry(&silkit);
    let config = format!(
        "[[channel]]\nname = \"can0\"\nprotocol = \"canfd\"\n\n[[silkit]]\nchannel = \"can0\"\nregistry = \"{uri}\"\nnetwork = \"CAN1\"\n"
    );
    let hub = HubProcess::start_with_env(Some(&config), &[], &[("FIELDHUB_SILKIT_LIB", &silkit.library)]);
    hub.wait_for_log("SIL Kit network joined");
    let mut sender = start_peer(&silkit, "send", &uri, "peer-send");
    let mut recorder = start_peer(&silkit, "record", &uri, "peer-record");

    let client = hub.client("test");
    let port =
        client.open_port_with("can0", &PortConfig { fd: true, block_on_overflow: true, ..Default::default() }).unwrap();
    wait_until_peers_ready(&client, &port);
    client.send(&port, &Frame::can(GO_ID, false, &[]).unwrap()).unwrap();

    // Both ways at once: this client's frames to the recorder while the
    // sender's frames come in.
    let (from_peer, mut others) = std::thread::scope(|s| {
        s.spawn(|| (0..FRAMES).for_each(|n| client.send(&port, &numbered(HUB_TAG, n)).unwrap()));
        let (mut from_peer, mut others) = (Vec::new(), Vec::new());
        while from_peer.len() < FRAMES as usize {
            let received = client.recv(Some(PATIENCE)).unwrap();
            let Some(received) = received else {
                panic!("stalled after {} frames from SIL Kit; hub log: {:#?}", from_peer.len(), hub.log())
            };
            let frame = received.frame;
            if tagged(&frame, PEER_TAG) {
                from_peer.push(frame)
            } else {
                others.push(frame)
            }
        }
        (from_peer, others)
    });
    for (n, frame) in from_peer.iter().enumerate() {
        assert!(*frame == numbered(PEER_TAG, n as u32), "frame {n} from SIL Kit: {frame:?}");
    }

    let mut recorded = String::new();
    recorder.0.stdout.take().unwrap().read_to_string(&mut recorded).unwrap();
    let lines: Vec<&str> = recorded.lines().collect();
    assert_eq!(lines.len(), FRAMES as usize, "the recorder's frames from the hub");
    for (n, line) in lines.iter().enumerate() {
        assert_eq!(*line, silkit_line(&numbered(HUB_TAG, n as u32)), "frame {n} to SIL Kit");
    }

    client.send(&port, &Frame::can(DONE_ID, false, &[]).unwrap()).unwrap();
    for (peer, name) in [(&mut sender, "sender"), (&mut recorder, "recorder")] {
        assert!(peer.0.wait().unwrap().success(), "the {name} peer failed");
    }
    // Everything the hub delivered is here once a flush returns: no frame of
    // this client came back (an echo), none from SIL Kit came twice.
    client.flush().unwrap();
    while let Some(r) = client.try_recv().unwrap() {
        others.push(r.frame);
    }
    let stray: Vec<_> = others.iter().filter(|f| tagged(f, HUB_TAG) || tagged(f, PEER_TAG)).collect();
    assert!(stray.is_empty(), "{} frames echoed or duplicated, first {:?}", stray.len(), stray[0]);
    assert!(others.iter().all(|f| f.id() == READY_ID), "unexpected frames: {others:?}");
}
