//! One total order per channel, no loss, no duplicates — through a real hub.

use std::collections::HashMap;

use crate::FIELDHUB;
use fieldhub_client::{PortConfig, Received};
use fieldhub_testkit::*;

const PER_SENDER: u32 = 100_000;

/// Check one receiver's view: consecutive hub sequence numbers apart from the
/// gaps where its own (unechoed) frames were, and each sender's counters in
/// the order sent.
fn check_stream(name: &str, frames: &[Received]) {
    let mut next_counter: HashMap<u8, u32> = HashMap::new();
    for pair in frames.windows(2) {
        assert!(pair[1].meta.seq > pair[0].meta.seq, "{name}: sequence went backwards");
        assert!(pair[1].meta.timestamp_ns >= pair[0].meta.timestamp_ns, "{name}: time went backwards");
    }
    for r in frames {
        let (sender, counter) = number_of(&r.frame);
        let expected = next_counter.entry(sender).or_insert(0);
        assert_eq!(counter, *expected, "{name}: sender {sender} out of order");
        *expected += 1;
    }
}

#[test]
fn two_concurrent_senders_are_seen_in_one_identical_order_by_every_receiver() {
    let hub = FIELDHUB.start();
    let a = hub.client("sender-a");
    let b = hub.client("sender-b");
    let c = hub.client("listener-c");
    let d = hub.client("other-channel");
    let port_a = a
        .open_port_with("can0", &PortConfig { receive_own: true, block_on_overflow: true, ..Default::default() })
        .unwrap();
    let port_b = b.open_port_with("can0", &lossless()).unwrap();
    c.open_port_with("can0", &lossless()).unwrap();
    d.open_port_with("can1", &lossless()).unwrap();

    let total = 2 * PER_SENDER as usize;
    let (seen_a, seen_b, seen_c) = std::thread::scope(|s| {
        let recv_a = s.spawn(|| recv_n(&a, total));
        let recv_b = s.spawn(|| recv_n(&b, PER_SENDER as usize));
        let recv_c = s.spawn(|| recv_n(&c, total));
        let send_a = s.spawn(|| (0..PER_SENDER).for_each(|i| a.send(&port_a, &numbered(0x100, 1, i)).unwrap()));
        let send_b = s.spawn(|| (0..PER_SENDER).for_each(|i| b.send(&port_b, &numbered(0x100, 2, i)).unwrap()));
        send_a.join().unwrap();
        send_b.join().unwrap();
        (recv_a.join().unwrap(), recv_b.join().unwrap(), recv_c.join().unwrap())
    });

    // The listener sees every frame, sequence numbers 1..=200000 without gaps.
    let seqs: Vec<u64> = seen_c.iter().map(|r| r.meta.seq).collect();
    assert_eq!(seqs, (1..=total as u64).collect::<Vec<_>>());
    check_stream("listener-c", &seen_c);

    // A (echo on) sees exactly the listener's stream, its own frames flagged.
    assert_eq!(seen_a.len(), total);
    for (ra, rc) in seen_a.iter().zip(&seen_c) {
        assert_eq!(ra.meta, rc.meta);
        assert_eq!(ra.frame.clone().with_echo(false), rc.frame);
        assert_eq!(ra.frame.is_echo(), number_of(&ra.frame).0 == 1, "echo flag on the wrong frame");
    }
    check_stream("sender-a", &seen_a);

    // B (echo off) sees exactly A's frames, at the same positions.
    let only_a: Vec<&Received> = seen_c.iter().filter(|r| number_of(&r.frame).0 == 1).collect();
    assert_eq!(seen_b.len(), only_a.len());
    for (rb, rc) in seen_b.iter().zip(only_a) {
        assert_eq!(rb.meta, rc.meta);
        assert_eq!(rb.frame, rc.frame);
    }
    check_stream("sender-b", &seen_b);

    // The other channel saw nothing; no receiver lost anything.
    a.flush().unwrap();
    b.flush().unwrap();
    assert_nothing_pending(&d);
    for (client, port) in [(&a, &port_a), (&b, &port_b)] {
        assert_eq!(client.rx_dropped(port), 0);
    }
}

#[test]
fn lagging_receiver_loses_frames_only_on_its_own_port_and_they_are_counted() {
    let hub = FIELDHUB.start();
    let sender = hub.client("sender");
    let watcher = hub.client("watcher");
    let sleeper = hub.client("sleeper");
    let tx = sender.open_port("can0").unwrap();
    watcher.open_port_with("can0", &lossless()).unwrap();
    let sleepy_port = sleeper.open_port("can0").unwrap();

    // Enough frames to overrun every buffer between the hub and the sleeper.
    let total = 400_000u32;
    let watched = std::thread::scope(|s| {
        let watch = s.spawn(|| recv_n(&watcher, total as usize));
        (0..total).for_each(|i| sender.send(&tx, &numbered(0x10, 1, i)).unwrap());
        watch.join().unwrap()
    });
    sender.flush().unwrap();
    check_stream("watcher", &watched);
    assert_eq!(watched.len(), total as usize);

    // The sleeper wakes up: what it gets is in order without duplicates, and
    // what it missed is exactly what the hub reported as dropped.
    let got = drain_delivered(&sleeper);
    let dropped = sleeper.rx_dropped(&sleepy_port);
    assert!(dropped > 0, "the sleeper should have overrun");
    assert_eq!(got.len() as u64 + dropped, u64::from(total));
    for pair in got.windows(2) {
        assert!(pair[1].meta.seq > pair[0].meta.seq);
        assert!(number_of(&pair[1].frame).1 > number_of(&pair[0].frame).1);
    }
}

#[test]
fn frames_sent_right_before_a_client_leaves_are_delivered() {
    let hub = FIELDHUB.start();
    let listener = hub.client("listener");
    listener.open_port_with("can0", &lossless()).unwrap();
    for round in 0..50u32 {
        let brief = hub.client("brief");
        let port = brief.open_port("can0").unwrap();
        for i in 0..20 {
            brief.send(&port, &numbered(0x10, 1, round * 20 + i)).unwrap();
        }
        drop(brief);
    }
    let got = recv_n(&listener, 1000);
    for (i, r) in got.iter().enumerate() {
        assert_eq!(number_of(&r.frame), (1, i as u32));
    }
}
