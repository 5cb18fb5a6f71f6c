//! Cyclic jobs driven by the bus on its manual clock: every cycle on the
//! bus at its exact bus time, in real and virtual time; jobs added, changed
//! and removed while the bus runs; a job ends with its port; a full FIFO
//! drops a cycle as `queue_full`, told to its client.

use std::sync::{Arc, Mutex};

use fieldhub_proto::wire::PortOptions;
use fieldhub_proto::Frame;

use super::harness::{Harness, TestClient, START_NS};
use crate::cyclic::{FrameProducer, JobError, JobId, JobOrigin};
use crate::inbox::{CyclicRequest, Inbound, JobReply};
use crate::outbox::Outbound;

const MS: u64 = 1_000_000;

const ONE_CHANNEL: &str = "[[channel]]\nname = \"can0\"\n";

fn can(id: u32, data: &[u8]) -> Frame {
    Frame::can(id, false, data).unwrap()
}

/// A producer of frames `id` whose one byte counts the cycles.
fn counting(id: u32) -> Box<dyn FrameProducer> {
    let mut n = 0u8;
    Box::new(move |_due| {
        n = n.wrapping_add(1);
        Some(can(id, &[n]))
    })
}

/// Where a test reads the bus's answer.
type Kept = Arc<Mutex<Option<Result<JobId, JobError>>>>;

/// A reply that keeps the answer for the test to read.
fn answer() -> (Kept, JobReply) {
    let kept = Arc::new(Mutex::new(None));
    let into = kept.clone();
    (kept, Box::new(move |result| *into.lock().unwrap() = Some(result)))
}

fn request(
    h: &mut Harness,
    client: &TestClient,
    make: impl FnOnce(JobReply) -> CyclicRequest,
) -> Result<JobId, JobError> {
    let (kept, reply) = answer();
    h.bus.handle(Inbound::Cyclic { client: client.id, request: make(reply) });
    let result = kept.lock().unwrap().take();
    result.expect("the bus answers a cyclic request at once")
}

fn add(
    h: &mut Harness,
    client: &TestClient,
    port: u16,
    id: u32,
    period_ns: u64,
    delay_ns: u64,
) -> Result<JobId, JobError> {
    request(h, client, |reply| CyclicRequest::Add {
        port,
        producer: counting(id),
        period_ns,
        start_delay_ns: delay_ns,
        origin: None,
        reply,
    })
}

/// Serve the bus at each deadline it names, up to `until_ns`, as the hub's
/// loop wakes for them.
fn run_until(h: &mut Harness, until_ns: u64) {
    let mut next = h.step();
    while let Some(at) = next.filter(|&at| at <= until_ns) {
        h.clock.set(at);
        next = h.step();
    }
    h.clock.set(until_ns);
    h.step();
}

/// `(id, first byte, timestamp)` of every frame `rx` got.
fn seen(h: &Harness, rx: &TestClient) -> Vec<(u32, u8, u64)> {
    h.frames(rx).iter().map(|(f, m)| (f.id(), f.data()[0], m.timestamp_ns)).collect()
}

fn times_of(seen: &[(u32, u8, u64)], id: u32) -> Vec<u64> {
    seen.iter().filter(|s| s.0 == id).map(|s| s.2).collect()
}

#[test]
fn the_bus_sends_every_cycle_at_its_exact_bus_time_and_wakes_for_the_next() {
    let mut h = Harness::new(ONE_CHANNEL);
    let (node, rx) = (h.connect("node"), h.connect("rx"));
    let port = h.open(&node, "can0", "node", PortOptions::empty());
    h.open(&rx, "can0", "rx", PortOptions::empty());
    add(&mut h, &node, port, 0x100, 10 * MS, 3 * MS).unwrap();
    add(&mut h, &node, port, 0x200, 25 * MS, 0).unwrap();
    assert_eq!(h.step(), Some(START_NS + 3 * MS), "the bus asks to be served at the first cycle");
    run_until(&mut h, START_NS + 100 * MS);
    let got = seen(&h, &rx);
    assert_eq!(times_of(&got, 0x100), (0..10).map(|k| START_NS + 3 * MS + k * 10 * MS).collect::<Vec<_>>());
    assert_eq!(times_of(&got, 0x200), (0..5).map(|k| START_NS + k * 25 * MS).collect::<Vec<_>>());
    let bytes: Vec<u8> = got.iter().filter(|s| s.0 == 0x100).map(|s| s.1).collect();
    assert_eq!(bytes, (1..=10).collect::<Vec<u8>>(), "the producer made one frame per cycle");
}

