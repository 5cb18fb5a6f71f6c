//! [`connect`]: picks the transport a hub URL names and connects over it.
//!
//! Kept apart from `link.rs` so imports point one way: the transports
//! (`stream.rs`, `shm.rs`, `ivshmem.rs`) import the [`Link`] trait from
//! `link.rs`, and only this module imports the transports.

use std::sync::Arc;

use crate::handshake::Session;
use crate::link::Link;
use crate::url::HubUrl;
use crate::{ivshmem, shm, stream, ClientError, ClientOptions};

/// Connect to the hub at `url` over the transport it names and perform the
/// handshake.
pub(crate) fn connect(url: &str, options: &ClientOptions) -> Result<(Arc<dyn Link>, Session), ClientError> {
    let parsed = HubUrl::parse(url).map_err(|why| ClientError::InvalidUrl { url: url.into(), why })?;
    Ok(match &parsed {
        HubUrl::Shm { name, busy_poll, dir } => {
            let (link, session) = shm::ShmLink::connect(url, name, dir.as_deref(), *busy_poll, options)?;
            (Arc::new(link), session)
        }
        HubUrl::Ivshmem(path) => {
            let (link, session) = ivshmem::IvshmemLink::connect(url, path, options)?;
            (Arc::new(link), session)
        }
        HubUrl::Tcp { .. } | HubUrl::Tls { .. } | HubUrl::Unix(_) | HubUrl::Serial(_) => {
            let (link, session) = stream::StreamLink::connect(url, &parsed, options)?;
            (Arc::new(link), session)
        }
    })
}
