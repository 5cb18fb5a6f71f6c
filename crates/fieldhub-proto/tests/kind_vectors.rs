//! Runs the vectors of the `canxl` and `raw` frame kinds (`spec/vectors/canxl/`,
//! `spec/vectors/raw/`, format: `spec/README.md`) through the codec, which
//! implements both: each valid record's frame reads, through its own
//! accessors (priority, VCID, SDT, SEC, RRS, acceptance field), as the
//! vector's fields say; each invalid vector is refused with its error. The
//! byte-for-byte decode and re-encode of the same files is in `vectors.rs`.

use std::collections::BTreeSet;
use std::path::Path;

use fieldhub_proto::limits::MAX_MESSAGE_LEN;
use fieldhub_proto::wire::{self, check_length, decode, Message};
use serde_json::Value;

const VALID_FIELDS: &[&str] = &["name", "valid", "hex", "message", "without_kind", "note"];
const INVALID_FIELDS: &[&str] = &["name", "valid", "hex", "error", "code", "without_kind", "note"];

/// Every vector of `spec/vectors/<kind>/*.json`, after checking the files'
/// structure, as (file: name, vector).
fn vectors_of(kind: &str) -> Vec<(String, Value)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../spec/vectors").join(kind);
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .collect();
    paths.sort();
    assert!(!paths.is_empty(), "no vector files in {}", dir.display());
    let mut out = Vec::new();
    for path in paths {
        let file = format!("{kind}/{}", path.file_name().unwrap().to_string_lossy());
        let root: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert!(root["description"].as_str().is_some_and(|d| !d.is_empty()), "{file}: description");
        let mut names = BTreeSet::new();
        for v in root["vectors"].as_array().unwrap_or_else(|| panic!("{file}: vectors")) {
            let id =
                format!("{file}: {}", v["name"].as_str().unwrap_or_else(|| panic!("{file}: a vector without name")));
            assert!(names.insert(id.clone()), "{id}: duplicate name");
            let allowed = if v["valid"].as_bool().unwrap() { VALID_FIELDS } else { INVALID_FIELDS };
            for key in v.as_object().unwrap().keys() {
                assert!(allowed.contains(&key.as_str()), "{id}: unknown field {key:?}");
            }
            assert!(
                v["without_kind"]["error"].is_string() && v["without_kind"]["code"].is_string(),
                "{id}: without_kind"
            );
            out.push((id, v.clone()));
        }
    }
    out
}

/// The body of a vector's bytes, after checking its length prefix.
fn body<'a>(id: &str, bytes: &'a [u8]) -> &'a [u8] {
    let len = check_length(u32::from_le_bytes(bytes[..4].try_into().unwrap()), MAX_MESSAGE_LEN)
        .unwrap_or_else(|e| panic!("{id}: length prefix: {e}"));
    assert_eq!(len, bytes.len() - 4, "{id}: length prefix does not match the body");
    &bytes[4..]
}

/// Every valid vector's records read through the frame's own accessors as
/// the vector's fields say (the byte-for-byte decode and re-encode is
/// `vectors.rs`'s), and every invalid one is refused with its error.
fn check_frames_read_as_their_fields(kind: &str) -> (usize, usize) {
    let (mut records, mut refused) = (0, 0);
    for (id, v) in vectors_of(kind) {
        let bytes = hex::decode(v["hex"].as_str().unwrap()).unwrap_or_else(|e| panic!("{id}: hex: {e}"));
        let decoded = decode(body(&id, &bytes));
        if !v["valid"].as_bool().unwrap() {
            let error = decoded.err().unwrap_or_else(|| panic!("{id}: decoded, but the vector is invalid"));
            assert_eq!(error.kind(), v["error"].as_str().unwrap(), "{id}: {error}");
            refused += 1;
            continue;
        }
        let Ok(Message::Frames(batch)) = decoded else { panic!("{id}: not a FRAMES message") };
        let wanted = v["message"]["records"].as_array().unwrap();
        for (record, want) in batch.iter().zip(wanted) {
            let frame = &record.frame;
            assert_eq!(frame.data(), hex::decode(want["data"].as_str().unwrap()).unwrap(), "{id}: data");
            if want["kind"] == "canxl" {
                let id_field = want["id"].as_u64().unwrap();
                assert!(frame.is_xl(), "{id}");
                assert_eq!(u64::from(frame.priority()), id_field & 0x7FF, "{id}: priority");
                assert_eq!(u64::from(frame.vcid()), id_field >> 16, "{id}: VCID");
                assert_eq!(u64::from(frame.sdt()), want["len8_dlc"].as_u64().unwrap(), "{id}: SDT");
                assert_eq!(u64::from(frame.acceptance_field()), want["af"].as_u64().unwrap(), "{id}: AF");
                let flags: Vec<&str> = want["flags"].as_array().unwrap().iter().map(|f| f.as_str().unwrap()).collect();
                assert_eq!(frame.is_sec(), flags.contains(&"sec"), "{id}: SEC");
                assert_eq!(frame.is_rrs(), flags.contains(&"rrs"), "{id}: RRS");
                assert_eq!(usize::from(frame.xl_dlc()) + 1, frame.len(), "{id}: the 11-bit DLC is len - 1");
                assert_eq!(wire::record_len(frame), 36 + frame.len(), "{id}: a canxl record is 36 + len bytes");
            } else if want["kind"] == "raw" {
                assert!(frame.is_raw(), "{id}");
                assert_eq!(u64::from(frame.id()), want["id"].as_u64().unwrap(), "{id}: id");
                assert_eq!(wire::record_len(frame), 32 + frame.len(), "{id}: a raw record is 32 + len bytes");
            }
            records += 1;
        }
    }
    (records, refused)
}

#[test]
fn every_canxl_vector_reads_as_its_fields_or_is_refused_with_its_error() {
    let (records, refused) = check_frames_read_as_their_fields("canxl");
    assert!(records >= 7 && refused >= 10, "{records} records, {refused} refusals");
}

#[test]
fn every_raw_vector_reads_as_its_fields_or_is_refused_with_its_error() {
    let (records, refused) = check_frames_read_as_their_fields("raw");
    assert!(records >= 4 && refused >= 5, "{records} records, {refused} refusals");
}
