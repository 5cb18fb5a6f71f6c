//! `[channel.lin] ldf = "body.ldf"`: a LIN channel configured from a LIN
//! description file. The file (relative to the configuration file) is
//! read once, when the configuration is loaded; its chosen schedule table
//! (`schedule_table`, default the first) becomes the channel's schedule,
//! its frames the channel's `frames` (length, checksum model, publishing
//! nodes), its event-triggered frames (with their collision-resolving
//! tables' slots) and sporadic frames the channel's `event_triggered` and
//! `sporadic`, and its `LIN_speed` the channel's bitrate. The bus then checks
//! the result as it checks a schedule written by hand.
//!
//! Errors name the configuration's key and the LDF's file, line and column.
//! A file over [`fieldhub_ldf::MAX_LDF_BYTES`] is refused unread.

use std::io::Read;
use std::path::Path;

use fieldhub_bus::config::{
    ChannelConfig, LinChecksum, LinEventTriggeredConfig, LinFrameConfig, LinSlotConfig, LinSporadicConfig,
    DEFAULT_BITRATE,
};
use fieldhub_ldf::{Ldf, Publisher, ScheduleTable};

/// Fill `channel`'s schedule, frames and bitrate from its LDF, if it names
/// one; `dir` is the configuration file's directory. The error names the
/// key at fault (`lin.ldf`) and what was wrong.
pub(super) fn apply(channel: &mut ChannelConfig, dir: &Path) -> Result<(), (&'static str, String)> {
    let Some(lin) = channel.lin.as_mut() else { return Ok(()) };
    let Some(name) = lin.ldf.as_ref() else {
        if lin.schedule_table.is_some() {
            return Err(("lin.schedule_table", "names a table of an LDF; add ldf = \"FILE.ldf\"".into()));
        }
        return Ok(());
    };
    if !lin.schedule.is_empty() || !lin.frames.is_empty() {
        let text = "the schedule and frames come from the LDF; give either ldf or schedule, not both";
        return Err(("lin.schedule", text.into()));
    }
    let path = dir.join(name);
    let shown = path.display().to_string();
    let ldf = read(&path).map_err(|message| ("lin.ldf", format!("{shown}: {message}")))?;
    let table = match &lin.schedule_table {
        Some(wanted) => ldf.schedule_table(wanted).ok_or_else(|| {
            let known: Vec<&str> = ldf.schedule_tables.iter().map(|t| t.name.as_str()).collect();
            let text = format!("'{wanted}' is not a schedule table of {shown} (its tables: {})", known.join(", "));
            ("lin.schedule_table", text)
        })?,
        None => ldf
            .schedule_tables
            .first()
            .ok_or_else(|| ("lin.ldf", format!("{shown} has no Schedule_tables; the hub's master needs one to run")))?,
    };
    let schedule = slots(&ldf, table, &shown)?;
    if schedule.is_empty() {
        return Err(("lin.schedule_table", format!("schedule table '{}' of {shown} is empty", table.name)));
    }
    if channel.bitrate != DEFAULT_BITRATE && channel.bitrate != ldf.speed_bps {
        let text = format!(
            "{} bit/s differs from LIN_speed in {shown} ({} bit/s); leave bitrate out, the LDF sets it",
            channel.bitrate, ldf.speed_bps
        );
        return Err(("bitrate", text));
    }
    channel.bitrate = ldf.speed_bps;
    lin.ldf = Some(path);
    lin.schedule = schedule;
    lin.frames = frames(&ldf);
    lin.event_triggered = event_triggered(&ldf, &shown)?;
    lin.sporadic = ldf
        .sporadic_frames
        .iter()
        .map(|s| LinSporadicConfig { name: s.name.clone(), frames: ids(&ldf, &s.frames) })
        .collect();
    Ok(())
}

