//! The Zenoh session a hub opens from `[federation]`, the channel threads
//! it starts, and the link watch: while a relayed channel waits for its
//! owner, or fewer hubs are linked than this one connects to, it tries each
//! `connect` endpoint with a short-lived session of its own, and an
//! endpoint that refuses this hub's authentication (the hubs' federation
//! tokens differ) is named in the log with the fix and told to the waiting
//! clients ([`LinkTrouble`]). Zenoh itself logs only a closed handshake on
//! the side that connects, and on the side that refuses nothing above
//! debug: a hub learns of a refusal only by connecting, so a hub that only
//! listens cannot name it. Built with the `federation` feature only
//! (`unbuilt.rs` stands in without it).

use std::collections::HashMap;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use zenoh::Wait;

use super::channel::{FederatedChannel, LinkTrouble, LOOK};
use super::error::FederationError;
use super::handover;
use super::refusal::{refusal_fix, refuses_token};
use super::token;
use super::zenoh_threads::{self, HUB_ZENOH_RUNTIME, ZENOH_RUNTIME};
use crate::config::{FederationConfig, HubConfig, Role};
use crate::session::Sessions;
use fieldhub_bus::federation::{BusLink, ChannelStatus};

/// How long a relayed channel waits for its owner before the link watch
/// tries the `connect` endpoints, and how long between its tries then.
const WATCH_AFTER: Duration = Duration::from_secs(2);
const WATCH_EVERY: Duration = Duration::from_secs(20);

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
        let Some(mut federation) = config.federation.clone() else { return Ok(None) };
        if federation.token.is_none() && federation.token_file.is_none() {
            // Never unauthenticated, loopback included: the user's own token.
            let path = token::own_token_path()?;
            let (secret, made) = token::own_token(&path)?;
            let what = if made { "made its user's federation token" } else { "uses its user's federation token" };
            tracing::info!(
                "federation: [federation] names no token_file, so this hub {what} in {} (owner-only): hubs of \
                 this user on this machine link with it; a hub on another machine needs a copy, named by its \
                 token_file",
                path.display()
            );
            federation.token_file = Some(path);
            federation.token = Some(secret);
        }
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
                rates: channel.rates(),
                canfd: matches!(channel.protocol, crate::config::Protocol::Canfd | crate::config::Protocol::Canxl),
            });
        }
        let (zenoh_config, dictionary) = zenoh_config(&federation)?;
        let (runtime, users) = zenoh_threads::ask_for_threads()?;
        if users {
            tracing::info!(
                "federation: Zenoh's threads as {ZENOH_RUNTIME}={runtime:?} asks (the user's; the hub's own, \
                 {HUB_ZENOH_RUNTIME:?}, takes a hand-off less per message received)"
            );
        }
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

    /// Start each federated channel's thread, and the link watch when this
    /// hub connects to others.
    pub fn start(self, sessions: &Arc<Sessions>) -> Result<Vec<JoinHandle<()>>, FederationError> {
        let mut threads = Vec::new();
        let trouble: Arc<LinkTrouble> = Arc::default();
        let statuses: Vec<Arc<ChannelStatus>> = self.channels.iter().map(|c| Arc::clone(&c.status)).collect();
        for channel in self.channels {
            let name = channel.name.clone();
            let next = match channel.role.clone() {
                Role::Owner => handover::Next::Own { epoch: self.config.epoch, committed: Default::default() },
                Role::Relay { owner } => handover::Next::Relay { owner, standby: false },
                Role::Standby { owner } => handover::Next::Relay { owner, standby: true },
            };
            let (session, config, me, sessions, trouble) = (
                self.session.clone(),
                self.config.clone(),
                self.name.clone(),
                Arc::clone(sessions),
                Arc::clone(&trouble),
            );
            threads.push(
                std::thread::Builder::new()
                    .name(format!("fh-fed-{name}"))
                    .spawn(move || handover::serve(&session, (&config, &me), channel, next, &sessions, &trouble))
                    .map_err(|error| FederationError::Thread { channel: name.clone(), error })?,
            );
        }
        if !self.config.connect.is_empty() {
            let (session, config, sessions) = (self.session, self.config, Arc::clone(sessions));
            threads.push(
                std::thread::Builder::new()
                    .name("fh-fed-links".into())
                    .spawn(move || watch_links((&session, &config), &statuses, &trouble, &sessions))
                    .map_err(|error| FederationError::Thread { channel: "(link watch)".into(), error })?,
            );
        }
        Ok(threads)
    }
}

