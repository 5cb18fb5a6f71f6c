//! Whether a file is open to other users (the token file's check,
//! `token.rs`): on Linux, its mode. `windows/file_mode.rs` stands in on
//! Windows.

use std::os::unix::fs::PermissionsExt;

/// The file's permission bits when group or others have any of them.
pub(crate) fn open_to_others(metadata: &std::fs::Metadata) -> Option<u32> {
    let mode = metadata.permissions().mode();
    (mode & 0o077 != 0).then_some(mode & 0o777)
}
