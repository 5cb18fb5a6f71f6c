//! A connection's input buffer: the bytes read from its socket and not yet
//! acted on, and where the next message in them starts and ends.
//!
//! Invariants: what is buffered is `bytes[start..]`, in the order it was
//! read; a message is handed out only once its whole body is here, and a
//! length prefix over the caller's limit is an error before more is read
//! for it; a read grows the buffer by at most [`READ_CHUNK`]; an idle
//! connection holds no buffer of its own (it borrows the reactor's), so
//! reading allocates nothing once warm. Imports nothing else from the
//! reactor.

use std::io;
use std::ops::Range;

use fieldhub_proto::wire::{check_length, DecodeError, LENGTH_PREFIX};

/// Bytes read from a socket per call, at most; also the buffer's base size.
pub(super) const READ_CHUNK: usize = 16 * 1024;

/// Read bytes not yet taken.
#[derive(Default)]
pub(super) struct Input {
    bytes: Vec<u8>,
    /// Where the bytes not yet taken start.
    start: usize,
}

impl Input {
    /// The bytes buffered and not yet taken.
    pub(super) fn buffered(&self) -> &[u8] {
        &self.bytes[self.start..]
    }

    /// How many bytes are buffered and not yet taken.
    pub(super) fn len(&self) -> usize {
        self.bytes.len() - self.start
    }

    pub(super) fn is_empty(&self) -> bool {
        self.start == self.bytes.len()
    }

    /// Forget everything buffered, keeping the memory.
    pub(super) fn clear(&mut self) {
        self.bytes.clear();
        self.start = 0;
    }

    /// The bytes of `range` (a body [`Input::next_message`] handed out).
    pub(super) fn body(&self, range: Range<usize>) -> &[u8] {
        &self.bytes[range]
    }

    /// Take everything up to `end` (a message's end): it is acted on.
    pub(super) fn take_to(&mut self, end: usize) {
        self.start = end;
    }

    /// Read once through `read`, which fills the slice it is given and
    /// says how much it filled.
    pub(super) fn read_from(&mut self, read: impl FnOnce(&mut [u8]) -> io::Result<usize>) -> io::Result<usize> {
        // Room at the front is reused when everything was taken (no copy),
        // or once more than a chunk of it piled up (one copy per chunk).
        if self.start > 0 && self.is_empty() {
            self.clear();
        } else if self.start > READ_CHUNK {
            self.bytes.drain(..self.start);
            self.start = 0;
        }
        let filled = self.bytes.len();
        self.bytes.resize(filled + READ_CHUNK, 0);
        let result = read(&mut self.bytes[filled..]);
        self.bytes.truncate(filled + *result.as_ref().unwrap_or(&0));
        result
    }

    /// The length prefix of the next message, once it is buffered.
    pub(super) fn body_len(&self) -> Option<u32> {
        let prefix = self.bytes.get(self.start..self.start + LENGTH_PREFIX)?;
        Some(u32::from_le_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]))
    }

    /// The next complete message's body, if one is buffered; a length
    /// prefix over `max` is an error at once.
    pub(super) fn next_message(&self, max: u32) -> Result<Option<Range<usize>>, DecodeError> {
        let Some(len) = self.body_len() else { return Ok(None) };
        let len = check_length(len, max)?;
        let body = self.start + LENGTH_PREFIX;
        Ok((self.bytes.len() >= body + len).then_some(body..body + len))
    }

    /// A connection with nothing buffered and no memory of its own borrows
    /// `spare` (the reactor's) for as long as it is read.
    pub(super) fn borrow_if_idle(&mut self, spare: &mut Vec<u8>) {
        if self.is_empty() && self.bytes.capacity() == 0 {
            std::mem::swap(&mut self.bytes, spare);
            self.clear();
        }
    }

    /// Give the buffer back as `spare` once everything in it was taken and
    /// the reactor has none: idle connections hold no memory.
    pub(super) fn give_back_if_drained(&mut self, spare: &mut Vec<u8>) {
        if self.is_empty() && spare.capacity() == 0 {
            self.clear();
            std::mem::swap(&mut self.bytes, spare);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Read `bytes` into `input` as a socket would hand them over.
    fn feed(input: &mut Input, bytes: &[u8]) {
        let n = input
            .read_from(|buf| {
                buf[..bytes.len()].copy_from_slice(bytes);
                Ok(bytes.len())
            })
            .expect("reads");
        assert_eq!(n, bytes.len());
    }

    #[test]
    fn a_message_is_handed_out_only_once_its_whole_body_is_buffered() {
        let mut input = Input::default();
        feed(&mut input, &[3, 0]);
        assert_eq!(input.next_message(16), Ok(None), "half a length prefix");
        feed(&mut input, &[0, 0, b'a', b'b']);
        assert_eq!(input.next_message(16), Ok(None), "two of three body bytes");
        feed(&mut input, b"cnext");
        let body = input.next_message(16).expect("sound").expect("complete");
        assert_eq!(input.body(body.clone()), b"abc");
        input.take_to(body.end);
        assert_eq!(input.buffered(), b"next");
    }

    #[test]
    fn a_length_over_the_limit_is_an_error_before_its_body_is_read() {
        let mut input = Input::default();
        feed(&mut input, &513u32.to_le_bytes());
        assert!(matches!(input.next_message(512), Err(DecodeError::Oversize { len: 513, max: 512 })));
    }

    #[test]
    fn a_failed_or_empty_read_leaves_the_buffered_bytes_as_they_were() {
        let mut input = Input::default();
        feed(&mut input, b"kept");
        let failed = input.read_from(|_| Err(io::ErrorKind::WouldBlock.into()));
        assert_eq!(failed.map_err(|e| e.kind()), Err(io::ErrorKind::WouldBlock));
        assert_eq!(input.read_from(|_| Ok(0)).expect("the end"), 0);
        assert_eq!(input.buffered(), b"kept");
    }

    #[test]
    fn taken_bytes_make_room_without_moving_the_rest_until_a_chunk_piled_up() {
        let mut input = Input::default();
        feed(&mut input, &[7; READ_CHUNK]);
        input.take_to(READ_CHUNK - 1);
        feed(&mut input, &[8; 2]);
        assert_eq!(input.buffered(), [7, 8, 8], "a partial message stays where it is");
        input.take_to(READ_CHUNK + 1);
        feed(&mut input, &[9]);
        assert_eq!(input.buffered(), [8, 9], "over a chunk taken: the rest moved to the front");
        assert_eq!(input.start, 0);
    }

    #[test]
    fn an_idle_connection_borrows_the_spare_buffer_and_gives_it_back_once_drained() {
        let mut spare = Vec::with_capacity(READ_CHUNK);
        let mut input = Input::default();
        input.borrow_if_idle(&mut spare);
        assert_eq!(spare.capacity(), 0, "lent out");
        feed(&mut input, b"partial");
        input.give_back_if_drained(&mut spare);
        assert_eq!(spare.capacity(), 0, "kept while it holds bytes not yet taken");
        input.take_to(input.bytes.len());
        input.give_back_if_drained(&mut spare);
        assert!(spare.capacity() >= READ_CHUNK, "given back");
        assert_eq!(input.bytes.capacity(), 0, "the idle connection holds no memory");
    }
}
