//! `fieldhub rbs FILE.dbc --channel can0 [--nodes A,B | --except DUT]`: a
//! rest-bus simulation of a DBC's nodes on a running hub, for as long as
//! the command runs (`docs/rest-bus.md`).
//!
//! The hub runs it (`POST /api/v1/rbs/sims`), not this process: a message's
//! cycles are jobs on the bus's own time, exact in real time and
//! deterministic in virtual time, which no client could time over a
//! connection. This command sends the DBC's text and the rules, waits for
//! SIGINT or SIGTERM, and removes the simulation again
//! (`DELETE /api/v1/rbs/sims/{sim}`). It ends by itself, with an error,
//! when the simulation or the hub is gone.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde_json::{json, Value};
use signal_hook::consts::{SIGINT, SIGTERM};

use crate::ctl::call;
use crate::HubSelect;

/// How often it looks whether its simulation still runs.
const WATCH: Duration = Duration::from_secs(1);

/// How often it looks for SIGINT or SIGTERM.
const LOOK: Duration = Duration::from_millis(100);

#[derive(clap::Args)]
pub struct RbsArgs {
    #[command(flatten)]
    hub: HubSelect,
    /// The DBC file.
    dbc: std::path::PathBuf,
    /// The channel the simulated nodes send on.
    #[arg(long, value_name = "NAME", default_value = "can0")]
    channel: String,
    /// Simulate only these nodes (comma-separated).
    #[arg(long, value_delimiter = ',', conflicts_with = "except")]
    nodes: Vec<String>,
    /// Simulate every node but these (comma-separated): the devices under test.
    #[arg(long, value_delimiter = ',')]
    except: Vec<String>,
    /// The cycle of messages the DBC gives no GenMsgCycleTime (without it they are sent on change).
    #[arg(long, value_name = "MS")]
    default_cycle_ms: Option<u64>,
    /// An alive counter: MESSAGE.SIGNAL, or MESSAGE.SIGNAL=MIN..MAX for its range (default: every value
    /// its bits hold).
    #[arg(long, value_name = "MESSAGE.SIGNAL[=MIN..MAX]", value_parser = parse_counter)]
    counter: Vec<Value>,
    /// A checksum byte: MESSAGE.SIGNAL=ALGORITHM, the algorithm xor, crc8-sae-j1850 or crc8h2f (a CRC-8 of
    /// your own polynomial: [[rbs.checksum]] in the hub's configuration).
    #[arg(long, value_name = "MESSAGE.SIGNAL=ALGORITHM", value_parser = parse_checksum)]
    checksum: Vec<Value>,
}

/// `MESSAGE.SIGNAL` into its two names.
fn message_signal(text: &str) -> Result<(&str, &str), String> {
    match text.split_once('.') {
        Some((message, signal)) if !message.is_empty() && !signal.is_empty() => Ok((message, signal)),
        _ => Err(format!("'{text}' is not MESSAGE.SIGNAL (as in EngineStatus.Counter)")),
    }
}

/// `--counter`: `{message, signal, min, max}`.
fn parse_counter(text: &str) -> Result<Value, String> {
    let (name, range) = match text.split_once('=') {
        Some((name, range)) => (name, Some(range)),
        None => (text, None),
    };
    let (message, signal) = message_signal(name)?;
    let mut counter = json!({ "message": message, "signal": signal });
    if let Some(range) = range {
        let bad = || format!("'{range}' is not a counter range MIN..MAX (as in 0..14)");
        let (min, max) = range.split_once("..").ok_or_else(bad)?;
        let min: u64 = min.trim().parse().map_err(|_| bad())?;
        let max: u64 = max.trim().parse().map_err(|_| bad())?;
        counter["min"] = json!(min);
        counter["max"] = json!(max);
    }
    Ok(counter)
}

