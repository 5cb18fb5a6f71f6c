//! Send by signals, the web monitor's composer: `GET
//! /api/v1/channels/{channel}/dbc` lists the messages of the channel's DBC
//! file with their signals (what the page's form shows; only to an access
//! that may read the channel), and `POST
//! /api/v1/channels/{channel}/send-signals` turns a message's physical
//! signal values into its frame and puts it on the channel like `POST
//! .../send` does — the same send port, the same access rule (a change:
//! only an access that may control the hub, checked in `http.rs`).
//!
//! Encoding is `fieldhub_rbs::encode`, on the parsed file the store keeps
//! beside the decoder (`dbc_store.rs`), so a frame sent here decodes in the
//! trace to the values given. A payload longer than 8 bytes goes as a CAN
//! FD frame (padded with zeros to a CAN FD length); a classic channel
//! refuses it as it refuses any CAN FD frame.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use fieldhub_dbc::can_dbc::{AttributeValue, Dbc, MessageId, MultiplexIndicator, NumericValue};
use fieldhub_proto::frame::fd_round_up_len;
use fieldhub_proto::{Frame, FrameFlags};
use fieldhub_rbs::encode::{encode, EncodeError};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::control::api::{body, error};
use crate::control::state::{ask, ApiState};
use crate::session::credentials::Access;
use fieldhub_bus::request::ControlRequest;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SignalsBody {
    /// The message's name in the channel's DBC file.
    message: String,
    /// Physical values by signal name; signals not given keep their start values.
    #[serde(default)]
    signals: BTreeMap<String, f64>,
}

/// The channel's DBC file, or the 404 that says how to give it one.
fn file(s: &ApiState, channel: &str) -> Result<Arc<Dbc>, Box<Response>> {
    s.dbc.file(channel).ok_or_else(|| {
        let text = format!(
            "channel '{channel}' has no DBC file: load one from the page's header, PUT /api/v1/channels/{channel}/dbc \
             or [[channel]] dbc in the configuration"
        );
        Box::new(error(StatusCode::NOT_FOUND, text))
    })
}

/// `GET /api/v1/channels/{channel}/dbc`: the DBC's messages and signals,
/// for an access that may read the channel (as the monitor's stream).
pub(crate) async fn messages(
    State(s): State<Arc<ApiState>>,
    Extension(access): Extension<Access>,
    Path(channel): Path<String>,
) -> Response {
    if !access.may_read(Some(&channel)) {
        let text = format!("{} may not read channel '{channel}' (not in its read list)", access.describe());
        return error(StatusCode::FORBIDDEN, text);
    }
    match file(&s, &channel) {
        Ok(dbc) => Json(messages_json(&dbc)).into_response(),
        Err(response) => *response,
    }
}

fn messages_json(dbc: &Dbc) -> Value {
    let messages = dbc.messages.iter().map(|m| {
        let (id, extended) = match m.id {
            MessageId::Standard(id) => (u32::from(id), false),
            MessageId::Extended(id) => (id, true),
        };
        let signals: Vec<Value> = m
            .signals
            .iter()
            .map(|s| {
                let start = match dbc.resolved_signal_attribute(m.id, &s.name, "GenSigStartValue") {
                    Some(AttributeValue::Uint(n)) => *n as f64,
                    Some(AttributeValue::Int(n)) => *n as f64,
                    Some(AttributeValue::Double(d)) => *d,
                    _ => 0.0,
                };
                let (multiplexor, selector) = match s.multiplexer_indicator {
                    MultiplexIndicator::Plain => (false, None),
                    MultiplexIndicator::Multiplexor => (true, None),
                    MultiplexIndicator::MultiplexedSignal(v) => (false, Some(v)),
                    MultiplexIndicator::MultiplexorAndMultiplexedSignal(v) => (true, Some(v)),
                };
                json!({
                    "name": s.name,
                    "unit": s.unit,
                    "min": number(&s.min),
                    "max": number(&s.max),
                    "start": start * s.factor + s.offset,
                    "multiplexor": multiplexor,
                    "selector": selector,
                })
            })
            .collect();
        json!({ "name": m.name, "id": id, "extended": extended, "size": m.size, "signals": signals })
    });
    Value::Array(messages.collect())
}

