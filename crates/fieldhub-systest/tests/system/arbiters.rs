//! Access rules through real hub processes: `tdma`, `token` and
//! `master-slave` channels carry real clients' frames in the rule's order and at its times, on the
//! wall clock (`timed`) and in virtual time, where two runs of one scenario
//! give byte-identical candump logs.

use std::thread;
use std::time::Duration;

use crate::FIELDHUB;
use fieldhub_client::{Client, ClientOptions, Frame, PortConfig};
use fieldhub_proto::bits::FrameBits;
use fieldhub_proto::text::format_log_line;
use fieldhub_testkit::HubProcess;

const MS: u64 = 1_000_000;
const BITRATE: u32 = 500_000;

const TDMA: &str = r#"
arbitration = "tdma"
[channel.tdma]
cycle_us = 2000
slots = [{ port = "ecu1", length_us = 1000 }, { port = "ecu2", length_us = 1000 }]
"#;

const TOKEN: &str = r#"
arbitration = "token"
[channel.token]
order = ["ecu1", "ecu2"]
hold_us = 1000
max_frames = 2
"#;

/// ecu1 is the master; it polls ecu2, then a slave that never answers.
const MASTER_SLAVE: &str = r#"
arbitration = "master-slave"
[channel.master_slave]
master = "ecu1"
poll = ["ecu2", "silent"]
response_timeout_us = 100
"#;

fn named(name: &str) -> PortConfig {
    PortConfig { name: Some(name.into()), ..Default::default() }
}

/// The frame `ecu` (1 or 2) sends `n`-th.
fn frame(ecu: u32, n: u8) -> Frame {
    Frame::can(0x100 * ecu, false, &[n; 8]).unwrap()
}

/// The observer's frames as (identifier, start of frame, end of frame) and
/// as a candump log.
fn observe(observer: &Client, count: usize) -> (Vec<(u32, u64, u64)>, String) {
    let (mut starts, mut log) = (Vec::new(), String::new());
    while starts.len() < count {
        let rx = observer.recv(Some(Duration::from_secs(10))).unwrap().expect("every frame reaches the observer");
        let duration = FrameBits::of(&rx.frame).duration_ns(BITRATE, BITRATE);
        starts.push((rx.frame.id(), rx.meta.timestamp_ns - duration, rx.meta.timestamp_ns));
        log.push_str(&format_log_line(rx.meta.timestamp_ns, "bus", &rx.frame));
        log.push('\n');
    }
    (starts, log)
}

fn hub(rule: &str, virtual_time: bool) -> HubProcess {
    let time = if virtual_time { "[hub]\ntime = \"virtual\"\ntime_participants = [\"ecu1\", \"ecu2\"]\n" } else { "" };
    let config = format!("{time}[[channel]]\nname = \"bus\"\ntiming = \"timed\"\nbitrate = {BITRATE}\n{rule}");
    FIELDHUB.start_with(Some(&config), &[])
}

/// ecu1 and ecu2, synchronised participants, each send four frames in their
/// first step and step to 10 ms; returns the first `count` frames an
/// observer saw.
fn virtual_run(rule: &str, count: usize) -> (Vec<(u32, u64, u64)>, String) {
    let hub = hub(rule, true);
    let observer = hub.client("observer");
    observer.open_port("bus").unwrap();
    let ecus: Vec<_> = (1..=2u32)
        .map(|ecu| {
            let name = format!("ecu{ecu}");
            let options = ClientOptions { name: name.clone(), synchronized: true, ..Default::default() };
            let client = Client::connect_with(&hub.url, &options).unwrap();
            thread::spawn(move || {
                let port = client.open_port_with("bus", &named(&name)).unwrap();
                for n in 0..4 {
                    client.send(&port, &frame(ecu, n)).unwrap();
                }
                client.step(10 * MS).unwrap();
            })
        })
        .collect();
    for ecu in ecus {
        ecu.join().expect("ECU thread");
    }
    observe(&observer, count)
}

#[test]
fn tdma_in_virtual_time_puts_frames_at_their_slot_starts_the_same_on_every_run() {
    let (frames, log) = virtual_run(TDMA, 8);
    // ecu1 owns [0, 1 ms) of every 2 ms cycle, ecu2 [1 ms, 2 ms).
    let expected: Vec<(u32, u64)> = (0..4).flat_map(|k| [(0x100, 2 * k * MS), (0x200, (2 * k + 1) * MS)]).collect();
    let starts: Vec<(u32, u64)> = frames.iter().map(|&(id, start, _)| (id, start)).collect();
    assert_eq!(starts, expected);
    assert_eq!(virtual_run(TDMA, 8).1, log, "a second run logs the same bytes");
}

