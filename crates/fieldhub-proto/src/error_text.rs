//! Error frames in words, the way `candump -e` explains them: each error
//! class the frame's id carries, with the details its data bytes hold
//! (`linux/can/error.h`): `controller-problem{rx-error-warning}`,
//! `protocol-violation{{bit-stuffing-error}{crc-sequence}}`,
//! `error-counter-tx-rx{{96}{0}}`.
//!
//! Unknown bits are left out rather than guessed at, so the text never says
//! more than the frame does.

use std::fmt::Write;

use crate::Frame;

/// Error classes, by bit of the error frame's id (`CAN_ERR_TX_TIMEOUT` first).
const CLASSES: [&str; 10] = [
    "tx-timeout",
    "lost-arbitration",
    "controller-problem",
    "protocol-violation",
    "transceiver-status",
    "no-acknowledgement-on-tx",
    "bus-off",
    "bus-error",
    "restarted-after-bus-off",
    "error-counter-tx-rx",
];
const LOST_ARBITRATION: u32 = 0x02;
const CONTROLLER: u32 = 0x04;
const PROTOCOL: u32 = 0x08;
const COUNTERS: u32 = 0x200;

/// Controller problems, by bit of data\[1\] (`CAN_ERR_CRTL_*`).
const CONTROLLER_PROBLEMS: [&str; 7] = [
    "rx-overflow",
    "tx-overflow",
    "rx-error-warning",
    "tx-error-warning",
    "rx-error-passive",
    "tx-error-passive",
    "back-to-error-active",
];

/// Protocol violation types, by bit of data\[2\] (`CAN_ERR_PROT_*`).
const VIOLATION_TYPES: [&str; 8] = [
    "single-bit-error",
    "frame-format-error",
    "bit-stuffing-error",
    "tx-dominant-bit-error",
    "tx-recessive-bit-error",
    "bus-overload",
    "active-error",
    "error-on-tx",
];

/// Where a protocol violation happened, by value of data\[3\]
/// (`CAN_ERR_PROT_LOC_*`); values without a name are left out.
fn violation_location(value: u8) -> Option<&'static str> {
    Some(match value {
        0x02 => "id.28-to-id.21",
        0x03 => "start-of-frame",
        0x04 => "bit-srtr",
        0x05 => "bit-ide",
        0x06 => "id.20-to-id.18",
        0x07 => "id.17-to-id.13",
        0x08 => "crc-sequence",
        0x09 => "reserved-bit-0",
        0x0A => "data-field",
        0x0B => "data-length-code",
        0x0C => "bit-rtr",
        0x0D => "reserved-bit-1",
        0x0E => "id.4-to-id.0",
        0x0F => "id.12-to-id.5",
        0x11 => "active-error-flag",
        0x12 => "intermission",
        0x13 => "tolerate-dominant-bits",
        0x16 => "passive-error-flag",
        0x17 => "error-delimiter",
        0x18 => "crc-delimiter",
        0x19 => "acknowledge-slot",
        0x1A => "end-of-frame",
        0x1B => "acknowledge-delimiter",
        0x1C => "overload-flag",
        _ => return None,
    })
}

/// The classes and details of an error frame, joined by `separator`
/// (candump -e uses a new line and a tab); `None` for other frames.
pub fn describe_error_frame(frame: &Frame, separator: &str) -> Option<String> {
    if !frame.is_error() {
        return None;
    }
    let class = frame.id();
    let data = frame.data();
    let byte = |i: usize| data.get(i).copied().unwrap_or(0);
    let mut parts = Vec::new();
    for (bit, name) in CLASSES.iter().enumerate() {
        let mask = 1u32 << bit;
        if class & mask == 0 {
            continue;
        }
        let mut part = (*name).to_owned();
        match mask {
            LOST_ARBITRATION => {
                let _ = write!(part, "{{at bit {}}}", byte(0));
            }
            CONTROLLER => {
                let _ = write!(part, "{{{}}}", names_of_bits(byte(1), &CONTROLLER_PROBLEMS));
            }
            PROTOCOL => {
                let location = violation_location(byte(3)).unwrap_or("");
                let _ = write!(part, "{{{{{}}}{{{location}}}}}", names_of_bits(byte(2), &VIOLATION_TYPES));
            }
            COUNTERS => {
                let _ = write!(part, "{{{{{}}}{{{}}}}}", byte(6), byte(7));
            }
            _ => {}
        }
        parts.push(part);
    }
    // Drivers often fill in the counters without setting their class.
    if class & COUNTERS == 0 && (byte(6) != 0 || byte(7) != 0) {
        parts.push(format!("error-counter-tx-rx{{{{{}}}{{{}}}}}", byte(6), byte(7)));
    }
    Some(parts.join(separator))
}

fn names_of_bits(bits: u8, names: &[&str]) -> String {
    let set = names.iter().enumerate().filter(|(i, _)| bits & (1 << i) != 0).map(|(_, name)| *name);
    set.collect::<Vec<_>>().join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(class: u32, data: [u8; 8]) -> Frame {
        Frame::error(class, data).unwrap()
    }

    #[test]
    fn controller_state_reports_read_as_candump_e_prints_them() {
        // The frame fieldhub's fault confinement sends on error-passive.
        let passive = error(CONTROLLER | COUNTERS, [0, 0x20, 0, 0, 0, 0, 136, 0]);
        assert_eq!(
            describe_error_frame(&passive, "\n\t").unwrap(),
            "controller-problem{tx-error-passive}\n\terror-counter-tx-rx{{136}{0}}"
        );
        let bus_off = error(0x40, [0; 8]);
        assert_eq!(describe_error_frame(&bus_off, ",").unwrap(), "bus-off");
    }

    #[test]
    fn protocol_violations_name_their_type_and_location() {
        let stuffing = error(PROTOCOL | 0x80, [0, 0, 0x04, 0x08, 0, 0, 0, 0]);
        assert_eq!(
            describe_error_frame(&stuffing, ",").unwrap(),
            "protocol-violation{{bit-stuffing-error}{crc-sequence}},bus-error"
        );
        let unnamed_location = error(PROTOCOL, [0, 0, 0x01, 0x14, 0, 0, 0, 0]);
        assert_eq!(describe_error_frame(&unnamed_location, ",").unwrap(), "protocol-violation{{single-bit-error}{}}");
    }

    #[test]
    fn counters_without_their_class_are_still_shown() {
        let ack = error(0x20, [0, 0, 0, 0, 0, 0, 8, 1]);
        assert_eq!(describe_error_frame(&ack, ",").unwrap(), "no-acknowledgement-on-tx,error-counter-tx-rx{{8}{1}}");
        let lost = error(LOST_ARBITRATION, [12, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(describe_error_frame(&lost, ",").unwrap(), "lost-arbitration{at bit 12}");
    }

    #[test]
    fn data_frames_have_no_description() {
        let data = Frame::can(0x123, false, &[1, 2]).unwrap();
        assert_eq!(describe_error_frame(&data, ","), None);
    }
}
