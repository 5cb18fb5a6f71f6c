//! `fieldhub send`: one frame, like cansend — but it waits until the frame is
//! on the bus (or the hub refused it), for at most the client's timeout, and
//! says why when the frame is still waiting.

use anyhow::{bail, Context};
use fieldhub_client::{Client, ClientError, Port};
use fieldhub_proto::text::parse_cansend;

use crate::{HubSelect, PortSelect};

#[derive(clap::Args)]
pub struct SendArgs {
    #[command(flatten)]
    hub: HubSelect,
    #[command(flatten)]
    port: PortSelect,
    /// Channel to send on.
    channel: String,
    /// Frame: 123#DEADBEEF, 12345678#00 (29-bit), 123#R / 123#R4 (remote), 123##1DEADBEEF (CAN FD, flags nibble 1=BRS 2=ESI 4=FDF, implied), 123#1122334455667788_F (raw DLC).
    frame: String,
}

pub fn run(args: SendArgs) -> anyhow::Result<()> {
    let frame = parse_cansend(&args.frame)?;
    let client = args.hub.connect("send")?;
    let port = client
        .open_port_with(&args.channel, &args.port.config(1)?)
        .with_context(|| format!("cannot open a port on '{}'", args.channel))?;
    client.send(&port, &frame)?;
    // Wait until the hub has put the frame on the bus, and report if it refused it.
    match client.flush() {
        Ok(_) => {
            if let Some(note) = queued_for_bus_time(&client, &port, &args) {
                eprintln!("{note}");
            }
            Ok(())
        }
        Err(ClientError::Timeout(waited)) => bail!(
            "{} is queued on '{}' but not on the bus after {} s: {}",
            args.frame,
            args.channel,
            waited.as_secs_f64(),
            why_waiting(&client, &port)
        ),
        Err(ClientError::Dropped { reason, .. }) => bail!(
            "{} is not on '{}': {}",
            args.frame,
            args.channel,
            fieldhub_client::DropReason::from_wire(reason)
                .map_or_else(|| format!("dropped by the hub (reason code {reason})"), |r| r.describe().to_owned())
        ),
        Err(e) => Err(e).with_context(|| format!("sending {} on '{}'", args.frame, args.channel)),
    }
}

/// On a hub in virtual time, a frame from a client that is not a participant
/// is confirmed once it is placed at the current bus time, and goes on the
/// bus when bus time moves: say so, rather than let exit 0 suggest it is on
/// the bus already.
fn queued_for_bus_time(client: &Client, port: &Port, args: &SendArgs) -> Option<String> {
    let stats = client.stats().ok()?;
    let time = stats.time.as_ref()?;
    let me = stats.ports.iter().find(|p| p.port_id == port.port_id)?;
    (me.tx_frames == 0).then(|| {
        format!(
            "{} is queued on '{}' for bus time {:.6} s: it goes on the bus when bus time moves \
             (the participants' next step, or fieldhub ctl time run-until TIME)",
            args.frame,
            args.channel,
            time.now_ns as f64 / 1e9
        )
    })
}

/// What the hub's statistics say about a frame that does not leave `port`.
fn why_waiting(client: &Client, port: &Port) -> String {
    let Ok(stats) = client.stats() else {
        return "the hub does not answer".into();
    };
    let Some(me) = stats.ports.iter().find(|p| p.port_id == port.port_id) else {
        return "the port is gone".into();
    };
    let listeners = stats.ports.iter().filter(|p| p.channel == me.channel && p.port_id != me.port_id).count();
    let controller = match me.error_state.as_str() {
        "bus_off" => "bus-off".to_owned(),
        state => format!("error-{state}"),
    };
    let state = format!("port '{}' is {controller} (TEC {}) with {} frame(s) waiting", me.name, me.tec, me.tx_pending);
    if listeners == 0 && me.tec > 0 {
        format!(
            "{state}, and no other port is on '{}' to acknowledge it: the channel emulates missing ACKs \
             (no_ack = true), so a lone sender retransmits, as on a real bus. Start a receiver first \
             (fieldhub dump {})",
            me.channel, me.channel
        )
    } else {
        format!("{state}; {listeners} other port(s) on '{}' (a busy timed channel, a rate limit or a lossless receiver that does not read holds it)", me.channel)
    }
}
