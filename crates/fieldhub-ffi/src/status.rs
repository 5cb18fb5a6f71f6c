//! Status codes: every `fh_` function that can fail returns one of these as
//! an `int`. Codes are stable (part of the ABI): a new failure gets a new
//! code, existing codes never change meaning.

use std::ffi::{c_char, c_int, CStr};

use fieldhub_client::tls::TlsError;
use fieldhub_client::url::{forms_text, forms_text_len};
use fieldhub_client::{ClientError, ErrorCode};

/// Result of an `fh_` call. Functions return it as `int`; `FH_OK` is 0 and
/// every failure is negative. `fh_strerror` turns any value into a message.
#[repr(C)]
#[allow(non_camel_case_types, clippy::enum_variant_names)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum fh_status {
    /// Success.
    FH_OK = 0,
    /// A pointer was NULL, a string was not UTF-8, a flag unknown, a size too small, or the
    /// token file `FIELDHUB_TOKEN_FILE` names cannot be used (missing, empty, readable by others).
    FH_ERR_INVALID_ARGUMENT = -1,
    /// The hub URL is none of `tcp://HOST:PORT`, `tls://HOST:PORT`,
    /// `unix:PATH`, `shm://NAME`, `ivshmem://PATH` and `serial:PATH`.
    FH_ERR_INVALID_URL = -2,
    /// Nothing answered at the hub's address (is `fieldhub hub` running?).
    FH_ERR_CONNECT = -3,
    /// The hub refused the connection (wrong or missing token, version, hub full).
    FH_ERR_REFUSED = -4,
    /// The connection to the hub has ended; close the client and connect again.
    FH_ERR_CLOSED = -5,
    /// The timeout passed: nothing to receive, no room to send or to queue a
    /// request, or no answer. The connection is still open.
    FH_ERR_TIMEOUT = -6,
    /// The client handle has not been connected (`fh_connect`).
    FH_ERR_NOT_CONNECTED = -7,
    /// The hub has no channel of that name.
    FH_ERR_UNKNOWN_CHANNEL = -8,
    /// The client already has the maximum number of ports open (32).
    FH_ERR_TOO_MANY_PORTS = -9,
    /// A port of that name is already open on the hub.
    FH_ERR_PORT_NAME_TAKEN = -10,
    /// The port handle is not open on this client.
    FH_ERR_PORT_NOT_OPEN = -11,
    /// The frame is not valid: identifier range, length, flags (details in the last error).
    FH_ERR_INVALID_FRAME = -12,
    /// The hub rejected a request for another reason (details in the last error).
    FH_ERR_REJECTED = -13,
    /// The hub and this library disagree on the protocol (details in the last error).
    FH_ERR_PROTOCOL = -14,
    /// A bug inside libfieldhub was caught before it could crash the program.
    FH_ERR_INTERNAL = -15,
    /// Frames this client sent are off the bus: the hub dropped them (a
    /// controller bus-off, a fault rule, a lost federation owner, an
    /// unplugged port) and said so; the last error says which port, how
    /// many and why. Returned by `fh_flush`.
    FH_ERR_DROPPED = -16,
}

use fh_status::*;

/// Every code.
const ALL: [fh_status; 17] = [
    FH_OK,
    FH_ERR_INVALID_ARGUMENT,
    FH_ERR_INVALID_URL,
    FH_ERR_CONNECT,
    FH_ERR_REFUSED,
    FH_ERR_CLOSED,
    FH_ERR_TIMEOUT,
    FH_ERR_NOT_CONNECTED,
    FH_ERR_UNKNOWN_CHANNEL,
    FH_ERR_TOO_MANY_PORTS,
    FH_ERR_PORT_NAME_TAKEN,
    FH_ERR_PORT_NOT_OPEN,
    FH_ERR_INVALID_FRAME,
    FH_ERR_REJECTED,
    FH_ERR_PROTOCOL,
    FH_ERR_INTERNAL,
    FH_ERR_DROPPED,
];

