//! Hub configuration: a TOML file, or the built-in default.
//!
//! Validation happens here, once, before anything starts: a config that loads
//! is one the hub can run. Errors name the file, the line and the field.
//!
//! The file has one `[hub]` table and arrays of `[[channel]]` (buses),
//! `[[port]]` (named connectors clients claim, optionally wired to a channel
//! and rate-limited), `[[route]]` (gateway rules between channels, like
//! Linux can-gw), `[[gateway]]` (CAN↔LIN gateways, `fieldhub_bus::lin_gateway`),
//! `[[silkit]]` (channels on Vector SIL Kit CAN networks,
//! `config_silkit.rs`), `[[cannelloni]]` (cannelloni endpoints,
//! `cannelloni.rs`) and `[[access]]` (per-client permissions,
//! `config_access.rs`). `docs/configuration.md` documents every key.

mod access;
mod cannelloni;
mod federation;
mod hub_section;
mod lin_ldf;
pub mod platform;
mod rbs;
mod silkit;
mod source;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use fieldhub_proto::limits::MAX_TOKEN_LEN;
use serde::Deserialize;

pub use crate::config::access::AccessConfig;
pub use crate::config::cannelloni::{CannelloniConfig, CannelloniListen, MAX_LEARNED_PEERS};
pub use crate::config::federation::{FederationConfig, Role};
pub use crate::config::hub_section::{HubSection, TlsFiles};
pub use crate::config::rbs::{RbsChecksum, RbsConfig, RbsCounter};
pub use crate::config::silkit::{SilKitConfig, SilKitMode};
pub(crate) use crate::config::source::ConfigSource;
pub use fieldhub_bus::access::ALL_CHANNELS;
pub use fieldhub_bus::config::{
    BusConfig, ChannelConfig, PortConfig, Protocol, RouteConfig, StallPolicy, TimeConfig, TimeMode, Timing,
    DEFAULT_BITRATE, DEFAULT_STEP_TIMEOUT_MS, MAX_BITRATE, MAX_CHANNELS, MAX_DATA_BITRATE, MAX_HOP_LIMIT, MAX_ROUTES,
    MIN_PORT_RATE,
};
pub use fieldhub_bus::lin_gateway::{GatewayConfig, MAX_GATEWAYS};
pub use fieldhub_bus::names::check_name;

/// The configuration used when none is given: two ideal classic CAN
/// channels, `can0` and `can1`, listening on loopback only and serving
/// local clients over shared memory as `shm://default`.
#[cfg(target_os = "linux")]
pub const DEFAULT_CONFIG: &str = r#"# fieldhub built-in default configuration
[hub]
name = "fieldhub"
listen = ["127.0.0.1:29536"]
# Local clients find this name and use shared memory instead of TCP.
shm = "default"

[[channel]]
name = "can0"
protocol = "can"

[[channel]]
name = "can1"
protocol = "can"
"#;

/// The configuration used when none is given where shared memory is
/// Linux-only (`platform`): the same channels, over TCP only.
#[cfg(not(target_os = "linux"))]
pub const DEFAULT_CONFIG: &str = r#"# fieldhub built-in default configuration
[hub]
name = "fieldhub"
listen = ["127.0.0.1:29536"]

[[channel]]
name = "can0"
protocol = "can"

[[channel]]
name = "can1"
protocol = "can"
"#;

/// Why a configuration was rejected.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("{origin}: {message}")]
    Parse { origin: String, message: String },
    #[error("{origin}: {field}: {message}")]
    Invalid { origin: String, field: String, message: String },
}

/// The whole hub configuration.
#[derive(Clone, Debug)]
pub struct HubConfig {
    pub hub: HubSection,
    pub channels: Vec<ChannelConfig>,
    pub ports: Vec<PortConfig>,
    pub routes: Vec<RouteConfig>,
    /// CAN↔LIN gateways (`[[gateway]]`).
    pub gateways: Vec<GatewayConfig>,
    /// SIL Kit CAN networks channels join (`[[silkit]]`).
    pub silkit: Vec<SilKitConfig>,
    /// cannelloni endpoints (`[[cannelloni]]`).
    pub cannelloni: Vec<CannelloniConfig>,
    /// Hubs this one shares channels with (`[federation]`).
    pub federation: Option<FederationConfig>,
    /// Per-client permissions (`[[access]]`).
    pub access: Vec<AccessConfig>,
    /// Rest-bus simulations the hub runs (`[[rbs]]`).
    pub rbs: Vec<RbsConfig>,
}

/// The file as written, with the position of each table.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    #[serde(default)]
    hub: HubSection,
    #[serde(default)]
    channel: Vec<ChannelConfig>,
    #[serde(default)]
    port: Vec<PortConfig>,
    #[serde(default)]
    route: Vec<RouteConfig>,
    #[serde(default)]
    gateway: Vec<GatewayConfig>,
    #[serde(default)]
    silkit: Vec<SilKitConfig>,
    #[serde(default)]
    cannelloni: Vec<CannelloniConfig>,
    #[serde(default)]
    federation: Option<FederationConfig>,
    #[serde(default)]
    access: Vec<AccessConfig>,
    #[serde(default)]
    rbs: Vec<RbsConfig>,
}

/// Where a hub listens: `HOST:PORT` (TCP) or `unix:PATH`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ListenAddr {
    Tcp(SocketAddr),
    Unix(PathBuf),
}

