//! `fieldhub hub`: run the hub until SIGINT or SIGTERM.

use std::path::{Path, PathBuf};

use anyhow::Context;
use fieldhub_hub::{config::DEFAULT_CONFIG, Hub, HubConfig, TimeMode};
use signal_hook::consts::{SIGINT, SIGTERM};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

use crate::federation_log;
use crate::ready::{RawFd, Ready, ReadySignal};

#[derive(clap::Args)]
pub struct HubArgs {
    /// Configuration file (TOML). Without it the built-in default is used.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Listen address, HOST:PORT or unix:PATH; replaces the configured ones. Repeatable.
    #[arg(long, value_name = "ADDR")]
    listen: Vec<String>,
    /// File holding the token clients must present (required to listen beyond loopback):
    /// one line, readable only by its owner. Without it the hub takes $FIELDHUB_TOKEN, else
    /// the file $FIELDHUB_TOKEN_FILE names, else `[hub] token`. Never on the command line,
    /// where every local user reads it.
    #[arg(long, value_name = "PATH")]
    token_file: Option<PathBuf>,
    /// File holding a read-only monitor token (owner-only, like --token-file): its clients receive frames
    /// and read the control API but never transmit or change anything. Replaces `[hub] monitor_token`;
    /// needs a token.
    #[arg(long, value_name = "PATH")]
    monitor_token_file: Option<PathBuf>,
    /// PEM certificate chain of the hub (replaces `[hub] tls_cert`): with --tls-key, every TCP
    /// listener speaks TLS (clients connect with tls://HOST:PORT, the control API is https://).
    #[arg(long, value_name = "PATH", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert (replaces `[hub] tls_key`).
    #[arg(long, value_name = "PATH", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// PEM CA bundle (replaces `[hub] tls_client_ca`): TCP clients must present a certificate one
    /// of these CAs signed (mutual TLS); such a certificate admits like the token. Needs TLS.
    #[arg(long, value_name = "PATH")]
    tls_client_ca: Option<PathBuf>,
    /// Admit every local user's processes without a token (`[hub] insecure_local`). By default a hub
    /// without a token admits only processes of the user it runs as; this lets any account on the
    /// machine send frames and use the control API. Only on loopback and without a token.
    #[arg(long)]
    insecure_local: bool,
    /// Serve local clients over shared memory as shm://NAME (the built-in configuration serves shm://default).
    #[arg(long, value_name = "NAME")]
    shm: Option<String>,
    /// Do not serve shared memory, whatever the configuration says.
    #[arg(long, conflicts_with = "shm")]
    no_shm: bool,
    /// Serve QEMU guests through these ivshmem region files (created owner-only, 4 MiB), as
    /// `-object memory-backend-file,share=on,mem-path=PATH,size=4M -device ivshmem-plain`;
    /// replaces the configured ones. Comma-separated or repeated.
    #[arg(long, value_name = "PATH[,PATH…]", value_delimiter = ',')]
    ivshmem: Vec<PathBuf>,
    /// Serve socketcand's protocol on ADDR (HOST:PORT, e.g. 127.0.0.1:29537) for python-can's
    /// `socketcand` interface, SavvyCAN and Kayak (docs/socketcand.md); replaces `[hub] socketcand`.
    #[arg(long, value_name = "ADDR")]
    socketcand: Option<String>,
    /// The only directory recordings started through the control API are written in;
    /// replaces `[hub] recordings_dir` (default: `recordings` in the working directory).
    #[arg(long, value_name = "DIR")]
    recordings_dir: Option<PathBuf>,
    /// Busy-poll instead of sleeping when idle (lowest latency; costs a core).
    #[arg(long)]
    busy_poll: bool,
    /// real: bus time is the wall clock; virtual: bus time starts at 0 and advances only when
    /// every synchronised participant has finished its step. Replaces `[hub] time`.
    #[arg(long, value_name = "real|virtual", value_parser = parse_time_mode)]
    time: Option<TimeMode>,
    /// Once the hub is started (listeners bound, shared memory served, channels up), write
    /// one JSON line with its actual addresses to this inherited file descriptor, e.g. a
    /// pipe's write end, and close it: {"tcp":[…],"unix":[…],"http":…,"tls":…,"shm":…,"ivshmem":[…],
    /// "socketcand":…,"channels":[…],"pid":…}. For programs that start a hub: no log parsing, any FIELDHUB_LOG.
    #[arg(long, value_name = "N", conflicts_with = "ready_file")]
    ready_fd: Option<RawFd>,
    /// Like --ready-fd, but write the line to this file: replaced atomically (temporary file,
    /// then rename) once the hub is ready, removed when it stops. Remove it before starting
    /// the hub, so that a file that appears is this hub's.
    #[arg(long, value_name = "PATH")]
    ready_file: Option<PathBuf>,
    /// Leave out the per-client log lines (client connected, port opened, client
    /// disconnected); warnings about clients still show. Same as adding
    /// `fieldhub::clients=warn` to FIELDHUB_LOG (default: info).
    #[arg(short, long)]
    quiet: bool,
    /// Print the built-in default configuration and exit.
    #[arg(long)]
    print_default_config: bool,
    /// Check the configuration (with the command line's options) as a start would on this machine
    /// (token, certificate and DBC files, rest-bus simulations, SocketCAN interfaces, SIL Kit's
    /// library) and exit: 0 and "ok" when the hub would start with it, with what only a start can
    /// tell on stderr; 1 and the mistake (file, line and field where it has them) when not.
    /// Binds nothing and changes no file.
    #[arg(long)]
    check_config: bool,
}