/// While a relayed channel waits for its owner, or fewer hubs are linked
/// than this one connects to, try the `connect` endpoints now and then;
/// name those that refuse this hub's authentication, in the log and to the
/// waiting clients (`trouble`).
fn watch_links(
    (session, config): (&zenoh::Session, &FederationConfig),
    statuses: &[Arc<ChannelStatus>],
    trouble: &LinkTrouble,
    sessions: &Sessions,
) {
    let mut refused: HashMap<&str, bool> = HashMap::new();
    let mut waiting_since: Option<Instant> = None;
    let mut next_try = Instant::now();
    while !sessions.stopping() {
        std::thread::sleep(LOOK);
        let waiting = statuses.iter().any(|s| s.waiting.lock().is_ok_and(|w| w.is_some()))
            || session.info().peers_zid().wait().count() < config.connect.len();
        let now = Instant::now();
        let since = match (waiting, waiting_since) {
            (false, _) => {
                waiting_since = None;
                continue;
            }
            (true, None) => *waiting_since.insert(now),
            (true, Some(since)) => since,
        };
        if now < since + WATCH_AFTER || now < next_try {
            continue;
        }
        next_try = now + WATCH_EVERY;
        for endpoint in &config.connect {
            let Some(tried) = try_link_aside(config, endpoint, sessions) else { return };
            let now_refused = tried.is_err_and(|why| refuses_token(&why));
            if now_refused && refused.get(endpoint.as_str()) != Some(&true) {
                tracing::error!(endpoint = %endpoint, "federation: {}", refusal_fix(config.token_file.as_deref(), endpoint));
            } else if !now_refused && refused.get(endpoint.as_str()) == Some(&true) {
                tracing::info!(endpoint = %endpoint, "federation: the endpoint no longer refuses this hub's link");
            }
            refused.insert(endpoint, now_refused);
        }
        let named: Vec<&str> = refused.iter().filter(|(_, r)| **r).map(|(e, _)| *e).collect();
        trouble.set((!named.is_empty()).then(|| {
            format!(
                "{} refused this hub's federation link: the hubs' federation tokens differ \
                 (every hub needs the same secret in its [federation] token_file)",
                named.join(", ")
            )
        }));
    }
}

/// [`try_link`] on a thread of its own, which the hub does not wait for when
/// it stops (a TCP connect to a host that does not answer takes minutes);
/// `None` when the hub stops first.
fn try_link_aside(config: &FederationConfig, endpoint: &str, sessions: &Sessions) -> Option<Result<(), String>> {
    let (tried, outcome) = crossbeam_channel::bounded(1);
    let (config, endpoint) = (config.clone(), endpoint.to_owned());
    let spawned = std::thread::Builder::new().name("fh-fed-try".into()).spawn(move || {
        let _ = tried.send(try_link(&config, &endpoint));
    });
    if let Err(e) = spawned {
        return Some(Err(format!("cannot start a thread to try the link: {e}")));
    }
    while !sessions.stopping() {
        match outcome.recv_timeout(LOOK) {
            Ok(outcome) => return Some(outcome),
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => continue,
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => return Some(Err("the try ended".into())),
        }
    }
    None
}

/// Open a short-lived Zenoh session with this hub's settings to `endpoint`
/// alone; the reason when it cannot link.
fn try_link(config: &FederationConfig, endpoint: &str) -> Result<(), String> {
    let probe = FederationConfig { listen: Vec::new(), connect: vec![endpoint.to_owned()], ..config.clone() };
    let (mut zenoh_config, dictionary) = zenoh_config(&probe).map_err(|e| e.to_string())?;
    // One attempt, its failure the session's; no other hub to link to.
    for (key, value) in [
        ("connect/timeout_ms", "0"),
        ("connect/exit_on_failure", "true"),
        ("scouting/gossip/autoconnect", "{ router: [], peer: [], client: [] }"),
    ] {
        zenoh_config.insert_json5(key, value).map_err(|e| e.to_string())?;
    }
    let session = zenoh::open(zenoh_config).wait().map_err(|e| e.to_string());
    drop(dictionary);
    session?.close().wait().map_err(|e| e.to_string())
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
    let settings: [(&'static str, String); 10] = [
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
        // The publishing thread writes each publication to the link itself:
        // no hand-off to Zenoh's transmit task (issue 35). Zenoh uses it on
        // a link only when both hubs ask for it (an older hub links as
        // before); it needs QoS off (one priority: the hub's publications
        // are all real-time anyway) and never fragments, so every
        // publication fits one Zenoh batch (`event.rs`, `ledger.rs`).
        ("transport/unicast/lowlatency", "true".into()),
        ("transport/unicast/qos/enabled", "false".into()),
    ];
    for (key, value) in settings {
        config.insert_json5(key, &value).map_err(|error| FederationError::Config { key, error: error.to_string() })?;
    }
    let token = match (&f.token, &f.token_file) {
        (Some(token), _) => token,
        (None, Some(path)) => return Err(FederationError::TokenNotRead { path: path.clone() }),
        (None, None) => return Err(FederationError::NoToken),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_zenoh_config_asks_for_the_low_latency_transport_with_qos_off() {
        let federation: FederationConfig = toml::from_str("listen = [\"tcp/127.0.0.1:0\"]").unwrap();
        let federation = FederationConfig { token: Some("a-shared-secret".into()), ..federation };
        let (config, _dictionary) = zenoh_config(&federation).unwrap();
        // Both hubs set these themselves: Zenoh links low-latency only when both ask.
        assert_eq!(config.get_json("transport/unicast/lowlatency").unwrap(), "true");
        assert_eq!(config.get_json("transport/unicast/qos/enabled").unwrap(), "false");
    }
}
