//! A hostile shared-memory client cannot stop the bus: whatever it writes
//! into the hub's doorbell (`word`, `armed`) and into its own rings' indices
//! — random values for seconds, or 0 into `armed` in a tight loop for as
//! long as it lives — the other clients, over shared memory and over TCP,
//! keep exchanging sequence-numbered frames in every second, in order and
//! without loss, and go on doing so once the hostile client is gone but
//! still scribbles on the doorbell it has mapped.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::time::{Duration, Instant};

use crate::FIELDHUB;
use fieldhub_client::{Client, ClientError, Port};
use fieldhub_proto::wire::PortOptions;
use fieldhub_testkit::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Seconds of traffic that are told apart (counted from its start).
const MAX_SLICES: usize = 64;
/// Sender tags: the shared-memory sender and the TCP sender.
const TAGS: [u8; 2] = [1, 2];
const IDS: [u32; 2] = [0x100, 0x200];
const SENDER_NAMES: [&str; 2] = ["shm-sender", "tcp-sender"];

/// What one receiver saw.
struct Seen {
    name: &'static str,
    /// Frames per second of traffic, per sender.
    per_slice: Vec<[AtomicU64; 2]>,
    /// Next counter expected from each sender.
    next: [AtomicU32; 2],
    /// The first frame out of order, if any.
    disorder: std::sync::Mutex<Option<String>>,
    /// The receiver gave up waiting after the senders stopped.
    stalled: AtomicBool,
}

impl Seen {
    fn new(name: &'static str) -> Self {
        Self {
            name,
            per_slice: (0..MAX_SLICES).map(|_| [AtomicU64::new(0), AtomicU64::new(0)]).collect(),
            next: [AtomicU32::new(0), AtomicU32::new(0)],
            disorder: std::sync::Mutex::new(None),
            stalled: AtomicBool::new(false),
        }
    }
}

/// Two pairs exchanging numbered frames on can0 — shm to shm and TCP to
/// TCP; both receivers are lossless and hear both senders.
struct Bystanders {
    senders: [(Client, Port); 2],
    receivers: [Client; 2],
}

impl Bystanders {
    fn join(hub: &HubProcess) -> Self {
        let shm_sender = hub.shm_client("shm-sender");
        let tcp_sender = hub.client("tcp-sender");
        let receivers = [hub.shm_client("shm-receiver"), hub.client("tcp-receiver")];
        for r in &receivers {
            r.open_port_with("can0", &lossless()).unwrap();
        }
        let shm_port = shm_sender.open_port("can0").unwrap();
        let tcp_port = tcp_sender.open_port("can0").unwrap();
        Self { senders: [(shm_sender, shm_port), (tcp_sender, tcp_port)], receivers }
    }

