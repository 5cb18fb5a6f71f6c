//! The bus's configuration: its channels (`[[channel]]`), named ports
//! (`[[port]]`), gateway routes (`[[route]]`), CAN↔LIN gateways
//! (`[[gateway]]`, their table in `lin_gateway`) and how virtual time treats its
//! participants. The hub's configuration file holds these tables among its
//! own (listeners, TLS, federation links), parses and checks them, and hands
//! the bus a [`BusConfig`]; the types here are those tables, with the checks
//! that need nothing but their values.

use std::path::PathBuf;

use fieldhub_proto::frame::{MAX_EXTENDED_ID, MAX_STANDARD_ID};
use serde::{Deserialize, Serialize};

/// What one bus runs: the hub section's settings the bus reads and the
/// channel, port and route tables.
#[derive(Clone, Debug)]
pub struct BusConfig {
    /// The hub's name, reported in `STATS`.
    pub name: String,
    pub channels: Vec<ChannelConfig>,
    pub ports: Vec<PortConfig>,
    pub routes: Vec<RouteConfig>,
    /// CAN↔LIN gateways (`[[gateway]]`).
    pub gateways: Vec<crate::lin_gateway::GatewayConfig>,
    /// Virtual time: its participants and their step limits.
    pub time: TimeConfig,
}

impl BusConfig {
    /// A bus named `name` with `channels` and nothing else.
    pub fn new(name: &str, channels: Vec<ChannelConfig>) -> Self {
        Self {
            name: name.to_owned(),
            channels,
            ports: Vec::new(),
            routes: Vec::new(),
            gateways: Vec::new(),
            time: TimeConfig::default(),
        }
    }
}

/// How virtual time treats its participants (`[hub] time_participants`,
/// `step_timeout_ms`, `on_stall`).
#[derive(Clone, Debug)]
pub struct TimeConfig {
    /// Client names that must have joined before bus time first moves.
    pub participants: Vec<String>,
    /// Wall-clock milliseconds a participant has to finish its step.
    pub step_timeout_ms: u64,
    pub on_stall: StallPolicy,
}

impl Default for TimeConfig {
    fn default() -> Self {
        Self { participants: Vec::new(), step_timeout_ms: DEFAULT_STEP_TIMEOUT_MS, on_stall: StallPolicy::Report }
    }
}

/// How the bus spends time (`[hub] time`).
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum TimeMode {
    /// The wall clock: bus time is nanoseconds since the Unix epoch.
    #[default]
    Real,
    /// Bus time starts at 0 and advances in steps of the synchronised
    /// participants: deterministic, as fast as they compute.
    Virtual,
}

/// What the hub does when a synchronised participant stalls (`[hub] on_stall`).
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum StallPolicy {
    /// Log it and list it in the time status; time keeps waiting.
    #[default]
    Report,
    /// Report it, then stop waiting for it: it goes on as an observer.
    Drop,
}

/// Default `[hub] step_timeout_ms`: generous for a participant that
/// computes, short enough that a hung one fails a CI run quickly.
pub const DEFAULT_STEP_TIMEOUT_MS: u64 = 5_000;

/// Most channels one hub carries.
pub const MAX_CHANNELS: usize = 1024;

/// Most gateway routes one hub carries (configured and added through the
/// API together): each holds one of the gateway port ids.
pub const MAX_ROUTES: usize = 1024;

/// Bus protocol of a channel.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// Classic CAN: CAN FD frames are rejected on this channel.
    Can,
    /// CAN FD: classic and FD frames.
    Canfd,
    /// LIN 2.x: LIN frames only, the master's schedule table run by the
    /// hub (`[channel.lin]`).
    Lin,
    /// CAN XL (ISO 11898-1:2024): CAN XL, CAN FD and classic frames on one
    /// bus, XL frames' data phase at `xl_data_bitrate`.
    Canxl,
    /// Generic frames of a bus the hub has no model of: raw frames only,
    /// their length on the wire as `[channel.raw]` states.
    Raw,
}

