//! `fieldhub hub --ready-fd N` / `--ready-file PATH`: one JSON line that says
//! the hub is ready and where it is.
//!
//! Programs that start a hub (test harnesses, the benchmarks, the Python
//! package) need the moment it accepts clients and its real addresses —
//! `127.0.0.1:0` becomes whatever port the kernel picked. Reading them from
//! the log broke whenever `FIELDHUB_LOG` hid those lines; the ready line is
//! the same information as a contract. It is written once, after every
//! listener is bound, shared memory is served and the channels exist:
//!
//! ```json
//! {"tcp":["127.0.0.1:40123"],"unix":["/tmp/x.sock"],"http":"http://127.0.0.1:40123","tls":false,
//!  "shm":"shm://name","ivshmem":[],"socketcand":null,"channels":["can0","can1"],
//!  "cannelloni":["udp/127.0.0.1:20000"],"pid":1234}
//! ```

use std::fmt;
#[cfg(unix)]
use std::fs::File;
#[cfg(unix)]
use std::io::Write;
use std::net::SocketAddr;
#[cfg(unix)]
pub use std::os::fd::RawFd;
#[cfg(unix)]
use std::os::fd::{FromRawFd, OwnedFd};
/// A descriptor number as `--ready-fd` takes it; Windows has none to inherit.
#[cfg(windows)]
pub type RawFd = i32;
use std::path::{Path, PathBuf};

use fieldhub_hub::config::ListenAddr;
use fieldhub_hub::{Hub, HubConfig};
use serde::Serialize;

/// What the ready line says. Field names are the contract with every
/// program that starts a hub; add fields, never rename them.
#[derive(Debug, Serialize)]
pub struct Ready {
    /// TCP listen addresses as `HOST:PORT`, port 0 resolved.
    tcp: Vec<SocketAddr>,
    /// Unix-socket listen paths.
    unix: Vec<PathBuf>,
    /// Base URL of the control API: it is served on the first TCP address
    /// (`https://` when the hub speaks TLS).
    http: Option<String>,
    /// Whether the TCP listeners speak TLS (clients connect with `tls://`).
    tls: bool,
    /// `shm://NAME` when shared memory is served; `shm://NAME?dir=PATH`
    /// when the hub serves it from a private directory of its own (the
    /// usual one was another user's).
    shm: Option<String>,
    /// ivshmem region files QEMU guests reach the hub through.
    ivshmem: Vec<PathBuf>,
    /// `HOST:PORT` of the socketcand server (port 0 resolved), when served.
    socketcand: Option<SocketAddr>,
    /// The configured channels, in configuration order.
    channels: Vec<String>,
    /// cannelloni endpoints as `udp/HOST:PORT` or `tcp/HOST:PORT`, port 0
    /// resolved, in configuration order.
    cannelloni: Vec<String>,
    /// The hub's process id, for whoever has to signal it.
    pid: u32,
}

impl Ready {
    /// The addresses of a started hub. The hub library reports its bound
    /// listeners; the shm name, ivshmem regions and channels are the
    /// configuration's, which the hub serves exactly as given.
    pub fn of(hub: &Hub, config: &HubConfig) -> Self {
        let (mut tcp, mut unix) = (Vec::new(), Vec::new());
        for addr in hub.listen_addrs() {
            match addr {
                ListenAddr::Tcp(addr) => tcp.push(*addr),
                ListenAddr::Unix(path) => unix.push(path.clone()),
            }
        }
        Self {
            http: tcp.first().map(|addr| match config.tls_files() {
                Some(_) => format!("https://{addr}"),
                None => format!("http://{addr}"),
            }),
            tls: config.tls_files().is_some(),
            tcp,
            unix,
            shm: hub.shm_url().map(str::to_owned),
            ivshmem: config.hub.ivshmem.clone(),
            socketcand: hub.socketcand_addr(),
            channels: config.channels.iter().map(|c| c.name.clone()).collect(),
            cannelloni: hub.cannelloni_addrs().iter().map(|a| a.to_string()).collect(),
            pid: std::process::id(),
        }
    }
}

