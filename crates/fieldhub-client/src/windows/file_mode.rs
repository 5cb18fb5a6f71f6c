//! Whether a file is open to other users, on Windows: there is no mode to
//! read. Who may read a file is its access control list, which files under
//! a user's profile inherit from it (the user, SYSTEM and administrators
//! only); docs/windows.md says to keep the token file there.

/// Never a mode to report.
pub(crate) fn open_to_others(_metadata: &std::fs::Metadata) -> Option<u32> {
    None
}
