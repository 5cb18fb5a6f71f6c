//! Test support for the SIL Kit tests: where `make test-silkit` put SIL Kit
//! and its C peers, the registry, and processes that die with the test.

use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use crate::wait::{deadline, wait_until};

/// Where `make test-silkit` put SIL Kit and the C peer a test runs.
pub struct SilKit {
    pub library: String,
    pub registry: String,
    pub peer: String,
}

impl SilKit {
    /// The paths from the environment: `FIELDHUB_SILKIT_LIB`,
    /// `FIELDHUB_SILKIT_REGISTRY` and the peer's variable `peer_var`. A
    /// missing one fails the test, naming them: the SIL Kit tests are built
    /// only with the `silkit-peers` feature, which `make test-silkit` turns
    /// on after setting them up (`FIELDHUB_SILKIT_REQUIRED` is no longer
    /// needed, and ignored).
    pub fn from_env(peer_var: &str) -> Self {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        match (var("FIELDHUB_SILKIT_LIB"), var("FIELDHUB_SILKIT_REGISTRY"), var(peer_var)) {
            (Some(library), Some(registry), Some(peer)) => Self { library, registry, peer },
            _ => panic!(
                "the SIL Kit tests need FIELDHUB_SILKIT_LIB, FIELDHUB_SILKIT_REGISTRY and {peer_var}: \
                 run them with `make test-silkit`, which fetches SIL Kit, builds its peers and sets them"
            ),
        }
    }
}

/// A child process killed when the test ends, however it ends.
pub struct Process(pub Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A loopback port nothing listens on now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A `sil-kit-registry`, killed when the test ends, and its temporary
/// directory removed: the registry makes its local socket
/// (`SilKitRegi….silkit`) in its temporary directory and leaves it there
/// when killed, so each registry gets a directory of its own.
pub struct Registry {
    process: Process,
    dir: PathBuf,
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.process.0.kill();
        let _ = self.process.0.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A `sil-kit-registry` on `port`, once it listens; its `silkit://` URI.
pub fn start_registry(silkit: &SilKit, port: u16) -> (Registry, String) {
    let uri = format!("silkit://127.0.0.1:{port}");
    let dir = std::env::temp_dir().join(format!("fieldhub-silkit-registry-{}-{port}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("create the registry's temporary directory");
    let child = Command::new(&silkit.registry)
        .args(["--listen-uri", &uri])
        .env("TMPDIR", &dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start sil-kit-registry");
    let registry = Registry { process: Process(child), dir };
    let listening = || TcpStream::connect(("127.0.0.1", port)).is_ok();
    wait_until(deadline(), format_args!("sil-kit-registry listens on {uri}"), listening);
    (registry, uri)
}
