//! `protocol = "canxl"` and `protocol = "raw"` channels on the in-process
//! bus and the manual clock: what they carry, the order XL, FD and classic
//! frames arbitrate in, and their exact times on the wire, computed by hand.

use fieldhub_proto::wire::{ChannelFlags, PortOptions};
use fieldhub_proto::{Frame, FrameFlags, FrameKind};

use super::harness::{Harness, TestClient, START_NS};
use crate::config::{ChannelConfig, Protocol, RawConfig};
use crate::outbox::Outbound;

const XL_CHANNELS: &str = r#"
    [[channel]]
    name = "xl"
    protocol = "canxl"
    [[channel]]
    name = "xl-timed"
    protocol = "canxl"
    timing = "timed"
    bitrate = 500000
    data_bitrate = 2000000
    xl_data_bitrate = 10000000
"#;

const RAW_CHANNEL: &str = r#"
    [[channel]]
    name = "modbus"
    protocol = "raw"
    timing = "timed"
    bitrate = 19200
    [channel.raw]
    bits_per_byte = 11
    overhead_bits = 39
"#;

fn xl(priority: u16, flags: FrameFlags, len: usize) -> Frame {
    Frame::can_xl(priority, 0, 0, flags, 0, &vec![0x55; len]).unwrap()
}

/// The flags `PORT_OPENED` tells a port opened on `channel`.
fn channel_flags(h: &mut Harness, channel: &str) -> ChannelFlags {
    let client = h.connect("flags");
    let request = crate::inbox::Inbound::OpenPort {
        client: client.id,
        request: 7,
        options: PortOptions::FD,
        channel: channel.into(),
        port_name: "flags".into(),
    };
    h.bus.handle(request);
    let opened = h.items(&client).into_iter().find_map(|item| match item {
        Outbound::PortOpened { channel_flags, .. } => Some(channel_flags),
        _ => None,
    });
    opened.expect("PORT_OPENED")
}

#[test]
fn xl_fd_and_classic_frames_pending_together_go_out_in_identifier_order() {
    let mut h = Harness::new(XL_CHANNELS);
    let (a, b, c, rx) = (h.connect("a"), h.connect("b"), h.connect("c"), h.connect("rx"));
    let pa = h.open(&a, "xl", "a", PortOptions::FD);
    let pb = h.open(&b, "xl", "b", PortOptions::FD);
    let pc = h.open(&c, "xl", "c", PortOptions::FD);
    h.open(&rx, "xl", "rx", PortOptions::FD);
    h.send(&a, pa, xl(0x300, FrameFlags::empty(), 2048));
    h.send(&a, pa, Frame::can(0x050, false, &[1]).unwrap());
    h.send(&b, pb, Frame::can_fd(0x100, FrameFlags::BRS, &[2; 64]).unwrap());
    // An extended frame with base bits 0x080 loses to an XL frame of
    // priority 0x080 at SRR (recessive) against RRS (dominant).
    h.send(&b, pb, Frame::can(0x080 << 18, true, &[3]).unwrap());
    h.send(&c, pc, xl(0x080, FrameFlags::empty(), 1));
    h.send(&c, pc, Frame::can(0x200, false, &[4]).unwrap());
    h.step();
    let got: Vec<(FrameKind, u32)> = h.frames(&rx).iter().map(|(f, _)| (f.kind(), f.id())).collect();
    // Each port offers its oldest frame: a's XL 0x300, b's FD 0x100, c's XL
    // 0x080. c's wins; then c offers 0x200, b's 0x100 wins; then b offers
    // the extended frame, which ties nothing and beats 0x200 and 0x300.
    assert_eq!(
        got,
        [
            (FrameKind::CanXl, 0x080),
            (FrameKind::CanFd, 0x100),
            (FrameKind::Can, 0x080 << 18),
            (FrameKind::Can, 0x200),
            (FrameKind::CanXl, 0x300),
            (FrameKind::Can, 0x050),
        ]
    );
}

