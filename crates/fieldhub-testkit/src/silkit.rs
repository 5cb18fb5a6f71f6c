//! Test support for the SIL Kit tests: where `make test-silkit` put SIL Kit
//! and its C peers, the registry, and processes that die with the test.

use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use crate::wait::{deadline, wait_for, wait_until};

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
/// Port 0 lets the registry pick its port: one chosen by [`free_port`] can
/// be taken by another test between the choice and the registry's bind,
/// and two tests would then share a registry.
pub fn start_registry(silkit: &SilKit, port: u16) -> (Registry, String) {
    let dir = std::env::temp_dir().join(format!("fieldhub-silkit-registry-{}-{}", std::process::id(), crate::unique()));
    std::fs::create_dir_all(&dir).expect("create the registry's temporary directory");
    // Where the registry writes the URI it listens on, its port included.
    let written = dir.join("registry.yaml");
    let child = Command::new(&silkit.registry)
        .args(["--listen-uri", &format!("silkit://127.0.0.1:{port}")])
        .arg("--generate-configuration")
        .arg(&written)
        .env("TMPDIR", &dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start sil-kit-registry");
    let registry = Registry { process: Process(child), dir };
    let uri = wait_for(deadline(), format_args!("sil-kit-registry writes its URI to {}", written.display()), || {
        registry_uri(&std::fs::read_to_string(&written).ok()?)
    });
    let port = uri.rsplit(':').next().and_then(|p| p.parse::<u16>().ok()).expect("the registry's URI ends in its port");
    let listening = || TcpStream::connect(("127.0.0.1", port)).is_ok();
    wait_until(deadline(), format_args!("sil-kit-registry listens on {uri}"), listening);
    (registry, uri)
}

/// The `RegistryUri` of a configuration `--generate-configuration` wrote,
/// once its quoted value is complete (the file may be read mid-write).
fn registry_uri(text: &str) -> Option<String> {
    let value = text.lines().find_map(|line| line.trim().strip_prefix("RegistryUri:"))?.trim();
    let uri = value.strip_prefix('\'')?.strip_suffix('\'')?;
    uri.starts_with("silkit://").then(|| uri.to_owned())
}
