//! The session socket of a shared-memory hub: where it lives and how file
//! descriptors travel over it (`spec/shm.md` section 5).
//!
//! A hub serving shared memory under NAME listens on the unix socket
//! `DIR/NAME.sock`, where DIR is `$XDG_RUNTIME_DIR/fieldhub` or, without
//! that variable, `/tmp/fieldhub-UID`. DIR is created with mode 0700 and
//! refused if it belongs to someone else or is open to others, so only the
//! user who runs the hub can reach it.
//!
//! When DIR exists but is not private (another user made `/tmp/fieldhub-UID`
//! first), a hub does not give up: [`runtime_dir`] makes a private directory
//! of its own next to it, under a name no one can guess
//! (`/tmp/fieldhub-UID-XXXXXXXXXXXXXXXX`), and the hub's URL names it
//! (`shm://NAME?dir=PATH`); clients check it as they check DIR.

use std::io::{IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

use rustix::net::{
    RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer, SendAncillaryMessage, SendFlags,
};

/// Longest hub name usable in `shm://NAME`.
pub const MAX_NAME_LEN: usize = 64;
/// Descriptors the hub passes with `WELCOME`: the client segment, the bell segment.
pub const PASSED_FDS: usize = 2;

/// Check a shm hub name: 1 to 64 of `A-Z a-z 0-9 . _ -`, not starting with a dot.
pub fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > MAX_NAME_LEN {
        return Err(format!("a shared-memory hub name has 1 to {MAX_NAME_LEN} characters, got {}", name.len()));
    }
    if name.starts_with('.') || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b)) {
        return Err(format!(
            "'{name}' is not a valid shared-memory hub name: use letters, digits, '.', '_' and '-' (not starting with '.')"
        ));
    }
    Ok(())
}

/// The per-user directory holding the session sockets.
pub fn socket_dir() -> PathBuf {
    match std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from) {
        Some(dir) if dir.is_absolute() && dir.is_dir() => dir.join("fieldhub"),
        _ => PathBuf::from(format!("/tmp/fieldhub-{}", rustix::process::geteuid().as_raw())),
    }
}

/// The session socket of the hub named `name`.
pub fn socket_path(name: &str) -> Result<PathBuf, String> {
    socket_path_in(&socket_dir(), name)
}

/// The session socket of the hub named `name` in `dir`.
pub fn socket_path_in(dir: &Path, name: &str) -> Result<PathBuf, String> {
    check_name(name)?;
    Ok(dir.join(format!("{name}.sock")))
}

/// Where a hub serving shared memory puts its session sockets.
#[derive(Debug)]
pub struct RuntimeDir {
    pub path: PathBuf,
    /// Why [`socket_dir`] could not be used (another user's, or open to
    /// others) when `path` is a private directory made instead.
    pub squatted: Option<String>,
}

/// [`socket_dir`], made private if needed; when it exists and is not
/// private (squatted), a new private directory next to it, made with an
/// unguessable name (as `mkdtemp` does).
pub fn runtime_dir() -> std::io::Result<RuntimeDir> {
    private_dir_or_next_to(socket_dir())
}

/// `dir`, made private if needed, or (when it is not private) a new private
/// directory next to it.
fn private_dir_or_next_to(dir: PathBuf) -> std::io::Result<RuntimeDir> {
    let why = match ensure_private_dir(&dir) {
        Ok(()) => return Ok(RuntimeDir { path: dir, squatted: None }),
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => e.to_string(),
        Err(e) => return Err(e),
    };
    let (Some(parent), Some(base)) = (dir.parent(), dir.file_name()) else {
        return Err(std::io::Error::new(std::io::ErrorKind::PermissionDenied, why));
    };
    let mut random = std::fs::File::open("/dev/urandom")?;
    for _ in 0..16 {
        let mut suffix = [0u8; 8];
        std::io::Read::read_exact(&mut random, &mut suffix)?;
        let suffix: String = suffix.iter().map(|b| format!("{b:02x}")).collect();
        let path = parent.join(format!("{}-{suffix}", base.to_string_lossy()));
        // Made here or not at all: a name someone else took is skipped.
        match std::fs::DirBuilder::new().mode(0o700).create(&path) {
            Ok(()) => {
                check_private_dir(&path)?;
                return Ok(RuntimeDir { path, squatted: Some(why) });
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::AlreadyExists,
        format!("no free private directory next to {}", dir.display()),
    ))
}

/// Where the hub named `name` publishes the URL of its control API (its
/// TCP listener: the HTTP API is served there), next to its session socket
/// in the same private directory, so tools given `shm://NAME` can reach the
/// control plane too.
pub fn control_path(name: &str) -> Result<PathBuf, String> {
    control_path_in(&socket_dir(), name)
}

/// [`control_path`] for a hub whose session socket is in `dir`.
pub fn control_path_in(dir: &Path, name: &str) -> Result<PathBuf, String> {
    check_name(name)?;
    Ok(dir.join(format!("{name}.control")))
}

/// Create `dir` (mode 0700) if needed and check that it is private: a real
/// directory, owned by this user, with no access for group or others.
pub fn ensure_private_dir(dir: &Path) -> std::io::Result<()> {
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    check_private_dir(dir)
}

/// Check that `dir` is private: a real directory, owned by this user, with
/// no access for group or others. Clients check it before they connect, so
/// a socket another user planted there is never talked to.
pub fn check_private_dir(dir: &Path) -> std::io::Result<()> {
    let meta = std::fs::symlink_metadata(dir)?;
    let me = rustix::process::geteuid().as_raw();
    let refuse = |why: String| Err(std::io::Error::new(std::io::ErrorKind::PermissionDenied, why));
    if !meta.is_dir() {
        return refuse(format!("{} is not a directory", dir.display()));
    }
    if meta.uid() != me {
        return refuse(format!("{} belongs to user {}, not to this user ({me})", dir.display(), meta.uid()));
    }
    if meta.permissions().mode() & 0o077 != 0 {
        return refuse(format!(
            "{} is open to other users (mode {:o}); make it private with chmod 700",
            dir.display(),
            meta.permissions().mode() & 0o777
        ));
    }
    Ok(())
}

/// Check that the process at the other end of `socket` runs as this user,
/// before a token or anything else goes to it.
pub fn check_peer_is_this_user(socket: &UnixStream) -> std::io::Result<()> {
    let peer = rustix::net::sockopt::socket_peercred(socket)?;
    let me = rustix::process::geteuid();
    if peer.uid != me {
        return Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!(
                "the process serving this socket runs as user {}, not as this user ({})",
                peer.uid.as_raw(),
                me.as_raw()
            ),
        ));
    }
    Ok(())
}

