//! One client connection: handshake, reader loop, writer loop.
//!
//! Bad input ends the connection of the client that sent it and nothing
//! else: the reader reports the problem (an `ERROR` with `fatal` set, or a
//! `REFUSE` during the handshake), logs one line, and tells the bus the
//! client is gone. The bus releases its ports; other clients never notice.

use std::io::BufReader;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::Receiver;
use fieldhub_proto::limits::{MAX_HELLO_LEN, MAX_MESSAGE_LEN, PROTOCOL_VERSION};
use fieldhub_proto::stream::{MessageReader, ReadError};
use fieldhub_proto::wire::{self, ErrorCode, ErrorReport, Message, Packer, Welcome};
use tracing::{info, warn};

use super::Connection;
use crate::credit::TxCredit;
use crate::queues::{outbox, ClientId, Inbound, InboxSender, Outbound};

/// How long a new connection has to send its `HELLO`.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// Most clients connected at once.
pub const MAX_CLIENTS: usize = 256;
/// Bytes read from the socket per system call, at most.
const READ_BUFFER: usize = 64 * 1024;
/// The writer stops packing and writes once this many bytes are pending.
const WRITE_CHUNK: usize = 64 * 1024;

/// What every session of one hub shares.
pub struct SessionContext {
    pub inbox: InboxSender,
    pub hub_name: String,
    pub token: Option<String>,
    pub next_client: AtomicU32,
    pub live_clients: AtomicUsize,
    /// Set when the hub shuts down; a reader waiting for transmit credit
    /// gives up then.
    pub stopping: Arc<AtomicBool>,
}

/// A protocol violation: what to tell the client and the log.
pub(super) struct Violation {
    pub(super) code: ErrorCode,
    pub(super) text: String,
}

impl Violation {
    pub(super) fn new(code: ErrorCode, text: impl Into<String>) -> Self {
        Self { code, text: text.into() }
    }
}

impl From<wire::DecodeError> for Violation {
    fn from(e: wire::DecodeError) -> Self {
        Self::new(e.code(), e.to_string())
    }
}

/// Serve one connection until it ends. Runs on its own thread.
pub fn serve<C: Connection>(stream: C, peer: String, ctx: Arc<SessionContext>) {
    if ctx.live_clients.fetch_add(1, Ordering::AcqRel) >= MAX_CLIENTS {
        refuse(
            stream,
            &peer,
            Violation::new(ErrorCode::HubFull, format!("the hub serves at most {MAX_CLIENTS} clients")),
        );
        ctx.live_clients.fetch_sub(1, Ordering::AcqRel);
        return;
    }
    run(stream, &peer, &ctx);
    ctx.live_clients.fetch_sub(1, Ordering::AcqRel);
}

fn run<C: Connection>(stream: C, peer: &str, ctx: &SessionContext) {
    let Ok(mut writer) = stream.try_clone() else {
        return;
    };
    let mut reader = MessageReader::new(BufReader::with_capacity(READ_BUFFER, stream));
    let name = match handshake(&mut reader, ctx) {
        Ok(name) => name,
        Err(violation) => return refuse(writer, peer, violation),
    };
    let client = ctx.next_client.fetch_add(1, Ordering::Relaxed);
    let mut welcome = Vec::new();
    wire::encode(
        &mut welcome,
        &Message::Welcome(Welcome { version: PROTOCOL_VERSION, client_id: client, hub_name: &ctx.hub_name }),
    );
    if writer.write_all(&welcome).is_err() || reader.get_mut().get_ref().set_read_timeout(None).is_err() {
        return;
    }
    let (out_tx, out_rx) = outbox();
    let Ok(hang_up_handle) = writer.try_clone() else {
        return;
    };
    let hang_up = Box::new(move || hang_up_handle.shutdown());
    // This thread forwards the client's frames, so it is the one that waits
    // for transmit credit.
    let credit = Arc::new(TxCredit::for_current_thread());
    let attach =
        Inbound::Attach { client, name: name.clone(), outbox: out_tx.clone(), hang_up, credit: credit.clone() };
    if ctx.inbox.send(attach).is_err() {
        return;
    }
    info!(client, %name, peer, "client connected");
    let writer_thread =
        std::thread::Builder::new().name(format!("fh-write-{client}")).spawn(move || write_loop(writer, out_rx));
    let (reason, report) = match read_loop(&mut reader, client, ctx, &credit) {
        Ok(reason) => {
            info!(client, %name, peer, "client disconnected: {reason}");
            (reason, None)
        }
        Err(violation) => {
            warn!(client, %name, peer, "rejecting client: {}", violation.text);
            let report =
                Outbound::Error { code: violation.code, request: 0, fatal: true, text: violation.text.clone() };
            (violation.text, Some(report))
        }
    };
    // The bus hears of the detach before the client hears of its rejection:
    // whatever the client does next (connect again, reuse its port names)
    // reaches the bus after its ports are closed.
    let _ = ctx.inbox.send(Inbound::Detach { client, reason });
    if let Some(report) = report {
        if out_tx.try_control(report).is_err() {
            reader.get_mut().get_ref().shutdown();
        }
    }
    drop(out_tx);
    if let Ok(handle) = writer_thread {
        let _ = handle.join();
    }
    reader.get_mut().get_ref().shutdown();
}

