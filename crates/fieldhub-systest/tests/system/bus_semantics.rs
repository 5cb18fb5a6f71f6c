//! CAN bus behaviour through a real hub: wiring, gateway routes, rate limits,
//! transmit back-pressure.

use crate::FIELDHUB;
use fieldhub_client::{ClientError, ErrorCode, Frame, PortConfig};
use fieldhub_proto::wire::{self, Message, PortOptions};
use fieldhub_testkit::*;

const GATEWAY: &str = r#"
[[channel]]
name = "can0"

[[channel]]
name = "can1"

[[route]]
from = "can0"
to = "can1"
id = 0x100
mask = 0x700
extended = false
rewrite_id = 0x500

[[route]]                     # back again: only frames sent on can1 itself
from = "can1"
to = "can0"
"#;

const FD_AND_CLASSIC: &str = r#"
[[channel]]
name = "can0"
[[channel]]
name = "fd0"
protocol = "canfd"
"#;

#[test]
fn gateway_routes_filter_rewrite_and_do_not_loop() {
    let hub = FIELDHUB.start_with(Some(GATEWAY), &[]);
    let ecu0 = hub.client("ecu0");
    let ecu1 = hub.client("ecu1");
    let port0 = ecu0.open_port_with("can0", &lossless()).unwrap();
    let port1 = ecu1.open_port_with("can1", &lossless()).unwrap();

    for i in 0..1000u32 {
        ecu0.send(&port0, &numbered(0x123, 0, i)).unwrap(); // matches, rewritten to 0x500
        ecu0.send(&port0, &numbered(0x223, 0, i)).unwrap(); // outside the mask
    }
    ecu1.send(&port1, &numbered(0x042, 1, 0)).unwrap(); // routed back to can0 unchanged
    ecu0.flush().unwrap();
    ecu1.flush().unwrap();

    let on_can1 = recv_n(&ecu1, 1000);
    for (i, r) in on_can1.iter().enumerate() {
        assert_eq!((r.frame.id(), number_of(&r.frame)), (0x500, (0, i as u32)));
    }
    let on_can0 = recv_n(&ecu0, 1);
    assert_eq!((on_can0[0].frame.id(), number_of(&on_can0[0].frame)), (0x042, (1, 0)));
    // The 1000 routed frames did not come back to can0: hop limit 1.
    assert_nothing_pending(&ecu0);
    assert_nothing_pending(&ecu1);
}

const WIRED: &str = r#"
[[channel]]
name = "can0"

[[channel]]
name = "can1"

[[port]]
name = "engine"
channel = "can1"

[[port]]
name = "throttled"
rate = 200.0
burst = 5
"#;

#[test]
fn named_port_is_wired_to_its_configured_channel() {
    let hub = FIELDHUB.start_with(Some(WIRED), &[]);
    let ecu = hub.client("ecu");
    let listener = hub.client("listener");
    listener.open_port("can1").unwrap();
    let engine = ecu.open_port_with("", &PortConfig { name: Some("engine".into()), ..Default::default() }).unwrap();
    assert_eq!(engine.channel_id, 1);
    ecu.send(&engine, &numbered(0x10, 3, 7)).unwrap();
    assert_eq!(number_of(&recv_n(&listener, 1)[0].frame), (3, 7));

    let err =
        ecu.open_port_with("can0", &PortConfig { name: Some("engine".into()), ..Default::default() }).unwrap_err();
    assert!(err.to_string().contains("wired to channel 'can1'"), "{err}");
    let err = ecu.open_port_with("", &PortConfig::default()).unwrap_err();
    assert_eq!(err.code(), Some(ErrorCode::UnknownChannel));
}

