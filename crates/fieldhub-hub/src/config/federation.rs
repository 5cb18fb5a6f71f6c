//! `[federation]` and the federated channels of `[[channel]]`: hubs that
//! share channels over Eclipse Zenoh (`federation/`, `docs/federation.md`).
//!
//! The owner of each channel is configured (`owner`, with `[federation]
//! epoch`); a hub marked `standby` takes a channel over with a higher epoch
//! when its owner's liveliness token goes. There is no election beyond that.

use serde::Deserialize;

use super::source::ConfigSource;
use fieldhub_bus::config::{ChannelConfig, TimeMode, Timing};
use fieldhub_bus::names::check_name;

use super::hub_section::HubSection;

/// The Zenoh endpoint a hub listens on when `listen` is not given:
/// loopback only.
pub const DEFAULT_ENDPOINT: &str = "tcp/127.0.0.1:7447";

/// Most committed events an owner keeps for relays that missed some.
pub const MAX_HISTORY: u32 = 1 << 20;

/// `[federation]`: this hub's identity and Zenoh links.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FederationConfig {
    /// The name other hubs' `owner` keys use; default the hub's name.
    #[serde(default)]
    pub name: Option<String>,
    /// Zenoh endpoints to listen on, `tcp/HOST:PORT`.
    #[serde(default = "default_listen")]
    pub listen: Vec<String>,
    /// Zenoh endpoints of other hubs to connect to, `tcp/HOST:PORT`.
    #[serde(default)]
    pub connect: Vec<String>,
    /// The ownership epoch this hub publishes its owned channels' events
    /// with; relays refuse events of an older epoch than they have seen.
    #[serde(default = "default_epoch")]
    pub epoch: u64,
    /// Committed events an owner keeps per channel for relays to fetch
    /// after a gap (1..=1048576).
    #[serde(default = "default_history")]
    pub history: u32,
    /// A file holding the secret every hub of the federation shares
    /// (owner-only, as `--token-file`): a hub that does not know it cannot
    /// link. Needed when an endpoint is not loopback; without it, the hub
    /// uses its user's own token (`federation/token.rs`): links are always
    /// authenticated.
    #[serde(default)]
    pub token_file: Option<std::path::PathBuf>,
    /// The secret read from `token_file` (by the binary, which reads every
    /// token file); never in the configuration text.
    #[serde(skip)]
    pub token: Option<String>,
}

fn default_listen() -> Vec<String> {
    vec![DEFAULT_ENDPOINT.to_owned()]
}

fn default_epoch() -> u64 {
    1
}

fn default_history() -> u32 {
    65_536
}

/// What this hub is for one federated channel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Role {
    /// This hub sequences the channel and publishes its committed events.
    Owner,
    /// This hub forwards its clients' frames to the named owner and applies
    /// the owner's committed events.
    Relay { owner: String },
    /// A relay that takes the channel over, with a higher epoch, when the
    /// named owner's liveliness token goes.
    Standby { owner: String },
}

impl FederationConfig {
    /// The name this hub has in the federation.
    pub fn hub_name<'a>(&'a self, hub: &'a str) -> &'a str {
        self.name.as_deref().unwrap_or(hub)
    }

    /// This hub's role for `channel`, `None` when it is not federated.
    pub fn role_of(&self, hub: &str, channel: &ChannelConfig) -> Option<Role> {
        if !channel.federated {
            return None;
        }
        match &channel.owner {
            Some(owner) if owner != self.hub_name(hub) && channel.standby => {
                Some(Role::Standby { owner: owner.clone() })
            }
            Some(owner) if owner != self.hub_name(hub) => Some(Role::Relay { owner: owner.clone() }),
            _ => Some(Role::Owner),
        }
    }
}

/// `tcp/HOST:PORT` with a host and a port 1..=65535: the one Zenoh
/// transport the hub is built with.
fn check_endpoint(endpoint: &str) -> Result<(), String> {
    let usage =
        format!("'{endpoint}' is not a Zenoh endpoint this hub can use: write tcp/HOST:PORT, as in {DEFAULT_ENDPOINT}");
    let Some(rest) = endpoint.strip_prefix("tcp/") else { return Err(usage) };
    let Some((host, port)) = rest.rsplit_once(':') else { return Err(usage) };
    let host_ok = !host.is_empty() && !host.contains(['/', '@', ' ', '#', '?']);
    let port_ok = port.parse::<u16>().is_ok_and(|p| p > 0);
    if host_ok && port_ok {
        Ok(())
    } else {
        Err(usage)
    }
}

