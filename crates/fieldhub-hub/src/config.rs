//! Hub configuration: a TOML file, or the built-in default.
//!
//! Validation happens here, once, before anything starts: a config that loads
//! is one the hub can run. Errors name the file, the line and the field.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use fieldhub_proto::limits::{DEFAULT_TCP_PORT, MAX_NAME_LEN, MAX_TOKEN_LEN};
use serde::Deserialize;

/// The configuration used when none is given: two ideal classic CAN
/// channels, `can0` and `can1`, listening on loopback only.
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

/// Most channels one hub carries (channel ids are 16-bit on the wire).
pub const MAX_CHANNELS: usize = 1024;

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
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HubConfig {
    #[serde(default)]
    pub hub: HubSection,
    #[serde(default, rename = "channel")]
    pub channels: Vec<ChannelConfig>,
}

/// `[hub]`: identity, listeners and access.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HubSection {
    /// Name the hub reports to clients in `WELCOME`.
    #[serde(default = "default_hub_name")]
    pub name: String,
    /// TCP listen addresses (`HOST:PORT`). Loopback unless a token is set.
    #[serde(default = "default_listen")]
    pub listen: Vec<String>,
    /// Token clients must present; required when listening beyond loopback.
    #[serde(default)]
    pub token: Option<String>,
}

impl Default for HubSection {
    fn default() -> Self {
        Self { name: default_hub_name(), listen: default_listen(), token: None }
    }
}

fn default_hub_name() -> String {
    "fieldhub".to_owned()
}

fn default_listen() -> Vec<String> {
    vec![format!("127.0.0.1:{DEFAULT_TCP_PORT}")]
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

/// Bus protocol of a channel.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// Classic CAN: CAN FD frames are rejected on this channel.
    Can,
    /// CAN FD: classic and FD frames.
    Canfd,
}

/// `[[channel]]`: one bus.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChannelConfig {
    pub name: String,
    #[serde(default = "default_protocol")]
    pub protocol: Protocol,
}

fn default_protocol() -> Protocol {
    Protocol::Can
}

impl HubConfig {
    /// The built-in default configuration.
    pub fn builtin() -> Self {
        Self::parse(DEFAULT_CONFIG, "built-in default configuration").expect("the built-in configuration is valid")
    }

    /// Load and validate a TOML file.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| ConfigError::Read { path: path.display().to_string(), source })?;
        Self::parse(&text, &path.display().to_string())
    }

    /// Parse and validate TOML text; `origin` names it in error messages.
    pub fn parse(text: &str, origin: &str) -> Result<Self, ConfigError> {
        let config: HubConfig = toml::from_str(text)
            .map_err(|e| ConfigError::Parse { origin: origin.to_owned(), message: describe_toml_error(text, &e) })?;
        config.validate(origin)?;
        Ok(config)
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

    /// Check every rule; `origin` names the configuration in errors.
    pub fn validate(&self, origin: &str) -> Result<(), ConfigError> {
        let invalid =
            |field: String, message: String| ConfigError::Invalid { origin: origin.to_owned(), field, message };
        check_name(&self.hub.name).map_err(|m| invalid("hub.name".into(), m))?;
        if self.hub.listen.is_empty() {
            return Err(invalid("hub.listen".into(), "at least one listen address is needed".into()));
        }
        let addrs = self.listen_addrs().map_err(|e| match e {
            ConfigError::Invalid { field, message, .. } => invalid(field, message),
            other => other,
        })?;
        match &self.hub.token {
            Some(token) if token.is_empty() || token.len() > MAX_TOKEN_LEN => {
                return Err(invalid("hub.token".into(), format!("must be 1 to {MAX_TOKEN_LEN} bytes")));
            }
            None => {
                if let Some(addr) = addrs.iter().find(|a| !a.is_local()) {
                    return Err(invalid(
                        "hub.listen".into(),
                        format!("{addr} is reachable from other machines; set hub.token (remote access requires a token) or listen on 127.0.0.1"),
                    ));
                }
            }
            Some(_) => {}
        }
        if self.channels.is_empty() {
            return Err(invalid("channel".into(), "at least one [[channel]] is needed".into()));
        }
        if self.channels.len() > MAX_CHANNELS {
            return Err(invalid("channel".into(), format!("at most {MAX_CHANNELS} channels")));
        }
        for (i, channel) in self.channels.iter().enumerate() {
            check_name(&channel.name).map_err(|m| invalid(format!("channel[{i}].name"), m))?;
            if self.channels[..i].iter().any(|c| c.name == channel.name) {
                return Err(invalid(
                    format!("channel[{i}].name"),
                    format!("channel '{}' is defined twice", channel.name),
                ));
            }
        }
        Ok(())
    }
}

/// Names appear in logs and candump lines, so they are restricted to a safe
/// alphabet.
pub fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > MAX_NAME_LEN {
        return Err(format!("'{name}' must be 1 to {MAX_NAME_LEN} bytes"));
    }
    if !name.bytes().all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b)) {
        return Err(format!("'{name}' may only contain letters, digits, '_', '-' and '.'"));
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
    fn duplicate_channel_is_rejected() {
        let err = HubConfig::parse("[[channel]]\nname = \"a\"\n[[channel]]\nname = \"a\"\n", "t").unwrap_err();
        assert!(err.to_string().contains("channel[1].name"), "{err}");
    }

    #[test]
    fn remote_listen_without_token_is_rejected() {
        let err = HubConfig::parse("[hub]\nlisten = [\"0.0.0.0:1\"]\n[[channel]]\nname = \"a\"\n", "t").unwrap_err();
        assert!(err.to_string().contains("requires a token"), "{err}");
        assert!(HubConfig::parse("[hub]\nlisten = [\"0.0.0.0:1\"]\ntoken = \"s\"\n[[channel]]\nname = \"a\"\n", "t")
            .is_ok());
    }

    #[test]
    fn listen_addresses_parse_tcp_and_unix() {
        assert_eq!(ListenAddr::parse("unix:/tmp/h.sock"), Ok(ListenAddr::Unix("/tmp/h.sock".into())));
        assert!(matches!(ListenAddr::parse("tcp://127.0.0.1:5"), Ok(ListenAddr::Tcp(_))));
        assert!(ListenAddr::parse("localhost").unwrap_err().contains("HOST:PORT"));
    }

    #[test]
    fn bad_protocol_is_rejected() {
        let err = HubConfig::parse("[[channel]]\nname = \"a\"\nprotocol = \"lin\"\n", "t").unwrap_err();
        assert!(err.to_string().contains("line 3"), "{err}");
    }
}
