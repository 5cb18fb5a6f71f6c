//! MDF4 round trips, the block forms other writers use, and hostile files.

use std::io::Write;

use fieldhub_proto::text::parse_cansend;

use super::block::{self, HEADER};
use super::{read, Mdf4Writer};
use crate::{DateZone, Direction, Record};

fn sample() -> Vec<Record> {
    let frames = [
        ("can0", "123#DEADBEEF"),
        ("can0", "12345678#R"),
        ("fd0", "123##3DEADBEEF"),
        ("can0", "20000080#0000000000000000"),
        ("fd0", "1FFFFFFF##0"),
        ("can1", "7FF#1122334455667788_9"),
        ("b&<\"x>", "__FD64__"),
        ("can0", "7FF#R3"),
    ];
    frames
        .iter()
        .enumerate()
        .map(|(i, (channel, frame))| Record {
            frame: if *frame == "__FD64__" {
                parse_cansend(&format!("001##2{}", "A5".repeat(64))).unwrap()
            } else {
                parse_cansend(frame).unwrap()
            },
            // Nanoseconds, not only microseconds, survive.
            timestamp_ns: 1_700_000_000_000_000_000 + i as u64 * 3_333_001,
            channel: channel.to_string(),
            direction: Some(if i % 2 == 0 { Direction::Rx } else { Direction::Tx }),
        })
        .collect()
}

fn write(records: &[Record]) -> Vec<u8> {
    let mut writer = Mdf4Writer::new(Vec::new(), &[], 1);
    for r in records {
        writer.record(r.timestamp_ns, &r.channel, &r.frame, r.direction.unwrap()).unwrap();
    }
    assert_eq!(writer.frames(), records.len() as u64);
    writer.finish().unwrap()
}

#[test]
fn every_frame_kind_reads_back_identically_to_the_nanosecond() {
    let file = write(&sample());
    assert_eq!(&file[..8], b"MDF     ");
    assert_eq!(read(&file, DateZone::Fixed(0)).unwrap(), sample());
}

#[test]
fn an_empty_recording_is_a_readable_file() {
    let file = write(&[]);
    assert_eq!(read(&file, DateZone::Local).unwrap(), vec![]);
}

#[test]
fn can_xl_and_raw_frames_are_refused_with_the_reason_not_cut_into_a_can_record() {
    let mut writer = Mdf4Writer::new(Vec::new(), &[], 0);
    let xl = fieldhub_proto::Frame::can_xl(0x123, 0, 0, fieldhub_proto::FrameFlags::empty(), 0, &[1; 2048]).unwrap();
    for frame in [xl, fieldhub_proto::Frame::raw(7, &[2; 100]).unwrap()] {
        let error = writer.record(1, "xl0", &frame, Direction::Rx).unwrap_err();
        assert_eq!(error.kind(), std::io::ErrorKind::InvalidInput);
        assert!(error.to_string().contains("MF4 recordings carry CAN and CAN FD frames; channel 'xl0'"), "{error}");
    }
    writer.record(2, "xl0", &parse_cansend("123#01").unwrap(), Direction::Rx).unwrap();
}

#[test]
fn more_than_256_channels_is_refused_with_the_reason() {
    let mut writer = Mdf4Writer::new(Vec::new(), &[], 0);
    let frame = parse_cansend("001#").unwrap();
    for n in 0..256 {
        writer.record(0, &format!("c{n}"), &frame, Direction::Rx).unwrap();
    }
    let error = writer.record(0, "one-more", &frame, Direction::Rx).unwrap_err().to_string();
    assert!(error.contains("at most 256 channels"), "{error}");
}

/// The offset of the first block with `id` after the identification block.
fn find_block(file: &[u8], id: &[u8; 4]) -> usize {
    (64..file.len()).step_by(8).find(|&at| &file[at..at + 4] == id).unwrap()
}

