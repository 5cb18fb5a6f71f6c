//! `fieldhub send`: one frame, like cansend.

use anyhow::Context;
use fieldhub_client::PortConfig;
use fieldhub_proto::text::parse_cansend;

use crate::HubSelect;

#[derive(clap::Args)]
pub struct SendArgs {
    #[command(flatten)]
    hub: HubSelect,
    /// Channel to send on.
    channel: String,
    /// Frame: 123#DEADBEEF, 12345678#00 (29-bit), 123#R / 123#R4 (remote), 123##1DEADBEEF (CAN FD, flags nibble 1=BRS 2=ESI), 123#1122334455667788_F (raw DLC).
    frame: String,
}

pub fn run(args: SendArgs) -> anyhow::Result<()> {
    let frame = parse_cansend(&args.frame)?;
    let client = args.hub.connect("send")?;
    let port = client
        .open_port_with(&args.channel, &PortConfig { fd: true, ..PortConfig::default() })
        .with_context(|| format!("cannot open a port on '{}'", args.channel))?;
    client.send(&port, &frame)?;
    // Wait until the hub has put the frame on the bus, and report if it refused it.
    client.flush().with_context(|| format!("sending {} on '{}'", args.frame, args.channel))?;
    Ok(())
}
