//! Vector SIL Kit CAN networks the hub joins (`[[silkit]]`), each on a
//! thread of its own that [`SilKitBridge::start_all`] starts and that runs
//! the section's mode:
//!
//! - `participant.rs` (`mode = "participant"`): the bridge is one SIL Kit
//!   participant and, to the bus, one client with one port on its channel.
//! - `simulator.rs` (`mode = "simulator"`): the hub is the network's
//!   simulator; every SIL Kit controller on it is a port of the channel.
//! - `bridge.rs`: what both share — the configured network, joining it,
//!   the bridge's client on the bus. A leaf: the two modes import it, and
//!   nothing else of `silkit/`; this file only declares, re-exports and
//!   dispatches.
//!
//! Without `libSilKit.so` or its registry the rest of the hub runs: the
//! library's absence is logged once when the hub starts; a registry not
//! (yet) there is retried every [`bridge::JOIN_RETRY`].

mod bridge;
mod participant;
pub mod simulator;

use std::sync::Arc;
use std::thread::JoinHandle;

use fieldhub_silkit::SilKitLibrary;
use tracing::{error, info};

pub use bridge::SilKitBridge;

use crate::config::{ChannelConfig, SilKitConfig, SilKitMode, Timing};
use crate::session::Sessions;

impl SilKitBridge {
    /// Start a bridge thread for every `[[silkit]]` section. Without SIL
    /// Kit's library none starts: the error (where it was looked for, how
    /// to fix it) is logged and the hub goes on.
    pub fn start_all(
        configs: &[SilKitConfig],
        channels: &[ChannelConfig],
        sessions: &Arc<Sessions>,
    ) -> std::io::Result<Vec<JoinHandle<()>>> {
        if configs.is_empty() {
            return Ok(Vec::new());
        }
        let library = match SilKitLibrary::load() {
            Ok(library) => Arc::new(library),
            Err(e) => {
                let channels: Vec<&str> = configs.iter().map(|c| c.channel.as_str()).collect();
                error!(channels = %channels.join(","), "SIL Kit bridges not started: {e}");
                return Ok(Vec::new());
            }
        };
        info!(library = library.origin(), "SIL Kit library loaded");
        configs
            .iter()
            .map(|config| {
                let channel = channels.iter().find(|c| c.name == config.channel);
                let bitrate = channel.map_or(0, |c| c.bitrate);
                let timed = channel.is_some_and(|c| c.timing == Timing::Timed);
                let bridge = Self { config: config.clone(), library: Arc::clone(&library), bitrate, timed };
                let sessions = Arc::clone(sessions);
                std::thread::Builder::new().name(format!("fh-silkit-{}", config.channel)).spawn(move || {
                    if bridge.config.mode == SilKitMode::Simulator {
                        simulator::run(&bridge, &sessions);
                    } else {
                        participant::run(&bridge, &sessions);
                    }
                })
            })
            .collect()
    }
}