#[test]
fn rate_limited_port_sends_its_burst_then_one_frame_per_period() {
    let hub = FIELDHUB.start_with(Some(WIRED), &[]);
    let ecu = hub.client("ecu");
    let listener = hub.client("listener");
    listener.open_port_with("can0", &lossless()).unwrap();
    let port =
        ecu.open_port_with("can0", &PortConfig { name: Some("throttled".into()), ..Default::default() }).unwrap();
    let total = 40u32;
    for i in 0..total {
        ecu.send(&port, &numbered(0x10, 1, i)).unwrap();
    }
    let got = recv_n(&listener, total as usize);
    let start = got[0].meta.timestamp_ns;
    let period_ns = 1_000_000_000 / 200;
    for (k, r) in got.iter().enumerate().skip(5) {
        // Frame k needs k - 4 tokens beyond the burst: it cannot leave before then.
        let earliest = start + (k as u64 - 4) * period_ns - period_ns / 100;
        assert!(r.meta.timestamp_ns >= earliest, "frame {k} left {} ns early", earliest - r.meta.timestamp_ns);
    }
    for (i, r) in got.iter().enumerate() {
        assert_eq!(number_of(&r.frame), (1, i as u32));
    }
}

#[test]
fn flush_waits_until_rate_limited_frames_are_on_the_bus() {
    let hub = FIELDHUB.start_with(Some(WIRED), &[]);
    let ecu = hub.client("ecu");
    let listener = hub.client("listener");
    listener.open_port_with("can0", &lossless()).unwrap();
    let port =
        ecu.open_port_with("can0", &PortConfig { name: Some("throttled".into()), ..Default::default() }).unwrap();
    for i in 0..20 {
        ecu.send(&port, &numbered(0x10, 1, i)).unwrap();
    }
    ecu.flush().unwrap();
    // Every frame is sequenced by now, so the listener's own barrier finds
    // all of them already queued for it.
    listener.flush().unwrap();
    let mut got = 0;
    while listener.try_recv().unwrap().is_some() {
        got += 1;
    }
    assert_eq!(got, 20);
}

#[test]
fn a_can_fd_frame_the_port_or_channel_cannot_carry_is_refused_when_sent() {
    let hub = FIELDHUB.start_with(Some(FD_AND_CLASSIC), &[]);
    let ecu = hub.client("ecu");
    let fd = Frame::can_fd(0x10, Default::default(), &[0; 12]).unwrap();
    let on_classic = ecu.open_port_with("can0", &PortConfig { fd: true, ..Default::default() }).unwrap();
    assert!(!on_classic.channel_fd && !ecu.channel_fd(&on_classic));
    let err = ecu.send(&on_classic, &fd).unwrap_err();
    assert!(matches!(err, ClientError::FrameNotAllowed { .. }), "{err}");
    assert!(err.to_string().contains("channel 'can0'") && err.to_string().contains("classic CAN"), "{err}");
    let without_fd = ecu.open_port("fd0").unwrap();
    assert!(without_fd.channel_fd);
    let err = ecu.send(&without_fd, &fd).unwrap_err();
    assert!(err.to_string().contains("opened without FD"), "{err}");
    // Nothing was sent, and the client carries on.
    ecu.send(&on_classic, &numbered(0x10, 0, 0)).unwrap();
    ecu.flush().expect("still connected, no error pending");
}

#[test]
fn the_hub_refuses_what_a_port_cannot_send_without_disconnecting() {
    // A client that does not check for itself: the hub refuses each frame
    // with a non-fatal error naming the port and the reason.
    let hub = FIELDHUB.start_with(Some(FD_AND_CLASSIC), &[]);
    let mut raw = RawStream::connect(&hub);
    raw.hello("raw");
    let fd = Frame::can_fd(0x10, Default::default(), &[0; 12]).unwrap();
    let cases = [
        ("can0", PortOptions::FD, fd.clone(), "is classic CAN and cannot carry the CAN FD frame"),
        ("fd0", PortOptions::empty(), fd, "was opened without FD"),
        ("fd0", PortOptions::LISTEN_ONLY, numbered(0x10, 0, 0), "is listen-only"),
    ];
    for (channel, options, frame, reason) in cases {
        let port = raw.open_port(channel, options).port;
        raw.send_frames(port, &[frame]);
        let body = raw.read_message().expect("still connected");
        match wire::decode(&body) {
            Ok(Message::Error(e)) => {
                assert_eq!((e.code, e.fatal), (ErrorCode::InvalidFrame as u16, false));
                assert!(e.text.contains(reason), "{}", e.text);
            }
            other => panic!("expected a non-fatal ERROR, got {other:?}"),
        }
    }
}

