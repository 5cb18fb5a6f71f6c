//! A lossless reader that stops reading holds its own channel and nothing
//! else. While a reader with `block_on_overflow` on can0 reads nothing (over
//! TCP, over shared memory, or a `fieldhub dump --lossless` whose output
//! nobody reads) and can0 is held:
//! (a) clients on can1 exchange 10,000 numbered frames in order;
//! (b) the control API answers and a new client opens a port;
//! (c) once the stalled reader is gone, can0 flows again at once.

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use crate::FIELDHUB;
use fieldhub_client::{Client, ClientError, ClientOptions, Port, PortConfig};
use fieldhub_proto::wire::PortOptions;
use fieldhub_testkit::*;

/// How the stalled reader is attached.
#[derive(Clone, Copy, Debug)]
enum Kind {
    /// A raw TCP client with a small receive window.
    Tcp,
    /// A hand-made shared-memory client that never consumes its ring.
    Shm,
    /// `fieldhub dump --lossless can0` with its output going to a pipe
    /// nobody reads.
    Dump,
}

/// The reader that stopped reading; dropping it ends it (the fields are
/// held for their drop: the socket closes, the segment is unmapped).
#[allow(dead_code)]
enum Stalled {
    Tcp(RawStream),
    Shm(Box<RawShm>),
    Dump(Child),
}