#[test]
fn an_xl_frame_ties_a_classic_frame_of_its_identifier_and_rrs_ranks_as_rtr() {
    let mut h = Harness::new(XL_CHANNELS);
    let (a, b, rx) = (h.connect("a"), h.connect("b"), h.connect("rx"));
    let pa = h.open(&a, "xl", "a", PortOptions::FD);
    let pb = h.open(&b, "xl", "b", PortOptions::FD);
    h.open(&rx, "xl", "rx", PortOptions::FD);
    // The same arbitration field (0x123, RRS/RTR dominant): the older first.
    h.send(&a, pa, xl(0x123, FrameFlags::empty(), 8));
    h.send(&b, pb, Frame::can(0x123, false, &[9]).unwrap());
    h.step();
    // A recessive RRS loses to a classic data frame of the same identifier,
    // as a remote frame does, even when it came first.
    h.send(&a, pa, xl(0x124, FrameFlags::XL_RRS, 8));
    h.send(&b, pb, Frame::can(0x124, false, &[9]).unwrap());
    h.step();
    let got: Vec<FrameKind> = h.frames(&rx).iter().map(|(f, _)| f.kind()).collect();
    assert_eq!(got, [FrameKind::CanXl, FrameKind::Can, FrameKind::Can, FrameKind::CanXl]);
}

#[test]
fn a_timed_xl_channel_carries_each_kind_for_its_hand_computed_time() {
    let mut h = Harness::new(XL_CHANNELS);
    let (tx, rx) = (h.connect("tx"), h.connect("rx"));
    let port = h.open(&tx, "xl-timed", "tx", PortOptions::FD);
    h.open(&rx, "xl-timed", "rx", PortOptions::FD);
    // XL 0x123, 1 byte: 34 nominal bits at 500 kbit/s (68 µs) and 134 at
    // 10 Mbit/s (13.4 µs) — fieldhub_proto::bits::xl's table.
    let xl_ns = 34 * 2_000 + 134 * 100;
    // XL 0x123, 2048 bytes: 34 nominal bits and 2 + 16493 + 1649 + 4 =
    // 18148 XL-rate bits, 1.8148 ms.
    let longest_ns = 34 * 2_000 + 18_148 * 100;
    // FD 0x123 with BRS, DEADBEEF (spec/vectors/timing): 30 nominal bits,
    // 65 at 2 Mbit/s.
    let fd_ns = 30 * 2_000 + 65 * 500;
    h.send(&tx, port, xl(0x123, FrameFlags::empty(), 1));
    h.send(&tx, port, xl(0x123, FrameFlags::empty(), 2048));
    h.send(&tx, port, Frame::can_fd(0x123, FrameFlags::BRS, &[0xDE, 0xAD, 0xBE, 0xEF]).unwrap());
    assert_eq!(h.step(), Some(START_NS + xl_ns), "the first frame ends after its bit time");
    h.advance(xl_ns - 1);
    assert!(h.frames(&rx).is_empty(), "nothing arrives before the end of frame");
    h.advance(1);
    h.advance(longest_ns);
    h.advance(fd_ns);
    let ends: Vec<u64> = h.frames(&rx).iter().map(|(_, m)| m.timestamp_ns - START_NS).collect();
    assert_eq!(ends, [xl_ns, xl_ns + longest_ns, xl_ns + longest_ns + fd_ns]);
    let stats = h.bus.stats();
    let channel = stats.channels.iter().find(|c| c.name == "xl-timed").unwrap();
    assert_eq!((channel.protocol.as_str(), channel.bits), ("canxl", 168 + 18_182 + 95));
}

