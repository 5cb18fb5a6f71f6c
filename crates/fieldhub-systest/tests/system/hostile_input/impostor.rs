//! Another local user listens where root's client looks for a hub (issue
//! 34, attack 7): `nobody` (through `setpriv`) takes a free loopback port,
//! or a unix socket path root's client is pointed to, with the hub's
//! token in its environment. The client checks who listens before it sends
//! anything: the impostor receives not one byte, and the client's error
//! names it and the override. With the override naming that user the
//! client does talk — the check, not chance, kept the bytes back. A
//! numbered pair of root's clients on the real hub loses nothing
//! throughout. A `shm://` session socket in root's own private directory
//! served by `nobody`'s process (bound by root, listened on after dropping
//! to `nobody`: only `SO_PEERCRED` tells) is refused the same way.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use super::attacker::{nobody_command, Pair, NOBODY};
use crate::FIELDHUB;
use fieldhub_testkit::federation::free_port;
use fieldhub_testkit::*;

/// The pair's frames: identifier and sender tag.
const PAIR_ID: u32 = 0x3B;
const PAIR_TAG: u8 = 7;

/// A listener that accepts connections and prints, for each, how many
/// bytes arrived before the client closed or 3 s passed (`received N`).
/// `shm`: started as root, it binds in root's private directory, then
/// becomes `nobody` before it listens.
const IMPOSTOR: &str = r#"
import os, socket, sys
if sys.argv[1] == "tcp":
    s = socket.socket()
    s.bind(("127.0.0.1", int(sys.argv[2])))
else:
    s = socket.socket(socket.AF_UNIX)
    s.bind(sys.argv[2])
if sys.argv[1] == "shm":
    os.setgroups([])
    os.setgid(65534)
    os.setuid(65534)
s.listen(8)
print("listening", flush=True)
while True:
    c, _ = s.accept()
    c.settimeout(3)
    try:
        got = c.recv(4096)
    except socket.timeout:
        got = b""
    print("received", len(got), flush=True)
    c.close()
"#;

/// `nobody`'s listener at `where_` (`tcp` port or `unix` path), once it listens.
struct Impostor {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Impostor {
    fn listen(dir: &Path, kind: &str, at: &str) -> Self {
        use std::io::BufRead;
        let script = dir.join("impostor.py");
        std::fs::write(&script, IMPOSTOR).unwrap();
        let mut command = match kind {
            "shm" => std::process::Command::new("/usr/bin/python3"),
            _ => nobody_command("/usr/bin/python3"),
        };
        let mut child = command
            .args([script.to_str().unwrap(), kind, at])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("python3 (make deps) runs as nobody");
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let impostor = Self { child, lines };
        assert_eq!(impostor.line(), "listening");
        impostor
    }

    fn line(&self) -> String {
        self.lines.recv_timeout(PATIENCE).expect("the impostor goes on")
    }
}

impl Drop for Impostor {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `fieldhub send` to `url` as root, with the hub's token in the
/// environment: (succeeded, stderr).
fn send_with_token(url: &str, hub_user: Option<&str>) -> (bool, String) {
    let mut command = FIELDHUB.command();
    command.args(["send", "--hub", url, "can1", "123#01"]).env("FIELDHUB_TOKEN", "root-secret");
    match hub_user {
        Some(user) => command.env(fieldhub_client::HUB_USER_VAR, user),
        None => command.env_remove(fieldhub_client::HUB_USER_VAR),
    };
    let out = command.output().unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// A directory `nobody` may make its socket in (and read the script from).
fn nobodys_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::chown(dir.path(), Some(NOBODY), Some(NOBODY)).unwrap();
    dir
}

#[test]
fn another_users_listener_on_a_loopback_port_or_a_unix_socket_gets_no_byte_and_the_client_names_it() {
    let hub = FIELDHUB.start();
    let pair = Pair::start(hub.client("pair-sender"), hub.client("pair-receiver"), "can0", PAIR_ID, PAIR_TAG);
    let dir = nobodys_dir();
    let port = free_port().to_string();
    let socket = dir.path().join("fieldhub.sock");
    let targets = [("tcp", port.clone(), format!("tcp://127.0.0.1:{port}")), {
        let path = socket.to_str().unwrap().to_owned();
        ("unix", path.clone(), format!("unix:{path}"))
    }];
    for (kind, at, url) in targets {
        let impostor = Impostor::listen(dir.path(), kind, &at);
        let (sent, stderr) = send_with_token(&url, None);
        assert!(!sent, "{url}: the client refused the impostor");
        assert!(stderr.contains("runs as user nobody (uid 65534)"), "{url}: the impostor is named: {stderr}");
        assert!(stderr.contains("FIELDHUB_HUB_USER=nobody"), "{url}: the override is named: {stderr}");
        assert_eq!(impostor.line(), "received 0", "{url}: not one byte reached the impostor");

        // Told to trust that user, the client talks: the check held it back.
        let (sent, _) = send_with_token(&url, Some("nobody"));
        assert!(!sent, "{url}: the impostor is no hub");
        let told = impostor.line();
        assert!(told.starts_with("received ") && told != "received 0", "{url}: with the override it spoke: {told}");
        pair.wait_for_more(100);
    }
    let (sent, stderr) = send_with_token(&hub.url, None);
    assert!(sent, "root's own hub is reached as before: {stderr}");
    pair.finish();
}

#[test]
fn another_users_process_serving_a_shm_session_socket_gets_no_byte_and_the_client_names_it() {
    let hub = FIELDHUB.start();
    let pair = Pair::start(hub.client("pair-sender"), hub.client("pair-receiver"), "can0", PAIR_ID, PAIR_TAG);
    // Root's own private directory: the client's directory checks pass.
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let socket = dir.path().join("squat.sock");
    let impostor = Impostor::listen(dir.path(), "shm", socket.to_str().unwrap());
    let url = format!("shm://squat?dir={}", dir.path().display());
    let (sent, stderr) = send_with_token(&url, None);
    assert!(!sent, "{url}: the client refused the impostor");
    assert!(stderr.contains(&format!("runs as user {NOBODY}")), "{url}: the impostor is named: {stderr}");
    assert_eq!(impostor.line(), "received 0", "{url}: not one byte reached the impostor");
    pair.wait_for_more(100);
    pair.finish();
}
