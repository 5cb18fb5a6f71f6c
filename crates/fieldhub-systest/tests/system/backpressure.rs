//! A sender ahead of a busy bus is held back after a bounded number of
//! frames, whatever its transport: over TCP no more than over shared memory
//! (a few times at most), and either way within a fixed bound — the hub
//! does not soak up a fast sender's frames into socket and queue buffers.
//!
//! The bus is a `timed` channel slow enough (50 bit/s: about 2 s a frame)
//! that a sender that is held back stays refused for a whole second: that is
//! how the test tells "held back" from a momentary full queue.

use std::time::{Duration, Instant};

use crate::FIELDHUB;
use fieldhub_client::{Client, ClientError, Port};
use fieldhub_testkit::*;

const CONFIG: &str = r#"
[[channel]]
name = "slow0"
bitrate = 50
timing = "timed"

[[channel]]
name = "slow1"
bitrate = 50
timing = "timed"
"#;

/// Most frames a shared-memory sender may get accepted ahead of a bus that
/// cannot take them: transmit credit (256 frames in the bus) plus the
/// to-hub ring (4,096 slots, a frame each) = 4,352, with room to spare.
const HELD_BACK_BOUND: u32 = 8_192;
/// Most frames a TCP sender may get accepted: the same credit, and the
/// bounded buffers between the two — the client's send queue (1,024 frames)
/// and the batch its writer holds (64 KiB), the client's socket send buffer
/// (16 KiB, doubled by the kernel), the hub's socket receive buffer
/// (64 KiB, doubled) and what the reactor reads ahead (64 KiB) — about
/// 8,700 8-byte frames of 40 bytes; the kernel's accounting of segments lets
/// it reach ~9,300. Bounded and fixed, unlike a queue that grows with the
/// sender.
const TCP_HELD_BACK_BOUND: u32 = 12_288;
/// How much more a TCP sender may get accepted than an shm sender.
const TCP_OVER_SHM: u32 = 3;

/// Frames `client` gets accepted with `send_timeout(…, 0)` before it has
/// been refused without a break for a whole second.
fn accepted_until_held_back(client: &Client, port: &Port) -> u32 {
    let started = Instant::now();
    let mut accepted = 0u32;
    let mut refused_since: Option<Instant> = None;
    loop {
        match client.send_timeout(port, &numbered(0x10, 1, accepted), Some(Duration::ZERO)) {
            Ok(()) => {
                accepted += 1;
                refused_since = None;
            }
            Err(ClientError::SendQueueFull(_)) => {
                if refused_since.get_or_insert_with(Instant::now).elapsed() >= Duration::from_secs(1) {
                    return accepted;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) => panic!("send: {e}"),
        }
        assert!(started.elapsed() < PATIENCE, "still accepting frames after {accepted}: never held back");
    }
}

fn shm_accepted(hub: &HubProcess) -> u32 {
    let client = hub.shm_client("shm-sender");
    let port = client.open_port("slow1").unwrap();
    accepted_until_held_back(&client, &port)
}

#[test]
fn an_shm_sender_ahead_of_a_busy_bus_is_held_back_within_credit_and_ring() {
    let hub = FIELDHUB.start_shm_with(Some(CONFIG), &[]);
    let shm = shm_accepted(&hub);
    eprintln!("shm sender: {shm} frames accepted before it was held back");
    assert!(shm <= HELD_BACK_BOUND, "an shm sender got {shm} frames accepted; the bound is {HELD_BACK_BOUND}");
}

#[test]
fn a_tcp_sender_ahead_of_a_busy_bus_is_held_back_like_an_shm_sender() {
    let hub = FIELDHUB.start_shm_with(Some(CONFIG), &[]);
    let tcp = {
        let client = hub.client("tcp-sender");
        let port = client.open_port("slow0").unwrap();
        accepted_until_held_back(&client, &port)
    };
    let shm = shm_accepted(&hub);
    eprintln!("frames accepted before the sender was held back: TCP {tcp}, shm {shm}");
    assert!(
        tcp <= shm * TCP_OVER_SHM,
        "a TCP sender got {tcp} frames accepted ahead of the bus, an shm sender {shm}: TCP may have at most \
         {TCP_OVER_SHM} times as many"
    );
    assert!(tcp <= TCP_HELD_BACK_BOUND, "a TCP sender got {tcp} frames accepted; the bound is {TCP_HELD_BACK_BOUND}");
}
