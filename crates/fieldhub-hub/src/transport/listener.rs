//! Accept loops for TCP and unix-socket listen addresses.

use std::net::{TcpListener, TcpStream};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tracing::warn;

use super::session::{serve, SessionContext, HANDSHAKE_TIMEOUT};
use crate::config::ListenAddr;
use crate::control::http::{looks_like_http, ControlServer};
use std::time::{Duration, Instant};

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

    /// Accept until `stopping` is set, serving each connection on a thread.
    /// TCP connections that open with an HTTP request line go to `control`.
    pub fn accept_loop(self, ctx: Arc<SessionContext>, stopping: Arc<AtomicBool>, control: Option<Arc<ControlServer>>) {
        match self {
            Bound::Tcp(listener) => {
                for stream in listener.incoming() {
                    // SYNC POINT with Hub::shutdown: it sets the flag, then
                    // connects once to wake this blocking accept.
                    if stopping.load(Ordering::Acquire) {
                        break;
                    }
                    match stream {
                        Ok(stream) => {
                            let _ = stream.set_nodelay(true);
                            let peer = stream.peer_addr().map_or_else(|_| "?".into(), |a| a.to_string());
                            match &control {
                                Some(control) => spawn_sniffing_session(stream, peer, &ctx, control),
                                None => spawn_session(stream, peer, &ctx),
                            }
                        }
                        Err(e) => warn!("accept failed: {e}"),
                    }
                }
            }
            Bound::Unix(listener, path) => {
                for stream in listener.incoming() {
                    if stopping.load(Ordering::Acquire) {
                        break;
                    }
                    match stream {
                        Ok(stream) => spawn_session(stream, format!("unix:{}", path.display()), &ctx),
                        Err(e) => warn!("accept failed: {e}"),
                    }
                }
                let _ = std::fs::remove_file(&path);
            }
        }
    }
}

fn spawn_session<C: super::Connection>(stream: C, peer: String, ctx: &Arc<SessionContext>) {
    let ctx = Arc::clone(ctx);
    let spawned = std::thread::Builder::new().name("fh-session".into()).spawn(move || serve(stream, peer, ctx));
    if let Err(e) = spawned {
        warn!("cannot start a session thread: {e}");
    }
}

/// Serve a TCP connection on its own thread, handing it to the control API
/// if it opens with an HTTP request line.
fn spawn_sniffing_session(stream: TcpStream, peer: String, ctx: &Arc<SessionContext>, control: &Arc<ControlServer>) {
    let (ctx, control) = (Arc::clone(ctx), Arc::clone(control));
    let spawned = std::thread::Builder::new().name("fh-session".into()).spawn(move || {
        if opens_with_http(&stream) {
            control.hand_over(stream);
        } else {
            serve(stream, peer, ctx);
        }
    });
    if let Err(e) = spawned {
        warn!("cannot start a session thread: {e}");
    }
}

/// Peek at the first four bytes (without consuming them) within the
/// handshake timeout.
fn opens_with_http(stream: &TcpStream) -> bool {
    let mut first = [0u8; 4];
    let deadline = Instant::now() + HANDSHAKE_TIMEOUT;
    if stream.set_read_timeout(Some(HANDSHAKE_TIMEOUT)).is_err() {
        return false;
    }
    loop {
        match stream.peek(&mut first) {
            Ok(n) if n >= first.len() || n == 0 => break,
            Ok(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(1)),
            _ => break,
        }
    }
    let http = looks_like_http(&first);
    if http {
        let _ = stream.set_read_timeout(None);
    }
    http
}

/// Wake a blocking accept on `addr` by connecting to it once.
pub fn wake(addr: &ListenAddr) {
    match addr {
        ListenAddr::Tcp(addr) => {
            let _ = TcpStream::connect(addr);
        }
        ListenAddr::Unix(path) => {
            let _ = std::os::unix::net::UnixStream::connect(path);
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
