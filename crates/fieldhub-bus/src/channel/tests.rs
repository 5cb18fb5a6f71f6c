//! Channel unit tests: sequencing, arbitration, FIFO order, overflow.

use std::sync::Arc;

use fieldhub_proto::wire::PortOptions;

use super::*;
use crate::config::ChannelConfig;
use crate::config::Protocol;
use crate::credit::TxCredit;
use crate::member::Member;
use crate::outbox::{test_outbox, Outbound, QueueOutbox, OUTBOX_FRAMES};
use crate::tx_queue::Pending;
use crate::tx_queue::TxQueue;
use fieldhub_proto::Frame;

fn channel() -> Channel {
    Channel::new(0, ChannelConfig::new("can0", Protocol::Can))
}

/// Client port `n`, of client `n`.
fn port(n: u32) -> PortId {
    PortId::client(n).unwrap()
}

fn member(n: u32, options: PortOptions) -> (Member, Arc<QueueOutbox>) {
    let (tx, rx) = test_outbox();
    let credit = Arc::new(TxCredit::for_current_thread());
    (Member::client(n, 0, port(n), options, tx, credit, TxQueue::new(None)), rx)
}

fn frames(rx: &QueueOutbox) -> Vec<Frame> {
    rx.drain()
        .into_iter()
        .filter_map(|item| match item {
            Outbound::Frame { frame, .. } => Some(frame),
            _ => None,
        })
        .collect()
}

fn offer(channel: &mut Channel, n: u32, frame: Frame, arrival: u64) {
    channel.member_mut(port(n)).unwrap().tx.push(Pending { frame, arrival, hops: 0, arrived_ns: 0 });
}

#[test]
fn sequence_numbers_start_at_one_and_sender_gets_echo_only_if_asked() {
    let mut channel = channel();
    let (a, rx_a) = member(1, PortOptions::RECEIVE_OWN);
    let (b, rx_b) = member(2, PortOptions::empty());
    for m in [a, b] {
        channel.members.push(m);
    }
    let frame = Frame::can(0x10, false, &[1]).unwrap();
    let mut sent = Vec::new();
    let first =
        channel.transmit(port(1), Pending { frame: frame.clone(), arrival: 0, hops: 0, arrived_ns: 0 }, 100, &mut sent);
    let second = channel.transmit(port(2), Pending { frame, arrival: 1, hops: 0, arrived_ns: 0 }, 50, &mut sent);
    assert_eq!((first.seq, second.seq), (1, 2));
    assert_eq!(second.timestamp_ns, 100, "timestamps never go backwards");
    assert_eq!(frames(&rx_a).iter().map(Frame::is_echo).collect::<Vec<_>>(), [true, false]);
    assert_eq!(frames(&rx_b).len(), 1);
    assert_eq!(sent.len(), 2);
}

#[test]
fn lower_id_wins_arbitration_with_iso_precedence() {
    let mut channel = channel();
    let (listener, rx) = member(9, PortOptions::empty());
    channel.members.push(listener);
    let candidates = [
        Frame::can(0x123 << 18, true, &[]).unwrap(), // extended, base 0x123
        Frame::remote(0x000, false, 0).unwrap(),     // remote loses to data with the same id
        Frame::can(0x001, false, &[]).unwrap(),
        Frame::can(0x000, false, &[]).unwrap(),
        Frame::can(0x000 << 18, true, &[]).unwrap(), // extended with base 0x000
    ];
    for (i, frame) in candidates.iter().enumerate() {
        let (m, _) = member(i as u32 + 1, PortOptions::empty());
        channel.members.push(m);
        offer(&mut channel, i as u32 + 1, frame.clone(), i as u64);
    }
    channel.service(0, &mut Vec::new());
    let order = frames(&rx);
    let [c0, c1, c2, c3, c4] = candidates;
    assert_eq!(order, [c3, c1, c4, c2, c0]);
}

#[test]
fn each_port_offers_only_its_oldest_frame_so_priority_inversion_happens() {
    let mut channel = channel();
    let (listener, rx) = member(9, PortOptions::empty());
    let (slow, _) = member(1, PortOptions::empty());
    let (fast, _) = member(2, PortOptions::empty());
    for m in [listener, slow, fast] {
        channel.members.push(m);
    }
    let low = Frame::can(0x700, false, &[]).unwrap();
    let urgent = Frame::can(0x001, false, &[]).unwrap();
    let middle = Frame::can(0x300, false, &[]).unwrap();
    offer(&mut channel, 1, low.clone(), 0);
    offer(&mut channel, 1, urgent.clone(), 1); // stuck behind 0x700 in port 1's FIFO
    offer(&mut channel, 2, middle.clone(), 2);
    channel.service(0, &mut Vec::new());
    assert_eq!(frames(&rx), [middle, low, urgent]);
}

#[test]
fn identical_arbitration_fields_go_oldest_first() {
    let mut channel = channel();
    let (listener, rx) = member(9, PortOptions::empty());
    let (a, _) = member(1, PortOptions::empty());
    let (b, _) = member(2, PortOptions::empty());
    for m in [listener, a, b] {
        channel.members.push(m);
    }
    let from_b = Frame::can(0x10, false, &[2]).unwrap();
    let from_a = Frame::can(0x10, false, &[1]).unwrap();
    offer(&mut channel, 2, from_b.clone(), 0);
    offer(&mut channel, 1, from_a.clone(), 1);
    channel.service(0, &mut Vec::new());
    assert_eq!(frames(&rx), [from_b, from_a]);
}

#[test]
fn full_receiver_drops_counts_and_reports_before_its_next_frame() {
    let mut channel = channel();
    let (slow, rx_slow) = member(1, PortOptions::empty());
    channel.members.push(slow);
    let frame = Frame::can(0x10, false, &[]).unwrap();
    let mut sent = Vec::new();
    for arrival in 0..OUTBOX_FRAMES as u64 + 3 {
        channel.transmit(port(9), Pending { frame: frame.clone(), arrival, hops: 0, arrived_ns: 0 }, 0, &mut sent);
    }
    assert_eq!(channel.members[0].counters.rx_dropped, 3);
    assert_eq!(rx_slow.drain().len().min(10), 10);
    channel.transmit(port(9), Pending { frame, arrival: 0, hops: 0, arrived_ns: 0 }, 0, &mut sent);
    let tail: Vec<Outbound> = rx_slow.drain();
    let report_at = tail.iter().position(|i| matches!(i, Outbound::RxOverflow { dropped: 3, .. }));
    assert_eq!(report_at, Some(tail.len() - 2), "the report precedes the next frame");
}