/// A schedule table's entries as slots: an unconditional or event-triggered
/// frame's by its identifier, a sporadic frame's by its name.
fn slots(ldf: &Ldf, table: &ScheduleTable, shown: &str) -> Result<Vec<LinSlotConfig>, (&'static str, String)> {
    let mut slots = Vec::with_capacity(table.entries.len());
    for entry in &table.entries {
        if entry.delay_us % 1000 != 0 {
            let text = format!(
                "{shown}: line {}, column {}: '{}' in schedule table '{}' has delay {}.{:03} ms; the hub's schedule runs in whole milliseconds",
                entry.pos.line,
                entry.pos.column,
                entry.frame,
                table.name,
                entry.delay_us / 1000,
                entry.delay_us % 1000
            );
            return Err(("lin.ldf", text));
        }
        // fieldhub-ldf made sure every entry names a frame of one kind.
        let (id, sporadic) = match (ldf.frame(&entry.frame), ldf.event_triggered(&entry.frame)) {
            (Some(frame), _) => (Some(frame.id), None),
            (None, Some(event)) => (Some(event.id), None),
            (None, None) => (None, Some(entry.frame.clone())),
        };
        slots.push(LinSlotConfig { id, sporadic, delay_ms: entry.delay_us / 1000 });
    }
    Ok(slots)
}

/// The identifiers of frames named `names` (checked to exist).
fn ids(ldf: &Ldf, names: &[String]) -> Vec<u8> {
    names.iter().filter_map(|name| ldf.frame(name)).map(|f| f.id).collect()
}

/// The LDF's event-triggered frames, each with its collision-resolving
/// table's slots.
fn event_triggered(ldf: &Ldf, shown: &str) -> Result<Vec<LinEventTriggeredConfig>, (&'static str, String)> {
    let mut events = Vec::with_capacity(ldf.event_triggered_frames.len());
    for event in &ldf.event_triggered_frames {
        let collision_schedule = match event.collision_table.as_deref().and_then(|name| ldf.schedule_table(name)) {
            Some(table) => slots(ldf, table, shown)?,
            None => Vec::new(),
        };
        let frames = ids(ldf, &event.frames);
        events.push(LinEventTriggeredConfig { name: event.name.clone(), id: event.id, frames, collision_schedule });
    }
    Ok(events)
}

/// The LDF's frames as the bus checks them.
fn frames(ldf: &Ldf) -> Vec<LinFrameConfig> {
    let frame = |f: &fieldhub_ldf::Frame| LinFrameConfig {
        name: f.name.clone(),
        id: f.id,
        length: f.length,
        checksum: if ldf.classic_checksum(f) { LinChecksum::Classic } else { LinChecksum::Enhanced },
        publishers: match &f.publisher {
            Publisher::Node(node) => vec![node.clone()],
            Publisher::AnySlave => ldf.slaves.clone(),
        },
    };
    ldf.frames.iter().map(frame).collect()
}

