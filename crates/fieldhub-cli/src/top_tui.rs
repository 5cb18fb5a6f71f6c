//! `fieldhub top` on a terminal: the full-screen view (ratatui on crossterm)
//! — a port on each channel shown feeds `top_model.rs`'s statistics from a
//! receiving thread, each refresh reads the hub's `STATS` and redraws
//! (`top_draw.rs`), a key sorts, and `q`, Esc or Ctrl-C end it.
//!
//! Invariant: the terminal is never left in raw mode or on the alternate
//! screen. ratatui's `init` restores it on a panic (its hook runs before
//! the previous one); [`Restore`] restores it on every return, error or
//! not; SIGTERM, SIGINT, SIGQUIT and SIGHUP set a flag the loop looks at
//! at least every [`SIGNAL_LOOK`] and end it as `q` does.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use fieldhub_client::{Client, PortConfig};
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};

use crate::top_draw::{self, ChannelLine, Screen};
use crate::top_model::{Sniffer, SortBy};

/// How long the loop waits for a key at most before it looks at the
/// signal flag and the receiving thread's error.
const SIGNAL_LOOK: Duration = Duration::from_millis(250);

/// How long the receiving thread waits for a frame before it looks whether
/// the view has ended.
const RECEIVE_LOOK: Duration = Duration::from_millis(250);

/// At most this many frames are counted under one lock of the statistics.
const BATCH: usize = 1024;

/// Puts the terminal back (cooked mode, the main screen, the cursor) when dropped.
struct Restore;

impl Drop for Restore {
    fn drop(&mut self) {
        ratatui::restore();
    }
}

/// What the view was asked for.
pub struct View {
    pub interval: Duration,
    pub sort: SortBy,
    /// The channels shown, in order.
    pub channels: Vec<String>,
}

/// Run the view on the terminal until a key or a signal ends it.
pub fn run(client: &Client, view: View) -> anyhow::Result<()> {
    let config = PortConfig { fd: true, ..Default::default() };
    let mut channel_of = HashMap::new();
    for (index, name) in view.channels.iter().enumerate() {
        let port = client.open_port_with(name, &config).with_context(|| format!("cannot listen on '{name}'"))?;
        channel_of.insert(port.handle, index);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let signals = signal_hook::consts::TERM_SIGNALS.iter().copied();
    // The terminal closed: no one sees the screen, but the shell is left as it was.
    #[cfg(unix)]
    let signals = signals.chain([signal_hook::consts::SIGHUP]);
    for signal in signals {
        signal_hook::flag::register(signal, Arc::clone(&stop)).context("cannot install signal handlers")?;
    }
    let sniffer = Mutex::new(Sniffer::new(view.channels.len()));
    let ended = AtomicBool::new(false);
    let failed: Mutex<Option<anyhow::Error>> = Mutex::new(None);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            if let Err(e) = receive(client, &channel_of, &sniffer, &ended) {
                *lock(&failed) = Some(e);
            }
        });
        let result = show(client, &view, &sniffer, &stop, &failed);
        ended.store(true, Ordering::Relaxed);
        result
    })
}

/// The receiving thread: every frame of the view's ports into the statistics.
fn receive(
    client: &Client,
    channel_of: &HashMap<u16, usize>,
    sniffer: &Mutex<Sniffer>,
    ended: &AtomicBool,
) -> anyhow::Result<()> {
    while !ended.load(Ordering::Relaxed) {
        let Some(first) = client.recv(Some(RECEIVE_LOOK)).context("lost the hub")? else {
            continue;
        };
        let mut sniffer = lock(sniffer);
        let mut next = Some(first);
        let mut counted = 0;
        while let Some(received) = next {
            if let Some(&channel) = channel_of.get(&received.port) {
                sniffer.record(channel, &received.frame, received.meta.timestamp_ns);
            }
            counted += 1;
            next = if counted < BATCH { client.try_recv().context("lost the hub")? } else { None };
        }
    }
    Ok(())
}

/// The screen's loop: refresh every interval, redraw on a key or a resize.
fn show(
    client: &Client,
    view: &View,
    sniffer: &Mutex<Sniffer>,
    stop: &AtomicBool,
    failed: &Mutex<Option<anyhow::Error>>,
) -> anyhow::Result<()> {
    let mut terminal = ratatui::try_init().context("cannot take the terminal for the full-screen view")?;
    let _restore = Restore;
    let mut sort = view.sort;
    let mut previous: HashMap<String, u64> = HashMap::new();
    let mut refreshed = Instant::now();
    let mut next = refreshed;
    let mut lines = Vec::new();
    let mut hub = String::new();
    loop {
        if stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        if let Some(e) = lock(failed).take() {
            return Err(e);
        }
        let mut redraw = false;
        let now = Instant::now();
        if now >= next {
            let stats = client.stats().context("cannot read the hub's STATS")?;
            let seconds = now.duration_since(refreshed).as_secs_f64().max(1e-9);
            let mut counts = lock(sniffer);
            counts.refresh(now.duration_since(refreshed));
            lines.clear();
            for (index, name) in view.channels.iter().enumerate() {
                let Some(channel) = stats.channels.iter().find(|c| &c.name == name) else {
                    anyhow::bail!("the hub no longer has channel '{name}'");
                };
                let rate = previous
                    .insert(name.clone(), channel.frames)
                    .map(|before| channel.frames.saturating_sub(before) as f64 / seconds);
                lines.push(ChannelLine::of(&stats, channel, rate, counts.error_frames(index)));
            }
            hub = stats.hub;
            refreshed = now;
            next = now + view.interval;
            redraw = true;
        }
        if redraw {
            draw(&mut terminal, &hub, view, &lines, sniffer, sort)?;
        }
        if event::poll(next.saturating_duration_since(Instant::now()).min(SIGNAL_LOOK))? {
            match event::read()? {
                Event::Key(key) if key.kind == KeyEventKind::Press => match key.code {
                    KeyCode::Char('q') | KeyCode::Esc => return Ok(()),
                    KeyCode::Char('c') if key.modifiers.contains(KeyModifiers::CONTROL) => return Ok(()),
                    KeyCode::Char(c) => {
                        if let Some(by) = SortBy::of_key(c.to_ascii_lowercase()) {
                            sort = by;
                            draw(&mut terminal, &hub, view, &lines, sniffer, sort)?;
                        }
                    }
                    _ => {}
                },
                Event::Resize(..) => draw(&mut terminal, &hub, view, &lines, sniffer, sort)?,
                _ => {}
            }
        }
    }
}

fn draw(
    terminal: &mut ratatui::DefaultTerminal,
    hub: &str,
    view: &View,
    lines: &[ChannelLine],
    sniffer: &Mutex<Sniffer>,
    sort: SortBy,
) -> anyhow::Result<()> {
    let sniffer = lock(sniffer);
    let screen = Screen {
        hub,
        interval_ms: view.interval.as_millis() as u64,
        names: &view.channels,
        channels: lines,
        sniffer: &sniffer,
        sort,
    };
    terminal.draw(|frame| top_draw::draw(frame, &screen)).context("cannot draw on the terminal")?;
    Ok(())
}

/// A lock whose holder panicked leaves plain figures behind; keep going.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
