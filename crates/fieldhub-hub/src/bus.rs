//! The bus thread: one sequencer for a group of channels.
//!
//! The thread blocks on its inbound queue (its single wake-up point), then
//! handles every request in arrival order: attach and detach clients, open
//! and close ports, and put frames on their channel. It owns all bus state —
//! nothing here is shared with another thread, so the data path takes no
//! lock. Control requests (port opening, names) may allocate; frames do not.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use crossbeam_channel::Receiver;
use fieldhub_proto::limits::MAX_PORTS_PER_CLIENT;
use fieldhub_proto::wire::{ErrorCode, PortOptions};
use fieldhub_proto::{Frame, FrameKind};
use tracing::{debug, info, warn};

use crate::channel::{Channel, Member};
use crate::config::{check_name, HubConfig, Protocol};
use crate::queues::{ClientId, HangUp, Inbound, Outbound, Outbox, Refused};

/// A port as its owning client sees it.
#[derive(Clone, Copy)]
struct OwnedPort {
    channel: u16,
    port_id: u32,
}

struct Client {
    name: String,
    outbox: Outbox,
    hang_up: HangUp,
    ports: [Option<OwnedPort>; MAX_PORTS_PER_CLIENT],
}

/// All state of one bus thread.
pub struct Bus {
    channels: Vec<Channel>,
    channel_ids: HashMap<String, u16>,
    clients: HashMap<ClientId, Client>,
    port_names: HashMap<u32, String>,
    taken_names: HashSet<String>,
    next_port_id: u32,
    stopping: Arc<AtomicBool>,
}

impl Bus {
    pub fn new(config: &HubConfig, stopping: Arc<AtomicBool>) -> Self {
        let channels: Vec<Channel> = config
            .channels
            .iter()
            .enumerate()
            .map(|(i, c)| Channel::new(i as u16, c.name.clone(), c.protocol))
            .collect();
        let channel_ids = channels.iter().map(|c| (c.name.clone(), c.id)).collect();
        Self {
            channels,
            channel_ids,
            clients: HashMap::new(),
            port_names: HashMap::new(),
            taken_names: HashSet::new(),
            next_port_id: 1,
            stopping,
        }
    }

    /// Serve requests until [`Inbound::Shutdown`] arrives or every sender is gone.
    pub fn run(mut self, inbox: Receiver<Inbound>) {
        while let Ok(request) = inbox.recv() {
            if let Inbound::Shutdown = request {
                self.say_goodbye();
                return;
            }
            self.handle(request);
        }
    }

    fn handle(&mut self, request: Inbound) {
        match request {
            Inbound::Frame { client, port, frame } => self.on_frame(client, port, frame),
            Inbound::Attach { client, name, outbox, hang_up } => {
                self.clients.insert(client, Client { name, outbox, hang_up, ports: [None; MAX_PORTS_PER_CLIENT] });
            }
            Inbound::OpenPort { client, request, options, channel, port_name } => {
                self.on_open_port(client, request, options, &channel, &port_name)
            }
            Inbound::ClosePort { client, port } => self.on_close_port(client, port),
            Inbound::Ping { client, nonce } => self.on_ping(client, nonce),
            Inbound::Detach { client, reason } => {
                if let Some(c) = self.remove_client(client) {
                    debug!(client, name = %c.name, "client detached: {reason}");
                }
            }
            Inbound::Shutdown => {}
        }
    }

    fn on_frame(&mut self, client_id: ClientId, port: u16, frame: Frame) {
        let Some(client) = self.clients.get(&client_id) else {
            // Frames still queued from a client the bus already removed.
            return;
        };
        let Some(owned) = client.ports.get(port as usize).copied().flatten() else {
            let text = format!("frame for port {port}, which this client has not opened");
            self.reject_client(client_id, ErrorCode::PortNotOpen, text);
            return;
        };
        let channel = &mut self.channels[owned.channel as usize];
        if frame.kind() == FrameKind::CanFd && channel.protocol == Protocol::Can {
            let text = format!(
                "channel '{}' is classic CAN and cannot carry the CAN FD frame {frame:?}; configure it with protocol = \"canfd\"",
                channel.name
            );
            let error = Outbound::Error { code: ErrorCode::InvalidFrame, request: 0, fatal: false, text };
            return self.reply(client_id, error);
        }
        channel.transmit(owned.port_id, frame, now_ns(), &self.stopping);
    }

    /// Answer a ping after reporting drops still unreported on the client's
    /// ports, so a client that flushes learns of every overrun so far.
    fn on_ping(&mut self, client_id: ClientId, nonce: u64) {
        let Some(client) = self.clients.get(&client_id) else {
            return;
        };
        for owned in client.ports.iter().flatten() {
            if let Some(member) = self.channels[owned.channel as usize].member_mut(owned.port_id) {
                member.report_drops();
            }
        }
        self.reply(client_id, Outbound::Pong { nonce });
    }

