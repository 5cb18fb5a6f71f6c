//! Bad input from one client: that client gets a clear error and is
//! disconnected; the hub logs one line; every other client carries on and
//! loses nothing.

use std::io::{Read, Write};
use std::net::TcpStream;

use crate::FIELDHUB;
use fieldhub_client::{Client, Port};
use fieldhub_proto::limits::{MAX_MESSAGE_LEN, PROTOCOL_VERSION};
use fieldhub_proto::wire::{self, ErrorCode, Hello, Message, OpenPort, PortOptions};
use fieldhub_testkit::*;

/// A well-behaved pair that keeps talking while a hostile client misbehaves.
struct Bystanders {
    talker: Client,
    talker_port: Port,
    listener: Client,
    sent: u32,
}

impl Bystanders {
    fn join(hub: &HubProcess) -> Self {
        let talker = hub.client("talker");
        let listener = hub.client("listener");
        let talker_port = talker.open_port("can0").unwrap();
        listener.open_port_with("can0", &lossless()).unwrap();
        Self { talker, talker_port, listener, sent: 0 }
    }

    fn talk(&mut self, frames: u32) {
        for _ in 0..frames {
            self.talker.send(&self.talker_port, &numbered(0x321, 7, self.sent)).unwrap();
            self.sent += 1;
        }
    }

    /// Every frame sent so far arrives, in order, exactly once.
    fn check_everything_arrived(&self) {
        self.talker.flush().unwrap();
        let got = recv_n(&self.listener, self.sent as usize);
        for (i, r) in got.iter().enumerate() {
            assert_eq!(number_of(&r.frame), (7, i as u32));
        }
        assert_nothing_pending(&self.listener);
    }
}

/// A raw connection that speaks exactly the bytes a test tells it to.
struct Raw(TcpStream);

impl Raw {
    fn connect(hub: &HubProcess) -> Self {
        let addr = hub.url.strip_prefix("tcp://").unwrap();
        let stream = TcpStream::connect(addr).unwrap();
        stream.set_read_timeout(Some(PATIENCE)).unwrap();
        Self(stream)
    }

    fn send(&mut self, message: &Message<'_>) {
        let mut bytes = Vec::new();
        wire::encode(&mut bytes, message);
        self.0.write_all(&bytes).unwrap();
    }

    fn handshake(hub: &HubProcess) -> Self {
        let mut raw = Self::connect(hub);
        raw.send(&Message::Hello(Hello { version: PROTOCOL_VERSION, name: "hostile", options: Default::default() }));
        let reply = raw.read_message().expect("welcome");
        assert_eq!(reply[0], wire::msg::WELCOME);
        raw
    }

    fn open_port(&mut self, channel: &str) {
        let open = OpenPort { request: 1, options: PortOptions::empty(), channel, port_name: "" };
        self.send(&Message::OpenPort(open));
        let reply = self.read_message().expect("reply");
        assert_eq!(reply[0], wire::msg::PORT_OPENED);
    }

    /// The next message body, or `None` once the hub has closed the stream.
    fn read_message(&mut self) -> Option<Vec<u8>> {
        let mut prefix = [0u8; 4];
        if self.0.read_exact(&mut prefix).is_err() {
            return None;
        }
        let mut body = vec![0u8; u32::from_le_bytes(prefix) as usize];
        self.0.read_exact(&mut body).ok()?;
        Some(body)
    }

    /// Expect an error report (REFUSE or fatal ERROR) with `code`, then the
    /// end of the stream. Returns the report's text.
    fn expect_rejection(&mut self, code: ErrorCode) -> String {
        let body = loop {
            let body = self.read_message().expect("an error report before the hub closes");
            // Traffic on a port this client opened may precede the report.
            if body[0] != wire::msg::FRAMES {
                break body;
            }
        };
        let text = match wire::decode(&body).unwrap() {
            Message::Refuse(r) | Message::Error(r) => {
                assert_eq!(ErrorCode::from_wire(r.code), Some(code), "text: {}", r.text);
                assert!(r.fatal);
                r.text.to_owned()
            }
            other => panic!("expected REFUSE or ERROR, got {other:?}"),
        };
        assert!(self.read_message().is_none(), "the hub should close the connection");
        text
    }
}

