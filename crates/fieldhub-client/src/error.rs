//! Client errors.

use std::time::Duration;

use fieldhub_proto::fate::DropReason;
use fieldhub_proto::wire::ErrorCode;

/// What went wrong talking to a hub.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("invalid hub URL '{url}': {why}")]
    InvalidUrl { url: String, why: String },
    #[error("cannot reach the hub at {url} (is `fieldhub hub` running there?)")]
    Connect { url: String, source: std::io::Error },
    /// A local hub address is served by a user the client does not trust
    /// (`hub_owner.rs`); nothing was sent to it.
    #[error("refusing to talk to the hub at {url}: {why}")]
    UntrustedHub { url: String, why: String },
    #[error("the hub at {url} refused the connection ({}): {text}", code_name(*.code))]
    Refused { url: String, code: u16, text: String },
    #[error("the hub rejected the request ({}): {text}", code_name(*.code))]
    Rejected { code: u16, text: String },
    #[error("the connection to the hub is closed: {reason}")]
    Closed { reason: String },
    #[error("no answer from the hub within {0:?}")]
    Timeout(Duration),
    #[error(
        "the send queue stayed full for {0:?}: the bus takes frames slower than they are sent \
         (a timed or rate-limited channel, or a lossless receiver that does not read)"
    )]
    SendQueueFull(Duration),
    /// A request (`flush`, `stats`, opening or closing a port) found the
    /// send queue full for the whole timeout. The connection is still
    /// open: the request was not sent, and can be tried again.
    #[error(
        "timed out after {0:?} queueing a request: the send queue stayed full, as the bus takes frames \
         slower than they are sent (the connection is still open; try again, or send less)"
    )]
    RequestQueueFull(Duration),
    #[error("port {0} is not open on this client")]
    PortNotOpen(u16),
    /// The frame is one the port or its channel cannot carry (a CAN FD
    /// frame on a classic port or channel, any frame on a listen-only
    /// port); nothing was sent.
    #[error("cannot send on port {port} of channel '{channel}': {why}")]
    FrameNotAllowed { port: u16, channel: String, why: &'static str },
    /// The URL names a transport this platform's build does not have:
    /// shared memory, ivshmem, unix sockets and serial devices are
    /// Linux-only (docs/windows.md). Nothing was sent.
    #[error("{url}: {what} is Linux-only; this build for {} connects over tcp:// and tls://", std::env::consts::OS)]
    Unsupported { url: String, what: &'static str },
    #[error("protocol error talking to the hub: {0}")]
    Protocol(String),
    #[error(transparent)]
    TokenFile(#[from] crate::token::TokenFileError),
    /// TLS with the hub failed or cannot be set up; the text says what to set.
    /// Boxed: rustls's errors are large, and every `Result` of the client
    /// would carry their size.
    #[error("TLS with the hub at {url}: {error}")]
    Tls { url: String, error: Box<crate::tls::TlsError> },
    /// `step` on a client that did not connect as a synchronised
    /// participant ([`crate::ClientOptions::synchronized`]).
    #[error("this client is not a synchronised participant of virtual time (connect with `synchronized`)")]
    NotSynchronized,
    /// `send_at` or `step_ahead` from a client connected without
    /// [`crate::ClientOptions::ahead`].
    #[error("this participant does not step ahead (connect with `synchronized` and `ahead`)")]
    NotAhead,
    /// Frames this client sent are off the bus (`spec/protocol.md` 6.9):
    /// the hub dropped `dropped` frames of port `port` for `reason`, and
    /// told so before it answered the flush. The first such report since
    /// the last flush; [`crate::Client::tx_dropped`] counts them all.
    #[error("{dropped} frame(s) sent on port {port} {}", reason_text(*.reason))]
    Dropped { port: u16, reason: u16, dropped: u32 },
    /// `step` to a bus time not later than the one the participant stands at.
    #[error("cannot step to {until_ns} ns: the participant already stands at {now_ns} ns")]
    StepNotForward { until_ns: u64, now_ns: u64 },
    /// `step_ahead` with more wake filters than one `STEP_AHEAD` carries.
    #[error("{given} wake filters given, a step ahead takes at most {max}: widen their masks to cover more ids")]
    TooManyWakeFilters { given: usize, max: usize },
    /// A step while a step ahead announced with
    /// [`crate::Client::begin_step_ahead`] still runs at the hub: the hub
    /// takes one step of a participant at a time.
    #[error(
        "a step ahead to {until_ns} ns is still running at the hub: await its grant (await_step_ahead) before the next step"
    )]
    StepAheadRunning { until_ns: u64 },
    /// [`crate::Client::await_step_ahead`] with no step ahead begun since
    /// the last one was awaited.
    #[error("no step ahead to await: begin one (begin_step_ahead) first")]
    NoStepAhead,
}

impl ClientError {
    /// The hub's error code, for refusals and rejections.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            Self::Refused { code, .. } | Self::Rejected { code, .. } => ErrorCode::from_wire(*code),
            _ => None,
        }
    }
}

fn reason_text(reason: u16) -> String {
    DropReason::from_wire(reason).map_or_else(
        || format!("dropped for a reason this client does not know (code {reason})"),
        |r| r.describe().to_owned(),
    )
}

fn code_name(code: u16) -> String {
    ErrorCode::from_wire(code).map_or_else(|| format!("code {code}"), |c| c.name().to_owned())
}
