//! Binding TCP and unix-socket listen addresses; the reactor accepts on them.
//!
//! A unix socket is owner-only (mode 0600) from the moment its name exists,
//! whatever the umask: it is bound under a temporary name, restricted, then
//! renamed into place. Other users (a QEMU run as another account) are let
//! in by the operator, with `chmod` or a shared group, not by accident.

use mio::net::TcpListener;
#[cfg(target_os = "linux")]
use std::os::unix::net::UnixListener;
#[cfg(target_os = "linux")]
use std::path::{Path, PathBuf};

use super::reactor::Listening;
use crate::config::ListenAddr;

/// A bound listener, ready to accept.
pub enum Bound {
    Tcp(TcpListener),
    /// Unix sockets are Linux-only; the configuration refuses them elsewhere.
    #[cfg(target_os = "linux")]
    Unix(UnixListener, PathBuf),
}

impl Bound {
    /// Bind `addr`. A stale unix socket file left by a dead hub is replaced.
    pub fn bind(addr: &ListenAddr) -> std::io::Result<Self> {
        match addr {
            ListenAddr::Tcp(addr) => {
                let listener = std::net::TcpListener::bind(addr)?;
                listener.set_nonblocking(true)?;
                Ok(Bound::Tcp(TcpListener::from_std(listener)))
            }
            #[cfg(target_os = "linux")]
            ListenAddr::Unix(path) => {
                remove_stale_socket(path);
                Ok(Bound::Unix(bind_owner_only(path)?, path.clone()))
            }
            #[cfg(not(target_os = "linux"))]
            ListenAddr::Unix(_) => Err(std::io::Error::new(
                std::io::ErrorKind::Unsupported,
                crate::config::platform::LinuxOnly::UnixSocket,
            )),
        }
    }

    /// The address actually bound (resolves port 0).
    pub fn local_addr(&self) -> std::io::Result<ListenAddr> {
        match self {
            Bound::Tcp(l) => Ok(ListenAddr::Tcp(l.local_addr()?)),
            #[cfg(target_os = "linux")]
            Bound::Unix(_, path) => Ok(ListenAddr::Unix(path.clone())),
        }
    }

    /// Hand the listener to the reactor.
    pub fn into_listening(self) -> Listening {
        match self {
            Bound::Tcp(listener) => Listening::Tcp(listener),
            #[cfg(target_os = "linux")]
            Bound::Unix(listener, path) => Listening::Unix(listener, path),
        }
    }
}

/// Bind a unix socket at `path` that only its owner can connect to.
#[cfg(target_os = "linux")]
fn bind_owner_only(path: &Path) -> std::io::Result<UnixListener> {
    use std::os::unix::fs::PermissionsExt;
    let mut staging = path.as_os_str().to_owned();
    staging.push(format!(".{}.binding", std::process::id()));
    let staging = PathBuf::from(staging);
    let _ = std::fs::remove_file(&staging);
    let listener = UnixListener::bind(&staging)?;
    let placed = std::fs::set_permissions(&staging, std::fs::Permissions::from_mode(0o600))
        .and_then(|()| std::fs::rename(&staging, path));
    if let Err(e) = placed {
        let _ = std::fs::remove_file(&staging);
        return Err(e);
    }
    Ok(listener)
}

#[cfg(target_os = "linux")]
fn remove_stale_socket(path: &Path) {
    use std::os::unix::fs::FileTypeExt;
    let is_socket = std::fs::symlink_metadata(path).map(|m| m.file_type().is_socket()).unwrap_or(false);
    if is_socket && std::os::unix::net::UnixStream::connect(path).is_err() {
        let _ = std::fs::remove_file(path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Under the usual umask (022) a fresh socket is 0755; the tests' umask
    /// is left alone, as other tests of this process create files meanwhile.
    #[test]
    fn a_unix_socket_is_owner_only() {
        use std::os::unix::fs::PermissionsExt;
        let path = std::env::temp_dir().join(format!("fieldhub-listener-{}.sock", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let bound = Bound::bind(&ListenAddr::Unix(path.clone())).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        std::os::unix::net::UnixStream::connect(&path).expect("the owner connects");
        drop(bound);
        std::fs::remove_file(&path).unwrap();
    }
}
