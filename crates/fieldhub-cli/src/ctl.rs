//! `fieldhub ctl`: the hub's HTTP control API from the command line. Every
//! subcommand is one API call; the answer is printed as JSON.

mod rbs;

use anyhow::{bail, Context};
use serde_json::{json, Value};

use crate::HubSelect;

/// Every bit of a 29-bit identifier: a mask that matches one identifier.
const ALL_ID_BITS: u32 = 0x1FFF_FFFF;

#[derive(clap::Args)]
pub struct CtlArgs {
    #[command(flatten)]
    hub: HubSelect,
    #[command(subcommand)]
    operation: Operation,
}

#[derive(clap::Subcommand)]
enum Operation {
    /// Statistics of every channel, port and route.
    Stats,
    /// Channels with their configuration and ports.
    Channels,
    /// Open ports with channel, plugged state, segment and counters.
    Ports,
    /// Gateway routes.
    Routes,
    /// CAN↔LIN gateways (`[[gateway]]`): frames carried, refused by reason.
    Gateways,
    /// Add a CAN↔LIN gateway while the hub runs, or remove one.
    #[command(subcommand)]
    Gateway(GatewayOperation),
    /// Plug a port's cable into a channel (moves it from its current one).
    Plug {
        /// The port's name (`ctl ports`).
        port: String,
        /// The channel to plug it into.
        channel: String,
    },
    /// Pull a port's cable: it neither sends nor receives until plugged again.
    Unplug { port: String },
    /// Cut a channel: the given ports form a segment isolated from the others.
    Cut {
        channel: String,
        #[arg(required = true)]
        ports: Vec<String>,
    },
    /// Join a cut channel again.
    Repair { channel: String },
    /// Add a gateway route from one channel to another (like can-gw).
    Bridge {
        /// The channel whose frames the route takes.
        from: String,
        /// The channel the route sends them on.
        to: String,
        /// Identifier to match (hex): alone, exactly that identifier; with
        /// --mask, the bits the mask selects. Neither: every frame.
        #[arg(long, value_parser = parse_hex)]
        id: Option<u32>,
        /// Mask (hex): a frame matches when its identifier & mask equals
        /// --id & mask (0 matches every frame).
        #[arg(long, value_parser = parse_hex)]
        mask: Option<u32>,
        /// Only 29-bit identifiers.
        #[arg(long, conflicts_with = "standard")]
        extended: bool,
        /// Only 11-bit identifiers.
        #[arg(long)]
        standard: bool,
        /// Replace the identifier of routed frames (hex).
        #[arg(long, value_parser = parse_hex)]
        rewrite_id: Option<u32>,
        /// Gateway hops a frame may already have made.
        #[arg(long, default_value = "1")]
        hop_limit: u8,
    },
    /// Remove a gateway route by its number.
    Unbridge {
        /// The route's number (`route` in `ctl routes`).
        route: u32,
    },
    /// Short a channel: the bus is stuck dominant until `unshort`.
    Short { channel: String },
    /// Clear a short.
    Unshort { channel: String },
    /// A LIN channel's sleep and wake-up: the master's go-to-sleep command
    /// (`sleep`) or its wake-up pulse (`wake`).
    #[command(subcommand)]
    Lin(LinOperation),
    /// Force a port's controller into error_active, error_passive or bus_off.
    Force { port: String, state: String },
    /// Fault rules: add (JSON, see `docs/control.md`), list, remove.
    #[command(subcommand)]
    Fault(FaultOperation),
    /// Recordings the hub writes: start, stop, list.
    #[command(subcommand)]
    Record(RecordOperation),
    /// Connected clients and their ports.
    Clients,
    /// Channels: add, remove, or change bitrate/timing.
    #[command(subcommand)]
    Channel(ChannelOperation),
    /// Bus time; in virtual time: pause, resume, single-step, run until a time.
    ///
    /// Shows the bus time, each participant, the hold on time and the real-time factor:
    /// bus time advanced per wall-clock second in which it was free to move (waits while
    /// it was held — paused, or nobody there to step it — do not count).
    Time {
        #[command(subcommand)]
        operation: Option<TimeOperation>,
    },
    /// Rest-bus simulations (`[[rbs]]`, docs/rest-bus.md): list messages and signal values; set signals,
    /// stop or start a message, stick its counter, make its checksum wrong.
    Rbs(rbs::RbsArgs),
}