pub(super) fn handshake<C: Connection>(
    reader: &mut MessageReader<BufReader<C>>,
    ctx: &SessionContext,
) -> Result<String, Violation> {
    reader
        .get_mut()
        .get_ref()
        .set_read_timeout(Some(HANDSHAKE_TIMEOUT))
        .map_err(|e| Violation::new(ErrorCode::Internal, e.to_string()))?;
    let body = reader.read(MAX_HELLO_LEN).map_err(|e| match e {
        ReadError::Length(wire::DecodeError::Oversize { len, .. }) => Violation::new(
            ErrorCode::Oversize,
            format!(
                "first message claims {len} bytes; a HELLO is at most {MAX_HELLO_LEN} (is this a fieldhub client?)"
            ),
        ),
        ReadError::Io(io) if matches!(io.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
            Violation::new(ErrorCode::Malformed, format!("no HELLO within {} s", HANDSHAKE_TIMEOUT.as_secs()))
        }
        other => Violation::new(ErrorCode::Malformed, format!("during handshake: {other}")),
    })?;
    check_hello(body, ctx)
}

/// Check a `HELLO` (version, token, name); returns the client's name.
pub(super) fn check_hello(body: &[u8], ctx: &SessionContext) -> Result<String, Violation> {
    let hello = match wire::decode(body)? {
        Message::Hello(hello) => hello,
        other => {
            return Err(Violation::new(
                ErrorCode::UnexpectedMessage,
                format!("the first message must be HELLO, got {}", other.type_name()),
            ))
        }
    };
    if hello.version != PROTOCOL_VERSION {
        return Err(Violation::new(
            ErrorCode::UnsupportedVersion,
            format!("protocol version {} is not supported; this hub speaks version {PROTOCOL_VERSION}", hello.version),
        ));
    }
    if let Some(token) = &ctx.token {
        if !constant_time_eq(token.as_bytes(), hello.token.as_bytes()) {
            let text = if hello.token.is_empty() { "this hub requires a token" } else { "wrong token" };
            return Err(Violation::new(ErrorCode::Unauthorized, text));
        }
    }
    let name = if hello.name.is_empty() { "client" } else { hello.name };
    crate::config::check_name(name)
        .map_err(|why| Violation::new(ErrorCode::Malformed, format!("client name {why}")))?;
    Ok(name.to_owned())
}

/// Compare secrets without an early exit that would leak their common prefix.
pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

pub(super) fn refuse<C: Connection>(mut stream: C, peer: &str, violation: Violation) {
    warn!(peer, "refusing connection: {}", violation.text);
    let mut bytes = Vec::new();
    let report = ErrorReport { code: violation.code as u16, request: 0, fatal: true, text: &violation.text };
    wire::encode(&mut bytes, &Message::Refuse(report));
    let _ = stream.write_all(&bytes);
    stream.shutdown();
}

