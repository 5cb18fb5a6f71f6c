//! `fieldhub`: the hub and its can-utils-style tools in one command.
//!
//! This crate only parses arguments and wires the library crates together;
//! every behaviour lives in `fieldhub-hub`, `fieldhub-client` and
//! `fieldhub-proto`. Errors are reported with context here, at the edge.
//! [`run`] is the whole command, for the `fieldhub` binary (`main.rs`) and
//! for the `fieldhub` script the Python package installs, which runs it
//! inside the extension module.

#[cfg_attr(windows, path = "windows/bench.rs")]
mod bench;
mod bench_remote;
#[cfg_attr(windows, path = "windows/bridge.rs")]
mod bridge;
mod candump_text;
mod convert;
mod ctl;
mod dump;
mod dump_log;
mod dump_session;
mod federation_log;
mod frame_bits;
mod gen;
mod hub;
mod isotp;
mod isotp_dump;
mod isotp_link;
#[cfg(windows)]
#[path = "windows/linux_only.rs"]
mod linux_only;
mod local_time;
mod output;
mod rbs;
mod ready;
mod reconnect;
mod record;
mod replay;
mod replay_bus_time;
mod send;
mod stats;
mod top;
mod top_draw;
mod top_model;
mod top_tui;

pub use bench::Launcher;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "fieldhub", version, about = "A virtual CAN / CAN FD bus: the hub and its tools")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the hub (the bus). Without --config: two classic CAN channels, can0 and can1.
    Hub(hub::HubArgs),
    /// Print frames from channels, like candump.
    Dump(dump::DumpArgs),
    /// Send one frame in cansend syntax (123#DEADBEEF, 1ABCDEF0#00, 123#R, 123##1DEADBEEF).
    Send(send::SendArgs),
    /// Generate frames, like cangen.
    Gen(gen::GenArgs),
    /// Show channel, port and route statistics of a running hub.
    Stats(stats::StatsArgs),
    /// A live view of the bus, like cansniffer and canbusload: per channel its load, per identifier its rate and period.
    Top(top::TopArgs),
    /// Record channels to a candump log (.log) or Vector ASC (.asc) file.
    Record(record::RecordArgs),
    /// Play a candump log or Vector ASC file back onto the hub, with its timing or --fast.
    Replay(replay::ReplayArgs),
    /// Convert a log between candump (.log), Vector ASC (.asc) and ASAM MDF4 (.mf4), like log2asc and asc2log.
    Convert(convert::ConvertArgs),
    /// ISO-TP (ISO 15765-2) payloads: send, recv and dump, like isotpsend, isotprecv, isotpdump and isotpsniffer.
    Isotp(isotp::IsotpArgs),
    /// Control a running hub: wiring (plug, unplug, cut, repair), routes, listings.
    Ctl(ctl::CtlArgs),
    /// Exact on-wire length and duration of a frame (stuff bits, CRC, BRS).
    FrameBits(frame_bits::FrameBitsArgs),
    /// Benchmarks: latency, throughput and CPU of a hub (shm or tcp), with ratios to raw baselines of the same run; round trips as clients and channels grow.
    Bench(bench::BenchArgs),
    /// Bridge a real bus into the hub: `bridge socketcan IFACE` joins a Linux SocketCAN interface to a channel.
    Bridge(bridge::BridgeArgs),
    /// Rest-bus simulation: a DBC's nodes sending their messages on a running hub while it runs (docs/rest-bus.md).
    Rbs(rbs::RbsArgs),
}

/// `--port NAME`, shared by the tools that open one port.
#[derive(clap::Args, Clone)]
pub struct PortSelect {
    /// Open the port under this name: one the hub's `[[port]]` tables wire (its rate limit applies), and
    /// the name `ctl unplug`, `ctl cut` and fault rules use. Default: the hub names it TOOL.N.
    #[arg(long = "port", value_name = "NAME")]
    pub name: Option<String>,
}

impl PortSelect {
    /// A port of this name on one channel, taking CAN FD frames too (as
    /// can-utils do); `channels` is how many the tool opens, as a named
    /// port is one port.
    pub fn config(&self, channels: usize) -> anyhow::Result<fieldhub_client::PortConfig> {
        if self.name.is_some() && channels > 1 {
            anyhow::bail!("--port names one port, but {channels} channels were given; name one channel");
        }
        Ok(fieldhub_client::PortConfig { name: self.name.clone(), fd: true, ..Default::default() })
    }
}

