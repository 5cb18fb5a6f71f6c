//! NO_BUS mode's bus configuration: `< BUS B … >` (bit timing) and `< BUS
//! C … >` (controller mode), mapped onto what a fieldhub channel and port
//! have (`docs/socketcand.md`).
//!
//! - Bit timing is the channel's: its bitrate changes for every port on it,
//!   as `PATCH /api/v1/channels/NAME` changes it, so only a client that may
//!   control the hub (its access: the hub's own user, a token or an
//!   `[[access]]` grant with `control`) may send it; others get an
//!   `< error … >` that says so.
//! - The controller mode is this session's controller, that is its port:
//!   it applies when the session opens that bus (`listen_only` opens the
//!   port `LISTEN_ONLY`, `loopback` `RECEIVE_OWN`; `three_samples` changes
//!   nothing on a bus without electrical bits). No permission is needed.
//! - A refusal is one `< error … >` line; the session stays in NO_BUS mode
//!   and goes on (socketcand would end the connection).

use std::sync::mpsc;
use std::time::Duration;

use fieldhub_bus::access::Access;
use fieldhub_bus::inbox::Inbound;
use fieldhub_bus::request::{ChannelUpdate, ControlRequest, ControlResult};
use fieldhub_proto::wire::PortOptions;

use super::protocol::{self, BitTiming};
use crate::session::Sessions;

/// How long a command waits for the bus's answer.
const BUS_ANSWER: Duration = Duration::from_secs(5);

/// The controller mode asked for, for the bus it names.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ControllerMode {
    bus: Option<String>,
    options: PortOptions,
}

impl ControllerMode {
    /// The options of the port opened on `channel`: the mode's, if it was
    /// set for that bus.
    pub fn options_for(&self, channel: &str) -> PortOptions {
        match &self.bus {
            Some(bus) if bus == channel => self.options,
            _ => PortOptions::empty(),
        }
    }
}

/// `< BUS B … >`: the answer line.
pub fn bit_timing(sessions: &Sessions, access: &Access, bus: &str, timing: &BitTiming) -> String {
    let update = match channel_update(access, bus, timing) {
        Ok(update) => update,
        Err(text) => return protocol::error_line(&text),
    };
    match ask(sessions, ControlRequest::UpdateChannel { channel: bus.to_owned(), update }) {
        Ok(_) => "< ok >".to_owned(),
        Err(text) => protocol::error_line(&text),
    }
}

/// The channel update a bit-timing command asks for, if `access` may.
fn channel_update(access: &Access, bus: &str, timing: &BitTiming) -> Result<ChannelUpdate, String> {
    if !access.may_control() {
        return Err(format!(
            "the bit timing of '{bus}' is the channel's, for every port on it, and this session may not change \
             the hub ({}): ask its operator to change the channel (PATCH /api/v1/channels/{bus})",
            access.describe()
        ));
    }
    let bitrate = timing.bitrate().map_err(|e| e.0)?;
    Ok(ChannelUpdate { bitrate: Some(bitrate), data_bitrate: None, timing: None })
}

/// `< BUS C listen_only loopback three_samples >`: remember the mode for
/// the port `open BUS` opens; the answer line.
pub fn controller_mode(
    sessions: &Sessions,
    mode: &mut ControllerMode,
    bus: &str,
    listen_only: bool,
    loopback: bool,
) -> String {
    let known = match ask(sessions, ControlRequest::Channels) {
        Ok(channels) => channel_names(&channels),
        Err(text) => return protocol::error_line(&text),
    };
    if !known.iter().any(|name| name == bus) {
        return protocol::error_line(&format!("unknown channel '{bus}'; this hub has: {}", known.join(", ")));
    }
    let mut options = PortOptions::empty();
    options.set(PortOptions::LISTEN_ONLY, listen_only);
    options.set(PortOptions::RECEIVE_OWN, loopback);
    *mode = ControllerMode { bus: Some(bus.to_owned()), options };
    "< ok >".to_owned()
}

fn channel_names(channels: &serde_json::Value) -> Vec<String> {
    let names = channels.as_array().into_iter().flatten();
    names.filter_map(|c| c.get("name").and_then(|n| n.as_str()).map(str::to_owned)).collect()
}

/// One control request to the bus, and its answer's error text.
fn ask(sessions: &Sessions, request: ControlRequest) -> Result<serde_json::Value, String> {
    let (answer, answered) = mpsc::sync_channel::<ControlResult>(1);
    let reply = Box::new(move |result| {
        let _ = answer.send(result);
    });
    if sessions.inbox.send(Inbound::Control { request: Box::new(request), reply }).is_err() {
        return Err("the hub is stopping".into());
    }
    match answered.recv_timeout(BUS_ANSWER) {
        Ok(result) => result.map_err(|e| e.to_string()),
        Err(_) => Err(format!("the hub did not answer within {} s; try again", BUS_ANSWER.as_secs())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fieldhub_bus::access::Grant;
    use std::sync::Arc;

    #[test]
    fn a_controller_mode_applies_to_the_bus_it_names_only() {
        let mut options = PortOptions::empty();
        options.set(PortOptions::LISTEN_ONLY, true);
        let mode = ControllerMode { bus: Some("can0".into()), options };
        assert_eq!(mode.options_for("can0"), PortOptions::LISTEN_ONLY);
        assert_eq!(mode.options_for("can1"), PortOptions::empty());
        assert_eq!(ControllerMode::default().options_for("can0"), PortOptions::empty());
    }

    #[test]
    fn only_a_session_that_may_control_the_hub_changes_a_channels_bitrate() {
        let timing = BitTiming { bitrate: Some(250_000), tq_ns: None, segments: [None; 3] };
        let update = channel_update(&Access::Full, "can0", &timing).unwrap();
        assert_eq!(update.bitrate, Some(250_000));
        let unauthenticated = Access::Granted(Arc::new(Grant::new(
            "socketcand_allow_unauthenticated".into(),
            vec!["*".into()],
            vec!["*".into()],
            false,
        )));
        let refused = channel_update(&unauthenticated, "can0", &timing).unwrap_err();
        assert!(refused.starts_with("the bit timing of 'can0' is the channel's"), "{refused}");
        assert!(refused.contains("socketcand_allow_unauthenticated") && refused.contains("PATCH"), "{refused}");
        let refused = channel_update(&Access::ReadOnly, "can0", &timing).unwrap_err();
        assert!(refused.contains("may not change the hub"), "{refused}");
    }

    #[test]
    fn channel_names_come_from_the_channel_list() {
        let list = serde_json::json!([{ "name": "can0", "bitrate": 500000 }, { "name": "lin1" }]);
        assert_eq!(channel_names(&list), ["can0", "lin1"]);
    }
}