/// Forward requests to the bus until the client leaves (`Ok(reason)`) or
/// breaks the protocol (`Err`).
fn read_loop<C: Connection>(
    reader: &mut MessageReader<BufReader<C>>,
    client: ClientId,
    ctx: &SessionContext,
    credit: &TxCredit,
) -> Result<String, Violation> {
    let inbox = &ctx.inbox;
    // A send error means the bus has stopped; the connection ends with it.
    let forward =
        |request| inbox.send(request).map_err(|_| Violation::new(ErrorCode::ShuttingDown, "the hub is shutting down"));
    loop {
        let body = match reader.read(MAX_MESSAGE_LEN) {
            Ok(body) => body,
            Err(ReadError::Closed) => return Ok("connection closed".into()),
            Err(ReadError::Io(e)) => return Ok(format!("connection lost: {e}")),
            Err(ReadError::Truncated { got, need }) => {
                return Err(Violation::new(
                    ErrorCode::Malformed,
                    format!("disconnected mid-message: got {got} of {need} bytes"),
                ))
            }
            Err(ReadError::Length(e)) => return Err(e.into()),
        };
        match wire::decode(body)? {
            Message::Frames(batch) => {
                // A batch is taken whole or not at all, so check it before
                // forwarding any of it.
                if let Some(index) = batch.iter().position(|r| r.frame.is_echo()) {
                    return Err(Violation::new(
                        ErrorCode::InvalidFrame,
                        format!("frame {index}: the echo flag is set by the hub only"),
                    ));
                }
                for record in batch.iter() {
                    // SYNC POINT with Hub::shutdown's store of `stopping`.
                    if !credit.acquire(|| ctx.stopping.load(Ordering::Acquire)) {
                        return Ok("the hub closed this client".into());
                    }
                    forward(Inbound::Frame { client, port: record.port, frame: record.frame })?;
                }
            }
            Message::OpenPort(open) => forward(Inbound::OpenPort {
                client,
                request: open.request,
                options: open.options,
                channel: open.channel.to_owned(),
                port_name: open.port_name.to_owned(),
            })?,
            Message::ClosePort { port } => forward(Inbound::ClosePort { client, port })?,
            Message::Ping { nonce } => forward(Inbound::Ping { client, nonce })?,
            Message::StatsRequest { request } => forward(Inbound::Stats { client, request })?,
            Message::Pong { .. } => {}
            Message::Goodbye(report) => return Ok(format!("client said goodbye: {}", report.text)),
            // A stream that outlives its client — a virtio-serial port whose
            // guest process died and was started again — carries the next
            // client's HELLO into the old session.
            Message::Hello(hello) => {
                return Err(Violation::new(
                    ErrorCode::UnexpectedMessage,
                    format!(
                        "HELLO from {:?} on a connection already in a session (a new process on the same \
                         stream, as after a guest process died on a virtio-serial port?); this session ends, \
                         connect again",
                        hello.name
                    ),
                ))
            }
            other => {
                return Err(Violation::new(
                    ErrorCode::UnexpectedMessage,
                    format!("{} is not allowed from a client", other.type_name()),
                ))
            }
        }
    }
}

/// Drain the outbound queue into the stream, packing whatever is waiting.
fn write_loop<C: Connection>(mut stream: C, queue: Receiver<Outbound>) {
    let mut packer = Packer::new();
    while let Ok(first) = queue.recv() {
        let mut ends = pack(&mut packer, first);
        while !ends && packer.len() < WRITE_CHUNK {
            match queue.try_recv() {
                Ok(item) => ends = pack(&mut packer, item),
                Err(_) => break,
            }
        }
        if stream.write_all(packer.finish()).is_err() {
            break;
        }
        packer.clear();
        if ends {
            break;
        }
    }
    stream.shutdown();
}

/// Encode one item; returns whether the connection ends after it.
fn pack(packer: &mut Packer, item: Outbound) -> bool {
    let ends = item.ends_connection();
    match item {
        Outbound::Frame { port, frame, meta } => packer.push_frame(port, &frame, &meta),
        Outbound::RxOverflow { port, dropped } => {
            packer.push_message(&Message::RxOverflow(wire::RxOverflow { port, dropped }));
        }
        Outbound::PortOpened { request, port, channel_id, port_id } => {
            packer.push_message(&Message::PortOpened(wire::PortOpened { request, port, channel_id, port_id }));
        }
        Outbound::PortClosed { port } => packer.push_message(&Message::PortClosed { port }),
        Outbound::Pong { nonce } => packer.push_message(&Message::Pong { nonce }),
        Outbound::Stats { request, json } => packer.push_message(&Message::Stats { request, json: &json }),
        Outbound::Error { code, request, fatal, text } => {
            packer.push_message(&Message::Error(ErrorReport { code: code as u16, request, fatal, text: &text }));
        }
        Outbound::Goodbye { code, text } => {
            packer.push_message(&Message::Goodbye(ErrorReport {
                code: code as u16,
                request: 0,
                fatal: true,
                text: &text,
            }));
        }
    }
    ends
}
