//! The chaos run's schedule: what it injects ([`Injection`], drawn from a
//! seeded [`Rng`]), how ([`Ctl`]: `fieldhub ctl` against the hub under test,
//! as a bench would), and the clients it kills ([`Noise`]).

use std::process::{Child, Stdio};

use super::{port_name, BASE_ID, SENDERS};
use crate::hub_process::HubProcess;
use crate::{BenchError, Launcher, Transport};

/// Identifier of the killable clients' unnumbered traffic.
const NOISE_ID: &str = "700";

/// A reproducible schedule: xorshift64, nothing more.
pub(super) struct Rng(pub(super) u64);

impl Rng {
    pub(super) fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub(super) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// One thing the schedule does to the bus, and how it is undone.
#[derive(Clone, Debug)]
pub(super) enum Injection {
    /// A fault rule on one sender's identifier: `action` JSON, at a position.
    Fault { sender: usize, at: &'static str, action: &'static str, probability: f64 },
    /// The channel stuck dominant for a while: every sender goes bus-off.
    Short,
    /// One sender's controller forced bus-off.
    BusOff { sender: usize },
    /// One sender's cable pulled for a while.
    Unplug { sender: usize },
    /// A client sending unnumbered traffic killed (SIGKILL) and replaced.
    Kill,
}

impl Injection {
    pub(super) fn pick(rng: &mut Rng) -> Self {
        let sender = rng.below(SENDERS as u64) as usize;
        let probability = [0.05, 0.2, 0.5][rng.below(3) as usize];
        match rng.below(8) {
            0 => Self::Fault { sender, at: "sender", action: r#"{"type":"drop"}"#, probability },
            1 => Self::Fault { sender, at: "bus", action: r#"{"type":"drop"}"#, probability },
            2 => Self::Fault { sender, at: "bus", action: r#"{"type":"corrupt"}"#, probability },
            3 => Self::Fault { sender, at: "sender", action: r#"{"type":"delay","ms":3}"#, probability },
            4 => Self::Short,
            5 => Self::BusOff { sender },
            6 => Self::Unplug { sender },
            _ => Self::Kill,
        }
    }
}

/// `fieldhub ctl` against the hub under test: the injections go through
/// the control API as a bench's would.
pub(super) struct Ctl<'a> {
    pub(super) launcher: &'a Launcher,
    pub(super) url: String,
}

impl Ctl<'_> {
    fn run(&self, args: &[&str]) -> Result<(), BenchError> {
        let out =
            self.launcher.command().arg("ctl").arg("--hub").arg(&self.url).args(args).stdin(Stdio::null()).output()?;
        if !out.status.success() {
            return Err(BenchError::Invalid(format!(
                "fieldhub ctl {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(())
    }

    pub(super) fn inject(
        &self,
        injection: &Injection,
        seed: u64,
        channel: &str,
        noise: &mut Noise<'_>,
    ) -> Result<String, BenchError> {
        Ok(match injection {
            Injection::Fault { sender, at, action, probability } => {
                let rule = format!(
                    r#"{{"channel":"{channel}","at":"{at}","id":{},"mask":2047,"action":{action},"probability":{probability},"seed":{seed}}}"#,
                    BASE_ID + *sender as u32
                );
                self.run(&["fault", "add", &rule])?;
                format!("fault {at} {action} p={probability} on sender {sender}")
            }
            Injection::Short => {
                self.run(&["short", channel])?;
                "short".into()
            }
            Injection::BusOff { sender } => {
                self.run(&["force", &port_name(seed, *sender), "bus_off"])?;
                format!("bus-off sender {sender}")
            }
            Injection::Unplug { sender } => {
                self.run(&["unplug", &port_name(seed, *sender)])?;
                format!("unplug sender {sender}")
            }
            Injection::Kill => {
                noise.kill_one()?;
                "kill".into()
            }
        })
    }

    /// Undo an injection; a failure here is not the run's (the port may be
    /// plugged already), the checks afterwards judge the run.
    pub(super) fn undo(&self, injection: &Injection, seed: u64, channel: &str) {
        let _ = match injection {
            Injection::Fault { .. } => self.remove_faults(),
            Injection::Short => self.run(&["unshort", channel]),
            Injection::BusOff { sender } => self.run(&["force", &port_name(seed, *sender), "error_active"]),
            Injection::Unplug { sender } => self.run(&["plug", &port_name(seed, *sender), channel]),
            Injection::Kill => Ok(()),
        };
    }

    fn remove_faults(&self) -> Result<(), BenchError> {
        let out = self.launcher.command().args(["ctl", "--hub", &self.url, "fault", "list"]).output()?;
        let listed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        for id in listed.as_array().into_iter().flatten().filter_map(|r| r["id"].as_u64()) {
            self.run(&["fault", "remove", &id.to_string()])?;
        }
        Ok(())
    }
}

/// `fieldhub gen` processes with unnumbered traffic, killed and replaced.
pub(super) struct Noise<'a> {
    pub(super) launcher: &'a Launcher,
    pub(super) hub: &'a HubProcess,
    pub(super) channel: &'a str,
    pub(super) children: Vec<Child>,
}

impl Noise<'_> {
    pub(super) fn spawn(&mut self) -> Result<(), BenchError> {
        let child = self
            .launcher
            .command()
            .args(["gen", "--hub", &self.hub.url(Transport::Tcp, false), "-g", "1", "-I", NOISE_ID, self.channel])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        self.children.push(child);
        Ok(())
    }

    fn kill_one(&mut self) -> Result<(), BenchError> {
        if let Some(mut child) = self.children.pop() {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.spawn()
    }

    pub(super) fn stop_all(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.children.clear();
    }
}

impl Drop for Noise<'_> {
    fn drop(&mut self) {
        self.stop_all();
    }
}