fn number(value: &NumericValue) -> f64 {
    match *value {
        NumericValue::Uint(n) => n as f64,
        NumericValue::Int(n) => n as f64,
        NumericValue::Double(d) => d,
    }
}

/// `POST /api/v1/channels/{channel}/send-signals`: encode and send one frame.
pub(crate) async fn send(
    State(s): State<Arc<ApiState>>,
    Path(channel): Path<String>,
    b: Result<Json<SignalsBody>, JsonRejection>,
) -> Response {
    let SignalsBody { message, signals } = match body(b) {
        Ok(b) => b,
        Err(response) => return *response,
    };
    let dbc = match file(&s, &channel) {
        Ok(dbc) => dbc,
        Err(response) => return *response,
    };
    let values: Vec<(String, f64)> = signals.into_iter().collect();
    let encoded = match encode(&dbc, &message, &values) {
        Ok(encoded) => encoded,
        Err(e @ EncodeError::UnknownMessage { .. }) => {
            return error(StatusCode::NOT_FOUND, format!("channel '{channel}': {e}"))
        }
        Err(e) => return error(StatusCode::UNPROCESSABLE_ENTITY, e.to_string()),
    };
    match frame_of(encoded.id, encoded.extended, encoded.payload) {
        Ok(frame) => ask(s, ControlRequest::Send { channel, frame }).await,
        Err(text) => error(StatusCode::UNPROCESSABLE_ENTITY, format!("message {message}: {text}")),
    }
}

/// A classic frame for up to 8 bytes, else a CAN FD frame of the next CAN
/// FD length.
fn frame_of(id: u32, extended: bool, mut payload: Vec<u8>) -> Result<Frame, String> {
    if payload.len() <= 8 {
        return Frame::can(id, extended, &payload).map_err(|e| e.to_string());
    }
    // The encoder refuses messages over 64 bytes.
    payload.resize(fd_round_up_len(payload.len()).unwrap_or(64), 0);
    let flags = if extended { FrameFlags::EXTENDED } else { FrameFlags::empty() };
    Frame::can_fd(id, flags, &payload).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const DBC: &str = r#"VERSION ""

BU_: ECU

BO_ 256 Engine: 8 ECU
 SG_ Speed : 0|16@1+ (0.1,0) [0|6553.5] "km/h" Vector__XXX
 SG_ Temp : 16|8@1- (1,-40) [-168|87] "degC" Vector__XXX

BO_ 2147484160 Long: 10 ECU
 SG_ Page M : 0|8@1+ (1,0) [0|255] "" Vector__XXX
 SG_ Tail m3 : 72|8@1+ (1,0) [0|255] "" Vector__XXX

BA_DEF_ SG_ "GenSigStartValue" INT -2147483648 2147483647;
BA_DEF_DEF_ "GenSigStartValue" 0;
BA_ "GenSigStartValue" SG_ 256 Temp 50;
"#;

    #[test]
    fn the_listing_gives_each_signal_its_physical_start_and_multiplexing() {
        let listed = messages_json(&fieldhub_dbc::read_text(DBC).unwrap());
        assert_eq!(listed[0]["name"], "Engine");
        assert_eq!(listed[0]["signals"][1]["start"], 10.0, "raw 50, offset -40");
        assert_eq!(listed[0]["signals"][1]["unit"], "degC");
        assert_eq!((listed[1]["id"].as_u64(), listed[1]["extended"].as_bool()), (Some(0x200), Some(true)));
        assert_eq!(listed[1]["signals"][0]["multiplexor"], true);
        assert_eq!(listed[1]["signals"][1]["selector"], 3);
    }

    #[test]
    fn a_payload_over_8_bytes_is_a_can_fd_frame_of_the_next_length() {
        let frame = frame_of(0x200, true, vec![1; 10]).unwrap();
        assert_eq!((frame.len(), frame.is_extended(), frame.data()[11]), (12, true, 0));
        assert_eq!(frame_of(0x100, false, vec![7; 8]).unwrap().kind(), fieldhub_proto::FrameKind::Can);
    }
}
