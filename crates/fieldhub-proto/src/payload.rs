//! A frame's payload in one of two forms.
//!
//! - **Inline** (CAN, CAN FD, error and LIN frames): up to 64 bytes inside the
//!   frame value itself, so these frames never allocate on their way through
//!   the hub.
//! - **Shared** (CAN XL and raw frames): up to 2,048 bytes in one
//!   reference-counted buffer, made once when the frame is built (at intake)
//!   and shared by reference when the hub fans the frame out, so a 2 KiB
//!   frame is copied once however many ports receive it. A CAN XL frame's
//!   acceptance field rides beside the buffer.
//!
//! Invariant: the form follows the kind — inline for kinds 0..=3, shared for
//! `canxl` and `raw` — and a shared buffer's length is the frame's `len`.

use std::sync::Arc;

use crate::limits::MAX_CANFD_DATA;

/// The inline bytes, 8-byte aligned: a frame is moved several times on its
/// way through the hub, and aligned bytes move as whole words.
#[derive(Clone, Copy)]
#[repr(C, align(8))]
pub(crate) struct Inline(pub(crate) [u8; MAX_CANFD_DATA]);

impl Inline {
    /// No payload bytes yet: all zero.
    pub(crate) const EMPTY: Self = Self([0; MAX_CANFD_DATA]);
}

/// The payload of a [`crate::Frame`].
#[derive(Clone)]
pub(crate) enum Payload {
    /// CAN, CAN FD, error and LIN frames; the frame's `len` field counts the
    /// bytes in use.
    Inline(Inline),
    /// CAN XL and raw frames: `bytes` is the whole payload; `af` the CAN XL
    /// acceptance field (0 on raw frames).
    Shared { af: u32, bytes: Arc<[u8]> },
}

impl Payload {
    /// A shared payload holding a copy of `bytes`: the one allocation of a
    /// CAN XL or raw frame.
    pub(crate) fn shared(af: u32, bytes: &[u8]) -> Self {
        Self::Shared { af, bytes: Arc::from(bytes) }
    }
}
