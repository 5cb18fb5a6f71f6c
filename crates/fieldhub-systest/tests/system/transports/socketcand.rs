//! The socketcand server (`[hub] socketcand`): a raw TCP client drives
//! NO_BUS, BCM, RAW and CONTROL mode byte for byte as linux-can/socketcand's
//! `doc/protocol.md` shows them, errors included, with a native client on
//! the same channel; BCM's cyclic jobs keep their period in virtual time,
//! `update` changes the next cycle, `delete` and leaving BCM mode end them;
//! hostile clients (garbage, an oversize command, a
//! connection that says nothing, one that never reads) leave the hub and
//! the other clients serving.

use std::io::{Read, Write};
use std::net::TcpStream;

use fieldhub_proto::Frame;
use fieldhub_testkit::federation::free_port;
use fieldhub_testkit::*;

use crate::FIELDHUB;

fn hub_with_socketcand() -> (HubProcess, String) {
    let addr = format!("127.0.0.1:{}", free_port());
    let config =
        format!("[hub]\nsocketcand = \"{addr}\"\n\n[[channel]]\nname = \"can0\"\n\n[[channel]]\nname = \"can1\"\n");
    (FIELDHUB.start_with(Some(&config), &[]), addr)
}

/// A socketcand client that reads whole `< … >` elements.
struct Scd {
    stream: TcpStream,
    pending: Vec<u8>,
    /// What the client said last, for a failure's message.
    said: String,
}

impl Scd {
    fn connect(addr: &str) -> Self {
        let stream = TcpStream::connect(addr).expect("connect to the socketcand listener");
        stream.set_read_timeout(Some(PATIENCE)).unwrap();
        Self { stream, pending: Vec::new(), said: String::new() }
    }

    /// Connect, take `< hi >` and open `channel`.
    fn open(addr: &str, channel: &str) -> Self {
        let mut scd = Self::connect(addr);
        assert_eq!(scd.element(), "< hi >");
        scd.ask(&format!("< open {channel} >"), "< ok >");
        scd
    }

    fn say(&mut self, text: &str) {
        self.stream.write_all(text.as_bytes()).expect("write to the hub");
        self.said = text.to_owned();
    }

    fn ask(&mut self, text: &str, answer: &str) {
        assert_eq!(self.element_after(text), answer, "the answer to {text}");
    }

    /// Say `text`, and the element the hub answers.
    fn element_after(&mut self, text: &str) -> String {
        self.say(text);
        self.element()
    }

    /// The next element the hub sends, `<` to `>`.
    fn element(&mut self) -> String {
        loop {
            if let Some(end) = self.pending.iter().position(|&b| b == b'>') {
                let element: Vec<u8> = self.pending.drain(..=end).collect();
                let element = String::from_utf8(element).expect("the hub writes ASCII");
                return element.trim_start().to_owned();
            }
            let mut buf = [0u8; 4096];
            let n = match self.stream.read(&mut buf) {
                Ok(n) => n,
                Err(e) => panic!("no answer within the patience after {:?}: {e}", self.said),
            };
            assert!(n > 0, "the hub closed the connection; pending: {:?}", String::from_utf8_lossy(&self.pending));
            self.pending.extend_from_slice(&buf[..n]);
        }
    }

    /// Whether the hub closed the connection (after whatever it still sends).
    fn closed(&mut self) -> bool {
        let mut buf = [0u8; 4096];
        loop {
            match self.stream.read(&mut buf) {
                Ok(0) => return true,
                Ok(_) => continue,
                Err(_) => return false,
            }
        }
    }
}

/// `< frame ID SEC.USEC DATA >` without its timestamp: `(ID, DATA)`.
fn frame_parts(element: &str) -> (String, String) {
    let words: Vec<&str> = element.split(' ').collect();
    assert_eq!((words[0], words[1]), ("<", "frame"), "{element}");
    let (secs, usecs) = words[3].split_once('.').expect("SEC.USEC");
    assert!(secs.parse::<u64>().is_ok() && usecs.len() == 6, "{element}");
    (words[2].to_owned(), words[4].to_owned())
}

