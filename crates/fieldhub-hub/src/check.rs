//! `fieldhub hub --check-config`: what [`Hub::start`](crate::Hub::start)
//! would find wrong with a configuration on this machine, found without
//! starting a hub, and what only a start can tell.
//!
//! Invariants:
//! - Each check is the function `start` itself calls (access tokens, TLS
//!   files, DBC files, rest-bus simulations, SocketCAN interfaces) or reads
//!   what `start` would open, so a configuration that checks ok starts,
//!   short of the things [`check_config`] lists as not checked.
//! - Checking binds no address, creates or changes no file and starts no
//!   thread: a check may run beside the hub it checks the configuration of.
//!   SocketCAN interfaces are opened and closed again (reading a bus
//!   changes nothing on it); ivshmem regions are not opened, since opening
//!   one takes it over from a running hub.
//! - A part the hub would start and then run without (SIL Kit bridges
//!   whose library does not load) is an error here: the configuration
//!   asks for it.

use std::path::PathBuf;

use fieldhub_silkit::SilKitLibrary;

use crate::config::{ConfigError, HubConfig, SilKitMode};
use crate::control::dbc_store::{DbcFileError, DbcStore};
use crate::transport::rbs::{Prepared as RbsPrepared, RbsError};
#[cfg(target_os = "linux")]
use crate::transport::socketcan::{SocketCanPort, SocketCanPortError};
use crate::transport::tls::config::{self as tls, TlsConfigError};

/// Why a configuration would not work on this machine.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Tls(#[from] TlsConfigError),
    #[error(transparent)]
    Dbc(#[from] DbcFileError),
    #[error(transparent)]
    Rbs(#[from] RbsError),
    #[cfg(target_os = "linux")]
    #[error(transparent)]
    SocketCan(#[from] SocketCanPortError),
    #[error(
        "ivshmem region {path}: its directory {} does not exist; create it or name a file in one that does",
        dir.display()
    )]
    IvshmemDir { path: PathBuf, dir: PathBuf },
    #[error("[[silkit]] for {channels}: the bridges would not start, {error}")]
    SilKit { channels: String, error: fieldhub_silkit::LoadError },
    #[error(
        "[[silkit]] for {channels}: mode = \"simulator\" needs SIL Kit's network simulator API (SIL Kit 4.0.50 \
         or later), which the library {origin} lacks; install a newer SIL Kit or use mode = \"participant\""
    )]
    NoNetworkSimulator { channels: String, origin: String },
}

/// Check `config` as [`Hub::start`](crate::Hub::start) would on this
/// machine. Ok: what only a start can tell (an address or name in use, a
/// peer that is not there), one line each.
pub fn check_config(config: &HubConfig) -> Result<Vec<String>, CheckError> {
    config.check_access()?;
    config.check_admission_here()?;
    tls::of_hub(config)?;
    DbcStore::load(config)?;
    RbsPrepared::all(&config.rbs)?;
    // Elsewhere the configuration refused SocketCAN ports (`config::platform`).
    #[cfg(target_os = "linux")]
    drop(SocketCanPort::open_all(&config.ports)?);
    for path in &config.hub.ivshmem {
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(std::path::Path::new("."));
        if !dir.is_dir() {
            return Err(CheckError::IvshmemDir { path: path.clone(), dir: dir.to_owned() });
        }
    }
    check_silkit(config)?;
    Ok(unchecked(config))
}

/// SIL Kit's library loads, with the simulator API where a bridge needs it.
fn check_silkit(config: &HubConfig) -> Result<(), CheckError> {
    if config.silkit.is_empty() {
        return Ok(());
    }
    let channels = |simulators: bool| {
        let names = config.silkit.iter().filter(|s| !simulators || s.mode == SilKitMode::Simulator);
        names.map(|s| s.channel.as_str()).collect::<Vec<_>>().join(", ")
    };
    let library = SilKitLibrary::load().map_err(|error| CheckError::SilKit { channels: channels(false), error })?;
    if config.silkit.iter().any(|s| s.mode == SilKitMode::Simulator) && !library.has_network_simulator() {
        return Err(CheckError::NoNetworkSimulator { channels: channels(true), origin: library.origin().to_owned() });
    }
    Ok(())
}

/// What a check cannot tell without starting the hub.
fn unchecked(config: &HubConfig) -> Vec<String> {
    let mut not = Vec::new();
    if !config.hub.listen.is_empty() {
        not.push(format!("whether {} can be listened on (a check binds nothing)", config.hub.listen.join(", ")));
    }
    if let Some(name) = &config.hub.shm {
        not.push(format!("whether shm://{name} is free (another hub may serve it)"));
    }
    if let Some(addr) = &config.hub.socketcand {
        not.push(format!("whether the socketcand address {addr} is free"));
    }
    if !config.cannelloni.is_empty() {
        not.push("whether the cannelloni endpoints' addresses are free and their peers answer".to_owned());
    }
    if !config.hub.ivshmem.is_empty() {
        not.push("the ivshmem region files (opening one takes it over from a hub serving it)".to_owned());
    }
    if !config.silkit.is_empty() {
        not.push("whether the SIL Kit registry answers".to_owned());
    }
    if config.federation.is_some() {
        not.push("whether the federation's other hubs answer and accept this hub's token".to_owned());
    }
    not
}
