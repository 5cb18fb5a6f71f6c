//! Checks the codec against the language-neutral test vectors in
//! `spec/vectors/*.json` (format: `spec/README.md`). Every other
//! implementation of the protocol runs the same files; those that carry LIN,
//! CAN XL or raw frames also run `spec/vectors/lin/frames.json`,
//! `spec/vectors/canxl/` and `spec/vectors/raw/`, as this one does.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use fieldhub_proto::fate::{ChannelCondition, DropReason};
use fieldhub_proto::frame::{Frame, FrameFlags, FrameKind};
use fieldhub_proto::limits::{MAX_HELLO_LEN, MAX_MESSAGE_LEN};
use fieldhub_proto::wire::{self, check_length, decode, DecodeError, ErrorCode, ErrorReport, FramesReader, Message};
use serde_json::{json, Map, Value};

const FILE_FIELDS: &[&str] = &["description", "vectors"];
const VALID_FIELDS: &[&str] = &["name", "valid", "hex", "message", "auth", "without_kind", "note"];
const INVALID_FIELDS: &[&str] = &["name", "valid", "hex", "error", "code", "limit", "without_kind", "note"];

struct Vector {
    file: String,
    name: String,
    bytes: Vec<u8>,
    fields: Map<String, Value>,
}

impl Vector {
    fn id(&self) -> String {
        format!("{}: {}", self.file, self.name)
    }
    fn valid(&self) -> bool {
        self.fields["valid"].as_bool().unwrap()
    }
    fn str_field(&self, key: &str) -> Option<&str> {
        self.fields.get(key).map(|v| v.as_str().unwrap_or_else(|| panic!("{}: {key} must be a string", self.id())))
    }
    /// The length prefix, checked against `max`.
    fn checked_length(&self, max: u32) -> Result<usize, DecodeError> {
        assert!(self.bytes.len() >= 4, "{}: shorter than a length prefix", self.id());
        let len = u32::from_le_bytes([self.bytes[0], self.bytes[1], self.bytes[2], self.bytes[3]]);
        check_length(len, max)
    }
}

fn vector_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../spec/vectors")
}

fn check_fields(map: &Map<String, Value>, allowed: &[&str], what: &str) {
    for key in map.keys() {
        assert!(allowed.contains(&key.as_str()), "{what}: unknown field {key:?}");
    }
}

/// Every vector of every file, after checking the files' structure.
fn load() -> Vec<Vector> {
    load_from(&vector_dir(), |_| true)
}

/// The wire vectors, those of the `lin`, `canxl` and `raw` kinds
/// (`vectors/lin/`, `vectors/canxl/`, `vectors/raw/`) and those of steps
/// granted ahead (`vectors/ahead/`).
fn load_with_lin() -> Vec<Vector> {
    let mut vectors = load();
    vectors.extend(load_from(&vector_dir().join("lin"), |file| file == "frames.json"));
    vectors.extend(load_from(&vector_dir().join("canxl"), |_| true));
    vectors.extend(load_from(&vector_dir().join("raw"), |_| true));
    vectors.extend(load_from(&vector_dir().join("ahead"), |_| true));
    vectors
}

/// Every vector of the files in `dir` that `wanted` names, after checking
/// the files' structure.
fn load_from(dir: &Path, wanted: impl Fn(&str) -> bool) -> Vec<Vector> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("spec/vectors is readable")
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .filter(|path| path.file_name().is_some_and(|name| wanted(&name.to_string_lossy())))
        .collect();
    paths.sort();
    assert!(!paths.is_empty(), "no vector files in {}", dir.display());
    let mut vectors = Vec::new();
    for path in paths {
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&path).unwrap();
        let root: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{file}: {e}"));
        let root = root.as_object().unwrap_or_else(|| panic!("{file}: not an object"));
        check_fields(root, FILE_FIELDS, &file);
        assert!(root.get("description").and_then(Value::as_str).is_some_and(|d| !d.is_empty()), "{file}: description");
        let list = root.get("vectors").and_then(Value::as_array).unwrap_or_else(|| panic!("{file}: vectors array"));
        assert!(!list.is_empty(), "{file}: has no vectors");
        let mut names = BTreeSet::new();
        for entry in list {
            let fields = entry.as_object().unwrap_or_else(|| panic!("{file}: vector is not an object")).clone();
            let name =
                fields.get("name").and_then(Value::as_str).unwrap_or_else(|| panic!("{file}: vector without name"));
            let id = format!("{file}: {name}");
            assert!(names.insert(name.to_owned()), "{id}: duplicate name");
            let valid =
                fields.get("valid").and_then(Value::as_bool).unwrap_or_else(|| panic!("{id}: valid must be a bool"));
            if valid {
                check_fields(&fields, VALID_FIELDS, &id);
                assert!(fields.contains_key("message"), "{id}: valid vector without message");
            } else {
                check_fields(&fields, INVALID_FIELDS, &id);
                assert!(
                    fields.contains_key("error") && fields.contains_key("code"),
                    "{id}: invalid vector needs error and code"
                );
            }
            let hex_text = fields.get("hex").and_then(Value::as_str).unwrap_or_else(|| panic!("{id}: hex"));
            assert!(!hex_text.bytes().any(|b| b.is_ascii_uppercase()), "{id}: hex must be lowercase");
            let bytes = hex::decode(hex_text).unwrap_or_else(|e| panic!("{id}: hex: {e}"));
            vectors.push(Vector { file: file.clone(), name: name.to_owned(), bytes, fields });
        }
    }
    vectors
}

