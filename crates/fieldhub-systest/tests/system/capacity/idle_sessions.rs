//! Thousands of idle sessions cost the hub neither a thread each nor much
//! memory each: 2,000 TCP clients complete the handshake and stay connected,
//! the hub's thread count stays where it was with 10 of them, its resident
//! memory grows by a bounded amount per session, and a further client still
//! exchanges frames with no loss.

use std::net::TcpStream;

use crate::FIELDHUB;
use fieldhub_testkit::*;

/// Sessions held open at once: well past the 256 clients the hub served
/// with a thread pair per connection; the rebuilt hub serves at least 4,096.
const SESSIONS: usize = 2_000;
/// Where thread and memory use are measured (the first is the baseline).
const CHECKPOINTS: [usize; 3] = [10, 250, SESSIONS];
/// Threads the hub may add beyond its count at the baseline, whatever the
/// number of sessions (a lazily started helper or two, never one per client).
const THREAD_SLACK: usize = 4;
/// Resident memory a session may cost on average: a few buffers, no stacks.
const RSS_PER_SESSION: u64 = 64 * 1024;

/// A `/proc/PID/status` field, in its own unit (kB for memory).
fn status_field(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with(field)).unwrap_or_else(|| panic!("no {field} in {status}"));
    line[field.len()..].split_whitespace().next().unwrap().parse().unwrap()
}

/// (threads, resident bytes) of a process.
fn usage(pid: u32) -> (usize, u64) {
    (status_field(pid, "Threads:") as usize, status_field(pid, "VmRSS:") * 1024)
}

/// Let this process (and the hub it starts, which inherits the limit) hold
/// as many descriptors as the hard limit allows.
fn raise_fd_limit() {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit/setrlimit fill and read a struct on our stack.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit), 0);
        limit.rlim_cur = limit.rlim_max;
        assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &limit), 0);
    }
    let needed = (2 * SESSIONS + 200) as u64;
    assert!(limit.rlim_cur >= needed, "the descriptor limit {} is below the {needed} this test needs", limit.rlim_cur);
}

/// A session that completed the handshake and then says nothing.
fn idle_session(hub: &HubProcess, n: usize) -> TcpStream {
    let mut raw = RawStream::connect(hub);
    raw.hello(&format!("idle{n}"));
    raw.stream
}

#[test]
fn two_thousand_idle_sessions_cost_no_thread_each_and_bounded_memory() {
    raise_fd_limit();
    let hub = FIELDHUB.start();
    let mut sessions: Vec<TcpStream> = Vec::with_capacity(SESSIONS);
    let mut baseline: Option<(usize, u64)> = None;
    for checkpoint in CHECKPOINTS {
        while sessions.len() < checkpoint {
            let n = sessions.len();
            sessions.push(idle_session(&hub, n));
        }
        // A full round trip through the hub after the last handshake: every
        // session before it is set up.
        let probe = hub.client("probe");
        probe.flush().unwrap();
        drop(probe);
        let (threads, rss) = usage(hub.pid());
        eprintln!("{checkpoint} sessions: {threads} hub threads, {} KiB resident", rss / 1024);
        let Some((threads_at_base, rss_at_base)) = baseline else {
            baseline = Some((threads, rss));
            continue;
        };
        assert!(
            threads <= threads_at_base + THREAD_SLACK,
            "the hub's threads grew with its sessions: {threads_at_base} with {} sessions, {threads} with {checkpoint}",
            CHECKPOINTS[0]
        );
        let added = (checkpoint - CHECKPOINTS[0]) as u64;
        let per_session = rss.saturating_sub(rss_at_base) / added;
        assert!(
            per_session < RSS_PER_SESSION,
            "each session costs the hub {per_session} bytes of resident memory on average ({} KiB with {} \
             sessions, {} KiB with {checkpoint}); the bound is {RSS_PER_SESSION}",
            rss_at_base / 1024,
            CHECKPOINTS[0],
            rss / 1024
        );
    }

    // The hub still serves: a further pair exchanges numbered frames.
    let (sender, receiver) = (hub.client("sender"), hub.client("receiver"));
    let tx = sender.open_port("can0").unwrap();
    receiver.open_port_with("can0", &lossless()).unwrap();
    exchange_numbered(&sender, &tx, &receiver, 0x123, 1, 10_000);
    assert_nothing_pending(&receiver);

    // Every idle session is still there: the hub answers a PING on each of
    // a sample of them.
    for (n, stream) in sessions.iter().enumerate().step_by(97) {
        let mut raw = RawStream { stream: stream.try_clone().unwrap() };
        raw.send(&fieldhub_proto::wire::Message::Ping { nonce: n as u64 });
        let body = raw.read_message().unwrap_or_else(|| panic!("session {n} was closed by the hub"));
        assert!(
            matches!(fieldhub_proto::wire::decode(&body), Ok(fieldhub_proto::wire::Message::Pong { nonce }) if nonce == n as u64),
            "session {n}: expected PONG"
        );
    }
    drop(sessions);
}
