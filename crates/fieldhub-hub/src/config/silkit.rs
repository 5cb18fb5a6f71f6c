//! `[[silkit]]`: a channel on a Vector SIL Kit CAN network, as one
//! participant or as the network's simulator (`transport::silkit`,
//! `docs/silkit.md`).

use serde::Deserialize;

use fieldhub_bus::names::check_name;

/// The scheme of a SIL Kit registry URI.
const REGISTRY_SCHEME: &str = "silkit://";

/// How a channel takes part in a SIL Kit network.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SilKitMode {
    /// One participant among SIL Kit's: SIL Kit's simple CAN simulation
    /// still carries frames between its own participants.
    #[default]
    Participant,
    /// The network's simulator: every SIL Kit controller on the network is
    /// a port of the channel, its frames arbitrated and acknowledged by the
    /// hub.
    Simulator,
}

/// `[[silkit]]`: one channel on one SIL Kit CAN network.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SilKitConfig {
    /// The hub channel SIL Kit's participants' frames enter and leave.
    pub channel: String,
    /// The SIL Kit registry, `silkit://HOST:PORT`.
    pub registry: String,
    /// The SIL Kit CAN network name (the network argument participants give
    /// `SilKit_CanController_Create`).
    pub network: String,
    /// `participant` (default) or `simulator`.
    #[serde(default)]
    pub mode: SilKitMode,
    /// The participant name in the simulation; default `fieldhub-CHANNEL`.
    #[serde(default)]
    pub participant: Option<String>,
    /// Join SIL Kit's synchronised time: a coordinated lifecycle and a
    /// time-sync step handler, and to the hub a participant of virtual
    /// time. Needs `[hub] time = "virtual"`.
    #[serde(default)]
    pub synchronized: bool,
    /// The participants SIL Kit's system waits for before it starts and
    /// steps (its workflow configuration, which the bridge sets); the
    /// bridge's own name is added when missing. Only with `synchronized`.
    #[serde(default)]
    pub required_participants: Vec<String>,
}

impl SilKitConfig {
    /// The participant name the hub joins as.
    pub fn participant_name(&self) -> String {
        self.participant.clone().unwrap_or_else(|| format!("fieldhub-{}", self.channel))
    }

    /// The names SIL Kit's workflow requires: the configured ones and the
    /// bridge itself, each once, in the order given.
    pub fn required_names(&self) -> Vec<String> {
        let own = self.participant_name();
        let mut names = self.required_participants.clone();
        if !names.contains(&own) {
            names.push(own);
        }
        names
    }

    /// Check everything but the channel reference; the error names the
    /// offending key.
    pub fn check_values(&self) -> Result<(), (&'static str, String)> {
        check_registry(&self.registry).map_err(|m| ("registry", m))?;
        if self.network.is_empty() || self.network.chars().any(char::is_control) {
            return Err(("network", "must be a SIL Kit network name, as in \"CAN1\"".into()));
        }
        if let Some(name) = &self.participant {
            check_name(name).map_err(|m| ("participant", m))?;
        }
        if self.synchronized && self.mode == SilKitMode::Simulator {
            return Err((
                "synchronized",
                "the simulator mode does not join SIL Kit's synchronised time yet; \
                 use mode = \"participant\" for a synchronised bridge"
                    .into(),
            ));
        }
        if !self.synchronized && !self.required_participants.is_empty() {
            return Err(("required_participants", "needs synchronized = true".into()));
        }
        for name in &self.required_participants {
            if name.is_empty() || name.chars().any(char::is_control) {
                return Err(("required_participants", format!("'{name}' is not a SIL Kit participant name")));
            }
        }
        Ok(())
    }
}

/// `silkit://HOST:PORT` with a host and a port 1..=65535.
fn check_registry(uri: &str) -> Result<(), String> {
    let usage =
        format!("'{uri}' is not a SIL Kit registry URI: write silkit://HOST:PORT, as in silkit://127.0.0.1:8500");
    let Some(rest) = uri.strip_prefix(REGISTRY_SCHEME) else { return Err(usage) };
    let Some((host, port)) = rest.rsplit_once(':') else { return Err(usage) };
    let host_ok = !host.is_empty() && !host.contains(['/', '@', ' ']);
    let port_ok = port.parse::<u16>().is_ok_and(|p| p > 0);
    if host_ok && port_ok {
        Ok(())
    } else {
        Err(usage)
    }
}

#[cfg(test)]
mod tests {
    use crate::config::HubConfig;

    const CHANNEL: &str = "[[channel]]\nname = \"can0\"\n";

    fn parse(silkit: &str) -> Result<HubConfig, String> {
        HubConfig::parse(&format!("{CHANNEL}[[silkit]]\n{silkit}"), "t.toml").map_err(|e| e.to_string())
    }