/// `--checksum`: `{message, signal, algorithm}`.
fn parse_checksum(text: &str) -> Result<Value, String> {
    let Some((name, algorithm)) = text.split_once('=') else {
        return Err(format!("'{text}' is not MESSAGE.SIGNAL=ALGORITHM (as in EngineStatus.Checksum=crc8-sae-j1850)"));
    };
    let (message, signal) = message_signal(name)?;
    match algorithm {
        "xor" | "crc8-sae-j1850" | "crc8h2f" => {
            Ok(json!({ "message": message, "signal": signal, "algorithm": algorithm }))
        }
        other => Err(format!(
            "unknown checksum algorithm '{other}'; use xor, crc8-sae-j1850 or crc8h2f (a polynomial of your own: \
             [[rbs.checksum]] in the hub's configuration)"
        )),
    }
}

/// A DBC file's bytes as text: UTF-8 as it is, anything else read as
/// Latin-1, which agrees with Windows-1252 (what Vector's tools write) on
/// every byte but 0x80-0x9F — the units and comments of real databases
/// (°C, µs, umlauts) come through unchanged.
fn dbc_text(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).unwrap_or_else(|e| e.into_bytes().iter().map(|&b| char::from(b)).collect())
}

pub fn run(args: RbsArgs) -> anyhow::Result<()> {
    let base = args.hub.http_base()?;
    let path = &args.dbc;
    let bytes = std::fs::read(path).with_context(|| format!("fieldhub rbs: cannot read {}", path.display()))?;
    let name = path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned());
    let mut body = json!({
        "name": name,
        "dbc": dbc_text(bytes),
        "channel": args.channel,
        "counter": args.counter,
        "checksum": args.checksum,
    });
    if !args.nodes.is_empty() {
        body["nodes"] = json!(args.nodes);
    }
    if !args.except.is_empty() {
        body["except"] = json!(args.except);
    }
    if let Some(ms) = args.default_cycle_ms {
        body["default_cycle_ms"] = json!(ms);
    }
    // Installed before the simulation starts: a signal from here on removes it.
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [SIGINT, SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&stop)).context("cannot install signal handlers")?;
    }
    let sim = call(&base, "POST", "/api/v1/rbs/sims", Some(body)).context("fieldhub rbs")?;
    let number = sim["sim"].as_u64().context("fieldhub rbs: the hub's answer names no simulation")?;
    eprintln!("fieldhub rbs: {}", started(&sim));
    let gone = watch(&base, number, &stop);
    if let Err(why) = gone {
        bail!("fieldhub rbs: {why}");
    }
    call(&base, "DELETE", &format!("/api/v1/rbs/sims/{number}"), None)
        .context("fieldhub rbs: removing the simulation")?;
    eprintln!("fieldhub rbs: simulation {number} removed");
    Ok(())
}

/// One line on what runs: the nodes, messages and the simulation's number.
fn started(sim: &Value) -> String {
    let messages = sim["messages"].as_array().map_or(&[][..], Vec::as_slice);
    let mut nodes: Vec<&str> = Vec::new();
    for node in messages.iter().filter_map(|m| m["node"].as_str()) {
        if !nodes.contains(&node) {
            nodes.push(node);
        }
    }
    format!(
        "simulation {} of {}: {} ({} messages) on {}; `fieldhub ctl rbs --sim {}` changes it, Ctrl-C ends it",
        sim["sim"],
        sim["dbc"].as_str().unwrap_or("?"),
        if nodes.is_empty() { "no node".to_owned() } else { nodes.join(", ") },
        messages.len(),
        sim["channel"].as_str().unwrap_or("?"),
        sim["sim"],
    )
}

/// Wait for `stop`; an error when the simulation or the hub is gone first.
fn watch(base: &str, number: u64, stop: &AtomicBool) -> Result<(), String> {
    let mut next = Instant::now() + WATCH;
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(LOOK);
        if Instant::now() < next {
            continue;
        }
        next = Instant::now() + WATCH;
        let sims = call(base, "GET", "/api/v1/rbs", None).map_err(|e| format!("the hub is gone: {e:#}"))?;
        let running = sims.as_array().is_some_and(|sims| sims.iter().any(|s| s["sim"].as_u64() == Some(number)));
        if !running {
            return Err(format!("simulation {number} was removed (fieldhub ctl rbs remove, or another client)"));
        }
    }
    Ok(())
}