/// Run `act` between two bursts of bystander traffic and check the
/// bystanders lost nothing and the hub is still up.
fn with_bystanders(act: impl FnOnce(&HubProcess)) -> HubProcess {
    let mut hub = FIELDHUB.start();
    let mut bystanders = Bystanders::join(&hub);
    bystanders.talk(5_000);
    act(&hub);
    bystanders.talk(5_000);
    bystanders.check_everything_arrived();
    assert!(hub.is_running());
    hub
}

fn handshake_bytes(magic: &[u8; 4], version: u16) -> Vec<u8> {
    let mut body = vec![wire::msg::HELLO];
    body.extend_from_slice(magic);
    body.extend_from_slice(&version.to_le_bytes());
    // Name "evil"; version 2 has no token field after it.
    body.extend_from_slice(&[4, b'e', b'v', b'i', b'l']);
    let mut bytes = (body.len() as u32).to_le_bytes().to_vec();
    bytes.extend_from_slice(&body);
    bytes
}

#[test]
fn wrong_magic_is_refused() {
    let hub = with_bystanders(|hub| {
        let mut raw = Raw::connect(hub);
        raw.0.write_all(&handshake_bytes(b"CAN!", PROTOCOL_VERSION)).unwrap();
        let text = raw.expect_rejection(ErrorCode::BadMagic);
        assert!(text.contains("FHUB"), "{text}");
    });
    hub.wait_for_log("refusing connection: bad magic");
}

#[test]
fn unknown_protocol_version_is_refused_naming_the_supported_one() {
    let hub = with_bystanders(|hub| {
        let mut raw = Raw::connect(hub);
        raw.0.write_all(&handshake_bytes(b"FHUB", 99)).unwrap();
        let text = raw.expect_rejection(ErrorCode::UnsupportedVersion);
        assert!(text.contains("99") && text.contains(&format!("version {PROTOCOL_VERSION}")), "{text}");
    });
    hub.wait_for_log("protocol version 99 is not supported");
}

#[test]
fn malformed_handshake_is_refused() {
    let hub = with_bystanders(|hub| {
        let mut raw = Raw::connect(hub);
        // A HELLO whose name claims 10 bytes but carries 3.
        let mut body = vec![wire::msg::HELLO];
        body.extend_from_slice(b"FHUB");
        body.extend_from_slice(&PROTOCOL_VERSION.to_le_bytes());
        body.extend_from_slice(&[10, b'a', b'b', b'c']);
        raw.0.write_all(&(body.len() as u32).to_le_bytes()).unwrap();
        raw.0.write_all(&body).unwrap();
        let text = raw.expect_rejection(ErrorCode::Malformed);
        assert!(text.contains("HELLO"), "{text}");
    });
    hub.wait_for_log("refusing connection: HELLO");
}

#[test]
fn garbage_that_is_not_a_handshake_is_refused() {
    let hub = with_bystanders(|hub| {
        let mut raw = Raw::connect(hub);
        raw.0.write_all(b"\x16\x03\x01\x02\x00 a TLS hello, not fieldhub").unwrap();
        let text = raw.expect_rejection(ErrorCode::Oversize);
        assert!(text.contains("fieldhub client"), "{text}");
    });
    hub.wait_for_log("is this a fieldhub client");
}

