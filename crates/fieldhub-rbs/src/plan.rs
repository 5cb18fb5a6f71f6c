//! Which messages a rest-bus simulation sends, and how: from a parsed DBC,
//! the messages whose transmitter is a simulated node (the nodes named, or
//! every node but the ones excepted), each with its cycle time
//! (`GenMsgCycleTime`, else the user's default), its start delay
//! (`GenMsgStartDelayTime`) and its first payload, every signal at its
//! start value (`GenSigStartValue`, a raw value as Vector's tools write it,
//! else raw 0).
//!
//! Invariants:
//! - A message without a cycle time and without a default is sent on
//!   change only (event-triggered): [`PlannedMessage::cycle_ms`] is `None`.
//! - In a multiplexed message the first payload carries the multiplexors'
//!   start values and the signals they select, at any depth
//!   (`fieldhub_dbc::mux`); the others stay 0.
//! - A node name that the DBC does not define is an error listing the
//!   nodes it does define, never a simulation that silently sends nothing.

use can_dbc::{AttributeValue, Dbc, Message, MessageId, Signal};
use fieldhub_dbc::mux::{deselected_by, presences, MuxError};

use crate::bits::{insert, OutOfPayload};

/// Which nodes to simulate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeSelection {
    /// Only these (`--nodes A,B`).
    Only(Vec<String>),
    /// Every node but these (`--except DUT`); empty: every node.
    Except(Vec<String>),
}

/// Why a DBC gives no simulation.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("the DBC defines no node '{name}'; its nodes are: {known}")]
    UnknownNode { name: String, known: String },
    #[error("message {message} is {size} bytes long; a CAN FD frame carries at most 64")]
    MessageTooLong { message: String, size: u64 },
    #[error(transparent)]
    Multiplexing(#[from] MuxError),
    #[error("message {message}, signal {signal}: {source}")]
    Signal {
        message: String,
        signal: String,
        #[source]
        source: OutOfPayload,
    },
}

/// One message the simulation sends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedMessage {
    pub name: String,
    /// The CAN identifier, without the extended flag.
    pub id: u32,
    pub extended: bool,
    /// The node that sends it.
    pub node: String,
    /// Its period; `None`: sent on change only.
    pub cycle_ms: Option<u64>,
    /// How long after the simulation starts its first cycle comes.
    pub start_delay_ms: u64,
    /// Its first payload: every signal at its start value.
    pub payload: Vec<u8>,
}

/// The messages `dbc`'s selected nodes send, in the file's order.
pub fn plan(
    dbc: &Dbc,
    select: &NodeSelection,
    default_cycle_ms: Option<u64>,
) -> Result<Vec<PlannedMessage>, PlanError> {
    let named = match select {
        NodeSelection::Only(names) | NodeSelection::Except(names) => names,
    };
    if let Some(name) = named.iter().find(|name| !dbc.nodes.iter().any(|node| &node.0 == *name)) {
        let known: Vec<&str> = dbc.nodes.iter().map(|node| node.0.as_str()).collect();
        let known = if known.is_empty() { "none".to_owned() } else { known.join(", ") };
        return Err(PlanError::UnknownNode { name: name.clone(), known });
    }
    let simulated = |node: &str| match select {
        NodeSelection::Only(names) => names.iter().any(|n| n == node),
        NodeSelection::Except(names) => !names.iter().any(|n| n == node),
    };
    dbc.messages
        .iter()
        .filter_map(|message| Some((message, message.transmitter.as_deref()?)))
        .filter(|(_, node)| dbc.nodes.iter().any(|n| n.0 == *node) && simulated(node))
        .map(|(message, node)| planned(dbc, message, node, default_cycle_ms))
        .collect()
}

fn planned(
    dbc: &Dbc,
    message: &Message,
    node: &str,
    default_cycle_ms: Option<u64>,
) -> Result<PlannedMessage, PlanError> {
    if message.size > 64 {
        return Err(PlanError::MessageTooLong { message: message.name.clone(), size: message.size });
    }
    let (id, extended) = match message.id {
        MessageId::Standard(id) => (u32::from(id), false),
        MessageId::Extended(id) => (id, true),
    };
    let cycle_ms = match dbc.message_attribute(message.id, "GenMsgCycleTime").and_then(whole) {
        Some(ms) if ms > 0 => Some(ms),
        _ => default_cycle_ms.filter(|&ms| ms > 0),
    };
    let start_delay_ms =
        dbc.resolved_message_attribute(message.id, "GenMsgStartDelayTime").and_then(whole).unwrap_or(0);
    let payload = start_payload(dbc, message)?;
    Ok(PlannedMessage {
        name: message.name.clone(),
        id,
        extended,
        node: node.to_owned(),
        cycle_ms,
        start_delay_ms,
        payload,
    })
}

/// A message's payload with every signal at its start value.
fn start_payload(dbc: &Dbc, message: &Message) -> Result<Vec<u8>, PlanError> {
    // The size was checked against 64 bytes.
    let mut payload = vec![0u8; message.size as usize];
    let start_of =
        |signal: &Signal| dbc.resolved_signal_attribute(message.id, &signal.name, "GenSigStartValue").map_or(0, raw_of);
    let presences = presences(dbc, message)?;
    let starts: Vec<u64> = message.signals.iter().map(&start_of).collect();
    for (index, signal) in message.signals.iter().enumerate() {
        if deselected_by(&presences, index, |i| starts.get(i).copied()).is_some() {
            continue;
        }
        let fail = |source| PlanError::Signal { message: message.name.clone(), signal: signal.name.clone(), source };
        // Beyond u32 is beyond any payload: `insert` refuses it like any misfit.
        let start = u32::try_from(signal.start_bit).unwrap_or(u32::MAX);
        let size = u32::try_from(signal.size).unwrap_or(u32::MAX);
        insert(&mut payload, start, size, signal.byte_order, starts[index]).map_err(fail)?;
    }
    Ok(payload)
}

