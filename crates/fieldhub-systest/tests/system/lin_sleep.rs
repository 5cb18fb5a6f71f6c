//! LIN sleep and wake-up through a real hub process in virtual time: the
//! control API puts the channel to sleep, a Rust slave's response to the
//! sleeping bus is refused with the reason, its wake-up pulse wakes the bus,
//! and a reader sees the go-to-sleep command, the pulse and the schedule
//! resuming at its first slot 100 ms after the pulse — each at its exact
//! end-of-frame time — and hears `CHANNEL_STATE` asleep, then awake.

use std::thread;
use std::time::Duration;

use fieldhub_client::{ChannelCondition, Client, ClientOptions, Frame};
use fieldhub_proto::lin::{Checksum, GO_TO_SLEEP};
use fieldhub_proto::FrameFlags;
use fieldhub_testkit::*;

use crate::FIELDHUB;

const MS: u64 = 1_000_000;
/// At 19.2 kbit/s: a header alone (34 bits), a 2-byte frame (64), the
/// go-to-sleep command (124), a wake-up pulse (5).
const HEADER_NS: u64 = 1_770_833;
const TWO_BYTES_NS: u64 = 3_333_333;
const SLEEP_NS: u64 = 6_458_333;
const PULSE_NS: u64 = 260_416;

const CONFIG: &str = r#"
[hub]
time = "virtual"
time_participants = ["door"]

[[channel]]
name = "body"
protocol = "lin"
bitrate = 19200
timing = "timed"

[channel.lin]
schedule = [{ id = 0x10, delay_ms = 10 }, { id = 0x11, delay_ms = 10 }]
"#;

fn lin_state(hub: &HubProcess) -> (String, u64, u64) {
    let channels = ok(hub, "GET", "/api/v1/channels", None);
    let body = channels.as_array().unwrap().iter().find(|c| c["name"] == "body").unwrap().clone();
    let count = |key: &str| body[key].as_u64().unwrap();
    (body["lin_state"].as_str().unwrap().to_owned(), count("sleeps"), count("wake_ups"))
}

#[test]
fn a_slave_wakes_the_sleeping_lin_bus_and_a_reader_sees_the_schedule_resume_100_ms_after_its_pulse() {
    let hub = FIELDHUB.start_with(Some(CONFIG), &[]);
    // The reader's port starts the schedule at bus time 0.
    let reader = hub.client("reader");
    reader.open_port("body").unwrap();
    // Asked at 0 ms: the command takes the next slot boundary, 10 ms.
    let asked = ok(&hub, "POST", "/api/v1/channels/body/lin/sleep", None);
    assert_eq!(asked["lin_state"], "awake", "the command has not gone out yet");
    let options = ClientOptions { name: "door".into(), synchronized: true, ..Default::default() };
    let door = Client::connect_with(&hub.url, &options).unwrap();
    // `step` runs bus time until the time it is given.
    let slave = thread::spawn(move || {
        let port = door.open_port("body").unwrap();
        door.step(500 * MS).unwrap();
        door.send(&port, &Frame::lin(0x10, Checksum::Enhanced, &[1, 2]).unwrap()).unwrap();
        let refused = door.flush().err().map(|e| e.to_string());
        door.step(1_000 * MS).unwrap();
        // At 1 s: the pulse; at 1.05 s, while the master wakes, a response.
        door.send(&port, &Frame::lin_wake_up()).unwrap();
        door.step(1_050 * MS).unwrap();
        door.send(&port, &Frame::lin(0x10, Checksum::Enhanced, &[1, 2]).unwrap()).unwrap();
        door.step(1_125 * MS).unwrap();
        (refused, door.flush().err().map(|e| e.to_string()))
    });
    let (refused, later) = slave.join().expect("slave thread");
    let refused = refused.expect("a response to a sleeping bus is refused");
    assert!(refused.contains("publishes a response while the channel is asleep"), "{refused}");
    assert_eq!(later, None, "the wake-up and the response after it were taken");
    let mut seen = Vec::new();
    while seen.len() < 6 {
        let rx = reader.recv(Some(Duration::from_secs(10))).unwrap().expect("every frame reaches the reader");
        let flags = rx.frame.flags() & (FrameFlags::LIN_NO_RESPONSE | FrameFlags::LIN_WAKE_UP);
        seen.push((rx.frame.id(), rx.frame.data().to_vec(), flags, rx.meta.timestamp_ns));
    }
    let woke = 1_000 * MS + PULSE_NS;
    let resumed = woke + 100 * MS;
    let none = FrameFlags::LIN_NO_RESPONSE;
    let expected = vec![
        (0x10, vec![], none, HEADER_NS),
        (0x3C, GO_TO_SLEEP.to_vec(), FrameFlags::empty(), 10 * MS + SLEEP_NS),
        (0x00, vec![], FrameFlags::LIN_WAKE_UP, woke),
        (0x10, vec![1, 2], FrameFlags::empty(), resumed + TWO_BYTES_NS),
        (0x11, vec![], none, resumed + 10 * MS + HEADER_NS),
        (0x10, vec![], none, resumed + 20 * MS + HEADER_NS),
    ];
    assert_eq!(seen, expected);
    let told: Vec<Option<ChannelCondition>> = reader.channel_events().into_iter().map(|e| e.condition).collect();
    assert_eq!(told, [Some(ChannelCondition::Asleep), Some(ChannelCondition::Awake)]);
    assert_eq!(lin_state(&hub), ("awake".to_owned(), 1, 1));
    let (status, answer) = api(&hub, "POST", "/api/v1/channels/body/lin/wake", None);
    assert_eq!(status, 409, "{answer}");
    assert!(answer["error"].as_str().unwrap().contains("is awake"), "{answer}");
}