/// The handshake has one deadline from the connection's start (spec
/// `protocol.md` 5: 5 s), not one per read: a client trickling its HELLO a
/// byte a second is refused before it has sent it all.
#[test]
fn a_hello_trickled_slowly_is_refused_at_the_handshake_deadline() {
    let hub = with_bystanders(|hub| {
        let mut raw = Raw::connect(hub);
        let mut hello = Vec::new();
        wire::encode(
            &mut hello,
            &Message::Hello(Hello { version: PROTOCOL_VERSION, name: "slow", options: Default::default() }),
        );
        // Two seconds per byte: the whole HELLO would take well over the
        // deadline; the reads themselves never wait 5 s.
        let mut sent = 0;
        for byte in &hello {
            if raw.0.write_all(&[*byte]).is_err() {
                break;
            }
            sent += 1;
            raw.0.set_read_timeout(Some(std::time::Duration::from_secs(2))).unwrap();
            let mut peek = [0u8; 1];
            match raw.0.peek(&mut peek) {
                Ok(_) => break,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock || e.kind() == std::io::ErrorKind::TimedOut => {}
                Err(_) => break,
            }
        }
        assert!(sent < hello.len(), "the whole HELLO went through: the deadline is per read");
        raw.0.set_read_timeout(Some(PATIENCE)).unwrap();
        let text = raw.expect_rejection(ErrorCode::Malformed);
        assert!(text.contains("no HELLO within 5 s"), "{text}");
    });
    hub.wait_for_log("no HELLO within 5 s");
}

#[test]
fn http_request_reaches_the_control_api_not_the_bus() {
    let hub = with_bystanders(|hub| {
        let mut raw = Raw::connect(hub);
        raw.0.write_all(b"GET /api/v1/nothing HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").unwrap();
        let mut answer = String::new();
        raw.0.read_to_string(&mut answer).unwrap();
        assert!(answer.starts_with("HTTP/1.1 404"), "{answer}");
    });
    drop(hub);
}

#[test]
fn silent_connections_cannot_take_the_places_of_clients() {
    // The hub holds 128 connections in their handshake at once
    // (`MAX_HANDSHAKES`), a peer's share once half are taken: a new one
    // makes room by closing the oldest that has sent no HELLO.
    const HANDSHAKES: usize = 128;
    let hub = with_bystanders(|hub| {
        let mut silent: Vec<Raw> = (0..HANDSHAKES).map(|_| Raw::connect(hub)).collect();
        // A client that says HELLO gets in, however many stay silent.
        for _ in 0..3 {
            let mut one_more = Raw::connect(hub);
            one_more.0.write_all(&handshake_bytes(b"FHUB", PROTOCOL_VERSION)).unwrap();
            let body = one_more.read_message().expect("a WELCOME");
            assert!(matches!(wire::decode(&body).unwrap(), Message::Welcome(_)), "welcomed");
        }
        // The oldest silent connection was closed to make room, and told why.
        let body = silent[0].read_message().expect("a REFUSE");
        let Message::Refuse(r) = wire::decode(&body).unwrap() else { panic!("expected REFUSE") };
        assert_eq!(ErrorCode::from_wire(r.code), Some(ErrorCode::HubFull), "{}", r.text);
        assert!(r.text.contains("closed to make room"), "{}", r.text);
        silent.clear();
        let late = hub.client("late");
        late.open_port("can0").unwrap();
    });
    drop(hub);
}