/// Send `bytes` in one message with `fds` attached (`SCM_RIGHTS`).
pub fn send_with_fds(socket: &UnixStream, bytes: &[u8], fds: &[BorrowedFd<'_>]) -> std::io::Result<()> {
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(PASSED_FDS))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !control.push(SendAncillaryMessage::ScmRights(fds)) {
        return Err(std::io::Error::other("too many descriptors for one message"));
    }
    let sent = rustix::net::sendmsg(socket.as_fd(), &[IoSlice::new(bytes)], &mut control, SendFlags::NOSIGNAL)?;
    // The descriptors went with the first bytes; the rest may follow plainly.
    if sent < bytes.len() {
        use std::io::Write;
        (&*socket).write_all(&bytes[sent..])?;
    }
    Ok(())
}

/// Receive into `buf`, collecting descriptors that come along into `fds`
/// (at most [`PASSED_FDS`] per call; extra ones are closed). Returns the
/// byte count (0 at end of stream). Honours the socket's read timeout.
pub fn recv_with_fds(socket: &UnixStream, buf: &mut [u8], fds: &mut Vec<OwnedFd>) -> std::io::Result<usize> {
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(PASSED_FDS))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let received = loop {
        match rustix::net::recvmsg(socket.as_fd(), &mut [IoSliceMut::new(buf)], &mut control, RecvFlags::CMSG_CLOEXEC) {
            Err(rustix::io::Errno::INTR) => continue,
            other => break other?,
        }
    };
    for message in control.drain() {
        if let RecvAncillaryMessage::ScmRights(passed) = message {
            fds.extend(passed);
        }
    }
    Ok(received.bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_squatted_runtime_directory_gives_a_private_one_next_to_it() {
        use std::os::unix::fs::PermissionsExt;
        let base = std::env::temp_dir().join(format!("fieldhub-socket-test-{}", std::process::id()));
        std::fs::create_dir_all(&base).unwrap();
        // Not private: as another user's directory would be.
        let runtime = base.join("runtime");
        std::fs::create_dir_all(runtime.join("fieldhub")).unwrap();
        std::fs::set_permissions(runtime.join("fieldhub"), std::fs::Permissions::from_mode(0o777)).unwrap();
        let chosen = private_dir_or_next_to(runtime.join("fieldhub")).unwrap();
        let squatted = chosen.squatted.expect("the squatted directory is named");
        assert!(squatted.contains("open to other users"), "{squatted}");
        assert_ne!(chosen.path, base.join("runtime/fieldhub"));
        assert!(chosen.path.file_name().unwrap().to_string_lossy().starts_with("fieldhub-"));
        check_private_dir(&chosen.path).unwrap();
        let own = private_dir_or_next_to(chosen.path.clone()).unwrap();
        assert_eq!((own.path, own.squatted), (chosen.path, None), "a private directory is used as it is");
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn names_are_plain_file_names() {
        assert!(check_name("bench-1.a_b").is_ok());
        for bad in ["", ".hidden", "a/b", "..", "x y", &"n".repeat(65)] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn descriptors_travel_with_the_bytes() {
        let (a, b) = UnixStream::pair().unwrap();
        let (segment, fd) = crate::ClientSegment::create(crate::SegmentHeader::standard(9)).unwrap();
        let (_bell, bell_fd) = crate::BellSegment::create().unwrap();
        send_with_fds(&a, b"welcome", &[fd.as_fd(), bell_fd.as_fd()]).unwrap();
        let mut buf = [0u8; 16];
        let mut fds = Vec::new();
        let n = recv_with_fds(&b, &mut buf, &mut fds).unwrap();
        assert_eq!(&buf[..n], b"welcome");
        assert_eq!(fds.len(), 2);
        let opened = crate::ClientSegment::open(fds.remove(0)).unwrap();
        assert_eq!(opened.header(), segment.header());
        crate::BellSegment::open(fds.remove(0)).unwrap();
    }

    #[test]
    fn a_peer_of_this_user_passes_the_credentials_check() {
        let (a, _b) = UnixStream::pair().unwrap();
        check_peer_is_this_user(&a).unwrap();
    }

    #[test]
    fn a_shared_directory_is_refused() {
        let dir = std::env::temp_dir().join(format!("fieldhub-shm-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        let err = ensure_private_dir(&dir).unwrap_err();
        assert!(err.to_string().contains("chmod 700"), "{err}");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        ensure_private_dir(&dir).unwrap();
        std::fs::remove_dir(&dir).unwrap();
    }
}