/// Read and parse the LDF at `path`; the error says what was wrong.
fn read(path: &Path) -> Result<Ldf, String> {
    let file = std::fs::File::open(path).map_err(|e| format!("cannot open the LDF: {e}"))?;
    let mut bytes = Vec::new();
    let limit = fieldhub_ldf::MAX_LDF_BYTES as u64 + 1;
    file.take(limit).read_to_end(&mut bytes).map_err(|e| format!("cannot read the LDF: {e}"))?;
    let text = String::from_utf8(bytes).map_err(|e| {
        format!("byte {} is not UTF-8; an LDF is text (save it as UTF-8 or ASCII)", e.utf8_error().valid_up_to())
    })?;
    fieldhub_ldf::parse(&text).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::config::HubConfig;

    /// The LDFs of `crates/fieldhub-ldf/tests/files`.
    const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../fieldhub-ldf/tests/files");

    fn load(lin: &str) -> Result<HubConfig, String> {
        let text = format!("[[channel]]\nname = \"body\"\nprotocol = \"lin\"\n\n[channel.lin]\n{lin}");
        HubConfig::parse_in(&text, "t.toml", Path::new(DIR)).map_err(|e| e.to_string())
    }

    #[test]
    fn an_ldf_gives_the_channel_its_first_tables_schedule_its_frames_and_its_speed() {
        let config = load("ldf = \"body.ldf\"\n").unwrap();
        let channel = &config.channels[0];
        assert_eq!(channel.bitrate, 19_200);
        let lin = channel.lin.as_ref().unwrap();
        let slots: Vec<_> = lin.schedule.iter().map(|s| (s.id, s.delay_ms)).collect();
        assert_eq!(slots, [(Some(0x10), 10), (Some(0x11), 10), (Some(0x20), 15)]);
        let publishers: Vec<_> = lin.frames.iter().map(|f| (f.id, f.publishers.join(" "))).collect();
        let expected = [(0x10, "door"), (0x11, "seat"), (0x20, "BCM"), (0x3C, "BCM"), (0x3D, "door seat")];
        assert_eq!(publishers, expected.map(|(id, p)| (id, p.to_owned())));
        let diagnostics = load("ldf = \"body.ldf\"\nschedule_table = \"Diagnostics\"\n").unwrap();
        let slots: Vec<_> = diagnostics.channels[0].lin.as_ref().unwrap().schedule.iter().map(|s| s.id).collect();
        assert_eq!(slots, [Some(0x3C), Some(0x3D), Some(0x10)]);
    }

    #[test]
    fn an_ldfs_event_triggered_and_sporadic_frames_become_the_channels() {
        let config = load("ldf = \"events.ldf\"\n").unwrap();
        let lin = config.channels[0].lin.as_ref().unwrap();
        let slots: Vec<_> = lin.schedule.iter().map(|s| (s.id, s.sporadic.as_deref(), s.delay_ms)).collect();
        assert_eq!(slots, [(Some(0x30), None, 10), (Some(0x20), None, 10), (None, Some("SeatCommands"), 10)]);
        let event = &lin.event_triggered[0];
        assert_eq!((event.name.as_str(), event.id, event.frames.as_slice()), ("DoorEvents", 0x30, &[0x11, 0x12][..]));
        let resolving: Vec<_> = event.collision_schedule.iter().map(|s| (s.id, s.delay_ms)).collect();
        assert_eq!(resolving, [(Some(0x11), 10), (Some(0x12), 10)]);
        assert_eq!(
            (lin.sporadic[0].name.as_str(), lin.sporadic[0].frames.as_slice()),
            ("SeatCommands", &[0x21, 0x22][..])
        );
    }

    #[test]
    fn ldf_mistakes_name_the_configuration_key_and_the_files_line() {
        let err = load("ldf = \"body.ldf\"\nschedule_table = \"Night\"\n").unwrap_err();
        assert!(
            err.contains("t.toml: line 7: channel[0].lin.schedule_table: 'Night' is not a schedule table of"),
            "{err}"
        );
        assert!(err.contains("(its tables: Normal, Diagnostics)"), "{err}");
        let err = load("ldf = \"missing.ldf\"\n").unwrap_err();
        assert!(
            err.contains("line 6: channel[0].lin.ldf: ") && err.contains("missing.ldf: cannot open the LDF"),
            "{err}"
        );
        let err = load("ldf = \"body.ldf\"\nschedule = [{ id = 0x10, delay_ms = 10 }]\n").unwrap_err();
        assert!(err.contains("channel[0].lin.schedule: the schedule and frames come from the LDF"), "{err}");
        let err = load("schedule_table = \"Normal\"\nschedule = [{ id = 0x10, delay_ms = 10 }]\n").unwrap_err();
        assert!(err.contains("lin.schedule_table: names a table of an LDF; add ldf"), "{err}");
        let text =
            "[[channel]]\nname = \"body\"\nprotocol = \"lin\"\nbitrate = 9600\n\n[channel.lin]\nldf = \"body.ldf\"\n";
        let err = HubConfig::parse_in(text, "t.toml", Path::new(DIR)).unwrap_err().to_string();
        assert!(err.contains("line 4: channel[0].bitrate: 9600 bit/s differs from LIN_speed"), "{err}");
    }
}
