//! Hostile use of the hub's own recordings (issue 34, attacks 4 and 9): a
//! disk whose writes never finish costs only the recording written to it —
//! the bus, the control API and a numbered pair on another channel carry on,
//! and the recording says it is still `stopping` — and a hard link that
//! another local user puts into the recordings directory is neither
//! truncated nor downloaded.
//!
//! The stuck disk is real: `strace`, attached to the hub, holds every
//! write(2) to the recording's file for ten minutes (its fault injection,
//! as a slow device would), until the test releases it by killing strace.

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use super::attacker::{nobody_command, Pair};
use crate::FIELDHUB;
use fieldhub_testkit::*;
use serde_json::{json, Value};

/// The pair's frames: identifier and sender tag.
const PAIR_ID: u32 = 0x77;
const PAIR_TAG: u8 = 9;

/// A test directory, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(test: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("fieldhub-hostile-rec-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("rec")).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        Self(dir.canonicalize().unwrap())
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `strace` attached to a hub, holding every write(2) to one file for ten
/// minutes; killed when dropped, which releases the held writes.
struct StuckDisk(Child);

impl StuckDisk {
    fn under(hub: &HubProcess, file: &Path) -> Self {
        let mut strace = Command::new("strace")
            .args(["-f", "-o", "/dev/null", "-e", "trace=write,writev,pwrite64", "-P"])
            .arg(file)
            .args(["-e", "inject=write,writev,pwrite64:delay_enter=600000000", "-p"])
            .arg(hub.pid().to_string())
            .stderr(Stdio::piped())
            .spawn()
            .expect("strace (make deps installs it) runs");
        // strace says each thread it attaches to; it is read to the end, as
        // strace dies of a closed pipe (and lets go of the hub).
        let said = BufReader::new(strace.stderr.take().unwrap());
        let (attached, heard) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in said.lines().map_while(Result::ok) {
                let _ = attached.send(line);
            }
        });
        let first = heard.recv_timeout(PATIENCE).expect("strace says what it does");
        assert!(first.contains("attached"), "strace could not attach to the hub: {first}");
        Self(strace)
    }
}

impl Drop for StuckDisk {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn recording(hub: &HubProcess, id: &Value) -> Value {
    let listed = ok(hub, "GET", "/api/v1/recordings", None);
    listed.as_array().unwrap().iter().find(|r| r["id"] == *id).cloned().expect("the recording is listed")
}

fn as_nobody(program: &str, args: &[&Path]) -> std::process::Output {
    nobody_command(program).args(args).output().expect("setpriv (util-linux) runs")
}

#[test]
fn a_stuck_disk_costs_only_its_recording_while_the_bus_and_the_api_carry_on() {
    let scratch = Scratch::new("stuck");
    let rec = scratch.0.join("rec");
    let file = rec.join("stuck.log");
    let hub = FIELDHUB.start_with(None, &["--recordings-dir", rec.to_str().unwrap()]);
    let stuck = StuckDisk::under(&hub, &file);
    let pair = Pair::start(hub.client("pair-sender"), hub.client("pair-receiver"), "can1", PAIR_ID, PAIR_TAG);
    let started = ok(&hub, "POST", "/api/v1/recordings", Some(json!({"path": "stuck.log", "channels": ["can0"]})));
    let recorded = hub.client("recorded");
    let port = recorded.open_port("can0").unwrap();
    for n in 0..3 {
        recorded.send(&port, &numbered(0x123, 1, n)).unwrap();
    }
    assert_eq!(flush_all(&recorded), 0);
    // Every write to the file now hangs, so the file cannot be finished:
    // stopping answers at once that it is stopping, without the bus waiting.
    let (status, stopping) = api(&hub, "DELETE", &format!("/api/v1/recordings/{}", started["id"]), None);
    assert_eq!((status, stopping["state"].as_str()), (202, Some("stopping")), "{stopping}");
    pair.wait_for_more(1000);
    recorded.send(&port, &numbered(0x123, 1, 3)).unwrap();
    assert_eq!(flush_all(&recorded), 0, "the recorded channel carries on too");
    assert_eq!(recording(&hub, &started["id"])["state"], "stopping", "the write is still held");
    ok(&hub, "GET", "/api/v1/stats", None);

    // Release the disk (strace gone, the held write completes): the
    // recording ends with the frames it was given.
    drop(stuck);
    let done = wait_for(deadline(), "the recording to finish", || {
        Some(recording(&hub, &started["id"])).filter(|r| r["state"] != "stopping")
    });
    assert_eq!(
        (done["state"].as_str(), done["frames"].as_u64(), done["dropped"].as_u64()),
        (Some("stopped"), Some(3), Some(0)),
        "{done}"
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap().lines().count(), 3);
    let (sent, worst) = pair.finish();
    eprintln!("the pair on can1: {sent} frames, none lost, worst latency {worst:?} while the disk was stuck");
}

#[test]
fn a_hard_link_in_the_recordings_directory_is_neither_truncated_nor_downloaded() {
    let scratch = Scratch::new("hardlink");
    let rec = scratch.0.join("rec");
    std::fs::set_permissions(&rec, std::fs::Permissions::from_mode(0o777)).unwrap();
    // fs.protected_hardlinks lets `nobody` link only what it may read and
    // write; the hub must refuse any link, whoever made it.
    let victim = scratch.0.join("victim.txt");
    std::fs::write(&victim, "eighteen bytes ok\n").unwrap();
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o666)).unwrap();
    let hub = FIELDHUB.start_with(None, &["--recordings-dir", rec.to_str().unwrap()]);
    let pair = Pair::start(hub.client("pair-sender"), hub.client("pair-receiver"), "can1", PAIR_ID, PAIR_TAG);
    let link = rec.join("evil.log");
    let linked = as_nobody("ln", &[&victim, &link]);
    assert!(linked.status.success(), "nobody links: {}", String::from_utf8_lossy(&linked.stderr));

    let (status, refused) = api(&hub, "POST", "/api/v1/recordings", Some(json!({"path": "evil.log"})));
    assert_eq!(status, 400, "{refused}");
    assert!(refused["error"].as_str().unwrap().contains("2 hard links"), "{refused}");
    let (status, refused) = api(&hub, "GET", "/api/v1/recording-file?path=evil.log", None);
    assert_eq!(status, 400, "{refused}");
    assert!(refused["error"].as_str().unwrap().contains("hard links"), "{refused}");
    pair.wait_for_more(100);
    assert_eq!(std::fs::read(&victim).unwrap(), b"eighteen bytes ok\n", "the file outside kept its bytes");
    let (sent, _) = pair.finish();
    assert!(sent >= 100);
}
