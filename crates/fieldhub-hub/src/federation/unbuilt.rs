//! The federation of a hub built without the `federation` feature (the
//! fuzz targets, which do not need Zenoh's hundred crates): a
//! configuration with `[federation]` is refused with the reason, one
//! without it runs as always.

use std::sync::Arc;
use std::thread::JoinHandle;

use super::error::FederationError;
use crate::config::HubConfig;
use crate::session::Sessions;
use fieldhub_bus::federation::BusLink;

/// No federation can exist in this build: the type has no values.
pub enum Federation {}

impl Federation {
    pub fn open(config: &HubConfig) -> Result<Option<(Self, Vec<BusLink>)>, FederationError> {
        match config.federation {
            None => Ok(None),
            Some(_) => Err(FederationError::NotBuilt),
        }
    }

    pub fn start(self, _sessions: &Arc<Sessions>) -> Result<Vec<JoinHandle<()>>, FederationError> {
        match self {}
    }
}
