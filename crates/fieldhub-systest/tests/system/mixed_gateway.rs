//! One hub with a CAN, a LIN and a TDMA channel and a CAN↔LIN gateway both
//! ways (issue 38, "mixed"), through a real hub process in virtual time:
//! numbered CAN frames become the LIN responses of the gateway's slots,
//! numbered LIN responses become CAN frames at their end, TDMA frames keep
//! their slots beside them — each checked in order and at its exact time —
//! and a CAN frame of the wrong length is refused by the gateway and counted.

use std::thread;
use std::time::Duration;

use crate::FIELDHUB;
use fieldhub_client::{Client, ClientOptions, Frame, PortConfig};
use fieldhub_proto::bits::FrameBits;
use fieldhub_proto::lin::Checksum;
use fieldhub_proto::FrameFlags;
use fieldhub_testkit::*;

const MS: u64 = 1_000_000;
/// A 2-byte LIN frame at 19.2 kbit/s: 34 + 3 × 10 bits.
const LIN_2_BYTES_NS: u64 = 3_333_333;
/// Numbered values each way.
const VALUES: u8 = 5;

/// body: CAN 500 kbit/s; doors: LIN, 0x10 (the door's state) and 0x20 (the
/// BCM's lamp command, published by the gateway) in 10 ms slots; cell: TDMA,
/// ecu1 [0, 1 ms) and ecu2 [1 ms, 2 ms) of a 2 ms cycle.
const CONFIG: &str = r#"
[hub]
time = "virtual"
time_participants = ["bcm", "door", "ecu1", "ecu2"]

[[channel]]
name = "body"
timing = "timed"
bitrate = 500000

[[channel]]
name = "doors"
protocol = "lin"
bitrate = 19200
timing = "timed"

[channel.lin]
schedule = [{ id = 0x10, delay_ms = 10 }, { id = 0x20, delay_ms = 10 }]
frames = [
  { name = "DoorState", id = 0x10, length = 2, checksum = "enhanced", publishers = ["door"] },
  { name = "Lamp", id = 0x20, length = 2, checksum = "enhanced", publishers = ["BCM"] },
]

[[channel]]
name = "cell"
timing = "timed"
bitrate = 500000
arbitration = "tdma"

[channel.tdma]
cycle_us = 2000
slots = [{ port = "ecu1", length_us = 1000 }, { port = "ecu2", length_us = 1000 }]

[[gateway]]
from = "body"
to = "doors"
can_id = 0x120
lin_id = 0x20
node = "BCM"

[[gateway]]
from = "doors"
to = "body"
lin_id = 0x10
can_id = 0x310
"#;

fn can_ns(frame: &Frame) -> u64 {
    FrameBits::of(frame).duration_ns(500_000, 500_000)
}

fn named(name: &str) -> PortConfig {
    PortConfig { name: Some(name.into()), ..Default::default() }
}

/// `count` frames `observer` receives that are not LIN headers alone, as
/// (frame, end of frame).
fn observe(observer: &Client, count: usize) -> Vec<(Frame, u64)> {
    let mut seen = Vec::new();
    while seen.len() < count {
        let rx = observer.recv(Some(Duration::from_secs(10))).unwrap().expect("every frame reaches the observer");
        if !rx.frame.flags().contains(FrameFlags::LIN_NO_RESPONSE) {
            seen.push((rx.frame, rx.meta.timestamp_ns));
        }
    }
    seen
}

/// A participant that opens `port` on `channel`, sends `frames` in its
/// first step and steps to 120 ms.
fn participant(
    hub: &HubProcess,
    name: &str,
    channel: &'static str,
    port: &str,
    frames: Vec<Frame>,
) -> thread::JoinHandle<()> {
    let options = ClientOptions { name: name.into(), synchronized: true, ..Default::default() };
    let client = Client::connect_with(&hub.url, &options).unwrap();
    let port = named(port);
    thread::spawn(move || {
        let port = client.open_port_with(channel, &port).unwrap();
        for frame in &frames {
            client.send(&port, frame).unwrap();
        }
        client.flush().unwrap();
        client.step(120 * MS).unwrap();
    })
}