impl fh_status {
    /// The static message for this code.
    pub fn message(self) -> &'static CStr {
        match self {
            FH_OK => c"success",
            FH_ERR_INVALID_ARGUMENT => c"invalid argument",
            FH_ERR_INVALID_URL => INVALID_URL_MESSAGE,
            FH_ERR_CONNECT => c"cannot reach the hub (is `fieldhub hub` running at that address?)",
            FH_ERR_REFUSED => c"the hub refused the connection",
            FH_ERR_CLOSED => c"the connection to the hub is closed",
            FH_ERR_TIMEOUT => c"timed out (nothing received, no room to send, or no answer in time); still connected",
            FH_ERR_NOT_CONNECTED => c"the client is not connected (call fh_connect first)",
            FH_ERR_UNKNOWN_CHANNEL => c"the hub has no channel of that name",
            FH_ERR_TOO_MANY_PORTS => c"too many ports open on this client",
            FH_ERR_PORT_NAME_TAKEN => c"a port of that name is already open on the hub",
            FH_ERR_PORT_NOT_OPEN => c"the port is not open on this client",
            FH_ERR_INVALID_FRAME => c"invalid frame",
            FH_ERR_REJECTED => c"the hub rejected the request",
            FH_ERR_PROTOCOL => c"protocol error talking to the hub",
            FH_ERR_INTERNAL => c"internal error in libfieldhub (a bug; please report it)",
            FH_ERR_DROPPED => c"the hub dropped frames this client sent (fh_last_error says which and why)",
        }
    }

    /// The code for an `int`, if it is one.
    pub fn from_int(code: c_int) -> Option<Self> {
        ALL.into_iter().find(|s| *s as c_int == code)
    }
}

/// `FH_ERR_INVALID_URL`'s message. Its list of URL forms is put together at
/// compile time from the client's table (`fieldhub_client::url::SCHEMES`),
/// so the C text never lists other forms than the client parses.
const INVALID_URL_MESSAGE: &CStr = {
    const BEFORE: &str = "invalid hub URL (expected ";
    const AFTER: &str = ")\0";
    const TEXT: [u8; forms_text_len(BEFORE, AFTER)] = forms_text(BEFORE, AFTER);
    match CStr::from_bytes_with_nul(&TEXT) {
        Ok(text) => text,
        Err(_) => panic!("a hub URL form holds a NUL"),
    }
};

/// Message for a value that is no `fh_status`.
pub const UNKNOWN_CODE_MESSAGE: &CStr = c"unknown fieldhub status code";

/// A failed call: its code and, where there is more to say than the code's
/// own message, the details for `fh_last_error`.
#[derive(Debug)]
pub struct Failure {
    pub status: fh_status,
    pub detail: Option<String>,
}

impl Failure {
    pub fn new(status: fh_status, detail: impl Into<String>) -> Self {
        Self { status, detail: Some(detail.into()) }
    }

    /// A failure the code's message describes fully. Costs no allocation,
    /// which matters for `FH_ERR_TIMEOUT` in polling loops.
    pub fn bare(status: fh_status) -> Self {
        Self { status, detail: None }
    }

    pub fn invalid_argument(detail: impl Into<String>) -> Self {
        Self::new(FH_ERR_INVALID_ARGUMENT, detail)
    }
}

