//! `fieldhub ctl rbs`: the hub's rest-bus simulations (`docs/rest-bus.md`)
//! by message and signal name, each subcommand one call of `/api/v1/rbs`:
//! list the simulated messages with their signals' values, set or ramp
//! signals, stop or start a message or a whole node, stick its alive counter, make its
//! checksum wrong, remove a simulation. The hub checks every value before it stores any, so a refused
//! `set` changes nothing.

use serde_json::{json, Value};

#[derive(clap::Args)]
pub struct RbsArgs {
    /// Which simulation a change (or `remove`) is for: the `[[rbs]]` table's place in the configuration, from 0
    /// (`list` shows every simulation).
    #[arg(long, default_value = "0", global = true)]
    sim: usize,
    #[command(subcommand)]
    operation: Option<RbsOperation>,
}

#[derive(clap::Subcommand)]
enum RbsOperation {
    /// Every simulated message with its signals' values, frames sent and faults (the default).
    List,
    /// Set signals by name to physical values (factor and offset applied), sent from the message's next cycle.
    Set {
        message: String,
        /// SIGNAL=VALUE, as in Rpm=1000.
        #[arg(required = true, value_parser = parse_assignment)]
        values: Vec<(String, f64)>,
    },
    /// Ramp signals from the value they have at the message's next cycle to physical values, linearly on
    /// bus time, each cycle sending the ramp's value at its time.
    Ramp {
        message: String,
        /// SIGNAL=TARGET, as in Rpm=3000.
        #[arg(required = true, value_parser = parse_assignment)]
        values: Vec<(String, f64)>,
        /// How long the ramp takes, in bus time (`2s`, `500ms`).
        #[arg(long, value_parser = super::parse_duration_ns)]
        over: u64,
    },
    /// Stop sending a message.
    Stop { message: String },
    /// Send a stopped message again.
    Start { message: String },
    /// Stop every message of a simulated node (its port stays on the channel; `ctl unplug NODE` pulls it).
    StopNode { node: String },
    /// Send every message of a simulated node again.
    StartNode { node: String },
    /// Make a message's alive counter repeat its value (`stuck`) or count again (`running`).
    Counter { message: String, state: CounterState },
    /// Send a message's checksum inverted (`wrong`) or right again (`right`).
    Checksum { message: String, state: ChecksumState },
    /// Remove the simulation --sim names (one `fieldhub rbs` started, say): its nodes leave the channel.
    Remove,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum CounterState {
    Stuck,
    Running,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum ChecksumState {
    Wrong,
    Right,
}

/// `SIGNAL=VALUE`.
fn parse_assignment(text: &str) -> Result<(String, f64), String> {
    let Some((signal, value)) = text.split_once('=') else {
        return Err(format!("'{text}' is not SIGNAL=VALUE (as in Rpm=1000)"));
    };
    match value.trim().parse::<f64>() {
        Ok(number) if number.is_finite() && !signal.is_empty() => Ok((signal.to_owned(), number)),
        _ => Err(format!("'{text}' is not SIGNAL=VALUE with a number for VALUE (as in Rpm=1000)")),
    }
}

/// The API call of `args`: (method, path, body).
pub fn request(args: RbsArgs) -> (&'static str, String, Option<Value>) {
    let sim = args.sim;
    let change = |message: String, (key, value): (&str, Value)| {
        let body = json!({ "sim": sim, "message": message, key: value });
        ("POST", "/api/v1/rbs".to_owned(), Some(body))
    };
    match args.operation.unwrap_or(RbsOperation::List) {
        RbsOperation::List => ("GET", "/api/v1/rbs".to_owned(), None),
        RbsOperation::Set { message, values } => {
            let set: serde_json::Map<String, Value> = values.into_iter().map(|(s, v)| (s, json!(v))).collect();
            change(message, ("set", Value::Object(set)))
        }
        RbsOperation::Ramp { message, values, over } => {
            let ms = over as f64 / 1e6;
            let ramp: serde_json::Map<String, Value> =
                values.into_iter().map(|(s, to)| (s, json!({ "to": to, "ms": ms }))).collect();
            change(message, ("ramp", Value::Object(ramp)))
        }
        RbsOperation::StopNode { node } => {
            ("POST", "/api/v1/rbs".to_owned(), Some(json!({ "sim": sim, "node": node, "enabled": false })))
        }
        RbsOperation::StartNode { node } => {
            ("POST", "/api/v1/rbs".to_owned(), Some(json!({ "sim": sim, "node": node, "enabled": true })))
        }
        RbsOperation::Remove => ("DELETE", format!("/api/v1/rbs/sims/{sim}"), None),
        RbsOperation::Stop { message } => change(message, ("enabled", json!(false))),
        RbsOperation::Start { message } => change(message, ("enabled", json!(true))),
        RbsOperation::Counter { message, state } => {
            change(message, ("counter_stuck", json!(matches!(state, CounterState::Stuck))))
        }
        RbsOperation::Checksum { message, state } => {
            change(message, ("checksum_wrong", json!(matches!(state, ChecksumState::Wrong))))
        }
    }
}
