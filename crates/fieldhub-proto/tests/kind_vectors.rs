//! Runs the vectors of the `canxl` and `raw` frame kinds (`spec/vectors/canxl/`,
//! `spec/vectors/raw/`, format: `spec/README.md`) through the codec. This
//! revision implements neither kind, so it is the peer `spec/protocol.md` 4.1
//! describes that does not know them: every vector, valid or not, is refused
//! with the error its `without_kind` names — `unknown_frame_kind` where the
//! decoder meets the kind first, the earlier fault where one comes before it
//! (a cut header, a `len` over 2048).

use std::collections::BTreeSet;
use std::path::Path;

use fieldhub_proto::limits::MAX_MESSAGE_LEN;
use fieldhub_proto::wire::{check_length, decode};
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

/// What the codec makes of a vector's bytes: the error's kind and wire code.
fn refusal(id: &str, v: &Value) -> (String, String) {
    let bytes = hex::decode(v["hex"].as_str().unwrap()).unwrap_or_else(|e| panic!("{id}: hex: {e}"));
    let len = check_length(u32::from_le_bytes(bytes[..4].try_into().unwrap()), MAX_MESSAGE_LEN)
        .unwrap_or_else(|e| panic!("{id}: length prefix: {e}"));
    assert_eq!(len, bytes.len() - 4, "{id}: length prefix does not match the body");
    match decode(&bytes[4..]) {
        Err(e) => (e.kind().to_owned(), e.code().name().to_owned()),
        Ok(message) => panic!("{id}: decoded as {message:?}, but this revision implements neither canxl nor raw"),
    }
}

fn check_refused_as_without_kind(kind: &str) {
    let vectors = vectors_of(kind);
    let (mut valid, mut invalid) = (0, 0);
    for (id, v) in &vectors {
        let want = (v["without_kind"]["error"].as_str().unwrap(), v["without_kind"]["code"].as_str().unwrap());
        let got = refusal(id, v);
        assert_eq!((got.0.as_str(), got.1.as_str()), want, "{id}");
        if v["valid"].as_bool().unwrap() {
            valid += 1;
        } else {
            invalid += 1;
        }
    }
    assert!(valid > 0 && invalid > 0, "{kind}: {valid} valid and {invalid} invalid vectors");
}

#[test]
fn every_canxl_vector_is_refused_as_by_a_peer_without_canxl() {
    check_refused_as_without_kind("canxl");
}

#[test]
fn every_raw_vector_is_refused_as_by_a_peer_without_raw() {
    check_refused_as_without_kind("raw");
}