impl Drop for Stalled {
    fn drop(&mut self) {
        if let Stalled::Dump(child) = self {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A hub whose can0 is held by a stalled lossless reader.
struct Held {
    hub: HubProcess,
    stalled: Option<Stalled>,
    /// The client that flooded can0 until it could send no more.
    flooder: Client,
    _flood_port: Port,
}

/// Frames the flooder sends carry this tag.
const FLOOD_TAG: u8 = 9;

/// Wait until a port whose name starts with `prefix` is open on the hub.
fn wait_for_port(hub: &HubProcess, prefix: &str) {
    let agent = patient_agent();
    wait_until(deadline(), format_args!("a port named {prefix}… opens"), || {
        let (status, ports) = api_via(&agent, hub, "GET", "/api/v1/ports", None);
        assert_eq!(status, 200, "{ports}");
        ports.as_array().unwrap().iter().any(|p| p["name"].as_str().is_some_and(|n| n.starts_with(prefix)))
    });
}

/// Start a hub, run `prepare` on it, then attach a stalled lossless reader
/// of `kind` to can0 and flood can0 until the flooder has been unable to
/// send for a whole second: the channel is held for the reader.
fn hold_can0<T>(kind: Kind, prepare: impl FnOnce(&HubProcess) -> T) -> (Held, T) {
    let hub = FIELDHUB.start_shm();
    let prepared = prepare(&hub);
    let stalled = match kind {
        Kind::Tcp => {
            let mut raw = RawStream::connect_with_small_window(&hub, 4096);
            raw.hello("stalled");
            raw.open_port("can0", PortOptions::BLOCK_ON_OVERFLOW);
            Stalled::Tcp(raw)
        }
        Kind::Shm => {
            let mut raw = RawShm::connect(&hub, "stalled");
            raw.open_port("can0", PortOptions::BLOCK_ON_OVERFLOW);
            Stalled::Shm(Box::new(raw))
        }
        Kind::Dump => {
            let child = FIELDHUB
                .command()
                .args(["dump", "--hub", &hub.url, "--lossless", "can0"])
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .expect("start fieldhub dump");
            wait_for_port(&hub, "dump");
            Stalled::Dump(child)
        }
    };
    let flooder = hub.shm_client("flooder");
    let flood_port = flooder.open_port("can0").unwrap();
    let started = Instant::now();
    let mut last_sent = Instant::now();
    let mut sent = 0u32;
    while last_sent.elapsed() < Duration::from_secs(1) {
        match flooder.send_timeout(&flood_port, &numbered(0x7, FLOOD_TAG, sent), Some(Duration::from_millis(100))) {
            Ok(()) => {
                sent += 1;
                last_sent = Instant::now();
            }
            Err(ClientError::SendQueueFull(_)) => {}
            Err(e) => panic!("flooder: {e}"),
        }
        assert!(started.elapsed() < PATIENCE, "can0 was never held: {sent} frames went through ({kind:?} reader)");
    }
    eprintln!("{kind:?} reader: can0 held after {sent} frames");
    (Held { hub, stalled: Some(stalled), flooder, _flood_port: flood_port }, prepared)
}

/// A client whose requests wait as long as the test does.
fn patient_client(hub: &HubProcess, name: &str, shm: bool) -> Client {
    let options = ClientOptions { name: name.into(), timeout: PATIENCE, ..Default::default() };
    let url = if shm { hub.shm_url.as_deref().unwrap() } else { hub.url.as_str() };
    Client::connect_with(url, &options).expect("connect")
}

/// (a): can1 carries 10,000 numbered frames, in order, while can0 is held.
fn other_channels_flow(kind: Kind) {
    // The can1 pair is in place before the hold: this is about traffic;
    // joining is (b).
    let (held, (sender, tx, receiver)) = hold_can0(kind, |hub| {
        let sender = patient_client(hub, "can1-sender", true);
        let receiver = patient_client(hub, "can1-receiver", false);
        let tx = sender.open_port("can1").unwrap();
        receiver.open_port_with("can1", &lossless()).unwrap();
        (sender, tx, receiver)
    });
    exchange_numbered(&sender, &tx, &receiver, 0x321, 1, 10_000);
    assert_nothing_pending(&receiver);
    drop(held);
}

/// (b): the control API answers and a new client opens a port while can0
/// is held.
fn control_is_served(kind: Kind) {
    let (held, ()) = hold_can0(kind, |_| ());
    let agent = patient_agent();
    for path in ["/api/v1/stats", "/api/v1/channels"] {
        let (status, answer) = api_via(&agent, &held.hub, "GET", path, None);
        assert_eq!(status, 200, "GET {path} while can0 is held: {answer}");
    }
    let (_, channels) = api_via(&agent, &held.hub, "GET", "/api/v1/channels", None);
    let names: Vec<&str> = channels.as_array().unwrap().iter().filter_map(|c| c["name"].as_str()).collect();
    assert_eq!(names, ["can0", "can1"]);
    for shm in [false, true] {
        let newcomer = patient_client(&held.hub, if shm { "shm-newcomer" } else { "tcp-newcomer" }, shm);
        let port = newcomer.open_port("can1");
        assert!(port.is_ok(), "a new client cannot open a port while can0 is held: {:?}", port.err());
        newcomer.flush().expect("a new client's PING is answered while can0 is held");
    }
}

/// (c): once the stalled reader is gone, a new pair exchanges numbered
/// frames on can0, in order.
fn channel_resumes_when_the_reader_goes(kind: Kind) {
    let (mut held, ()) = hold_can0(kind, |_| ());
    drop(held.stalled.take());
    let sender = patient_client(&held.hub, "can0-sender", false);
    let receiver = patient_client(&held.hub, "can0-receiver", true);
    let opened = |client: &Client, config: &PortConfig| {
        client.open_port_with("can0", config).unwrap_or_else(|e| {
            panic!("a new client cannot open a port on can0 after the stalled {kind:?} reader went: {e}")
        })
    };
    let tx = opened(&sender, &PortConfig::default());
    opened(&receiver, &lossless());
    // The flood's backlog arrives too (other tag); the pair's own frames
    // must all arrive, in order.
    exchange_numbered(&sender, &tx, &receiver, 0x321, 1, 10_000);
    drop(held.flooder);
}

#[test]
fn a_stalled_lossless_tcp_reader_holds_only_its_own_channel() {
    other_channels_flow(Kind::Tcp);
}

#[test]
fn a_stalled_lossless_shm_reader_holds_only_its_own_channel() {
    other_channels_flow(Kind::Shm);
}

#[test]
fn control_requests_and_new_ports_are_served_while_a_tcp_reader_holds_a_channel() {
    control_is_served(Kind::Tcp);
}

#[test]
fn control_requests_and_new_ports_are_served_while_an_shm_reader_holds_a_channel() {
    control_is_served(Kind::Shm);
}

#[test]
fn closing_a_stalled_lossless_tcp_reader_releases_its_channel_at_once() {
    channel_resumes_when_the_reader_goes(Kind::Tcp);
}

#[test]
fn closing_a_stalled_lossless_shm_reader_releases_its_channel_at_once() {
    channel_resumes_when_the_reader_goes(Kind::Shm);
}

#[test]
fn killing_a_stalled_lossless_dump_process_releases_its_channel_at_once() {
    channel_resumes_when_the_reader_goes(Kind::Dump);
}
