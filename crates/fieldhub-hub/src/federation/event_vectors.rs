//! `spec/vectors/federation/messages.json` against [`super::event`]: every
//! valid vector decodes to its fields and encodes back to its bytes, every
//! invalid one is refused for its one fault. The vectors were written from
//! `spec/federation.md` by an implementation of their own, not by this one.

use std::path::PathBuf;

use fieldhub_proto::fate::DropReason;
use fieldhub_proto::{Frame, FrameFlags, FrameKind};
use serde_json::Value;

use super::event::{Batch, Body, DecodeError, Event, HistoryReply, Origin, Term, TxRequest};

fn vectors() -> Vec<Value> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../spec/vectors/federation/messages.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let file: Value = serde_json::from_str(&text).expect("the vector file is JSON");
    assert!(!file["description"].as_str().unwrap_or_default().is_empty(), "the file says what it covers");
    file["vectors"].as_array().expect("a vectors array").clone()
}

fn hex(value: &Value) -> Vec<u8> {
    let text = value.as_str().expect("hex is a string");
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex digits")).collect()
}

fn number(value: &Value) -> u64 {
    value.as_u64().unwrap_or_else(|| panic!("{value} is not an unsigned number"))
}

fn frame(v: &Value) -> Frame {
    let kind = match v["kind"].as_str() {
        Some("can") => FrameKind::Can,
        Some("canfd") => FrameKind::CanFd,
        Some("error") => FrameKind::Error,
        Some("canxl") => FrameKind::CanXl,
        Some("raw") => FrameKind::Raw,
        other => panic!("frame kind {other:?}"),
    };
    let flags = v["flags"].as_array().expect("flags").iter().fold(FrameFlags::empty(), |flags, name| {
        flags
            | match name.as_str() {
                Some("extended") => FrameFlags::EXTENDED,
                Some("remote") => FrameFlags::REMOTE,
                Some("brs") => FrameFlags::BRS,
                Some("esi") => FrameFlags::ESI,
                Some("sec") => FrameFlags::XL_SEC,
                Some("rrs") => FrameFlags::XL_RRS,
                other => panic!("flag {other:?}"),
            }
    });
    let (id, len, dlc) = (number(&v["id"]) as u32, number(&v["len"]) as usize, number(&v["len8_dlc"]) as u8);
    let af = v.get("af").map_or(0, number) as u32;
    Frame::from_parts(kind, flags, id, len, dlc, af, &hex(&v["data"])).expect("a vector's frame is valid")
}

fn origin(v: &Value) -> Option<Origin> {
    (!v.is_null()).then(|| Origin {
        relay: v["relay"].as_str().expect("relay").to_owned(),
        port_id: number(&v["port_id"]) as u32,
        arrival: number(&v["arrival"]),
    })
}

fn event(v: &Value) -> Event {
    let body = match v["body"].get("dropped") {
        Some(reason) => Body::Dropped(
            (1..=u16::MAX)
                .filter_map(DropReason::from_wire)
                .find(|r| Some(r.name()) == reason.as_str())
                .unwrap_or_else(|| panic!("drop reason {reason}")),
        ),
        None => Body::Frame(frame(&v["body"]["frame"])),
    };
    Event {
        term: Term { epoch: number(&v["term"]["epoch"]), incarnation: number(&v["term"]["incarnation"]) },
        seq: number(&v["seq"]),
        start_ns: number(&v["start_ns"]),
        end_ns: number(&v["end_ns"]),
        origin: origin(&v["origin"]),
        body,
    }
}

fn error_name(error: &DecodeError) -> &'static str {
    match error {
        DecodeError::Truncated => "truncated",
        DecodeError::EmptyBatch => "empty_batch",
        DecodeError::TrailingBytes(_) => "trailing_bytes",
        DecodeError::Kind(_) => "kind",
        DecodeError::Flags(_) => "flags",
        DecodeError::Origin => "origin",
        DecodeError::Body(_) => "body",
        DecodeError::Reason(_) => "reason",
        DecodeError::Frame(_) => "frame",
    }
}

/// The first error decoding `bytes` as a `kind` gives, if any.
fn refusal(kind: &str, bytes: &[u8]) -> Option<DecodeError> {
    match kind {
        "request" => TxRequest::decode(bytes).err(),
        "event" => Event::decode(bytes).err(),
        "batch" => Batch::items(bytes).find_map(Result::err),
        "history_reply" => HistoryReply::decode(bytes).err(),
        other => panic!("vector kind {other}"),
    }
}

#[test]
fn every_federation_vector_decodes_to_its_fields_and_encodes_to_its_bytes() {
    let vectors = vectors();
    let valid: Vec<&Value> = vectors.iter().filter(|v| v["valid"] == Value::Bool(true)).collect();
    assert!(valid.len() >= 10, "the file has the valid vectors the spec lists");
    for v in valid {
        let (name, bytes) = (v["name"].as_str().unwrap_or("?"), hex(&v["hex"]));
        let mut encoded = Vec::new();
        match v["kind"].as_str() {
            Some("request") => {
                let request = TxRequest { origin: origin(&v["origin"]).expect("origin"), frame: frame(&v["frame"]) };
                assert_eq!(TxRequest::decode(&bytes), Ok(request.clone()), "{name}");
                request.encode(&mut encoded);
            }
            Some("event") => {
                let event = event(v);
                assert_eq!(Event::decode(&bytes), Ok(event.clone()), "{name}");
                event.encode(&mut encoded);
            }
            Some("batch") => {
                let items: Vec<Vec<u8>> = v["items"].as_array().expect("items").iter().map(hex).collect();
                let decoded: Vec<Vec<u8>> = Batch::items(&bytes).map(|item| item.expect(name).to_vec()).collect();
                assert_eq!(decoded, items, "{name}");
                let mut batch = Batch::with_capacity(items.len());
                for item in &items {
                    batch.push(|out| out.extend_from_slice(item));
                }
                encoded = batch.bytes().to_vec();
            }
            Some("history_reply") => {
                let reply = HistoryReply {
                    last: number(&v["last"]),
                    done: v["done"].as_bool().expect("done"),
                    events: v["events"].as_array().expect("events").iter().map(hex).collect(),
                };
                assert_eq!(HistoryReply::decode(&bytes), Ok(reply.clone()), "{name}");
                reply.encode(&mut encoded);
            }
            other => panic!("{name}: vector kind {other:?}"),
        }
        assert_eq!(encoded, bytes, "{name} encodes back to its bytes");
    }
}

#[test]
fn every_invalid_federation_vector_is_refused_for_its_fault() {
    let vectors = vectors();
    let invalid: Vec<&Value> = vectors.iter().filter(|v| v["valid"] == Value::Bool(false)).collect();
    assert!(invalid.len() >= 10, "the file has the invalid vectors the spec lists");
    for v in invalid {
        let name = v["name"].as_str().unwrap_or("?");
        let error = refusal(v["kind"].as_str().expect("kind"), &hex(&v["hex"]))
            .unwrap_or_else(|| panic!("{name} was accepted"));
        assert_eq!(error_name(&error), v["error"].as_str().expect("error"), "{name}: {error}");
    }
}
