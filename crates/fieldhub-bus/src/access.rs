//! What a client may do on the bus: its [`Access`], decided by the hub's
//! admission (the session layer's credentials) and carried into the bus with
//! its `Attach`. The bus turns it into each port's rights once, when the port
//! opens ([`Access::port_right`]), so frames pay nothing for it.

use std::sync::Arc;

/// The channel list entry that names every channel (`read = ["*"]`).
pub const ALL_CHANNELS: &str = "*";

/// What a client may do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Access {
    /// Send, receive, control.
    Full,
    /// Receive frames and read the control API: the monitor token.
    ReadOnly,
    /// What an `[[access]]` table grants.
    Granted(Arc<Grant>),
}

/// What a port on one channel may do, by its client's access.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortRight {
    /// Send and receive.
    Both,
    /// Receive only: its frames are refused (`Member::read_only`).
    Read,
    /// Send only: it receives nothing but its own echoes
    /// (`Member::transmit_only`).
    Write,
    /// The port may not be opened.
    None,
}

impl Access {
    /// What a port of this client on `channel` may do. Decided once, when
    /// the port opens.
    pub fn port_right(&self, channel: &str) -> PortRight {
        match self {
            Access::Full => PortRight::Both,
            Access::ReadOnly => PortRight::Read,
            Access::Granted(grant) => match (grant.reads(channel), grant.writes(channel)) {
                (true, true) => PortRight::Both,
                (true, false) => PortRight::Read,
                (false, true) => PortRight::Write,
                (false, false) => PortRight::None,
            },
        }
    }

    /// Whether it may change the hub (control API requests other than
    /// reading, holding virtual time).
    pub fn may_control(&self) -> bool {
        match self {
            Access::Full => true,
            Access::ReadOnly => false,
            Access::Granted(grant) => grant.control,
        }
    }

    /// Whether it may see the frames of `channel` (`None`: of every channel).
    pub fn may_read(&self, channel: Option<&str>) -> bool {
        match (self, channel) {
            (Access::Full | Access::ReadOnly, _) => true,
            (Access::Granted(grant), Some(channel)) => grant.reads(channel),
            (Access::Granted(grant), None) => grant.read_all,
        }
    }

    /// The channels a grant names in `read` (`"*"` aside): what a monitor
    /// of "every channel" shows it.
    pub fn listed_reads(&self) -> Vec<String> {
        match self {
            Access::Granted(grant) => grant.read.iter().filter(|c| *c != ALL_CHANNELS).cloned().collect(),
            _ => Vec::new(),
        }
    }

    /// How refusals name this access: `the monitor token`, `access 'NAME'`.
    pub fn describe(&self) -> String {
        match self {
            Access::Full => "the hub's token".into(),
            Access::ReadOnly => "the monitor token".into(),
            Access::Granted(grant) => format!("access '{}'", grant.name),
        }
    }

    /// The `[[access]]` name statistics show, if it came from one.
    pub fn grant_name(&self) -> Option<&str> {
        match self {
            Access::Granted(grant) => Some(&grant.name),
            _ => None,
        }
    }
}

/// One `[[access]]` table, as admission and the bus check it.
#[derive(Debug, PartialEq, Eq)]
pub struct Grant {
    pub name: String,
    read_all: bool,
    read: Vec<String>,
    write_all: bool,
    write: Vec<String>,
    pub control: bool,
}

impl Grant {
    /// A grant of `name`: the channels its ports may receive on (`read`) and
    /// send on (`write`), either list holding [`ALL_CHANNELS`] for every one,
    /// and whether it may change the hub (`control`).
    pub fn new(name: String, read: Vec<String>, write: Vec<String>, control: bool) -> Self {
        let all = |channels: &[String]| channels.iter().any(|c| c == ALL_CHANNELS);
        Self { name, read_all: all(&read), read, write_all: all(&write), write, control }
    }

    /// Whether its ports receive on `channel`.
    pub fn reads(&self, channel: &str) -> bool {
        self.read_all || self.read.iter().any(|c| c == channel)
    }

    /// Whether its ports may send on `channel`.
    pub fn writes(&self, channel: &str) -> bool {
        self.write_all || self.write.iter().any(|c| c == channel)
    }
}
