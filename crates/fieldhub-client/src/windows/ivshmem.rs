//! `ivshmem://` on Windows: not there (a QEMU guest's PCI BAR is a Linux
//! file here); connecting says so with [`ClientError::Unsupported`].

use std::path::Path;

use crate::handshake::Session;
use crate::shm::ShmLink;
use crate::{ClientError, ClientOptions};

/// Connecting to an ivshmem region, which this platform never does.
pub(crate) struct IvshmemLink;

impl IvshmemLink {
    /// Refuse `ivshmem://`: Linux-only.
    pub fn connect(url: &str, _path: &Path, _options: &ClientOptions) -> Result<(ShmLink, Session), ClientError> {
        Err(ClientError::Unsupported { url: url.into(), what: "ivshmem (ivshmem://)" })
    }
}