/// A whole non-negative attribute value (milliseconds).
fn whole(value: &AttributeValue) -> Option<u64> {
    match *value {
        AttributeValue::Uint(n) => Some(n),
        AttributeValue::Int(n) => u64::try_from(n).ok(),
        AttributeValue::Double(d) if d >= 0.0 && d.fract() == 0.0 && d <= u64::MAX as f64 => Some(d as u64),
        _ => None,
    }
}

/// A start value as raw bits (two's complement for a negative one).
pub(crate) fn raw_of(value: &AttributeValue) -> u64 {
    match *value {
        AttributeValue::Uint(n) => n,
        AttributeValue::Int(n) => n as u64,
        AttributeValue::Double(d) => d as i64 as u64,
        AttributeValue::String(_) => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DBC: &str = r#"VERSION ""

BU_: ENGINE GATEWAY DUT

BO_ 256 EngineData: 8 ENGINE
 SG_ Speed : 0|16@1+ (0.1,0) [0|6553.5] "km/h" DUT
 SG_ Temp : 16|8@1- (1,-40) [-40|215] "degC" DUT

BO_ 512 GatewayMux: 4 GATEWAY
 SG_ Page M : 0|8@1+ (1,0) [0|255] "" DUT
 SG_ PageA m1 : 8|16@1+ (1,0) [0|65535] "" DUT
 SG_ PageB m2 : 8|16@1+ (1,0) [0|65535] "" DUT

BO_ 768 DutStatus: 2 DUT
 SG_ State : 0|8@1+ (1,0) [0|255] "" ENGINE

BO_ 1024 Event: 1 ENGINE
 SG_ Flag : 0|1@1+ (1,0) [0|1] "" DUT

BA_DEF_ BO_ "GenMsgCycleTime" INT 0 65535;
BA_DEF_ BO_ "GenMsgStartDelayTime" INT 0 65535;
BA_DEF_ SG_ "GenSigStartValue" INT -2147483648 2147483647;
BA_DEF_DEF_ "GenMsgCycleTime" 0;
BA_DEF_DEF_ "GenMsgStartDelayTime" 0;
BA_DEF_DEF_ "GenSigStartValue" 0;
BA_ "GenMsgCycleTime" BO_ 256 10;
BA_ "GenMsgStartDelayTime" BO_ 256 5;
BA_ "GenMsgCycleTime" BO_ 512 100;
BA_ "GenMsgCycleTime" BO_ 768 20;
BA_ "GenSigStartValue" SG_ 256 Speed 500;
BA_ "GenSigStartValue" SG_ 256 Temp -3;
BA_ "GenSigStartValue" SG_ 512 Page 2;
BA_ "GenSigStartValue" SG_ 512 PageA 4369;
BA_ "GenSigStartValue" SG_ 512 PageB 8738;
"#;

    fn dbc() -> Dbc {
        Dbc::try_from(DBC).expect("the test DBC parses")
    }

    fn names(planned: &[PlannedMessage]) -> Vec<&str> {
        planned.iter().map(|m| m.name.as_str()).collect()
    }

    #[test]
    fn every_node_but_the_excepted_one_sends_its_messages_with_cycle_and_delay() {
        let planned = plan(&dbc(), &NodeSelection::Except(vec!["DUT".into()]), None).unwrap();
        assert_eq!(names(&planned), ["EngineData", "GatewayMux", "Event"]);
        let engine = &planned[0];
        assert_eq!((engine.id, engine.extended, engine.node.as_str()), (256, false, "ENGINE"));
        assert_eq!((engine.cycle_ms, engine.start_delay_ms), (Some(10), 5));
        assert_eq!(planned[2].cycle_ms, None, "no cycle time and no default: sent on change");
    }

    #[test]
    fn a_default_cycle_applies_only_where_the_dbc_gives_none() {
        let planned = plan(&dbc(), &NodeSelection::Only(vec!["ENGINE".into()]), Some(50)).unwrap();
        assert_eq!(names(&planned), ["EngineData", "Event"]);
        assert_eq!((planned[0].cycle_ms, planned[1].cycle_ms), (Some(10), Some(50)));
    }

    #[test]
    fn the_first_payload_carries_the_start_values_and_the_selected_multiplexed_signals() {
        let planned = plan(&dbc(), &NodeSelection::Except(vec![]), None).unwrap();
        // Speed 500 = 0x01F4 little-endian, Temp -3 = 0xFD.
        assert_eq!(planned[0].payload, [0xF4, 0x01, 0xFD, 0, 0, 0, 0, 0]);
        // Page 2 selects PageB (0x2222); PageA stays out.
        assert_eq!(planned[1].payload, [2, 0x22, 0x22, 0]);
    }

    #[test]
    fn an_unknown_node_is_refused_listing_the_dbcs_nodes() {
        let err = plan(&dbc(), &NodeSelection::Only(vec!["BRAKES".into()]), None).unwrap_err();
        assert_eq!(err.to_string(), "the DBC defines no node 'BRAKES'; its nodes are: ENGINE, GATEWAY, DUT");
    }

    #[test]
    fn a_signal_outside_its_message_is_refused_naming_both() {
        let text = DBC.replace("SG_ State : 0|8@1+", "SG_ State : 12|8@1+");
        let err =
            plan(&Dbc::try_from(text.as_str()).unwrap(), &NodeSelection::Only(vec!["DUT".into()]), None).unwrap_err();
        assert_eq!(
            err.to_string(),
            "message DutStatus, signal State: a 8-bit signal at bit 12 does not fit a 2-byte payload"
        );
    }
}
