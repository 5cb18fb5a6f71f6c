//! Receiving over shared memory without a reader thread: the application's
//! waiting thread takes from the to-client ring itself (`receive.rs` in the
//! client). Order and loss through one `recv` loop, several threads taking
//! at once, replies behind unread frames, the hub's end reaching a thread
//! that waits (or nobody waiting), the ready fd, and a burst larger than the
//! ring on a lossless port.
//!
//! The test that counts the process's client threads runs alone in a test
//! process of its own (`in_own_process`): other tests' clients have theirs.

use std::time::Duration;

use crate::FIELDHUB;
use fieldhub_client::{Client, ClientError, PortConfig};
use fieldhub_testkit::*;

/// Threads of this process whose name starts with `prefix`.
fn threads_named(prefix: &str) -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .filter(|name| name.starts_with(prefix))
        .count()
}

#[test]
fn two_hundred_thousand_numbered_frames_arrive_in_order_through_one_recv_loop_without_a_reader_thread() {
    let test = concat!(
        module_path!(),
        "::two_hundred_thousand_numbered_frames_arrive_in_order_through_one_recv_loop_without_a_reader_thread"
    );
    in_own_process(test, &[], numbered_frames_arrive_in_order_through_one_recv_loop_without_a_reader_thread);
}

/// The test's body, alone in its own process: it counts the process's
/// client reader threads.
fn numbered_frames_arrive_in_order_through_one_recv_loop_without_a_reader_thread() {
    const FRAMES: u32 = 200_000;
    let hub = FIELDHUB.start_shm();
    let readers_before = threads_named("fh-client-read");
    let sender = hub.shm_client("sender");
    let receiver = hub.shm_client("receiver");
    let tx = sender.open_port("can0").unwrap();
    let rx = receiver.open_port_with("can0", &lossless()).unwrap();
    assert_eq!(threads_named("fh-client-read"), readers_before, "an shm client starts no reader thread");

    std::thread::scope(|s| {
        s.spawn(|| (0..FRAMES).for_each(|n| sender.send(&tx, &numbered(0x100, 1, n)).unwrap()));
        let mut last_seq = 0;
        for n in 0..FRAMES {
            let got = receiver.recv(Some(PATIENCE)).unwrap().unwrap_or_else(|| panic!("stalled after {n} frames"));
            assert_eq!(number_of(&got.frame), (1, n), "frame out of order or lost");
            assert!(got.meta.seq > last_seq, "sequence numbers only grow");
            assert_eq!(got.port, rx.handle);
            last_seq = got.meta.seq;
        }
    });
    assert_nothing_pending(&receiver);
    assert_eq!(receiver.rx_dropped(&rx), 0);
    assert_eq!(threads_named("fh-client-read"), readers_before, "nor does receiving start one");
}

#[test]
fn threads_receiving_at_once_get_every_frame_exactly_once_and_each_in_order() {
    const FRAMES: u32 = 100_000;
    const THREADS: usize = 3;
    let hub = FIELDHUB.start_shm();
    let sender = hub.shm_client("sender");
    let receiver = hub.shm_client("receiver");
    let tx = sender.open_port("can0").unwrap();
    receiver.open_port_with("can0", &lossless()).unwrap();

    // Requests wait for their replies among the receiving threads.
    let flushes = receive_on_threads_at_once(&sender, &tx, &receiver, THREADS, FRAMES);
    assert!(flushes > 0);
    assert_nothing_pending(&receiver);
}

/// A request a client makes of the hub.
type Request = dyn Fn(&Client);

#[test]
fn replies_that_wait_behind_unread_frames_in_the_ring_are_reached() {
    const FRAMES: u32 = 3_000;
    let hub = FIELDHUB.start_shm();
    let sender = hub.shm_client("sender");
    let receiver = hub.shm_client("receiver");
    let tx = sender.open_port("can0").unwrap();
    let rx = receiver.open_port_with("can0", &lossless()).unwrap();

    // Each time the frames are in the receiver's ring before it asks: its
    // request's reply comes behind them.
    let requests: [(&str, &Request); 3] = [
        ("flush", &|c: &Client| {
            c.flush().expect("flush behind unread frames");
        }),
        ("stats", &|c: &Client| {
            c.stats().expect("stats behind unread frames");
        }),
        ("open_port", &|c: &Client| {
            c.open_port("can1").expect("open_port behind unread frames");
        }),
    ];
    let mut expected = 0u32;
    for (round, (what, request)) in requests.iter().enumerate() {
        let first = round as u32 * FRAMES;
        (first..first + FRAMES).for_each(|n| sender.send(&tx, &numbered(0x100, 1, n)).unwrap());
        sender.flush().unwrap();
        request(&receiver);
        // Everything the request carried past is in the receive queue.
        while let Some(got) = receiver.try_recv().unwrap() {
            assert_eq!(number_of(&got.frame), (1, expected), "after {what}");
            expected += 1;
        }
        assert_eq!(expected, first + FRAMES, "after {what}: frames missing");
    }
    assert_eq!(receiver.rx_dropped(&rx), 0);
}