#[derive(clap::Subcommand)]
enum TimeOperation {
    /// Bus time, participants, the hold on time and the real-time factor (the default).
    Show,
    /// Hold bus time where it is.
    Pause,
    /// Let bus time run as far as the participants go.
    Resume,
    /// Advance once (to the smallest boundary the participants announced), then hold.
    Step,
    /// Run up to a bus time (`60s`, `1500ms`, `250us`, `1000ns`), then hold.
    RunUntil {
        #[arg(value_parser = parse_duration_ns)]
        time: u64,
    },
}

#[derive(clap::Subcommand)]
enum ChannelOperation {
    /// Create a channel.
    Add {
        name: String,
        /// can or canfd.
        #[arg(long, default_value = "can")]
        protocol: String,
        #[command(flatten)]
        settings: ChannelSettings,
    },
    /// Remove a channel no port or route uses.
    Remove { name: String },
    /// Change bitrate, data bitrate or timing of a channel.
    Set {
        name: String,
        #[command(flatten)]
        settings: ChannelSettings,
    },
}

/// Channel settings a command may give; absent ones are left out of the request.
#[derive(clap::Args)]
struct ChannelSettings {
    /// Nominal bitrate in bit/s.
    #[arg(long)]
    bitrate: Option<u32>,
    /// CAN FD data-phase bitrate in bit/s.
    #[arg(long)]
    data_bitrate: Option<u32>,
    /// ideal or timed.
    #[arg(long)]
    timing: Option<String>,
}

impl ChannelSettings {
    /// The given settings as a JSON object.
    fn json(&self) -> Value {
        let mut body = json!({});
        if let Some(bitrate) = self.bitrate {
            body["bitrate"] = json!(bitrate);
        }
        if let Some(rate) = self.data_bitrate {
            body["data_bitrate"] = json!(rate);
        }
        if let Some(timing) = &self.timing {
            body["timing"] = json!(timing);
        }
        body
    }
}

#[derive(clap::Subcommand)]
enum RecordOperation {
    /// Start recording CHANNELS (all when none) to PATH, written by the hub inside its recordings directory
    /// (`[hub] recordings_dir`, `hub --recordings-dir`; PATH is relative to it) (.log: candump, .asc: Vector ASC).
    Start { path: String, channels: Vec<String> },
    /// Stop a recording and finish its file.
    Stop { id: u32 },
    /// Recordings in progress.
    List,
}

#[derive(clap::Subcommand)]
enum LinOperation {
    /// The master sends the go-to-sleep command (0x3C 00 FF…) at the next
    /// slot boundary; the channel sleeps from its end.
    Sleep { channel: String },
    /// The master wakes the sleeping channel with a wake-up pulse; its
    /// schedule resumes after the channel's wake_delay_ms.
    Wake { channel: String },
}

#[derive(clap::Subcommand)]
enum GatewayOperation {
    /// Map one frame between a CAN and a LIN channel, as a `[[gateway]]` table
    /// does (docs/buses.md): the direction follows from the channels. Refused,
    /// naming the key, where the configuration's check would refuse it.
    Add {
        /// The channel the frames are read on.
        from: String,
        /// The channel the mapped frames are sent on.
        to: String,
        /// The CAN frame's identifier (hex).
        #[arg(long, value_parser = parse_hex)]
        can_id: u32,
        /// The CAN identifier is a 29-bit one.
        #[arg(long)]
        extended: bool,
        /// The LIN frame's identifier (hex, 0..3F).
        #[arg(long, value_parser = parse_hex)]
        lin_id: u32,
        /// Into LIN: the node the gateway publishes as (one of the frame's publishers).
        #[arg(long)]
        node: Option<String>,
    },
    /// Remove a gateway by its number (`gateway` in `ctl gateways`); frames it
    /// had queued and not yet sent are not sent (counted in `dropped`).
    Remove {
        /// The gateway's number.
        gateway: u32,
    },
}

#[derive(clap::Subcommand)]
enum FaultOperation {
    /// Add a rule, e.g. '{"channel":"can0","at":"bus","id":256,"mask":2047,"action":{"type":"drop"},"probability":0.1,"seed":42}'
    Add { rule: String },
    /// List rules with their matched/applied counters.
    List,
    /// Remove a rule by id.
    Remove { id: u32 },
}

/// A bus time with its unit (`60s`, `1.5ms`, `250us`, `1000ns`), in nanoseconds.
fn parse_duration_ns(text: &str) -> Result<u64, String> {
    let units = [("ns", 1.0), ("us", 1e3), ("ms", 1e6), ("s", 1e9)];
    let (number, scale) = units
        .iter()
        .find_map(|&(unit, scale)| text.strip_suffix(unit).map(|n| (n, scale)))
        .ok_or_else(|| format!("'{text}' needs a unit: s, ms, us or ns (as in 60s)"))?;
    let value: f64 = number.parse().map_err(|_| format!("'{text}' is not a number with a unit (as in 60s)"))?;
    let ns = (value * scale).round();
    if !(0.0..=u64::MAX as f64).contains(&ns) {
        return Err(format!("'{text}' is not a bus time"));
    }
    Ok(ns as u64)
}