pub fn run(args: HubArgs) -> anyhow::Result<()> {
    if args.print_default_config {
        return crate::output::text(DEFAULT_CONFIG);
    }
    if args.check_config {
        let config = load_config(&args)?;
        let unchecked = fieldhub_hub::check_config(&config)?;
        crate::output::outln!("ok")?;
        for what in unchecked {
            eprintln!("not checked: {what}");
        }
        return Ok(());
    }
    let mut filter = EnvFilter::try_from_env("FIELDHUB_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    if args.quiet {
        let clients = format!("{}=warn", fieldhub_hub::session::CLIENT_LOG);
        filter = filter.add_directive(clients.parse().expect("a valid log directive"));
    }
    let log = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_filter(filter);
    tracing_subscriber::registry().with(log).with(federation_log::layer()).init();
    // Before any hub thread exists: a panic anywhere ends the process loudly.
    fieldhub_hub::fatal::exit_on_panic(args.ready_file.clone());
    let config = load_config(&args)?;
    if let Some(federation) = &config.federation {
        federation_log::watch(fieldhub_hub::federation::RefusalLog::new(federation.token_file.as_deref()));
    }
    let ready = ready_signal(&args)?;
    let stop = Stop::install()?;
    let mut hub = Hub::start(config.clone()).context("cannot start the hub")?;
    log_started(&hub, &config);
    if let Some(ready) = ready {
        // Whoever waits for the line cannot use a hub it never hears about.
        if let Err(e) = ready.send(&Ready::of(&hub, &config)) {
            hub.shutdown();
            return Err(e.into());
        }
    }
    stop.wait();
    hub.shutdown();
    if let Some(path) = &args.ready_file {
        // The addresses in it are gone with the hub.
        let _ = std::fs::remove_file(path);
    }
    Ok(())
}

/// SIGINT or SIGTERM (Ctrl-C, Ctrl-Break on Windows), which stop the hub.
struct Stop {
    #[cfg(unix)]
    signals: signal_hook::iterator::Signals,
    #[cfg(windows)]
    caught: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Stop {
    /// Catch the signals from now on, before the hub starts.
    fn install() -> anyhow::Result<Self> {
        #[cfg(unix)]
        {
            let signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM]);
            Ok(Self { signals: signals.context("cannot install signal handlers")? })
        }
        #[cfg(windows)]
        {
            let caught = std::sync::Arc::default();
            for signal in [SIGINT, SIGTERM] {
                signal_hook::flag::register(signal, std::sync::Arc::clone(&caught))
                    .context("cannot install signal handlers")?;
            }
            Ok(Self { caught })
        }
    }

    /// Wait for one of the signals.
    fn wait(self) {
        #[cfg(unix)]
        if let Some(signal) = { self.signals }.forever().next() {
            tracing::info!("signal {signal}: shutting down");
        }
        // signal-hook has no iterator on Windows, only the flag: looked at
        // five times a second, a cost no one measures.
        #[cfg(windows)]
        {
            while !self.caught.load(std::sync::atomic::Ordering::Relaxed) {
                std::thread::sleep(std::time::Duration::from_millis(200));
            }
            tracing::info!("interrupted: shutting down");
        }
    }
}