impl Protocol {
    /// The name as configured.
    pub fn name(self) -> &'static str {
        match self {
            Self::Can => "can",
            Self::Canfd => "canfd",
            Self::Lin => "lin",
            Self::Canxl => "canxl",
            Self::Raw => "raw",
        }
    }

    /// Whether a channel of this protocol carries frames of `kind`.
    pub fn carries(self, kind: fieldhub_proto::FrameKind) -> bool {
        use fieldhub_proto::FrameKind as K;
        match self {
            Self::Can => matches!(kind, K::Can | K::Error),
            Self::Canfd => matches!(kind, K::Can | K::CanFd | K::Error),
            Self::Canxl => matches!(kind, K::Can | K::CanFd | K::CanXl | K::Error),
            Self::Lin => kind == K::Lin,
            Self::Raw => kind == K::Raw,
        }
    }

    /// Why a channel of this protocol refuses a frame of `kind` as it
    /// comes, and the fix, if it does. A LIN channel's rule refuses other
    /// kinds itself (a LIN channel carries LIN frames only).
    pub fn refuses(self, kind: fieldhub_proto::FrameKind) -> Option<(&'static str, &'static str)> {
        use fieldhub_proto::FrameKind as K;
        match (self, kind) {
            (Self::Can, K::CanFd) => {
                Some(("is classic CAN and cannot carry the CAN FD frame", "; configure it with protocol = \"canfd\""))
            }
            (Self::Raw, K::Can | K::CanFd | K::CanXl | K::Error | K::Lin) => Some((
                "is a raw channel and carries raw frames only, not",
                "; CAN frames travel on protocol = \"can\", \"canfd\" or \"canxl\" channels",
            )),
            (Self::Can | Self::Canfd | Self::Canxl, K::Lin) => Some((
                "is a CAN channel and cannot carry the LIN frame",
                "; LIN frames travel on protocol = \"lin\" channels",
            )),
            (Self::Can | Self::Canfd | Self::Lin, K::CanXl) => {
                Some(("cannot carry the CAN XL frame", "; CAN XL frames travel on protocol = \"canxl\" channels"))
            }
            (Self::Can | Self::Canfd | Self::Canxl | Self::Lin, K::Raw) => {
                Some(("cannot carry the raw frame", "; raw frames travel on protocol = \"raw\" channels"))
            }
            _ => None,
        }
    }
}

/// How a channel spends time.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Timing {
    /// No bandwidth limit: frames are sequenced as soon as the bus thread
    /// sees them, in arbitration order among those pending together.
    Ideal,
    /// Real bit-time emulation: the channel is busy for each frame's exact
    /// on-wire duration; frames are delivered at their end-of-frame time.
    Timed,
}

/// The smallest `[[port]] rate` accepted (frames per second): one frame
/// every 1,000 s. A smaller rate is a mistake (a typo'd exponent), and its
/// token period would not fit bus time.
pub const MIN_PORT_RATE: f64 = 0.001;

/// Default nominal bitrate (bit/s).
pub const DEFAULT_BITRATE: u32 = 500_000;
/// Highest nominal bitrate accepted (CAN: 1 Mbit/s).
pub const MAX_BITRATE: u32 = 1_000_000;
/// Highest CAN FD data bitrate accepted; also the highest nominal bitrate
/// of a `raw` channel (PROFIBUS DP's 12 Mbit/s fits).
pub const MAX_DATA_BITRATE: u32 = 15_000_000;
/// Highest CAN XL data bitrate accepted: 20 Mbit/s, the top of what CAN XL
/// transceivers are specified for (CiA 610-3 SIC XL).
pub const MAX_XL_DATA_BITRATE: u32 = 20_000_000;
/// Most bits a raw frame's data byte may take (`[channel.raw]`).
pub const MAX_RAW_BITS_PER_BYTE: u32 = 64;
/// Most overhead bits of a raw frame (`[channel.raw]`).
pub const MAX_RAW_OVERHEAD_BITS: u32 = 65_536;

