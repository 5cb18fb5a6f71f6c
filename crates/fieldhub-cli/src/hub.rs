//! `fieldhub hub`: run the hub until SIGINT or SIGTERM.

use std::path::PathBuf;

use anyhow::Context;
use fieldhub_hub::{config::DEFAULT_CONFIG, Hub, HubConfig};
use signal_hook::consts::{SIGINT, SIGTERM};
use tracing_subscriber::EnvFilter;

#[derive(clap::Args)]
pub struct HubArgs {
    /// Configuration file (TOML). Without it the built-in default is used.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Listen address, HOST:PORT or unix:PATH; replaces the configured ones. Repeatable.
    #[arg(long, value_name = "ADDR")]
    listen: Vec<String>,
    /// Token clients must present (required to listen beyond loopback) [env: FIELDHUB_TOKEN].
    #[arg(long, env = "FIELDHUB_TOKEN", hide_env_values = true)]
    token: Option<String>,
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
    /// Busy-poll instead of sleeping when idle (lowest latency; costs a core).
    #[arg(long)]
    busy_poll: bool,
    /// Print the built-in default configuration and exit.
    #[arg(long)]
    print_default_config: bool,
}

pub fn run(args: HubArgs) -> anyhow::Result<()> {
    if args.print_default_config {
        print!("{DEFAULT_CONFIG}");
        return Ok(());
    }
    tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::try_from_env("FIELDHUB_LOG").unwrap_or_else(|_| EnvFilter::new("info")))
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let (text, origin) = match &args.config {
        Some(path) => (
            std::fs::read_to_string(path).with_context(|| format!("cannot read config file {}", path.display()))?,
            path.display().to_string(),
        ),
        None => (DEFAULT_CONFIG.to_owned(), "built-in default configuration".to_owned()),
    };
    let mut config = HubConfig::parse(&text, &origin)?;
    if args.shm.is_some() || args.no_shm {
        config.hub.shm = args.shm.clone();
    }
    config.hub.busy_poll |= args.busy_poll;
    if !args.ivshmem.is_empty() {
        config.hub.ivshmem = args.ivshmem.clone();
    }
    if !args.listen.is_empty() || args.token.is_some() || args.shm.is_some() || !args.ivshmem.is_empty() {
        if !args.listen.is_empty() {
            config.hub.listen = args.listen.clone();
        }
        if args.token.is_some() {
            config.hub.token = args.token.clone();
        }
        // Command-line addresses are held to the same rules as configured ones.
        config.validate(&format!("{origin} with command-line options"))?;
    }
    let mut signals =
        signal_hook::iterator::Signals::new([SIGINT, SIGTERM]).context("cannot install signal handlers")?;
    let mut hub = Hub::start(config.clone()).context("cannot start the hub")?;
    let channels: Vec<&str> = config.channels.iter().map(|c| c.name.as_str()).collect();
    for addr in hub.listen_addrs() {
        tracing::info!("listening on {addr}");
    }
    if let (Some(name), Some(socket)) = (&config.hub.shm, hub.shm_socket()) {
        tracing::info!("serving shared memory as shm://{name} (session socket {})", socket.display());
    }
    for path in &config.hub.ivshmem {
        tracing::info!("serving QEMU guests through the ivshmem region {}", path.display());
    }
    tracing::info!("channels: {}", channels.join(", "));
    if let Some(signal) = signals.forever().next() {
        tracing::info!("signal {signal}: shutting down");
    }
    hub.shutdown();
    Ok(())
}
