//! The Zenoh session a hub opens from `[federation]` and the channel
//! threads it starts. Built with
//! the `federation` feature only (`unbuilt.rs` stands in without it).

use std::sync::Arc;
use std::thread::JoinHandle;

use zenoh::Wait;

use super::channel::FederatedChannel;
use super::error::FederationError;
use super::handover;
use crate::config::{FederationConfig, HubConfig, Role};
use crate::session::Sessions;
use fieldhub_bus::federation::{BusLink, ChannelStatus};

/// The open Zenoh session and the channels it serves, before their threads run.
pub struct Federation {
    session: zenoh::Session,
    /// This hub's federation name.
    name: String,
    config: FederationConfig,
    channels: Vec<FederatedChannel>,
}

impl Federation {
    /// Open the Zenoh session when `config` has `[federation]`. Returns the
    /// federation and, per federated channel, what the bus holds of it.
    pub fn open(config: &HubConfig) -> Result<Option<(Self, Vec<BusLink>)>, FederationError> {
        let Some(federation) = config.federation.clone() else { return Ok(None) };
        let mut channels = Vec::new();
        let mut links = Vec::new();
        for (id, channel) in config.channels.iter().enumerate() {
            let Some(role) = federation.role_of(&config.hub.name, channel) else { continue };
            let id = id as u16;
            let owner = match &role {
                Role::Owner => federation.hub_name(&config.hub.name).to_owned(),
                Role::Relay { owner } | Role::Standby { owner } => owner.clone(),
            };
            let status = Arc::new(ChannelStatus::new(owner, role != Role::Owner));
            let (to_owner, uplink) = match role {
                Role::Owner => (None, None),
                Role::Relay { .. } | Role::Standby { .. } => {
                    // Unbounded, yet bounded by transmit credit: each
                    // client has at most 256 frames in the bus.
                    let (to_owner, from_bus) = crossbeam_channel::unbounded();
                    (Some(to_owner), Some(from_bus))
                }
            };
            links.push(BusLink { channel: id, uplink: to_owner, status: Arc::clone(&status) });
            channels.push(FederatedChannel {
                id,
                name: channel.name.clone(),
                role,
                uplink,
                status,
                bitrate: channel.bitrate,
                data_bitrate: channel.effective_data_bitrate(),
                canfd: channel.protocol == crate::config::Protocol::Canfd,
            });
        }
        let (zenoh_config, dictionary) = zenoh_config(&federation)?;
        let session = zenoh::open(zenoh_config).wait().map_err(|error| FederationError::Open {
            listen: federation.listen.clone(),
            connect: federation.connect.clone(),
            error: error.to_string(),
        })?;
        // Zenoh read the dictionary while opening; the secret leaves the disk.
        drop(dictionary);
        tracing::info!(zid = %session.zid(), name = federation.hub_name(&config.hub.name),
            listen = ?federation.listen, connect = ?federation.connect, "federation session open");
        let name = federation.hub_name(&config.hub.name).to_owned();
        Ok(Some((Self { session, name, config: federation, channels }, links)))
    }

    /// Start each federated channel's thread.
    pub fn start(self, sessions: &Arc<Sessions>) -> Result<Vec<JoinHandle<()>>, FederationError> {
        let mut threads = Vec::new();
        for channel in self.channels {
            let name = channel.name.clone();
            let next = match channel.role.clone() {
                Role::Owner => handover::Next::Own { epoch: self.config.epoch, committed: Default::default() },
                Role::Relay { owner } => handover::Next::Relay { owner, standby: false },
                Role::Standby { owner } => handover::Next::Relay { owner, standby: true },
            };
            let (session, config, me, sessions) =
                (self.session.clone(), self.config.clone(), self.name.clone(), Arc::clone(sessions));
            threads.push(
                std::thread::Builder::new()
                    .name(format!("fh-fed-{name}"))
                    .spawn(move || handover::serve(&session, &config, &me, channel, next, &sessions))
                    .map_err(|error| FederationError::Thread { channel: name.clone(), error })?,
            );
        }
        Ok(threads)
    }
}

/// The user every hub of a federation authenticates as; the token is the
/// password (Zenoh's user-password authentication answers a nonce with an
/// HMAC of it, so the token never crosses the link).
const TOKEN_USER: &str = "fieldhub";

/// The Zenoh configuration: a peer with exactly the configured links, and
/// with a token, Zenoh's user-password authentication on every link — the
/// dictionary Zenoh checks others against is the returned file, to be
/// dropped (removed) once the session is open.
fn zenoh_config(f: &FederationConfig) -> Result<(zenoh::Config, Option<tempfile::NamedTempFile>), FederationError> {
    let mut config = zenoh::Config::default();
    let list = |endpoints: &[String]| serde_json::to_string(endpoints).unwrap_or_else(|_| "[]".into());
    let settings: [(&'static str, String); 8] = [
        ("mode", "\"peer\"".into()),
        ("listen/endpoints", list(&f.listen)),
        ("connect/endpoints", list(&f.connect)),
        ("scouting/multicast/enabled", "false".into()),
        // A listen endpoint that cannot be bound stops the start.
        ("listen/timeout_ms", "0".into()),
        ("listen/exit_on_failure", "true".into()),
        // Other hubs may start later: with a timeout (-1: none) and no
        // exit on failure, Zenoh retries connecting in the background.
        ("connect/timeout_ms", "-1".into()),
        ("connect/exit_on_failure", "false".into()),
    ];
    for (key, value) in settings {
        config.insert_json5(key, &value).map_err(|error| FederationError::Config { key, error: error.to_string() })?;
    }
    let token = match (&f.token, &f.token_file) {
        (Some(token), _) => token,
        (None, Some(path)) => return Err(FederationError::TokenNotRead { path: path.clone() }),
        (None, None) => return Ok((config, None)),
    };
    if token.contains(['\n', '\r']) || token.trim() != token {
        return Err(FederationError::BadToken);
    }
    let dictionary = write_dictionary(token).map_err(|error| FederationError::Dictionary { error })?;
    let path = serde_json::to_string(&dictionary.path()).unwrap_or_default();
    let quoted = |text: &str| serde_json::to_string(text).unwrap_or_default();
    let auth: [(&'static str, String); 3] = [
        ("transport/auth/usrpwd/user", quoted(TOKEN_USER)),
        ("transport/auth/usrpwd/password", quoted(token)),
        ("transport/auth/usrpwd/dictionary_file", path),
    ];
    for (key, value) in auth {
        config.insert_json5(key, &value).map_err(|error| FederationError::Config { key, error: error.to_string() })?;
    }
    Ok((config, Some(dictionary)))
}

/// The one-line dictionary `fieldhub:TOKEN`, in an owner-only file of its
/// own (created exclusively in the temporary directory).
fn write_dictionary(token: &str) -> std::io::Result<tempfile::NamedTempFile> {
    use std::io::Write;
    let mut file = tempfile::Builder::new().prefix("fieldhub-federation-").tempfile()?;
    writeln!(file, "{TOKEN_USER}:{token}")?;
    file.flush()?;
    Ok(file)
}