fn parse_hex(text: &str) -> Result<u32, String> {
    u32::from_str_radix(text.trim_start_matches("0x"), 16).map_err(|_| format!("'{text}' is not a hex number"))
}

pub fn run(args: CtlArgs) -> anyhow::Result<()> {
    let base = args.hub.http_base()?;
    let (method, path, body) = match args.operation {
        Operation::Stats => ("GET", "/api/v1/stats".to_owned(), None),
        Operation::Channels => ("GET", "/api/v1/channels".to_owned(), None),
        Operation::Ports => ("GET", "/api/v1/ports".to_owned(), None),
        Operation::Routes => ("GET", "/api/v1/routes".to_owned(), None),
        Operation::Gateways => ("GET", "/api/v1/gateways".to_owned(), None),
        Operation::Gateway(GatewayOperation::Add { from, to, can_id, extended, lin_id, node }) => {
            let gateway = json!({ "from": from, "to": to, "can_id": can_id, "extended": extended,
                                  "lin_id": lin_id, "node": node });
            ("POST", "/api/v1/gateways".to_owned(), Some(gateway))
        }
        Operation::Gateway(GatewayOperation::Remove { gateway }) => {
            ("DELETE", format!("/api/v1/gateways/{gateway}"), None)
        }
        Operation::Plug { port, channel } => {
            ("POST", format!("/api/v1/ports/{port}/plug"), Some(json!({ "channel": channel })))
        }
        Operation::Unplug { port } => ("POST", format!("/api/v1/ports/{port}/unplug"), None),
        Operation::Cut { channel, ports } => {
            ("POST", format!("/api/v1/channels/{channel}/cut"), Some(json!({ "ports": ports })))
        }
        Operation::Repair { channel } => ("POST", format!("/api/v1/channels/{channel}/repair"), None),
        Operation::Bridge { from, to, id, mask, extended, standard, rewrite_id, hop_limit } => {
            let only = if extended {
                Some(true)
            } else if standard {
                Some(false)
            } else {
                None
            };
            // An identifier without a mask means that identifier, as in
            // candump's `ID:MASK` with all identifier bits.
            let mask = mask.unwrap_or(if id.is_some() { ALL_ID_BITS } else { 0 });
            let id = id.unwrap_or(0);
            let route = json!({ "from": from, "to": to, "id": id, "mask": mask, "extended": only,
                                "rewrite_id": rewrite_id, "hop_limit": hop_limit });
            ("POST", "/api/v1/routes".to_owned(), Some(route))
        }
        Operation::Unbridge { route } => ("DELETE", format!("/api/v1/routes/{route}"), None),
        Operation::Short { channel } => ("POST", format!("/api/v1/channels/{channel}/short"), None),
        Operation::Unshort { channel } => ("POST", format!("/api/v1/channels/{channel}/unshort"), None),
        Operation::Lin(LinOperation::Sleep { channel }) => {
            ("POST", format!("/api/v1/channels/{channel}/lin/sleep"), None)
        }
        Operation::Lin(LinOperation::Wake { channel }) => {
            ("POST", format!("/api/v1/channels/{channel}/lin/wake"), None)
        }
        Operation::Force { port, state } => {
            ("POST", format!("/api/v1/ports/{port}/state"), Some(json!({ "state": state })))
        }
        Operation::Fault(FaultOperation::Add { rule }) => {
            let rule: Value = serde_json::from_str(&rule).context("the rule is not valid JSON")?;
            ("POST", "/api/v1/faults".to_owned(), Some(rule))
        }
        Operation::Fault(FaultOperation::List) => ("GET", "/api/v1/faults".to_owned(), None),
        Operation::Fault(FaultOperation::Remove { id }) => ("DELETE", format!("/api/v1/faults/{id}"), None),
        Operation::Record(RecordOperation::Start { path, channels }) => {
            ("POST", "/api/v1/recordings".to_owned(), Some(json!({ "path": path, "channels": channels })))
        }
        Operation::Record(RecordOperation::Stop { id }) => ("DELETE", format!("/api/v1/recordings/{id}"), None),
        Operation::Record(RecordOperation::List) => ("GET", "/api/v1/recordings".to_owned(), None),
        Operation::Clients => ("GET", "/api/v1/clients".to_owned(), None),
        Operation::Channel(ChannelOperation::Add { name, protocol, settings }) => {
            let mut body = settings.json();
            body["name"] = json!(name);
            body["protocol"] = json!(protocol);
            ("POST", "/api/v1/channels".to_owned(), Some(body))
        }
        Operation::Channel(ChannelOperation::Remove { name }) => ("DELETE", format!("/api/v1/channels/{name}"), None),
        Operation::Channel(ChannelOperation::Set { name, settings }) => {
            ("PATCH", format!("/api/v1/channels/{name}"), Some(settings.json()))
        }
        Operation::Time { operation } => {
            let action = match operation.unwrap_or(TimeOperation::Show) {
                TimeOperation::Show => None,
                TimeOperation::Pause => Some(json!({"action": "pause"})),
                TimeOperation::Resume => Some(json!({"action": "resume"})),
                TimeOperation::Step => Some(json!({"action": "step"})),
                TimeOperation::RunUntil { time } => Some(json!({"action": "run_until", "until_ns": time})),
            };
            (if action.is_some() { "POST" } else { "GET" }, "/api/v1/time".to_owned(), action)
        }
        Operation::Rbs(args) => rbs::request(args),
    };
    let answer = call(&base, method, &path, body)?;
    crate::output::outln!("{}", serde_json::to_string_pretty(&answer)?)
}

