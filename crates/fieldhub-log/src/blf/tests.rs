//! BLF: what fieldhub writes reads back; what other writers' layouts hold
//! reads as meant; damaged files are typed errors.

use std::io::Cursor;

use fieldhub_proto::text::parse_cansend;

use super::header::{FileHeader, FILE_HEADER, HEADER_FIELDS};
use super::BlfError;
use crate::{Direction, Format, LogError, LogReader, ReadOptions, Record, Recorder, RecorderOptions};

const START: u64 = 1_700_000_000_123_456_789;

fn sample() -> Vec<Record> {
    let frames = [
        ("can0", "123#DEADBEEF"),
        ("can0", "12345678#R"),
        ("fd0", "123##3DEADBEEF"),
        ("can0", "20000080#0011223344556677"),
        ("fd0", "1FFFFFFF##0"),
        ("can1", "7FF#1122334455667788_9"),
        ("fd0", "321##1000102030405060708090A0B0C0D0E0F101112131415161718191A1B1C1D1E1F"),
        ("can1", "7FF#R3"),
    ];
    frames
        .iter()
        .enumerate()
        .map(|(i, (channel, frame))| {
            let frame = parse_cansend(frame).unwrap();
            let direction =
                if frame.is_error() { None } else { Some(if i % 2 == 0 { Direction::Rx } else { Direction::Tx }) };
            Record { timestamp_ns: START + i as u64 * 3_333_333, channel: channel.to_string(), frame, direction }
        })
        .collect()
}

fn record(records: &[Record], options: &RecorderOptions) -> Vec<u8> {
    let mut recorder = Recorder::new(Cursor::new(Vec::new()), Format::Blf, options);
    for r in records {
        recorder.record(r.timestamp_ns, &r.channel, &r.frame, r.direction.unwrap_or(Direction::Rx)).unwrap();
    }
    recorder.finish_file().unwrap().into_inner()
}

fn read(bytes: &[u8]) -> Result<Vec<Record>, LogError> {
    LogReader::new(bytes, Format::Blf, &ReadOptions::default()).collect()
}

fn blf_error(bytes: &[u8]) -> BlfError {
    match read(bytes) {
        Err(LogError::Blf { error, .. }) => error,
        other => panic!("expected a BLF error, got {other:?}"),
    }
}

fn header(bytes: &[u8]) -> FileHeader {
    FileHeader::decode(bytes[..HEADER_FIELDS].try_into().unwrap()).unwrap().0
}

#[test]
fn a_recording_reads_back_identically_to_the_nanosecond() {
    let options = RecorderOptions { channels: vec!["fd0".into()], ..Default::default() };
    let bytes = record(&sample(), &options);
    assert_eq!(read(&bytes).unwrap(), sample());
}

#[test]
fn the_header_counts_the_objects_and_spans_the_recording() {
    let bytes = record(&sample(), &RecorderOptions::default());
    let header = header(&bytes);
    // Eight frames and three channel names.
    assert_eq!(header.objects, 11);
    assert_eq!(header.file_size, bytes.len() as u64);
    assert_eq!(header.start_ns, START - START % 1_000_000);
    let last = START + 7 * 3_333_333;
    assert_eq!(header.end_ns, last - last % 1_000_000);
    assert!(header.uncompressed_size > FILE_HEADER as u64);
}

#[test]
fn bus_times_before_1990_are_kept_exactly_with_a_zero_start() {
    let mut records = sample();
    for (i, r) in records.iter_mut().enumerate() {
        r.timestamp_ns = 5_000 + i as u64 * 1_000_001;
    }
    let bytes = record(&records, &RecorderOptions::default());
    assert_eq!(header(&bytes).start_ns, 0);
    assert_eq!(read(&bytes).unwrap(), records);
}

#[test]
fn objects_continue_across_full_containers() {
    let frame = parse_cansend("01ABCDEF##1000102030405060708090A0B0C0D0E0F101112131415161718191A1B1C1D1E1F").unwrap();
    let records: Vec<Record> = (0..3_000u64)
        .map(|i| Record {
            timestamp_ns: START + i * 1_000,
            channel: format!("can{}", i % 3),
            frame: frame.clone(),
            direction: Some(Direction::Rx),
        })
        .collect();
    let bytes = record(&records, &RecorderOptions::default());
    assert_eq!(read(&bytes).unwrap(), records);
}

