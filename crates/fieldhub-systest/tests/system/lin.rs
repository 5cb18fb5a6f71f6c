//! LIN channels through a real hub process in virtual time: two slave
//! clients publish responses, the hub runs the master's schedule table, and
//! an observer sees every frame at its exact end-of-frame time — and the
//! header nobody answered before a slave had published.

use std::thread;
use std::time::Duration;

use crate::FIELDHUB;
use fieldhub_client::{Client, ClientOptions, Frame};
use fieldhub_proto::lin::Checksum;
use fieldhub_proto::FrameFlags;
use fieldhub_testkit::*;

const MS: u64 = 1_000_000;

/// 0x10 (slave1) 10 ms, 0x11 (slave2) 10 ms, 0x20 (slave2) 15 ms.
const CONFIG: &str = r#"
[hub]
time = "virtual"
time_participants = ["slave1", "slave2"]

[[channel]]
name = "body"
protocol = "lin"
bitrate = 19200
timing = "timed"

[channel.lin]
schedule = [{ id = 0x10, delay_ms = 10 }, { id = 0x11, delay_ms = 10 }, { id = 0x20, delay_ms = 15 }]
"#;

fn response(id: u8, len: usize, n: u8) -> Frame {
    Frame::lin(id, Checksum::Enhanced, &[n; 8][..len]).unwrap()
}

#[test]
fn lin_schedule_in_virtual_time_carries_each_slaves_responses_at_exact_times_then_reports_no_response() {
    let hub = FIELDHUB.start_with(Some(CONFIG), &[]);
    let observer = hub.client("observer");
    observer.open_port("body").unwrap();
    let slaves: Vec<_> = [("slave1", vec![(0x10, 2)]), ("slave2", vec![(0x11, 4), (0x20, 8)])]
        .into_iter()
        .map(|(name, published)| {
            let options = ClientOptions { name: name.into(), synchronized: true, ..Default::default() };
            let client = Client::connect_with(&hub.url, &options).unwrap();
            thread::spawn(move || {
                let port = client.open_port("body").unwrap();
                for n in 0..3 {
                    for &(id, len) in &published {
                        client.send(&port, &response(id, len, n)).unwrap();
                    }
                }
                // Three 35 ms cycles, and the start of a fourth.
                client.step(110 * MS).unwrap();
            })
        })
        .collect();
    for slave in slaves {
        slave.join().expect("slave thread");
    }
    let mut seen = Vec::new();
    while seen.len() < 10 {
        let rx = observer.recv(Some(Duration::from_secs(10))).unwrap().expect("every frame reaches the observer");
        let no_response = rx.frame.flags().contains(FrameFlags::LIN_NO_RESPONSE);
        seen.push((rx.frame.id(), rx.frame.data().first().copied(), no_response, rx.meta.timestamp_ns));
    }
    // Nominal frames at 19.2 kbit/s: 64, 84 and 124 bits; a header 34. The
    // schedule started as the observer's port opened, before slave1 had
    // published: its first slot went unanswered, and each of its responses
    // goes one cycle later.
    let mut expected = vec![(0x10, None, true, 1_770_833)];
    for k in 0..3u8 {
        let start = u64::from(k) * 35 * MS;
        expected.push((0x11, Some(k), false, start + 10 * MS + 4_375_000));
        expected.push((0x20, Some(k), false, start + 20 * MS + 6_458_333));
        expected.push((0x10, Some(k), false, start + 35 * MS + 3_333_333));
    }
    assert_eq!(seen, expected);
    let channels = ok(&hub, "GET", "/api/v1/channels", None);
    let body = channels.as_array().unwrap().iter().find(|c| c["name"] == "body").unwrap().clone();
    // The fourth cycle's 0x11 and 0x20 slots (at 115 and 125 ms) have not come.
    assert_eq!((body["protocol"].as_str(), body["no_responses"].as_u64()), (Some("lin"), Some(1)));
}
