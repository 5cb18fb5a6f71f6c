//! `[[rbs]]`: a rest-bus simulation the hub runs from its start
//! (`transport::rbs`, `docs/rest-bus.md`): a DBC file, the channel, which
//! nodes to simulate, and the counter and checksum rules of its messages.

use std::path::PathBuf;

use fieldhub_rbs::engine::{ChecksumSpec, CounterSpec, Setup};
use fieldhub_rbs::plan::NodeSelection;
use fieldhub_rbs::protect::Algorithm;
use serde::Deserialize;

/// One `[[rbs]]` table.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RbsConfig {
    /// The DBC file (relative paths from the hub's working directory).
    pub dbc: PathBuf,
    pub channel: String,
    /// Simulate only these nodes…
    #[serde(default)]
    pub nodes: Vec<String>,
    /// …or every node but these (the device under test).
    #[serde(default)]
    pub except: Vec<String>,
    /// The cycle of messages the DBC gives no `GenMsgCycleTime`; without
    /// it they are sent once per change.
    pub default_cycle_ms: Option<u64>,
    #[serde(default)]
    pub counter: Vec<RbsCounter>,
    #[serde(default)]
    pub checksum: Vec<RbsChecksum>,
}

/// `[[rbs.counter]]`: a message's alive counter.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct RbsCounter {
    pub message: String,
    pub signal: String,
    pub min: Option<u64>,
    pub max: Option<u64>,
}

/// `[[rbs.checksum]]`: a message's checksum byte.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct RbsChecksum {
    pub message: String,
    pub signal: String,
    /// `xor`, `crc8-sae-j1850`, `crc8h2f`, or `crc8` with `poly` (and
    /// `init`, `xorout`, `reflect`).
    pub algorithm: String,
    pub poly: Option<u8>,
    #[serde(default)]
    pub init: u8,
    #[serde(default)]
    pub xorout: u8,
    #[serde(default)]
    pub reflect: bool,
    /// AUTOSAR E2E's data identifier, folded in first.
    pub data_id: Option<u16>,
}

impl RbsChecksum {
    fn algorithm(&self) -> Result<Algorithm, String> {
        match (self.algorithm.as_str(), self.poly) {
            ("xor", _) => Ok(Algorithm::Xor),
            ("crc8-sae-j1850", _) => Ok(Algorithm::SaeJ1850),
            ("crc8h2f", _) => Ok(Algorithm::Crc8H2F),
            ("crc8", Some(poly)) => {
                Ok(Algorithm::Polynomial { poly, init: self.init, xorout: self.xorout, reflect: self.reflect })
            }
            ("crc8", None) => Err("algorithm \"crc8\" needs its polynomial: poly = 0x1D, say".into()),
            (other, _) => {
                Err(format!("unknown checksum algorithm '{other}'; use xor, crc8-sae-j1850, crc8h2f or crc8"))
            }
        }
    }
}

impl RbsConfig {
    /// What the engine simulates, or what is wrong with the table.
    pub fn setup(&self) -> Result<Setup, String> {
        let nodes = match (self.nodes.is_empty(), self.except.is_empty()) {
            (false, false) => return Err("give nodes or except, not both".into()),
            (false, true) => NodeSelection::Only(self.nodes.clone()),
            (true, _) => NodeSelection::Except(self.except.clone()),
        };
        let counters = self
            .counter
            .iter()
            .map(|c| CounterSpec { message: c.message.clone(), signal: c.signal.clone(), min: c.min, max: c.max })
            .collect();
        let checksums = self
            .checksum
            .iter()
            .map(|c| {
                let algorithm = c.algorithm()?;
                Ok(ChecksumSpec { message: c.message.clone(), signal: c.signal.clone(), algorithm, data_id: c.data_id })
            })
            .collect::<Result<_, String>>()?;
        Ok(Setup { nodes, default_cycle_ms: self.default_cycle_ms, counters, checksums })
    }
}