/// The configuration file (or the built-in one) with the command line's
/// overrides applied and validated.
fn load_config(args: &HubArgs) -> anyhow::Result<HubConfig> {
    let (text, origin) = match &args.config {
        Some(path) => (
            std::fs::read_to_string(path).with_context(|| format!("cannot read config file {}", path.display()))?,
            path.display().to_string(),
        ),
        None => (DEFAULT_CONFIG.to_owned(), "built-in default configuration".to_owned()),
    };
    // Files the configuration names (an LDF) are found next to it.
    let dir = args.config.as_deref().and_then(Path::parent).unwrap_or(Path::new(""));
    let mut config = HubConfig::parse_in(&text, &origin, dir)?;
    if args.shm.is_some() || args.no_shm {
        config.hub.shm = args.shm.clone();
    }
    config.hub.busy_poll |= args.busy_poll;
    if let Some(time) = args.time {
        config.hub.time = time;
    }
    if let Some(dir) = &args.recordings_dir {
        config.hub.recordings_dir = dir.clone();
    }
    if !args.ivshmem.is_empty() {
        config.hub.ivshmem = args.ivshmem.clone();
    }
    if args.socketcand.is_some() {
        config.hub.socketcand = args.socketcand.clone();
    }
    let token = match &args.token_file {
        Some(path) => Some(fieldhub_client::token::read_token_file(path)?),
        None => fieldhub_client::token::token_from_environment()?,
    };
    if let Some(federation) = &mut config.federation {
        if let Some(path) = &federation.token_file {
            federation.token = Some(fieldhub_client::token::read_token_file(path)?);
        }
    }
    for access in &mut config.access {
        let token = fieldhub_client::token::read_token_file(&access.token_file)
            .with_context(|| format!("[[access]] '{}': cannot use its token_file", access.name))?;
        access.token = Some(token);
    }
    let monitor_token = match &args.monitor_token_file {
        Some(path) => Some(fieldhub_client::token::read_token_file(path)?),
        None => None,
    };
    let from_command_line = !args.listen.is_empty()
        || args.insecure_local
        || token.is_some()
        || monitor_token.is_some()
        || args.shm.is_some()
        || !args.ivshmem.is_empty()
        || args.tls_cert.is_some()
        || args.tls_client_ca.is_some();
    if from_command_line || !config.access.is_empty() {
        if args.tls_cert.is_some() {
            config.hub.tls_cert = args.tls_cert.clone();
            config.hub.tls_key = args.tls_key.clone();
        }
        if args.tls_client_ca.is_some() {
            config.hub.tls_client_ca = args.tls_client_ca.clone();
        }
        if !args.listen.is_empty() {
            config.hub.listen = args.listen.clone();
        }
        if token.is_some() {
            config.hub.token = token;
        }
        if monitor_token.is_some() {
            config.hub.monitor_token = monitor_token;
        }
        config.hub.insecure_local |= args.insecure_local;
        // Command-line addresses and the secrets read from files are held
        // to the same rules as configured ones.
        let origin = if from_command_line { format!("{origin} with command-line options") } else { origin };
        config.validate_text(&text, &origin)?;
    }
    Ok(config)
}

fn parse_time_mode(text: &str) -> Result<TimeMode, String> {
    match text {
        "real" => Ok(TimeMode::Real),
        "virtual" => Ok(TimeMode::Virtual),
        other => Err(format!("'{other}': real or virtual")),
    }
}

/// `--ready-fd` or `--ready-file`, checked before the hub starts.
fn ready_signal(args: &HubArgs) -> Result<Option<ReadySignal>, crate::ready::ReadyError> {
    match (args.ready_fd, &args.ready_file) {
        (Some(fd), _) => ReadySignal::fd(fd).map(Some),
        (None, Some(path)) => Ok(Some(ReadySignal::File(path.clone()))),
        (None, None) => Ok(None),
    }
}

/// The start-up lines a person reads; programs read the ready line instead.
fn log_started(hub: &Hub, config: &HubConfig) {
    let tls = config.tls_files();
    for addr in hub.listen_addrs() {
        match (addr, &tls) {
            (fieldhub_hub::ListenAddr::Tcp(socket), Some(files)) if files.client_ca.is_some() => {
                tracing::info!("listening on tls://{socket} (clients need a certificate the CA bundle signed)")
            }
            (fieldhub_hub::ListenAddr::Tcp(socket), Some(_)) => tracing::info!("listening on tls://{socket}"),
            _ => tracing::info!("listening on {addr}"),
        }
    }
    if let (Some(name), Some(socket)) = (&config.hub.shm, hub.shm_socket()) {
        tracing::info!("serving shared memory as shm://{name} (session socket {})", socket.display());
    }
    for path in &config.hub.ivshmem {
        tracing::info!("serving QEMU guests through the ivshmem region {}", path.display());
    }
    if let Some(addr) = hub.socketcand_addr() {
        tracing::info!("serving socketcand on {addr} (a bus name is a channel)");
    }
    let channels: Vec<&str> = config.channels.iter().map(|c| c.name.as_str()).collect();
    tracing::info!("channels: {}", channels.join(", "));
}