#[test]
fn an_empty_recording_is_a_header_at_the_recordings_start() {
    let options = RecorderOptions { start_ns: START, ..Default::default() };
    let bytes = record(&[], &options);
    assert_eq!(bytes.len(), FILE_HEADER);
    assert_eq!(header(&bytes).start_ns, START - START % 1_000_000);
    assert_eq!(read(&bytes).unwrap(), []);
}

/// A file of other writers' layouts: stored and zlib containers, objects
/// outside containers, CAN_MESSAGE and CAN_FD_MESSAGE, times in 10 µs.
mod by_hand {
    use super::*;

    /// An object: version-1 header, `flags` its time unit, then `body`.
    pub fn object(kind: u32, flags: u32, time: u64, body: &[u8]) -> Vec<u8> {
        let mut out = b"LOBJ".to_vec();
        out.extend_from_slice(&32u16.to_le_bytes());
        out.extend_from_slice(&1u16.to_le_bytes());
        out.extend_from_slice(&(32 + body.len() as u32).to_le_bytes());
        out.extend_from_slice(&kind.to_le_bytes());
        out.extend_from_slice(&flags.to_le_bytes());
        out.extend_from_slice(&[0; 4]);
        out.extend_from_slice(&time.to_le_bytes());
        out.extend_from_slice(body);
        out.resize(out.len() + out.len() % 4, 0);
        out
    }

    pub fn container(method: u16, data: &[u8], uncompressed: usize) -> Vec<u8> {
        let mut out = b"LOBJ".to_vec();
        out.extend_from_slice(&16u16.to_le_bytes());
        out.extend_from_slice(&1u16.to_le_bytes());
        out.extend_from_slice(&(32 + data.len() as u32).to_le_bytes());
        out.extend_from_slice(&10u32.to_le_bytes());
        out.extend_from_slice(&method.to_le_bytes());
        out.extend_from_slice(&[0; 6]);
        out.extend_from_slice(&(uncompressed as u32).to_le_bytes());
        out.extend_from_slice(&[0; 4]);
        out.extend_from_slice(data);
        out.resize(out.len() + (32 + data.len()) % 4, 0);
        out
    }

    pub fn zlib(data: &[u8]) -> Vec<u8> {
        use std::io::Write;
        let mut encoder = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        encoder.write_all(data).unwrap();
        encoder.finish().unwrap()
    }

    pub fn file(start_ns: u64, objects: &[u8]) -> Vec<u8> {
        let header = FileHeader { start_ns, ..Default::default() };
        let mut out = header.encode().to_vec();
        out.extend_from_slice(objects);
        out
    }

    /// CAN_MESSAGE: channel 2, Tx, id 0x123, 2 bytes; CAN_FD_MESSAGE:
    /// channel 1, extended 0x1234567, BRS, 12 bytes.
    pub fn messages() -> (Vec<u8>, Vec<u8>) {
        let mut can = vec![2, 0, 0x01, 2];
        can.extend_from_slice(&0x123u32.to_le_bytes());
        can.extend_from_slice(&[0xAA, 0xBB, 0, 0, 0, 0, 0, 0]);
        let mut fd = vec![1, 0, 0, 9];
        fd.extend_from_slice(&0x8123_4567u32.to_le_bytes());
        fd.extend_from_slice(&[0; 4]);
        fd.extend_from_slice(&[0, 0x3, 12, 0, 0, 0, 0, 0]);
        let mut data = [0u8; 64];
        data[..12].copy_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
        fd.extend_from_slice(&data);
        (object(1, 1, 150, &can), object(100, 2, 2_000_000, &fd))
    }
}

#[test]
fn other_writers_layouts_read_as_meant() {
    let (can, fd) = by_hand::messages();
    let start = 1_700_000_000_000_000_000;
    // The FD message split over a stored and a zlib container, the CAN message outside any.
    let (first, second) = fd.split_at(50);
    let mut objects = by_hand::container(0, first, first.len());
    objects.extend(by_hand::container(2, &by_hand::zlib(second), second.len()));
    objects.extend(&can);
    let records = read(&by_hand::file(start, &objects)).unwrap();
    let expected = [
        (start + 2_000_000, "can0", "01234567##10102030405060708090A0B0C", Direction::Rx),
        (start + 1_500_000, "can1", "123#AABB", Direction::Tx),
    ];
    assert_eq!(records.len(), 2, "{records:?}");
    for (record, (time, channel, frame, direction)) in records.iter().zip(expected) {
        assert_eq!(
            (record.timestamp_ns, record.channel.as_str(), record.frame.clone(), record.direction),
            (time, channel, parse_cansend(frame).unwrap(), Some(direction))
        );
    }
}