    /// Traffic flows while `timeline` runs on this thread (it gets the
    /// start time); then the senders stop and the receivers take what is
    /// left. Asserts that in each of the first `seconds` seconds every
    /// receiver got frames from every sender, and that every frame sent
    /// arrived at every receiver, in order, once.
    fn talk_through(&self, seconds: usize, timeline: impl FnOnce(Instant)) {
        let seen = [Seen::new("shm-receiver"), Seen::new("tcp-receiver")];
        let sent = [AtomicU32::new(0), AtomicU32::new(0)];
        let stop = AtomicBool::new(false);
        let senders_done = AtomicU8::new(0);
        let start = Instant::now();
        std::thread::scope(|s| {
            for (i, (client, port)) in self.senders.iter().enumerate() {
                let (stop, sent, senders_done) = (&stop, &sent, &senders_done);
                s.spawn(move || {
                    let mut n = 0u32;
                    while !stop.load(Ordering::Acquire) {
                        let frame = numbered(IDS[i], TAGS[i], n);
                        match client.send_timeout(port, &frame, Some(Duration::from_millis(100))) {
                            Ok(()) => {
                                n += 1;
                                // A gentle pace: the machine is shared, and
                                // progress, not throughput, is the point.
                                if n % 32 == 0 {
                                    std::thread::sleep(Duration::from_millis(1));
                                }
                            }
                            Err(ClientError::SendQueueFull(_)) => {}
                            Err(e) => panic!("sender {i}: {e}"),
                        }
                    }
                    sent[i].store(n, Ordering::Release);
                    senders_done.fetch_add(1, Ordering::AcqRel);
                });
            }
            for (client, seen) in self.receivers.iter().zip(&seen) {
                let (sent, senders_done) = (&sent, &senders_done);
                s.spawn(move || {
                    let mut last_frame = Instant::now();
                    loop {
                        match client.recv(Some(Duration::from_millis(100))).unwrap() {
                            Some(r) => {
                                last_frame = Instant::now();
                                let slice = ((last_frame - start).as_secs() as usize).min(MAX_SLICES - 1);
                                let (tag, counter) = number_of(&r.frame);
                                let Some(i) = TAGS.iter().position(|&t| t == tag) else { continue };
                                seen.per_slice[slice][i].fetch_add(1, Ordering::Relaxed);
                                let expected = seen.next[i].load(Ordering::Relaxed);
                                if counter != expected {
                                    seen.disorder.lock().unwrap().get_or_insert_with(|| {
                                        format!("{}: sender {tag} sent {counter} where {expected} was due", seen.name)
                                    });
                                }
                                seen.next[i].store(counter.wrapping_add(1), Ordering::Relaxed);
                            }
                            None if senders_done.load(Ordering::Acquire) == 2 => {
                                let all = (0..2)
                                    .all(|i| seen.next[i].load(Ordering::Relaxed) == sent[i].load(Ordering::Acquire));
                                if all {
                                    return;
                                }
                                if last_frame.elapsed() > PATIENCE {
                                    seen.stalled.store(true, Ordering::Release);
                                    return;
                                }
                            }
                            None => {}
                        }
                    }
                });
            }
            timeline(start);
            stop.store(true, Ordering::Release);
        });

        let mut silent = Vec::new();
        for seen in &seen {
            for (i, sender) in SENDER_NAMES.iter().enumerate() {
                let per_second = counts(seen, i, seconds);
                if per_second[..seconds].contains(&0) {
                    silent.push(format!("{} from {sender}: {per_second:?}", seen.name));
                }
            }
        }
        assert!(
            silent.is_empty(),
            "seconds without a frame (frames per second of traffic, then after it): {}",
            silent.join("; ")
        );
        for seen in &seen {
            if let Some(disorder) = seen.disorder.lock().unwrap().as_ref() {
                panic!("{disorder}");
            }
            for (i, tag) in TAGS.iter().enumerate() {
                let (got, want) = (seen.next[i].load(Ordering::Relaxed), sent[i].load(Ordering::Relaxed));
                assert_eq!(
                    got,
                    want,
                    "{}: sender {tag} sent {want} frames, {got} arrived (stalled: {})",
                    seen.name,
                    seen.stalled.load(Ordering::Relaxed)
                );
            }
        }
    }
}

fn counts(seen: &Seen, sender: usize, seconds: usize) -> Vec<u64> {
    (0..=seconds).map(|s| seen.per_slice[s][sender].load(Ordering::Relaxed)).collect()
}

/// Sleep until `start + at`.
fn sleep_until(start: Instant, at: Duration) {
    if let Some(left) = (start + at).checked_duration_since(Instant::now()) {
        std::thread::sleep(left);
    }
}

/// A value a vandal might write: 0, small numbers, ring-sized numbers near
/// the indices' wrap, or anything.
fn vandal_value(rng: &mut StdRng) -> u32 {
    match rng.gen_range(0..4) {
        0 => 0,
        1 => rng.gen_range(0..16_384),
        2 => u32::MAX - rng.gen_range(0..16_384),
        _ => rng.gen(),
    }
}

