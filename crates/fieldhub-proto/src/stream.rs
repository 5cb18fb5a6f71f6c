//! Message framing over a byte stream the caller owns (a socket, a serial
//! port, a pipe): read one length-prefixed body at a time into a reused
//! buffer. Shared by the hub's and the client's stream transports so both
//! enforce the limits identically.

use std::io::{self, Read};

use crate::wire::{check_length, DecodeError, LENGTH_PREFIX};

/// Why a message could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The peer closed the stream between two messages.
    #[error("connection closed")]
    Closed,
    /// The peer closed the stream inside a message.
    #[error("connection closed mid-message: got {got} of {need} bytes")]
    Truncated { got: usize, need: usize },
    /// The length prefix broke a limit.
    #[error(transparent)]
    Length(#[from] DecodeError),
    #[error(transparent)]
    Io(io::Error),
}

/// Reads messages from `R` into an internal buffer that grows to the largest
/// message seen and is then reused.
pub struct MessageReader<R> {
    inner: R,
    body: Vec<u8>,
}

impl<R: Read> MessageReader<R> {
    pub fn new(inner: R) -> Self {
        Self { inner, body: Vec::new() }
    }

    /// The underlying reader.
    pub fn get_mut(&mut self) -> &mut R {
        &mut self.inner
    }

    /// Read the next message body, refusing length prefixes above `max`.
    pub fn read(&mut self, max: u32) -> Result<&[u8], ReadError> {
        let mut prefix = [0u8; LENGTH_PREFIX];
        match read_full(&mut self.inner, &mut prefix)? {
            0 => return Err(ReadError::Closed),
            n if n < LENGTH_PREFIX => return Err(ReadError::Truncated { got: n, need: LENGTH_PREFIX }),
            _ => {}
        }
        let len = check_length(u32::from_le_bytes(prefix), max)?;
        self.body.resize(len, 0);
        let got = read_full(&mut self.inner, &mut self.body)?;
        if got < len {
            return Err(ReadError::Truncated { got: LENGTH_PREFIX + got, need: LENGTH_PREFIX + len });
        }
        Ok(&self.body)
    }
}

/// Fill `buf` unless the stream ends first; returns how many bytes were read.
fn read_full(reader: &mut impl Read, buf: &mut [u8]) -> Result<usize, ReadError> {
    let mut filled = 0;
    while filled < buf.len() {
        match reader.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(ReadError::Io(e)),
        }
    }
    Ok(filled)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::MAX_MESSAGE_LEN;
    use crate::wire::{decode, encode, Message};

    #[test]
    fn reads_consecutive_messages_then_reports_clean_close() {
        let mut bytes = Vec::new();
        encode(&mut bytes, &Message::Ping { nonce: 1 });
        encode(&mut bytes, &Message::Pong { nonce: 2 });
        let mut reader = MessageReader::new(&bytes[..]);
        assert_eq!(decode(reader.read(MAX_MESSAGE_LEN).unwrap()).unwrap(), Message::Ping { nonce: 1 });
        assert_eq!(decode(reader.read(MAX_MESSAGE_LEN).unwrap()).unwrap(), Message::Pong { nonce: 2 });
        assert!(matches!(reader.read(MAX_MESSAGE_LEN), Err(ReadError::Closed)));
    }

    #[test]
    fn close_inside_a_message_is_truncation() {
        let mut bytes = Vec::new();
        encode(&mut bytes, &Message::Ping { nonce: 1 });
        bytes.truncate(7);
        let err = MessageReader::new(&bytes[..]).read(MAX_MESSAGE_LEN).unwrap_err();
        assert!(matches!(err, ReadError::Truncated { got: 7, need: 13 }), "{err}");
    }

    #[test]
    fn oversize_prefix_is_refused_before_reading_the_body() {
        let bytes = (MAX_MESSAGE_LEN + 1).to_le_bytes();
        let err = MessageReader::new(&bytes[..]).read(MAX_MESSAGE_LEN).unwrap_err();
        assert!(matches!(err, ReadError::Length(DecodeError::Oversize { .. })), "{err}");
    }
}