#[test]
fn jobs_added_changed_and_removed_while_the_bus_runs_keep_exact_cycles() {
    let mut h = Harness::new(ONE_CHANNEL);
    let (node, other, rx) = (h.connect("node"), h.connect("other"), h.connect("rx"));
    let port = h.open(&node, "can0", "node", PortOptions::empty());
    h.open(&rx, "can0", "rx", PortOptions::empty());
    let first = add(&mut h, &node, port, 0x100, 10 * MS, 0).unwrap();
    run_until(&mut h, START_NS + 15 * MS);
    let second = add(&mut h, &node, port, 0x200, 4 * MS, MS).unwrap();
    run_until(&mut h, START_NS + 30 * MS);
    let refused = request(&mut h, &other, |reply| CyclicRequest::Remove { id: first, reply });
    assert_eq!(refused, Err(JobError::NoSuchJob(first)), "another client cannot touch the job");
    request(&mut h, &node, |reply| CyclicRequest::Remove { id: first, reply }).unwrap();
    request(&mut h, &node, |reply| CyclicRequest::Update {
        id: second,
        period_ns: 20 * MS,
        start_delay_ns: 5 * MS,
        reply,
    })
    .unwrap();
    run_until(&mut h, START_NS + 80 * MS);
    let got = seen(&h, &rx);
    assert_eq!(times_of(&got, 0x100), [0, 10, 20, 30].map(|ms| START_NS + ms * MS));
    let second_times = [16, 20, 24, 28, 35, 55, 75].map(|ms| START_NS + ms * MS);
    assert_eq!(times_of(&got, 0x200), second_times);
}

#[test]
fn jobs_of_one_origin_count_their_start_delays_from_the_first_ones_addition() {
    let mut h = Harness::new(ONE_CHANNEL);
    let (a, b, rx) = (h.connect("a"), h.connect("b"), h.connect("rx"));
    let (port_a, port_b) =
        (h.open(&a, "can0", "a", PortOptions::empty()), h.open(&b, "can0", "b", PortOptions::empty()));
    h.open(&rx, "can0", "rx", PortOptions::empty());
    let origin = JobOrigin::new();
    let add_from = |h: &mut Harness, client: &TestClient, port: u16, id: u32, delay_ns: u64| {
        let origin = Some(origin.clone());
        request(h, client, |reply| CyclicRequest::Add {
            port,
            producer: counting(id),
            period_ns: 10 * MS,
            start_delay_ns: delay_ns,
            origin,
            reply,
        })
    };
    add_from(&mut h, &a, port_a, 0x100, 4 * MS).unwrap();
    // Added 1.5 ms later, by another client: its 4 ms still count from the origin.
    h.clock.set(START_NS + 1_500_000);
    add_from(&mut h, &b, port_b, 0x200, 4 * MS).unwrap();
    // Added after its first cycle's time: sent at once, then in the origin's phase.
    run_until(&mut h, START_NS + 5 * MS);
    add_from(&mut h, &b, port_b, 0x300, 2 * MS).unwrap();
    // Without the origin, a delay counts from the job's own addition.
    add(&mut h, &a, port_a, 0x400, 10 * MS, 4 * MS).unwrap();
    run_until(&mut h, START_NS + 40 * MS);
    let got = seen(&h, &rx);
    let at = |ms: &[u64]| ms.iter().map(|ms| START_NS + ms * MS).collect::<Vec<_>>();
    assert_eq!(times_of(&got, 0x100), at(&[4, 14, 24, 34]));
    assert_eq!(times_of(&got, 0x200), at(&[4, 14, 24, 34]), "in phase with 0x100, not 1.5 ms behind");
    assert_eq!(times_of(&got, 0x300), at(&[5, 12, 22, 32]));
    assert_eq!(times_of(&got, 0x400), at(&[9, 19, 29, 39]));
}