fn flag_names(kind: FrameKind, bits: u8) -> Vec<&'static str> {
    let names: &[(u8, &'static str)] = match kind {
        FrameKind::Lin => &[
            (0x01, "classic"),
            (0x02, "no_response"),
            (0x04, "checksum_error"),
            (0x08, "collision"),
            (0x10, "echo"),
            (0x20, "standing"),
            (0x40, "wake_up"),
        ],
        FrameKind::CanXl => &[(0x01, "sec"), (0x02, "rrs"), (0x10, "echo")],
        FrameKind::Raw => &[(0x10, "echo")],
        _ => &[(0x01, "extended"), (0x02, "remote"), (0x04, "brs"), (0x08, "esi"), (0x10, "echo")],
    };
    names.iter().filter(|&&(bit, _)| bits & bit != 0).map(|&(_, name)| name).collect()
}

fn report(kind: &str, r: &ErrorReport<'_>) -> Value {
    json!({
        "type": kind,
        "code": r.code,
        "code_name": ErrorCode::from_wire(r.code).map(ErrorCode::name),
        "request": r.request,
        "fatal": r.fatal,
        "text": r.text,
    })
}

/// The JSON shape of a decoded message, as `spec/README.md` defines it.
fn to_json(message: &Message<'_>) -> Value {
    match message {
        Message::Hello(h) => {
            let mut hello = json!({"type": "hello", "version": h.version, "name": h.name});
            // `options` is in the shape only when the HELLO carries any.
            if !h.options.is_empty() {
                let options: Vec<&str> =
                    [(wire::SessionOptions::SYNCHRONIZED, "synchronized"), (wire::SessionOptions::AHEAD, "ahead")]
                        .into_iter()
                        .filter(|&(bit, _)| h.options.contains(bit))
                        .map(|(_, name)| name)
                        .collect();
                hello["options"] = json!(options);
            }
            hello
        }
        Message::Welcome(w) => {
            json!({"type": "welcome", "version": w.version, "client_id": w.client_id, "hub_name": w.hub_name})
        }
        Message::Refuse(r) => report("refuse", r),
        Message::Challenge(c) => {
            json!({"type": "challenge", "nonce": hex::encode(c.nonce), "hub_name": c.hub_name})
        }
        Message::Auth(a) => json!({"type": "auth", "mac": hex::encode(a.mac)}),
        Message::Error(r) => report("error", r),
        Message::Goodbye(r) => report("goodbye", r),
        Message::OpenPort(o) => {
            let options: Vec<&str> = [
                (wire::PortOptions::RECEIVE_OWN, "receive_own"),
                (wire::PortOptions::BLOCK_ON_OVERFLOW, "block_on_overflow"),
                (wire::PortOptions::FD, "fd"),
                (wire::PortOptions::LISTEN_ONLY, "listen_only"),
                (wire::PortOptions::TRANSMIT_ONLY, "transmit_only"),
            ]
            .into_iter()
            .filter(|&(bit, _)| o.options.contains(bit))
            .map(|(_, name)| name)
            .collect();
            json!({"type": "open_port", "request": o.request, "options": options, "channel": o.channel, "port_name": o.port_name})
        }
        Message::PortOpened(p) => {
            let channel_flags: Vec<&str> = [(wire::ChannelFlags::CANFD, "canfd"), (wire::ChannelFlags::LIN, "lin")]
                .into_iter()
                .filter(|&(bit, _)| p.channel_flags.contains(bit))
                .map(|(_, name)| name)
                .collect();
            json!({
                "type": "port_opened", "request": p.request, "port": p.port, "channel_id": p.channel_id,
                "port_id": p.port_id, "channel_flags": channel_flags,
            })
        }
        Message::ClosePort { port } => json!({"type": "close_port", "port": port}),
        Message::PortClosed { port } => json!({"type": "port_closed", "port": port}),
        Message::Frames(batch) => {
            let records: Vec<Value> = batch
                .iter()
                .map(|r| {
                    let kind = match r.frame.kind() {
                        FrameKind::Can => "can",
                        FrameKind::CanFd => "canfd",
                        FrameKind::Error => "error",
                        FrameKind::Lin => "lin",
                        FrameKind::CanXl => "canxl",
                        FrameKind::Raw => "raw",
                    };
                    let mut record = json!({
                        "port": r.port,
                        "kind": kind,
                        "flags": flag_names(r.frame.kind(), r.frame.flags().bits()),
                        "id": r.frame.id(),
                        "seq": r.meta.seq,
                        "timestamp_ns": r.meta.timestamp_ns,
                        "sender": r.meta.sender,
                        "len": r.frame.len(),
                        "len8_dlc": r.frame.len8_dlc(),
                        "data": hex::encode(r.frame.data()),
                    });
                    // Only a canxl record has the acceptance field (4.1.2).
                    if r.frame.is_xl() {
                        record["af"] = json!(r.frame.acceptance_field());
                    }
                    record
                })
                .collect();
            assert_eq!(records.len(), batch.len(), "batch iterator yields every record");
            json!({"type": "frames", "records": records})
        }
        Message::RxOverflow(o) => {
            json!({"type": "rx_overflow", "port": o.port, "dropped": o.dropped})
        }
        Message::TxDropped(d) => json!({
            "type": "tx_dropped", "port": d.port, "reason": d.reason,
            "reason_name": DropReason::from_wire(d.reason).map(DropReason::name), "dropped": d.dropped,
        }),
        Message::ChannelState(c) => json!({
            "type": "channel_state", "port": c.port, "condition": c.condition,
            "condition_name": ChannelCondition::from_wire(c.condition).map(ChannelCondition::name),
            "missed": c.missed, "text": c.text,
        }),
        Message::StatsRequest { request } => json!({"type": "stats_request", "request": request}),
        Message::Stats { request, json } => json!({"type": "stats", "request": request, "json": json}),
        Message::Ping { nonce } => json!({"type": "ping", "nonce": nonce}),
        Message::Pong { nonce } => json!({"type": "pong", "nonce": nonce}),
        Message::Step { until_ns } => json!({"type": "step", "until_ns": until_ns}),
        Message::Grant { now_ns } => json!({"type": "grant", "now_ns": now_ns}),
        Message::StepAhead(step) => {
            let filters: Vec<Value> =
                step.filters.iter().map(|f| json!({"can_id": f.can_id, "mask": f.mask})).collect();
            json!({"type": "step_ahead", "until_ns": step.until_ns, "period_ns": step.period_ns, "filters": filters})
        }
    }
}

