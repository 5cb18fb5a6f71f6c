//! Model checks of the ring and the doorbell protocol under loom, which runs
//! every interleaving (and every weak-memory outcome it models) of a few
//! threads. Run with `RUSTFLAGS="--cfg loom" cargo test -p fieldhub-shm --release`
//! (`make test-shm`).
//!
//! - A torn read (a slot read not ordered after the write it reads) is a
//!   causality violation of loom's tracked cells: the model fails.
//! - A lost wake-up leaves the waiter asleep with nobody to wake it: loom
//!   reports the deadlock.
#![cfg(loom)]

use fieldhub_shm::bell::{Bell, LocalBell};
use fieldhub_shm::layout::SLOT_SIZE;
use fieldhub_shm::ring::{Consumer, LocalRing, Producer};
use loom::sync::Arc;
use loom::thread;

/// Explore every interleaving with up to three preemptions (more with
/// `LOOM_MAX_PREEMPTIONS`): the protocols' races need two, and the full
/// space of these models is too large to finish.
fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound.get_or_insert(3);
    builder.check(f);
}

fn message(tag: u8, len: usize) -> Vec<u8> {
    let mut m = (len as u32).to_le_bytes().to_vec();
    m.extend((0..len).map(|i| tag.wrapping_add(i as u8)));
    m
}

fn check(tag: u8, len: usize, body: &[u8]) {
    assert_eq!(body.len(), len);
    assert!(body.iter().enumerate().all(|(i, &b)| b == tag.wrapping_add(i as u8)), "torn message {tag}");
}

/// A producer thread pushes messages of `sizes` (waiting for room) while
/// this thread pops them: each arrives whole and in order.
fn send_and_receive<const N: usize>(local: Arc<LocalRing>, sizes: [usize; N]) {
    let producer = {
        let local = Arc::clone(&local);
        thread::spawn(move || {
            let mut producer = Producer::starting_at(0);
            for (tag, &len) in sizes.iter().enumerate() {
                while !producer.try_push(&local.ring(), &message(tag as u8, len)).unwrap() {
                    thread::yield_now();
                }
            }
        })
    };
    let mut consumer = Consumer::starting_at(0);
    let mut body = Vec::new();
    for (tag, &len) in sizes.iter().enumerate() {
        while !consumer.pop(&local.ring(), 4096, &mut body).unwrap() {
            thread::yield_now();
        }
        check(tag as u8, len, &body);
    }
    producer.join().unwrap();
}

/// Producer and consumer race over a two-slot ring with messages of one and
/// two slots (the second wraps): every message arrives whole and in order.
#[test]
fn ring_messages_are_never_read_half_written() {
    model(|| {
        let local = Arc::new(LocalRing::new(2));
        send_and_receive(local, [10usize, SLOT_SIZE + 20, 5]);
    });
}

/// The largest message a frame makes (spec/shm.md 6: one 2,048-byte CAN XL
/// record, 2092 bytes, 17 slots) waits for room behind a 20-slot message in
/// a 32-slot ring and then wraps: it arrives whole, after the first.
#[test]
fn a_seventeen_slot_message_waits_for_room_and_wraps_whole() {
    model(|| {
        let local = Arc::new(LocalRing::new(32));
        send_and_receive(local, [20 * SLOT_SIZE - 4, 17 * SLOT_SIZE - 4 - 84]);
    });
}

/// The waiter sleeps on the doorbell until a message is there; the producer
/// rings after each publish. No interleaving leaves the waiter asleep with a
/// message waiting (loom would report the deadlock).
#[test]
fn doorbell_never_loses_a_wake_up() {
    model(|| {
        let local = Arc::new(LocalRing::new(4));
        let bell = Arc::new(LocalBell::default());
        let producer = {
            let (local, bell) = (Arc::clone(&local), Arc::clone(&bell));
            thread::spawn(move || {
                let mut producer = Producer::starting_at(0);
                for tag in 0..2u8 {
                    assert!(producer.try_push(&local.ring(), &message(tag, 3)).unwrap());
                    bell.bell().ring();
                }
            })
        };
        let mut consumer = Consumer::starting_at(0);
        let mut body = Vec::new();
        for tag in 0..2u8 {
            let waiter: Bell<'_> = bell.bell();
            assert!(waiter.sleep_until(None, || consumer.has_message(&local.ring())));
            assert!(consumer.pop(&local.ring(), 4096, &mut body).unwrap());
            check(tag, 3, &body);
        }
        producer.join().unwrap();
    });
}