/// `[[channel]]`: one bus.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChannelConfig {
    pub name: String,
    #[serde(default = "default_protocol")]
    pub protocol: Protocol,
    /// Nominal (arbitration phase) bitrate in bit/s.
    #[serde(default = "default_bitrate")]
    pub bitrate: u32,
    /// CAN FD data-phase bitrate in bit/s (frames with BRS); `canfd` and
    /// `canxl` only. Defaults to the nominal bitrate.
    #[serde(default)]
    pub data_bitrate: Option<u32>,
    /// CAN XL data-phase bitrate in bit/s; `canxl` only. Defaults to the
    /// nominal bitrate.
    #[serde(default)]
    pub xl_data_bitrate: Option<u32>,
    #[serde(default = "default_timing")]
    pub timing: Timing,
    /// Emulate a missing ACK: a frame sent while no other port is attached
    /// is not acknowledged, raises the sender's error counter and is retried,
    /// as a lone node on a real bus does.
    #[serde(default)]
    pub no_ack: bool,
    /// Leave bus-off automatically after 128 × 11 recessive bits.
    #[serde(default = "default_true")]
    pub auto_bus_off_recovery: bool,
    /// A DBC file the web monitor decodes this channel's frames with;
    /// relative to the configuration file's directory. Configuration only:
    /// the control API takes a DBC's text (`PUT .../dbc`), never a path.
    #[serde(default)]
    pub dbc: Option<PathBuf>,
    /// Shared with other hubs through `[federation]` (`docs/federation.md`).
    #[serde(default)]
    pub federated: bool,
    /// The federation name of the hub that sequences this channel; omitted
    /// (or this hub's own name) on the owner. Only with `federated = true`.
    #[serde(default)]
    pub owner: Option<String>,
    /// This hub takes the channel over, with a higher epoch, when its
    /// owner's liveliness token goes (`docs/federation.md`). Needs `owner`.
    #[serde(default)]
    pub standby: bool,
    /// The access rule that decides which pending frame goes next
    /// (`docs/buses.md`); each rule but `can` has its own settings table.
    #[serde(default)]
    pub arbitration: Arbitration,
    /// `[channel.tdma]`: the slots of an `arbitration = "tdma"` channel.
    #[serde(default)]
    pub tdma: Option<TdmaConfig>,
    /// `[channel.token]`: the ring of an `arbitration = "token"` channel.
    #[serde(default)]
    pub token: Option<TokenConfig>,
    /// `[channel.master_slave]`: the master and its polling order of an
    /// `arbitration = "master-slave"` channel.
    #[serde(default)]
    pub master_slave: Option<MasterSlaveConfig>,
    /// `[channel.lin]`: the master's schedule table of a `protocol = "lin"`
    /// channel.
    #[serde(default)]
    pub lin: Option<LinConfig>,
    /// `[channel.raw]`: how long a `protocol = "raw"` channel's frames are
    /// on the wire (8 bits per byte, no overhead, when left out).
    #[serde(default)]
    pub raw: Option<RawConfig>,
}

/// `[channel.raw]`: a raw frame's length on the wire, `overhead_bits` plus
/// `bits_per_byte` per data byte, all at the channel's `bitrate`.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    /// Bits each data byte takes: 8 for a synchronous bit stream, 10 for
    /// UART 8N1, 11 for 8E1 or 8N2 (Modbus RTU).
    #[serde(default = "default_bits_per_byte")]
    pub bits_per_byte: u32,
    /// Bits each frame takes besides its data: preamble, addresses, check
    /// sequence and the gap before the next frame.
    #[serde(default)]
    pub overhead_bits: u32,
}

impl RawConfig {
    /// The bit model the channel times its frames with.
    pub fn shape(self) -> fieldhub_proto::bits::RawShape {
        fieldhub_proto::bits::RawShape { bits_per_byte: self.bits_per_byte, overhead_bits: self.overhead_bits }
    }
}

fn default_bits_per_byte() -> u32 {
    8
}

impl ChannelConfig {
    /// A channel with every option at its default.
    pub fn new(name: &str, protocol: Protocol) -> Self {
        Self {
            name: name.to_owned(),
            protocol,
            bitrate: DEFAULT_BITRATE,
            data_bitrate: None,
            xl_data_bitrate: None,
            timing: Timing::Ideal,
            no_ack: false,
            auto_bus_off_recovery: true,
            dbc: None,
            federated: false,
            owner: None,
            standby: false,
            arbitration: Arbitration::Can,
            tdma: None,
            token: None,
            master_slave: None,
            lin: None,
            raw: None,
        }
    }

