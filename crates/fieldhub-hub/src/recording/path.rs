//! Where hub-side recordings may be written: only inside `[hub] recordings_dir`.
//!
//! The control API is reachable by web pages and local users, so a recording's
//! `path` is untrusted. Invariants: [`resolve`] returns a path inside the
//! canonical recordings directory — never for an absolute path, a `..`
//! component, or a parent directory that leads out through a symbolic link —
//! and never for an existing symbolic link or non-regular file (FIFO, device,
//! socket, directory). [`create`] then opens that path without following a
//! symbolic link and without blocking, and writes only to a regular file, so
//! a file swapped between the two steps is refused rather than written or
//! waited on.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};

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
    #[error("path '{path}': its directory is not in the recordings directory ({error}); create it first")]
    NoDirectory { path: String, error: String },
    #[error("the recordings directory '{dir}' cannot be used ({error}); check [hub] recordings_dir")]
    Unusable { dir: String, error: String },
}

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
        _ => Ok(file),
    }
}

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

/// Create or truncate the regular file at `path` (from [`resolve`]).
pub fn create(path: &Path) -> std::io::Result<File> {
    // No O_TRUNC: the file is truncated only once it is known to be regular.
    // O_NONBLOCK: opening a FIFO without a reader fails instead of waiting.
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .custom_flags(libc_flags::NOFOLLOW | libc_flags::NONBLOCK)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::other("not a regular file; recordings are written to regular files only"));
    }
    file.set_len(0)?;
    Ok(file)
}

/// Read the regular file at `path` (from [`resolve`]), at most `limit`
/// bytes: opened like [`create`] opens, without following a symbolic link
/// and without blocking, so a download is held to the same rules as a
/// recording.
pub fn read(path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let file = OpenOptions::new().read(true).custom_flags(libc_flags::NOFOLLOW | libc_flags::NONBLOCK).open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    if meta.len() > limit {
        return Err(std::io::Error::other(format!(
            "the file is larger than {limit} bytes; read it on the hub's machine"
        )));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(limit).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// The open(2) flags [`create`] adds, from rustix so the hub needs no libc.
mod libc_flags {
    pub const NOFOLLOW: i32 = rustix::fs::OFlags::NOFOLLOW.bits() as i32;
    pub const NONBLOCK: i32 = rustix::fs::OFlags::NONBLOCK.bits() as i32;
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
