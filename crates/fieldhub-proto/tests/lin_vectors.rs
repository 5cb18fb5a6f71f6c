//! Checks `fieldhub_proto::lin` and the `lin` frame kind against
//! `spec/vectors/lin/arithmetic.json` (format: `spec/README.md`): every
//! protected identifier, checksums under both models, nominal frame times
//! and their `T_Frame_Maximum`, and frames built with them.

use std::path::Path;

use fieldhub_proto::bits::FrameBits;
use fieldhub_proto::lin::{self, Checksum, FrameShape};
use fieldhub_proto::{Frame, FrameFlags};
use serde_json::Value;

fn arithmetic() -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../spec/vectors/lin/arithmetic.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

fn u8_of(entry: &Value, key: &str) -> u8 {
    entry[key].as_u64().and_then(|n| u8::try_from(n).ok()).unwrap_or_else(|| panic!("{entry}: {key}"))
}

#[test]
fn every_identifier_has_the_protected_identifier_of_the_vectors_and_no_other_byte_passes_parity() {
    let table = arithmetic()["protected_ids"].as_array().unwrap().clone();
    assert_eq!(table.len(), 64);
    for entry in &table {
        let (id, pid) = (u8_of(entry, "id"), u8_of(entry, "pid"));
        assert_eq!(lin::protected_id(id), Ok(pid), "id 0x{id:02X}");
        assert_eq!(lin::id_of(pid), Ok(id), "pid 0x{pid:02X}");
        // Every other byte with these identifier bits fails parity.
        for wrong in (0..4u8).map(|p| id | p << 6).filter(|&b| b != pid) {
            assert!(lin::id_of(wrong).is_err(), "0x{wrong:02X}");
        }
    }
}

#[test]
fn checksums_match_the_vectors_and_frames_carry_them_as_the_record_says() {
    for entry in arithmetic()["checksums"].as_array().unwrap() {
        let pid = u8_of(entry, "pid");
        let data = hex::decode(entry["data"].as_str().unwrap()).unwrap();
        let (classic, enhanced) = (u8_of(entry, "classic"), u8_of(entry, "enhanced"));
        assert_eq!(Checksum::Classic.of(pid, &data), classic, "{entry}");
        assert_eq!(Checksum::Enhanced.of(pid, &data), enhanced, "{entry}");
        let id = lin::id_of(pid).unwrap();
        let frame = Frame::lin(id, Checksum::Enhanced, &data).unwrap();
        assert_eq!((frame.len8_dlc(), frame.flags()), (enhanced, FrameFlags::empty()));
        let frame = Frame::lin(id, Checksum::Classic, &data).unwrap();
        assert_eq!((frame.len8_dlc(), frame.flags()), (classic, FrameFlags::LIN_CLASSIC));
        // A checksum byte other than the model's is flagged as sent wrong.
        let wrong = Frame::lin_with_checksum(id, Checksum::Enhanced, &data, enhanced ^ 0x01).unwrap();
        assert_eq!(wrong.flags(), FrameFlags::LIN_CHECKSUM_ERROR);
        assert_eq!(wrong.len8_dlc(), enhanced ^ 0x01);
    }
}

#[test]
fn nominal_frame_times_and_their_maximum_match_the_vectors_and_frame_bits() {
    for entry in arithmetic()["frame_times"].as_array().unwrap() {
        let len = entry["len"].as_u64().unwrap() as usize;
        let bitrate = entry["bitrate"].as_u64().unwrap() as u32;
        let bits = entry["bits"].as_u64().unwrap() as u32;
        assert_eq!(FrameShape::default().frame_bits(len), Ok(bits), "{entry}");
        assert_eq!(lin::duration_ns(bits, bitrate), Ok(entry["ns"].as_u64().unwrap()), "{entry}");
        assert_eq!(lin::max_frame_ns(len, bitrate), Ok(entry["max_ns"].as_u64().unwrap()), "{entry}");
        // The channel's figure for a LIN frame is the same nominal frame.
        let frame = Frame::lin(0x10, Checksum::Enhanced, &vec![0xA5; len]).unwrap();
        let figures = FrameBits::of(&frame);
        assert_eq!((figures.total, figures.nominal_bits, figures.stuff_bits), (bits, bits, 0));
        assert_eq!(figures.duration_ns(bitrate, bitrate), entry["ns"].as_u64().unwrap());
    }
    // A header nobody answered: the header's 34 bits.
    assert_eq!(FrameBits::of(&Frame::lin_no_response(0x22).unwrap()).total, 34);
}

#[test]
fn a_collision_is_the_wired_and_of_the_responses_with_their_checksums_as_the_frames_vector_says() {
    // spec/vectors/lin/frames.json `lin_collision_hub_made`: frames 0x11 and
    // 0x12 answer event-triggered 0x30 together, each response opening
    // with its frame's protected identifier and checked under 0x30's.
    let answer = |data: &[u8]| Frame::lin(0x30, Checksum::Enhanced, data).unwrap();
    let (door, seat) = (answer(&[0x11, 0x01]), answer(&[0x92, 0x02]));
    assert_eq!((door.len8_dlc(), seat.len8_dlc()), (0xFC, 0x7A));
    let read = Frame::lin_collision(0x30, &[door, seat.clone()]).unwrap();
    assert_eq!((read.data(), read.len8_dlc(), read.flags()), (&[0x10, 0x00][..], 0x78, FrameFlags::LIN_COLLISION));
    // A shorter response is padded with recessive bits: its checksum byte
    // meets the longer one's data.
    let short = answer(&[0x11]);
    let read = Frame::lin_collision(0x30, &[short.clone(), seat]).unwrap();
    assert_eq!((read.data(), read.len8_dlc()), (&[0x10, 0x02 & short.len8_dlc()][..], 0x7A));
    assert_eq!(FrameBits::of(&read).total, 34 + 30, "the header and a 2-byte response");
}
