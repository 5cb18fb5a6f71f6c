//! fieldhub-dbc decodes like python cantools: `vectors.json` holds cantools'
//! decoding (`decode_choices=False`) of random frames of `vectors.dbc`
//! (written by `make_vectors.py`; `make test-ui` checks it is still
//! cantools' answer). Every signal cantools decodes must be decoded to the
//! same value, and no other.

use fieldhub_dbc::Database;

#[test]
fn every_vector_decodes_as_cantools_decodes_it() {
    let db = Database::parse(include_str!("vectors.dbc")).expect("vectors.dbc parses");
    let vectors: serde_json::Value = serde_json::from_str(include_str!("vectors.json")).unwrap();
    let vectors = vectors.as_array().unwrap();
    assert!(vectors.len() > 200, "the vectors cover every message");
    for vector in vectors {
        let id = vector["id"].as_u64().unwrap() as u32;
        let extended = vector["extended"].as_bool().unwrap();
        let data = hex(vector["data"].as_str().unwrap());
        let decoded = db.decode(id, extended, &data).unwrap_or_else(|| panic!("no message {id:#X}"));
        let expected = vector["signals"].as_object().unwrap();
        let got: Vec<&str> = decoded.signals.iter().map(|s| s.name).collect();
        let mut want: Vec<&str> = expected.keys().map(String::as_str).collect();
        let mut sorted = got.clone();
        sorted.sort_unstable();
        want.sort_unstable();
        assert_eq!(sorted, want, "signals decoded from {id:#X} {}", vector["data"]);
        for signal in &decoded.signals {
            let want = expected[signal.name].as_f64().unwrap();
            let tolerance = 1e-9 * want.abs().max(1.0);
            assert!(
                (signal.value - want).abs() <= tolerance,
                "{id:#X} {} {}: got {}, cantools {want}",
                vector["data"],
                signal.name,
                signal.value
            );
        }
    }
}

fn hex(text: &str) -> Vec<u8> {
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap()).collect()
}