/// Why the ready line cannot be delivered. Each message names the flag, so
/// a harness author sees which argument to fix.
#[derive(Debug, thiserror::Error)]
pub enum ReadyError {
    #[cfg(unix)]
    #[error("--ready-fd {0}: no such open file descriptor (pass the write end of a pipe the hub inherits)")]
    NotOpen(RawFd),
    #[cfg(unix)]
    #[error("--ready-fd {0}: the file descriptor is open read-only; the hub writes its ready line to it")]
    ReadOnly(RawFd),
    #[cfg(unix)]
    #[error(
        "--ready-fd {0}: standard input, output and error cannot carry the ready line (the hub closes the file \
         descriptor after writing it)"
    )]
    Stdio(RawFd),
    #[cfg(windows)]
    #[error("--ready-fd {0}: a program on windows inherits no file descriptors; give --ready-file PATH")]
    NoDescriptors(RawFd),
    #[error("{target}: cannot write the ready line: {source}")]
    Write { target: String, source: std::io::Error },
}

/// Where the ready line goes; a file descriptor is checked before the hub
/// starts, so a mistake costs nothing.
#[derive(Debug)]
pub enum ReadySignal {
    /// An inherited file descriptor (a pipe's write end), closed after the
    /// line so a reader sees end of file right behind it.
    #[cfg(unix)]
    Fd { fd: RawFd, file: File },
    /// A file, replaced whole (temporary file, then rename) so a poller
    /// never reads half a line. Whoever polls removes it before starting
    /// the hub: only then is a file that appears this hub's.
    File(PathBuf),
}

impl ReadySignal {
    /// `--ready-fd` on Windows: refused (see [`ReadyError::NoDescriptors`]).
    #[cfg(windows)]
    pub fn fd(fd: RawFd) -> Result<Self, ReadyError> {
        Err(ReadyError::NoDescriptors(fd))
    }

    /// Take ownership of the inherited `fd`.
    #[cfg(unix)]
    pub fn fd(fd: RawFd) -> Result<Self, ReadyError> {
        if (0..=2).contains(&fd) {
            return Err(ReadyError::Stdio(fd));
        }
        // SAFETY: fcntl(2) with F_GETFL only reads the descriptor's flags
        // and fails with EBADF for a number that is not open.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
        if flags == -1 {
            return Err(ReadyError::NotOpen(fd));
        }
        if flags & libc::O_ACCMODE == libc::O_RDONLY {
            return Err(ReadyError::ReadOnly(fd));
        }
        // SAFETY: the descriptor is open (checked above) and was handed to
        // this process for the ready line alone, so nothing else owns it.
        let owned = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Self::Fd { fd, file: File::from(owned) })
    }

    /// Deliver `ready` as one JSON line.
    pub fn send(self, ready: &Ready) -> Result<(), ReadyError> {
        let mut line = serde_json::to_string(ready).expect("the ready line holds only strings, lists and numbers");
        line.push('\n');
        let target = self.to_string();
        let written = match self {
            #[cfg(unix)]
            Self::Fd { mut file, .. } => file.write_all(line.as_bytes()),
            Self::File(path) => replace_file(&path, line.as_bytes()),
        };
        written.map_err(|source| ReadyError::Write { target, source })
    }
}

impl fmt::Display for ReadySignal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            #[cfg(unix)]
            Self::Fd { fd, .. } => write!(f, "--ready-fd {fd}"),
            Self::File(path) => write!(f, "--ready-file {}", path.display()),
        }
    }
}

/// Write `path` atomically: a temporary file beside it, renamed over it.
fn replace_file(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    let name = path.file_name().ok_or_else(|| std::io::Error::other("the path names no file"))?;
    let mut temporary = std::ffi::OsString::from(".");
    temporary.push(name);
    temporary.push(format!(".{}.tmp", std::process::id()));
    let temporary = path.with_file_name(temporary);
    let result = std::fs::write(&temporary, contents).and_then(|()| std::fs::rename(&temporary, path));
    if result.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    result
}