#[test]
fn a_port_without_fd_on_an_xl_channel_neither_receives_nor_sends_xl_frames() {
    let mut h = Harness::new(XL_CHANNELS);
    let (tx, classic, both) = (h.connect("tx"), h.connect("classic"), h.connect("both"));
    let port = h.open(&tx, "xl", "tx", PortOptions::FD);
    let classic_port = h.open(&classic, "xl", "classic", PortOptions::empty());
    h.open(&both, "xl", "both", PortOptions::FD);
    h.send(&tx, port, xl(0x10, FrameFlags::empty(), 100));
    h.send(&tx, port, Frame::can(0x11, false, &[1]).unwrap());
    h.send(&classic, classic_port, xl(0x12, FrameFlags::empty(), 1));
    h.step();
    let ids = |h: &Harness, c: &TestClient| h.frames(c).iter().map(|(f, _)| f.id()).collect::<Vec<_>>();
    assert_eq!(ids(&h, &both), [0x10, 0x11]);
    let refused = h.errors(&classic);
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert!(refused[0].1.contains("opened without FD and cannot send CAN XL frames"), "{refused:?}");
    h.send(&tx, port, xl(0x13, FrameFlags::empty(), 100));
    h.send(&tx, port, Frame::can(0x14, false, &[1]).unwrap());
    h.step();
    assert_eq!(ids(&h, &classic), [0x14], "a classic-CAN socket gets no XL frame");
    assert_eq!(channel_flags(&mut h, "xl"), ChannelFlags::CANFD | ChannelFlags::CANXL);
}

#[test]
fn a_raw_channel_times_frames_by_its_model_and_orders_them_by_id() {
    let mut h = Harness::new(RAW_CHANNEL);
    let (a, b, rx) = (h.connect("a"), h.connect("b"), h.connect("rx"));
    let pa = h.open(&a, "modbus", "a", PortOptions::empty());
    let pb = h.open(&b, "modbus", "b", PortOptions::empty());
    h.open(&rx, "modbus", "rx", PortOptions::empty());
    h.send(&a, pa, Frame::raw(0x20, &[1, 2, 3]).unwrap());
    h.send(&b, pb, Frame::raw(0x10, &[0; 8]).unwrap());
    h.send(&b, pb, Frame::raw(0x30, &[]).unwrap());
    // Both ports offer a frame at once: id 0x10 first. 39 + 8 · 11 = 127
    // bits at 19,200 bit/s; then 0x20, 39 + 3 · 11 = 72; then 0x30, 39.
    let ns = |bits: u64| bits * 1_000_000_000 / 19_200;
    assert_eq!(h.step(), Some(START_NS + ns(127)));
    h.advance(ns(127));
    h.advance(ns(72));
    h.advance(ns(39));
    let got: Vec<(u32, u64)> = h.frames(&rx).iter().map(|(f, m)| (f.id(), m.timestamp_ns - START_NS)).collect();
    assert_eq!(got, [(0x10, ns(127)), (0x20, ns(127) + ns(72)), (0x30, ns(127) + ns(72) + ns(39))]);
    assert_eq!(channel_flags(&mut h, "modbus"), ChannelFlags::RAW);
}

#[test]
fn a_raw_channel_refuses_can_frames_and_a_can_channel_refuses_raw_and_xl_ones() {
    let config = format!("{RAW_CHANNEL}\n[[channel]]\nname = \"can0\"\nprotocol = \"canfd\"\n");
    let mut h = Harness::new(&config);
    let (tx, rx) = (h.connect("tx"), h.connect("rx"));
    let raw = h.open(&tx, "modbus", "tx", PortOptions::FD);
    let can = h.open(&tx, "can0", "tx2", PortOptions::FD);
    h.open(&rx, "modbus", "rx", PortOptions::FD);
    h.send(&tx, raw, Frame::can(0x1, false, &[1]).unwrap());
    h.send(&tx, can, Frame::raw(0x2, &[2]).unwrap());
    h.send(&tx, can, xl(0x3, FrameFlags::empty(), 3));
    h.advance(1_000_000_000);
    let refused: Vec<String> = h.errors(&tx).into_iter().map(|(code, text)| format!("{code:?}: {text}")).collect();
    assert_eq!(refused.len(), 3, "{refused:?}");
    assert!(refused[0].contains("InvalidFrame: channel 'modbus' is a raw channel and carries raw frames only"));
    assert!(refused[1].contains("channel 'can0' cannot carry the raw frame"), "{refused:?}");
    assert!(refused[2].contains("CAN XL frames travel on protocol = \"canxl\" channels"), "{refused:?}");
    assert!(h.frames(&rx).is_empty());
}