/// The message a vector's JSON shape describes, for the `auth` field's
/// `challenge` and `hello`: encoded from the shape, then decoded.
fn message_of(shape: &Value, id: &str) -> Vec<u8> {
    let text = |key: &str| shape[key].as_str().unwrap_or_else(|| panic!("{id}: {key}")).to_owned();
    let mut bytes = Vec::new();
    match shape["type"].as_str() {
        Some("challenge") => {
            let nonce = hex::decode(text("nonce")).unwrap().try_into().unwrap_or_else(|_| panic!("{id}: nonce"));
            let name = text("hub_name");
            wire::encode(&mut bytes, &Message::Challenge(wire::Challenge { nonce, hub_name: &name }));
        }
        Some("hello") => {
            let options = match shape.get("options") {
                Some(list) if list == &json!(["synchronized"]) => wire::SessionOptions::SYNCHRONIZED,
                None => wire::SessionOptions::empty(),
                Some(other) => panic!("{id}: options {other}"),
            };
            let version = shape["version"].as_u64().unwrap() as u16;
            let name = text("name");
            wire::encode(&mut bytes, &Message::Hello(wire::Hello { version, name: &name, options }));
        }
        other => panic!("{id}: auth field holds a {other:?}"),
    }
    assert_eq!(to_json(&decode(&bytes[4..]).unwrap()), *shape, "{id}: shape round trip");
    bytes
}

