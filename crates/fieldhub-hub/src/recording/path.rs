//! Where hub-side recordings may be written: only inside `[hub] recordings_dir`.
//!
//! The control API is reachable by web pages and local users, so a recording's
//! `path` is untrusted. Invariants: [`resolve`] returns a path inside the
//! canonical recordings directory — never for an absolute path, a `..`
//! component, or a parent directory that leads out through a symbolic link —
//! and never for an existing symbolic link, non-regular file (FIFO, device,
//! socket, directory) or a file with more than one hard link (the other name
//! may lie outside the directory). [`create`] and [`read`] then open that
//! path one component at a time from `/`, each directory relative to its
//! parent's descriptor and nothing with a symbolic link followed, without
//! blocking, and check what they opened (a regular file with one link)
//! before they truncate or read it, so a name swapped between the two steps
//! is refused rather than written, read or waited on.
//!
//! Linux-only: elsewhere (Windows) the hub has no such safe open, so it
//! refuses every recording path ([`RecordingPathError::LinuxOnly`]);
//! clients record with `fieldhub record` on their side.

use std::fs::File;
#[cfg(target_os = "linux")]
use std::os::unix::fs::{FileTypeExt, MetadataExt};
#[cfg(target_os = "linux")]
use std::path::Component;
use std::path::{Path, PathBuf};

#[cfg(target_os = "linux")]
use rustix::fs::{Mode, OFlags};

/// Why a recording path was refused; each says what the API takes instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordingPathError {
    #[error(
        "path '{0}' names no file; give a file name such as \"session.log\", relative to the recordings directory"
    )]
    NoFile(String),
    #[error("path {0:?} contains a NUL character, which no file name can hold")]
    Nul(String),
    #[error("path '{0}' is absolute; give a path relative to the hub's recordings directory ([hub] recordings_dir)")]
    Absolute(String),
    #[error("path '{0}' contains '..'; give a path inside the hub's recordings directory ([hub] recordings_dir)")]
    ParentDir(String),
    #[error("path '{0}' leads outside the hub's recordings directory through a symbolic link")]
    Escapes(String),
    #[error("path '{0}' is a symbolic link; recordings are written to regular files only")]
    Symlink(String),
    #[error("path '{path}' is {kind}, not a regular file; recordings are written to regular files only")]
    NotRegular { path: String, kind: &'static str },
    #[error(
        "path '{path}' has {links} hard links; recordings use files with one name only (another name may lie \
         outside the recordings directory): remove it or choose another name"
    )]
    HardLink { path: String, links: u64 },
    #[error("path '{path}': its directory is not in the recordings directory ({error}); create it first")]
    NoDirectory { path: String, error: String },
    #[error("the recordings directory '{dir}' cannot be used ({error}); check [hub] recordings_dir")]
    Unusable { dir: String, error: String },
    #[error(
        "path '{0}': a hub on {os} writes no recordings (the hub's recordings are Linux-only); record on the \
         client's side with fieldhub record",
        os = std::env::consts::OS
    )]
    LinuxOnly(String),
}

/// Recordings by the hub are Linux-only (see the module doc).
#[cfg(not(target_os = "linux"))]
pub fn resolve(_dir: &Path, requested: &str) -> Result<PathBuf, RecordingPathError> {
    Err(RecordingPathError::LinuxOnly(requested.into()))
}

/// Recordings by the hub are Linux-only (see the module doc).
#[cfg(not(target_os = "linux"))]
pub fn create(path: &Path) -> std::io::Result<File> {
    let refused = RecordingPathError::LinuxOnly(path.display().to_string());
    Err(std::io::Error::new(std::io::ErrorKind::Unsupported, refused))
}

/// Recordings by the hub are Linux-only (see the module doc).
#[cfg(not(target_os = "linux"))]
pub fn read(path: &Path, _limit: u64) -> std::io::Result<Vec<u8>> {
    let refused = RecordingPathError::LinuxOnly(path.display().to_string());
    Err(std::io::Error::new(std::io::ErrorKind::Unsupported, refused))
}

