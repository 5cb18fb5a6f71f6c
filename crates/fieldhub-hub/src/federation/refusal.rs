//! What a refused federation link looks like, on either side, and what to
//! tell the user about it.
//!
//! Zenoh's user-password authentication refuses a link whose federation
//! token differs (or is missing). The hub that connects learns it from the
//! failed session (`link.rs` names the endpoint). The hub that listens
//! learns it only from an event Zenoh logs at debug level, without the
//! other hub's address, in its accept path: the binary's log setup passes
//! those events (target [`ACCEPT_LOG_TARGET`]) to [`RefusalLog`], whatever
//! the log filter, so a hub that only listens names the refusal too.
//!
//! Kept outside the `federation` feature: it depends on no Zenoh type, only
//! on the texts of Zenoh 1.10's errors, which the tests below pin.

use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The log target of Zenoh's accept path, where a refused link's reason is
/// logged (at debug level) on the side that listens.
pub const ACCEPT_LOG_TARGET: &str = "zenoh_transport::unicast::establishment::accept";

/// How often the side that listens repeats the refusal, with a count: a
/// hub that is refused tries again every few seconds.
const REPEAT_EVERY: Duration = Duration::from_secs(60);

/// Whether Zenoh's reason for a failed link is the other hub closing the
/// handshake at its authentication steps (`InitSyn`: this hub sent no
/// token; `OpenSyn`: another one), or this hub refusing the other's answer
/// (it sent none): the hubs do not share the federation token. A hub that
/// is not there refuses the connection, it closes no handshake.
pub(crate) fn refuses_token(why: &str) -> bool {
    let closed = why.contains("Received a close message") && (why.contains("OpenSyn") || why.contains("InitSyn"));
    closed || why.contains("UsrPwd")
}

/// Whether an event of [`ACCEPT_LOG_TARGET`] is this hub refusing another
/// hub's authentication: the user-password steps of the accept side
/// (`Recv InitSyn`: the other hub sent no token; `Recv OpenSyn`: another
/// token).
fn refused_at_accept(message: &str) -> bool {
    message.contains("UsrPwd extension - Recv")
}

/// What to do about `endpoint` refusing this hub's link.
pub(crate) fn refusal_fix(token_file: Option<&Path>, endpoint: &str) -> String {
    format!(
        "the hub at {endpoint} refused this hub's link: the two hubs' federation tokens differ (or one has \
         none). Every hub of the federation needs the same secret in the file [federation] token_file names \
         ({}); put the same secret in both files and restart the hub whose token was wrong",
        this_hubs(token_file)
    )
}

fn this_hubs(token_file: Option<&Path>) -> String {
    match token_file {
        Some(path) => format!("this hub's is {}", path.display()),
        None => "this hub names none and uses its user's own, ~/.config/fieldhub/federation.token or under \
                 $XDG_CONFIG_HOME"
            .into(),
    }
}

/// The refusals of the side that listens, told once and then at most once
/// a minute with the count since, so a hub retrying its link cannot flood
/// the log.
#[derive(Debug)]
pub struct RefusalLog {
    token_file: Option<std::path::PathBuf>,
    /// When the refusal was last told, and how many came since.
    told: Mutex<Option<(Instant, u64)>>,
}

impl RefusalLog {
    /// For a hub whose federation token is in `token_file` (`None`: it has
    /// none).
    pub fn new(token_file: Option<&Path>) -> RefusalLog {
        RefusalLog { token_file: token_file.map(Path::to_path_buf), told: Mutex::new(None) }
    }

    /// Take one event of [`ACCEPT_LOG_TARGET`] (its message) that arrived at
    /// `now`; the line to log when it is a refusal that is due to be told.
    pub fn take(&self, message: &str, now: Instant) -> Option<String> {
        if !refused_at_accept(message) {
            return None;
        }
        let mut told = self.told.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let since = match *told {
            Some((at, since)) if now < at + REPEAT_EVERY => {
                *told = Some((at, since + 1));
                return None;
            }
            Some((_, since)) => since,
            None => 0,
        };
        *told = Some((now, 0));
        let repeated = match since {
            0 => String::new(),
            n => format!(" ({n} more refused since the last report)"),
        };
        Some(format!(
            "another hub tried to link to this hub and was refused{repeated}: the two hubs' federation tokens \
             differ (or one has none). Every hub of the federation needs the same secret in the file \
             [federation] token_file names ({}); put the same secret in the other hub's file and restart it \
             (Zenoh: {message})",
            this_hubs(self.token_file.as_deref())
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handshake_closed_at_authentication_is_a_token_refused_and_a_closed_port_is_not() {
        // Zenoh 1.10's reasons, as `zenoh::open` returns them.
        let other_token =
            "Received a close message (reason GENERIC) in response to an OpenSyn on: TransportLinkUnicast";
        let no_token = "Received a close message (reason INVALID) in response to an InitSyn on: TransportLinkUnicast";
        let none_there = "Can not create a new TCP link bound to 127.0.0.1:7447: Connection refused (os error 111)";
        let unanswered = "UsrPwd extension - Recv OpenAck. Expected extension.";
        assert!(refuses_token(other_token) && refuses_token(no_token) && refuses_token(unanswered));
        assert!(!refuses_token(none_there));
    }

    #[test]
    fn a_refusal_on_the_listening_side_is_told_once_then_once_a_minute_with_the_count() {
        let log = RefusalLog::new(Some(Path::new("/etc/fieldhub/federation.token")));
        let t0 = Instant::now();
        // Zenoh 1.10's accept-side reasons: another token, and none.
        let other_token = "UsrPwd extension - Recv OpenSyn. Invalid password.";
        let no_token = "UsrPwd extension - Recv InitSyn. Expected extension.";
        let first = log.take(other_token, t0).expect("the first refusal is told");
        assert!(first.contains("/etc/fieldhub/federation.token") && first.contains("token_file"), "{first}");
        assert_eq!(log.take(no_token, t0 + Duration::from_secs(5)), None);
        assert_eq!(log.take(other_token, t0 + Duration::from_secs(30)), None);
        let again = log.take(no_token, t0 + REPEAT_EVERY).expect("told again after a minute");
        assert!(again.contains("2 more refused since the last report"), "{again}");
        assert_eq!(log.take("New transport link accepted from a to b", t0 + 2 * REPEAT_EVERY), None);
    }
}
