//! The statistics document a hub sends in `STATS` (JSON, see
//! `spec/protocol.md` section 3.10). With the `serde` feature these types
//! serialize to and from exactly that document.

/// Statistics of a whole hub.
#[derive(Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct HubStats {
    pub hub: String,
    pub channels: Vec<ChannelStats>,
    pub ports: Vec<PortStats>,
    #[cfg_attr(feature = "serde", serde(default))]
    pub routes: Vec<RouteStats>,
    /// Bus time of a hub in virtual time; absent in real time.
    #[cfg_attr(feature = "serde", serde(default, skip_serializing_if = "Option::is_none"))]
    pub time: Option<TimeStats>,
    /// Entries left out so that `STATS` fits `MAX_STATS_LEN`; absent when
    /// the document is whole.
    #[cfg_attr(feature = "serde", serde(default, skip_serializing_if = "Option::is_none"))]
    pub omitted: Option<OmittedStats>,
    /// Clients refused for their credentials since the hub started (a
    /// wrong token, none where one is needed, another local user without
    /// one), by transport: `tcp`, `tls`, `unix`, `shm`, `ivshmem`, `http`;
    /// only transports that refused any.
    #[cfg_attr(feature = "serde", serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty"))]
    pub auth_refused: std::collections::BTreeMap<String, u64>,
    /// How late the bus thread served the deadlines it set itself (timed
    /// frames' ends, cyclic jobs' cycles); absent in virtual time.
    #[cfg_attr(feature = "serde", serde(default, skip_serializing_if = "Option::is_none"))]
    pub timer: Option<TimerStats>,
}

/// How late a hub in real time served its bus's deadlines, and why
/// (`spec/protocol.md` 3.10): what tells a late frame of a cyclic job the
/// machine's (the thread woke late) from the hub's (it was busy).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct TimerStats {
    /// Deadlines served since the hub started.
    pub deadlines: u64,
    /// Of them, served more than 100 µs after their time.
    pub late_over_100us: u64,
    /// Of them, served more than 1 ms after their time.
    pub late_over_1ms: u64,
    /// Of them, served more than 100 µs after their time for work the
    /// thread was doing when it came (not counting the time it slept past
    /// it): the hub's own share of lateness.
    #[cfg_attr(feature = "serde", serde(default))]
    pub busy_over_100us: u64,
    /// The latest any was served, ns after its time.
    pub max_late_ns: u64,
    /// The deadlines served furthest past their time (at most 32), the
    /// furthest first.
    pub worst: Vec<LateDeadline>,
}

/// One deadline served late.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct LateDeadline {
    /// Its time: bus time, ns since the Unix epoch.
    pub due_ns: u64,
    /// How long after it the bus thread served it.
    pub late_ns: u64,
    /// The part of `late_ns` the thread slept past it (the operating system
    /// ran it late); the rest it was busy. 0 when it was awake at the time.
    pub woke_late_ns: u64,
}

impl LateDeadline {
    /// Whether the thread slept past most of its lateness — the operating
    /// system ran it late — rather than working through it.
    pub fn mostly_asleep(&self) -> bool {
        self.woke_late_ns * 2 >= self.late_ns
    }
}

/// How many entries of each list a `STATS` document left out, cut from
/// the lists' ends (`spec/protocol.md` 3.10).
#[derive(Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct OmittedStats {
    pub channels: u32,
    /// Channels' `ids` entries, all channels together.
    pub ids: u32,
    pub ports: u32,
    pub routes: u32,
}

/// Virtual time (`spec/protocol.md` 6.8).
#[derive(Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct TimeStats {
    /// Bus time in nanoseconds since the run began.
    pub now_ns: u64,
    /// Bus time advanced per wall-clock time in which bus time was free to
    /// move (pauses, waits for participants to join and idle time left out).
    pub real_time_factor: f64,
    /// Synchronised participants now.
    pub participants: u32,
    /// `running`, `paused`, `until` or `single_step` (the control API's hold).
    pub state: String,
}