/// `--hub URL`, shared by every tool that connects to a hub.
#[derive(clap::Args, Clone)]
pub struct HubSelect {
    /// Hub to connect to: tcp://HOST:PORT, tls://HOST:PORT, unix:PATH, shm://NAME, ivshmem://PATH or serial:PATH [env: FIELDHUB_HUB; default: shm://default if the local hub serves it, else tcp://127.0.0.1:29536]. A hub that requires a token gets $FIELDHUB_TOKEN, else the content of the file $FIELDHUB_TOKEN_FILE names. tls:// trusts the CA bundle $FIELDHUB_TLS_CA (else the system's) and presents $FIELDHUB_TLS_CERT with $FIELDHUB_TLS_KEY to a hub with mutual TLS.
    #[arg(long = "hub", value_name = "URL")]
    url: Option<String>,
    /// How long to wait for the hub's answers and confirmations, in seconds (a frame on the bus, a
    /// request answered). Raise it for a federated channel whose owner is far or slow to reach.
    #[arg(long = "timeout", value_name = "SECONDS", env = "FIELDHUB_TIMEOUT", default_value = "5", value_parser = parse_timeout)]
    timeout: std::time::Duration,
}

/// `--timeout`: seconds, fractions allowed, more than 0.
fn parse_timeout(text: &str) -> Result<std::time::Duration, String> {
    let seconds: f64 = text.parse().map_err(|_| format!("'{text}' is not a number of seconds (5, 0.5, 30)"))?;
    if !(seconds > 0.0 && seconds <= 86_400.0) {
        return Err(format!("{text} s is not a timeout: give more than 0 and at most 86400 seconds"));
    }
    Ok(std::time::Duration::from_secs_f64(seconds))
}

impl HubSelect {
    /// The hub's URL: `--hub`, else `$FIELDHUB_HUB`, else the local default.
    pub fn url(&self) -> String {
        self.url.clone().unwrap_or_else(fieldhub_client::default_hub_url)
    }

    /// The base URL of the hub's HTTP control API (same host and port).
    pub fn http_base(&self) -> anyhow::Result<String> {
        let url = self.url();
        match fieldhub_client::HubUrl::parse(&url) {
            Ok(fieldhub_client::HubUrl::Tcp { host, port }) if host.contains(':') => {
                Ok(format!("http://[{host}]:{port}"))
            }
            Ok(fieldhub_client::HubUrl::Tcp { host, port }) => Ok(format!("http://{host}:{port}")),
            Ok(fieldhub_client::HubUrl::Tls { host, port }) if host.contains(':') => {
                Ok(format!("https://[{host}]:{port}"))
            }
            Ok(fieldhub_client::HubUrl::Tls { host, port }) => Ok(format!("https://{host}:{port}")),
            Ok(fieldhub_client::HubUrl::Shm { name, dir, .. }) => {
                // The hub publishes its control API's address next to its
                // session socket.
                let path = fieldhub_client::url::shm_control_path(&name, dir.as_deref()).map_err(|why| anyhow::anyhow!(why))?;
                let published = std::fs::read_to_string(&path).map_err(|e| {
                    anyhow::anyhow!(
                        "the hub serving shm://{name} publishes no control address ({}: {e}); it serves the \
                         control API only on a TCP listener: give --hub tcp://HOST:PORT",
                        path.display()
                    )
                })?;
                Self { url: Some(published.trim().to_owned()), timeout: self.timeout }.http_base()
            }
            Ok(_) => anyhow::bail!(
                "the control API is served over TCP (or found through shm://NAME); give --hub tcp://HOST:PORT or tls://HOST:PORT"
            ),
            Err(why) => anyhow::bail!("invalid hub URL '{url}': {why}"),
        }
    }

    /// Connect, naming the client after the tool.
    pub fn connect(&self, tool: &str) -> anyhow::Result<fieldhub_client::Client> {
        use anyhow::Context;
        let url = self.url();
        // The token comes from the environment (`ClientOptions::token`).
        let options =
            fieldhub_client::ClientOptions { name: tool.to_owned(), timeout: self.timeout, ..Default::default() };
        self.connect_as(&url, &options).with_context(|| format!("fieldhub {tool}"))
    }

