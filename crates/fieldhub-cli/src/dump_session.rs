//! The ports `fieldhub dump` listens on: one per channel given, or per
//! channel of the hub for `any` — also those added while it runs, as
//! candump's `any` (a socket bound to every interface) receives from an
//! interface that comes up later — and each port's receive drops for `-d`.
//!
//! Invariant: a channel is listened on once; the hub's channel list is
//! asked for at most every [`ANY_RESCAN`], and only for `any`.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::Context;
use fieldhub_client::{Client, Port, PortConfig};

use crate::dump::Filters;
use crate::PortSelect;

/// How often `any` looks for channels added to the hub: a new channel's
/// frames are printed within this time of its creation.
pub const ANY_RESCAN: Duration = Duration::from_secs(1);

/// One port of the dump.
pub struct Listened {
    pub port: Port,
    pub filters: Filters,
    /// Its receive drops already told (`-d`).
    told_drops: u64,
}

/// A connected dump: the client and its ports by handle.
pub struct Session {
    pub client: Client,
    ports: HashMap<u16, Listened>,
    /// `any`'s filters, for channels it finds later.
    any: Option<Filters>,
    scanned: Instant,
    lossless: bool,
}

impl Session {
    /// Connect with `connect` and open a port on every channel of `specs`
    /// (`any`: every channel of the hub, with the filters given for it,
    /// as candump's).
    pub fn listen(
        client: Client,
        mut specs: Vec<(String, Filters)>,
        select: &PortSelect,
        lossless: bool,
    ) -> anyhow::Result<Self> {
        let any = specs.iter().position(|(channel, _)| channel == "any").map(|at| specs.remove(at).1);
        if any.is_some() && select.name.is_some() {
            anyhow::bail!("--port names one port, but 'any' opens one on every channel; name one channel");
        }
        let mut session = Self { client, ports: HashMap::new(), any, scanned: Instant::now(), lossless };
        let config = PortConfig { block_on_overflow: lossless, ..select.config(specs.len())? };
        for (channel, filters) in specs {
            session.open(&channel, filters, &config)?;
        }
        if session.any.is_some() {
            session.open_new_channels()?;
        }
        Ok(session)
    }

    fn open(&mut self, channel: &str, filters: Filters, config: &PortConfig) -> anyhow::Result<()> {
        // As candump: CAN FD frames too (CAN_RAW_FD_FRAMES).
        let port =
            self.client.open_port_with(channel, config).with_context(|| format!("cannot listen on '{channel}'"))?;
        self.ports.insert(port.handle, Listened { port, filters, told_drops: 0 });
        Ok(())
    }

    /// For `any`: open a port on each channel of the hub not listened on yet.
    fn open_new_channels(&mut self) -> anyhow::Result<()> {
        let Some(filters) = self.any.clone() else {
            return Ok(());
        };
        self.scanned = Instant::now();
        let stats = self.client.stats().context("cannot list the hub's channels for 'any'")?;
        let config = PortConfig { block_on_overflow: self.lossless, fd: true, ..Default::default() };
        for channel in stats.channels {
            if self.ports.values().any(|l| l.port.channel == channel.name) {
                continue;
            }
            if let Err(e) = self.open(&channel.name, filters.clone(), &config) {
                if crate::reconnect::hub_gone(&e) {
                    return Err(e);
                }
                // Removed again since the list was made: nothing to listen to.
                eprintln!("dump: {}", crate::error_text(&e));
            }
        }
        Ok(())
    }

    /// For `any`, once every [`ANY_RESCAN`]: listen on channels the hub
    /// added since the last look.
    pub fn look_for_new_channels(&mut self) -> anyhow::Result<()> {
        if self.any.is_some() && self.scanned.elapsed() >= ANY_RESCAN {
            self.open_new_channels()?;
        }
        Ok(())
    }

    /// The port of `handle` (a frame's [`fieldhub_client::Received::port`]).
    pub fn port(&self, handle: u16) -> Option<&Listened> {
        self.ports.get(&handle)
    }

    /// `-d`: the frames the port of `handle` lost since the last call, and
    /// its total (`None`: none lost since).
    pub fn new_drops(&mut self, handle: u16) -> Option<(u64, u64)> {
        let listened = self.ports.get_mut(&handle)?;
        let total = self.client.rx_dropped(&listened.port);
        let new = total.checked_sub(listened.told_drops).filter(|&n| n > 0)?;
        listened.told_drops = total;
        Some((new, total))
    }

    /// The handles of every port, for `-d`'s look when idle.
    pub fn handles(&self) -> Vec<u16> {
        self.ports.keys().copied().collect()
    }
}