/// The file with its last DT block (the remote frames') replaced by a DZ
/// block of `zip_type` (0 deflate, 1 transposed), as asammdf compresses.
fn with_compressed_remote_records(zip_type: u8) -> Vec<u8> {
    let mut file = write(&sample());
    let dt = (64..file.len()).step_by(8).rfind(|&at| &file[at..at + 4] == b"##DT").unwrap();
    let length = u64::from_le_bytes(file[dt + 8..dt + 16].try_into().unwrap()) as usize;
    let records = file[dt + HEADER..dt + length].to_vec();
    let records = &records[..records.len() - records.len() % 17];
    let columns = 17;
    let rows = records.len() / columns;
    let mut plain = records.to_vec();
    if zip_type == 1 {
        for row in 0..rows {
            for column in 0..columns {
                plain[column * rows + row] = records[row * columns + column];
            }
        }
    }
    let mut encoder = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(&plain).unwrap();
    let compressed = encoder.finish().unwrap();
    let mut data = b"DT".to_vec();
    data.extend_from_slice(&[zip_type, 0]);
    data.extend_from_slice(&(columns as u32).to_le_bytes());
    data.extend_from_slice(&(records.len() as u64).to_le_bytes());
    data.extend_from_slice(&(compressed.len() as u64).to_le_bytes());
    data.extend_from_slice(&compressed);
    file.truncate(dt);
    let mut layout = block::Layout { bytes: file };
    layout.block(b"DZ", &[], &data);
    layout.bytes
}

#[test]
fn deflated_and_transposed_data_blocks_read_as_plain_ones() {
    for zip_type in [0, 1] {
        assert_eq!(read(&with_compressed_remote_records(zip_type), DateZone::Fixed(0)).unwrap(), sample());
    }
}

#[test]
fn a_start_time_in_local_time_is_taken_in_the_zone_given() {
    let mut file = write(&sample());
    let hd = find_block(&file, b"##HD");
    // hd_time_flags: local time; the start written as if two hours east of UTC.
    let data = hd + HEADER + 6 * 8;
    file[data + 12] = 1;
    let start = u64::from_le_bytes(file[data..data + 8].try_into().unwrap()) + 7_200_000_000_000;
    file[data..data + 8].copy_from_slice(&start.to_le_bytes());
    assert_eq!(read(&file, DateZone::Fixed(7200)).unwrap(), sample());
}

#[test]
fn a_file_without_channel_names_numbers_them_as_python_can() {
    let mut file = write(&sample());
    let hd = find_block(&file, b"##HD");
    file[hd + HEADER + 5 * 8..hd + HEADER + 6 * 8].fill(0);
    let channels: Vec<String> = read(&file, DateZone::Fixed(0)).unwrap().into_iter().map(|r| r.channel).collect();
    assert_eq!(channels, ["can0", "can0", "can1", "can0", "can1", "can2", "can3", "can0"]);
}

#[test]
fn what_is_not_mdf4_is_named() {
    let error = read(b"(1.0) can0 123#\n", DateZone::Local).unwrap_err().to_string();
    assert!(error.contains("not an MDF file"), "{error}");
    let mut file = write(&sample());
    file.truncate(file.len() - 30);
    let error = read(&file, DateZone::Local).unwrap_err().to_string();
    assert!(error.starts_with("MDF4 block at byte"), "{error}");
}

#[test]
fn a_link_loop_is_refused_not_followed() {
    let mut file = write(&sample());
    let dg = find_block(&file, b"##DG");
    // The first data group's next link points at itself.
    file[dg + HEADER..dg + HEADER + 8].copy_from_slice(&(dg as u64).to_le_bytes());
    let error = read(&file, DateZone::Local).unwrap_err().to_string();
    assert!(error.contains("loop"), "{error}");
}

#[test]
fn damaged_files_never_panic() {
    // A small deterministic generator: every byte of the file, and runs of
    // them, overwritten with values that make links and lengths absurd.
    let file = with_compressed_remote_records(1);
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for _ in 0..3000 {
        let mut damaged = file.clone();
        for _ in 0..1 + next() % 4 {
            let at = (next() % damaged.len() as u64) as usize;
            let value = next();
            let width = (1 + next() % 8) as usize;
            let end = (at + width).min(damaged.len());
            damaged[at..end].copy_from_slice(&value.to_le_bytes()[..end - at]);
        }
        let _ = read(&damaged, DateZone::Fixed(0));
        let cut = (next() % file.len() as u64) as usize;
        let _ = read(&file[..cut], DateZone::Fixed(0));
    }
}
