//! `POST /api/v1/recordings/decode`: the frames of a recording the web
//! monitor's plot view opened — a candump log, Vector ASC or BLF, or ASAM
//! MDF4 — read by `fieldhub-log`'s readers (the ones `fieldhub convert`
//! and `replay` use, and the fuzz targets exercise), so the page has no
//! parser of its own. The body is the file's bytes; the format is found as
//! `fieldhub convert` finds it without an extension (`MDF     ` is MDF4,
//! `LOGG` is BLF, else the first non-blank line tells candump from ASC),
//! or named by `?format=`. With `?dbc=CHANNEL` each frame carries its
//! signals' physical values decoded with that channel's DBC file, in the
//! form the monitor's stream gives them (`trace.rs`), so the page plots a
//! recording with the code that plots live frames.
//!
//! Invariants: a change-level request (POST: `http.rs` lets only an access
//! that may control the hub, with the origin checks of every request);
//! the body is at most [`MAX_RECORDING_BYTES`] (`413` names the cap); at
//! most [`MAX_FRAMES`] frames are read and answered — reading stops there,
//! so neither a huge file nor a compressed one that inflates costs more;
//! a file a reader refuses is a `400` with the reader's error, which names
//! the line or the byte offset; the reading runs off the server's thread.

use std::io::Write;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Extension;
use fieldhub_dbc::Database;
use fieldhub_log::{mdf4, DateZone, LogError, LogFormat, LogReader, ReadOptions, Record};
use serde::Deserialize;

use crate::control::api::error;
use crate::control::state::ApiState;
use crate::control::trace::{hex, page_flags};
use crate::session::credentials::Access;

/// Largest recording the endpoint reads; larger ones are converted or
/// replayed on the hub's machine.
pub const MAX_RECORDING_BYTES: usize = 32 * 1024 * 1024;
/// Most frames one answer carries (the plot keeps 20,000 points a series).
pub const MAX_FRAMES: usize = 100_000;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct DecodeQuery {
    /// candump, asc, blf or mf4; default: from the file's first bytes.
    format: Option<String>,
    /// Decode the frames with this channel's DBC file.
    dbc: Option<String>,
}

/// The decode request: the body is the file.
pub(crate) async fn decode(
    State(s): State<Arc<ApiState>>,
    Extension(access): Extension<Access>,
    query: Result<Query<DecodeQuery>, QueryRejection>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let Query(DecodeQuery { format, dbc }) = match query {
        Ok(query) => query,
        Err(e) => return error(StatusCode::BAD_REQUEST, format!("invalid query: {}", e.body_text())),
    };
    let bytes = match body {
        Ok(bytes) => bytes,
        Err(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            let text = format!(
                "the recording is larger than the {} MiB this endpoint reads; convert or replay it on the hub's \
                 machine (fieldhub convert, fieldhub replay)",
                MAX_RECORDING_BYTES / (1024 * 1024)
            );
            return error(StatusCode::PAYLOAD_TOO_LARGE, text);
        }
        Err(e) => return error(e.status(), format!("cannot read the request body: {}", e.body_text())),
    };
    if bytes.is_empty() {
        return error(StatusCode::BAD_REQUEST, "the body is empty: send the recording file's bytes".into());
    }
    let kind = match format.as_deref().map(str::parse::<LogFormat>).transpose() {
        Ok(kind) => kind.unwrap_or_else(|| LogFormat::sniff(&bytes)),
        Err(text) => return error(StatusCode::BAD_REQUEST, text),
    };
    let database = match dbc {
        None => None,
        Some(channel) if !access.may_read(Some(&channel)) => {
            let text = format!("{} may not read channel '{channel}' (not in its read list)", access.describe());
            return error(StatusCode::FORBIDDEN, text);
        }
        Some(channel) => match s.dbc.get(&channel) {
            Some(database) => Some(database),
            None => {
                let text = format!(
                    "channel '{channel}' has no DBC file: load one from the page's header, PUT \
                     /api/v1/channels/{channel}/dbc or [[channel]] dbc in the configuration"
                );
                return error(StatusCode::NOT_FOUND, text);
            }
        },
    };
    let answer = tokio::task::spawn_blocking(move || frames_json(&bytes, kind, database.as_deref())).await;
    match answer {
        Ok(Ok(json)) => ([("content-type", "application/json")], json).into_response(),
        Ok(Err(e)) => error(StatusCode::BAD_REQUEST, format!("not a readable {} recording: {e}", kind.name())),
        Err(_) => error(StatusCode::SERVICE_UNAVAILABLE, "the reading did not finish".into()),
    }
}

