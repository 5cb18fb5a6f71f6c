//! Local calendar time for what candump prints in it: `dump -t A`'s
//! stamps and the name `dump -l` gives its log file
//! (`candump-2026-11-27_135103.log`). The C library's `localtime_r` reads
//! the time zone ($TZ, /etc/localtime) as candump's does.

// The C library's thread-safe localtime: POSIX's localtime_r, or on
// Windows the C runtime's localtime_s (the same, arguments swapped).
#[cfg(unix)]
use libc::localtime_r as localtime;
#[cfg(windows)]
unsafe fn localtime(time: *const libc::time_t, tm: *mut libc::tm) {
    // SAFETY: the caller's pointers, passed on as localtime_r's would be.
    unsafe { libc::localtime_s(tm, time) };
}

/// A moment as the local calendar shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LocalTime {
    pub year: i32,
    pub month: u32,
    pub day: u32,
    pub hour: u32,
    pub minute: u32,
    pub second: u32,
}

impl LocalTime {
    /// The local time `seconds` after the Unix epoch.
    pub fn at(seconds: u64) -> Self {
        let time = libc::time_t::try_from(seconds).unwrap_or(libc::time_t::MAX);
        // SAFETY: `tm` is plain old data for which all-zero bytes are a valid value.
        let mut tm: libc::tm = unsafe { std::mem::zeroed() };
        // SAFETY: both pointers are to live locals of the right types;
        // localtime_r (unlike localtime) writes only to `tm`. On failure
        // (a year beyond `int`) it leaves `tm` zeroed: 1900-01-00, harmless.
        unsafe { localtime(&time, &mut tm) };
        let field = |v: libc::c_int| u32::try_from(v).unwrap_or(0);
        Self {
            year: tm.tm_year + 1900,
            month: field(tm.tm_mon + 1),
            day: field(tm.tm_mday),
            hour: field(tm.tm_hour),
            minute: field(tm.tm_min),
            second: field(tm.tm_sec),
        }
    }

    /// The local time now.
    pub fn now() -> Self {
        let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        Self::at(since.as_secs())
    }

    /// `2026-11-27 13:51:03`, as candump's `-t A` (`%Y-%m-%d %H:%M:%S`).
    pub fn date_time(&self) -> String {
        let Self { year, month, day, hour, minute, second } = self;
        format!("{year:04}-{month:02}-{day:02} {hour:02}:{minute:02}:{second:02}")
    }

    /// `candump-2026-11-27_135103.log`, the name candump -l logs to.
    pub fn candump_log_name(&self) -> String {
        let Self { year, month, day, hour, minute, second } = self;
        format!("candump-{year:04}-{month:02}-{day:02}_{hour:02}{minute:02}{second:02}.log")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_stamps_are_candumps() {
        let moment = LocalTime { year: 2026, month: 11, day: 7, hour: 3, minute: 5, second: 9 };
        assert_eq!(moment.date_time(), "2026-11-07 03:05:09");
        assert_eq!(moment.candump_log_name(), "candump-2026-11-07_030509.log");
    }

    #[test]
    fn the_local_time_moves_with_the_epoch_seconds() {
        let (a, b) = (LocalTime::at(1_700_000_000), LocalTime::at(1_700_000_061));
        assert_eq!((b.minute + 60 - a.minute) % 60, 1);
        assert_eq!(b.second, (a.second + 1) % 60);
        assert!(a.year == 2023 && a.month == 11 && (14..=15).contains(&a.day), "{a:?}");
    }
}
