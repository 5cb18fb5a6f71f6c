//! One shared-memory client cannot change what later clients map
//! (`spec/shm.md` 2.2): a hostile client writes over every page it can
//! reach — the hub's bell page, shared by all clients, and its own segment
//! — and punches holes in them (`madvise(MADV_REMOVE)`, which the seals
//! allow), once and then without pause while others attach; every later
//! `shm://default`-style client still connects and talks, and a numbered
//! sender–receiver pair over shared memory loses nothing. And a tool given
//! no URL whose `shm://default` leads nowhere falls back to TCP, saying so
//! in one line.

use std::os::unix::net::UnixListener;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::FIELDHUB;
use fieldhub_client::Client;
use fieldhub_testkit::*;

/// A numbered sender and a lossless receiver on `can0`, both over shared
/// memory, talking from threads of their own until [`ShmPair::finish`].
struct ShmPair {
    stop: Arc<AtomicBool>,
    sender: JoinHandle<u32>,
    receiver: JoinHandle<Result<u32, String>>,
}

const PAIR_ID: u32 = 0x321;
const PAIR_TAG: u8 = 5;

impl ShmPair {
    fn start(hub: &HubProcess) -> Self {
        let (talker, listener) = (hub.shm_client("pair-sender"), hub.shm_client("pair-receiver"));
        let port = talker.open_port("can0").unwrap();
        listener.open_port_with("can0", &lossless()).unwrap();
        listener.flush().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let total = Arc::new(AtomicU32::new(u32::MAX));
        let sender = {
            let (stop, total) = (Arc::clone(&stop), Arc::clone(&total));
            std::thread::spawn(move || {
                let mut n = 0u32;
                while !stop.load(Ordering::Acquire) {
                    talker.send_timeout(&port, &numbered(PAIR_ID, PAIR_TAG, n), Some(PATIENCE)).expect("pair send");
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
        let receiver = std::thread::spawn(move || {
            let mut next = 0u32;
            let mut last_frame = std::time::Instant::now();
            loop {
                if next == total.load(Ordering::Acquire) {
                    return Ok(next);
                }
                // A short wait: the sender tells its total only after its
                // flush, which may come after its last frame arrived here.
                match listener.recv(Some(Duration::from_millis(100))) {
                    Ok(Some(r)) if r.frame.id() == PAIR_ID => {
                        last_frame = std::time::Instant::now();
                        let (_, counter) = number_of(&r.frame);
                        if counter != next {
                            return Err(format!("frame {counter} arrived where {next} was due"));
                        }
                        next += 1;
                    }
                    Ok(Some(_)) => {}
                    Ok(None) if last_frame.elapsed() > PATIENCE => {
                        return Err(format!("no frame for {PATIENCE:?} after {next}"))
                    }
                    Ok(None) => {}
                    Err(e) => return Err(format!("receiver after {next} frames: {e}")),
                }
            }
        });
        Self { stop, sender, receiver }
    }

    /// Stop sending; every frame sent must have arrived, in order, once.
    fn finish(self) -> u32 {
        self.stop.store(true, Ordering::Release);
        let sent = self.sender.join().expect("pair sender");
        let received = self.receiver.join().expect("pair receiver").unwrap_or_else(|why| panic!("the pair: {why}"));
        assert_eq!(received, sent, "the pair sent {sent} frames and {received} arrived");
        sent
    }
}

/// Punch a hole over `len` bytes of a mapping that starts at `word`'s
/// address (page-aligned: offset 0 of the mapping).
fn punch(start: &AtomicU32, len: usize) {
    let addr = start as *const AtomicU32 as *mut libc::c_void;
    // SAFETY: `start` is offset 0 of a live shared mapping of at least `len`
    // bytes (the caller passes the mapped size); MADV_REMOVE frees its pages
    // in the file, which then read as zeros — the mapping stays valid.
    let done = unsafe { libc::madvise(addr, len, libc::MADV_REMOVE) };
    assert_eq!(done, 0, "MADV_REMOVE (the seals allow hole punching): {}", std::io::Error::last_os_error());
}

/// A later client connects over shared memory and exchanges a frame with
/// the pair's receiver side of the bus.
fn a_later_client_talks(hub: &HubProcess, watcher: &Client, n: u32) {
    let later = hub.shm_client(&format!("later-{n}"));
    let port = later.open_port("can0").unwrap();
    later.send_timeout(&port, &numbered(0x444, 9, n), Some(PATIENCE)).expect("later client sends");
    let deadline = deadline();
    loop {
        let r = watcher.recv(Some(PATIENCE)).unwrap().expect("the later client's frame arrives");
        if r.frame.id() == 0x444 {
            assert_eq!(number_of(&r.frame), (9, n));
            return;
        }
        assert!(std::time::Instant::now() < deadline, "the later client's frame never came");
    }
}

#[test]
fn a_client_scribbling_on_and_punching_holes_in_every_page_it_maps_never_turns_later_shm_clients_away() {
    let hub = FIELDHUB.start_shm();
    let pair = ShmPair::start(&hub);
    // Not lossless: it reads only while it waits for a later client.
    let watcher = hub.shm_client("watcher");
    watcher.open_port("can0").unwrap();
    watcher.flush().unwrap();

    let vandal = RawShm::connect(&hub, "vandal");
    let segment_len = vandal.segment.header().segment_len as usize;
    let bell = &vandal.raw_bell;
    // Once: every word of the bell page and of its own segment's control
    // page overwritten, then holes punched in all of both.
    for offset in (0..4096).step_by(4) {
        bell.word(offset).store(0x5858_5858, Ordering::Relaxed);
        vandal.raw_segment.word(offset).store(0xFFFF_FFFF, Ordering::Relaxed);
    }
    punch(bell.word(0), 4096);
    punch(vandal.raw_segment.word(0), segment_len);
    a_later_client_talks(&hub, &watcher, 0);
    hub.wait_for_log("damaged the hub's bell page");

    // Then without pause while later clients attach: four bytes over the
    // bell's magic, and a hole, again and again.
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut round = 0u32;
            while !done.load(Ordering::Relaxed) {
                bell.word(0).store(0x5858_5858, Ordering::Relaxed);
                round = round.wrapping_add(1);
                if round % 64 == 0 {
                    punch(bell.word(0), 4096);
                }
            }
        });
        let checked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            for n in 1..=8 {
                a_later_client_talks(&hub, &watcher, n);
            }
        }));
        done.store(true, Ordering::Relaxed);
        if let Err(panic) = checked {
            std::panic::resume_unwind(panic);
        }
    });
    drop(vandal);
    drop(watcher);

    let finished = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| pair.finish()));
    let sent = finished.unwrap_or_else(|panic| {
        eprintln!("the hub's log: {:#?}", hub.log());
        std::panic::resume_unwind(panic)
    });
    assert!(sent > 0, "the pair talked throughout");
    let mut hub = hub;
    assert!(hub.is_running());
    assert!(hub.log().iter().all(|l| !l.contains("panicked")), "{:#?}", hub.log());
}