const SCRIBBLING: u8 = 0;
const BELL_ONLY: u8 = 1;
const DONE: u8 = 2;

#[test]
fn random_writes_into_the_hub_bell_and_ring_indices_never_stop_other_clients() {
    const HOSTILE_SECONDS: u64 = 5;
    const AFTERMATH_SECONDS: u64 = 2;
    let hub = FIELDHUB.start_shm();
    let bystanders = Bystanders::join(&hub);
    let mut hostile = RawShm::connect(&hub, "vandal");
    // A port on the channel: the hub has frames to write into the ring
    // whose indices are about to be scribbled on.
    hostile.open_port("can0", PortOptions::empty());
    let RawShm { session, raw_segment, raw_bell, .. } = hostile;
    let mut session = Some(session);
    let phase = AtomicU8::new(SCRIBBLING);

    bystanders.talk_through((HOSTILE_SECONDS + AFTERMATH_SECONDS) as usize, |start| {
        std::thread::scope(|s| {
            s.spawn(|| {
                let mut rng = StdRng::seed_from_u64(0x5EED_F1E1D);
                let ring_words = [
                    shm_words::TO_HUB_HEAD,
                    shm_words::TO_HUB_TAIL,
                    shm_words::TO_CLIENT_HEAD,
                    shm_words::TO_CLIENT_TAIL,
                ];
                loop {
                    let now = phase.load(Ordering::Acquire);
                    if now == DONE {
                        break;
                    }
                    raw_bell.word(shm_words::HUB_BELL_ARMED).store(vandal_value(&mut rng), Ordering::Relaxed);
                    raw_bell.word(shm_words::HUB_BELL_WORD).store(vandal_value(&mut rng), Ordering::Relaxed);
                    if now == SCRIBBLING {
                        let word = ring_words[rng.gen_range(0..ring_words.len())];
                        raw_segment.word(word).store(vandal_value(&mut rng), Ordering::Release);
                    }
                }
            });
            sleep_until(start, Duration::from_secs(HOSTILE_SECONDS));
            // The vandal's session ends (if the hub has not ended it
            // already); it keeps the hub's bell mapped and writing.
            drop(session.take());
            phase.store(BELL_ONLY, Ordering::Release);
            sleep_until(start, Duration::from_secs(HOSTILE_SECONDS + AFTERMATH_SECONDS));
            phase.store(DONE, Ordering::Release);
        });
    });

    // Still the same hub, and the vandal is no longer one of its clients.
    let mut hub = hub;
    assert!(hub.is_running());
    assert!(hub.log().iter().all(|l| !l.contains("panicked")), "{:#?}", hub.log());
    let agent = patient_agent();
    wait_until(deadline(), "the vandal is no longer a client", || {
        let (status, clients) = api_via(&agent, &hub, "GET", "/api/v1/clients", None);
        assert_eq!(status, 200, "{clients}");
        !clients.as_array().unwrap().iter().any(|c| c["name"].as_str() == Some("vandal"))
    });
}

#[test]
fn a_client_forever_writing_zero_into_the_hub_bell_armed_word_never_stops_other_clients() {
    const SECONDS: u64 = 5;
    let hub = FIELDHUB.start_shm();
    let bystanders = Bystanders::join(&hub);
    let hostile = RawShm::connect(&hub, "muffler");
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        // It never leaves: it writes until the test has checked everything.
        s.spawn(|| {
            let armed = hostile.raw_bell.word(shm_words::HUB_BELL_ARMED);
            while !done.load(Ordering::Relaxed) {
                armed.store(0, Ordering::Relaxed);
            }
        });
        let checked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            bystanders.talk_through(SECONDS as usize, |start| sleep_until(start, Duration::from_secs(SECONDS)));
        }));
        done.store(true, Ordering::Relaxed);
        if let Err(panic) = checked {
            std::panic::resume_unwind(panic);
        }
    });
    drop(hostile);
}