impl ListenAddr {
    /// Parse `HOST:PORT`, `tcp://HOST:PORT` or `unix:PATH`.
    pub fn parse(text: &str) -> Result<Self, String> {
        if let Some(path) = text.strip_prefix("unix:") {
            if path.is_empty() {
                return Err("'unix:' needs a socket path, as in unix:/run/fieldhub.sock".into());
            }
            return Ok(Self::Unix(PathBuf::from(path)));
        }
        let addr = text.strip_prefix("tcp://").unwrap_or(text);
        addr.parse::<SocketAddr>()
            .map(Self::Tcp)
            .map_err(|e| format!("'{text}' is neither HOST:PORT (an IP address and a port) nor unix:PATH ({e})"))
    }

    /// Whether only this machine can reach the address.
    pub fn is_local(&self) -> bool {
        match self {
            Self::Tcp(addr) => addr.ip().is_loopback(),
            Self::Unix(_) => true,
        }
    }
}

impl std::fmt::Display for ListenAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Tcp(addr) => write!(f, "tcp://{addr}"),
            Self::Unix(path) => write!(f, "unix:{}", path.display()),
        }
    }
}

impl HubConfig {
    /// Check the `[[access]]` tokens read so far (the binary reads them
    /// after parsing): each needs the hub's token and differs from every other.
    pub fn check_access_tokens(&self, source: &ConfigSource<'_>) -> Result<(), (String, String)> {
        access::check_tokens(&self.access, &self.hub, source)
    }

    /// Every `[[access]]` table holds its token (the fieldhub binary reads
    /// every `token_file`; a program that builds a configuration itself sets
    /// `AccessConfig::token`), and the tokens pass [`Self::check_access_tokens`]:
    /// a table without its secret would admit nobody, silently.
    pub fn check_access(&self) -> Result<(), ConfigError> {
        let invalid = |field, message| ConfigError::Invalid { origin: "configuration".into(), field, message };
        if let Some((i, a)) = self.access.iter().enumerate().find(|(_, a)| a.token.is_none()) {
            let message = format!(
                "'{}': its token was not read from {}; the fieldhub binary reads every token_file, a program \
                 that starts the hub itself sets AccessConfig::token",
                a.name,
                a.token_file.display()
            );
            return Err(invalid(format!("access[{i}].token_file"), message));
        }
        self.check_access_tokens(&ConfigSource::none()).map_err(|(field, message)| invalid(field, message))
    }

    /// What the bus thread runs of this configuration.
    pub fn bus_config(&self) -> BusConfig {
        BusConfig {
            name: self.hub.name.clone(),
            channels: self.channels.clone(),
            ports: self.ports.clone(),
            routes: self.routes.clone(),
            gateways: self.gateways.clone(),
            time: TimeConfig {
                participants: self.hub.time_participants.clone(),
                step_timeout_ms: self.hub.step_timeout_ms,
                on_stall: self.hub.on_stall,
            },
        }
    }

    /// The built-in default configuration.
    pub fn builtin() -> Self {
        Self::parse(DEFAULT_CONFIG, "built-in default configuration").expect("the built-in configuration is valid")
    }

