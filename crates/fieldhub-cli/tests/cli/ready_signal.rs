//! `fieldhub hub --ready-file` / `--ready-fd`: a program that starts a hub
//! learns its addresses from one JSON line, whatever `FIELDHUB_LOG` hides.
//! (`HubProcess` in `common` starts every other test's hub with `--ready-fd`.)

use std::path::{Path, PathBuf};
use std::process::{Child, Output, Stdio};
use std::time::Instant;

use crate::FIELDHUB;
use fieldhub_client::{Client, Frame};
use fieldhub_testkit::*;

/// A directory of this test's own, removed at the end.
struct TempDir(PathBuf);

impl TempDir {
    fn new(what: &str) -> Self {
        let path = std::env::temp_dir().join(format!("fieldhub-{what}-{}", std::process::id()));
        std::fs::create_dir_all(&path).unwrap();
        Self(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A hub process that a failing assertion must not leave running.
struct Started {
    child: Child,
    shm_name: String,
}

impl Started {
    /// SIGTERM, then the exit status and everything the hub wrote to stderr.
    fn terminate(&mut self) -> (std::process::ExitStatus, String) {
        // SAFETY: kill(2) takes plain integers and signals our own child.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        let mut log = String::new();
        std::io::Read::read_to_string(&mut self.child.stderr.take().unwrap(), &mut log).unwrap();
        (self.child.wait().unwrap(), log)
    }
}

impl Drop for Started {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // A killed hub cannot remove its session socket.
        if let Ok(path) = fieldhub_shm::socket::socket_path(&self.shm_name) {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// The ready line in `path`, once the hub has written it.
fn wait_for_ready_file(path: &Path, hub: &mut Child) -> serde_json::Value {
    let deadline = Instant::now() + PATIENCE;
    loop {
        // The rename makes the file appear complete or not at all.
        if let Ok(text) = std::fs::read_to_string(path) {
            assert!(text.ends_with('\n') && text.lines().count() == 1, "one JSON line: {text:?}");
            return serde_json::from_str(&text).expect("the ready line is JSON");
        }
        assert!(hub.try_wait().unwrap().is_none(), "the hub exited before it was ready");
        assert!(Instant::now() < deadline, "no ready file at {} after {PATIENCE:?}", path.display());
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

fn client(url: &str) -> Client {
    Client::connect(url).unwrap_or_else(|e| panic!("connect to {url} from the ready line: {e}"))
}

#[test]
fn the_ready_file_names_every_address_and_each_works_with_the_log_at_warn() {
    let dir = TempDir::new("ready-file");
    let (ready_path, socket) = (dir.0.join("ready.json"), dir.0.join("hub.sock"));
    let shm_name = format!("test-ready-{}", std::process::id());
    let child = FIELDHUB
        .command()
        .args(["hub", "--listen", "127.0.0.1:0", "--listen", &format!("unix:{}", socket.display())])
        .args(["--shm", &shm_name, "--ready-file"])
        .arg(&ready_path)
        .env("FIELDHUB_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut hub = Started { child, shm_name };

    let ready = wait_for_ready_file(&ready_path, &mut hub.child);
    let tcp = ready["tcp"][0].as_str().expect("a TCP address");
    assert!(!tcp.ends_with(":0"), "the real port, not 0: {ready}");
    assert_eq!(ready["unix"], serde_json::json!([socket]));
    assert_eq!(ready["http"], format!("http://{tcp}"));
    assert_eq!(ready["shm"], format!("shm://{}", hub.shm_name));
    assert_eq!(ready["ivshmem"], serde_json::json!([]));
    assert_eq!(ready["channels"], serde_json::json!(["can0", "can1"]));
    assert_eq!(ready["pid"], hub.child.id());

    // A frame sent over TCP reaches clients on shared memory and the unix socket.
    let sender = client(&format!("tcp://{tcp}"));
    let over_shm = client(ready["shm"].as_str().unwrap());
    let over_unix = client(&format!("unix:{}", socket.display()));
    let tx = sender.open_port("can0").unwrap();
    let (shm_port, unix_port) = (over_shm.open_port("can0").unwrap(), over_unix.open_port("can0").unwrap());
    sender.send(&tx, &Frame::can(0x123, false, &[0xC0, 0xFF, 0xEE]).unwrap()).unwrap();
    for (receiver, port) in [(&over_shm, shm_port), (&over_unix, unix_port)] {
        let got = receiver.recv(Some(PATIENCE)).unwrap().expect("the frame arrives");
        assert_eq!((got.port, got.frame.id(), got.frame.data()), (port.handle, 0x123, &[0xC0, 0xFF, 0xEE][..]));
    }
    let stats = ureq::get(&format!("{}/api/v1/stats", ready["http"].as_str().unwrap())).call().unwrap();
    assert_eq!(stats.status(), 200);
    drop((sender, over_shm, over_unix));

    let (status, log) = hub.terminate();
    assert!(status.success(), "{status}: {log}");
    assert!(!log.contains("listening on"), "FIELDHUB_LOG=warn hides the start-up lines: {log}");
    assert!(!ready_path.exists(), "a stopped hub removes its ready file");
}

fn hub_with(args: &[&str]) -> Output {
    FIELDHUB.command().args(["hub", "--no-shm", "--listen", "127.0.0.1:0"]).args(args).output().unwrap()
}

#[test]
fn a_ready_fd_that_is_not_open_or_is_stdio_is_refused_naming_the_flag() {
    let out = hub_with(&["--ready-fd", "999"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("--ready-fd 999: no such open file descriptor"), "{stderr}");

    let out = hub_with(&["--ready-fd", "1"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("--ready-fd 1: standard input, output and error cannot carry the ready line"), "{stderr}");
}

#[test]
fn a_ready_file_that_cannot_be_written_stops_the_hub_naming_the_flag() {
    let dir = TempDir::new("ready-file-missing-dir");
    let path = dir.0.join("no-such-dir").join("ready.json");
    let out = hub_with(&["--ready-file", path.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains(&format!("--ready-file {}: cannot write the ready line", path.display())), "{stderr}");
}
