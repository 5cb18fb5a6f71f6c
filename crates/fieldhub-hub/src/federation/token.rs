//! The federation token of a hub whose `[federation]` names no
//! `token_file`: federation links are always authenticated, loopback
//! included, so such a hub uses its user's own token, made at its first
//! start.
//!
//! The token lives in `$XDG_CONFIG_HOME/fieldhub/federation.token` (else
//! `$HOME/.config/fieldhub/...`): every hub one user starts on this machine
//! finds the same secret, so hubs of one user federate with no setup, and a
//! hub of another user (who cannot read the file) cannot link. Hubs on
//! other machines need a copy of the file, named by `token_file`.
//!
//! Invariants: the directory is private (this user's, mode 0700) and the
//! file owner-only (0600) before a secret is read from it or written to
//! it; a new token appears whole or not at all (written to a temporary
//! file in the same directory, then linked in place without replacing
//! one that a hub starting at the same time made first).
//!
//! Linux-only: elsewhere (Windows) file modes say nothing of who may read
//! a file, so a hub there keeps no token of its own and needs `token_file`.

#[cfg(target_os = "linux")]
use std::io::Write;
#[cfg(target_os = "linux")]
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::error::FederationError;

/// The token file's name in the user's fieldhub configuration directory.
const FILE_NAME: &str = "federation.token";
/// Random bytes in a new token (written as hex).
#[cfg(target_os = "linux")]
const TOKEN_BYTES: usize = 32;

/// Where this user's own federation token is kept.
pub fn own_token_path() -> Result<PathBuf, FederationError> {
    let config = match std::env::var_os("XDG_CONFIG_HOME").map(PathBuf::from) {
        Some(dir) if dir.is_absolute() => dir,
        _ => match std::env::var_os("HOME").map(PathBuf::from) {
            Some(home) if home.is_absolute() => home.join(".config"),
            _ => return Err(FederationError::NoTokenPlace),
        },
    };
    Ok(config.join("fieldhub").join(FILE_NAME))
}

/// A hub's own token is Linux-only (see the module doc).
#[cfg(not(target_os = "linux"))]
pub fn own_token(path: &Path) -> Result<(String, bool), FederationError> {
    let why = format!("a hub on {} keeps no owner-only token of its own", std::env::consts::OS);
    Err(FederationError::OwnToken {
        path: path.to_owned(),
        error: std::io::Error::new(std::io::ErrorKind::Unsupported, why),
    })
}

/// This user's own federation token at `path` (see [`own_token_path`]),
/// made now if there is none; with whether it was made now.
#[cfg(target_os = "linux")]
pub fn own_token(path: &Path) -> Result<(String, bool), FederationError> {
    let fail = |error: std::io::Error| FederationError::OwnToken { path: path.to_owned(), error };
    let dir = path.parent().ok_or_else(|| fail(std::io::ErrorKind::InvalidInput.into()))?;
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir).map_err(fail)?;
    fieldhub_shm::socket::check_private_dir(dir).map_err(fail)?;
    match read_owner_only(path) {
        Ok(token) => return Ok((token, false)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(fail(e)),
    }
    let token = new_token().map_err(fail)?;
    let mut file = tempfile::Builder::new().prefix(".federation-token-").tempfile_in(dir).map_err(fail)?;
    writeln!(file, "{token}").and_then(|()| file.as_file().sync_all()).map_err(fail)?;
    match file.persist_noclobber(path) {
        Ok(_) => Ok((token, true)),
        // Another hub made it first: use that one.
        Err(e) if e.error.kind() == std::io::ErrorKind::AlreadyExists => {
            read_owner_only(path).map(|token| (token, false)).map_err(fail)
        }
        Err(e) => Err(fail(e.error)),
    }
}

/// The secret in `path`, which must be owner-only and hold one line.
#[cfg(target_os = "linux")]
fn read_owner_only(path: &Path) -> std::io::Result<String> {
    let file = std::fs::File::open(path)?;
    let mode = file.metadata()?.permissions().mode();
    if mode & 0o077 != 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!("it is open to other users (mode {:o}); make it owner-only with chmod 600", mode & 0o777),
        ));
    }
    let text = std::io::read_to_string(file)?;
    let token = text.trim_end_matches(['\n', '\r']);
    if token.is_empty() {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, "it is empty; delete it to make a new one"));
    }
    Ok(token.to_owned())
}

/// A new secret: [`TOKEN_BYTES`] from the kernel's random source, in hex.
#[cfg(target_os = "linux")]
fn new_token() -> std::io::Result<String> {
    let mut bytes = [0u8; TOKEN_BYTES];
    std::io::Read::read_exact(&mut std::fs::File::open("/dev/urandom")?, &mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::MetadataExt;

    use super::*;

    #[test]
    fn the_first_start_makes_an_owner_only_token_in_a_private_directory_and_later_ones_reuse_it() {
        let home = tempfile::tempdir().unwrap();
        let path = home.path().join("config/fieldhub").join(FILE_NAME);
        let (made, new) = own_token(&path).unwrap();
        assert!(new && made.len() == 2 * TOKEN_BYTES, "{made}");
        assert_eq!(std::fs::metadata(&path).unwrap().mode() & 0o777, 0o600);
        assert_eq!(std::fs::metadata(path.parent().unwrap()).unwrap().mode() & 0o777, 0o700);
        assert_eq!(own_token(&path).unwrap(), (made, false), "the same secret next time");
    }

    #[test]
    fn a_token_file_open_to_others_or_a_directory_open_to_others_is_refused() {
        let home = tempfile::tempdir().unwrap();
        let path = home.path().join("fieldhub").join(FILE_NAME);
        own_token(&path).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let text = own_token(&path).unwrap_err().to_string();
        assert!(text.contains("chmod 600") && text.contains(&path.display().to_string()), "{text}");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::set_permissions(path.parent().unwrap(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let text = own_token(&path).unwrap_err().to_string();
        assert!(text.contains("chmod 700"), "{text}");
    }
}