    /// Load and validate a TOML file.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| ConfigError::Read { path: path.display().to_string(), source })?;
        Self::parse_in(&text, &path.display().to_string(), path.parent().unwrap_or(Path::new("")))
    }

    /// Parse and validate TOML text; `origin` names it in error messages,
    /// and files it names (`[channel.lin] ldf`, a channel's `dbc`) are
    /// relative to the working directory.
    pub fn parse(text: &str, origin: &str) -> Result<Self, ConfigError> {
        Self::parse_in(text, origin, Path::new(""))
    }

    /// Parse and validate the TOML text of a file in directory `dir`, which
    /// the files it names (`[channel.lin] ldf`, a channel's `dbc`) are
    /// relative to.
    pub fn parse_in(text: &str, origin: &str, dir: &Path) -> Result<Self, ConfigError> {
        let file: ConfigFile = toml::from_str(text)
            .map_err(|e| ConfigError::Parse { origin: origin.to_owned(), message: describe_toml_error(text, &e) })?;
        let mut channels = file.channel;
        let source = ConfigSource::parse(text);
        for (i, channel) in channels.iter_mut().enumerate() {
            if let Some(dbc) = channel.dbc.take() {
                channel.dbc = Some(dir.join(dbc));
            }
            lin_ldf::apply(channel, dir).map_err(|(key, message)| ConfigError::Invalid {
                origin: origin.to_owned(),
                field: source.table_field("channel", i, key),
                message,
            })?;
        }
        let config = HubConfig {
            hub: file.hub,
            channels,
            ports: file.port,
            routes: file.route,
            gateways: file.gateway,
            silkit: file.silkit,
            cannelloni: file.cannelloni,
            federation: file.federation,
            access: file.access,
            rbs: file.rbs,
        };
        config.check(origin, &source)?;
        Ok(config)
    }

    /// A configuration built in code (no source lines for messages), with
    /// no SIL Kit networks and no federation.
    pub fn new(
        hub: HubSection,
        channels: Vec<ChannelConfig>,
        ports: Vec<PortConfig>,
        routes: Vec<RouteConfig>,
    ) -> Self {
        Self {
            hub,
            channels,
            ports,
            routes,
            gateways: Vec::new(),
            silkit: Vec::new(),
            cannelloni: Vec::new(),
            federation: None,
            access: Vec::new(),
            rbs: Vec::new(),
        }
    }

    /// Listen addresses, parsed.
    pub fn listen_addrs(&self) -> Result<Vec<ListenAddr>, ConfigError> {
        self.hub
            .listen
            .iter()
            .enumerate()
            .map(|(i, text)| {
                ListenAddr::parse(text).map_err(|message| ConfigError::Invalid {
                    origin: "configuration".to_owned(),
                    field: format!("hub.listen[{i}]"),
                    message,
                })
            })
            .collect()
    }

    /// The files of `[hub] tls_*`, when the hub speaks TLS.
    pub fn tls_files(&self) -> Option<TlsFiles> {
        let (cert, key) = (self.hub.tls_cert.clone()?, self.hub.tls_key.clone()?);
        Some(TlsFiles { cert, key, client_ca: self.hub.tls_client_ca.clone() })
    }

    /// [`platform::admits_by_user_only`] on this platform, as the error a
    /// start (and `--check-config`) gives.
    pub fn check_admission_here(&self) -> Result<(), ConfigError> {
        match platform::admits_by_user_only(&self.hub, platform::LINUX) {
            Some(why) => Err(ConfigError::Invalid {
                origin: "configuration".into(),
                field: "hub.token".into(),
                message: why.to_string(),
            }),
            None => Ok(()),
        }
    }

    /// Check every rule; `origin` names the configuration in errors.
    pub fn validate(&self, origin: &str) -> Result<(), ConfigError> {
        self.check(origin, &ConfigSource::none())
    }

    /// Check every rule again, after the binary changed the configuration
    /// parsed from `text` (options, secrets read from files); errors name
    /// the line of the field in `text`.
    pub fn validate_text(&self, text: &str, origin: &str) -> Result<(), ConfigError> {
        self.check(origin, &ConfigSource::parse(text))
    }

    /// The virtual-time keys mean something only in virtual time.
    fn check_time(&self) -> Result<(), (&'static str, String)> {
        let hub = &self.hub;
        if hub.time == TimeMode::Real && !hub.time_participants.is_empty() {
            return Err(("time_participants", "needs time = \"virtual\"".into()));
        }
        if hub.step_timeout_ms == 0 {
            return Err(("step_timeout_ms", "must be at least 1".into()));
        }
        for name in &hub.time_participants {
            check_name(name).map_err(|m| ("time_participants", format!("'{name}': {m}")))?;
        }
        Ok(())
    }

    /// Check every rule; errors name the field, with its line in `source`.
    fn check(&self, origin: &str, source: &ConfigSource<'_>) -> Result<(), ConfigError> {
        let invalid =
            |field: String, message: String| ConfigError::Invalid { origin: origin.to_owned(), field, message };
        let hub = |key: &str| source.hub_field(key);
        check_name(&self.hub.name).map_err(|m| invalid(hub("name"), m))?;
        if self.hub.listen.is_empty() {
            return Err(invalid(hub("listen"), "at least one listen address is needed".into()));
        }
        if let Some((field, why)) = platform::linux_only(&self.hub, &self.ports, platform::LINUX) {
            let field = match field {
                platform::Field::Hub(key) => hub(key),
                platform::Field::Port(i, key) => source.table_field("port", i, key),
            };
            return Err(invalid(field, why.to_string()));
        }
        #[cfg(target_os = "linux")]
        if let Some(name) = &self.hub.shm {
            fieldhub_shm::socket::check_name(name).map_err(|m| invalid(hub("shm"), m))?;
        }
        fieldhub_shm::layout::check_ring_slots(self.hub.shm_ring_slots)
            .map_err(|m| invalid(hub("shm_ring_slots"), m))?;
        self.check_time().map_err(|(key, m)| invalid(hub(key), m))?;
        for path in &self.hub.ivshmem {
            check_region_path(path).map_err(|m| invalid(hub("ivshmem"), format!("{}: {m}", path.display())))?;
        }
        let addrs = self.listen_addrs().map_err(|e| match e {
            ConfigError::Invalid { field, message, .. } => invalid(field, message),
            other => other,
        })?;
        match &self.hub.token {
            Some(token) if token.is_empty() || token.len() > MAX_TOKEN_LEN => {
                return Err(invalid(hub("token"), format!("must be 1 to {MAX_TOKEN_LEN} bytes")));
            }
            // Mutual TLS authenticates remote clients by their certificates.
            None if self.hub.tls_client_ca.is_some() => {}
            None => {
                if let Some(addr) = addrs.iter().find(|a| !a.is_local()) {
                    return Err(invalid(
                        hub("listen"),
                        format!("{addr} is reachable from other machines; set hub.token or hub.tls_client_ca (remote access requires a token or client certificates) or listen on 127.0.0.1"),
                    ));
                }
            }
            Some(_) if self.hub.insecure_local => {
                return Err(invalid(
                    hub("insecure_local"),
                    "contradicts hub.token: insecure_local admits every local user without one; drop one of them"
                        .into(),
                ));
            }
            Some(_) => {}
        }
        match (&self.hub.monitor_token, &self.hub.token) {
            (Some(monitor), _) if monitor.is_empty() || monitor.len() > MAX_TOKEN_LEN => {
                return Err(invalid(hub("monitor_token"), format!("must be 1 to {MAX_TOKEN_LEN} bytes")));
            }
            (Some(_), None) => {
                return Err(invalid(
                    hub("monitor_token"),
                    "needs hub.token: the monitor token is a second token beside the hub's, for other users and machines".into(),
                ));
            }
            (Some(monitor), Some(token)) if monitor == token => {
                return Err(invalid(hub("monitor_token"), "must differ from hub.token".into()));
            }
            _ => {}
        }
        match (&self.hub.tls_cert, &self.hub.tls_key, &self.hub.tls_client_ca) {
            (Some(_), None, _) => {
                return Err(invalid(hub("tls_cert"), "needs hub.tls_key, the certificate's private key".into()))
            }
            (None, Some(_), _) => {
                return Err(invalid(hub("tls_key"), "needs hub.tls_cert, the certificate the key belongs to".into()))
            }
            (None, None, Some(_)) => {
                return Err(invalid(
                    hub("tls_client_ca"),
                    "needs hub.tls_cert and hub.tls_key: clients present certificates only to a hub that speaks TLS"
                        .into(),
                ))
            }
            _ => {}
        }
        if self.channels.is_empty() {
            return Err(invalid("channel".into(), "at least one [[channel]] is needed".into()));
        }
        if self.channels.len() > MAX_CHANNELS {
            return Err(invalid("channel".into(), format!("at most {MAX_CHANNELS} channels")));
        }
        if self.routes.len() > MAX_ROUTES {
            return Err(invalid("route".into(), format!("at most {MAX_ROUTES} routes")));
        }
        for (i, c) in self.channels.iter().enumerate() {
            let field = |key: &str| source.table_field("channel", i, key);
            check_name(&c.name).map_err(|m| invalid(field("name"), m))?;
            if self.channels[..i].iter().any(|other| other.name == c.name) {
                return Err(invalid(field("name"), format!("channel '{}' is defined twice", c.name)));
            }
            c.check_rates().map_err(|(key, message)| invalid(field(key), message))?;
            c.check_arbitration().map_err(|(key, message)| invalid(field(key), message))?;
        }
        for (i, p) in self.ports.iter().enumerate() {
            let field = |key: &str| source.table_field("port", i, key);
            check_name(&p.name).map_err(|m| invalid(field("name"), m))?;
            if self.ports[..i].iter().any(|other| other.name == p.name) {
                return Err(invalid(field("name"), format!("port '{}' is defined twice", p.name)));
            }
            if let Some(channel) = &p.channel {
                self.check_channel_ref(channel).map_err(|m| invalid(field("channel"), m))?;
            }
            if let Some(rate) = p.rate {
                if !(rate.is_finite() && rate >= MIN_PORT_RATE) {
                    return Err(invalid(
                        field("rate"),
                        format!("{rate:?} is not a number of frames per second of at least {MIN_PORT_RATE} (one frame every 1,000 s)"),
                    ));
                }
            }
            if p.burst == Some(0) {
                return Err(invalid(field("burst"), "must be at least 1 frame".into()));
            }
            if p.burst.is_some() && p.rate.is_none() {
                return Err(invalid(field("burst"), "only makes sense with a rate".into()));
            }
            if let Some(interface) = &p.socketcan {
                check_interface_name(interface).map_err(|m| invalid(field("socketcan"), m))?;
                if p.channel.is_none() {
                    return Err(invalid(
                        field("socketcan"),
                        "a SocketCAN port needs a `channel` to be wired to".into(),
                    ));
                }
                if let Some(channel) = &p.channel {
                    self.check_can_bridge(channel, "a SocketCAN port").map_err(|m| invalid(field("channel"), m))?;
                }
                if let Some(j) = self.ports[..i].iter().position(|other| other.socketcan.as_ref() == Some(interface)) {
                    let text = format!("interface '{interface}' is already port '{}'", self.ports[j].name);
                    return Err(invalid(field("socketcan"), text));
                }
            }
        }
        for (i, r) in self.routes.iter().enumerate() {
            let field = |key: &str| source.table_field("route", i, key);
            self.check_channel_ref(&r.from).map_err(|m| invalid(field("from"), m))?;
            self.check_channel_ref(&r.to).map_err(|m| invalid(field("to"), m))?;
            if r.from == r.to {
                return Err(invalid(field("to"), format!("a route from '{}' to itself would echo every frame", r.to)));
            }
            r.check_values().map_err(|(key, m)| invalid(field(key), m))?;
            if let Some(to) = self.channels.iter().find(|c| c.name == r.to) {
                fieldhub_bus::channel::check_route_into(to).map_err(|m| invalid(field("to"), m))?;
            }
        }
        if self.gateways.len() > MAX_GATEWAYS {
            return Err(invalid("gateway".into(), format!("at most {MAX_GATEWAYS} gateways")));
        }
        for (i, g) in self.gateways.iter().enumerate() {
            let field = |key: &str| source.table_field("gateway", i, key);
            let channel = |key: &'static str, name: &str| {
                self.check_channel_ref(name).map_err(|m| invalid(field(key), m))?;
                Ok(self.channels.iter().find(|c| c.name == name).expect("checked"))
            };
            let (from, to) = (channel("from", &g.from)?, channel("to", &g.to)?);
            if from.federated || to.federated {
                let name = if from.federated { &from.name } else { &to.name };
                let text = format!("channel '{name}' is federated; a gateway joins channels of this hub only");
                return Err(invalid(field(if from.federated { "from" } else { "to" }), text));
            }
            fieldhub_bus::lin_gateway::Mapping::new(g, from, to).map_err(|(key, m)| invalid(field(key), m))?;
        }
        federation::check(self.federation.as_ref(), &self.hub, &self.channels, source)
            .map_err(|(field, m)| invalid(field, m))?;
        access::check(&self.access, &self.hub, |c| self.check_channel_ref(c), source)
            .map_err(|(field, m)| invalid(field, m))?;
        for (i, s) in self.silkit.iter().enumerate() {
            let field = |key: &str| source.table_field("silkit", i, key);
            self.check_channel_ref(&s.channel).map_err(|m| invalid(field("channel"), m))?;
            self.check_can_bridge(&s.channel, "a SIL Kit bridge").map_err(|m| invalid(field("channel"), m))?;
            s.check_values().map_err(|(key, m)| invalid(field(key), m))?;
            if s.synchronized && self.hub.time != TimeMode::Virtual {
                let text =
                    "a synchronised SIL Kit bridge steps with the hub's virtual time: set [hub] time = \"virtual\"";
                return Err(invalid(field("synchronized"), text.into()));
            }
            let earlier = &self.silkit[..i];
            // The same network twice would hand every frame over twice.
            if let Some(j) = earlier.iter().position(|o| o.registry == s.registry && o.network == s.network) {
                let text = format!("network '{}' of {} is already joined by silkit[{j}]", s.network, s.registry);
                return Err(invalid(field("network"), text));
            }
            let name = s.participant_name();
            if let Some(j) = earlier.iter().position(|o| o.participant_name() == name) {
                let text = format!("participant name '{name}' is already silkit[{j}]'s; SIL Kit needs unique names");
                return Err(invalid(field("participant"), text));
            }
        }
        for (i, c) in self.cannelloni.iter().enumerate() {
            let field = |key: &str| source.table_field("cannelloni", i, key);
            self.check_channel_ref(&c.channel).map_err(|m| invalid(field("channel"), m))?;
            self.check_can_bridge(&c.channel, "a cannelloni endpoint").map_err(|m| invalid(field("channel"), m))?;
            c.check_values().map_err(|(key, m)| invalid(field(key), m))?;
            let listen = c.listen_addr().map_err(|m| invalid(field("listen"), m))?;
            if listen.addr().port() != 0 {
                if let Some(j) = self.cannelloni[..i].iter().position(|o| o.listen_addr() == Ok(listen)) {
                    return Err(invalid(field("listen"), format!("{listen} is already cannelloni[{j}]'s")));
                }
            }
        }
        for (i, r) in self.rbs.iter().enumerate() {
            let field = |key: &str| source.table_field("rbs", i, key);
            self.check_channel_ref(&r.channel).map_err(|m| invalid(field("channel"), m))?;
            r.setup().map_err(|m| invalid(field("nodes"), m))?;
        }
        Ok(())
    }

    /// A bridge that carries CAN and CAN FD frames (`bridge`: its name) is
    /// not wired to a `canxl` or `raw` channel: its frames have no form
    /// there (SocketCAN's raw frames, SIL Kit's and cannelloni's records).
    fn check_can_bridge(&self, channel: &str, bridge: &str) -> Result<(), String> {
        match self.channels.iter().find(|c| c.name == channel).map(|c| c.protocol) {
            Some(protocol @ (Protocol::Canxl | Protocol::Raw)) => Err(format!(
                "{bridge} carries CAN and CAN FD frames; channel '{channel}' is protocol = \"{}\", whose frames it \
                 cannot pass on",
                protocol.name()
            )),
            _ => Ok(()),
        }
    }

    pub(crate) fn check_channel_ref(&self, name: &str) -> Result<(), String> {
        if self.channels.iter().any(|c| c.name == name) {
            Ok(())
        } else {
            let known: Vec<&str> = self.channels.iter().map(|c| c.name.as_str()).collect();
            Err(format!("no channel named '{name}' (channels: {})", known.join(", ")))
        }
    }
}