    /// Check the bitrates and `[channel.raw]`; the error names the
    /// offending key.
    pub fn check_rates(&self) -> Result<(), (&'static str, String)> {
        let max = if self.protocol == Protocol::Raw { MAX_DATA_BITRATE } else { MAX_BITRATE };
        if self.bitrate == 0 || self.bitrate > max {
            return Err(("bitrate", format!("{} is not 1..={max} bit/s", self.bitrate)));
        }
        let lin_rates = fieldhub_proto::lin::MIN_BITRATE..=fieldhub_proto::lin::MAX_BITRATE;
        if self.protocol == Protocol::Lin && !lin_rates.contains(&self.bitrate) {
            let text = format!(
                "{} bit/s is not a LIN bitrate (1000..=20000); LIN buses run at 19200, 10400 or 9600",
                self.bitrate
            );
            return Err(("bitrate", text));
        }
        match (self.protocol, self.data_bitrate) {
            (Protocol::Can | Protocol::Lin | Protocol::Raw, Some(_)) => {
                return Err((
                    "data_bitrate",
                    "only protocol = \"canfd\" and \"canxl\" channels have a data bitrate".into(),
                ))
            }
            (Protocol::Canfd | Protocol::Canxl, Some(rate)) if rate < self.bitrate || rate > MAX_DATA_BITRATE => {
                return Err((
                    "data_bitrate",
                    format!("{rate} must be between the nominal bitrate {} and {MAX_DATA_BITRATE} bit/s", self.bitrate),
                ))
            }
            _ => {}
        }
        match (self.protocol, self.xl_data_bitrate) {
            (Protocol::Canxl, Some(rate)) if rate < self.bitrate || rate > MAX_XL_DATA_BITRATE => {
                let text = format!(
                    "{rate} must be between the nominal bitrate {} and {MAX_XL_DATA_BITRATE} bit/s",
                    self.bitrate
                );
                return Err(("xl_data_bitrate", text));
            }
            (Protocol::Canxl, _) | (_, None) => {}
            (_, Some(_)) => {
                return Err(("xl_data_bitrate", "only protocol = \"canxl\" channels have an XL data bitrate".into()))
            }
        }
        match (self.protocol, self.raw) {
            (Protocol::Raw, Some(raw)) if !(1..=MAX_RAW_BITS_PER_BYTE).contains(&raw.bits_per_byte) => Err((
                "raw.bits_per_byte",
                format!("{} is not 1..={MAX_RAW_BITS_PER_BYTE} bits per data byte", raw.bits_per_byte),
            )),
            (Protocol::Raw, Some(raw)) if raw.overhead_bits > MAX_RAW_OVERHEAD_BITS => Err((
                "raw.overhead_bits",
                format!("{} is more than {MAX_RAW_OVERHEAD_BITS} bits of overhead per frame", raw.overhead_bits),
            )),
            (Protocol::Raw, _) | (_, None) => Ok(()),
            (_, Some(_)) => Err(("raw", "a [channel.raw] table needs protocol = \"raw\"".into())),
        }
    }

    /// Check the access rule against its settings table; the error names
    /// the offending key (`docs/buses.md`).
    pub fn check_arbitration(&self) -> Result<(), (&'static str, String)> {
        crate::channel::check_arbitration(self)
    }

    /// The data-phase bitrate (the nominal one unless set).
    pub fn effective_data_bitrate(&self) -> u32 {
        self.data_bitrate.unwrap_or(self.bitrate)
    }

    /// The CAN XL data-phase bitrate (the nominal one unless set).
    pub fn effective_xl_data_bitrate(&self) -> u32 {
        self.xl_data_bitrate.unwrap_or(self.bitrate)
    }

    /// What the channel times its frames with: its bitrates and raw model.
    pub fn rates(&self) -> crate::channel::Rates {
        crate::channel::Rates {
            nominal: self.bitrate,
            data: self.effective_data_bitrate(),
            xl_data: self.effective_xl_data_bitrate(),
            raw: self.raw.map(RawConfig::shape).unwrap_or_default(),
        }
    }
}

/// How a channel decides which pending frame goes next (`arbitration`).
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Arbitration {
    /// ISO 11898 priority arbitration: the lowest arbitration field wins.
    #[default]
    Can,
    /// Time division: a cycle of static slots, each owned by one port.
    Tdma,
    /// A token circulates among ports in a fixed order.
    Token,
    /// A master polls slaves; a slave sends only when polled.
    MasterSlave,
}

impl Arbitration {
    /// The name as configured.
    pub fn name(self) -> &'static str {
        match self {
            Self::Can => "can",
            Self::Tdma => "tdma",
            Self::Token => "token",
            Self::MasterSlave => "master-slave",
        }
    }
}

/// `[channel.tdma]`: a cycle of static slots (like a FlexRay static segment
/// or a TTCAN matrix). Cycles are aligned to bus time 0.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct TdmaConfig {
    /// Length of one cycle in µs; at least the slots' sum, the rest of the
    /// cycle is idle. Defaults to the slots' sum.
    #[serde(default)]
    pub cycle_us: Option<u64>,
    /// The slots, in the order they follow each other from the cycle's start.
    pub slots: Vec<SlotConfig>,
}

/// One TDMA slot: the port that owns it and its length.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct SlotConfig {
    /// The name of the port that may send in this slot (one frame per slot
    /// and cycle).
    pub port: String,
    pub length_us: u64,
}

