//! What every attack test of a second local user needs: a numbered pair of
//! the victim's clients that runs throughout and must lose nothing, and the
//! attacker, `nobody`, reached through `setpriv`.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use fieldhub_client::Client;
use fieldhub_testkit::*;

/// The uid of `nobody`, the attacker.
pub const NOBODY: u32 = 65534;

/// A numbered sender and a lossless receiver on one channel, talking from
/// threads of their own until [`Pair::finish`]: every frame must arrive
/// once, in order, and nothing else on that identifier.
pub struct Pair {
    stop: Arc<AtomicBool>,
    received: Arc<AtomicU32>,
    sender: JoinHandle<u32>,
    receiver: JoinHandle<Duration>,
}

impl Pair {
    /// Start `talker` sending frames `id` numbered under `tag` on
    /// `channel`, and `listener` checking them.
    pub fn start(talker: Client, listener: Client, channel: &str, id: u32, tag: u8) -> Self {
        let port = talker.open_port(channel).unwrap();
        listener.open_port_with(channel, &lossless()).unwrap();
        listener.flush().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let received = Arc::new(AtomicU32::new(0));
        let sent_at = Arc::new(Mutex::new(Vec::<Instant>::new()));
        let total = Arc::new(AtomicU32::new(u32::MAX));
        let sender = {
            let (stop, sent_at, total) = (Arc::clone(&stop), Arc::clone(&sent_at), Arc::clone(&total));
            std::thread::spawn(move || {
                let mut n = 0u32;
                while !stop.load(Ordering::Acquire) {
                    sent_at.lock().unwrap().push(Instant::now());
                    talker.send_timeout(&port, &numbered(id, tag, n), Some(PATIENCE)).expect("pair send");
                    n += 1;
                    if n % 16 == 0 {
                        // A gentle pace: progress, not throughput, is the point.
                        std::thread::sleep(Duration::from_millis(1));
                    }
                }
                assert_eq!(flush_all(&talker), 0, "the hub put every frame of the pair on the bus");
                total.store(n, Ordering::Release);
                n
            })
        };
        let receiver = {
            let received = Arc::clone(&received);
            std::thread::spawn(move || {
                let mut worst = Duration::ZERO;
                let mut next = 0u32;
                let mut last = Instant::now();
                while next != total.load(Ordering::Acquire) {
                    let Some(got) = listener.recv(Some(Duration::from_millis(100))).expect("pair recv") else {
                        assert!(last.elapsed() < PATIENCE, "the pair stalled after {next} frames");
                        continue;
                    };
                    last = Instant::now();
                    assert_eq!(got.frame.id(), id, "a frame from elsewhere reached the pair's channel");
                    assert_eq!(number_of(&got.frame), (tag, next), "the pair lost or reordered a frame");
                    worst = worst.max(sent_at.lock().unwrap()[next as usize].elapsed());
                    next += 1;
                    received.store(next, Ordering::Release);
                }
                worst
            })
        };
        Self { stop, received, sender, receiver }
    }

    /// Wait until the receiver has `more` frames beyond what it had.
    pub fn wait_for_more(&self, more: u32) {
        let target = self.received.load(Ordering::Acquire) + more;
        wait_until(deadline(), format_args!("the pair to reach {target} frames"), || {
            self.received.load(Ordering::Acquire) >= target
        });
    }

    /// Stop sending; every frame sent arrived, in order. How many, and the
    /// worst latency seen (for the log).
    pub fn finish(self) -> (u32, Duration) {
        self.stop.store(true, Ordering::Release);
        let sent = self.sender.join().expect("the pair's sender");
        let worst = self.receiver.join().expect("the pair's receiver");
        assert!(sent > 0, "the pair ran");
        (sent, worst)
    }
}

/// `program` run as `nobody:nogroup` with no other groups.
pub fn nobody_command(program: &str) -> Command {
    // SAFETY: geteuid has no preconditions and cannot fail.
    assert_eq!(unsafe { libc::geteuid() }, 0, "becoming the attacker `nobody` (setpriv) needs root");
    let mut command = Command::new("setpriv");
    command.args(["--reuid=nobody", "--regid=nogroup", "--clear-groups", program]);
    command
}

/// A bash script run as `nobody`, its output lines read on a thread.
pub struct AsNobody {
    child: Child,
    lines: mpsc::Receiver<String>,
    /// Closing it ends the script's final `read`.
    stdin: Option<ChildStdin>,
}

impl AsNobody {
    pub fn bash(script: &str) -> Self {
        let mut child = nobody_command("bash")
            .args(["-c", script])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("setpriv (util-linux) runs bash");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let stdin = child.stdin.take();
        Self { child, lines, stdin }
    }

    /// Wait for the script's next line.
    pub fn line(&self) -> String {
        self.lines.recv_timeout(PATIENCE).expect("the attacker's script goes on")
    }
}

impl Drop for AsNobody {
    fn drop(&mut self) {
        if let Some(mut stdin) = self.stdin.take() {
            let _ = stdin.write_all(b"\n");
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