#[test]
fn socketcand_modes_answer_byte_for_byte_as_the_protocol_document_shows() {
    let (hub, addr) = hub_with_socketcand();
    let native = hub.client("native");
    let port = native.open_port("can0").unwrap();

    // NO_BUS: an unknown bus names the channels and ends the connection.
    let mut stranger = Scd::connect(&addr);
    assert_eq!(stranger.element(), "< hi >");
    stranger.ask("< echo >", "< echo >");
    stranger.ask("< send 123 0 >", "< error no bus is open; send 'open NAME' first >");
    // Bit timing is the channel's bitrate (this session, of the hub's own
    // user, may control the hub); from tq and segments as `ip link` does.
    stranger.ask("< can1 B 250000 875 -1 -1 -1 -1 -1 -1 >", "< ok >");
    stranger.ask("< can1 B 0 -1 125 6 7 2 1 -1 >", "< ok >");
    let bitrate = |name: &str| {
        let channels = ok(&hub, "GET", "/api/v1/channels", None);
        channels.as_array().unwrap().iter().find(|c| c["name"] == name).expect("the channel")["bitrate"].clone()
    };
    assert_eq!(bitrate("can1"), 500_000);
    stranger.ask("< can1 B 250000 875 -1 -1 -1 -1 -1 -1 >", "< ok >");
    assert_eq!(bitrate("can1"), 250_000);
    stranger.ask(
        "< can0 B -1 875 -1 -1 -1 -1 -1 -1 >",
        "< error the bit timing gives no bitrate, nor tq with prop_seg, phase_seg1 and phase_seg2: a fieldhub channel \
         takes a bitrate, e.g. 'can0 B 500000 -1 -1 -1 -1 -1 -1 -1' >",
    );
    let said = stranger.element_after("< nope B 500000 -1 -1 -1 -1 -1 -1 -1 >");
    assert!(said.starts_with("< error no channel named 'nope'"), "{said}");
    stranger.ask("< nope C 1 0 0 >", "< error unknown channel 'nope'; this hub has: can0, can1 >");
    stranger.say("< open nope >");
    assert_eq!(stranger.element(), "< error unknown channel 'nope'; this hub has: can0, can1 >");
    assert!(stranger.closed(), "socketcand ends the connection when a bus cannot be opened");

    // BCM: subscriptions choose the frames; send goes on the bus.
    let mut scd = Scd::open(&addr, "can0");
    scd.ask("< echo >", "< echo >");
    scd.say("< subscribe 0 0 123 >");
    scd.say("< filter 0 0 00000321 1 FF >");
    // Commands are taken in order: the echo's answer says both are in place.
    scd.ask("< echo >", "< echo >");
    native.send(&port, &Frame::can(0x124, false, &[1]).unwrap()).unwrap();
    native.send(&port, &Frame::can(0x123, false, &[0x1A, 0x22, 0x03, 0x44]).unwrap()).unwrap();
    native.send(&port, &Frame::can(0x321, true, &[7, 1]).unwrap()).unwrap();
    native.send(&port, &Frame::can(0x321, true, &[7, 2]).unwrap()).unwrap();
    native.send(&port, &Frame::can(0x321, true, &[8]).unwrap()).unwrap();
    assert_eq!(frame_parts(&scd.element()), ("123".into(), "1A220344".into()));
    assert_eq!(frame_parts(&scd.element()), ("00000321".into(), "0701".into()));
    assert_eq!(frame_parts(&scd.element()), ("00000321".into(), "08".into()), "[7, 2] did not change byte 0");
    scd.say("< unsubscribe 123 >");
    scd.ask("< unsubscribe 123 >", "< error no subscription or filter for 123 to remove >");
    scd.say("< send 1AAAAAAA 2 1 f1 >");
    let got = native.recv(Some(PATIENCE)).unwrap().expect("the frame sent over socketcand");
    assert_eq!((got.frame.id(), got.frame.is_extended(), got.frame.data()), (0x1AAA_AAAA, true, &[1, 0xf1][..]));
    scd.ask("< send 123 9 >", "< error data length '9' is not 0 to 8 (socketcand carries classic CAN frames only) >");
    scd.ask("< frobnicate >", "< error unknown command 'frobnicate' >");
    scd.ask("< statistics 100 >", "< error statistics is not a command of BCM mode >");
    scd.ask("< open can1 >", "< error a bus is open already; one session serves one bus >");
    // Cyclic jobs: the first frame at once (BCM's STARTTIMER), then every
    // interval until delete (their period on bus time is the virtual-time
    // test's); interval 0 sends once; update and delete need a job.
    scd.ask("< update 123 3 11 22 33 >", "< error no cyclic job for 123; start one with 'add' >");
    scd.ask("< delete 00000123 >", "< error no cyclic job for 00000123; start one with 'add' >");
    scd.say("< add 1 0 123 8 11 22 33 44 55 66 77 88 >");
    let got = native.recv(Some(PATIENCE)).unwrap().expect("the job's first frame");
    assert_eq!((got.frame.id(), got.frame.data()), (0x123, &[0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88][..]));
    scd.say("< update 123 3 11 22 33 >");
    scd.say("< delete 123 >");
    scd.ask("< delete 123 >", "< error no cyclic job for 123; start one with 'add' >");
    scd.say("< add 0 0 321 1 5 >");
    // The 1 s job's second cycle may come first on a slow machine.
    let got = std::iter::from_fn(|| native.recv(Some(PATIENCE)).unwrap())
        .find(|got| got.frame.id() != 0x123)
        .expect("the frame of an add without interval");
    assert_eq!((got.frame.id(), got.frame.data()), (0x321, &[5][..]));

    // RAW: every frame of the channel.
    scd.ask("< rawmode >", "< ok >");
    native.send(&port, &Frame::can(0x7FF, false, &[]).unwrap()).unwrap();
    assert_eq!(frame_parts(&scd.element()), ("7FF".into(), String::new()), "no data: two spaces before '>'");
    scd.ask("< subscribe 0 0 123 >", "< error subscribe is not a command of RAW mode >");
    scd.ask("< isotpmode >", "< error ISO-TP mode is not served by a fieldhub hub; use RAW mode with an ISO-TP stack in the client (python-can with can-isotp) >");

    // CONTROL: statistics every 100 ms, counting what the session saw and sent.
    scd.ask("< controlmode >", "< ok >");
    scd.say("< statistics 100 >");
    let stat = scd.element();
    let words: Vec<&str> = stat.split(' ').collect();
    assert_eq!((words[1], words.len()), ("stat", 7), "{stat}");
    let counts: Vec<u64> = words[2..6].iter().map(|w| w.parse().unwrap()).collect();
    assert_eq!(counts[1], 6, "rpackets: every frame of the channel the session received: {stat}");
    // The send and the add without interval; a job's frames are the bus's.
    assert_eq!((counts[2], counts[3]), (3, 2), "tbytes, tpackets: {stat}");
    scd.say("< statistics 0 >");
    scd.ask("< bcmmode >", "< ok >");
    drop(scd);
    drop(native);
    assert!(hub.terminate().success());
}