#[test]
fn every_auth_vector_is_the_mac_of_its_hello_and_challenge_under_its_token() {
    let mut checked = 0;
    for v in load().iter().filter(|v| v.fields.contains_key("auth")) {
        let id = v.id();
        let auth = &v.fields["auth"];
        let token = auth["token"].as_str().unwrap_or_else(|| panic!("{id}: token"));
        let (challenge, hello) = (message_of(&auth["challenge"], &id), message_of(&auth["hello"], &id));
        let (Ok(Message::Challenge(challenge)), Ok(Message::Hello(hello))) =
            (decode(&challenge[4..]), decode(&hello[4..]))
        else {
            panic!("{id}: auth needs a challenge and a hello")
        };
        let mac = fieldhub_proto::auth::auth_mac(token.as_bytes(), &challenge, &hello);
        let Ok(Message::Auth(sent)) = decode(&v.bytes[4..]) else { panic!("{id}: not an AUTH") };
        assert_eq!(hex::encode(sent.mac), hex::encode(mac), "{id}: MAC");
        assert!(fieldhub_proto::auth::verify(
            token.as_bytes(),
            &fieldhub_proto::auth::transcript(&challenge, &hello),
            &sent.mac
        ));
        checked += 1;
    }
    assert!(checked >= 3, "{checked} auth vectors");
}

#[test]
fn every_vector_file_is_well_formed() {
    let vectors = load();
    assert!(vectors.len() > 100, "only {} vectors", vectors.len());
}

#[test]
fn every_valid_vector_decodes_to_its_message_and_reencodes_identically() {
    let mut checked = 0;
    for v in load_with_lin().iter().filter(|v| v.valid()) {
        let id = v.id();
        let len = v.checked_length(MAX_MESSAGE_LEN).unwrap_or_else(|e| panic!("{id}: length prefix: {e}"));
        assert_eq!(len, v.bytes.len() - 4, "{id}: length prefix does not match the body");
        let message = decode(&v.bytes[4..]).unwrap_or_else(|e| panic!("{id}: {e}"));
        if matches!(message, Message::Hello(_) | Message::Challenge(_) | Message::Auth(_)) {
            v.checked_length(MAX_HELLO_LEN).unwrap_or_else(|e| panic!("{id}: HELLO over the first-message limit: {e}"));
        }
        assert_eq!(to_json(&message), v.fields["message"], "{id}: decoded message differs");
        let mut again = Vec::new();
        wire::encode(&mut again, &message);
        assert_eq!(hex::encode(&again), hex::encode(&v.bytes), "{id}: re-encoding differs");
        checked += 1;
    }
    assert!(checked > 0);
}

#[test]
fn every_invalid_vector_is_rejected_with_the_named_error() {
    let mut checked = 0;
    for v in load_with_lin().iter().filter(|v| !v.valid()) {
        let id = v.id();
        let max = match v.str_field("limit") {
            None | Some("message") => MAX_MESSAGE_LEN,
            Some("hello") => MAX_HELLO_LEN,
            Some(other) => panic!("{id}: unknown limit {other:?}"),
        };
        let error = match v.checked_length(max) {
            Err(e) => e,
            Ok(len) => {
                assert_eq!(len, v.bytes.len() - 4, "{id}: length prefix does not match the body");
                match decode(&v.bytes[4..]) {
                    Err(e) => e,
                    Ok(message) => panic!("{id}: decoded as {message:?}"),
                }
            }
        };
        assert_eq!(Some(error.kind()), v.str_field("error"), "{id}: {error}");
        assert_eq!(Some(error.code().name()), v.str_field("code"), "{id}: wire code for {error}");
        checked += 1;
    }
    assert!(checked > 0);
}

/// Every record of `body` (a `FRAMES` message) as the one-pass reader
/// gives it, each written over a frame that held other data; or its error.
fn read_in_one_pass(body: &[u8]) -> Result<Vec<(u16, Frame, u64)>, DecodeError> {
    let mut reader = FramesReader::new(&body[1..])?;
    let mut records = Vec::new();
    while let Some(record) = reader.next_record()? {
        let mut frame = Frame::can_fd(0x7FF, FrameFlags::BRS, &[0xEE; 64]).unwrap();
        record.write_into(&mut frame);
        records.push((record.port(), frame, record.timestamp_ns()));
    }
    Ok(records)
}