/// One channel.
#[derive(Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct ChannelStats {
    pub name: String,
    /// `can` or `canfd`.
    pub protocol: String,
    pub bitrate: u32,
    pub data_bitrate: u32,
    /// `ideal` or `timed`.
    pub timing: String,
    /// Data and remote frames (and LIN frames) put on the channel: what
    /// `ids` lists and the load measures.
    pub frames: u64,
    /// Error frames on the channel, not in `frames`: the bus's own (in place
    /// of a frame destroyed on the wire, or one no other node acknowledged)
    /// and those clients sent (which `ids` also lists, `CAN_ERR_FLAG` set).
    #[cfg_attr(feature = "serde", serde(default))]
    pub error_frames: u64,
    /// Bits put on the wire (stuff bits and intermission included).
    #[cfg_attr(feature = "serde", serde(default))]
    pub bits: u64,
    /// Share of time the wire was busy over the last second, in percent.
    #[cfg_attr(feature = "serde", serde(default))]
    pub load_1s: f64,
    /// The same over the last ten seconds.
    #[cfg_attr(feature = "serde", serde(default))]
    pub load_10s: f64,
    /// Per identifier (SocketCAN form), most frequent first.
    pub ids: Vec<IdStats>,
    /// Frames its ports sent, present and gone, that were dropped off the
    /// bus, by reason name (`spec/protocol.md` 6.9); only reasons that
    /// dropped any.
    #[cfg_attr(feature = "serde", serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty"))]
    pub tx_dropped_by_reason: std::collections::BTreeMap<String, u64>,
    /// A channel shared with other hubs (`[federation]`): this hub's view.
    #[cfg_attr(feature = "serde", serde(default, skip_serializing_if = "Option::is_none"))]
    pub federation: Option<FederationStats>,
}

/// A federated channel as one hub sees it.
#[derive(Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct FederationStats {
    /// `owner` (this hub sequences the channel) or `relay`.
    pub role: String,
    /// The owner hub's federation name.
    pub owner: String,
    /// The owner's epoch of the last event published or applied.
    pub epoch: u64,
    /// The sequence number of the last event published (owner) or applied (relay).
    pub last_seq: u64,
    /// Relay: gaps filled from the owner's history.
    pub gaps_recovered: u64,
    /// Relay: gaps that could not be filled, each reported to the channel's clients.
    pub desyncs: u64,
    /// Relay: events refused because their epoch was older than one applied.
    pub stale: u64,
    /// Relay: while the channel waits for its owner (none reachable, or a
    /// new owner's term not started yet), what its clients were told
    /// (`CHANNEL_STATE` waiting); absent while the owner is reachable.
    #[cfg_attr(feature = "serde", serde(default, skip_serializing_if = "Option::is_none"))]
    pub waiting: Option<String>,
}

/// Traffic of one identifier on one channel.
#[derive(Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct IdStats {
    pub id: u32,
    pub frames: u64,
    /// Frames of this id in the last completed second.
    pub rate_hz: f64,
}

/// One port.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct PortStats {
    pub name: String,
    pub channel: String,
    pub client: u32,
    pub port_id: u32,
    pub tx_frames: u64,
    pub rx_frames: u64,
    /// Frames dropped because the port's receive queue was full.
    pub rx_dropped: u64,
    /// Frames this port sent that are off the bus (`spec/protocol.md` 6.9).
    pub tx_dropped: u64,
    /// `tx_dropped` by reason name (`bus_off`, `fault_rule`, `owner_lost`,
    /// `unplugged`; [`crate::fate::DropReason::name`]): only reasons that
    /// dropped any.
    #[cfg_attr(feature = "serde", serde(default))]
    pub tx_dropped_by_reason: std::collections::BTreeMap<String, u64>,
    /// Frames refused as they came, each answered with an `ERROR`.
    #[cfg_attr(feature = "serde", serde(default))]
    pub tx_refused: u64,
    /// Frames waiting in the transmit queue now.
    pub tx_pending: u32,
    /// `active`, `passive` or `bus_off`.
    #[cfg_attr(feature = "serde", serde(default))]
    pub error_state: String,
    /// Transmit error counter.
    #[cfg_attr(feature = "serde", serde(default))]
    pub tec: u16,
    /// Receive error counter.
    #[cfg_attr(feature = "serde", serde(default))]
    pub rec: u16,
}

/// One gateway route.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct RouteStats {
    pub from: String,
    pub to: String,
    /// Frames copied to `to`.
    pub routed: u64,
    /// Frames the route could not deliver (full gateway queue, FD onto classic CAN).
    pub dropped: u64,
}
