//! `fieldhub_shm::socket` on Windows: no hub serves shared memory here, so
//! there is no session socket directory. The default hub is then the local
//! TCP port (`url::default_hub_url`), and `shm://NAME` parses (the name
//! matters only where shared memory exists) but its connection is refused
//! with `ClientError::Unsupported`.

use std::io;
use std::path::PathBuf;

const LINUX_ONLY: &str = "shared memory (shm://) is Linux-only; connect over tcp:// or tls://";

pub(crate) fn check_name(_name: &str) -> Result<(), String> {
    Ok(())
}

pub(crate) fn socket_dir() -> PathBuf {
    PathBuf::new()
}

pub(crate) fn check_private_dir(_dir: &std::path::Path) -> io::Result<()> {
    Err(io::Error::new(io::ErrorKind::Unsupported, LINUX_ONLY))
}

pub(crate) fn socket_path(_name: &str) -> Result<PathBuf, String> {
    Err(LINUX_ONLY.into())
}

pub(crate) fn control_path(_name: &str) -> Result<PathBuf, String> {
    Err(LINUX_ONLY.into())
}

pub(crate) fn control_path_in(_dir: &std::path::Path, _name: &str) -> Result<PathBuf, String> {
    Err(LINUX_ONLY.into())
}