#[test]
fn channel_settings_of_the_other_protocols_are_refused_by_key() {
    let check = |protocol, edit: fn(&mut ChannelConfig)| {
        let mut config = ChannelConfig::new("c", protocol);
        edit(&mut config);
        config.check_rates().map_err(|(key, text)| format!("{key}: {text}"))
    };
    assert_eq!(
        check(Protocol::Canfd, |c| c.xl_data_bitrate = Some(10_000_000)),
        Err("xl_data_bitrate: only protocol = \"canxl\" channels have an XL data bitrate".into())
    );
    assert_eq!(
        check(Protocol::Canxl, |c| c.xl_data_bitrate = Some(25_000_000)),
        Err("xl_data_bitrate: 25000000 must be between the nominal bitrate 500000 and 20000000 bit/s".into())
    );
    assert!(
        check(Protocol::Canxl, |c| (c.data_bitrate, c.xl_data_bitrate) = (Some(2_000_000), Some(20_000_000))).is_ok()
    );
    assert_eq!(
        check(Protocol::Can, |c| c.raw = Some(RawConfig { bits_per_byte: 10, overhead_bits: 0 })),
        Err("raw: a [channel.raw] table needs protocol = \"raw\"".into())
    );
    assert_eq!(
        check(Protocol::Raw, |c| c.raw = Some(RawConfig { bits_per_byte: 0, overhead_bits: 0 })),
        Err("raw.bits_per_byte: 0 is not 1..=64 bits per data byte".into())
    );
    assert!(check(Protocol::Raw, |c| c.bitrate = 12_000_000).is_ok(), "PROFIBUS DP's 12 Mbit/s");
    assert!(check(Protocol::Can, |c| c.bitrate = 12_000_000).is_err());
}

/// A raw channel takes any access rule: under `tdma` each port's raw frame
/// starts at its slot, timed by the raw model, and one that could never fit
/// a slot is refused as it comes with the reason.
#[test]
fn raw_frames_take_their_tdma_slots_and_one_longer_than_any_slot_is_refused() {
    let config = r#"
        [[channel]]
        name = "ring"
        protocol = "raw"
        timing = "timed"
        bitrate = 19200
        arbitration = "tdma"
        [channel.raw]
        bits_per_byte = 11
        overhead_bits = 39
        [channel.tdma]
        slots = [{ port = "a", length_us = 10000 }, { port = "b", length_us = 10000 }]
    "#;
    let mut h = Harness::new(config);
    let (a, b, rx) = (h.connect("a"), h.connect("b"), h.connect("rx"));
    let pa = h.open(&a, "ring", "a", PortOptions::empty());
    let pb = h.open(&b, "ring", "b", PortOptions::empty());
    h.open(&rx, "ring", "rx", PortOptions::empty());
    h.send(&b, pb, Frame::raw(0x1, &[1, 2, 3]).unwrap());
    h.send(&a, pa, Frame::raw(0x2, &[4, 5, 6]).unwrap());
    // 2,048 bytes: 39 + 2048 · 11 bits at 19,200 bit/s, 1.175 s — no 10 ms slot holds it.
    h.send(&a, pa, Frame::raw(0x3, &[0; 2048]).unwrap());
    // 3 bytes: 72 bits, 3.75 ms; a's slot is [0, 10 ms), b's [10, 20 ms), from bus time 0.
    let frame_ns = 72 * 1_000_000_000 / 19_200;
    for _ in 0..4 {
        h.advance(10_000_000);
    }
    let got: Vec<(u32, u64)> = h.frames(&rx).iter().map(|(f, m)| (f.id(), m.timestamp_ns - START_NS)).collect();
    assert_eq!(got, [(0x2, frame_ns), (0x1, 10_000_000 + frame_ns)], "each in its owner's slot");
    let refused = h.errors(&a);
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert!(refused[0].1.contains("longer than its longest TDMA slot"), "{refused:?}");
}
