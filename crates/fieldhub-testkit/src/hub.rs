//! A real hub: [`Fieldhub`] names the `fieldhub` executable a test binary
//! runs, and starts [`HubProcess`]es of it — child processes on a free
//! loopback port whose addresses come from their ready line
//! (`--ready-fd`), with their log collected for [`HubProcess::wait_for_log`].

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

use fieldhub_client::{Client, ClientOptions};

use crate::wait::{deadline, poll, PATIENCE};

/// The `fieldhub` executable under test. A test binary defines it once:
/// `const FIELDHUB: Fieldhub = Fieldhub::at(env!("CARGO_BIN_EXE_fieldhub"));`
/// (Cargo knows a binary's path only in the tests of its own package).
#[derive(Clone, Copy, Debug)]
pub struct Fieldhub(&'static str);

impl Fieldhub {
    /// The executable at `path`.
    pub const fn at(path: &'static str) -> Self {
        Self(path)
    }

    /// Its path.
    pub fn path(self) -> &'static Path {
        Path::new(self.0)
    }

    /// A `fieldhub` command, to which the caller adds its arguments.
    pub fn command(self) -> Command {
        Command::new(self.0)
    }

    /// Start a hub with the built-in configuration.
    pub fn start(self) -> HubProcess {
        self.start_with(None, &[])
    }

    /// Start a hub with config text (written to a temp file) and extra args.
    /// It serves no shared memory unless `extra` names it (`--shm NAME`):
    /// hubs of parallel tests must not compete for `shm://default`.
    /// Its addresses come from its ready line (`--ready-fd`), not its log.
    pub fn start_with(self, config: Option<&str>, extra: &[&str]) -> HubProcess {
        self.start_with_env(config, extra, &[])
    }

    /// A hub that requires `token`, given as operators should: in the
    /// environment, not on the command line.
    pub fn start_with_token(self, token: &str) -> HubProcess {
        self.start_with_env(None, &[], &[("FIELDHUB_TOKEN", token)])
    }

    /// [`Fieldhub::start_with`], with variables set in the hub's environment.
    pub fn start_with_env(self, config: Option<&str>, extra: &[&str], env: &[(&str, &str)]) -> HubProcess {
        let mut command = self.command();
        command.args(["hub", "--listen", "127.0.0.1:0"]);
        HubProcess::spawn(command, config, extra, env)
    }

    /// A hub run through `launcher` (e.g. `ip netns exec NS`), listening for
    /// clients on the unix socket `socket` only: a filesystem socket is
    /// reachable from any network namespace, so the test's clients reach a
    /// hub whose federation links live in a namespace of its own.
    pub fn start_via(self, launcher: &[&str], socket: &Path, config: &str) -> HubProcess {
        let mut command = Command::new(launcher[0]);
        command.args(&launcher[1..]).arg(self.0).arg("hub").arg("--listen");
        command.arg(format!("unix:{}", socket.display()));
        HubProcess::spawn(command, Some(config), &[], &[])
    }

    /// Start a hub with the built-in configuration that also serves shared
    /// memory, under a name private to this test.
    pub fn start_shm(self) -> HubProcess {
        self.start_shm_with(None, &[])
    }

    /// [`Fieldhub::start_with`], also serving shared memory under a
    /// private name.
    pub fn start_shm_with(self, config: Option<&str>, extra: &[&str]) -> HubProcess {
        let name = format!("test-{}-{}", std::process::id(), unique());
        let mut args = vec!["--shm", name.as_str()];
        args.extend_from_slice(extra);
        self.start_with(config, &args)
    }
}

/// A `fieldhub hub` child process, killed when dropped.
pub struct HubProcess {
    child: Child,
    pub url: String,
    /// `shm://NAME` when the hub also serves shared memory.
    pub shm_url: Option<String>,
    log: Arc<Mutex<Vec<String>>>,
    config_file: Option<PathBuf>,
}

