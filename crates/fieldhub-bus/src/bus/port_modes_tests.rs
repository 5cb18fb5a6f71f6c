//! CAN FD, listen-only and transmit-only ports behave as SocketCAN sockets do
//! (`spec/protocol.md` 6.7), proven on the in-process bus.

use fieldhub_proto::wire::{ErrorCode, PortOptions};
use fieldhub_proto::{Frame, FrameFlags, FrameKind};

use super::harness::Harness;
use crate::outbox::Outbound;

const FD_CHANNEL: &str = r#"
    [[channel]]
    name = "fd"
    protocol = "canfd"
"#;

fn classic(id: u32) -> Frame {
    Frame::can(id, false, &[1, 2]).unwrap()
}

fn fd(id: u32) -> Frame {
    Frame::can_fd(id, FrameFlags::empty(), &[7; 12]).unwrap()
}

#[test]
fn can_fd_frames_reach_only_ports_opened_with_fd() {
    let mut h = Harness::new(FD_CHANNEL);
    let (tx, both, classic_only) = (h.connect("tx"), h.connect("both"), h.connect("classic"));
    let port = h.open(&tx, "fd", "tx", PortOptions::FD);
    h.open(&both, "fd", "both", PortOptions::FD);
    h.open(&classic_only, "fd", "classic", PortOptions::empty());
    for n in 0..10 {
        h.send(&tx, port, if n % 2 == 0 { fd(n) } else { classic(n) });
    }
    h.step();
    let kinds = |frames: Vec<(Frame, _)>| frames.iter().map(|(f, _)| (f.id(), f.kind())).collect::<Vec<_>>();
    let all: Vec<_> = (0..10).map(|n| (n, if n % 2 == 0 { FrameKind::CanFd } else { FrameKind::Can })).collect();
    assert_eq!(kinds(h.frames(&both)), all);
    let classic_ids: Vec<_> = all.iter().copied().filter(|&(_, k)| k == FrameKind::Can).collect();
    assert_eq!(kinds(h.frames(&classic_only)), classic_ids);
    let stats = h.bus.stats();
    let classic_port = stats.ports.iter().find(|p| p.name == "classic").unwrap();
    assert_eq!((classic_port.rx_frames, classic_port.rx_dropped), (5, 0), "skipped, not dropped");
}

#[test]
fn a_can_fd_frame_from_a_port_without_fd_is_refused_and_never_sent() {
    let mut h = Harness::new(FD_CHANNEL);
    let (tx, rx) = (h.connect("tx"), h.connect("rx"));
    let port = h.open(&tx, "fd", "tx", PortOptions::empty());
    h.open(&rx, "fd", "rx", PortOptions::FD);
    h.send(&tx, port, fd(0x10));
    h.send(&tx, port, classic(0x11));
    h.step();
    let refused = h.errors(&tx);
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0].0, ErrorCode::InvalidFrame);
    assert!(refused[0].1.contains("port 'tx' was opened without FD"), "{}", refused[0].1);
    let got: Vec<u32> = h.frames(&rx).iter().map(|(f, _)| f.id()).collect();
    assert_eq!(got, [0x11], "only the classic frame went on the bus");
}

#[test]
fn a_listen_only_port_receives_but_never_transmits() {
    let mut h = Harness::new(FD_CHANNEL);
    let (quiet, talker) = (h.connect("quiet"), h.connect("talker"));
    let listen = h.open(&quiet, "fd", "quiet", PortOptions::LISTEN_ONLY | PortOptions::FD);
    let talk = h.open(&talker, "fd", "talker", PortOptions::FD);
    h.send(&quiet, listen, classic(0x20));
    h.send(&talker, talk, fd(0x21));
    h.step();
    assert!(h.frames(&talker).is_empty(), "the listen-only port's frame never reached the bus");
    let (mut refused, mut heard) = (Vec::new(), Vec::new());
    for item in h.items(&quiet) {
        match item {
            Outbound::Error { code, fatal: false, text, .. } => refused.push((code, text)),
            Outbound::Frame { frame, .. } => heard.push(frame.id()),
            _ => {}
        }
    }
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert!(refused[0].1.contains("port 'quiet' is listen-only"), "{refused:?}");
    assert_eq!(heard, [0x21]);
}

#[test]
fn listen_only_ports_do_not_acknowledge() {
    let mut h = Harness::new("[[channel]]\nname = \"can0\"\nno_ack = true\n");
    let (tx, quiet) = (h.connect("tx"), h.connect("quiet"));
    let port = h.open(&tx, "can0", "tx", PortOptions::empty());
    h.open(&quiet, "can0", "quiet", PortOptions::LISTEN_ONLY);
    h.send(&tx, port, classic(0x30));
    for _ in 0..20 {
        h.advance(1_000_000);
    }
    let heard: Vec<Frame> = h.frames(&quiet).into_iter().map(|(f, _)| f).collect();
    assert!(heard.iter().all(Frame::is_error), "nothing but error frames without an ACK: {heard:?}");
    let stats = h.bus.stats();
    let sender = stats.ports.iter().find(|p| p.name == "tx").unwrap();
    assert_eq!(sender.tx_frames, 0, "never acknowledged");
    assert!(sender.tec > 0, "ACK errors count against the sender");
    // A port that does acknowledge joins: the frame finally goes out.
    let peer = h.connect("peer");
    h.open(&peer, "can0", "peer", PortOptions::empty());
    for _ in 0..20 {
        h.advance(1_000_000);
    }
    let ids: Vec<u32> = h.frames(&peer).iter().filter(|(f, _)| !f.is_error()).map(|(f, _)| f.id()).collect();
    assert_eq!(ids, [0x30]);
}

