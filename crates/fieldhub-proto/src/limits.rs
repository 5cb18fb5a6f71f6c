//! Hard limits of the protocol. They are part of the wire spec
//! (`spec/protocol.md`, "Limits"); changing one is a protocol change.

/// Protocol version spoken by this crate. A hub refuses any other; version
/// 1 sent the token in clear, version 2 proves it (challenge–response).
pub const PROTOCOL_VERSION: u16 = 2;

/// First bytes of the `HELLO` message body after its type byte.
pub const MAGIC: [u8; 4] = *b"FHUB";

/// Largest message body (type byte and payload, without the 4-byte length
/// prefix). A larger length prefix is rejected before any byte is buffered.
pub const MAX_MESSAGE_LEN: u32 = 256 * 1024;

/// Largest `HELLO` body; a first message longer than this is not a fieldhub
/// client (an HTTP request, a stray binary protocol) and is refused early.
pub const MAX_HELLO_LEN: u32 = 512;

/// Most frame records in one `FRAMES` message.
pub const MAX_FRAMES_PER_BATCH: usize = 1024;
/// Wake filters in one `STEP_AHEAD` (`spec/protocol.md` 3.11a).
pub const MAX_WAKE_FILTERS: usize = 32;

/// Most ports one client may have open at once.
pub const MAX_PORTS_PER_CLIENT: usize = 32;

/// Longest client, channel or port name, in bytes (UTF-8).
pub const MAX_NAME_LEN: usize = 64;

/// Longest authentication token, in bytes (a hub's configured tokens; the
/// token itself never travels).
pub const MAX_TOKEN_LEN: usize = 128;

/// Bytes of a `CHALLENGE` nonce.
pub const NONCE_LEN: usize = 32;

/// Bytes of an `AUTH` MAC (HMAC-SHA256).
pub const MAC_LEN: usize = 32;

/// Longest human-readable text in `ERROR`, `REFUSE` and `GOODBYE`.
pub const MAX_TEXT_LEN: usize = 1024;

/// Longest statistics document in a `STATS` message, in bytes.
pub const MAX_STATS_LEN: usize = MAX_MESSAGE_LEN as usize - 9;

/// Largest data field the record format can carry: room for generic
/// fieldbus frames without a version bump.
pub const MAX_RECORD_DATA: usize = 2048;

/// Largest CAN FD payload.
pub const MAX_CANFD_DATA: usize = 64;

/// Largest classic CAN payload.
pub const MAX_CAN_DATA: usize = 8;

/// Default TCP port of a hub: `tcp://127.0.0.1:29536`.
pub const DEFAULT_TCP_PORT: u16 = 29536;