#[test]
fn the_hubs_goodbye_reaches_a_thread_blocked_in_recv_and_a_client_nobody_waits_on() {
    let hub = FIELDHUB.start_shm();
    let waiting = hub.shm_client("waiting");
    let idle = hub.shm_client("idle");
    waiting.open_port("can0").unwrap();
    let idle_port = idle.open_port("can0").unwrap();
    std::thread::scope(|s| {
        let (tid_tx, tid) = std::sync::mpsc::channel();
        let blocked = s.spawn(move || {
            tid_tx.send(thread_id()).unwrap();
            waiting.recv(None)
        });
        // The thread is asleep in `recv` (no timeout) before the hub stops.
        wait_until_asleep(tid.recv().unwrap());
        assert!(hub.terminate().success());
        match blocked.join().unwrap() {
            Err(ClientError::Closed { reason }) => assert!(reason.contains("shutting down"), "{reason}"),
            other => panic!("expected the hub's goodbye, got {other:?}"),
        }
    });
    // Nobody waited on `idle`: its link's own thread took the goodbye.
    let reason = wait_for(deadline(), "a send into the stopped hub fails as closed", || {
        match idle.send(&idle_port, &numbered(0x1, 1, 0)) {
            Err(ClientError::Closed { reason }) => Some(reason),
            _ => None,
        }
    });
    assert!(reason.contains("shutting down"), "{reason}");
}

#[test]
fn the_ready_fd_of_an_shm_client_is_readable_exactly_while_frames_wait() {
    let hub = FIELDHUB.start_shm();
    let sender = hub.shm_client("sender");
    let receiver = hub.shm_client("receiver");
    let tx = sender.open_port("can0").unwrap();
    receiver.open_port("can0").unwrap();
    // Nobody waits in `recv`: the fd becomes readable all the same.
    assert_ready_fd_follows_the_receive_queue(&sender, &tx, &receiver);
    let fd = receiver.fileno().unwrap();
    assert!(hub.terminate().success());
    assert!(readable(fd, 60_000), "the hub's end makes the fd readable");
    assert!(receiver.recv(Some(PATIENCE)).is_err());
}

/// One thread sends a burst larger than the ring, the hub's transmit credit
/// and the to-hub ring together, to a channel it also receives on through
/// a lossless port, and reads only afterwards: its sends take what waits in
/// its ring when they find no room, so the channel is never held for good.
#[test]
fn a_thread_that_sends_a_burst_to_its_own_lossless_port_before_reading_does_not_stall() {
    const FRAMES: u32 = 30_000;
    let hub = FIELDHUB.start_shm();
    let client = hub.shm_client("loopback");
    let config = PortConfig { receive_own: true, ..lossless() };
    let port = client.open_port_with("can0", &config).unwrap();
    for n in 0..FRAMES {
        client.send_timeout(&port, &numbered(0x100, 1, n), Some(PATIENCE)).expect("a send stalled");
    }
    for n in 0..FRAMES {
        let got = client.recv(Some(PATIENCE)).unwrap().unwrap_or_else(|| panic!("stalled after {n} frames"));
        assert_eq!(number_of(&got.frame), (1, n));
        assert!(got.frame.is_echo());
    }
    assert_eq!(client.rx_dropped(&port), 0);
}

/// Send `frames` numbered frames from a TCP client while `receiver` reads
/// nothing, until every one is on the bus; then read what the receiver got.
/// Returns the numbers received, in order, and the receiver's drop count.
fn burst_while_not_reading(hub: &HubProcess, receiver: &Client, frames: u32) -> (Vec<u32>, u64) {
    let rx = receiver.open_port("can0").unwrap();
    let sender = hub.client("burst");
    let tx = sender.open_port("can0").unwrap();
    for n in 0..frames {
        sender.send(&tx, &numbered(0x100, 1, n)).unwrap();
    }
    // Every frame has been fanned out once the barrier returns.
    sender.flush().unwrap();
    let mut got = Vec::new();
    while let Some(received) = receiver.recv(Some(Duration::from_millis(500))).unwrap() {
        got.push(number_of(&received.frame).1);
    }
    // A flush brings the report of every overrun so far.
    receiver.flush().unwrap();
    (got, receiver.rx_dropped(&rx))
}

#[test]
fn a_shm_receiver_that_reads_nothing_during_a_twenty_thousand_frame_burst_loses_none() {
    // Over TCP such a receiver keeps the burst in its receive queue; over
    // shared memory the default ring must hold as much.
    let hub = FIELDHUB.start_shm();
    let receiver = hub.shm_client("sleeper");
    let (got, dropped) = burst_while_not_reading(&hub, &receiver, 20_000);
    assert_eq!(dropped, 0);
    assert_eq!(got, (0..20_000).collect::<Vec<_>>(), "every frame, in order");
}

#[test]
fn the_shm_ring_size_is_the_hubs_to_configure() {
    let small = "[hub]\nshm_ring_slots = 4096\n[[channel]]\nname = \"can0\"\n";
    let hub = FIELDHUB.start_shm_with(Some(small), &[]);
    let receiver = hub.shm_client("sleeper");
    let (got, dropped) = burst_while_not_reading(&hub, &receiver, 20_000);
    // A quarter of the default ring, less the reply reserve, holds a few
    // thousand classic frames; the rest are dropped and counted, and what
    // arrives is the burst's beginning, in order.
    assert!(dropped > 0 && got.len() as u64 + dropped == 20_000, "got {} dropped {dropped}", got.len());
    assert_eq!(got, (0..got.len() as u32).collect::<Vec<_>>());
}
