//! Linux network namespaces joined by veth pairs, made by a test for the
//! hubs it federates: each hub's Zenoh traffic crosses a real (virtual)
//! link between network stacks instead of loopback. Only the namespaces'
//! own interfaces get addresses (10.77.x.y/24); the host's network is never
//! touched, and everything is removed when the [`Lab`] is dropped — on a
//! panic too.
//!
//! Making namespaces needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN). Where
//! that is missing, [`Lab::new`] returns `None` after saying why; a test
//! run that must not skip sets `FIELDHUB_NETNS_REQUIRED=1`, and then the
//! missing permission fails the test instead.

use std::path::PathBuf;
use std::process::{Command, Output};

use crate::hub::{unique, Fieldhub, HubProcess};

/// Set to 1 where a skipped namespace test must fail instead.
pub const REQUIRED: &str = "FIELDHUB_NETNS_REQUIRED";

/// `count` network namespaces, every two joined by a veth pair: hub `i`
/// reaches hub `j` at [`Lab::address`]`(i, j)`.
pub struct Lab {
    fieldhub: Fieldhub,
    names: Vec<String>,
    /// Where the hubs' client sockets and configurations go.
    pub dir: PathBuf,
}

fn ip(args: &[&str]) -> Result<Output, String> {
    let output = Command::new("ip").args(args).output().map_err(|e| format!("cannot run `ip`: {e}"))?;
    if output.status.success() {
        Ok(output)
    } else {
        Err(format!("`ip {}` failed: {}", args.join(" "), String::from_utf8_lossy(&output.stderr).trim()))
    }
}

/// The /24 subnet of the link between namespaces `i` and `j`.
fn subnet(i: usize, j: usize) -> usize {
    let (a, b) = (i.min(j), i.max(j));
    10 * (a + 1) + b + 1
}

impl Lab {
    /// Make the namespaces, or `None` (with a message) where this process
    /// may not. Panics when it may not and [`REQUIRED`] is set, or when a
    /// step after the first fails: that is a broken test machine, not a
    /// missing permission.
    /// Its hubs ([`Lab::hub`]) run `fieldhub`.
    pub fn new(fieldhub: Fieldhub, test: &str, count: usize) -> Option<Self> {
        let tag = format!("fh{}x{}", std::process::id(), unique());
        let dir = std::env::temp_dir().join(format!("fieldhub-{tag}"));
        std::fs::create_dir_all(&dir).expect("make the lab's directory");
        let mut lab = Self { fieldhub, names: Vec::new(), dir };
        let first = format!("{tag}n0");
        if let Err(why) = ip(&["netns", "add", &first]) {
            let text = format!("{test}: network namespaces are not usable here ({why}); it needs root");
            if std::env::var(REQUIRED).is_ok_and(|v| v == "1") {
                panic!("{text}, and {REQUIRED}=1 says it must run");
            }
            eprintln!("SKIPPED {text}; set {REQUIRED}=1 to make this a failure");
            return None;
        }
        lab.names.push(first);
        for i in 1..count {
            let name = format!("{tag}n{i}");
            ip(&["netns", "add", &name]).unwrap();
            lab.names.push(name);
        }
        for ns in &lab.names {
            ip(&["-n", ns, "link", "set", "lo", "up"]).unwrap();
        }
        for i in 0..count {
            for j in i + 1..count {
                // Made inside the namespaces, the ends need no host-wide
                // unique names: `vJ` in namespace `i` leads to namespace `j`.
                let (end_i, end_j) = (format!("v{j}"), format!("v{i}"));
                ip(&[
                    "link",
                    "add",
                    &end_i,
                    "netns",
                    &lab.names[i],
                    "type",
                    "veth",
                    "peer",
                    "name",
                    &end_j,
                    "netns",
                    &lab.names[j],
                ])
                .unwrap();
                for (me, other, end) in [(i, j, &end_i), (j, i, &end_j)] {
                    let address = format!("{}/24", lab.address(other, me));
                    ip(&["-n", &lab.names[me], "addr", "add", &address, "dev", end]).unwrap();
                    ip(&["-n", &lab.names[me], "link", "set", end, "up"]).unwrap();
                }
            }
        }
        Some(lab)
    }

    /// The address namespace `from` reaches namespace `to` at.
    pub fn address(&self, from: usize, to: usize) -> String {
        format!("10.77.{}.{}", subnet(from, to), to + 1)
    }

    /// The namespace's name, for `ip netns exec`.
    pub fn name(&self, i: usize) -> &str {
        &self.names[i]
    }

    /// Run `program args` in namespace `i` and return its standard output.
    pub fn run(&self, i: usize, program: &str, args: &[&str]) -> Result<Output, String> {
        let mut all = vec!["netns", "exec", self.name(i), program];
        all.extend_from_slice(args);
        ip(&all)
    }

    /// Start a hub in namespace `i` with `config`, serving clients on a
    /// unix socket in the lab's directory.
    pub fn hub(&self, i: usize, config: &str) -> HubProcess {
        let socket = self.dir.join(format!("hub{i}-{}.sock", unique()));
        self.fieldhub.start_via(&["ip", "netns", "exec", self.name(i)], &socket, config)
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        // Deleting a namespace destroys the veth ends inside it.
        for ns in &self.names {
            if let Err(why) = ip(&["netns", "del", ns]) {
                eprintln!("cannot remove network namespace {ns}: {why}");
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