impl From<ClientError> for Failure {
    fn from(error: ClientError) -> Self {
        let status = match &error {
            // A transport this platform lacks (shm:// on Windows): the URL is the caller's to change.
            ClientError::Unsupported { .. } => FH_ERR_INVALID_ARGUMENT,
            ClientError::InvalidUrl { .. } => FH_ERR_INVALID_URL,
            ClientError::Connect { .. } => FH_ERR_CONNECT,
            ClientError::Refused { .. } => FH_ERR_REFUSED,
            ClientError::Rejected { .. } => match error.code() {
                Some(ErrorCode::UnknownChannel) => FH_ERR_UNKNOWN_CHANNEL,
                Some(ErrorCode::TooManyPorts) => FH_ERR_TOO_MANY_PORTS,
                Some(ErrorCode::PortNameTaken) => FH_ERR_PORT_NAME_TAKEN,
                Some(ErrorCode::PortNotOpen) => FH_ERR_PORT_NOT_OPEN,
                Some(ErrorCode::InvalidFrame) => FH_ERR_INVALID_FRAME,
                _ => FH_ERR_REJECTED,
            },
            ClientError::Closed { .. } => FH_ERR_CLOSED,
            ClientError::Timeout(_) | ClientError::SendQueueFull(_) | ClientError::RequestQueueFull(_) => {
                FH_ERR_TIMEOUT
            }
            ClientError::PortNotOpen(_) => FH_ERR_PORT_NOT_OPEN,
            ClientError::FrameNotAllowed { .. } => FH_ERR_INVALID_FRAME,
            ClientError::Protocol(_) => FH_ERR_PROTOCOL,
            // The environment's token file (FIELDHUB_TOKEN_FILE) is the caller's setup.
            ClientError::TokenFile(_) => FH_ERR_INVALID_ARGUMENT,
            // So are the FIELDHUB_TLS_* files; a hub that does not take the
            // client's certificate refused it; a hub the client cannot
            // trust (or no TLS there) is no hub to connect to.
            ClientError::Tls { error, .. } if error.is_setting() => FH_ERR_INVALID_ARGUMENT,
            ClientError::Tls { error, .. }
                if matches!(**error, TlsError::CertificateRequired | TlsError::CertificateRefused(_)) =>
            {
                FH_ERR_REFUSED
            }
            ClientError::Tls { .. } => FH_ERR_CONNECT,
            // Another user listens where the hub should be: nothing was sent.
            ClientError::UntrustedHub { .. } => FH_ERR_CONNECT,
            // A step the caller asked for wrongly: not a participant, or
            // not forward in time, or not one that steps ahead.
            ClientError::NotSynchronized
            | ClientError::StepNotForward { .. }
            | ClientError::NotAhead
            | ClientError::TooManyWakeFilters { .. }
            | ClientError::StepAheadRunning { .. }
            | ClientError::NoStepAhead => FH_ERR_INVALID_ARGUMENT,
            ClientError::Dropped { .. } => FH_ERR_DROPPED,
        };
        Self::new(status, error.to_string())
    }
}

/// Pointer to a static message; never NULL.
pub fn message_ptr(code: c_int) -> *const c_char {
    fh_status::from_int(code).map_or(UNKNOWN_CODE_MESSAGE, fh_status::message).as_ptr()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_has_a_distinct_message_and_round_trips() {
        let mut seen = std::collections::HashSet::new();
        for status in ALL {
            assert_eq!(fh_status::from_int(status as c_int), Some(status));
            assert!(seen.insert(status.message()), "{status:?} repeats a message");
        }
        assert_eq!(fh_status::from_int(1), None);
        assert_eq!(fh_status::from_int(-17), None);
    }

    #[test]
    fn the_invalid_url_text_lists_every_form_of_url() {
        let text = FH_ERR_INVALID_URL.message().to_str().unwrap();
        assert_eq!(text, format!("invalid hub URL (expected {})", fieldhub_client::url::FORMS));
    }

    #[test]
    fn a_request_that_cannot_be_queued_is_a_timeout_not_a_closed_connection() {
        let failure = Failure::from(ClientError::RequestQueueFull(std::time::Duration::from_secs(5)));
        assert_eq!(failure.status, FH_ERR_TIMEOUT);
        assert!(failure.detail.unwrap().contains("timed out"));
    }

    #[test]
    fn hub_rejections_map_to_their_own_codes() {
        let rejected =
            |code: ErrorCode| Failure::from(ClientError::Rejected { code: code as u16, text: "no".into() }).status;
        assert_eq!(rejected(ErrorCode::UnknownChannel), FH_ERR_UNKNOWN_CHANNEL);
        assert_eq!(rejected(ErrorCode::InvalidFrame), FH_ERR_INVALID_FRAME);
        assert_eq!(rejected(ErrorCode::HubFull), FH_ERR_REJECTED);
    }
}