    /// Connect to `url`; with no URL given, to the local default, over TCP
    /// with one line on stderr when the default `shm://default` cannot be
    /// used (`fieldhub_client::connect_default`).
    fn connect_as(
        &self,
        url: &str,
        options: &fieldhub_client::ClientOptions,
    ) -> Result<fieldhub_client::Client, fieldhub_client::ClientError> {
        match self.url {
            Some(_) => fieldhub_client::Client::connect_with(url, options),
            None => fieldhub_client::connect_default(options, |why| eprintln!("fieldhub {}: {why}", options.name)),
        }
    }

    /// Connect as a synchronised participant of a hub in virtual time.
    pub fn connect_synchronized(&self, tool: &str) -> anyhow::Result<fieldhub_client::Client> {
        use anyhow::Context;
        let options = fieldhub_client::ClientOptions {
            name: tool.to_owned(),
            synchronized: true,
            timeout: self.timeout,
            ..Default::default()
        };
        self.connect_as(&self.url(), &options).with_context(|| format!("fieldhub {tool}"))
    }
}

/// The token every tool presents to a hub that requires one:
/// `$FIELDHUB_TOKEN`, else the file `$FIELDHUB_TOKEN_FILE` names.
pub fn hub_token() -> anyhow::Result<Option<String>> {
    Ok(fieldhub_client::token::token_from_environment()?)
}

/// Run the `fieldhub` command with `args` (the first is the program's
/// name), as a process would: clap prints help and usage errors and exits.
/// `this_command` starts the same command again, for the benchmarks'
/// hubs and peers. Returns the exit status: 0, or 1 after an error
/// printed to stderr.
pub fn run<I, T>(args: I, this_command: Launcher) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let args: Vec<std::ffi::OsString> = args.into_iter().map(Into::into).collect();
    if let Some(ours) = args.get(1).and_then(|tool| can_utils_name(&tool.to_string_lossy())) {
        let theirs = args[1].to_string_lossy();
        eprintln!("error: fieldhub has no '{theirs}'; did you mean 'fieldhub {ours}'? (docs/can-utils.md maps can-utils to fieldhub)");
        return 2;
    }
    let cli = Cli::parse_from(args);
    let result = match cli.command {
        Command::Hub(args) => hub::run(args),
        Command::Dump(args) => dump::run(args),
        Command::Send(args) => send::run(args),
        Command::Gen(args) => gen::run(args),
        Command::Stats(args) => stats::run(args),
        Command::Top(args) => top::run(args),
        Command::Record(args) => record::run(args),
        Command::Replay(args) => replay::run(args),
        Command::Convert(args) => convert::run(args),
        Command::Isotp(args) => isotp::run(args),
        Command::Ctl(args) => ctl::run(args),
        Command::FrameBits(args) => frame_bits::run(args),
        Command::Bench(args) => bench::run(args, &this_command),
        Command::Bridge(args) => bridge::run(args),
        Command::Rbs(args) => rbs::run(args),
    };
    match result {
        Ok(()) => 0,
        Err(e) if e.is::<output::StdoutClosed>() => output::CLOSED_PIPE_STATUS,
        Err(e) => {
            eprintln!("error: {}", error_text(&e));
            1
        }
    }
}

/// The fieldhub tool for a can-utils tool's name a user types out of habit.
fn can_utils_name(tool: &str) -> Option<&'static str> {
    Some(match tool {
        "candump" => "dump",
        "cansend" => "send",
        "cangen" => "gen",
        "canplayer" => "replay",
        "canbusload" => "stats",
        "isotpsend" => "isotp send",
        "isotprecv" => "isotp recv",
        "isotpdump" => "isotp dump",
        "isotpsniffer" => "isotp dump --sniff",
        _ => return None,
    })
}

/// An error and its causes on one line, `context: cause: cause`, leaving out
/// a cause its parent's message already quotes (many library errors put
/// their source in their own message as well).
fn error_text(error: &anyhow::Error) -> String {
    let mut text = String::new();
    let mut said = String::new();
    for cause in error.chain() {
        let message = cause.to_string();
        if said.contains(&message) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&message);
        said = message;
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_text_names_each_cause_once() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "No such file or directory");
        let quoting = anyhow::anyhow!("cannot read /x: {io}").context("fieldhub send");
        assert_eq!(error_text(&quoting), "fieldhub send: cannot read /x: No such file or directory");
        let chained = anyhow::Error::new(io).context("cannot read /x").context("fieldhub send");
        assert_eq!(error_text(&chained), "fieldhub send: cannot read /x: No such file or directory");
    }
}
