//! Binding TCP and unix-socket listen addresses; the reactor accepts on them.

use std::net::TcpListener;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};

use super::reactor::Listening;
use crate::config::ListenAddr;

/// A bound listener, ready to accept.
pub enum Bound {
    Tcp(TcpListener),
    Unix(UnixListener, PathBuf),
}

impl Bound {
    /// Bind `addr`. A stale unix socket file left by a dead hub is replaced.
    pub fn bind(addr: &ListenAddr) -> std::io::Result<Self> {
        match addr {
            ListenAddr::Tcp(addr) => Ok(Bound::Tcp(TcpListener::bind(addr)?)),
            ListenAddr::Unix(path) => {
                remove_stale_socket(path);
                Ok(Bound::Unix(UnixListener::bind(path)?, path.clone()))
            }
        }
    }

    /// The address actually bound (resolves port 0).
    pub fn local_addr(&self) -> std::io::Result<ListenAddr> {
        match self {
            Bound::Tcp(l) => Ok(ListenAddr::Tcp(l.local_addr()?)),
            Bound::Unix(_, path) => Ok(ListenAddr::Unix(path.clone())),
        }
    }

    /// Hand the listener to the reactor.
    pub fn into_listening(self) -> Listening {
        match self {
            Bound::Tcp(listener) => Listening::Tcp(listener),
            Bound::Unix(listener, path) => Listening::Unix(listener, path),
        }
    }
}

fn remove_stale_socket(path: &Path) {
    use std::os::unix::fs::FileTypeExt;
    let is_socket = std::fs::symlink_metadata(path).map(|m| m.file_type().is_socket()).unwrap_or(false);
    if is_socket && std::os::unix::net::UnixStream::connect(path).is_err() {
        let _ = std::fs::remove_file(path);
    }
}
