//! The bus's request vocabulary: what the control plane asks of the bus
//! ([`ControlRequest`]) and what it answers ([`ControlResult`]). Requests
//! travel to the bus as `Inbound::Control` and are applied between two
//! frames, so every change is atomic with respect to traffic and the data
//! path never takes a lock for them.

use std::path::PathBuf;

use fieldhub_proto::Frame;
use serde::Deserialize;

use crate::config::{ChannelConfig, RouteConfig, Timing};
use crate::fault::FaultSpec;
use crate::lin_gateway::GatewayConfig;
use crate::monitor::MonitorTap;

/// An operation on the bus.
#[derive(Debug, Clone)]
pub enum ControlRequest {
    Stats,
    Channels,
    Ports,
    Routes,
    /// The CAN↔LIN gateways (`[[gateway]]`) and their counters.
    Gateways,
    /// Add a CAN↔LIN gateway, checked as a `[[gateway]]` table is.
    AddGateway(GatewayConfig),
    /// Remove a CAN↔LIN gateway by its number (`gateway`).
    RemoveGateway {
        id: u32,
    },
    /// Attach an open port to a channel (a cable plugged in).
    Plug {
        port: String,
        channel: String,
    },
    /// Detach an open port from its channel (a cable pulled).
    Unplug {
        port: String,
    },
    /// Split a channel: `ports` form a second segment, isolated from the rest.
    Cut {
        channel: String,
        ports: Vec<String>,
    },
    /// Join a cut channel's segments again.
    Repair {
        channel: String,
    },
    /// Add a gateway route (bridge two channels, optionally filtered).
    AddRoute(RouteConfig),
    /// Remove a gateway route by its id.
    RemoveRoute {
        id: u32,
    },
    Faults,
    /// Add a fault rule (evaluated after the channel's existing ones).
    AddFault(FaultSpec),
    RemoveFault {
        id: u32,
    },
    /// Force a port's controller into an error state.
    ForceState {
        port: String,
        state: ForcedState,
    },
    /// Bus stuck dominant: no frame gets through until `Unshort`.
    Short {
        channel: String,
    },
    Unshort {
        channel: String,
    },
    /// A LIN channel's master sends the go-to-sleep command at its next
    /// slot boundary (`sleep`), or wakes the sleeping channel with its own
    /// wake-up pulse.
    LinPower {
        channel: String,
        sleep: bool,
    },
    Clients,
    /// Add a channel while the hub runs.
    CreateChannel(Box<ChannelConfig>),
    /// Remove a channel no port or route uses.
    RemoveChannel {
        channel: String,
    },
    /// Change a channel's bitrates or timing mode.
    UpdateChannel {
        channel: String,
        update: ChannelUpdate,
    },
    Recordings,
    /// Record channels to a file.
    StartRecording {
        spec: RecordingSpec,
        /// `spec.path` resolved inside the recordings directory
        /// (by the hub, inside its recordings directory).
        file: PathBuf,
    },
    /// Finish a recording's file.
    StopRecording {
        id: u32,
    },
    /// Offer every frame of `channels` (all when empty) to a web monitor.
    Monitor {
        channels: Vec<String>,
        tap: MonitorTap,
    },
    /// The names of these client ports, open or departed (kept in
    /// [`crate::departed`]): how the web monitor names a frame's sender.
    PortNames {
        ids: Vec<crate::port_id::PortId>,
    },
    /// Put a frame on a channel from the channel's send port.
    Send {
        channel: String,
        frame: Frame,
    },
    /// Bus time and, in virtual time, its participants and hold.
    Time,
    /// Hold, release or step virtual time.
    SetTime(TimeCommand),
}

/// What the control API does to virtual time (`POST /api/v1/time`).
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(tag = "action", rename_all = "snake_case", deny_unknown_fields)]
pub enum TimeCommand {
    /// Hold bus time where it is.
    Pause,
    /// Let bus time run as far as the participants go.
    Resume,
    /// One advance, then hold.
    Step,
    /// Run up to `until_ns` (with no participant: straight there), then hold.
    RunUntil { until_ns: u64 },
}

