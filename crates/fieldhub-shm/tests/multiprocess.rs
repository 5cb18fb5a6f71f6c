//! Rings and doorbells between two real processes over a memfd segment: the
//! test binary runs itself as the producer (`producer_child`).
//!
//! - A long stream of messages of every size (one slot to several, across
//!   the wrap) arrives whole and in order, with the consumer sleeping on the
//!   doorbell whenever the ring is empty.
//! - A producer killed with SIGKILL at random moments — mid-copy into a slot
//!   included — never leaves a half-written message visible: everything the
//!   consumer reads is complete and in sequence.
#![cfg(not(loom))]

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fieldhub_shm::{BellSegment, ClientSegment, Consumer, Producer, SegmentHeader, WaitPolicy};
use rand::Rng;

const CHILD_ENV: &str = "FIELDHUB_SHM_PRODUCER";
/// Hang guard only.
const PATIENCE: Duration = Duration::from_secs(60);

/// Message `seq`: its length varies from 1 to 5 slots; the body is the
/// sequence number, bytes derived from it, and a checksum.
fn message(seq: u32) -> Vec<u8> {
    let body_len = 8 + (seq as usize * 97) % 600;
    let mut out = Vec::with_capacity(4 + body_len);
    out.extend_from_slice(&(body_len as u32).to_le_bytes());
    out.extend_from_slice(&seq.to_le_bytes());
    out.extend((0..body_len - 8).map(|i| (seq as usize).wrapping_mul(31).wrapping_add(i) as u8));
    let sum = checksum(&out[4..]);
    out.extend_from_slice(&sum.to_le_bytes());
    out
}

fn checksum(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5u32, |h, &b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193))
}

/// Check a received body is message `expected`, whole.
fn check(body: &[u8], expected: u32) {
    assert!(body.len() >= 8, "message {expected}: {} bytes", body.len());
    let (content, sum) = body.split_at(body.len() - 4);
    assert_eq!(u32::from_le_bytes(sum.try_into().unwrap()), checksum(content), "message {expected}: torn");
    assert_eq!(u32::from_le_bytes(content[..4].try_into().unwrap()), expected, "message out of order");
    assert_eq!(body, &message(expected)[4..], "message {expected}: wrong bytes");
}

/// Start the producer process on the to-hub ring of `fd`, ringing `bell`;
/// it sends `count` messages (0: until killed).
fn spawn_producer(fd: &OwnedFd, bell: &OwnedFd, count: u32) -> Child {
    // Inheritable duplicates (dup clears close-on-exec).
    let fd = rustix::io::dup(fd).unwrap();
    let bell = rustix::io::dup(bell).unwrap();
    let child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "producer_child", "--ignored", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, format!("{},{},{count}", fd.as_raw_fd(), bell.as_raw_fd()))
        .stdout(Stdio::null())
        .spawn()
        .expect("start the producer process");
    // The child has its own copies now.
    drop((fd, bell));
    child
}

/// The producer process: started by the tests above, not on its own.
#[test]
#[ignore = "the producer half of the multi-process tests; they start it"]
fn producer_child() {
    let spec = std::env::var(CHILD_ENV).expect("run by the multi-process tests");
    let numbers: Vec<i32> = spec.split(',').map(|n| n.parse().unwrap()).collect();
    // SAFETY: the parent passed these descriptors, open and owned by nobody
    // else in this process.
    let (segment, bell) = unsafe { (OwnedFd::from_raw_fd(numbers[0]), OwnedFd::from_raw_fd(numbers[1])) };
    let segment = ClientSegment::open(segment).unwrap();
    let bell = BellSegment::open(bell).unwrap();
    let ring = segment.to_hub();
    let mut producer = Producer::starting_at(0);
    let count = numbers[2] as u32;
    let mut seq = 0u32;
    while count == 0 || seq < count {
        let m = message(seq);
        if producer.try_push(&ring, &m).unwrap() {
            bell.bell().ring();
            seq += 1;
        } else {
            segment.space_bell().wait(WaitPolicy::ADAPTIVE, None, || producer.free_slots(&ring).unwrap() >= 5);
        }
    }
}

/// Consume until `done()` and the ring is empty; returns the count read.
fn consume(segment: &ClientSegment, bell: &BellSegment, mut done: impl FnMut() -> bool) -> u32 {
    let ring = segment.to_hub();
    let mut consumer = Consumer::starting_at(0);
    let mut body = Vec::new();
    let mut next = 0u32;
    let deadline = Instant::now() + PATIENCE;
    loop {
        // Asked every round: a fast producer may never let the ring run dry.
        let finished = done();
        if consumer.pop(&ring, 4096, &mut body).unwrap() {
            check(&body, next);
            next += 1;
            segment.space_bell().ring();
            continue;
        }
        if finished && !consumer.has_message(&ring) {
            return next;
        }
        assert!(Instant::now() < deadline, "stalled after {next} messages");
        let short = Some(Instant::now() + Duration::from_millis(20));
        bell.bell().wait(WaitPolicy::ADAPTIVE, short, || consumer.has_message(&ring));
    }
}

#[test]
fn a_stream_between_processes_arrives_whole_and_in_order() {
    const COUNT: u32 = 200_000;
    let (segment, fd) = ClientSegment::create(SegmentHeader::standard(1)).unwrap();
    let (bell, bell_fd) = BellSegment::create().unwrap();
    let mut child = spawn_producer(&fd, &bell_fd, COUNT);
    let mut exited = None;
    let got = consume(&segment, &bell, || {
        exited = exited.or_else(|| child.try_wait().unwrap());
        exited.is_some()
    });
    assert!(exited.unwrap().success(), "the producer failed");
    assert_eq!(got, COUNT);
}

#[test]
fn a_producer_killed_at_any_moment_never_leaves_a_half_written_message() {
    let mut rng = rand::thread_rng();
    let mut total = 0u64;
    for _ in 0..25 {
        let (segment, fd) = ClientSegment::create(SegmentHeader::standard(1)).unwrap();
        let (bell, bell_fd) = BellSegment::create().unwrap();
        let mut child = spawn_producer(&fd, &bell_fd, 0);
        let kill_at = Instant::now() + Duration::from_micros(rng.gen_range(1_000..30_000));
        let mut killed = false;
        total += u64::from(consume(&segment, &bell, || {
            if !killed && Instant::now() >= kill_at {
                child.kill().unwrap();
                child.wait().unwrap();
                killed = true;
            }
            killed
        }));
        // Reaped above already; this only collects the status.
        child.wait().unwrap();
    }
    assert!(total > 0, "the producers never got to send anything before they were killed");
}