#[test]
fn a_can_lin_gateway_carries_numbered_values_both_ways_beside_a_tdma_channel_at_exact_times() {
    let hub = FIELDHUB.start_with(Some(CONFIG), &[]);
    // The LIN observer's port starts the schedule at bus time 0.
    let (lin_rx, can_rx, cell_rx) = (hub.client("lin-rx"), hub.client("can-rx"), hub.client("cell-rx"));
    lin_rx.open_port("doors").unwrap();
    can_rx.open_port("body").unwrap();
    cell_rx.open_port("cell").unwrap();
    let commands: Vec<Frame> = (0..VALUES).map(|k| Frame::can(0x120, false, &[k, 0xA0]).unwrap()).collect();
    // A sixth command of 3 bytes: the Lamp frame has 2.
    let wrong = Frame::can(0x120, false, &[9, 9, 9]).unwrap();
    let states: Vec<Frame> = (0..VALUES).map(|k| Frame::lin(0x10, Checksum::Enhanced, &[k, 0xD0]).unwrap()).collect();
    let cell = |ecu: u32| (0..4).map(|n| Frame::can(0x100 * ecu, false, &[n; 8]).unwrap()).collect();
    let mut bcm_frames = commands.clone();
    bcm_frames.push(wrong);
    let runs = [
        participant(&hub, "bcm", "body", "bcm", bcm_frames.clone()),
        participant(&hub, "door", "doors", "door", states),
        participant(&hub, "ecu1", "cell", "ecu1", cell(1)),
        participant(&hub, "ecu2", "cell", "ecu2", cell(2)),
    ];
    for run in runs {
        run.join().expect("participant thread");
    }

    // LIN: the gateway's responses in the 0x20 slots at 10, 30, 50, 70 and
    // 90 ms; the door's in the 0x10 slots from 20 ms (the one at 0 came
    // before it had published). Each ends 64 bits after its slot's start.
    let mut expected_lin = Vec::new();
    for k in 0..VALUES {
        let cycle = u64::from(k) * 20 * MS;
        let lamp = Frame::lin(0x20, Checksum::Enhanced, &[k, 0xA0]).unwrap();
        expected_lin.push((lamp, cycle + 10 * MS + LIN_2_BYTES_NS));
        let state = Frame::lin(0x10, Checksum::Enhanced, &[k, 0xD0]).unwrap();
        expected_lin.push((state, cycle + 20 * MS + LIN_2_BYTES_NS));
    }
    assert_eq!(observe(&lin_rx, expected_lin.len()), expected_lin);

    // CAN: the BCM's six frames back to back from 0, then each door state
    // as 0x310, from its response's end on the idle bus.
    let mut expected_can = Vec::new();
    let mut end = 0;
    for frame in &bcm_frames {
        end += can_ns(frame);
        expected_can.push((frame.clone(), end));
    }
    for k in 0..VALUES {
        let mapped = Frame::can(0x310, false, &[k, 0xD0]).unwrap();
        let response_end = u64::from(k) * 20 * MS + 20 * MS + LIN_2_BYTES_NS;
        let mapped_end = response_end + can_ns(&mapped);
        expected_can.push((mapped, mapped_end));
    }
    assert_eq!(observe(&can_rx, expected_can.len()), expected_can);

    // TDMA: ecu1's frames at the start of each 2 ms cycle, ecu2's 1 ms on.
    let expected_cell: Vec<(u32, u64)> =
        (0..4).flat_map(|k| [(0x100, 2 * k * MS), (0x200, (2 * k + 1) * MS)]).collect();
    let cell_seen: Vec<(u32, u64)> =
        observe(&cell_rx, 8).iter().map(|(frame, end)| (frame.id(), end - can_ns(frame))).collect();
    assert_eq!(cell_seen, expected_cell);

    let gateways = ok(&hub, "GET", "/api/v1/gateways", None);
    let (into_lin, into_can) = (&gateways[0], &gateways[1]);
    assert_eq!((into_lin["carried"].as_u64(), into_lin["refused"]["length"].as_u64()), (Some(5), Some(1)));
    assert_eq!(into_lin["last_refused"].as_str(), Some("CAN frame 0x120 has 3 data bytes; LIN frame 0x20 has 2"));
    assert_eq!((into_can["carried"].as_u64(), into_can["direction"].as_str()), (Some(5), Some("lin-to-can")));
}
