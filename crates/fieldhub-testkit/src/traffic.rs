//! Sequence-numbered traffic and the checks made on it: frames that carry
//! `(sender, counter)`, receiving exactly n of them, draining what a client
//! was delivered, threads receiving at once, the ready fd, and a slow timed
//! bus kept busy ([`occupy_bus`]) so frames sent meanwhile contend.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use fieldhub_client::{Client, Frame, Port, PortConfig, Received};

use crate::wait::{deadline, wait_until, PATIENCE};

/// A port config that holds its channel rather than drop when this receiver lags,
/// so order tests can demand every frame — CAN FD frames included.
pub fn lossless() -> PortConfig {
    PortConfig { block_on_overflow: true, fd: true, ..Default::default() }
}

/// Keep `channel` of a slow timed hub busy: `blocker` sends three 8-byte
/// frames of identifier `id` and this returns, with them, once the first is
/// on the bus and two wait (at 500 bit/s each holds the bus ~220 ms, long
/// enough for frames sent meanwhile to contend together when it ends). The
/// blocker must stay connected: its waiting frames leave with it.
pub fn occupy_bus(blocker: &Client, channel: &str, id: u32) -> Vec<Frame> {
    let port = blocker.open_port(channel).unwrap();
    let blocks: Vec<Frame> = (0..3).map(|k| Frame::can(id, false, &[k; 8]).unwrap()).collect();
    blocks.iter().for_each(|f| blocker.send(&port, f).unwrap());
    let waiting =
        || blocker.stats().unwrap().ports.iter().find(|p| p.port_id == port.port_id).map_or(0, |p| p.tx_pending);
    wait_until(deadline(), "the blocker's first frame is on the bus and two wait", || waiting() == 2);
    blocks
}

/// A classic frame carrying `(sender, counter)` as its payload.
pub fn numbered(id: u32, sender: u8, counter: u32) -> Frame {
    let c = counter.to_le_bytes();
    Frame::can(id, false, &[sender, c[0], c[1], c[2], c[3]]).expect("valid frame")
}

/// `(sender, counter)` from a [`numbered`] frame.
pub fn number_of(frame: &Frame) -> (u8, u32) {
    let d = frame.data();
    (d[0], u32::from_le_bytes([d[1], d[2], d[3], d[4]]))
}

/// Receive exactly `n` frames, failing on a stall.
pub fn recv_n(client: &Client, n: usize) -> Vec<Received> {
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        match client.recv(Some(PATIENCE)).expect("recv") {
            Some(r) => out.push(r),
            None => panic!("stalled after {} of {n} frames", out.len()),
        }
    }
    out
}

/// Everything already delivered to a client that stopped reading: receive
/// while a flush is under way, then what is left in the queue. The flush's
/// pong waits behind every frame still buffered for the client, so once it
/// returns, everything the hub delivered is in the receive queue.
pub fn drain_delivered(client: &Client) -> Vec<Received> {
    std::thread::scope(|s| {
        let flushed = s.spawn(|| client.flush().unwrap());
        let mut got = Vec::new();
        while !flushed.is_finished() {
            got.extend(client.recv(Some(Duration::from_millis(50))).unwrap());
        }
        flushed.join().unwrap();
        while let Some(r) = client.try_recv().unwrap() {
            got.push(r);
        }
        got
    })
}

/// Send `frames` numbered frames from `sender` on `tx` while `threads`
/// threads take them from `receiver` at once and one more asks `receiver`
/// for flushes meanwhile (their replies wait among the frames). Asserts that
/// every frame is taken exactly once and each thread took its frames in
/// order; returns how many flushes completed.
pub fn receive_on_threads_at_once(sender: &Client, tx: &Port, receiver: &Client, threads: usize, frames: u32) -> u32 {
    let taken = AtomicUsize::new(0);
    let (per_thread, flushes) = std::thread::scope(|s| {
        s.spawn(|| (0..frames).for_each(|n| sender.send(tx, &numbered(0x100, 1, n)).unwrap()));
        let receiving: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut mine = Vec::new();
                    let started = Instant::now();
                    while taken.load(Ordering::Relaxed) < frames as usize {
                        assert!(started.elapsed() < PATIENCE, "stalled at {} frames", taken.load(Ordering::Relaxed));
                        if let Some(got) = receiver.recv(Some(Duration::from_millis(20))).unwrap() {
                            taken.fetch_add(1, Ordering::Relaxed);
                            mine.push(got);
                        }
                    }
                    mine
                })
            })
            .collect();
        let flushing = s.spawn(|| {
            let mut flushes = 0u32;
            while taken.load(Ordering::Relaxed) < frames as usize {
                receiver.flush().expect("a flush among receiving threads");
                flushes += 1;
            }
            flushes
        });
        let per_thread: Vec<Vec<Received>> = receiving.into_iter().map(|t| t.join().unwrap()).collect();
        (per_thread, flushing.join().unwrap())
    });
    let mut seen = HashSet::new();
    for (i, mine) in per_thread.iter().enumerate() {
        for pair in mine.windows(2) {
            assert!(pair[1].meta.seq > pair[0].meta.seq, "thread {i} took frames out of order");
        }
        for got in mine {
            assert!(seen.insert(number_of(&got.frame).1), "frame {:?} taken twice", number_of(&got.frame));
        }
    }
    assert_eq!(seen.len(), frames as usize, "every frame taken once");
    flushes
}