const MS: u64 = 1_000_000;

/// Let virtual time run to `until_ns` (the control API answers at once;
/// the frames of the window say when the bus got there).
fn run_until(hub: &HubProcess, until_ns: u64) {
    ok(hub, "POST", "/api/v1/time", Some(serde_json::json!({"action": "run_until", "until_ns": until_ns})));
}

/// The next `count` frames `client` receives: `(bus time, id, data)`.
fn frames(client: &fieldhub_client::Client, count: usize) -> Vec<(u64, u32, Vec<u8>)> {
    (0..count)
        .map(|k| {
            let got = client.recv(Some(PATIENCE)).unwrap().unwrap_or_else(|| panic!("only {k} of {count} frames"));
            (got.meta.timestamp_ns, got.frame.id(), got.frame.data().to_vec())
        })
        .collect()
}

#[test]
fn bcm_cyclic_jobs_keep_their_period_on_bus_time_in_virtual_time() {
    let addr = format!("127.0.0.1:{}", free_port());
    let config = format!("[hub]\ntime = \"virtual\"\nsocketcand = \"{addr}\"\n\n[[channel]]\nname = \"can0\"\n");
    let hub = FIELDHUB.start_with(Some(&config), &[]);
    let observer = hub.client("observer");
    observer.open_port("can0").unwrap();
    let mut scd = Scd::open(&addr, "can0");
    // Bus time stands at 0 until the control API moves it.
    scd.say("< add 0 10000 123 2 11 22 >");
    scd.say("< add 0 25000 00000456 1 01 >");
    // Commands are taken in order, an add once the bus has the job.
    scd.ask("< echo >", "< echo >");
    run_until(&hub, 100 * MS);
    let seen = frames(&observer, 11 + 5);
    let times = |seen: &[(u64, u32, Vec<u8>)], id: u32| -> Vec<u64> {
        seen.iter().filter(|f| f.1 == id).map(|f| f.0).collect()
    };
    assert_eq!(times(&seen, 0x123), (0..=10).map(|k| k * 10 * MS).collect::<Vec<_>>(), "every 10 ms from the add");
    assert_eq!(times(&seen, 0x456), [0, 25, 50, 75, 100].map(|ms| ms * MS));
    assert!(seen.iter().all(|f| f.2 == [0x11, 0x22] || f.2 == [0x01]));

    // update: the next cycle carries the new data, on the same phase.
    scd.say("< update 123 3 AA BB CC >");
    scd.ask("< echo >", "< echo >");
    run_until(&hub, 150 * MS);
    let seen = frames(&observer, 5 + 2);
    assert_eq!(times(&seen, 0x123), [110, 120, 130, 140, 150].map(|ms| ms * MS));
    assert!(seen.iter().filter(|f| f.1 == 0x123).all(|f| f.2 == [0xAA, 0xBB, 0xCC]), "{seen:?}");
    assert_eq!(times(&seen, 0x456), [125, 150].map(|ms| ms * MS));

    // add again: the job restarts at once with its new interval; delete
    // ends the other.
    scd.say("< add 0 20000 123 1 CC >");
    scd.say("< delete 00000456 >");
    scd.ask("< echo >", "< echo >");
    run_until(&hub, 200 * MS);
    let seen = frames(&observer, 3);
    assert_eq!(seen, [150, 170, 190].map(|ms| (ms * MS, 0x123, vec![0xCC])));

    // Leaving BCM mode ends the jobs (socketcand closes its BCM socket):
    // the next frame the observer sees is a marker sent after 200 ms.
    scd.ask("< rawmode >", "< ok >");
    let marker = hub.client("marker");
    let marker_port = marker.open_port("can0").unwrap();
    marker.send(&marker_port, &Frame::can(0x7FF, false, &[]).unwrap()).unwrap();
    marker.flush().unwrap();
    run_until(&hub, 300 * MS);
    assert_eq!(frames(&observer, 1), [(200 * MS, 0x7FF, vec![])]);
    drop((scd, observer, marker));
    assert!(hub.terminate().success());
}