#[test]
fn frames_due_together_arbitrate_by_identifier_though_the_clock_moves_between_them() {
    // A timed channel; the clock moves 1 ns at every read, as a real one
    // does. Two jobs of one origin, due together; the one added first has
    // the higher identifier: queued one clock read apart, it would take the
    // idle bus alone and go first.
    let mut h = Harness::with_ticking_clock("[[channel]]\nname = \"can0\"\ntiming = \"timed\"\nbitrate = 1000000\n");
    let (a, b, rx) = (h.connect("a"), h.connect("b"), h.connect("rx"));
    let (port_a, port_b) =
        (h.open(&a, "can0", "a", PortOptions::empty()), h.open(&b, "can0", "b", PortOptions::empty()));
    h.open(&rx, "can0", "rx", PortOptions::empty());
    let origin = JobOrigin::new();
    for (client, port, id) in [(&a, port_a, 0x300), (&b, port_b, 0x100)] {
        let origin = Some(origin.clone());
        request(&mut h, client, |reply| CyclicRequest::Add {
            port,
            producer: counting(id),
            period_ns: 10 * MS,
            start_delay_ns: 2 * MS,
            origin,
            reply,
        })
        .unwrap();
    }
    let mut next = h.step();
    while let Some(at) = next.filter(|&at| at <= START_NS + 25 * MS) {
        h.clock.set(at);
        next = h.step();
    }
    let ids: Vec<u32> = seen(&h, &rx).iter().map(|s| s.0).collect();
    assert_eq!(ids, [0x100, 0x300, 0x100, 0x300, 0x100, 0x300], "every cycle, the lower identifier first");
}

#[test]
fn a_job_ends_with_its_port_and_needs_an_open_port() {
    let mut h = Harness::new(ONE_CHANNEL);
    let (node, rx) = (h.connect("node"), h.connect("rx"));
    let port = h.open(&node, "can0", "node", PortOptions::empty());
    h.open(&rx, "can0", "rx", PortOptions::empty());
    assert_eq!(add(&mut h, &node, port + 1, 0x100, 10 * MS, 0), Err(JobError::PortNotOpen(port + 1)));
    let job = add(&mut h, &node, port, 0x100, 10 * MS, 0).unwrap();
    run_until(&mut h, START_NS + 10 * MS);
    h.bus.handle(Inbound::ClosePort { client: node.id, port });
    run_until(&mut h, START_NS + 50 * MS);
    assert_eq!(times_of(&seen(&h, &rx), 0x100).len(), 2);
    assert_eq!(h.bus.cyclic.len(), 0);
    assert_eq!(request(&mut h, &node, |reply| CyclicRequest::Remove { id: job, reply }), Err(JobError::NoSuchJob(job)));
    assert_eq!(h.step(), None, "no job is left to wake the bus for");
}

#[test]
fn a_cycle_finding_its_ports_fifo_full_is_dropped_as_queue_full_and_told_to_its_client() {
    // A timed 10 kbit/s channel carries a frame in about 5 ms: a 1 µs job
    // fills its port's FIFO (its client's credit) and the rest are dropped.
    let mut h = Harness::new("[[channel]]\nname = \"slow\"\ntiming = \"timed\"\nbitrate = 10000\n");
    let node = h.connect("node");
    let port = h.open(&node, "slow", "node", PortOptions::empty());
    add(&mut h, &node, port, 0x100, 1_000, 0).unwrap();
    run_until(&mut h, START_NS + MS);
    let stats = h.bus.stats();
    let node_port = stats.ports.iter().find(|p| p.name == "node").unwrap();
    assert_eq!(node_port.tx_pending, crate::credit::TX_CREDITS - 1, "one is on the wire, the rest wait");
    assert_eq!(node_port.tx_dropped_by_reason.get("queue_full"), Some(&(1001 - u64::from(crate::credit::TX_CREDITS))));
    let told: u32 = h
        .items(&node)
        .iter()
        .filter_map(|item| match item {
            Outbound::TxDropped { dropped, .. } => Some(*dropped),
            _ => None,
        })
        .sum();
    assert!(told > 0, "its client hears of the dropped cycles");
}

#[test]
fn in_virtual_time_every_cycle_inside_a_step_is_on_the_bus_at_its_exact_time() {
    let mut h = Harness::in_virtual_time("[hub]\ntime = \"virtual\"\n[[channel]]\nname = \"can0\"\n");
    let (node, rx, sim) = (h.connect("node"), h.connect("rx"), h.connect_synchronized("sim"));
    let port = h.open(&node, "can0", "node", PortOptions::empty());
    h.open(&rx, "can0", "rx", PortOptions::empty());
    add(&mut h, &node, port, 0x100, 10 * MS, 2 * MS).unwrap();
    add(&mut h, &node, port, 0x080, 7 * MS, 0).unwrap();
    // The participant steps 25 ms at a time: several cycles fall inside a step.
    for step in 1..=4 {
        h.announce(&sim, step * 25 * MS);
        assert!(h.advance_virtual_time());
    }
    let got = seen(&h, &rx);
    assert_eq!(times_of(&got, 0x100), (0..10).map(|k| 2 * MS + k * 10 * MS).collect::<Vec<_>>());
    assert_eq!(times_of(&got, 0x080), (0..15).map(|k| k * 7 * MS).collect::<Vec<_>>());
}