#[cfg(target_os = "linux")]
/// The file `requested` names inside `dir` (created if missing), checked as
/// the module doc says.
pub fn resolve(dir: &Path, requested: &str) -> Result<PathBuf, RecordingPathError> {
    if requested.contains('\0') {
        return Err(RecordingPathError::Nul(requested.into()));
    }
    let relative = Path::new(requested);
    if relative.is_absolute() {
        return Err(RecordingPathError::Absolute(requested.into()));
    }
    if relative.components().any(|c| c == Component::ParentDir) {
        return Err(RecordingPathError::ParentDir(requested.into()));
    }
    let name = match relative.components().next_back() {
        Some(Component::Normal(name)) => name,
        _ => return Err(RecordingPathError::NoFile(requested.into())),
    };
    let unusable = |error: std::io::Error| RecordingPathError::Unusable {
        dir: dir.display().to_string(),
        error: error.to_string(),
    };
    std::fs::create_dir_all(dir).map_err(unusable)?;
    let root = dir.canonicalize().map_err(unusable)?;
    let parent = root.join(relative.parent().unwrap_or(Path::new("")));
    let parent = parent
        .canonicalize()
        .map_err(|e| RecordingPathError::NoDirectory { path: requested.into(), error: e.to_string() })?;
    if !parent.starts_with(&root) {
        return Err(RecordingPathError::Escapes(requested.into()));
    }
    let file = parent.join(name);
    match std::fs::symlink_metadata(&file) {
        Ok(meta) if meta.file_type().is_symlink() => Err(RecordingPathError::Symlink(requested.into())),
        Ok(meta) if !meta.is_file() => {
            Err(RecordingPathError::NotRegular { path: requested.into(), kind: kind_of(meta.file_type()) })
        }
        Ok(meta) if meta.nlink() > 1 => {
            Err(RecordingPathError::HardLink { path: requested.into(), links: meta.nlink() })
        }
        _ => Ok(file),
    }
}

#[cfg(target_os = "linux")]
fn kind_of(kind: std::fs::FileType) -> &'static str {
    if kind.is_dir() {
        "a directory"
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_char_device() || kind.is_block_device() {
        "a device"
    } else if kind.is_socket() {
        "a socket"
    } else {
        "a special file"
    }
}

#[cfg(target_os = "linux")]
/// Create or truncate the regular file at `path` (from [`resolve`]),
/// opened as the module doc says; truncated only once it is known to be a
/// regular file with one link.
pub fn create(path: &Path) -> std::io::Result<File> {
    let file = open_beneath(path, OFlags::WRONLY | OFlags::CREATE)?;
    checked(&file)?;
    file.set_len(0)?;
    Ok(file)
}

#[cfg(target_os = "linux")]
/// Read the regular file at `path` (from [`resolve`]), at most `limit`
/// bytes: opened as [`create`] opens, so a download is held to the same
/// rules as a recording.
pub fn read(path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let file = open_beneath(path, OFlags::RDONLY)?;
    let meta = checked(&file)?;
    if meta.len() > limit {
        return Err(std::io::Error::other(format!(
            "the file is larger than {limit} bytes; read it on the hub's machine"
        )));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(limit).read_to_end(&mut bytes)?;
    Ok(bytes)
}

#[cfg(target_os = "linux")]
/// Open the absolute `path` with `access`: every directory on the way
/// relative to its parent's descriptor, and nothing a symbolic link; no
/// truncation, and no waiting on a FIFO (O_NONBLOCK).
fn open_beneath(path: &Path, access: OFlags) -> std::io::Result<File> {
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(std::io::Error::other("names no file"));
    };
    let mut dir = rustix::fs::open("/", OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty())?;
    for component in parent.components() {
        match component {
            Component::RootDir => {}
            Component::Normal(part) => {
                let flags = OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::RDONLY | OFlags::CLOEXEC;
                dir = rustix::fs::openat(&dir, part, flags, Mode::empty())?;
            }
            _ => return Err(std::io::Error::other("the path is not a resolved recording path")),
        }
    }
    let flags = access | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    Ok(File::from(rustix::fs::openat(&dir, name, flags, Mode::from_raw_mode(0o644))?))
}