#[test]
fn every_frames_vector_read_in_one_pass_gives_the_decoded_records_of_every_kind() {
    let mut kinds = BTreeSet::new();
    for v in load_with_lin().iter().filter(|v| v.valid() && v.bytes.get(4) == Some(&wire::msg::FRAMES)) {
        let id = v.id();
        let Ok(Message::Frames(batch)) = decode(&v.bytes[4..]) else { panic!("{id}: not a FRAMES message") };
        let decoded: Vec<_> = batch.iter().map(|r| (r.port, r.frame, r.meta.timestamp_ns)).collect();
        let read = read_in_one_pass(&v.bytes[4..]).unwrap_or_else(|e| panic!("{id}: {e}"));
        assert_eq!(read, decoded, "{id}");
        kinds.extend(read.iter().map(|(_, frame, _)| format!("{:?}", frame.kind())));
    }
    let every: BTreeSet<String> = (0..=u8::MAX).filter_map(FrameKind::from_wire).map(|k| format!("{k:?}")).collect();
    assert_eq!(kinds, every, "the vectors' batches carry every frame kind");
}

#[test]
fn every_invalid_frames_vector_fails_the_one_pass_reader_with_the_named_error() {
    let mut checked = 0;
    // Those whose length prefix is what is wrong never reach a reader.
    let body_refused = |v: &&Vector| v.checked_length(MAX_MESSAGE_LEN).is_ok();
    for v in
        load_with_lin().iter().filter(|v| !v.valid() && v.bytes.get(4) == Some(&wire::msg::FRAMES)).filter(body_refused)
    {
        let id = v.id();
        let error = read_in_one_pass(&v.bytes[4..]).expect_err(&id);
        assert_eq!(Some(error.kind()), v.str_field("error"), "{id}: {error}");
        checked += 1;
    }
    assert!(checked > 0);
}

#[test]
fn vectors_cover_every_message_type_frame_kind_flag_and_error_kind() {
    let vectors = load();
    let mut types = BTreeSet::new();
    let mut kinds = BTreeSet::new();
    let mut flags = BTreeSet::new();
    let mut errors = BTreeSet::new();
    let mut codes = BTreeSet::new();
    for v in &vectors {
        if v.valid() {
            let message = &v.fields["message"];
            types.insert(message["type"].as_str().unwrap().to_owned());
            if let Some(code) = message.get("code_name").and_then(Value::as_str) {
                codes.insert(code.to_owned());
            }
            for record in message.get("records").and_then(Value::as_array).into_iter().flatten() {
                kinds.insert(record["kind"].as_str().unwrap().to_owned());
                for flag in record["flags"].as_array().unwrap() {
                    flags.insert(flag.as_str().unwrap().to_owned());
                }
            }
        } else {
            errors.insert(v.str_field("error").unwrap().to_owned());
        }
    }
    let set = |items: &[&str]| items.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
    assert_eq!(
        types,
        set(&[
            "hello",
            "challenge",
            "auth",
            "welcome",
            "refuse",
            "open_port",
            "port_opened",
            "close_port",
            "port_closed",
            "frames",
            "rx_overflow",
            "tx_dropped",
            "channel_state",
            "error",
            "ping",
            "pong",
            "goodbye",
            "stats_request",
            "stats",
            "step",
            "grant",
        ])
    );
    assert_eq!(kinds, set(&["can", "canfd", "error"]));
    assert_eq!(flags, set(&["extended", "remote", "brs", "esi", "echo"]));
    assert_eq!(
        errors,
        set(&[
            "oversize",
            "empty",
            "unknown_type",
            "truncated",
            "trailing_bytes",
            "bad_magic",
            "unsupported_version",
            "too_long",
            "not_utf8",
            "too_many_frames",
            "unknown_frame_kind",
            "reserved_flags",
            "record_too_long",
            "invalid_frame",
            "reserved_not_zero",
            "reserved_options",
        ])
    );
    for code in 1..=16 {
        let name = ErrorCode::from_wire(code).unwrap().name();
        assert!(codes.contains(name), "no REFUSE/ERROR/GOODBYE vector carries code {name}");
    }
}

#[test]
fn ahead_vectors_cover_step_ahead_its_hello_option_and_the_filter_limit() {
    let vectors = load_from(&vector_dir().join("ahead"), |_| true);
    let types: BTreeSet<&str> =
        vectors.iter().filter(|v| v.valid()).filter_map(|v| v.fields["message"]["type"].as_str()).collect();
    assert!(types.contains("step_ahead") && types.contains("hello") && types.contains("frames"), "{types:?}");
    assert!(vectors.iter().any(|v| v.str_field("error") == Some("too_many_filters")));
}