#[test]
fn a_hub_out_of_descriptors_says_so_once_and_accepts_again_when_some_are_free() {
    let mut hub = with_bystanders(|_| {});
    let pid = hub.pid();
    let open = std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap().count() as u64;
    let limit = libc::rlimit { rlim_cur: open + 4, rlim_max: open + 4 };
    // SAFETY: prlimit(2) reads `limit` and writes nothing (NULL old limit).
    assert_eq!(unsafe { libc::prlimit(pid as libc::pid_t, libc::RLIMIT_NOFILE, &limit, std::ptr::null_mut()) }, 0);
    // Connect until the hub has no descriptor left for one more: from then
    // on connections wait in the listener's backlog, unanswered.
    let mut connections = Vec::new();
    while !hub.log().iter().any(|l| l.contains("cannot accept connections")) {
        assert!(connections.len() < 100, "the descriptor limit did not hold");
        let mut raw = Raw::connect(&hub);
        raw.send(&Message::Hello(Hello { version: PROTOCOL_VERSION, name: "many", options: Default::default() }));
        connections.push(raw);
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let mut waiting = connections.pop().unwrap();
    drop(connections);
    // Freed descriptors let the waiting connection in without any new event.
    waiting.0.set_read_timeout(Some(PATIENCE)).unwrap();
    let reply = waiting.read_message().expect("the waiting connection is served");
    assert_eq!(reply[0], wire::msg::WELCOME);
    hub.wait_for_log("accepting connections again");
    let said = hub.log().iter().filter(|l| l.contains("cannot accept connections")).count();
    assert_eq!(said, 1, "{:#?}", hub.log());
    assert!(hub.is_running());
}

/// The start of a request whose head never ends.
const HALF_A_REQUEST: &[u8] = b"GET /api/v1/stats HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";

#[test]
fn http_connections_beyond_the_limit_make_room_by_closing_the_oldest_without_credentials() {
    // The hub serves 64 HTTP connections at once (`control/http_slots.rs`).
    const LIMIT: usize = 64;
    let hub = with_bystanders(|hub| {
        let mut held: Vec<Raw> = (0..LIMIT)
            .map(|_| {
                let mut raw = Raw::connect(hub);
                raw.0.write_all(HALF_A_REQUEST).unwrap();
                raw
            })
            .collect();
        // One more request is answered: connections that never presented
        // credentials make room, the oldest first.
        let mut extra = Raw::connect(hub);
        extra.0.write_all(b"GET /api/v1/stats HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").unwrap();
        let mut answer = String::new();
        let _ = extra.0.read_to_string(&mut answer);
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        let mut rest = Vec::new();
        let _ = held[0].0.read_to_end(&mut rest);
        assert!(rest.is_empty(), "the oldest half request was closed unanswered");
        drop(held);
    });
    drop(hub);
}

#[test]
fn an_http_request_head_that_never_ends_is_cut_off() {
    let hub = with_bystanders(|hub| {
        let mut raw = Raw::connect(hub);
        raw.0.write_all(HALF_A_REQUEST).unwrap();
        raw.0.set_read_timeout(Some(PATIENCE)).unwrap();
        // The hub closes it after its header timeout (10 s), with or
        // without an answer; it never waits for the rest.
        let mut answer = Vec::new();
        raw.0.read_to_end(&mut answer).expect("the hub closes the connection");
        let answer = String::from_utf8_lossy(&answer);
        assert!(answer.is_empty() || answer.starts_with("HTTP/1.1 408"), "{answer}");
    });
    drop(hub);
}

#[test]
fn oversize_length_prefix_disconnects_only_that_client() {
    let hub = with_bystanders(|hub| {
        let mut raw = Raw::handshake(hub);
        raw.0.write_all(&(MAX_MESSAGE_LEN + 1).to_le_bytes()).unwrap();
        let text = raw.expect_rejection(ErrorCode::Oversize);
        assert!(text.contains(&(MAX_MESSAGE_LEN + 1).to_string()), "{text}");
    });
    hub.wait_for_log("rejecting client: message length");
}

#[test]
fn truncated_message_then_disconnect_is_logged_and_harmless() {
    let hub = with_bystanders(|hub| {
        // No port: with unread frames queued, closing would reset the
        // connection instead of ending it mid-message.
        let mut raw = Raw::handshake(hub);
        // Announce 100 bytes, send 10, vanish.
        raw.0.write_all(&100u32.to_le_bytes()).unwrap();
        raw.0.write_all(&[wire::msg::FRAMES; 10]).unwrap();
        drop(raw);
    });
    hub.wait_for_log("disconnected mid-message: got 14 of 104 bytes");
}

#[test]
fn invalid_frame_length_disconnects_only_that_client() {
    let hub = with_bystanders(|hub| {
        let mut raw = Raw::handshake(hub);
        raw.open_port("can0");
        // A classic frame record claiming 9 data bytes.
        let mut body = vec![wire::msg::FRAMES, 1, 0, 0];
        let mut record = vec![0u8; 32];
        record[28] = 9;
        body.extend_from_slice(&record);
        body.extend_from_slice(&[0xAA; 9]);
        raw.0.write_all(&(body.len() as u32).to_le_bytes()).unwrap();
        raw.0.write_all(&body).unwrap();
        let text = raw.expect_rejection(ErrorCode::InvalidFrame);
        assert!(text.contains("at most 8 data bytes"), "{text}");
    });
    hub.wait_for_log("rejecting client: frame 0: classic CAN frames carry at most 8 data bytes");
}

#[test]
fn frame_for_a_port_not_opened_disconnects_only_that_client() {
    let hub = with_bystanders(|hub| {
        let mut raw = Raw::handshake(hub);
        let frame = numbered(0x1, 9, 0);
        let mut bytes = Vec::new();
        let mut packer = wire::Packer::new();
        packer.push_frame(3, &frame, &Default::default());
        bytes.extend_from_slice(packer.finish());
        raw.0.write_all(&bytes).unwrap();
        let text = raw.expect_rejection(ErrorCode::PortNotOpen);
        assert!(text.contains("port 3"), "{text}");
    });
    hub.wait_for_log("disconnecting client: frame for port 3");
}

#[test]
fn a_second_hello_on_a_session_ends_it_with_a_clear_error_and_frees_its_port_names() {
    let hub = with_bystanders(|hub| {
        let mut raw = Raw::handshake(hub);
        let open = OpenPort { request: 1, options: PortOptions::empty(), channel: "can0", port_name: "guest-can0" };
        raw.send(&Message::OpenPort(open));
        assert_eq!(raw.read_message().expect("reply")[0], wire::msg::PORT_OPENED);
        // What a restarted guest process writes into the stream its dead
        // predecessor left open.
        raw.send(&Message::Hello(Hello { version: PROTOCOL_VERSION, name: "restarted", options: Default::default() }));
        let text = raw.expect_rejection(ErrorCode::UnexpectedMessage);
        assert!(text.contains("HELLO from \"restarted\" on a connection already in a session"), "{text}");
        assert!(text.contains("connect again"), "{text}");
        // The session ended with its ports: the next client gets the name.
        let next = hub.client("restarted");
        let port =
            next.open_port_with("can0", &fieldhub_client::PortConfig { name: Some("guest-can0".into()), ..lossless() });
        assert!(port.is_ok(), "{:?}", port.err());
    });
    hub.wait_for_log("rejecting client: HELLO from \"restarted\" on a connection already in a session");
}

#[test]
fn client_killed_mid_stream_does_not_disturb_others() {
    with_bystanders(|hub| {
        let mut raw = Raw::handshake(hub);
        raw.open_port("can0");
        let mut packer = wire::Packer::new();
        for i in 0..500 {
            packer.push_frame(0, &numbered(0x7, 3, i), &Default::default());
        }
        let bytes = packer.finish().to_vec();
        // Half a batch, then the socket is gone.
        raw.0.write_all(&bytes[..bytes.len() / 2]).unwrap();
        raw.0.shutdown(std::net::Shutdown::Both).unwrap();
    });
}

#[test]
fn unknown_channel_is_a_clear_error_and_the_client_stays_connected() {
    let hub = FIELDHUB.start();
    let client = hub.client("typo");
    let err = client.open_port("can7").unwrap_err();
    assert_eq!(err.code(), Some(ErrorCode::UnknownChannel));
    assert!(err.to_string().contains("unknown channel 'can7'; this hub has: can0, can1"), "{err}");
    client.open_port("can0").expect("still connected");
}

#[test]
fn frames_are_packed_many_to_a_message_under_load() {
    let hub = FIELDHUB.start();
    let mut raw = Raw::handshake(&hub);
    raw.open_port("can0");
    let sender = hub.client("sender");
    let tx = sender.open_port("can0").unwrap();
    // The raw client reads nothing yet, so frames pile up behind the socket.
    for i in 0..5_000 {
        sender.send(&tx, &numbered(0x5, 5, i)).unwrap();
    }
    sender.flush().unwrap();
    let (mut records, mut largest) = (0usize, 0usize);
    while records < 5_000 {
        let body = raw.read_message().expect("frames");
        if let Message::Frames(batch) = wire::decode(&body).unwrap() {
            for (k, r) in batch.iter().enumerate() {
                assert_eq!(number_of(&r.frame), (5, (records + k) as u32));
            }
            records += batch.len();
            largest = largest.max(batch.len());
        }
    }
    assert!(largest > 100, "the hub wrote at most {largest} frames per message under load");
}