#[test]
fn stats_count_frames_per_channel_id_port_and_route() {
    let hub = FIELDHUB.start_with(Some(GATEWAY), &[]);
    let ecu0 = hub.client("ecu0");
    let ecu1 = hub.client("ecu1");
    let port0 = ecu0.open_port_with("can0", &PortConfig { name: Some("ecu0-port".into()), ..lossless() }).unwrap();
    ecu1.open_port_with("can1", &lossless()).unwrap();
    for i in 0..300u32 {
        ecu0.send(&port0, &numbered(0x123, 0, i)).unwrap();
    }
    for i in 0..200u32 {
        ecu0.send(&port0, &numbered(0x2AA, 0, i)).unwrap();
    }
    ecu0.flush().unwrap();
    recv_n(&ecu1, 300);

    let stats = ecu0.stats().unwrap();
    let can0 = stats.channels.iter().find(|c| c.name == "can0").unwrap();
    assert_eq!(can0.frames, 500);
    assert_eq!(can0.ids.iter().map(|i| (i.id, i.frames)).collect::<Vec<_>>(), [(0x123, 300), (0x2AA, 200)]);
    let can1 = stats.channels.iter().find(|c| c.name == "can1").unwrap();
    assert_eq!((can1.frames, can1.ids[0].id), (300, 0x500));
    let port = stats.ports.iter().find(|p| p.name == "ecu0-port").unwrap();
    assert_eq!((port.channel.as_str(), port.tx_frames, port.tx_pending), ("can0", 500, 0));
    let receiver = stats.ports.iter().find(|p| p.channel == "can1").unwrap();
    assert_eq!((receiver.rx_frames, receiver.rx_dropped), (300, 0));
    assert_eq!((stats.routes[0].routed, stats.routes[0].dropped), (300, 0));

    let out = FIELDHUB.command().args(["stats", "--json", "--hub", &hub.url]).output().unwrap();
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stats --json prints JSON");
    assert_eq!(json["channels"][0]["frames"], 500);
}

/// A transmit-only port (a sender that never reads) sends 1,000 numbered
/// frames that another client receives in order; it receives none of the
/// channel's other frames, only its own as confirmations, and drops none.
#[test]
fn a_transmit_only_port_sends_and_receives_only_its_own_confirmations() {
    let hub = FIELDHUB.start_with(None, &[]);
    let generator = hub.client("generator");
    let config = PortConfig { transmit_only: true, receive_own: true, ..Default::default() };
    let sender = generator.open_port_with("can0", &config).unwrap();
    let peer = hub.client("peer");
    let listening = peer.open_port_with("can0", &lossless()).unwrap();
    for n in 0..1_000 {
        peer.send(&listening, &numbered(0x300, 9, n)).unwrap();
        generator.send_timeout(&sender, &numbered(0x200, 1, n), Some(PATIENCE)).unwrap();
    }
    let mut from_generator = Vec::new();
    while from_generator.len() < 1_000 {
        let r = peer.recv(Some(PATIENCE)).unwrap().expect("the generator's frames");
        if number_of(&r.frame).0 == 1 {
            from_generator.push(number_of(&r.frame).1);
        }
    }
    assert_eq!(from_generator, (0..1_000).collect::<Vec<_>>());
    let echoes = recv_n(&generator, 1_000);
    assert!(echoes.iter().all(|r| r.frame.is_echo() && number_of(&r.frame).0 == 1), "only its own frames");
    assert_eq!(counters_from(&echoes, 1), (0..1_000).collect::<Vec<_>>());
    generator.flush().unwrap();
    assert!(generator.recv(Some(std::time::Duration::from_millis(200))).unwrap().is_none(), "nothing else");
    assert_eq!(generator.rx_dropped(&sender), 0);
}