#[test]
fn token_in_virtual_time_gives_each_port_two_frames_a_visit_the_same_on_every_run() {
    let (frames, log) = virtual_run(TOKEN, 8);
    let ids: Vec<u32> = frames.iter().map(|&(id, _, _)| id).collect();
    assert_eq!(ids, [0x100, 0x100, 0x200, 0x200, 0x100, 0x100, 0x200, 0x200]);
    // Back to back from bus time 0: each frame starts where the one before ended.
    let mut at = 0;
    for (n, &(id, start, end)) in frames.iter().enumerate() {
        assert_eq!(start, at, "frame {n} (0x{id:X})");
        at = end;
    }
    assert_eq!(virtual_run(TOKEN, 8).1, log, "a second run logs the same bytes");
}

#[test]
fn master_slave_in_virtual_time_answers_each_poll_at_once_and_waits_out_a_silent_slave_the_same_on_every_run() {
    let (frames, log) = virtual_run(MASTER_SLAVE, 6);
    // Poll ecu2, its answer, poll silent (no answer: 100 µs idle), and again;
    // ecu2's last two frames wait for polls that never come.
    let ids: Vec<u32> = frames.iter().map(|&(id, _, _)| id).collect();
    assert_eq!(ids, [0x100, 0x200, 0x100, 0x100, 0x200, 0x100]);
    let mut at = 0;
    for (n, &(id, start, end)) in frames.iter().enumerate() {
        let after_silent_poll = if n == 3 { 100_000 } else { 0 };
        assert_eq!(start, at + after_silent_poll, "frame {n} (0x{id:X})");
        at = end;
    }
    assert_eq!(virtual_run(MASTER_SLAVE, 6).1, log, "a second run logs the same bytes");
}

#[test]
fn tdma_on_the_wall_clock_sends_each_port_in_its_slot_once_a_cycle() {
    let hub = hub(TDMA, false);
    let observer = hub.client("observer");
    observer.open_port("bus").unwrap();
    let senders: Vec<(Client, _)> = (1..=2u32)
        .map(|ecu| {
            let client = hub.client(&format!("ecu{ecu}"));
            let port = client.open_port_with("bus", &named(&format!("ecu{ecu}"))).unwrap();
            (client, port)
        })
        .collect();
    for (ecu, (client, port)) in (1..=2u32).zip(&senders) {
        for n in 0..4 {
            client.send(port, &frame(ecu, n)).unwrap();
        }
    }
    for (client, _) in &senders {
        client.flush().unwrap();
    }
    let (frames, _) = observe(&observer, 8);
    for ecu in 1..=2u64 {
        let mine: Vec<(u64, u64)> =
            frames.iter().filter(|&&(id, _, _)| u64::from(id) == 0x100 * ecu).map(|&(_, s, e)| (s, e)).collect();
        // The slot is [slot, slot + 1 ms) of every 2 ms cycle of bus time.
        let slot = (ecu - 1) * MS;
        let inside = |&(start, end): &(u64, u64)| {
            let cycle = start - start % (2 * MS);
            start >= cycle + slot && end <= cycle + slot + MS
        };
        assert!(mine.iter().all(inside), "ecu{ecu}'s frames are inside its slot: {mine:?}");
        // A slot carries one frame a cycle: later frames wait for later cycles.
        assert!(mine.windows(2).all(|w| w[1].0 / (2 * MS) > w[0].0 / (2 * MS)), "one frame a cycle: {mine:?}");
    }
}

#[test]
fn token_on_the_wall_clock_refuses_a_port_off_the_ring_and_carries_the_others() {
    let hub = hub(TOKEN, false);
    let observer = hub.client("observer");
    observer.open_port("bus").unwrap();
    let outsider = hub.client("outsider");
    let port = outsider.open_port_with("bus", &named("ecu9")).unwrap();
    outsider.send(&port, &frame(7, 0)).unwrap();
    let error = outsider
        .flush()
        .err()
        .or_else(|| outsider.recv(Some(Duration::from_secs(5))).err())
        .expect("the hub refuses the frame")
        .to_string();
    assert!(error.contains("not on this channel's token ring (ecu1, ecu2)"), "{error}");
    let ecu1 = hub.client("ecu1");
    let port = ecu1.open_port_with("bus", &named("ecu1")).unwrap();
    for n in 0..3 {
        ecu1.send(&port, &frame(1, n)).unwrap();
    }
    ecu1.flush().unwrap();
    let (frames, _) = observe(&observer, 3);
    assert!(frames.iter().all(|&(id, _, _)| id == 0x100), "{frames:?}");
}
