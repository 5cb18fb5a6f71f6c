//! Virtual time through the control API and `STATS`: `GET /api/v1/time`
//! (bus time, the participants, the hold), `POST /api/v1/time` (pause,
//! resume, step, run until), and the `time` part of `STATS`.

use fieldhub_proto::stats::TimeStats;
use serde_json::{json, Value};

use super::virtual_time::RunLimit;
use super::Bus;
use crate::request::{ControlError, ControlResult, TimeCommand};

impl Bus {
    /// `GET /api/v1/time`: bus time; in virtual time also the participants
    /// and the control API's hold.
    pub(super) fn time_json(&self) -> Value {
        match &self.virtual_time {
            None => json!({"mode": "real", "now_ns": self.clock.now()}),
            Some(vt) => {
                let mut status = serde_json::to_value(vt.status()).unwrap_or_default();
                status["mode"] = json!("virtual");
                status
            }
        }
    }

    /// `POST /api/v1/time`: hold, release or step virtual time. The bus
    /// loop advances (or not) right after this request.
    pub(super) fn set_time(&mut self, command: TimeCommand) -> ControlResult {
        let Some(vt) = self.virtual_time.as_mut() else {
            return Err(ControlError::Conflict("the hub runs in real time; set [hub] time = \"virtual\"".into()));
        };
        let limit = match command {
            TimeCommand::Pause => RunLimit::Paused,
            TimeCommand::Resume => RunLimit::Running,
            TimeCommand::Step => RunLimit::SingleStep,
            TimeCommand::RunUntil { until_ns } if until_ns <= vt.now() => {
                return Err(ControlError::Invalid(format!("bus time is already {} ns, past {until_ns} ns", vt.now())));
            }
            TimeCommand::RunUntil { until_ns } => RunLimit::Until(until_ns),
        };
        vt.set_limit(limit);
        Ok(self.time_json())
    }

    /// The `time` part of `STATS`: present in virtual time only.
    pub(super) fn time_stats(&self) -> Option<TimeStats> {
        let status = self.virtual_time.as_ref()?.status();
        let state = match status.limit {
            RunLimit::Running => "running",
            RunLimit::Paused => "paused",
            RunLimit::Until(_) => "until",
            RunLimit::SingleStep => "single_step",
        };
        Some(TimeStats {
            now_ns: status.now_ns,
            real_time_factor: status.real_time_factor,
            participants: status.participants.len() as u32,
            state: state.into(),
        })
    }
}
