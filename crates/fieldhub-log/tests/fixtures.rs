//! Hand-written logs in the layouts can-utils, python-can and CANoe write
//! (made from the format descriptions, not copied) read as intended.

use std::path::PathBuf;

use fieldhub_log::{open, DateZone, Direction, Format, ReadOptions, Record};
use fieldhub_proto::text::parse_cansend;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

fn read(name: &str) -> Vec<Record> {
    let options = ReadOptions { zone: DateZone::Fixed(0) };
    open(&fixture(name), None, &options)
        .unwrap_or_else(|e| panic!("{name}: {e}"))
        .collect::<Result<Vec<_>, _>>()
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// (Unix time in µs, channel, cansend frame, direction)
type Expected<'a> = (u64, &'a str, &'a str, Option<Direction>);

fn check(name: &str, expected: &[Expected]) {
    let records = read(name);
    assert_eq!(records.len(), expected.len(), "{name}: {records:#?}");
    for (i, (record, (micros, channel, frame, direction))) in records.iter().zip(expected).enumerate() {
        let want = parse_cansend(frame).unwrap_or_else(|e| panic!("expected frame {frame}: {e}"));
        assert_eq!(record.timestamp_ns, micros * 1_000, "{name} record {i}");
        assert_eq!(record.channel, *channel, "{name} record {i}");
        assert_eq!(record.frame, want, "{name} record {i}");
        assert_eq!(record.direction, *direction, "{name} record {i}");
    }
}

const RX: Option<Direction> = Some(Direction::Rx);
const TX: Option<Direction> = Some(Direction::Tx);

#[test]
fn can_utils_candump_log_reads_every_frame_kind() {
    check(
        "can_utils.log",
        &[
            (1_700_000_000_000_100, "can0", "123#DEADBEEF", None),
            (1_700_000_000_000_200, "can0", "12345678#0011223344556677", None),
            (1_700_000_000_000_300, "can0", "7FF#", None),
            (1_700_000_000_000_400, "can0", "123#R", None),
            (1_700_000_000_000_500, "can0", "1ABCDEF0#R8", None),
            (1_700_000_000_000_600, "can0", "123#1122334455667788_E", None),
            (1_700_000_000_000_700, "can0", "20000080#0000000000000000", None),
            (1_700_000_000_000_800, "vcan1", "456##1AABBCCDDEEFF001122334455", None),
            (1_700_000_000_000_900, "vcan1", "456##3", None),
            (1_700_000_000_001_000, "vcan1", "1FFFFFFF##211223344", None),
            (1_700_000_000_001_100, "can0", "321#CAFE", TX),
            (1_700_000_000_001_200, "can0", "321#BEEF", RX),
        ],
    );
}

#[test]
fn python_can_candump_log_reads_with_direction_markers_and_bare_error_frames() {
    check(
        "python_can.log",
        &[
            (1_700_000_100_500_000, "vcan0", "123#DEADBEEF", RX),
            (1_700_000_100_500_250, "vcan0", "00ABCDEF#01", TX),
            (1_700_000_100_500_500, "vcan0", "321#R", RX),
            (1_700_000_100_500_750, "vcan0", "20000080#0000000000000000", None),
            (1_700_000_100_501_000, "can1", "7E0##10102030405060708090A0B0C", RX),
            (1_700_000_100_501_250, "can1", "7E8##0", TX),
        ],
    );
}

#[test]
fn canoe_asc_reads_frames_and_skips_status_statistics_and_requests() {
    let fd32: String = (0..32u8).map(|b| format!("{b:02X}")).collect();
    let fd32 = format!("7E0##1{fd32}");
    // Tue Nov 14 10:13:20.000 pm 2023 UTC.
    let t = |ms: u64, us: u64| 1_700_000_000_000_000 + ms * 1_000 + us;
    check(
        "canoe.asc",
        &[
            (t(15, 991), "can0", "111#0102030405060708", RX),
            (t(16, 991), "can1", "18FEF100#FFFFFFFFFFFFFFFF", RX),
            (t(17, 0), "can0", "200#R4", TX),
            (t(18, 0), "can0", "20000080#0000000000000000", None),
            (t(19, 0), "can1", "20000080#0000000000000000", None),
            (t(40, 0), "can0", &fd32, RX),
            (t(50, 0), "can0", "100#1122334455667788", TX),
            (t(60, 0), "can0", "101#R2", RX),
            (t(70, 0), "can0", "01234567##25A", RX),
            (t(1000, 0), "can0", "111#AABB", RX),
        ],
    );
}

#[test]
fn canoe_asc_with_relative_timestamps_and_decimal_numbers() {
    // Wed Jan 01 12:00:00.000 am 2020 UTC.
    let t = |us: u64| 1_577_836_800_000_000 + us;
    check(
        "canoe_relative.asc",
        &[
            (t(100_000), "can0", "123#DEAD", RX),
            (t(150_000), "can1", "12345678#0A", TX),
            (t(400_000), "can1", "400##10102030405060708090A0B0C", RX),
        ],
    );
}

#[test]
fn python_can_asc_reads_with_its_24_hour_dates_and_symbol_column() {
    let t = |ms: u64| 1_700_000_000_000_000 + ms * 1_000;
    check(
        "python_can.asc",
        &[
            (t(1), "can0", "123#DEADBEEF", RX),
            (t(2), "can0", "1ABCDEF0#R8", TX),
            (t(3), "can0", "20000080#0000000000000000", None),
            (t(4), "can1", "456##10102030405060708090A0B0C", RX),
            (t(5), "can1", "7FF#", RX),
        ],
    );
}

#[test]
fn format_is_sniffed_when_the_extension_does_not_tell() {
    let dir = std::env::temp_dir().join(format!("fieldhub-log-sniff-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (name, format) in [("python_can.asc", Format::Asc), ("can_utils.log", Format::Candump)] {
        let copy = dir.join(format!("{name}.txt"));
        std::fs::copy(fixture(name), &copy).unwrap();
        let reader = open(&copy, None, &ReadOptions { zone: DateZone::Fixed(0) }).unwrap();
        assert_eq!(reader.format(), format);
        assert_eq!(reader.count(), read(name).len());
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