    #[test]
    fn a_section_names_channel_registry_and_network() {
        let config = parse("channel = \"can0\"\nregistry = \"silkit://127.0.0.1:8500\"\nnetwork = \"CAN1\"\n").unwrap();
        let silkit = &config.silkit[0];
        assert_eq!((silkit.channel.as_str(), silkit.network.as_str()), ("can0", "CAN1"));
        assert_eq!(silkit.participant_name(), "fieldhub-can0");
        let named = parse(
            "channel = \"can0\"\nregistry = \"silkit://localhost:8500\"\nnetwork = \"CAN1\"\nparticipant = \"bus\"\n",
        );
        assert_eq!(named.unwrap().silkit[0].participant_name(), "bus");
    }

    #[test]
    fn a_synchronised_bridge_needs_virtual_time_and_requires_itself() {
        let section = "[[silkit]]\nchannel = \"can0\"\nregistry = \"silkit://127.0.0.1:8500\"\nnetwork = \"CAN1\"\n\
                       synchronized = true\nrequired_participants = [\"ecu1\"]\n";
        let real = HubConfig::parse(&format!("{CHANNEL}{section}"), "t.toml").unwrap_err().to_string();
        assert!(real.contains("silkit[0].synchronized") && real.contains("[hub] time = \"virtual\""), "{real}");
        let config = HubConfig::parse(&format!("[hub]\ntime = \"virtual\"\n{CHANNEL}{section}"), "t.toml").unwrap();
        assert!(config.silkit[0].synchronized);
        assert_eq!(config.silkit[0].required_names(), ["ecu1", "fieldhub-can0"]);
        let unsynchronised = parse(
            "channel = \"can0\"\nregistry = \"silkit://h:8500\"\nnetwork = \"CAN1\"\nrequired_participants = [\"ecu1\"]\n",
        )
        .unwrap_err();
        assert!(
            unsynchronised.contains("silkit[0].required_participants: needs synchronized = true"),
            "{unsynchronised}"
        );
    }

    #[test]
    fn a_simulator_section_parses_and_is_not_synchronised() {
        use super::SilKitMode;
        let base = "channel = \"can0\"\nregistry = \"silkit://127.0.0.1:8500\"\nnetwork = \"CAN1\"\n";
        assert_eq!(parse(base).unwrap().silkit[0].mode, SilKitMode::Participant);
        let simulator = parse(&format!("{base}mode = \"simulator\"\n")).unwrap();
        assert_eq!(simulator.silkit[0].mode, SilKitMode::Simulator);
        let synchronised = HubConfig::parse(
            &format!(
                "[hub]\ntime = \"virtual\"\n{CHANNEL}[[silkit]]\n{base}mode = \"simulator\"\nsynchronized = true\n"
            ),
            "t.toml",
        )
        .unwrap_err()
        .to_string();
        assert!(synchronised.contains("silkit[0].synchronized: the simulator mode does not join"), "{synchronised}");
    }

    #[test]
    fn each_mistake_is_named_with_its_line() {
        let good = "registry = \"silkit://127.0.0.1:8500\"\nnetwork = \"CAN1\"\n";
        let cases = [
            (format!("channel = \"can9\"\n{good}"), "line 4: silkit[0].channel: no channel named 'can9'"),
            ("channel = \"can0\"\nregistry = \"tcp://1.2.3.4:5\"\nnetwork = \"CAN1\"\n".into(), "line 5: silkit[0].registry: 'tcp://1.2.3.4:5' is not a SIL Kit registry URI: write silkit://HOST:PORT"),
            ("channel = \"can0\"\nregistry = \"silkit://host\"\nnetwork = \"CAN1\"\n".into(), "silkit[0].registry"),
            ("channel = \"can0\"\nregistry = \"silkit://host:0\"\nnetwork = \"CAN1\"\n".into(), "silkit[0].registry"),
            ("channel = \"can0\"\nregistry = \"silkit://:8500\"\nnetwork = \"CAN1\"\n".into(), "silkit[0].registry"),
            ("channel = \"can0\"\nregistry = \"silkit://h:8500\"\nnetwork = \"\"\n".into(), "line 6: silkit[0].network"),
            (format!("channel = \"can0\"\n{good}participant = \"a b\"\n"), "line 7: silkit[0].participant"),
            (format!("channel = \"can0\"\n{good}mode = \"x\"\n"), "line 7: unknown variant `x`, expected `participant` or `simulator`"),
            (format!("channel = \"can0\"\n{good}speed = 1\n"), "line 7: unknown field `speed`"),
            (good.to_owned(), "missing field `channel`"),
            (format!("channel = \"can0\"\n{good}[[silkit]]\nchannel = \"can0\"\n{good}participant = \"other\"\n"), "line 10: silkit[1].network: network 'CAN1' of silkit://127.0.0.1:8500 is already joined by silkit[0]"),
            (format!("channel = \"can0\"\n{good}[[silkit]]\nchannel = \"can0\"\nregistry = \"silkit://127.0.0.1:8500\"\nnetwork = \"CAN2\"\nparticipant = \"fieldhub-can0\"\n"), "line 11: silkit[1].participant: participant name 'fieldhub-can0' is already silkit[0]'s"),
        ];
        for (text, expected) in cases {
            let message = parse(&text).unwrap_err();
            assert!(message.starts_with("t.toml: ") && message.contains(expected), "{text}\n=> {message}");
        }
    }
}