    fn on_open_port(
        &mut self,
        client_id: ClientId,
        request: u32,
        options: PortOptions,
        channel: &str,
        port_name: &str,
    ) {
        let refused = |code: ErrorCode, text: String| Outbound::Error { code, request, fatal: false, text };
        let Some(client) = self.clients.get_mut(&client_id) else {
            return;
        };
        let Some(&channel_id) = self.channel_ids.get(channel) else {
            let mut known: Vec<&str> = self.channel_ids.keys().map(String::as_str).collect();
            known.sort_unstable();
            let text = format!("unknown channel '{channel}'; this hub has: {}", known.join(", "));
            return self.reply(client_id, refused(ErrorCode::UnknownChannel, text));
        };
        let Some(handle) = client.ports.iter().position(Option::is_none) else {
            let text = format!("a client may open at most {MAX_PORTS_PER_CLIENT} ports");
            return self.reply(client_id, refused(ErrorCode::TooManyPorts, text));
        };
        let port_id = self.next_port_id;
        let name = if port_name.is_empty() { format!("{}.{port_id}", client.name) } else { port_name.to_owned() };
        if let Err(why) = check_name(&name) {
            return self.reply(client_id, refused(ErrorCode::Malformed, format!("port name {why}")));
        }
        if self.taken_names.contains(&name) {
            let text = format!("a port named '{name}' is already open");
            return self.reply(client_id, refused(ErrorCode::PortNameTaken, text));
        }
        self.next_port_id += 1;
        client.ports[handle] = Some(OwnedPort { channel: channel_id, port_id });
        let handle = handle as u16;
        let outbox = client.outbox.clone();
        info!(client = client_id, port = %name, channel, "port opened");
        self.channels[channel_id as usize].members.push(Member::new(client_id, handle, port_id, options, outbox));
        self.taken_names.insert(name.clone());
        self.port_names.insert(port_id, name);
        self.reply(client_id, Outbound::PortOpened { request, port: handle, channel_id, port_id });
    }

    fn on_close_port(&mut self, client_id: ClientId, port: u16) {
        let Some(client) = self.clients.get_mut(&client_id) else {
            return;
        };
        let Some(owned) = client.ports.get_mut(port as usize).and_then(Option::take) else {
            let text = format!("cannot close port {port}: it is not open");
            let error = Outbound::Error { code: ErrorCode::PortNotOpen, request: 0, fatal: false, text };
            return self.reply(client_id, error);
        };
        self.release_port(owned);
        self.reply(client_id, Outbound::PortClosed { port });
    }

    fn release_port(&mut self, owned: OwnedPort) {
        self.channels[owned.channel as usize].detach(owned.port_id);
        if let Some(name) = self.port_names.remove(&owned.port_id) {
            self.taken_names.remove(&name);
        }
    }

    fn remove_client(&mut self, client_id: ClientId) -> Option<Client> {
        let client = self.clients.remove(&client_id)?;
        for owned in client.ports.iter().flatten() {
            self.release_port(*owned);
        }
        Some(client)
    }

    /// Queue a reply. A client that has let its whole reply reserve fill up
    /// has stopped reading; it is cut off so it cannot hold memory.
    fn reply(&mut self, client_id: ClientId, item: Outbound) {
        let Some(client) = self.clients.get(&client_id) else {
            return;
        };
        if client.outbox.try_control(item) == Err(Refused::Full) {
            if let Some(client) = self.remove_client(client_id) {
                warn!(client = client_id, name = %client.name, "disconnecting client: it does not read the hub's replies");
                (client.hang_up)();
            }
        }
    }

    /// Tell a misbehaving client why and drop it; its transport closes the
    /// connection after writing the error.
    fn reject_client(&mut self, client_id: ClientId, code: ErrorCode, text: String) {
        if let Some(client) = self.remove_client(client_id) {
            warn!(client = client_id, name = %client.name, "disconnecting client: {text}");
            if client.outbox.try_control(Outbound::Error { code, request: 0, fatal: true, text }).is_err() {
                (client.hang_up)();
            }
        }
    }

    fn say_goodbye(&mut self) {
        for (_, client) in self.clients.drain() {
            let goodbye = Outbound::Goodbye { code: ErrorCode::ShuttingDown, text: "the hub is shutting down".into() };
            if client.outbox.try_control(goodbye).is_err() {
                (client.hang_up)();
            }
        }
    }
}

fn now_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}