/// `[channel.token]`: a token ring among named ports.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct TokenConfig {
    /// The port names the token visits, in order.
    pub order: Vec<String>,
    /// Longest time in µs one port holds the token: each of its frames must
    /// end within it.
    pub hold_us: u64,
    /// Most frames a port sends per token visit.
    #[serde(default = "default_max_frames")]
    pub max_frames: u32,
}

/// `[channel.master_slave]`: a master polling slaves.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct MasterSlaveConfig {
    /// The name of the master port: each frame it sends polls the next slave.
    pub master: String,
    /// The slaves' port names in the order the master polls them; the order
    /// repeats, and a slave may be polled more than once in it.
    pub poll: Vec<String>,
    /// How long in µs after a poll ends the polled slave may start its
    /// answer; an unanswered poll keeps the bus idle this long.
    pub response_timeout_us: u64,
}

/// `[channel.lin]`: the schedule table the hub runs as the LIN master.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct LinConfig {
    /// A LIN description file the hub's configuration loader reads, relative
    /// to the configuration file: it fills `schedule`, `frames` and the
    /// channel's bitrate. Configuration only: the control API never reads
    /// a file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ldf: Option<PathBuf>,
    /// The LDF's schedule table to run (default: its first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_table: Option<String>,
    /// The slots in order, repeated from the first after the last: at the
    /// start of each the master sends the header of `id`.
    #[serde(default)]
    pub schedule: Vec<LinSlotConfig>,
    /// What each frame may be (an LDF's `Frames`); empty: any response for
    /// a scheduled identifier, from any port.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub frames: Vec<LinFrameConfig>,
    /// Event-triggered frames (an LDF's `Event_triggered_frames`): a slot of
    /// one's `id` is answered by the slaves with a response pending for its
    /// `frames`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub event_triggered: Vec<LinEventTriggeredConfig>,
    /// Sporadic frames (an LDF's `Sporadic_frames`), which slots name with
    /// `sporadic = "NAME"`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sporadic: Vec<LinSporadicConfig>,
    /// Bus idle: the channel falls asleep after this long with nothing on
    /// the bus (LIN 2.1 §2.6.3: at least 4 s, at most 10 s).
    #[serde(default = "LinConfig::default_idle_timeout_ms")]
    pub idle_timeout_ms: u64,
    /// The master's first header after the wake-up pulse that woke the
    /// bus, from the pulse's end (LIN 2.1 §2.6.2: the slaves are ready
    /// within 100 ms).
    #[serde(default = "LinConfig::default_wake_delay_ms")]
    pub wake_delay_ms: u64,
    /// A waker with no header this long after its pulse's end sends another
    /// (LIN 2.1 §2.6.2: 150 to 250 ms).
    #[serde(default = "LinConfig::default_wake_retry_ms")]
    pub wake_retry_ms: u64,
}

impl LinConfig {
    /// LIN 2.1 §2.6.3's shortest bus-idle timeout.
    pub const MIN_IDLE_TIMEOUT_MS: u64 = 4_000;
    /// LIN 2.1 §2.6.3: a node is asleep at the latest 10 s after the bus fell idle.
    pub const MAX_IDLE_TIMEOUT_MS: u64 = 10_000;
    /// LIN 2.1 §2.6.2: a waker waits 150 to 250 ms for a header.
    pub const WAKE_RETRY_RANGE_MS: std::ops::RangeInclusive<u64> = 150..=250;

    fn default_idle_timeout_ms() -> u64 {
        Self::MIN_IDLE_TIMEOUT_MS
    }

    fn default_wake_delay_ms() -> u64 {
        100
    }

    fn default_wake_retry_ms() -> u64 {
        *Self::WAKE_RETRY_RANGE_MS.start()
    }
}

/// An event-triggered frame (LIN 2.2A 2.3.3.3): its own identifier, the
/// unconditional frames it carries, and the schedule the master runs once
/// when their responses collide.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct LinEventTriggeredConfig {
    /// The frame's name, for messages.
    pub name: String,
    /// The identifier whose header the master sends (0..=0x3F).
    pub id: u8,
    /// The unconditional frames it carries, by identifier.
    pub frames: Vec<u8>,
    /// The collision-resolving schedule, run once after a collision; empty:
    /// each of `frames` in turn, in slots as long as the one that collided.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub collision_schedule: Vec<LinSlotConfig>,
}

