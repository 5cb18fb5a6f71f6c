//! Fault confinement of one port's controller (ISO 11898-1, 12.1.4): the
//! transmit and receive error counters and the states they imply.
//!
//! - A transmit error adds 8 to TEC, a receive error 1 to REC; a successful
//!   transmission takes 1 from TEC, a successful reception 1 from REC (from
//!   above 127 it drops back to 127… here to 119..=127 as the standard allows,
//!   we use 127).
//! - Error-active while both are ≤ 127, error-passive when either exceeds 127,
//!   bus-off when TEC exceeds 255.
//! - A bus-off controller leaves bus-off after 128 occurrences of 11
//!   consecutive recessive bits (when automatic recovery is on), with both
//!   counters reset. We wait the 128 × 11 bit times of an idle bus, the
//!   shortest recovery; on a busy bus real controllers take longer.

use serde::Serialize;

/// SocketCAN error classes and details used for state reports
/// (`linux/can/error.h`).
pub mod can_err {
    pub const CRTL: u32 = 0x0000_0004;
    pub const BUSOFF: u32 = 0x0000_0040;
    pub const RESTARTED: u32 = 0x0000_0100;
    /// TX/RX error counters are in data\[6\] and data\[7\].
    pub const CNT: u32 = 0x0000_0200;
    pub const CRTL_RX_PASSIVE: u8 = 0x10;
    pub const CRTL_TX_PASSIVE: u8 = 0x20;
    pub const CRTL_ACTIVE: u8 = 0x40;
}

/// The SocketCAN error frame a controller reports when its state goes from
/// `before` to its current state, as Linux CAN drivers do; `None` if the
/// state did not change.
pub fn state_change_frame(before: ErrorState, now: &ErrorCounters) -> Option<fieldhub_proto::Frame> {
    let after = now.state();
    if after == before {
        return None;
    }
    let mut data = [0u8; 8];
    data[6] = now.tec.min(255) as u8;
    data[7] = now.rec.min(255) as u8;
    let class = match (before, after) {
        (_, ErrorState::BusOff) => can_err::BUSOFF | can_err::CNT,
        (ErrorState::BusOff, _) => can_err::RESTARTED | can_err::CNT,
        (_, ErrorState::Passive) => {
            // Like Linux's can_change_state: each side that is passive is reported.
            if now.tec > 127 {
                data[1] |= can_err::CRTL_TX_PASSIVE;
            }
            if now.rec > 127 {
                data[1] |= can_err::CRTL_RX_PASSIVE;
            }
            can_err::CRTL | can_err::CNT
        }
        (_, ErrorState::Active) => {
            data[1] = can_err::CRTL_ACTIVE;
            can_err::CRTL | can_err::CNT
        }
    };
    fieldhub_proto::Frame::error(class, data).ok()
}

/// Bit times a bus-off controller waits before it may rejoin.
pub const BUS_OFF_RECOVERY_BITS: u64 = 128 * 11;

/// A controller's error state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorState {
    Active,
    Passive,
    BusOff,
}

#[derive(Clone, Copy, Debug, Default)]
pub struct ErrorCounters {
    pub tec: u16,
    pub rec: u16,
    /// Bus time at which a bus-off controller may rejoin; `Some(u64::MAX)`
    /// without automatic recovery.
    pub bus_off_until: Option<u64>,
}

impl ErrorCounters {
    pub fn state(&self) -> ErrorState {
        if self.bus_off_until.is_some() {
            ErrorState::BusOff
        } else if self.tec > 127 || self.rec > 127 {
            ErrorState::Passive
        } else {
            ErrorState::Active
        }
    }

    /// A transmission failed. Returns true if the controller went bus-off.
    pub fn transmit_error(&mut self, now_ns: u64, bitrate: u32, auto_recovery: bool) -> bool {
        self.tec = self.tec.saturating_add(8);
        if self.tec > 255 && self.bus_off_until.is_none() {
            self.bus_off_until = Some(if auto_recovery {
                now_ns + BUS_OFF_RECOVERY_BITS * 1_000_000_000 / u64::from(bitrate.max(1))
            } else {
                u64::MAX
            });
            return true;
        }
        false
    }

    /// No ACK: a transmit error, except that an error-passive transmitter's
    /// counter does not rise further for it (ISO 11898-1 12.1.4.2, exception
    /// 1), so a lone node ends up error-passive and retrying forever rather
    /// than bus-off. Returns true if the controller went bus-off.
    pub fn ack_error(&mut self, now_ns: u64, bitrate: u32, auto_recovery: bool) -> bool {
        if self.state() == ErrorState::Passive {
            return false;
        }
        self.transmit_error(now_ns, bitrate, auto_recovery)
    }

    pub fn receive_error(&mut self) {
        self.rec = self.rec.saturating_add(1).min(255);
    }

    pub fn transmitted(&mut self) {
        self.tec = self.tec.saturating_sub(1);
    }

    pub fn received(&mut self) {
        if self.rec > 127 {
            self.rec = 127;
        } else {
            self.rec = self.rec.saturating_sub(1);
        }
    }

    /// Leave bus-off with both counters reset.
    pub fn recover(&mut self) {
        *self = Self::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transmit_errors_walk_through_passive_to_bus_off_and_recovery() {
        let mut c = ErrorCounters::default();
        let mut states = Vec::new();
        for _ in 0..32 {
            let off = c.transmit_error(0, 500_000, true);
            states.push((c.tec, c.state(), off));
        }
        assert_eq!(states[14], (120, ErrorState::Active, false));
        assert_eq!(states[15], (128, ErrorState::Passive, false));
        assert_eq!(states[31], (256, ErrorState::BusOff, true));
        // 128 × 11 bits at 500 kbit/s = 2.816 ms.
        assert_eq!(c.bus_off_until, Some(2_816_000));
        c.recover();
        assert_eq!((c.tec, c.rec, c.state()), (0, 0, ErrorState::Active));
    }

    #[test]
    fn missing_ack_stops_at_error_passive() {
        let mut c = ErrorCounters::default();
        for _ in 0..100 {
            assert!(!c.ack_error(0, 500_000, true));
        }
        assert_eq!((c.tec, c.state()), (128, ErrorState::Passive));
    }

    #[test]
    fn successes_bring_counters_back() {
        let mut c = ErrorCounters { tec: 130, rec: 200, bus_off_until: None };
        c.transmitted();
        c.received();
        assert_eq!((c.tec, c.rec), (129, 127));
    }
}
