//! The shared-memory header vectors of `spec/vectors/shm/*.json`
//! (`spec/shm.md` section 7): every valid header parses to its fields and
//! encodes back to its bytes; every invalid one is refused with its error.
#![cfg(not(loom))]

use std::path::PathBuf;

use fieldhub_shm::layout::{encode_bell_header, parse_bell_header, RegionHeader, SegmentHeader, REGION_LEN};
use serde_json::Value;

fn vector_files() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../spec/vectors/shm");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no vector files in {}", dir.display());
    files
}

fn header_json(header: &SegmentHeader) -> Value {
    serde_json::json!({
        "segment_len": header.segment_len,
        "to_hub_offset": header.to_hub_offset,
        "to_hub_slots": header.to_hub_slots,
        "to_client_offset": header.to_client_offset,
        "to_client_slots": header.to_client_slots,
        "client_id": header.client_id,
    })
}

#[test]
fn every_header_vector_parses_encodes_or_fails_as_specified() {
    let mut checked = 0;
    for file in vector_files() {
        let root: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        assert!(root["description"].as_str().is_some_and(|d| !d.is_empty()), "{}: description", file.display());
        for vector in root["vectors"].as_array().expect("vectors") {
            let name = vector["name"].as_str().expect("name");
            let bytes = hex::decode(vector["hex"].as_str().expect("hex")).expect("hex bytes");
            let valid = vector["valid"].as_bool().expect("valid");
            match (vector["kind"].as_str().expect("kind"), valid) {
                ("segment", true) => {
                    let header = SegmentHeader::parse(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
                    assert_eq!(header_json(&header), vector["header"], "{name}");
                    assert_eq!(header.encode().as_slice(), bytes.as_slice(), "{name}: re-encoding");
                }
                ("segment", false) => {
                    let err = SegmentHeader::parse(&bytes).expect_err(name);
                    assert_eq!(err.kind(), vector["error"], "{name}: {err}");
                }
                ("bell", true) => {
                    parse_bell_header(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
                    assert_eq!(encode_bell_header().as_slice(), bytes.as_slice(), "{name}: re-encoding");
                }
                ("bell", false) => {
                    let err = parse_bell_header(&bytes).expect_err(name);
                    assert_eq!(err.kind(), vector["error"], "{name}: {err}");
                }
                ("region", true) => {
                    let header = RegionHeader::parse(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
                    let fields = serde_json::json!({
                        "region_len": header.region_len,
                        "segment_offset": header.segment_offset,
                    });
                    assert_eq!(fields, vector["header"], "{name}");
                    assert_eq!(header.encode().as_slice(), bytes.as_slice(), "{name}: re-encoding");
                }
                ("region", false) => {
                    let err = RegionHeader::parse(&bytes).expect_err(name);
                    assert_eq!(err.kind(), vector["error"], "{name}: {err}");
                }
                (kind, _) => panic!("{name}: unknown kind {kind}"),
            }
            checked += 1;
        }
    }
    assert!(checked >= 10, "only {checked} vectors");
}

#[test]
fn the_standard_layout_is_the_first_vector() {
    let file = vector_files().into_iter().find(|f| f.ends_with("header.json")).expect("header.json");
    let root: Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    let standard = &root["vectors"][0];
    assert_eq!(standard["name"], "standard_layout");
    assert_eq!(hex::encode(SegmentHeader::standard(7).encode()), standard["hex"].as_str().unwrap());
}

#[test]
fn the_standard_region_is_the_first_region_vector() {
    let file = vector_files().into_iter().find(|f| f.ends_with("region.json")).expect("region.json");
    let root: Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    let standard = &root["vectors"][0];
    assert_eq!(standard["name"], "standard_region");
    assert_eq!(hex::encode(RegionHeader::standard(REGION_LEN).encode()), standard["hex"].as_str().unwrap());
}

#[test]
fn the_layouts_this_hub_creates_are_the_ones_the_vectors_pin() {
    let file = vector_files().into_iter().find(|f| f.ends_with("header.json")).expect("header.json");
    let root: Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    let hex_of = |name: &str| {
        let vector = root["vectors"].as_array().unwrap().iter().find(|v| v["name"] == name);
        hex::decode(vector.unwrap_or_else(|| panic!("no vector {name}"))["hex"].as_str().unwrap()).unwrap()
    };
    assert_eq!(SegmentHeader::standard(7).encode().as_slice(), hex_of("standard_layout"));
    let region = SegmentHeader::with_to_client_slots(7, fieldhub_shm::layout::REGION_TO_CLIENT_SLOTS);
    assert_eq!(region.encode().as_slice(), hex_of("region_layout"));
}