/// Names appear in logs and candump lines, so they are restricted to a safe
/// alphabet.
/// An ivshmem region file the hub may create: an absolute path to a file
/// in an existing directory.
fn check_region_path(path: &Path) -> Result<(), String> {
    if !path.is_absolute() {
        return Err("must be an absolute path, as in /dev/shm/fieldhub-vm0".into());
    }
    match path.parent() {
        Some(dir) if path.file_name().is_some() && dir.is_dir() => Ok(()),
        Some(dir) if path.file_name().is_some() => Err(format!("directory {} does not exist", dir.display())),
        _ => Err("must name a file, as in /dev/shm/fieldhub-vm0".into()),
    }
}

/// Check a Linux network interface name: 1 to 15 bytes (`IFNAMSIZ` - 1),
/// no `/`, no whitespace, not `.` or `..`.
fn check_interface_name(name: &str) -> Result<(), String> {
    let fits = !name.is_empty() && name.len() < 16;
    let clean = !name.bytes().any(|b| b == b'/' || b == b':' || b.is_ascii_whitespace() || b.is_ascii_control());
    if !fits || !clean || name == "." || name == ".." {
        return Err(format!(
            "'{name}' is not a network interface name (1 to 15 bytes, no '/', ':' or spaces; see `ip link`)"
        ));
    }
    Ok(())
}