impl ControlRequest {
    /// Everything about the request that needs no bus state (names,
    /// ranges, what the API does not take), so a malformed request is
    /// refused where it is made and never reaches the bus thread. The bus
    /// checks what depends on its state (a channel that exists, a limit).
    pub fn check(&self) -> Result<(), ControlError> {
        match self {
            Self::CreateChannel(config) => check_new_channel(config),
            Self::AddRoute(spec) => check_route(spec),
            _ => Ok(()),
        }
    }
}

/// A channel as `POST /api/v1/channels` may create it.
pub fn check_new_channel(config: &ChannelConfig) -> Result<(), ControlError> {
    crate::names::check_name(&config.name).map_err(|m| ControlError::Invalid(format!("name: {m}")))?;
    if config.dbc.is_some() {
        return Err(ControlError::Invalid(format!(
            "dbc: the API takes a DBC file's text, not a path: PUT /api/v1/channels/{}/dbc",
            config.name
        )));
    }
    if config.federated || config.owner.is_some() {
        return Err(ControlError::Invalid(
            "federated: federated channels come from the configuration ([federation], docs/federation.md)".into(),
        ));
    }
    config.check_rates().map_err(|(key, m)| ControlError::Invalid(format!("{key}: {m}")))?;
    config.check_arbitration().map_err(|(key, m)| ControlError::Invalid(format!("{key}: {m}")))
}

/// A route as `POST /api/v1/routes` may add it.
pub fn check_route(spec: &RouteConfig) -> Result<(), ControlError> {
    if spec.from == spec.to {
        return Err(ControlError::Invalid(format!("a route from '{}' to itself would echo every frame", spec.to)));
    }
    spec.check_values().map_err(|(key, m)| ControlError::Invalid(format!("{key} {m}")))
}

/// Changes to a channel; absent fields stay as they are.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChannelUpdate {
    #[serde(default)]
    pub bitrate: Option<u32>,
    #[serde(default)]
    pub data_bitrate: Option<u32>,
    #[serde(default)]
    pub timing: Option<Timing>,
}

/// A recording as the API takes it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordingSpec {
    /// File to write (created or truncated) by the hub process, relative
    /// to `[hub] recordings_dir`.
    pub path: String,
    /// Channels to record; all when empty.
    #[serde(default)]
    pub channels: Vec<String>,
    /// `candump` or `asc`; from the file extension (.log / .asc) when absent.
    #[serde(default)]
    pub format: Option<String>,
}

/// States a port can be forced into.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ForcedState {
    ErrorActive,
    ErrorPassive,
    BusOff,
}

/// Why a request was not applied. Maps to an HTTP 4xx status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ControlError {
    /// A named thing does not exist (404).
    NotFound(String),
    /// The request conflicts with the bus's state (409).
    Conflict(String),
    /// The request is malformed or out of range (422).
    Invalid(String),
}

impl std::fmt::Display for ControlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NotFound(m) | Self::Conflict(m) | Self::Invalid(m) => f.write_str(m),
        }
    }
}

/// The answer to a request: a JSON document or an error.
pub type ControlResult = Result<serde_json::Value, ControlError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn malformed_channels_and_routes_are_refused_without_the_bus() {
        let channel =
            |json: serde_json::Value| ControlRequest::CreateChannel(Box::new(serde_json::from_value(json).unwrap()));
        let refused = |request: ControlRequest| match request.check() {
            Err(ControlError::Invalid(m)) => m,
            other => panic!("{request:?} was not refused: {other:?}"),
        };
        assert!(refused(channel(serde_json::json!({"name": "bad name"}))).starts_with("name: "));
        assert!(refused(channel(serde_json::json!({"name": "x", "dbc": "/etc/passwd"}))).starts_with("dbc: "));
        assert!(refused(channel(serde_json::json!({"name": "x", "bitrate": 0}))).starts_with("bitrate: "));
        channel(serde_json::json!({"name": "body", "bitrate": 500000})).check().unwrap();
        let route = |json: serde_json::Value| ControlRequest::AddRoute(serde_json::from_value(json).unwrap());
        assert!(refused(route(serde_json::json!({"from": "can0", "to": "can0"}))).contains("to itself"));
        assert!(
            refused(route(serde_json::json!({"from": "can0", "to": "can1", "id": 0x4000_0000u32}))).starts_with("id ")
        );
        route(serde_json::json!({"from": "can0", "to": "can1"})).check().unwrap();
    }
}