#[test]
fn a_transmit_only_port_sends_and_hears_nothing_but_its_own_echoes() {
    let mut h = Harness::new("[[channel]]\nname = \"can0\"\n");
    let (gen, peer) = (h.connect("gen"), h.connect("peer"));
    let sender = h.open(&gen, "can0", "gen", PortOptions::TRANSMIT_ONLY | PortOptions::RECEIVE_OWN);
    let other = h.open(&peer, "can0", "peer", PortOptions::empty());
    h.send(&peer, other, classic(0x10));
    h.step();
    h.send(&gen, sender, classic(0x20));
    h.step();
    let heard: Vec<(u32, bool)> = h.frames(&gen).iter().map(|(f, _)| (f.id(), f.is_echo())).collect();
    assert_eq!(heard, [(0x20, true)], "only its own frame, as a confirmation");
    let ids: Vec<u32> = h.frames(&peer).iter().map(|(f, _)| f.id()).collect();
    assert_eq!(ids, [0x20]);
    let stats = h.bus.stats();
    let gen_port = stats.ports.iter().find(|p| p.name == "gen").unwrap();
    assert_eq!((gen_port.tx_frames, gen_port.rx_frames, gen_port.rx_dropped), (1, 1, 0), "skipped, not dropped");
}

#[test]
fn transmit_only_ports_do_not_acknowledge() {
    let mut h = Harness::new("[[channel]]\nname = \"can0\"\nno_ack = true\n");
    let (tx, gen) = (h.connect("tx"), h.connect("gen"));
    let port = h.open(&tx, "can0", "tx", PortOptions::empty());
    h.open(&gen, "can0", "gen", PortOptions::TRANSMIT_ONLY);
    h.send(&tx, port, classic(0x30));
    for _ in 0..20 {
        h.advance(1_000_000);
    }
    let stats = h.bus.stats();
    assert_eq!(stats.ports.iter().find(|p| p.name == "tx").unwrap().tx_frames, 0, "never acknowledged");
    assert!(h.frames(&gen).is_empty(), "a transmit-only port hears no error frames either");
}

#[test]
fn a_port_both_listen_only_and_transmit_only_is_refused() {
    let mut h = Harness::new("[[channel]]\nname = \"can0\"\n");
    let client = h.connect("both");
    h.bus.handle(crate::inbox::Inbound::OpenPort {
        client: client.id,
        request: 1,
        options: PortOptions::LISTEN_ONLY | PortOptions::TRANSMIT_ONLY,
        channel: "can0".into(),
        port_name: "both".into(),
    });
    let refused = h.errors(&client);
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0].0, ErrorCode::Malformed);
    assert!(refused[0].1.contains("both LISTEN_ONLY and TRANSMIT_ONLY"), "{refused:?}");
    assert!(h.bus.stats().ports.iter().all(|p| p.name != "both"));
}

#[test]
fn can_xl_and_raw_frames_are_refused_on_a_can_fd_channel_counted_and_never_sent() {
    let mut h = Harness::new(FD_CHANNEL);
    let (tx, rx) = (h.connect("tx"), h.connect("rx"));
    let port = h.open(&tx, "fd", "tx", PortOptions::FD);
    h.open(&rx, "fd", "rx", PortOptions::FD);
    h.send(&tx, port, Frame::can_xl(0x10, 1, 2, FrameFlags::empty(), 3, &[5; 300]).unwrap());
    h.send(&tx, port, Frame::raw(0x11, &[6; 10]).unwrap());
    h.send(&tx, port, classic(0x12));
    h.step();
    let refused = h.errors(&tx);
    assert_eq!(refused.len(), 2, "{refused:?}");
    assert!(refused.iter().all(|(code, _)| *code == ErrorCode::InvalidFrame), "{refused:?}");
    assert!(refused[0].1.contains("channel 'fd' cannot carry the CAN XL frame"), "{refused:?}");
    assert!(refused[0].1.contains("travel on protocol = \"canxl\" channels"), "{refused:?}");
    assert!(refused[1].1.contains("channel 'fd' cannot carry the raw frame"), "{refused:?}");
    let got: Vec<u32> = h.frames(&rx).iter().map(|(f, _)| f.id()).collect();
    assert_eq!(got, [0x12], "only the classic frame went on the bus");
    let stats = h.bus.stats();
    assert_eq!(stats.ports.iter().find(|p| p.name == "tx").unwrap().tx_refused, 2);
}