/// A sporadic frame (LIN 2.2A 2.3.3.4): its slot carries the first of its
/// frames that has a response pending, or nothing.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct LinSporadicConfig {
    /// The name slots give (`sporadic = "NAME"`).
    pub name: String,
    /// Its unconditional frames by identifier, highest priority first.
    pub frames: Vec<u8>,
}

/// One frame of a LIN cluster: who publishes its response, how long it is
/// and which checksum it carries. A response that differs is refused.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct LinFrameConfig {
    /// The frame's name, for messages.
    pub name: String,
    /// The frame identifier (0..=0x3F).
    pub id: u8,
    /// Data bytes (1..=8).
    pub length: u8,
    pub checksum: LinChecksum,
    /// The port names (LDF node names) that may publish the response.
    pub publishers: Vec<String>,
}

/// A LIN frame's checksum model.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum LinChecksum {
    /// The data bytes only: LIN 1.x, and the diagnostic frames.
    Classic,
    /// The protected identifier and the data bytes: LIN 2.x.
    Enhanced,
}

/// One slot of a LIN schedule table.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct LinSlotConfig {
    /// The frame identifier whose header the master sends (0..=0x3F): an
    /// unconditional or an event-triggered frame's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<u8>,
    /// Instead of `id`: the sporadic frame whose slot this is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sporadic: Option<String>,
    /// The slot's length in ms: the next slot starts this long after its start.
    pub delay_ms: u64,
}

fn default_max_frames() -> u32 {
    1
}

fn default_protocol() -> Protocol {
    Protocol::Can
}

fn default_bitrate() -> u32 {
    DEFAULT_BITRATE
}

fn default_timing() -> Timing {
    Timing::Ideal
}

fn default_true() -> bool {
    true
}

/// `[[port]]`: a named connector. A client that opens a port of this name
/// gets these settings; if `channel` is set the port is wired there and the
/// client may leave the channel empty in `OPEN_PORT`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortConfig {
    pub name: String,
    /// Channel the port is wired to; none: the client names the channel.
    #[serde(default)]
    pub channel: Option<String>,
    /// Transmit rate limit in frames per second (token bucket).
    #[serde(default)]
    pub rate: Option<f64>,
    /// Bucket depth: frames the port may send back to back before `rate`
    /// applies. Defaults to 1.
    #[serde(default)]
    pub burst: Option<u32>,
    /// A Linux SocketCAN interface (`can0`, `vcan0`) the hub opens itself and
    /// attaches as this port, the way a hardware connector is wired to the
    /// bus; needs `channel`.
    #[serde(default)]
    pub socketcan: Option<String>,
}

/// `[[route]]`: copy frames from one channel to another, like a can-gw rule.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteConfig {
    pub from: String,
    pub to: String,
    /// Identifier to match after masking (`frame.id & mask == id & mask`).
    #[serde(default)]
    pub id: u32,
    /// Mask over the identifier; 0 (the default) matches every frame.
    #[serde(default)]
    pub mask: u32,
    /// Match only extended (true) or only standard (false) identifiers.
    #[serde(default)]
    pub extended: Option<bool>,
    /// Replace the identifier of routed frames.
    #[serde(default)]
    pub rewrite_id: Option<u32>,
    /// How many gateway hops a frame may already have made to still be
    /// routed; 1 (the default) routes only frames sent on `from` directly,
    /// so two routes pointing at each other cannot loop.
    #[serde(default = "default_hop_limit")]
    pub hop_limit: u8,
}

impl RouteConfig {
    /// Check identifiers and hop limit; the error names the offending key.
    pub fn check_values(&self) -> Result<(), (&'static str, String)> {
        let limit = if self.extended == Some(false) { MAX_STANDARD_ID } else { MAX_EXTENDED_ID };
        for (key, value) in [("id", Some(self.id)), ("mask", Some(self.mask)), ("rewrite_id", self.rewrite_id)] {
            if let Some(value) = value.filter(|&v| v > limit) {
                return Err((key, format!("0x{value:X} exceeds the identifier range 0x{limit:X}")));
            }
        }
        if self.hop_limit == 0 || self.hop_limit > MAX_HOP_LIMIT {
            return Err(("hop_limit", format!("{} is not 1..={MAX_HOP_LIMIT}", self.hop_limit)));
        }
        Ok(())
    }
}

fn default_hop_limit() -> u8 {
    1
}

/// Most gateway hops any route may allow.
pub const MAX_HOP_LIMIT: u8 = 8;
