//! The SIL Kit baseline of the virtual-time benchmark: SIL Kit 5.0.3's own
//! synchronised time with the same participants and steps, measured in the
//! same run. The registry, `sil-kit-system-controller` and N coordinated
//! participants (`tests/silkit/silkit_sync_peer.c`: 1 ms steps, one CAN
//! frame each per step, every frame of the others received) run as real
//! processes; the figure is the wall time from the first step's frames to
//! the last participant's exit, so connecting and the lifecycle's setup do
//! not count against SIL Kit (the fieldhub side starts its clock after
//! connecting too). A lone participant receives no frame: then its setup
//! counts, from the system controller's start.
//!
//! Where SIL Kit is: `dir` holds `silkit_sync_peer` and
//! `wheel/SilKit_py/bin/` (`sil-kit-registry`, `sil-kit-system-controller`),
//! as `make target/silkit/silkit_sync_peer` or the peers' `setup.sh` leave it.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use serde::Serialize;

use crate::silkit_peers::{first_missing, quiet, start_registry, Processes};
use crate::BenchError;

/// SIL Kit's step: `silkit_sync_peer` steps 1 ms.
pub const SILKIT_STEP_NS: u64 = 1_000_000;

/// What SIL Kit's synchronised time gave.
#[derive(Clone, Debug, Serialize)]
pub struct SilKitBaseline {
    pub participants: usize,
    pub steps: u64,
    pub wall_seconds: f64,
    /// Bus time per wall-clock time at its 1 ms step.
    pub real_time_factor: f64,
    pub wall_us_per_step: f64,
}

/// The programs of a SIL Kit folder.
struct Programs {
    registry: PathBuf,
    controller: PathBuf,
    peer: PathBuf,
}

impl Programs {
    fn find(dir: &Path) -> Result<Self, BenchError> {
        let bin = dir.join("wheel/SilKit_py/bin");
        let programs = Self {
            registry: bin.join("sil-kit-registry"),
            controller: bin.join("sil-kit-system-controller"),
            peer: dir.join("silkit_sync_peer"),
        };
        if let Some(program) = first_missing(&[&programs.registry, &programs.controller, &programs.peer]) {
            return Err(BenchError::Peer(format!(
                "SIL Kit baseline: {} is missing; build it with `make target/silkit/silkit_sync_peer` (and \
                 give --silkit target/silkit), or run without the comparison (--silkit none)",
                program.display()
            )));
        }
        Ok(programs)
    }
}

/// Run `participants` SIL Kit participants for `steps` steps of 1 ms.
pub fn run(dir: &Path, participants: usize, steps: u64) -> Result<SilKitBaseline, BenchError> {
    let programs = Programs::find(dir)?;
    let mut processes = Processes::default();
    let uri = start_registry(&programs.registry, &mut processes)?;
    let names: Vec<String> = (0..participants).map(|i| format!("ecu{i}")).collect();
    let mut peers = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let mut command = Command::new(&programs.peer);
        command.args([uri.as_str(), "CAN1", name, &steps.to_string()]);
        let command = quiet(&mut command);
        // The first participant's output says when stepping began: it
        // prints every frame it receives, the first in step 0.
        if i == 0 {
            command.stdout(Stdio::piped());
        }
        peers.push(command.spawn()?);
    }
    let first = peers[0].stdout.take().map(BufReader::new);
    let controller_started = Instant::now();
    processes.0.push(
        quiet(Command::new(&programs.controller).args(["--connect-uri", &uri, "--log", "off"]).args(&names)).spawn()?,
    );
    let (began_tx, began_rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let Some(mut lines) = first.map(BufRead::lines) else { return };
        if lines.next().is_some() {
            let _ = began_tx.send(Instant::now());
        }
        // Keep reading: a full pipe would stop the participant.
        lines.for_each(drop);
    });
    let mut failed = None;
    for (i, mut peer) in peers.into_iter().enumerate() {
        let status = peer.wait()?;
        if !status.success() && failed.is_none() {
            failed = Some(format!("SIL Kit participant ecu{i} ended with {status}"));
        }
    }
    let ended = Instant::now();
    let _ = reader.join();
    if let Some(failed) = failed {
        return Err(BenchError::Peer(failed));
    }
    let began = began_rx.try_recv().unwrap_or(controller_started);
    let wall = ended.duration_since(began).as_secs_f64();
    let bus_seconds = (steps * SILKIT_STEP_NS) as f64 / 1e9;
    Ok(SilKitBaseline {
        participants,
        steps,
        wall_seconds: wall,
        real_time_factor: bus_seconds / wall,
        wall_us_per_step: wall * 1e6 / steps as f64,
    })
}