#[test]
fn a_tool_given_no_url_falls_back_to_tcp_with_one_line_when_shm_default_leads_nowhere() {
    let runtime_dir = std::env::temp_dir().join(format!("fieldhub-shm-fallback-{}-{}", std::process::id(), unique()));
    std::fs::create_dir_all(&runtime_dir).unwrap();
    let runtime = runtime_dir.to_str().unwrap();
    let hub = FIELDHUB.start_with_env(None, &["--shm", "default"], &[("XDG_RUNTIME_DIR", runtime)]);
    let watcher = hub.client("watcher");
    let port = watcher.open_port("can0").unwrap();
    watcher.flush().unwrap();

    // The session socket no longer leads to the hub (a squatter's, or one
    // a killed hub left): connecting to it is refused. The hub's TCP
    // listener, published next to it, still serves.
    let socket = runtime_dir.join("fieldhub/default.sock");
    std::fs::remove_file(&socket).unwrap();
    drop(UnixListener::bind(&socket).unwrap());
    let published = std::fs::read_to_string(runtime_dir.join("fieldhub/default.control")).unwrap();

    let sent = FIELDHUB
        .command()
        .args(["send", "can0", "123#FA11BAC4"])
        .env("XDG_RUNTIME_DIR", runtime)
        .env_remove("FIELDHUB_HUB")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&sent.stderr).into_owned();
    assert!(sent.status.success(), "fieldhub send without --hub failed: {stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line says why: {stderr}");
    let expected = format!("using {} instead", published.trim());
    assert!(lines[0].contains("shm://default cannot be used") && lines[0].contains(&expected), "{stderr}");
    let got = watcher.recv(Some(PATIENCE)).unwrap().expect("the frame sent over TCP arrives");
    assert_eq!((got.port, got.frame.id(), got.frame.data()), (port.handle, 0x123, &[0xFA, 0x11, 0xBA, 0xC4][..]));

    drop(watcher);
    assert!(hub.terminate().success());
    let _ = std::fs::remove_dir_all(&runtime_dir);
}