/// The hub's bus thread announces its sleep twice: in the bell segment (for
/// clients) and in private memory (for the hub's own threads, so a client
/// that clears the shared `armed` cannot hide the sleeper from them). Both
/// bells share the futex word. A ringer that looks only at the private
/// announcement still wakes the waiter sleeping on the shared bell.
#[test]
fn a_waiter_announced_in_private_memory_is_woken_through_the_shared_word() {
    use loom::sync::atomic::{AtomicBool, AtomicU32, Ordering};
    model(|| {
        // word, shared armed, private armed
        let words = Arc::new((AtomicU32::new(0), AtomicU32::new(0), AtomicU32::new(0)));
        let work = Arc::new(AtomicBool::new(false));
        let ringer = {
            let (words, work) = (Arc::clone(&words), Arc::clone(&work));
            thread::spawn(move || {
                work.store(true, Ordering::Relaxed);
                Bell::new(&words.0, &words.2).ring();
            })
        };
        let private = Bell::new(&words.0, &words.2);
        private.arm();
        let shared = Bell::new(&words.0, &words.1);
        assert!(shared.sleep_until(None, || work.load(Ordering::Relaxed)));
        private.disarm();
        ringer.join().unwrap();
    });
}

/// Two producers (two clients) share the hub's one doorbell, each with its
/// own ring; the hub sleeps until both messages are in. Only the ringer that
/// clears `armed` wakes, and still no wake-up is lost.
#[test]
fn one_doorbell_wakes_the_hub_for_every_client() {
    model(|| {
        let rings = Arc::new([LocalRing::new(2), LocalRing::new(2)]);
        let bell = Arc::new(LocalBell::default());
        let producers: Vec<_> = (0..2)
            .map(|i| {
                let (rings, bell) = (Arc::clone(&rings), Arc::clone(&bell));
                thread::spawn(move || {
                    assert!(Producer::starting_at(0).try_push(&rings[i].ring(), &message(i as u8, 2)).unwrap());
                    bell.bell().ring();
                })
            })
            .collect();
        let mut consumers = [Consumer::starting_at(0), Consumer::starting_at(0)];
        let mut body = Vec::new();
        let mut got = [false; 2];
        while got != [true; 2] {
            assert!(bell
                .bell()
                .sleep_until(None, || { (0..2).any(|i| !got[i] && consumers[i].has_message(&rings[i].ring())) }));
            for i in 0..2 {
                if !got[i] && consumers[i].pop(&rings[i].ring(), 4096, &mut body).unwrap() {
                    check(i as u8, 2, &body);
                    got[i] = true;
                }
            }
        }
        for p in producers {
            p.join().unwrap();
        }
    });
}

/// Two waiters share one doorbell (a client's reader thread and an
/// application thread in `recv`): one withdrawing its announcement must not
/// hide the other, so one ring after one publish wakes both.
#[test]
fn a_doorbell_with_two_waiters_wakes_both() {
    model(|| {
        let ring = Arc::new(LocalRing::new(2));
        let bell = Arc::new(LocalBell::default());
        let waiters: Vec<_> = (0..2)
            .map(|_| {
                let (ring, bell) = (Arc::clone(&ring), Arc::clone(&bell));
                thread::spawn(move || {
                    let consumer = Consumer::starting_at(0);
                    assert!(bell.bell().sleep_until(None, || consumer.has_message(&ring.ring())));
                })
            })
            .collect();
        assert!(Producer::starting_at(0).try_push(&ring.ring(), &message(7, 2)).unwrap());
        bell.bell().ring();
        for w in waiters {
            w.join().unwrap();
        }
    });
}
