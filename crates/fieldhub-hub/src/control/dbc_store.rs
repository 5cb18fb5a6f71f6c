//! DBC files the web monitor decodes with, one per channel: from the
//! configuration (`[[channel]] dbc = "file.dbc"`, loaded when the hub
//! starts) or uploaded through `PUT /api/v1/channels/{channel}/dbc`
//! (`handlers/dbc.rs`).
//!
//! Decoding is a view of the traffic, not bus state: the files live in the
//! control server, never on the bus thread, and are read by the monitor's
//! WebSocket tasks for the frames they draw (a few hundred a tick at most).
//! Beside each decoder the store keeps the parsed file, which the page's
//! send by signals lists and encodes with (`handlers/signals.rs`).
//! The store's lock is held only to swap or clone an `Arc`.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use fieldhub_dbc::can_dbc::Dbc;
use fieldhub_dbc::{Database, DbcLoadError};
use serde_json::json;

use crate::config::HubConfig;

/// Why a configured DBC file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum DbcFileError {
    #[error("channel '{channel}': cannot read DBC file {path}: {source}")]
    Read { channel: String, path: PathBuf, source: std::io::Error },
    // Boxed: a load error holds several names (message, signals,
    // multiplexor); unboxed, every `Result` this error travels in would be
    // larger than the 128 bytes clippy's `result_large_err` allows.
    #[error("channel '{channel}': DBC file {path}: {source}")]
    Load { channel: String, path: PathBuf, source: Box<DbcLoadError> },
}

/// One channel's DBC: its decoder and the parsed file.
#[derive(Clone)]
struct ChannelDbc {
    decoder: Arc<Database>,
    file: Arc<Dbc>,
}

/// The DBC of each channel that has one, by channel name.
#[derive(Default)]
pub struct DbcStore {
    files: RwLock<HashMap<String, ChannelDbc>>,
}

/// A DBC file's bytes parsed, with its decoder.
pub fn read(bytes: &[u8]) -> Result<(Database, Dbc), DbcLoadError> {
    let file = fieldhub_dbc::read(bytes)?;
    Ok((Database::from_dbc(&file)?, file))
}

impl DbcStore {
    /// The DBC files `config` names, loaded.
    pub fn load(config: &HubConfig) -> Result<Self, DbcFileError> {
        let mut files = HashMap::new();
        for channel in &config.channels {
            let Some(path) = &channel.dbc else { continue };
            let (name, path) = (channel.name.clone(), path.clone());
            let bytes = std::fs::read(&path).map_err(|source| DbcFileError::Read {
                channel: name.clone(),
                path: path.clone(),
                source,
            })?;
            let (decoder, file) = read(&bytes).map_err(|source| DbcFileError::Load {
                channel: name.clone(),
                path,
                source: Box::new(source),
            })?;
            files.insert(name, ChannelDbc { decoder: Arc::new(decoder), file: Arc::new(file) });
        }
        Ok(Self { files: RwLock::new(files) })
    }

    /// The DBC of `channel`, if it has one.
    pub fn get(&self, channel: &str) -> Option<Arc<Database>> {
        self.files.read().unwrap_or_else(|p| p.into_inner()).get(channel).map(|c| Arc::clone(&c.decoder))
    }

    /// The parsed DBC file of `channel`, if it has one.
    pub fn file(&self, channel: &str) -> Option<Arc<Dbc>> {
        self.files.read().unwrap_or_else(|p| p.into_inner()).get(channel).map(|c| Arc::clone(&c.file))
    }

    /// Decode `channel` with `db` (a decoder and its parsed file), or no longer.
    pub fn set(&self, channel: String, db: Option<(Database, Dbc)>) {
        let mut files = self.files.write().unwrap_or_else(|p| p.into_inner());
        match db {
            Some((decoder, file)) => {
                files.insert(channel, ChannelDbc { decoder: Arc::new(decoder), file: Arc::new(file) })
            }
            None => files.remove(&channel),
        };
    }

    pub fn list(&self) -> serde_json::Value {
        let files = self.files.read().unwrap_or_else(|p| p.into_inner());
        let mut list: Vec<_> =
            files.iter().map(|(c, db)| json!({ "channel": c, "messages": db.decoder.len() })).collect();
        list.sort_by(|a, b| a["channel"].as_str().cmp(&b["channel"].as_str()));
        serde_json::Value::Array(list)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DBC: &str = "BO_ 256 Engine: 8 ECU\n SG_ Speed : 0|16@1+ (0.1,0) [0|6553.5] \"km/h\" Vector__XXX\n";

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("fieldhub-dbc-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_configured_dbc_is_found_next_to_the_configuration() {
        let dir = scratch("config");
        std::fs::write(dir.join("car.dbc"), DBC).unwrap();
        std::fs::write(dir.join("hub.toml"), "[[channel]]\nname = \"can0\"\ndbc = \"car.dbc\"\n").unwrap();
        let config = HubConfig::load(&dir.join("hub.toml")).unwrap();
        let store = DbcStore::load(&config).unwrap();
        let db = store.get("can0").expect("can0 decodes with car.dbc");
        assert_eq!(db.decode(256, false, &[0xD2, 0x04, 0, 0, 0, 0, 0, 0]).unwrap().signals[0].value, 123.4);
        assert!(store.get("can1").is_none());
    }

    #[test]
    fn a_missing_or_broken_dbc_names_its_channel() {
        let dir = scratch("broken");
        std::fs::write(dir.join("bad.dbc"), "not a dbc").unwrap();
        let toml = "[[channel]]\nname = \"can0\"\ndbc = \"bad.dbc\"\n[[channel]]\nname = \"can1\"\n";
        std::fs::write(dir.join("hub.toml"), toml).unwrap();
        let error = DbcStore::load(&HubConfig::load(&dir.join("hub.toml")).unwrap()).err().unwrap();
        assert!(matches!(error, DbcFileError::Load { ref channel, .. } if channel == "can0"), "{error}");
        std::fs::write(dir.join("hub.toml"), "[[channel]]\nname = \"can0\"\ndbc = \"missing.dbc\"\n").unwrap();
        let error = DbcStore::load(&HubConfig::load(&dir.join("hub.toml")).unwrap()).err().unwrap();
        assert!(error.to_string().contains("missing.dbc"), "{error}");
    }
}