/// Whether `fd` is readable within `timeout_ms` (0: now).
pub fn readable(fd: i32, timeout_ms: i32) -> bool {
    let mut pollfd = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    // SAFETY: `pollfd` is a valid, exclusively borrowed array of one entry
    // for the duration of the call.
    let n = unsafe { libc::poll(&mut pollfd, 1, timeout_ms) };
    n == 1 && pollfd.revents & libc::POLLIN != 0
}

/// 200 bursts of 1 to 5 numbered frames from `sender` on `tx` to
/// `receiver`, whose ready fd must be readable exactly while frames wait:
/// readable once a burst is sent (nobody waiting in `recv`), readable before
/// each `recv` of it, quiet once it is all taken.
pub fn assert_ready_fd_follows_the_receive_queue(sender: &Client, tx: &Port, receiver: &Client) {
    let fd = receiver.fileno().unwrap();
    assert_eq!(receiver.fileno().unwrap(), fd, "one fd for the client's life");
    assert!(!readable(fd, 0), "nothing sent yet");
    for round in 0..200u32 {
        let burst = 1 + round % 5;
        for i in 0..burst {
            sender.send(tx, &numbered(0x1, 1, i)).unwrap();
        }
        assert!(readable(fd, 60_000), "round {round}: frames sent, fd quiet");
        // Once both flushes return, the whole burst is in the receive queue.
        sender.flush().unwrap();
        receiver.flush().unwrap();
        for i in 0..burst {
            // Readable means recv will not block.
            assert!(readable(fd, 0));
            let got = receiver.recv(Some(PATIENCE)).unwrap().expect("a frame");
            assert_eq!(number_of(&got.frame), (1, i));
        }
        assert!(!readable(fd, 0), "round {round}: queue empty, fd still readable");
    }
}

/// Assert that no frame arrives before a flush round trip completes.
pub fn assert_nothing_pending(client: &Client) {
    client.flush().expect("flush");
    assert!(client.try_recv().expect("try_recv").is_none(), "unexpected frame");
}

/// Every frame of `frames` whose sender tag is `sender`, as counters.
pub fn counters_from(frames: &[Received], sender: u8) -> Vec<u32> {
    frames.iter().map(|r| number_of(&r.frame)).filter(|(s, _)| *s == sender).map(|(_, n)| n).collect()
}

/// `sender` sends `count` numbered frames (tag `tag`, id `id`) on `tx` while
/// `receiver` (a lossless port) takes them; asserts they all arrive, in
/// order, exactly once. Frames of other senders on the channel are skipped.
pub fn exchange_numbered(sender: &Client, tx: &fieldhub_client::Port, receiver: &Client, id: u32, tag: u8, count: u32) {
    std::thread::scope(|s| {
        s.spawn(|| {
            for n in 0..count {
                sender.send_timeout(tx, &numbered(id, tag, n), Some(PATIENCE)).expect("send");
            }
        });
        let mut next = 0u32;
        while next < count {
            let got = receiver
                .recv(Some(PATIENCE))
                .expect("recv")
                .unwrap_or_else(|| panic!("stalled after {next} of {count} frames"));
            let (sender_tag, counter) = number_of(&got.frame);
            if sender_tag != tag {
                continue;
            }
            assert_eq!(counter, next, "frame out of order or lost");
            next += 1;
        }
    });
}

/// Flush until every report is in: everything `client` sent before is on the
/// bus or was reported off it. Returns how many frames the hub reported off
/// the bus (`TX_DROPPED`, docs/frame-fate.md); any other error fails the test.
pub fn flush_all(client: &Client) -> u64 {
    let mut dropped = fieldhub_client::DropTally::default();
    if let Err(e) = client.flush_all(&mut dropped) {
        panic!("flush: {e}");
    }
    dropped.total()
}