/// The answer: `{"format", "frames": [[channel, µs, id, flags, hex,
/// values]], "truncated"}`, values as the monitor's stream gives them
/// (`[message, [[signal, value], …]]`, or null).
fn frames_json(bytes: &[u8], kind: LogFormat, database: Option<&Database>) -> Result<Vec<u8>, LogError> {
    let mut out = Vec::with_capacity(bytes.len().min(MAX_FRAMES * 64));
    write!(out, "{{\"format\":\"{}\",\"frames\":[", kind.name())?;
    let mut count = 0;
    let mut truncated = false;
    let mut take = |record: Record| -> std::io::Result<bool> {
        if count == MAX_FRAMES {
            truncated = true;
            return Ok(false);
        }
        if count > 0 {
            out.push(b',');
        }
        count += 1;
        let frame = &record.frame;
        let decoded = database
            .filter(|_| !frame.is_error() && !frame.is_remote())
            .and_then(|db| db.decode(frame.id(), frame.is_extended(), frame.data()));
        let values =
            decoded.as_ref().map(|d| (d.message, d.signals.iter().map(|s| (s.name, s.value)).collect::<Vec<_>>()));
        let row =
            (&record.channel, record.timestamp_ns / 1_000, frame.id(), page_flags(frame), hex(frame.data()), values);
        serde_json::to_writer(&mut out, &row)?;
        Ok(true)
    };
    match kind {
        LogFormat::Mf4 => {
            for record in mdf4::read(bytes, DateZone::Local)? {
                if !take(record)? {
                    break;
                }
            }
        }
        LogFormat::Streamed(format) => {
            for record in LogReader::new(bytes, format, &ReadOptions::default()) {
                if !take(record?)? {
                    break;
                }
            }
        }
    }
    write!(out, "],\"truncated\":{truncated}}}")?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use fieldhub_log::Format;

    #[test]
    fn the_format_is_told_from_the_first_bytes_as_convert_tells_it() {
        assert_eq!(LogFormat::sniff(b"MDF     4.10    ").name(), "mf4");
        assert_eq!(LogFormat::sniff(b"LOGG\x90\0\0\0").name(), "blf");
        assert_eq!(LogFormat::sniff(b"\n\n(1700000000.000000) can0 123#\n").name(), "candump");
        assert_eq!(LogFormat::sniff(b"date Wed Nov 15 10:13:20.123 am 2023\n").name(), "asc");
        assert!("trc".parse::<LogFormat>().unwrap_err().contains("candump, asc, blf or mf4"));
    }

    #[test]
    fn frames_carry_their_signals_and_the_answer_stops_at_the_cap() {
        let db = Database::parse(
            "VERSION \"\"\n\nNS_ :\n\nBS_:\n\nBU_: E\n\nBO_ 291 Engine: 2 E\n SG_ Speed : 0|16@1+ (0.5,1) [0|0] \"km/h\" E\n",
        )
        .unwrap();
        let log = b"(1.000001) can0 123#0A00\n(1.000002) can1 7FF#R\n";
        let json: serde_json::Value =
            serde_json::from_slice(&frames_json(log, LogFormat::sniff(log), Some(&db)).unwrap()).unwrap();
        assert_eq!(json["format"], "candump");
        assert_eq!(
            json["frames"][0],
            serde_json::json!(["can0", 1_000_001, 0x123, 0, "0A00", ["Engine", [["Speed", 6.0]]]])
        );
        assert_eq!(json["frames"][1], serde_json::json!(["can1", 1_000_002, 0x7FF, 2, "", null]));
        assert_eq!(json["truncated"], false);
        let many: String = (0..=MAX_FRAMES).map(|i| format!("({i}.000000) can0 001#\n")).collect();
        let json: serde_json::Value =
            serde_json::from_slice(&frames_json(many.as_bytes(), LogFormat::sniff(many.as_bytes()), None).unwrap())
                .unwrap();
        assert_eq!(json["frames"].as_array().unwrap().len(), MAX_FRAMES);
        assert_eq!(json["truncated"], true);
    }

    #[test]
    fn a_broken_file_is_the_readers_error() {
        let error = frames_json(b"(1.0) can0 12345678901#\n", LogFormat::Streamed(Format::Candump), None).unwrap_err();
        assert!(error.to_string().starts_with("line 1"), "{error}");
        let error = frames_json(b"LOGG\x01\x02", LogFormat::Streamed(Format::Blf), None).unwrap_err();
        assert!(error.to_string().contains("byte"), "{error}");
    }
}