#[test]
fn a_file_that_is_not_blf_says_so() {
    assert_eq!(blf_error(b"(1700000000.000000) can0 123#\n"), BlfError::NotBlf);
    assert_eq!(blf_error(b""), BlfError::NotBlf);
}

#[test]
fn a_truncated_object_is_an_error_not_an_end() {
    let (can, _) = by_hand::messages();
    let file = by_hand::file(0, &can);
    for cut in [FILE_HEADER + 5, FILE_HEADER + 20, file.len() - 6] {
        assert!(matches!(blf_error(&file[..cut]), BlfError::Truncated(_)), "cut at {cut}");
    }
    // Inside a container: the object's last bytes never come.
    let container = by_hand::container(0, &can[..can.len() - 4], can.len() - 4);
    assert!(matches!(blf_error(&by_hand::file(0, &container)), BlfError::Truncated(_)));
    // The header itself.
    assert!(matches!(blf_error(&file[..40]), BlfError::Truncated(_)));
}

#[test]
fn a_bad_signature_is_named() {
    let (mut can, _) = by_hand::messages();
    can[..4].copy_from_slice(b"LOBX");
    assert_eq!(blf_error(&by_hand::file(0, &can)), BlfError::BadSignature(*b"LOBX"));
}

#[test]
fn an_oversize_length_is_refused_before_it_is_read() {
    let (mut can, _) = by_hand::messages();
    can[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(matches!(blf_error(&by_hand::file(0, &can)), BlfError::Oversize { .. }));
    let mut container = by_hand::container(2, &by_hand::zlib(&can), can.len());
    container[24..28].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(matches!(blf_error(&by_hand::file(0, &container)), BlfError::Oversize { .. }));
    // A size smaller than its own header.
    let (mut can, _) = by_hand::messages();
    can[8..12].copy_from_slice(&8u32.to_le_bytes());
    assert!(matches!(blf_error(&by_hand::file(0, &can)), BlfError::BadObjectHeader { .. }));
}

#[test]
fn bad_zlib_and_wrong_sizes_are_errors() {
    let (can, _) = by_hand::messages();
    let mut compressed = by_hand::zlib(&can);
    compressed[4] ^= 0xFF;
    compressed[5] ^= 0xFF;
    let error = blf_error(&by_hand::file(0, &by_hand::container(2, &compressed, can.len())));
    assert!(matches!(error, BlfError::BadZlib(_) | BlfError::ContainerSize { .. }), "{error:?}");
    let wrong_size = by_hand::container(2, &by_hand::zlib(&can), can.len() + 10);
    assert!(matches!(blf_error(&by_hand::file(0, &wrong_size)), BlfError::ContainerSize { .. }));
    let unknown = by_hand::container(7, &can, can.len());
    assert_eq!(blf_error(&by_hand::file(0, &unknown)), BlfError::UnknownCompression(7));
}

#[test]
fn a_frame_that_cannot_be_is_refused_with_its_object() {
    // Standard id 0x800 without the extended bit; FD length 13; channel 0.
    let mut can = vec![1, 0, 0, 0];
    can.extend_from_slice(&0x800u32.to_le_bytes());
    can.extend_from_slice(&[0; 8]);
    let error = blf_error(&by_hand::file(0, &by_hand::object(1, 2, 0, &can)));
    assert!(matches!(error, BlfError::BadFrame { object: "CAN_MESSAGE", .. }), "{error:?}");
    let (_, mut fd) = by_hand::messages();
    fd[32 + 14] = 13;
    let error = blf_error(&by_hand::file(0, &fd));
    assert!(matches!(error, BlfError::BadFrame { object: "CAN_FD_MESSAGE", .. }), "{error:?}");
    let (mut can, _) = by_hand::messages();
    can[32] = 0;
    assert_eq!(blf_error(&by_hand::file(0, &can)), BlfError::ChannelZero { object: "CAN_MESSAGE" });
}