#[cfg(target_os = "linux")]
/// What was opened is a regular file with one link: its metadata.
fn checked(file: &File) -> std::io::Result<std::fs::Metadata> {
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::other("not a regular file; recordings are regular files only"));
    }
    if meta.nlink() > 1 {
        return Err(std::io::Error::other(format!(
            "the file has {} hard links; recordings use files with one name only",
            meta.nlink()
        )));
    }
    Ok(meta)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("fieldhub-recpath-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("rec/sub")).unwrap();
        dir
    }

    #[test]
    fn read_gives_a_regular_file_and_refuses_a_symbolic_link_or_a_big_file() {
        let dir = scratch("read");
        let file = resolve(&dir.join("rec"), "r.log").unwrap();
        std::fs::write(&file, "(1.000000) can0 123#11\n").unwrap();
        assert_eq!(read(&file, 1024).unwrap(), b"(1.000000) can0 123#11\n");
        assert!(read(&file, 4).is_err(), "larger than the limit");
        std::os::unix::fs::symlink(&file, dir.join("rec/link.log")).unwrap();
        assert!(read(&dir.join("rec/link.log"), 1024).is_err(), "a symbolic link is not followed");
    }

    #[test]
    fn a_relative_path_resolves_inside_the_directory_and_is_created_there() {
        let dir = scratch("good");
        let root = dir.join("rec").canonicalize().unwrap();
        assert_eq!(resolve(&dir.join("rec"), "a.log").unwrap(), root.join("a.log"));
        let path = resolve(&dir.join("rec"), "./sub/b.asc").unwrap();
        assert_eq!(path, root.join("sub/b.asc"));
        std::fs::write(&path, "old").unwrap();
        create(&path).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"", "an existing regular file is truncated");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_missing_recordings_directory_is_created() {
        let dir = scratch("missing");
        assert!(resolve(&dir.join("new/deeper"), "x.log").is_ok());
        assert!(dir.join("new/deeper").is_dir());
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn absolute_parent_and_empty_paths_are_refused() {
        let dir = scratch("lexical");
        let rec = dir.join("rec");
        assert!(matches!(resolve(&rec, "/etc/passwd"), Err(RecordingPathError::Absolute(_))));
        assert!(matches!(resolve(&rec, "/proc/self/mem"), Err(RecordingPathError::Absolute(_))));
        assert!(matches!(resolve(&rec, "../x.log"), Err(RecordingPathError::ParentDir(_))));
        assert!(matches!(resolve(&rec, "sub/../../x.log"), Err(RecordingPathError::ParentDir(_))));
        assert!(matches!(resolve(&rec, ""), Err(RecordingPathError::NoFile(_))));
        assert!(matches!(resolve(&rec, "."), Err(RecordingPathError::NoFile(_))));
        assert!(matches!(resolve(&rec, "a\0b.log"), Err(RecordingPathError::Nul(_))));
        assert!(matches!(resolve(&rec, "nowhere/x.log"), Err(RecordingPathError::NoDirectory { .. })));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn symbolic_links_out_of_the_directory_are_refused() {
        let dir = scratch("links");
        let rec = dir.join("rec");
        std::os::unix::fs::symlink(&dir, rec.join("out")).unwrap();
        std::os::unix::fs::symlink(dir.join("victim"), rec.join("link.log")).unwrap();
        assert!(matches!(resolve(&rec, "out/x.log"), Err(RecordingPathError::Escapes(_))));
        assert!(matches!(resolve(&rec, "link.log"), Err(RecordingPathError::Symlink(_))));
        assert!(create(&rec.join("link.log")).is_err(), "opening does not follow a link either");
        assert!(!dir.join("victim").exists());
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_hard_link_is_neither_truncated_nor_read_and_its_other_name_keeps_its_bytes() {
        let dir = scratch("hardlink");
        let outside = dir.join("outside.txt");
        std::fs::write(&outside, "eighteen bytes ok\n").unwrap();
        std::fs::hard_link(&outside, dir.join("rec/linked.log")).unwrap();
        let refused = resolve(&dir.join("rec"), "linked.log").unwrap_err();
        assert_eq!(refused, RecordingPathError::HardLink { path: "linked.log".into(), links: 2 });
        assert!(refused.to_string().contains("choose another name"), "{refused}");
        // The same checks hold when the link appears after `resolve`.
        let path = dir.join("rec").canonicalize().unwrap().join("linked.log");
        assert!(create(&path).unwrap_err().to_string().contains("hard links"));
        assert!(read(&path, 1024).unwrap_err().to_string().contains("hard links"));
        assert_eq!(std::fs::read(&outside).unwrap(), b"eighteen bytes ok\n", "the other name kept its bytes");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_directory_swapped_for_a_symbolic_link_after_resolve_is_not_followed() {
        let dir = scratch("swap");
        let rec = dir.join("rec");
        let path = resolve(&rec, "sub/x.log").unwrap();
        std::fs::remove_dir(rec.join("sub")).unwrap();
        std::fs::create_dir(dir.join("elsewhere")).unwrap();
        std::os::unix::fs::symlink(dir.join("elsewhere"), rec.join("sub")).unwrap();
        assert!(create(&path).is_err(), "the swapped directory is a link: refused");
        assert!(!dir.join("elsewhere/x.log").exists());
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn fifos_and_directories_are_refused_and_a_fifo_is_never_waited_on() {
        let dir = scratch("special");
        let rec = dir.join("rec");
        let fifo = rec.join("pipe.log");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let refused = resolve(&rec, "pipe.log").unwrap_err();
        assert_eq!(refused, RecordingPathError::NotRegular { path: "pipe.log".into(), kind: "a FIFO" });
        assert!(create(&fifo).is_err(), "no reader: the open fails at once");
        let dir_refused = resolve(&rec, "sub").unwrap_err();
        assert!(matches!(dir_refused, RecordingPathError::NotRegular { kind: "a directory", .. }));
        std::fs::remove_dir_all(dir).unwrap();
    }
}
