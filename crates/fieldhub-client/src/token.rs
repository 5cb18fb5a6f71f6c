//! Where a token comes from when the program does not give one: the
//! environment, never the command line (where every local user reads it in
//! `ps`).
//!
//! - `FIELDHUB_TOKEN`: the token itself.
//! - `FIELDHUB_TOKEN_FILE`: a file holding it (one line; a trailing line
//!   break is not part of it). The file must not be readable by other users,
//!   as ssh insists for its keys: a token others can read protects nothing.
//!
//! The hub (`fieldhub hub --token-file`) and every client (Rust, C, Python,
//! the tools) read the same variables the same way.

use std::path::{Path, PathBuf};

/// The variable holding a token.
pub const TOKEN_VAR: &str = "FIELDHUB_TOKEN";
/// The variable naming a file that holds a token.
pub const TOKEN_FILE_VAR: &str = "FIELDHUB_TOKEN_FILE";

/// Why a token file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TokenFileError {
    #[error("cannot read the token file {}: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error(
        "the token file {} is readable by other users (mode {mode:03o}); make it private: chmod 600 {}",
        path.display(),
        path.display()
    )]
    Exposed { path: PathBuf, mode: u32 },
    #[error("the token file {} is empty; put the token on its first line", path.display())]
    Empty { path: PathBuf },
}

/// The token in `path`: its content without the trailing line break.
pub fn read_token_file(path: &Path) -> Result<String, TokenFileError> {
    let read = |source| TokenFileError::Read { path: path.to_owned(), source };
    let file = std::fs::File::open(path).map_err(read)?;
    if let Some(mode) = crate::file_mode::open_to_others(&file.metadata().map_err(read)?) {
        return Err(TokenFileError::Exposed { path: path.to_owned(), mode });
    }
    let text = std::io::read_to_string(file).map_err(read)?;
    let token = text.strip_suffix('\n').map_or(text.as_str(), |t| t.strip_suffix('\r').unwrap_or(t));
    if token.is_empty() {
        return Err(TokenFileError::Empty { path: path.to_owned() });
    }
    Ok(token.to_owned())
}

/// The token the environment gives: `FIELDHUB_TOKEN`, else the content of
/// `FIELDHUB_TOKEN_FILE`, else none.
pub fn token_from_environment() -> Result<Option<String>, TokenFileError> {
    if let Some(token) = std::env::var(TOKEN_VAR).ok().filter(|t| !t.is_empty()) {
        return Ok(Some(token));
    }
    match std::env::var_os(TOKEN_FILE_VAR).filter(|p| !p.is_empty()) {
        Some(path) => read_token_file(Path::new(&path)).map(Some),
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file holding `content` with `mode`, removed when dropped.
    struct TokenFile(PathBuf);

    impl Drop for TokenFile {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    fn token_file(content: &str, mode: u32) -> (TokenFile, PathBuf) {
        use std::sync::atomic::{AtomicU32, Ordering};
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let name = format!("fieldhub-token-test-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        let path = std::env::temp_dir().join(name);
        std::fs::write(&path, content).unwrap();
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(mode)).unwrap();
        (TokenFile(path.clone()), path)
    }

    #[test]
    fn a_private_file_gives_its_first_line_without_the_line_break() {
        let (_dir, path) = token_file("sesame\n", 0o600);
        assert_eq!(read_token_file(&path).unwrap(), "sesame");
        let (_dir, path) = token_file("open sesame\r\n", 0o400);
        assert_eq!(read_token_file(&path).unwrap(), "open sesame");
    }

    #[test]
    fn a_file_others_can_read_is_refused_saying_how_to_fix_it() {
        let (_dir, path) = token_file("sesame\n", 0o644);
        let err = read_token_file(&path).unwrap_err();
        assert!(matches!(err, TokenFileError::Exposed { mode: 0o644, .. }));
        assert!(err.to_string().contains(&format!("chmod 600 {}", path.display())), "{err}");
    }

    #[test]
    fn an_empty_or_missing_file_is_an_error_naming_it() {
        let (_dir, path) = token_file("\n", 0o600);
        assert!(matches!(read_token_file(&path), Err(TokenFileError::Empty { .. })));
        let missing = std::env::temp_dir().join("fieldhub-token-test-nothing-here");
        let err = read_token_file(&missing).unwrap_err();
        assert!(err.to_string().contains("nothing-here"), "{err}");
    }
}