impl HubProcess {
    fn spawn(mut command: Command, config: Option<&str>, extra: &[&str], env: &[(&str, &str)]) -> Self {
        // A federation without token_file uses its user's own token, which
        // the first hub makes in XDG_CONFIG_HOME: the hubs of this test
        // process share one made here, never the user's real one.
        command.env("XDG_CONFIG_HOME", test_config_home());
        command.args(extra).envs(env.iter().copied());
        if !extra.contains(&"--shm") {
            command.arg("--no-shm");
        }
        let config_file = config.map(|text| {
            let path = std::env::temp_dir().join(format!("fieldhub-test-{}-{}.toml", std::process::id(), unique()));
            std::fs::write(&path, text).expect("write config");
            path
        });
        if let Some(path) = &config_file {
            command.arg("--config").arg(path);
        }
        // Tests wait for log lines (`wait_for_log`), so the hub logs at info.
        command.env("FIELDHUB_LOG", "info").stdout(Stdio::null()).stderr(Stdio::piped());
        let (mut child, ready) = spawn_with_ready_pipe(&mut command);
        let stderr = child.stderr.take().expect("stderr");
        let log = Arc::new(Mutex::new(Vec::new()));
        let reader = {
            let log = Arc::clone(&log);
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    log.lock().unwrap().push(line);
                }
            })
        };
        let ready = match ready.recv_timeout(PATIENCE) {
            Ok(line) if !line.is_empty() => line,
            outcome => {
                // Killed and reaped, the hub has closed its stderr: the log is complete.
                let _ = child.kill();
                let status = child.wait().expect("wait for hub");
                let _ = reader.join();
                let why = if outcome.is_err() { "sent no ready line in time" } else { "closed its ready pipe" };
                panic!("hub {why} ({status}); log: {:#?}", log.lock().unwrap());
            }
        };
        let ready: serde_json::Value = serde_json::from_str(&ready).expect("ready line is JSON");
        let url = match (ready["tcp"][0].as_str(), ready["unix"][0].as_str()) {
            (Some(tcp), _) => format!("tcp://{tcp}"),
            (None, Some(unix)) => format!("unix:{unix}"),
            (None, None) => panic!("the ready line names no TCP or unix address: {ready}"),
        };
        let shm_url = ready["shm"].as_str().map(str::to_owned);
        Self { child, url, shm_url, log, config_file }
    }

    /// Connect a client named `name` over shared memory.
    pub fn shm_client(&self, name: &str) -> Client {
        let url = self.shm_url.as_deref().expect("this hub serves no shared memory; start it with start_shm");
        let options = ClientOptions { name: name.into(), ..Default::default() };
        Client::connect_with(url, &options).expect("connect to hub over shared memory")
    }

    /// Connect a client named `name`.
    pub fn client(&self, name: &str) -> Client {
        let options = ClientOptions { name: name.into(), ..Default::default() };
        Client::connect_with(&self.url, &options).expect("connect to hub")
    }

    /// The hub's log lines so far.
    pub fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }

    /// Wait until a log line contains `needle`; returns that line.
    pub fn wait_for_log(&self, needle: &str) -> String {
        self.wait_for_log_times(needle, 1)
    }

    /// Wait until the hub has logged `needle` at least `times` times;
    /// returns the last such line.
    pub fn wait_for_log_times(&self, needle: &str, times: usize) -> String {
        let found = poll(deadline(), || {
            let lines: Vec<String> = self.log().into_iter().filter(|l| l.contains(needle)).collect();
            (lines.len() >= times).then(|| lines.last().cloned().unwrap_or_default())
        });
        found.unwrap_or_else(|| panic!("hub never logged '{needle}' {times} time(s); log: {:#?}", self.log()))
    }

    /// The hub's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        self.child.try_wait().expect("try_wait").is_none()
    }

    /// Send SIGTERM and wait for a clean exit.
    pub fn terminate(mut self) -> std::process::ExitStatus {
        // SAFETY: kill(2) takes plain integers; signalling our own child
        // cannot affect this process's memory.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        self.child.wait().expect("wait for hub")
    }
}

impl Drop for HubProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(path) = &self.config_file {
            let _ = std::fs::remove_file(path);
        }
        // A killed hub cannot remove its shared-memory session socket.
        if let Some(name) = self.shm_url.as_deref().and_then(|url| url.strip_prefix("shm://")) {
            if let Ok(path) = fieldhub_shm::socket::socket_path(name) {
                let _ = std::fs::remove_file(path);
            }
        }
    }
}

/// Spawn `command` (a `fieldhub hub`) with `--ready-fd` on the write end of a
/// pipe; the receiver gets everything read from the pipe up to end of file:
/// the ready line, or nothing if the hub exited first. A pipe, unlike a
/// polled file, also reports a hub that died.
fn spawn_with_ready_pipe(command: &mut Command) -> (Child, std::sync::mpsc::Receiver<String>) {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::os::unix::process::CommandExt;

    let mut fds = [0; 2];
    // SAFETY: pipe2(2) writes two new descriptors into the array it is given.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0, "pipe2");
    // SAFETY: both descriptors were just created and are owned by nothing else.
    let (read_end, write_end) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let fd = write_end.as_raw_fd();
    command.arg("--ready-fd").arg(fd.to_string());
    // SAFETY: runs in the child between fork and exec, and only calls
    // fcntl(2), which is async-signal-safe: the write end, close-on-exec
    // everywhere else (other tests' children included), survives the exec.
    unsafe {
        command.pre_exec(move || match libc::fcntl(fd, libc::F_SETFD, 0) {
            -1 => Err(std::io::Error::last_os_error()),
            _ => Ok(()),
        });
    }
    let child = command.spawn().expect("start fieldhub hub");
    // Only the hub holds the write end now, so its close (or death) is our end of file.
    drop(write_end);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = std::io::Read::read_to_string(&mut std::fs::File::from(read_end), &mut line);
        let _ = tx.send(line);
    });
    (child, rx)
}

/// A number no other call in this process returns: for private names.
pub fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// An owner-only configuration folder shared by every hub this test process
/// starts (`XDG_CONFIG_HOME`).
fn test_config_home() -> &'static Path {
    static HOME: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    HOME.get_or_init(|| {
        use std::os::unix::fs::DirBuilderExt;
        let path = std::env::temp_dir().join(format!("fieldhub-test-config-{}", std::process::id()));
        match std::fs::DirBuilder::new().mode(0o700).create(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => panic!("cannot make the test hubs' configuration folder {}: {e}", path.display()),
        }
        path
    })
}