/// Whether a (checked) `tcp/HOST:PORT` endpoint stays on this machine.
fn is_loopback(endpoint: &str) -> bool {
    let host = endpoint.strip_prefix("tcp/").and_then(|rest| rest.rsplit_once(':')).map_or("", |(host, _)| host);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Check `[federation]` and the channels' `federated`/`owner` keys; the
/// error names the offending field.
pub fn check(
    federation: Option<&FederationConfig>,
    hub: &HubSection,
    channels: &[ChannelConfig],
    source: &ConfigSource<'_>,
) -> Result<(), (String, String)> {
    let section = |key: &str| source.section_field("federation", key);
    if let Some(f) = federation {
        if hub.time == TimeMode::Virtual {
            let text = "a federated hub runs in real time; virtual time is one hub's".to_owned();
            return Err((source.hub_field("time"), text));
        }
        if let Some(name) = &f.name {
            check_name(name).map_err(|m| (section("name"), m))?;
        }
        if f.listen.is_empty() && f.connect.is_empty() {
            let text = "a federated hub needs at least one listen or connect endpoint".to_owned();
            return Err((section("listen"), text));
        }
        for endpoint in &f.listen {
            check_endpoint(endpoint).map_err(|m| (section("listen"), m))?;
        }
        for endpoint in &f.connect {
            check_endpoint(endpoint).map_err(|m| (section("connect"), m))?;
        }
        let remote = f.listen.iter().map(|e| ("listen", e)).chain(f.connect.iter().map(|e| ("connect", e)));
        if let (None, Some((key, endpoint))) = (&f.token_file, remote.clone().find(|(_, e)| !is_loopback(e))) {
            let text = format!(
                "'{endpoint}' is reachable from other machines: set token_file to a file with a secret every \
                     hub of the federation shares, so that only hubs that know it can link"
            );
            return Err((section(key), text));
        }
        if f.epoch == 0 {
            return Err((section("epoch"), "must be 1 or more (0 means no owner)".into()));
        }
        if f.history == 0 || f.history > MAX_HISTORY {
            return Err((section("history"), format!("{} is not 1..={MAX_HISTORY} events", f.history)));
        }
    }
    for (i, c) in channels.iter().enumerate() {
        let field = |key: &str| source.table_field("channel", i, key);
        if let Some(owner) = &c.owner {
            if !c.federated {
                return Err((field("owner"), "only a federated channel has an owner; add federated = true".into()));
            }
            check_name(owner).map_err(|m| (field("owner"), m))?;
        }
        if c.standby && (!c.federated || c.owner.is_none()) {
            let text = "a standby takes over from the channel's owner: add federated = true and owner = \"HUB\"";
            return Err((field("standby"), text.into()));
        }
        let own_name = federation.map(|f| f.hub_name(&hub.name));
        if c.standby && c.owner.as_deref() == own_name {
            return Err((field("standby"), "the owner cannot be its own standby".into()));
        }
        if c.federated && federation.is_none() {
            let text = format!("channel '{}' is federated but the hub has no [federation] section", c.name);
            return Err((field("federated"), text));
        }
        // The owner times the channel; a relay (or standby) applies the
        // owner's events and never schedules frames itself.
        if c.federated && c.owner.is_some() && c.timing == Timing::Timed {
            let text = "a relayed channel is timed by its owner: set timing = \"timed\" on the owner hub's \
                            channel, not on a relay's or standby's"
                .to_owned();
            return Err((field("timing"), text));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::config::{ConfigError, HubConfig, Role};

    fn parse(text: &str) -> Result<HubConfig, ConfigError> {
        HubConfig::parse(text, "test.toml")
    }

    fn error_of(text: &str) -> String {
        parse(text).expect_err("the configuration must be refused").to_string()
    }

    #[test]
    fn only_loopback_endpoints_go_without_a_token() {
        for endpoint in ["tcp/127.0.0.1:7447", "tcp/127.3.2.1:1", "tcp/[::1]:7447", "tcp/localhost:7447"] {
            assert!(super::is_loopback(endpoint), "{endpoint}");
        }
        for endpoint in ["tcp/0.0.0.0:7447", "tcp/10.0.0.1:7447", "tcp/[::]:7447", "tcp/rack1:7447"] {
            assert!(!super::is_loopback(endpoint), "{endpoint}");
        }
        let with_token = parse("[federation]\nlisten = [\"tcp/0.0.0.0:7447\"]\ntoken_file = \"/etc/fh.token\"\n[[channel]]\nname = \"x\"\n");
        let federation = with_token.unwrap().federation.unwrap();
        assert_eq!(federation.token_file.as_deref(), Some(std::path::Path::new("/etc/fh.token")));
        assert_eq!(federation.token, None, "read by the binary, never from the text");
    }

    #[test]
    fn roles_follow_the_owner_key() {
        let text = r#"
[hub]
name = "rack3"

[federation]
listen = ["tcp/127.0.0.1:7501"]
connect = ["tcp/127.0.0.1:7500"]

[[channel]]
name = "body"
federated = true
owner = "rack1"

[[channel]]
name = "chassis"
federated = true

[[channel]]
name = "powertrain"
federated = true
owner = "rack1"
standby = true

[[channel]]
name = "local"
"#;
        let config = parse(text).unwrap();
        let f = config.federation.as_ref().unwrap();
        assert_eq!(f.hub_name(&config.hub.name), "rack3");
        assert_eq!((f.epoch, f.history), (1, 65_536));
        let roles: Vec<Option<Role>> = config.channels.iter().map(|c| f.role_of(&config.hub.name, c)).collect();
        assert_eq!(
            roles,
            [
                Some(Role::Relay { owner: "rack1".into() }),
                Some(Role::Owner),
                Some(Role::Standby { owner: "rack1".into() }),
                None
            ]
        );
    }

    #[test]
    fn the_own_name_as_owner_means_owner() {
        let text = "[federation]\nname = \"a\"\n[[channel]]\nname = \"x\"\nfederated = true\nowner = \"a\"\n";
        let config = parse(text).unwrap();
        let f = config.federation.as_ref().unwrap();
        assert_eq!(f.listen, ["tcp/127.0.0.1:7447"]);
        assert_eq!(f.role_of(&config.hub.name, &config.channels[0]), Some(Role::Owner));
    }

    #[test]
    fn mistakes_are_named_with_their_line() {
        let cases = [
            (
                "[federation]\nlisten = [\"127.0.0.1:7447\"]\n[[channel]]\nname = \"x\"\n",
                "line 2: federation.listen: '127.0.0.1:7447' is not a Zenoh endpoint",
            ),
            (
                "[federation]\nconnect = [\"tcp/h:0\"]\n[[channel]]\nname = \"x\"\n",
                "line 2: federation.connect: 'tcp/h:0' is not a Zenoh endpoint",
            ),
            ("[federation]\nepoch = 0\n[[channel]]\nname = \"x\"\n", "line 2: federation.epoch: must be 1 or more"),
            ("[federation]\nhistory = 0\n[[channel]]\nname = \"x\"\n", "line 2: federation.history: 0 is not"),
            (
                "[federation]\nlisten = []\n[[channel]]\nname = \"x\"\n",
                "federation.listen: a federated hub needs at least one listen or connect endpoint",
            ),
            (
                "[federation]\nlisten = [\"tcp/0.0.0.0:7447\"]\n[[channel]]\nname = \"x\"\n",
                "line 2: federation.listen: 'tcp/0.0.0.0:7447' is reachable from other machines: set token_file",
            ),
            (
                "[federation]\nconnect = [\"tcp/rack1.lab:7447\"]\n[[channel]]\nname = \"x\"\n",
                "line 2: federation.connect: 'tcp/rack1.lab:7447' is reachable from other machines",
            ),
            (
                "[[channel]]\nname = \"x\"\nfederated = true\n",
                "line 3: channel[0].federated: channel 'x' is federated but the hub has no [federation] section",
            ),
            (
                "[federation]\n[[channel]]\nname = \"x\"\nowner = \"a\"\n",
                "line 4: channel[0].owner: only a federated channel has an owner",
            ),
            (
                "[federation]\n[[channel]]\nname = \"x\"\nfederated = true\nowner = \"a\"\ntiming = \"timed\"\n",
                "line 6: channel[0].timing: a relayed channel is timed by its owner",
            ),
            (
                "[federation]\n[[channel]]\nname = \"x\"\nfederated = true\nstandby = true\n",
                "line 5: channel[0].standby: a standby takes over from the channel's owner",
            ),
            (
                "[hub]\nname = \"a\"\n[federation]\n[[channel]]\nname = \"x\"\nfederated = true\nowner = \"a\"\nstandby = true\n",
                "line 8: channel[0].standby: the owner cannot be its own standby",
            ),
            ("[federation]\nport = 1\n[[channel]]\nname = \"x\"\n", "unknown field `port`"),
            (
                "[hub]\ntime = \"virtual\"\n[federation]\n[[channel]]\nname = \"x\"\n",
                "line 2: hub.time: a federated hub runs in real time",
            ),
        ];
        for (text, expected) in cases {
            let error = error_of(text);
            assert!(error.contains(expected), "{text:?} gave {error:?}, expected {expected:?}");
        }
    }
}
