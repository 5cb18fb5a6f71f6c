//! Who a client is, by the token it presents — one rule for frame sessions
//! on every transport and for the control API.
//!
//! A hub without a token lets every client in with full access (shared
//! memory and unix sockets are then guarded by file modes alone; see
//! `docs/security.md`). With a token, a client presenting it has full
//! access; one presenting the monitor token (`[hub] monitor_token`) may
//! receive and read, never transmit or change anything; anyone else is
//! refused. Comparisons take the same time whatever prefix matches.

/// What a client may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Send, receive, control.
    Full,
    /// Receive frames and read the control API: the monitor token.
    ReadOnly,
}

/// The hub's tokens.
#[derive(Clone, Debug, Default)]
pub struct Credentials {
    token: Option<String>,
    monitor_token: Option<String>,
}

impl Credentials {
    /// A monitor token without a token would guard nothing: the
    /// configuration refuses it (`config.rs`), so it is ignored here.
    pub fn new(token: Option<String>, monitor_token: Option<String>) -> Self {
        let monitor_token = monitor_token.filter(|_| token.is_some());
        Self { token, monitor_token }
    }

    /// Whether clients must present a token at all.
    pub fn required(&self) -> bool {
        self.token.is_some()
    }

    /// The access `presented` gives, `None` when it gives none.
    pub fn access(&self, presented: &str) -> Option<Access> {
        let Some(token) = &self.token else { return Some(Access::Full) };
        if constant_time_eq(token.as_bytes(), presented.as_bytes()) {
            return Some(Access::Full);
        }
        let monitor = self.monitor_token.as_ref()?;
        constant_time_eq(monitor.as_bytes(), presented.as_bytes()).then_some(Access::ReadOnly)
    }
}

/// Compare secrets without an early exit that would leak their common prefix.
pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_token_everyone_has_full_access() {
        let open = Credentials::new(None, None);
        assert!(!open.required());
        assert_eq!(open.access(""), Some(Access::Full));
        assert_eq!(open.access("anything"), Some(Access::Full));
    }

    #[test]
    fn the_token_gives_full_access_the_monitor_token_read_only_and_anything_else_none() {
        let creds = Credentials::new(Some("sesame".into()), Some("look".into()));
        assert!(creds.required());
        assert_eq!(creds.access("sesame"), Some(Access::Full));
        assert_eq!(creds.access("look"), Some(Access::ReadOnly));
        assert_eq!(creds.access(""), None);
        assert_eq!(creds.access("sesam"), None);
        assert_eq!(creds.access("looking"), None);
    }

    #[test]
    fn a_monitor_token_without_a_token_is_ignored() {
        let creds = Credentials::new(None, Some("look".into()));
        assert_eq!(creds.access(""), Some(Access::Full));
    }
}