#[test]
fn garbage_oversize_silence_and_a_client_that_never_reads_leave_the_hub_serving() {
    let (hub, addr) = hub_with_socketcand();
    let native = hub.client("native");
    let port = native.open_port("can0").unwrap();

    // Garbage outside elements is skipped; binary inside one is refused.
    let mut garbage = Scd::connect(&addr);
    assert_eq!(garbage.element(), "< hi >");
    garbage.say("\u{1}\u{2}not a command at all\r\n");
    garbage.stream.write_all(b"< \xff\xfe >").unwrap();
    assert_eq!(garbage.element(), "< error a command that is not ASCII text >");
    assert!(garbage.closed());

    // An oversize command is refused and its connection closed.
    let mut oversize = Scd::open(&addr, "can0");
    oversize.say(&format!("< send {}", "0 ".repeat(10_000)));
    assert_eq!(oversize.element(), "< error a command longer than 8192 bytes >");
    assert!(oversize.closed());

    // A connection that never opens a bus is told and closed.
    let mut silent = Scd::connect(&addr);
    assert_eq!(silent.element(), "< hi >");
    assert_eq!(silent.element(), "< error no bus opened within 5 s; send 'open NAME' >");
    assert!(silent.closed());

    // A client in RAW mode that never reads while the channel is busy.
    let mut sleeper = Scd::open(&addr, "can0");
    sleeper.ask("< rawmode >", "< ok >");
    for i in 0..20_000u32 {
        native.send(&port, &Frame::can(0x100, false, &i.to_le_bytes()).unwrap()).unwrap();
    }
    native.flush().unwrap();

    // Everyone else is still served: a new socketcand session and the native client.
    let mut fresh = Scd::open(&addr, "can0");
    fresh.ask("< rawmode >", "< ok >");
    native.send(&port, &Frame::can(0x555, false, &[0x55]).unwrap()).unwrap();
    assert_eq!(frame_parts(&fresh.element()), ("555".into(), "55".into()));
    let other = hub.client("other");
    let other_port = other.open_port("can0").unwrap();
    other.send(&other_port, &Frame::can(0x556, false, &[]).unwrap()).unwrap();
    assert_eq!(frame_parts(&fresh.element()).0, "556");
    drop(sleeper);
    drop((fresh, native, other));
    assert!(hub.terminate().success());
}

