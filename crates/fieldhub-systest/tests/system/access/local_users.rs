//! Other local users (issue 16, `docs/security.md` "Local users"): a hub
//! without a token admits only processes of the user it runs as, over TCP
//! and the control API alike; another account needs the token, or the
//! operator's explicit `--insecure-local`.
//!
//! The other user is `nobody` (uid 65534), which the test becomes in a
//! child process; that needs root. `make test` runs as root and sets
//! FIELDHUB_OTHER_USER_REQUIRED=1, so there these tests cannot skip;
//! elsewhere they say that they skipped.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Output};

use crate::FIELDHUB;
use fieldhub_testkit::HubProcess;

const NOBODY: u32 = 65534;
const REQUIRED: &str = "FIELDHUB_OTHER_USER_REQUIRED";

/// The fieldhub command copied where `nobody` may run it (the build
/// directory usually sits below one only its owner enters); removed again
/// when dropped.
struct NobodysCommand {
    dir: PathBuf,
    bin: PathBuf,
}

impl NobodysCommand {
    /// `None` (after saying so) when this process cannot become another user.
    fn new(test: &str) -> Option<Self> {
        // SAFETY: geteuid has no preconditions and cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            let text = format!("{test}: becoming another user needs root");
            assert!(std::env::var(REQUIRED).map_or(true, |v| v != "1"), "{text}, and {REQUIRED}=1 says it must run");
            eprintln!("SKIPPED {text}; set {REQUIRED}=1 to make this a failure");
            return None;
        }
        let dir = std::env::temp_dir().join(format!("fieldhub-local-users-{test}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let bin = dir.join("fieldhub");
        std::fs::copy(FIELDHUB.path(), &bin).unwrap();
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        Some(Self { dir, bin })
    }

    /// Run `fieldhub ARGS` as `nobody`, with `token` in its environment.
    fn run(&self, args: &[&str], token: Option<&str>) -> Output {
        let mut command = Command::new(&self.bin);
        command.args(args).env_remove("FIELDHUB_TOKEN").env_remove("FIELDHUB_TOKEN_FILE").current_dir("/");
        if let Some(token) = token {
            command.env("FIELDHUB_TOKEN", token);
        }
        command.uid(NOBODY).gid(NOBODY).output().unwrap()
    }
}

impl Drop for NobodysCommand {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn send(hub: &HubProcess) -> [&str; 5] {
    ["send", "--hub", &hub.url, "can0", "123#01"]
}

#[test]
fn another_local_user_without_a_token_is_refused_frames_and_control() {
    let Some(nobody) = NobodysCommand::new("refused") else { return };
    let hub = FIELDHUB.start();

    let refused = nobody.run(&send(&hub), None);
    assert!(!refused.status.success(), "nobody's frame was taken");
    let text = stderr(&refused);
    assert!(text.contains("only processes of the user it runs as"), "{text}");
    assert!(text.contains(&format!("user id {NOBODY}")), "the refusal names who came: {text}");

    let control = nobody.run(&["ctl", "--hub", &hub.url, "channels"], None);
    assert!(!control.status.success(), "nobody read the control API");
    let text = stderr(&control);
    assert!(text.contains("401") || text.contains("only processes of the user it runs as"), "{text}");

    // The hub's own user needs nothing, and the hub goes on serving.
    let mine = FIELDHUB.command().args(send(&hub)).env_remove("FIELDHUB_TOKEN").output();
    let mine = mine.unwrap();
    assert!(mine.status.success(), "{}", stderr(&mine));
    assert!(hub.log().iter().any(|l| l.contains("user id 65534")), "the hub logs whom it refused");
}

#[test]
fn another_local_user_with_the_token_is_admitted() {
    let Some(nobody) = NobodysCommand::new("token") else { return };
    let hub = FIELDHUB.start_with_token("sesame");
    let admitted = nobody.run(&send(&hub), Some("sesame"));
    assert!(admitted.status.success(), "{}", stderr(&admitted));
    let control = nobody.run(&["ctl", "--hub", &hub.url, "channels"], Some("sesame"));
    assert!(control.status.success(), "{}", stderr(&control));
    let wrong = nobody.run(&send(&hub), Some("sesam"));
    assert!(stderr(&wrong).contains("wrong token"), "{}", stderr(&wrong));
}

#[test]
fn insecure_local_admits_every_local_user_as_before() {
    let Some(nobody) = NobodysCommand::new("insecure") else { return };
    let hub = FIELDHUB.start_with(None, &["--insecure-local"]);
    let admitted = nobody.run(&send(&hub), None);
    assert!(admitted.status.success(), "{}", stderr(&admitted));
    let control = nobody.run(&["ctl", "--hub", &hub.url, "channels"], None);
    assert!(control.status.success(), "{}", stderr(&control));
}
