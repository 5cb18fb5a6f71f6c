//! Every vector of `spec/vectors/timing/bit_timing.json` matches
//! `fieldhub_proto::bits`.

use fieldhub_proto::bits::FrameBits;
use fieldhub_proto::text::parse_cansend;
use serde_json::Value;

#[test]
fn bit_lengths_and_durations_match_the_vectors() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../spec/vectors/timing/bit_timing.json");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let vectors = doc["vectors"].as_array().unwrap();
    assert!(vectors.len() >= 20);
    for v in vectors {
        let text = v["frame"].as_str().unwrap();
        let bits = FrameBits::of(&parse_cansend(text).unwrap());
        let number = |key: &str| v[key].as_u64().unwrap_or_else(|| panic!("{text}: {key}"));
        assert_eq!(u64::from(bits.total), number("bits"), "{text}");
        assert_eq!(u64::from(bits.stuff_bits), number("stuff_bits"), "{text}");
        assert_eq!(u64::from(bits.nominal_bits), number("nominal_bits"), "{text}");
        assert_eq!(u64::from(bits.data_bits), number("data_bits"), "{text}");
        let duration = bits.duration_ns(number("bitrate") as u32, number("data_bitrate") as u32);
        assert_eq!(duration, number("duration_ns"), "{text}");
    }
}

/// Every vector of `spec/vectors/timing/canxl_bit_timing.json` (written by
/// `reference_xl.py`, which builds each stuffed bit stream explicitly)
/// matches `fieldhub_proto::bits`, with the XL data bitrate as the data rate.
#[test]
fn can_xl_bit_lengths_and_durations_match_the_vectors() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../spec/vectors/timing/canxl_bit_timing.json");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let vectors = doc["vectors"].as_array().unwrap();
    assert!(vectors.len() >= 10);
    for v in vectors {
        let text = v["frame"].as_str().unwrap();
        let frame = parse_cansend(text).unwrap();
        assert!(frame.is_xl(), "{text}");
        let bits = FrameBits::of(&frame);
        let number = |key: &str| v[key].as_u64().unwrap_or_else(|| panic!("{text}: {key}"));
        assert_eq!(u64::from(bits.total), number("bits"), "{text}");
        assert_eq!(u64::from(bits.stuff_bits), number("stuff_bits"), "{text}");
        assert_eq!(u64::from(bits.nominal_bits), number("nominal_bits"), "{text}");
        assert_eq!(u64::from(bits.data_bits), number("data_bits"), "{text}");
        let duration = bits.duration_ns(number("bitrate") as u32, number("xl_data_bitrate") as u32);
        assert_eq!(duration, number("duration_ns"), "{text}");
    }
}