#[test]
fn the_beacon_reaches_a_udp_listener_and_names_the_server_and_every_channel() {
    let listener = std::net::UdpSocket::bind("0.0.0.0:0").expect("bind a UDP listener");
    listener.set_read_timeout(Some(PATIENCE)).unwrap();
    let beacon_port = listener.local_addr().unwrap().port();
    let addr = format!("127.0.0.1:{}", free_port());
    let config = format!(
        "[hub]\nname = \"lab\"\nsocketcand = \"{addr}\"\nsocketcand_beacon = \"127.255.255.255:{beacon_port}\"\n\n\
         [[channel]]\nname = \"can0\"\n\n[[channel]]\nname = \"can1\"\n"
    );
    let hub = FIELDHUB.start_with(Some(&config), &[]);
    let mut datagram = [0u8; 2048];
    let (len, from) = listener.recv_from(&mut datagram).expect("a beacon within the patience");
    let text = std::str::from_utf8(&datagram[..len]).expect("the beacon is text");
    assert_eq!(from.ip().to_string(), "127.0.0.1", "sent from the listener's address");
    assert!(text.starts_with("<CANBeacon name=\"lab\" type=\"SocketCAN\""), "{text}");
    let url = text.split("<URL>").nth(1).and_then(|rest| rest.split("</URL>").next()).expect("a URL");
    assert_eq!(url, format!("can://{addr}"));
    let buses: Vec<&str> = text.split("<Bus name=\"").skip(1).map(|rest| rest.split('"').next().unwrap()).collect();
    assert_eq!(buses, ["can0", "can1"]);
    assert!(text.ends_with("</CANBeacon>"), "{text}");
    // The server the beacon names serves the buses it lists.
    drop(Scd::open(&addr, buses[1]));
    assert!(hub.terminate().success());
}
