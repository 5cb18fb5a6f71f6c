//! `fieldhub hub --check-config`: ok only for what would start here, the
//! mistake named otherwise, and what only a start can tell said on stderr.

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::FIELDHUB;

/// Where the hub looks for SIL Kit's library first (docs/silkit.md).
const SILKIT_LIBRARY_ENV: &str = "FIELDHUB_SILKIT_LIB";

/// A scratch directory removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(what: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("fieldhub-check-{what}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    /// `text` as `name` in the directory, checked.
    fn check(&self, name: &str, text: &str) -> Output {
        let path = self.0.join(name);
        std::fs::write(&path, text).unwrap();
        check(&path, &[])
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn check(path: &Path, env: &[(&str, &str)]) -> Output {
    let mut command = FIELDHUB.command();
    command.args(["hub", "--check-config", "--config"]).arg(path);
    for (key, value) in env {
        command.env(key, value);
    }
    command.output().unwrap()
}

fn refused(out: &Output) -> String {
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(out.stdout.is_empty(), "{out:?}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn check_config_says_ok_or_names_the_mistake_without_starting_a_hub() {
    let scratch = Scratch::new("ok");
    // The good one names a port in use: checking binds nothing.
    let hub = FIELDHUB.start();
    let addr = hub.url.trim_start_matches("tcp://").to_owned();
    let out = scratch.check("good.toml", &format!("[hub]\nlisten = [\"{addr}\"]\n[[channel]]\nname = \"a\"\n"));
    assert!(out.status.success() && String::from_utf8_lossy(&out.stdout).trim() == "ok", "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!("not checked: whether {addr} can be listened on")), "{stderr}");
    let out = scratch.check("bad.toml", "[[channel]]\nname = \"a\"\n\ndata_bitrate = 2000000\n");
    assert!(refused(&out).contains("bad.toml: line 4: channel[0].data_bitrate"), "{out:?}");
}

#[test]
fn check_config_refuses_what_a_start_would_refuse_a_missing_dbc_an_absent_interface_a_silkit_library_that_does_not_load(
) {
    let scratch = Scratch::new("start");
    let channel = "[[channel]]\nname = \"can0\"\n";
    let out = scratch.check("dbc.toml", &format!("{channel}dbc = \"body.dbc\"\n"));
    let stderr = refused(&out);
    assert!(stderr.contains("can0") && stderr.contains("body.dbc"), "{stderr}");

    // Found next to the configuration, whatever the working directory.
    let dbc = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fieldhub-rbs/tests/data/body.dbc");
    std::fs::copy(dbc, scratch.0.join("body.dbc")).unwrap();
    let out = scratch.check("dbc.toml", &format!("{channel}dbc = \"body.dbc\"\n"));
    assert!(out.status.success(), "{out:?}");

    let out = scratch.check("rbs.toml", &format!("{channel}[[rbs]]\nchannel = \"can0\"\ndbc = \"rest.dbc\"\n"));
    assert!(refused(&out).contains("rest.dbc"), "{out:?}");

    // No such interface here (and on a kernel without AF_CAN, no SocketCAN at all): a start fails on it.
    let port = "[[port]]\nname = \"adapter\"\nchannel = \"can0\"\nsocketcan = \"fhnone0\"\n";
    let out = scratch.check("socketcan.toml", &format!("{channel}{port}"));
    let stderr = refused(&out);
    let why = stderr.contains("fhnone0") || stderr.contains("no SocketCAN (AF_CAN)");
    assert!(stderr.contains("SocketCAN port 'adapter'") && why, "{stderr}");

    let silkit = "[[silkit]]\nchannel = \"can0\"\nregistry = \"silkit://127.0.0.1:8500\"\nnetwork = \"CAN1\"\n";
    let path = scratch.0.join("silkit.toml");
    std::fs::write(&path, format!("{channel}{silkit}")).unwrap();
    let missing = scratch.0.join("libSilKit.so").display().to_string();
    let out = check(&path, &[(SILKIT_LIBRARY_ENV, &missing)]);
    let stderr = refused(&out);
    assert!(stderr.contains("[[silkit]] for can0") && stderr.contains(&missing), "{stderr}");

    let ivshmem = format!("[hub]\nivshmem = [\"{}/no-such-dir/region\"]\n{channel}", scratch.0.display());
    let out = scratch.check("ivshmem.toml", &ivshmem);
    assert!(refused(&out).contains("no-such-dir"), "{out:?}");
}
