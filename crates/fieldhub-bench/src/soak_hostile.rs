//! The attacker of `fieldhub bench soak --hostile` (issue 34, attack 5):
//! while the soak runs, a hostile local client keeps attaching over shared
//! memory, damaging every page it is given — four bytes over the start of
//! its own segment and of the hub's bell page, and a hole punched in both
//! (through the descriptors: `pwrite` and `fallocate(PUNCH_HOLE)`, which the
//! seals allow) — and leaving at once. The soak's clients that replace the
//! killed ones attach after it all the time, so the soak's checks (one
//! gap-free order, nothing missing, the hub's resources back) prove that
//! no client changes what later clients map (`spec/shm.md` 2.2).

use std::io::Write;
use std::os::unix::fs::FileExt;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use fieldhub_proto::wire::{self, Hello, Message};
use rustix::fs::FallocateFlags;

use crate::{BenchError, PATIENCE};

/// Pause between two attacks: often enough to meet every replacement
/// client's attach, gentle enough for a shared machine.
const PAUSE: Duration = Duration::from_millis(20);

/// The attacking thread.
pub struct Vandal {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Result<u64, BenchError>>,
}

impl Vandal {
    /// Start attacking the hub whose session socket is `socket`.
    pub fn start(socket: PathBuf) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut attacks = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    attack_once(&socket)?;
                    attacks += 1;
                    std::thread::sleep(PAUSE);
                }
                Ok(attacks)
            })
        };
        Self { stop, thread }
    }

    /// Stop; how many sessions were attached and damaged.
    pub fn finish(self) -> Result<u64, BenchError> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().map_err(|_| BenchError::Invalid("the hostile client's thread panicked".into()))?
    }
}

/// One session: the handshake, then damage to both pages it is given, then
/// gone. A hub that does not welcome it is a problem of the run.
fn attack_once(socket: &std::path::Path) -> Result<(), BenchError> {
    let mut session = UnixStream::connect(socket)?;
    let mut hello = Vec::new();
    let version = fieldhub_proto::limits::PROTOCOL_VERSION;
    let greeting = Hello { version, name: "soak-vandal", options: Default::default() };
    wire::encode(&mut hello, &Message::Hello(greeting));
    session.write_all(&hello)?;
    session.set_read_timeout(Some(PATIENCE))?;
    let (mut answer, mut fds) = (vec![0u8; 256], Vec::new());
    let n = fieldhub_shm::socket::recv_with_fds(&session, &mut answer, &mut fds)?;
    if fds.len() != fieldhub_shm::socket::PASSED_FDS {
        let answer = answer.get(4..n).map(wire::decode);
        return Err(BenchError::Invalid(format!("the hub did not welcome the hostile client: {answer:?}")));
    }
    for fd in fds {
        let file = std::fs::File::from(fd);
        file.write_all_at(b"XXXX", 0)?;
        rustix::fs::fallocate(&file, FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE, 0, 4096)
            .map_err(std::io::Error::from)?;
    }
    Ok(())
}
