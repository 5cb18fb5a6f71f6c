//! A hub in virtual time in SIL Kit's synchronised time, with the real
//! `sil-kit-registry` and a real synchronised SIL Kit participant
//! (`tests/silkit/silkit_sync_peer.c`, 1 ms step): it and a fieldhub
//! participant stepping 1 ms each send a numbered frame every step, and two
//! runs of the scenario record byte-identical candump logs with every frame
//! of both, in order, at its bus time.
//!
//! Needs SIL Kit: `make test-silkit` fetches it, builds the peers and runs
//! this with `FIELDHUB_SILKIT_LIB`, `FIELDHUB_SILKIT_REGISTRY` and
//! `FIELDHUB_SILKIT_SYNC_PEER` set; a missing one fails the test.

use std::io::Read;
use std::process::{Command, Stdio};

use crate::FIELDHUB;
use fieldhub_client::{Client, ClientOptions, Frame, PortConfig};
use fieldhub_proto::text::parse_log_line;
use fieldhub_testkit::ok;
use fieldhub_testkit::silkit::{start_registry, Process, SilKit};
use serde_json::json;

const MS: u64 = 1_000_000;
/// Steps each side sends a frame in.
const STEPS: u32 = 200;
/// The SIL Kit peer's frames (silkit_sync_peer.c) and the fieldhub participant's.
const PEER_ID: u32 = 0x123;
const PEER_TAG: u8 = 0x5C;
const ECU_ID: u32 = 0x456;
const ECU_TAG: u8 = 0xF1;

/// One run: registry, hub (virtual time, synchronised bridge, recording),
/// the SIL Kit peer and the fieldhub participant; the recorded log and what
/// the peer printed of the frames it received.
fn run(silkit: &SilKit) -> (String, String) {
    let (_registry, uri) = start_registry(silkit, 0);
    let dir = std::env::temp_dir().join(format!(
        "fieldhub-silkit-time-{}-{}",
        std::process::id(),
        fieldhub_testkit::unique()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    // Bus time waits for both: the fieldhub participant and the bridge
    // (whose client name is `silkit-` and its participant name).
    let config = format!(
        "[hub]\ntime = \"virtual\"\ntime_participants = [\"ecu\", \"silkit-fieldhub-can0\"]\n\
         [[channel]]\nname = \"can0\"\ntiming = \"timed\"\nbitrate = 500000\n\
         [[silkit]]\nchannel = \"can0\"\nregistry = \"{uri}\"\nnetwork = \"CAN1\"\n\
         synchronized = true\nrequired_participants = [\"peer\"]\n"
    );
    let hub = FIELDHUB.start_with_env(
        Some(&config),
        &["--recordings-dir", dir.to_str().unwrap()],
        &[("FIELDHUB_SILKIT_LIB", &silkit.library)],
    );
    let recording = ok(&hub, "POST", "/api/v1/recordings", Some(json!({"path": "run.log"})));
    let mut peer = Process(
        Command::new(&silkit.peer)
            .args([&uri, "CAN1", "peer", &STEPS.to_string()])
            .env("LD_LIBRARY_PATH", std::path::Path::new(&silkit.library).parent().unwrap())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start silkit_sync_peer"),
    );
    let mut peer_out = peer.0.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = peer_out.read_to_string(&mut text);
        text
    });
    let options = ClientOptions { name: "ecu".into(), synchronized: true, ..Default::default() };
    let ecu = Client::connect_with(&hub.url, &options).expect("connect as a synchronised participant");
    let port = ecu.open_port_with("can0", &PortConfig { name: Some("ecu".into()), ..Default::default() }).unwrap();
    // Two steps past the last frame: the peer's last frame enters the bus
    // one step after it was sent, and is on it the step after.
    for k in 0..STEPS + 2 {
        if k < STEPS {
            let mut data = vec![ECU_TAG];
            data.extend_from_slice(&k.to_le_bytes());
            ecu.send(&port, &Frame::can(ECU_ID, false, &data).unwrap()).unwrap();
        }
        ecu.step(u64::from(k + 1) * MS).unwrap();
    }
    ok(&hub, "DELETE", &format!("/api/v1/recordings/{}", recording["id"]), None);
    let recorded = std::fs::read_to_string(dir.join("run.log")).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    // The bridge hands the window's frames over before it completes the
    // step, so by now the peer has printed them; killing it ends its output.
    drop(peer);
    (recorded, reader.join().unwrap())
}

/// The fieldhub participant's frames as the SIL Kit peer printed them
/// ("NOW TIMESTAMP ID HEXDATA"): (number, SIL Kit timestamp).
fn received_by_peer(printed: &str) -> Vec<(u32, u64)> {
    let tag = format!("{ECU_TAG:02X}");
    printed
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let [_, stamp, id, data] = fields[..] else { return None };
            if u32::from_str_radix(id, 16).ok()? != ECU_ID || !data.starts_with(&tag) {
                return None;
            }
            let bytes: Vec<u8> = (2..10).step_by(2).map(|i| u8::from_str_radix(&data[i..i + 2], 16).unwrap()).collect();
            Some((u32::from_le_bytes(bytes.try_into().unwrap()), stamp.parse().unwrap()))
        })
        .collect()
}

/// The numbered frames of `id` in `log`, in order, with their stamps.
fn numbered(log: &str, id: u32, tag: u8) -> Vec<(u32, u64)> {
    log.lines()
        .map(|line| parse_log_line(line).unwrap())
        .filter(|line| line.frame.id() == id && line.frame.data().first() == Some(&tag))
        .map(|line| (u32::from_le_bytes(line.frame.data()[1..5].try_into().unwrap()), line.timestamp_ns))
        .collect()
}

#[test]
fn a_synchronised_silkit_participant_and_a_fieldhub_participant_give_a_deterministic_trace() {
    let silkit = SilKit::from_env("FIELDHUB_SILKIT_SYNC_PEER");
    let (first, printed) = run(&silkit);
    let (second, _) = run(&silkit);
    assert_eq!(first, second, "two runs recorded different logs");
    // SIL Kit's side: frame k, on fieldhub's bus in the window [k, k + 1)
    // ms, reaches the peer in the bridge's step k, stamped k ms.
    let expected: Vec<(u32, u64)> = (0..STEPS).map(|k| (k, u64::from(k) * MS)).collect();
    assert_eq!(received_by_peer(&printed), expected, "{printed}");

    let ecu = numbered(&first, ECU_ID, ECU_TAG);
    let peer = numbered(&first, PEER_ID, PEER_TAG);
    assert_eq!(ecu.iter().map(|f| f.0).collect::<Vec<_>>(), (0..STEPS).collect::<Vec<_>>(), "{first}");
    assert_eq!(peer.iter().map(|f| f.0).collect::<Vec<_>>(), (0..STEPS).collect::<Vec<_>>(), "{first}");
    // Bus time: the fieldhub participant's frame k goes in the step it was
    // sent in (k ms); the SIL Kit participant's, sent at SIL Kit time k ms,
    // enters the bus when that step is over, at k + 1 ms. Each ends its bit
    // time later, within the step (and the peer's lower id goes first).
    for (k, stamp) in ecu {
        assert!((u64::from(k) * MS..u64::from(k + 1) * MS).contains(&stamp), "ecu frame {k} at {stamp} ns");
    }
    for (k, stamp) in peer {
        assert!((u64::from(k + 1) * MS..u64::from(k + 2) * MS).contains(&stamp), "peer frame {k} at {stamp} ns");
    }
}