/// One API call; a 4xx answer becomes an error carrying the hub's message.
/// `https://` trusts and presents what the `FIELDHUB_TLS_*` variables name.
pub fn call(base: &str, method: &str, path: &str, body: Option<Value>) -> anyhow::Result<Value> {
    let agent = match base.strip_prefix("https://") {
        Some(_) => {
            let tls = fieldhub_client::tls::TlsOptions::default().or_environment();
            let config = tls.client_config().with_context(|| format!("TLS for the hub's control API at {base}"))?;
            ureq::AgentBuilder::new().tls_config(config).build()
        }
        None => ureq::agent(),
    };
    let mut request = agent.request(method, &format!("{base}{path}"));
    if let Some(token) = crate::hub_token()? {
        request = request.set("Authorization", &format!("Bearer {token}"));
    }
    let result = match body {
        Some(body) => request.send_json(body),
        None => request.call(),
    };
    // A fieldhub hub answers every request with JSON, its errors with an
    // `error` text; anything else is another program on that address.
    let not_a_hub = |what: String| {
        anyhow::anyhow!(
            "something that is not a fieldhub hub answers at {base} ({what} to {method} {path}); \
             give --hub the address of a fieldhub hub"
        )
    };
    match result {
        Ok(response) => {
            let status = response.status();
            response.into_json::<Value>().map_err(|_| not_a_hub(format!("an answer {status} that is not JSON")))
        }
        Err(ureq::Error::Status(code, response)) => {
            let text = response.into_json::<Value>().ok().and_then(|v| v["error"].as_str().map(str::to_owned));
            match text {
                Some(text) => bail!("{method} {path}: {code}: {text}"),
                None => Err(not_a_hub(format!("{code} without a fieldhub error"))),
            }
        }
        Err(e) => match tls_failure(&e, base) {
            Some(tls) => Err(tls).with_context(|| format!("TLS with the hub's control API at {base}")),
            None => match e.kind() {
                ureq::ErrorKind::ConnectionFailed | ureq::ErrorKind::Dns => Err(e).with_context(|| {
                    format!("cannot reach the hub's control API at {base} (is `fieldhub hub` running there?)")
                }),
                ureq::ErrorKind::BadStatus | ureq::ErrorKind::BadHeader => {
                    Err(not_a_hub("an answer that is not HTTP".into()))
                }
                _ => Err(e).with_context(|| format!("the hub's control API at {base}")),
            },
        },
    }
}

/// The TLS error under a failed call, in words that say what to set.
fn tls_failure(error: &ureq::Error, base: &str) -> Option<fieldhub_client::tls::TlsError> {
    let host = base.split("://").nth(1).and_then(|rest| rest.rsplit_once(':')).map_or("", |(host, _)| host);
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = cause {
        let rustls = e
            .downcast_ref::<rustls::Error>()
            .or_else(|| e.downcast_ref::<std::io::Error>()?.get_ref()?.downcast_ref::<rustls::Error>());
        if let Some(rustls) = rustls {
            return Some(fieldhub_client::tls::TlsError::from_rustls(rustls.clone(), host));
        }
        cause = e.source();
    }
    None
}
