//! Checks of `[channel.lin]`: the schedule, the frames, the event-triggered
//! and sporadic frames and how they refer to each other. Each error names
//! the key at fault and what to write instead; a configuration that passes
//! makes a table (`lin_table`) whose every reference resolves.

use crate::config::{LinConfig, LinSlotConfig};

/// Longest slot accepted: 1,000 s, as for the other rules' turns.
const MAX_DELAY_MS: u64 = 1_000_000;

type Checked = Result<(), (&'static str, String)>;

fn id_ok(id: u8) -> bool {
    id <= fieldhub_proto::lin::MAX_ID
}

/// Check `[channel.lin]`; the error names the key.
pub(super) fn check(config: &LinConfig) -> Checked {
    if config.ldf.is_some() && config.frames.is_empty() {
        return Err((
            "lin.ldf",
            "an LDF is read only from the hub's configuration file; through the control API give schedule and frames"
                .into(),
        ));
    }
    if config.schedule.is_empty() {
        return Err((
            "lin.schedule",
            "the master needs at least one slot: schedule = [{ id = 0x10, delay_ms = 10 }, …]".into(),
        ));
    }
    for (n, slot) in config.schedule.iter().enumerate() {
        check_slot(config, slot, "lin.schedule", &format!("slot {}", n + 1), true)?;
    }
    check_event_triggered(config)?;
    check_sporadic(config)?;
    check_sleep(config)?;
    check_frames(config)
}

/// The sleep and wake-up timing: where LIN 2.1 §2.6 gives a range, a value
/// in it.
fn check_sleep(config: &LinConfig) -> Checked {
    let idle = LinConfig::MIN_IDLE_TIMEOUT_MS..=LinConfig::MAX_IDLE_TIMEOUT_MS;
    if !idle.contains(&config.idle_timeout_ms) {
        let text = format!(
            "{} ms is outside LIN 2.1's bus-idle timeout of 4 to 10 s; give idle_timeout_ms from 4000 to 10000",
            config.idle_timeout_ms
        );
        return Err(("lin.idle_timeout_ms", text));
    }
    if !LinConfig::WAKE_RETRY_RANGE_MS.contains(&config.wake_retry_ms) {
        let text = format!(
            "{} ms is outside LIN 2.1's 150 to 250 ms a waker waits for a header; give wake_retry_ms from 150 to 250",
            config.wake_retry_ms
        );
        return Err(("lin.wake_retry_ms", text));
    }
    if config.wake_delay_ms > MAX_DELAY_MS {
        let text = format!("{} ms is over the longest wake-up delay, {MAX_DELAY_MS} ms", config.wake_delay_ms);
        return Err(("lin.wake_delay_ms", text));
    }
    Ok(())
}

/// One slot of the schedule (`sporadic_ok`) or of a collision schedule.
fn check_slot(config: &LinConfig, slot: &LinSlotConfig, key: &'static str, at: &str, sporadic_ok: bool) -> Checked {
    match (slot.id, &slot.sporadic) {
        (Some(_), Some(_)) | (None, None) => {
            let text = format!("{at}: give either id (a frame identifier) or sporadic (a sporadic frame's name)");
            return Err((key, text));
        }
        (Some(id), None) if !id_ok(id) => return Err((key, format!("{at}: id 0x{id:02X} is over 0x3F (6 bits)"))),
        (Some(id), None) if !sporadic_ok && config.event_triggered.iter().any(|e| e.id == id) => {
            let text = format!("{at}: 0x{id:02X} is event-triggered; a collision schedule polls unconditional frames");
            return Err((key, text));
        }
        (None, Some(_)) if !sporadic_ok => {
            return Err((key, format!("{at}: a collision schedule polls unconditional frames, not sporadic ones")));
        }
        (None, Some(name)) if !config.sporadic.iter().any(|s| &s.name == name) => {
            let known: Vec<&str> = config.sporadic.iter().map(|s| s.name.as_str()).collect();
            let text = format!("{at}: no sporadic frame is named '{name}' (lin.sporadic: {})", known.join(", "));
            return Err((key, text));
        }
        _ => {}
    }
    if slot.delay_ms == 0 || slot.delay_ms > MAX_DELAY_MS {
        return Err((key, format!("{at}: delay_ms {} is not 1..={MAX_DELAY_MS}", slot.delay_ms)));
    }
    Ok(())
}

/// Frames an event-triggered or sporadic frame carries: valid, each once,
/// none of them event-triggered.
fn check_carried(config: &LinConfig, frames: &[u8], key: &'static str, at: &str) -> Checked {
    if frames.is_empty() {
        return Err((key, format!("{at}: frames is empty; list the unconditional frames it carries")));
    }
    for (n, &id) in frames.iter().enumerate() {
        if !id_ok(id) {
            return Err((key, format!("{at}: frame 0x{id:02X} is over 0x3F (6 bits)")));
        }
        if frames[..n].contains(&id) {
            return Err((key, format!("{at}: frame 0x{id:02X} is listed twice")));
        }
        if config.event_triggered.iter().any(|e| e.id == id) {
            return Err((key, format!("{at}: 0x{id:02X} is event-triggered; list unconditional frames")));
        }
    }
    Ok(())
}

fn check_event_triggered(config: &LinConfig) -> Checked {
    let key = "lin.event_triggered";
    for (n, et) in config.event_triggered.iter().enumerate() {
        let at = format!("event-triggered frame {} ({})", n + 1, et.name);
        if !id_ok(et.id) {
            return Err((key, format!("{at}: id 0x{:02X} is over 0x3F (6 bits)", et.id)));
        }
        if config.event_triggered[..n].iter().any(|other| other.id == et.id) {
            return Err((key, format!("{at}: id 0x{:02X} has two event-triggered frames", et.id)));
        }
        if config.frames.iter().any(|f| f.id == et.id) {
            return Err((key, format!("{at}: id 0x{:02X} is also a frame of lin.frames", et.id)));
        }
        check_carried(config, &et.frames, key, &at)?;
        if let Some(other) = config.event_triggered[..n].iter().find(|o| o.frames.iter().any(|f| et.frames.contains(f)))
        {
            return Err((key, format!("{at}: carries a frame event-triggered frame {} carries too", other.name)));
        }
        for (k, slot) in et.collision_schedule.iter().enumerate() {
            check_slot(config, slot, key, &format!("{at}: collision_schedule slot {}", k + 1), false)?;
        }
    }
    Ok(())
}

fn check_sporadic(config: &LinConfig) -> Checked {
    let key = "lin.sporadic";
    for (n, sporadic) in config.sporadic.iter().enumerate() {
        let at = format!("sporadic frame {} ({})", n + 1, sporadic.name);
        if config.sporadic[..n].iter().any(|other| other.name == sporadic.name) {
            return Err((key, format!("{at}: two sporadic frames have this name")));
        }
        check_carried(config, &sporadic.frames, key, &at)?;
    }
    Ok(())
}

/// Check `[channel.lin] frames`: each once, valid, and one for every
/// identifier a slot may carry a response for.
fn check_frames(config: &LinConfig) -> Checked {
    let key = "lin.frames";
    for (n, frame) in config.frames.iter().enumerate() {
        let at = format!("frame {} ({})", n + 1, frame.name);
        if !id_ok(frame.id) {
            return Err((key, format!("{at}: id 0x{:02X} is over 0x3F (6 bits)", frame.id)));
        }
        if !(1..=8).contains(&frame.length) {
            return Err((key, format!("{at}: length {} is not 1..=8 bytes", frame.length)));
        }
        if frame.publishers.is_empty() {
            return Err((key, format!("{at}: no publishers; name the node (port) that sends its response")));
        }
        if config.frames[..n].iter().any(|other| other.id == frame.id) {
            return Err((key, format!("{at}: id 0x{:02X} has two frames", frame.id)));
        }
    }
    if config.frames.is_empty() {
        return Ok(());
    }
    let event_triggered = config.event_triggered.iter();
    let unconditional = config.schedule.iter().chain(event_triggered.clone().flat_map(|e| &e.collision_schedule));
    let carried = unconditional
        .filter_map(|slot| slot.id)
        .filter(|id| !config.event_triggered.iter().any(|e| e.id == *id))
        .chain(event_triggered.flat_map(|e| e.frames.iter().copied()))
        .chain(config.sporadic.iter().flat_map(|s| s.frames.iter().copied()));
    for id in carried {
        if !config.frames.iter().any(|f| f.id == id) {
            return Err((key, format!("the schedule sends 0x{id:02X}, which no frame defines")));
        }
    }
    Ok(())
}