fn describe_toml_error(text: &str, error: &toml::de::Error) -> String {
    let message = error.message().trim_end().to_owned();
    match error.span() {
        Some(span) => {
            let line = text[..span.start.min(text.len())].matches('\n').count() + 1;
            format!("line {line}: {message}")
        }
        None => message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_config_has_two_can_channels_on_loopback() {
        let config = HubConfig::builtin();
        let names: Vec<_> = config.channels.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["can0", "can1"]);
        assert!(config.listen_addrs().unwrap().iter().all(ListenAddr::is_local));
    }

    #[test]
    fn unknown_field_is_named_with_its_line() {
        let err = HubConfig::parse("[hub]\nname = \"x\"\n\n[[channel]]\nname = \"a\"\nbitrat = 5\n", "test.toml")
            .unwrap_err();
        let text = err.to_string();
        assert!(text.contains("test.toml") && text.contains("line 6") && text.contains("bitrat"), "{text}");
    }

    #[test]
    fn a_bad_ivshmem_path_is_an_error_naming_the_field() {
        for (path, why) in [("vm0", "absolute"), ("/no/such/dir/vm0", "does not exist")] {
            let text = format!("[hub]\nivshmem = [\"{path}\"]\n[[channel]]\nname = \"a\"\n");
            let err = HubConfig::parse(&text, "t").unwrap_err().to_string();
            assert!(err.contains("hub.ivshmem") && err.contains(path) && err.contains(why), "{err}");
        }
        let config = HubConfig::parse("[hub]\nivshmem = [\"/dev/shm/fieldhub-vm0\"]\n[[channel]]\nname = \"a\"\n", "t");
        assert_eq!(config.unwrap().hub.ivshmem, [PathBuf::from("/dev/shm/fieldhub-vm0")]);
    }

    #[test]
    fn an_shm_ring_size_that_is_no_power_of_two_in_range_is_refused() {
        for slots in [0, 2048, 5000, 1 << 21] {
            let text = format!("[hub]\nshm_ring_slots = {slots}\n[[channel]]\nname = \"a\"\n");
            let err = HubConfig::parse(&text, "t").unwrap_err().to_string();
            assert!(err.contains("hub.shm_ring_slots") && err.contains("power of two from 4096 to 1048576"), "{err}");
        }
        let config = HubConfig::parse("[hub]\nshm_ring_slots = 65536\n[[channel]]\nname = \"a\"\n", "t");
        assert_eq!(config.unwrap().hub.shm_ring_slots, 65536);
    }

    #[test]
    fn a_semantic_mistake_names_the_line_of_its_field_not_of_its_table() {
        let text =
            "[[channel]]\nname = \"a\"\n\n[[channel]]\nname = \"b\"\nbitrate = 500000\n\ndata_bitrate = 2000000\n";
        let err = HubConfig::parse(text, "bench.toml").unwrap_err().to_string();
        assert!(err.contains("bench.toml: line 8: channel[1].data_bitrate: only"), "{err}");
    }

    #[test]
    fn duplicate_channel_is_rejected() {
        let err = HubConfig::parse("[[channel]]\nname = \"a\"\n[[channel]]\nname = \"a\"\n", "t").unwrap_err();
        assert!(err.to_string().contains("line 4: channel[1].name"), "{err}");
    }

    #[test]
    fn remote_listen_without_token_is_rejected() {
        let err = HubConfig::parse("[hub]\nlisten = [\"0.0.0.0:1\"]\n[[channel]]\nname = \"a\"\n", "t").unwrap_err();
        assert!(err.to_string().contains("requires a token"), "{err}");
        assert!(HubConfig::parse("[hub]\nlisten = [\"0.0.0.0:1\"]\ntoken = \"s\"\n[[channel]]\nname = \"a\"\n", "t")
            .is_ok());
    }

    #[test]
    fn a_monitor_token_needs_a_token_and_must_differ_from_it() {
        let parse = |hub: &str| HubConfig::parse(&format!("[hub]\n{hub}\n[[channel]]\nname = \"a\"\n"), "t");
        let err = parse("monitor_token = \"look\"").unwrap_err().to_string();
        assert!(err.contains("monitor_token") && err.contains("needs hub.token"), "{err}");
        let err = parse("token = \"same\"\nmonitor_token = \"same\"").unwrap_err().to_string();
        assert!(err.contains("must differ from hub.token"), "{err}");
        let err = parse("token = \"s\"\nmonitor_token = \"\"").unwrap_err().to_string();
        assert!(err.contains("must be 1 to"), "{err}");
        assert!(parse("token = \"sesame\"\nmonitor_token = \"look\"").is_ok());
    }

    #[test]
    fn listen_addresses_parse_tcp_and_unix() {
        assert_eq!(ListenAddr::parse("unix:/tmp/h.sock"), Ok(ListenAddr::Unix("/tmp/h.sock".into())));
        assert!(matches!(ListenAddr::parse("tcp://127.0.0.1:5"), Ok(ListenAddr::Tcp(_))));
        assert!(ListenAddr::parse("localhost").unwrap_err().contains("HOST:PORT"));
    }

    /// The complete example of docs/configuration.md parses, every option
    /// lands where it should.
    #[test]
    fn documented_example_parses_with_every_option() {
        let doc = include_str!("../../../../docs/configuration.md");
        let start = doc.find("```toml\n").unwrap() + "```toml\n".len();
        let text = &doc[start..start + doc[start..].find("```").unwrap()];
        let config = HubConfig::parse(text, "docs/configuration.md").unwrap();
        assert_eq!(config.hub.name, "hil-bench");
        assert_eq!(config.listen_addrs().unwrap()[1], ListenAddr::Unix("/tmp/fieldhub.sock".into()));
        let body = &config.channels[0];
        assert_eq!(
            (body.protocol, body.bitrate, body.timing, body.no_ack),
            (Protocol::Can, 500_000, Timing::Timed, true)
        );
        let pt = &config.channels[1];
        assert_eq!((pt.protocol, pt.bitrate, pt.effective_data_bitrate()), (Protocol::Canfd, 1_000_000, 4_000_000));
        assert_eq!(config.ports[0].channel.as_deref(), Some("powertrain"));
        assert_eq!((config.ports[0].rate, config.ports[0].burst), (Some(1000.0), Some(10)));
        assert_eq!(config.ports[1].channel, None);
        let route = &config.routes[0];
        assert_eq!(
            (route.id, route.mask, route.extended, route.rewrite_id, route.hop_limit),
            (0x100, 0x700, Some(false), Some(0x500), 1)
        );
        let gateway = &config.gateways[0];
        assert_eq!(
            (gateway.from.as_str(), gateway.to.as_str(), gateway.can_id, gateway.lin_id, gateway.node.as_deref()),
            ("body", "doors", 0x120, 0x20, Some("BCM"))
        );
        let silkit = &config.silkit[0];
        assert_eq!(
            (silkit.channel.as_str(), silkit.registry.as_str(), silkit.network.as_str()),
            ("powertrain", "silkit://127.0.0.1:8500", "PT_CAN")
        );
        assert_eq!(silkit.participant_name(), "fieldhub-pt");
    }

    #[test]
    fn a_gateway_the_channels_cannot_carry_is_refused_naming_its_line_and_key() {
        let channels =
            "[[channel]]\nname = \"can\"\n[[channel]]\nname = \"lin\"\nprotocol = \"lin\"\nbitrate = 19200\n\
            [channel.lin]\nschedule = [{ id = 0x10, delay_ms = 10 }]\n";
        let parse = |gateway: &str| HubConfig::parse(&format!("{channels}[[gateway]]\n{gateway}"), "t");
        let err = parse("from = \"can\"\nto = \"lin\"\ncan_id = 0x120\nlin_id = 0x11\n").unwrap_err().to_string();
        assert!(err.contains("line 13: gateway[0].lin_id"), "{err}");
        assert!(err.contains("identifier 0x11, which this channel's schedule table never sends (0x10)"), "{err}");
        let err = parse("from = \"can\"\nto = \"cab\"\ncan_id = 0x120\nlin_id = 0x10\n").unwrap_err().to_string();
        assert!(err.contains("gateway[0].to") && err.contains("no channel named 'cab'"), "{err}");
        let err =
            parse("from = \"can\"\nto = \"lin\"\ncan_id = 0x120\nlin_id = 0x10\nmask = 1\n").unwrap_err().to_string();
        assert!(err.contains("unknown field `mask`"), "{err}");
        let config = parse("from = \"lin\"\nto = \"can\"\ncan_id = 0x310\nlin_id = 0x10\n").unwrap();
        assert_eq!(config.bus_config().gateways[0].can_id, 0x310);
    }

    #[test]
    fn virtual_time_keys_parse_and_make_sense_only_in_virtual_time() {
        let text = "[hub]\ntime = \"virtual\"\ntime_participants = [\"ecu1\"]\nstep_timeout_ms = 200\non_stall = \"drop\"\n[[channel]]\nname = \"a\"\n";
        let hub = HubConfig::parse(text, "t").unwrap().hub;
        assert_eq!((hub.time, hub.step_timeout_ms, hub.on_stall), (TimeMode::Virtual, 200, StallPolicy::Drop));
        assert_eq!(hub.time_participants, ["ecu1"]);
        let real = rejection("[hub]\ntime_participants = [\"ecu1\"]\n[[channel]]\nname = \"a\"\n");
        assert!(real.contains("hub.time_participants") && real.contains("time = \"virtual\""), "{real}");
        let zero = rejection("[hub]\ntime = \"virtual\"\nstep_timeout_ms = 0\n[[channel]]\nname = \"a\"\n");
        assert!(zero.contains("line 3: hub.step_timeout_ms"), "{zero}");
    }

    fn rejection(text: &str) -> String {
        HubConfig::parse(text, "t.toml").unwrap_err().to_string()
    }

    #[test]
    fn each_kind_of_invalid_value_is_named() {
        let ch = "[[channel]]\nname = \"a\"\n";
        let cases = [
            (format!("{ch}bitrate = 0\n"), "line 3: channel[0].bitrate"),
            (format!("{ch}bitrate = 2000000\n"), "channel[0].bitrate"),
            (format!("{ch}data_bitrate = 2000000\n"), "channel[0].data_bitrate: only"),
            (format!("{ch}protocol = \"canfd\"\ndata_bitrate = 1000\n"), "channel[0].data_bitrate"),
            (format!("{ch}timing = \"fast\"\n"), "line 3"),
            (format!("{ch}protocol = \"canfd\"\nxl_data_bitrate = 10000000\n"), "channel[0].xl_data_bitrate: only"),
            (format!("{ch}protocol = \"raw\"\n[channel.raw]\nbits_per_byte = 0\n"), "channel[0].raw.bits_per_byte"),
            (format!("{ch}[channel.raw]\nbits_per_byte = 10\n"), "channel[0].raw: a [channel.raw] table needs protocol"),
            (format!("{ch}protocol = \"canxl\"\n[[port]]\nname = \"p\"\nchannel = \"a\"\nsocketcan = \"can0\"\n"), "port[0].channel: a SocketCAN port carries CAN and CAN FD frames; channel 'a' is protocol = \"canxl\""),
            (format!("{ch}protocol = \"raw\"\n[[cannelloni]]\nchannel = \"a\"\nlisten = \"127.0.0.1:0\"\n"), "cannelloni[0].channel: a cannelloni endpoint carries CAN"),
            ("[[channel]]\nname = \"bad name\"\n".to_owned(), "channel[0].name"),
            (format!("{ch}[[port]]\nname = \"p\"\nchannel = \"zz\"\n"), "line 5: port[0].channel: no channel named 'zz'"),
            (format!("{ch}[[port]]\nname = \"p\"\nrate = -1.0\n"), "port[0].rate"),
            (format!("{ch}[[port]]\nname = \"p\"\nrate = 1e-300\n"), "port[0].rate: 1e-300 is not a number of frames per second of at least 0.001"),
            (format!("{ch}[[port]]\nname = \"p\"\nburst = 3\n"), "port[0].burst"),
            (format!("{ch}[[port]]\nname = \"p\"\n[[port]]\nname = \"p\"\n"), "port[1].name"),
            (format!("{ch}[[port]]\nname = \"p\"\nsocketcan = \"can0\"\n"), "port[0].socketcan: a SocketCAN port needs a `channel`"),
            (format!("{ch}[[port]]\nname = \"p\"\nchannel = \"a\"\nsocketcan = \"a/b\"\n"), "port[0].socketcan: 'a/b' is not a network interface name"),
            (format!("{ch}[[port]]\nname = \"p\"\nchannel = \"a\"\nsocketcan = \"averyveryverylongname\"\n"), "port[0].socketcan"),
            (format!("{ch}[[port]]\nname = \"p\"\nchannel = \"a\"\nsocketcan = \"can0\"\n[[port]]\nname = \"q\"\nchannel = \"a\"\nsocketcan = \"can0\"\n"), "port[1].socketcan: interface 'can0' is already port 'p'"),
            (format!("{ch}[[route]]\nfrom = \"a\"\nto = \"a\"\n"), "route[0].to"),
            (format!("{ch}[[route]]\nfrom = \"a\"\nto = \"b\"\n"), "route[0].to: no channel named 'b'"),
            (format!("{ch}[[channel]]\nname = \"b\"\n[[route]]\nfrom = \"a\"\nto = \"b\"\nextended = false\nrewrite_id = 0x800\n"), "route[0].rewrite_id"),
            (format!("{ch}[[channel]]\nname = \"b\"\n[[route]]\nfrom = \"a\"\nto = \"b\"\nhop_limit = 0\n"), "route[0].hop_limit"),
            (format!("{ch}[[route]]\nfrom = \"a\"\n"), "missing field `to`"),
            ("[hub]\nlisten = []\n[[channel]]\nname = \"a\"\n".to_owned(), "line 2: hub.listen"),
            ("[hub]\nlisten = [\"nowhere\"]\n[[channel]]\nname = \"a\"\n".to_owned(), "hub.listen[0]"),
            ("[hub]\n".to_owned(), "at least one [[channel]]"),
        ];
        for (text, expected) in cases {
            let message = rejection(&text);
            assert!(message.starts_with("t.toml: ") && message.contains(expected), "{text}\n=> {message}");
        }
    }

    #[test]
    fn can_xl_and_raw_channels_are_read_with_their_rates_and_bit_model() {
        let text = "[[channel]]\nname = \"xl\"\nprotocol = \"canxl\"\nbitrate = 1000000\ndata_bitrate = 4000000\n\
                    xl_data_bitrate = 20000000\n[[channel]]\nname = \"bus\"\nprotocol = \"raw\"\nbitrate = 12000000\n\
                    [channel.raw]\nbits_per_byte = 11\noverhead_bits = 39\n";
        let config = HubConfig::parse(text, "t").unwrap();
        let (xl, raw) = (&config.channels[0], &config.channels[1]);
        let rates = xl.rates();
        assert_eq!(
            (xl.protocol, rates.nominal, rates.data, rates.xl_data),
            (Protocol::Canxl, 1_000_000, 4_000_000, 20_000_000)
        );
        assert_eq!((raw.protocol, raw.bitrate), (Protocol::Raw, 12_000_000));
        assert_eq!((raw.rates().raw.bits_per_byte, raw.rates().raw.overhead_bits), (11, 39));
    }

    #[test]
    fn bad_protocol_is_rejected() {
        let err = HubConfig::parse("[[channel]]\nname = \"a\"\nprotocol = \"flexray\"\n", "t").unwrap_err();
        assert!(err.to_string().contains("line 3"), "{err}");
    }
}
