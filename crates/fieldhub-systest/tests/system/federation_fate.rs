//! A frame's fate across federated hubs (issue 33, `spec/protocol.md` 6.9).
//!
//! The owner hub is killed while every hub sends numbered frames, then
//! restarted (three namespaced hubs joined by veth pairs, as on three
//! machines; root needed: the test fails without it, it never skips). Every
//! frame committed before it died is on every relay, in one order — fetched
//! from the other relays when a relay lacked the owner's last events — or
//! reported to the relays that lack it (`CHANNEL_STATE` gap, counted as a
//! desynchronisation); every relay sender's frame is on every relay exactly
//! once, or reported to its sender as dropped; the relays' clients are told
//! when the channel waits for its owner and when it is live again.
//!
//! On loopback: `fieldhub gen` and `fieldhub dump` on a relay ride out the
//! owner's restart (gen exits 0, dump prints the channel's waiting and live
//! to stderr); a relay's frame the owner's bus drops reaches its sender as
//! `TX_DROPPED` with the owner's reason; a federation token another hub
//! refuses is named in both hubs' logs with the fix and told to the relay's
//! waiting clients.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use fieldhub_client::fate::{ChannelCondition, ChannelEvent, DropReason};
use fieldhub_client::{Client, ClientError, Port, Received};
use fieldhub_testkit::federation::{free_port, order, token_file};
use fieldhub_testkit::netns::Lab;
use fieldhub_testkit::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::FIELDHUB;

/// Frames each relay's sender sends; the owner's sender sends as many as
/// its hub lives for, the restarted owner's sender [`AFTER_RESTART`].
const PER_RELAY_SENDER: u32 = 6_000;
const AFTER_RESTART: u32 = 500;
/// Sender tags: the first owner's, the relays', the restarted owner's.
const OWNER_TAG: u8 = 0;
const RELAY_TAGS: [u8; 2] = [1, 2];
const RESTARTED_TAG: u8 = 3;
const ZENOH_PORT: u16 = 7447;

/// Hub `i` of the lab: `rack0` owns `body`; each hub connects to those
/// started before it over the veth link between their namespaces, so the
/// relays stay linked to each other while the owner is gone.
fn config(lab: &Lab, i: usize, token: &std::path::Path) -> String {
    let connect: Vec<String> = (0..i).map(|j| format!("\"tcp/{}:{ZENOH_PORT}\"", lab.address(i, j))).collect();
    let owner = if i == 0 { String::new() } else { "owner = \"rack0\"\n".into() };
    format!(
        "[hub]\nname = \"rack{i}\"\n\n[federation]\nlisten = [\"tcp/0.0.0.0:{ZENOH_PORT}\"]\nconnect = [{}]\n\
         token_file = \"{}\"\n\n[[channel]]\nname = \"body\"\nfederated = true\n{owner}",
        connect.join(", "),
        token.display()
    )
}

fn federation(client: &Client) -> fieldhub_proto::stats::FederationStats {
    let stats = client.stats().unwrap();
    stats.channels.iter().find(|c| c.name == "body").unwrap().federation.clone().unwrap()
}

/// A lossless listener: every frame it receives until the last frames of
/// the relays' and the restarted owner's senders are in (or its hub dies:
/// the first owner's listener); what it got when it stalled.
fn listen(client: &Client, received: &AtomicUsize) -> Result<Vec<Received>, String> {
    let mut got = Vec::new();
    let mut finished: HashSet<u8> = HashSet::new();
    while finished.len() < 3 {
        let r = match client.recv(Some(PATIENCE)) {
            Ok(Some(r)) => r,
            Ok(None) => {
                let last = got.last().map(|r: &Received| number_of(&r.frame));
                return Err(format!("stalled after {} frames (the last {last:?}); finished: {finished:?}", got.len()));
            }
            Err(_) => return Ok(got),
        };
        let (tag, counter) = number_of(&r.frame);
        let last = if tag == RESTARTED_TAG { AFTER_RESTART - 1 } else { PER_RELAY_SENDER - 1 };
        if tag != OWNER_TAG && counter == last {
            finished.insert(tag);
        }
        got.push(r);
        received.fetch_add(1, Ordering::Relaxed);
    }
    Ok(got)
}

/// A hub's log lines of the federation, for a failure's message.
fn federation_log(hub: &HubProcess) -> Vec<String> {
    hub.log().into_iter().filter(|l| l.contains("federation") || l.contains("WARN") || l.contains("ERROR")).collect()
}

/// Send `count` numbered frames; every one must be taken (credit waits
/// out the owner's absence).
fn send_all(client: &Client, port: &Port, id: u32, tag: u8, count: u32) {
    for n in 0..count {
        client.send_timeout(port, &numbered(id, tag, n), Some(PATIENCE)).unwrap();
    }
}

/// Flush until the hub has nothing more to report: frames reported off the
/// bus (`TX_DROPPED`), by reason.
fn flush_drops(client: &Client) -> HashMap<u16, u64> {
    let mut drops = HashMap::new();
    loop {
        match client.flush() {
            Ok(_) => return drops,
            Err(ClientError::Dropped { reason, dropped, .. }) => {
                *drops.entry(reason).or_default() += u64::from(dropped)
            }
            Err(other) => panic!("flush failed: {other:?}"),
        }
    }
}

/// The conditions reported, in order, and the frames reported missing.
fn conditions(events: &[ChannelEvent]) -> (Vec<ChannelCondition>, u64) {
    let missed = events.iter().filter(|e| e.condition == Some(ChannelCondition::Gap)).map(|e| u64::from(e.missed));
    (events.iter().filter_map(|e| e.condition).collect(), missed.sum())
}

/// A numbered frame: its sender's tag and counter.
type Numbered = (u8, u32);

/// The frames both sequences hold, in `a`'s order and in `b`'s.
fn common(a: &[Numbered], b: &[Numbered]) -> (Vec<Numbered>, Vec<Numbered>) {
    let (in_a, in_b): (HashSet<_>, HashSet<_>) = (a.iter().collect(), b.iter().collect());
    (a.iter().copied().filter(|f| in_b.contains(f)).collect(), b.iter().copied().filter(|f| in_a.contains(f)).collect())
}

/// One run: the owner is killed once the relays' listeners together have
/// received a seeded number of frames, and restarted once both relays saw
/// it leave.
fn owner_killed_and_restarted(seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let kill_after = rng.gen_range(2_000..8_000usize);
    let lab = Lab::new(FIELDHUB, "owner_killed_mid_traffic", 3)
        .unwrap_or_else(|| panic!("seed {seed}: network namespaces are needed (run as root); this test does not skip"));
    let token = token_file("fate-federation-secret");
    let owner = lab.hub(0, &config(&lab, 0, &token));
    owner.wait_for_log("this hub owns the channel");
    let relays = [lab.hub(1, &config(&lab, 1, &token)), lab.hub(2, &config(&lab, 2, &token))];
    for relay in &relays {
        relay.wait_for_log("the owner is there");
    }

    let open = |hub: &HubProcess, name: &str| {
        let client = hub.client(name);
        let port = client.open_port_with("body", &lossless()).unwrap();
        (client, port)
    };
    let (owner_sender, owner_tx) = open(&owner, "sender");
    let (owner_listener, _) = open(&owner, "listener");
    let relay_senders: Vec<(Client, Port)> = relays.iter().map(|r| open(r, "sender")).collect();
    let relay_listeners: Vec<Client> = relays.iter().map(|r| open(r, "listener").0).collect();
    // Every port is open on every hub before the traffic starts.
    let senders = relay_senders.iter().map(|(client, _)| client).chain([&owner_sender]);
    for client in senders.chain(&relay_listeners).chain([&owner_listener]) {
        client.flush().unwrap();
    }

    let received = AtomicUsize::new(0);
    let owner_sent = AtomicUsize::new(0);
    let killed = AtomicBool::new(false);
    let mut owner = Some(owner);
    let (relay_frames, first_owner_frames, restarted) = std::thread::scope(|s| {
        let listening: Vec<_> = relay_listeners.iter().map(|l| s.spawn(|| listen(l, &received))).collect();
        let first_owner_listening = s.spawn(|| listen(&owner_listener, &AtomicUsize::new(0)));
        for ((client, port), tag) in relay_senders.iter().zip(RELAY_TAGS) {
            s.spawn(move || send_all(client, port, 0x100 + u32::from(tag), tag, PER_RELAY_SENDER));
        }
        // The owner's own sender runs until its hub dies under it.
        s.spawn(|| {
            for n in 0..PER_RELAY_SENDER {
                if owner_sender.send_timeout(&owner_tx, &numbered(0x100, OWNER_TAG, n), Some(PATIENCE)).is_err() {
                    return;
                }
                owner_sent.fetch_add(1, Ordering::Relaxed);
            }
        });
        wait_until(deadline(), format!("seed {seed}: {kill_after} frames before the kill"), || {
            received.load(Ordering::Relaxed) >= kill_after
        });
        // SIGKILL: the hub's last events may reach one relay and not the other.
        drop(owner.take());
        killed.store(true, Ordering::Release);
        for relay in &relays {
            relay.wait_for_log("the owner hub left");
        }
        let restarted = lab.hub(0, &config(&lab, 0, &token));
        restarted.wait_for_log("this hub owns the channel");
        let (sender, tx) = open(&restarted, "sender-after-restart");
        send_all(&sender, &tx, 0x103, RESTARTED_TAG, AFTER_RESTART);
        let frames: Vec<Vec<Received>> = listening
            .into_iter()
            .enumerate()
            .map(|(r, t)| {
                t.join().unwrap().unwrap_or_else(|why| {
                    let logs: Vec<Vec<String>> = relays.iter().chain([&restarted]).map(federation_log).collect();
                    panic!("seed {seed}: rack{}'s listener {why}; rack1, rack2, rack0: {logs:#?}", r + 1)
                })
            })
            .collect();
        let first_owner_frames = first_owner_listening.join().unwrap().unwrap_or_else(|why| panic!("{why}"));
        (frames, first_owner_frames, (restarted, sender))
    });
    assert!(killed.load(Ordering::Acquire));
    let orders: Vec<Vec<Numbered>> = relay_frames.iter().map(|f| order(f)).collect();

    // Nothing doubled, each sender's frames in the order sent, on every relay.
    for (r, seq) in orders.iter().enumerate() {
        let mut last: HashMap<u8, u32> = HashMap::new();
        for &(tag, counter) in seq {
            let previous = last.insert(tag, counter);
            assert!(
                previous.is_none_or(|p| counter > p),
                "seed {seed}: rack{}: sender {tag}'s frame {counter} after {previous:?}",
                r + 1
            );
        }
    }
    // One order: the frames two relays share are in the same order.
    let (a, b) = common(&orders[0], &orders[1]);
    assert!(a == b, "seed {seed}: the relays hold their common frames in different orders");

    // A frame one relay lacks is reported to its listener as a gap and
    // counted; a relay that reports nothing lacks nothing.
    let everywhere: HashSet<Numbered> = orders.iter().flatten().copied().collect();
    for (r, (listener, seq)) in relay_listeners.iter().zip(&orders).enumerate() {
        let held: HashSet<_> = seq.iter().copied().collect();
        let lacking = everywhere.difference(&held).count() as u64;
        let events = listener.channel_events();
        let (told, missed) = conditions(&events);
        let gaps = told.iter().filter(|c| **c == ChannelCondition::Gap).count() as u64;
        assert!(
            lacking <= missed,
            "seed {seed}: rack{} lacks {lacking} frames the other relay holds, but was told of {missed} missed ({events:?})",
            r + 1
        );
        assert_eq!(federation(listener).desyncs, gaps, "seed {seed}: rack{}: gaps told and counted", r + 1);
        // Told the channel waits while the owner is gone, and is live again.
        let waiting = told.iter().position(|c| *c == ChannelCondition::Waiting);
        let live = told.iter().rposition(|c| *c == ChannelCondition::Live);
        assert!(
            waiting.zip(live).is_some_and(|(w, l)| w < l),
            "seed {seed}: rack{}'s listener was not told waiting, then live: {events:?}",
            r + 1
        );
    }

    // Every relay sender's frame is on every relay, or reported to its
    // sender as dropped (and then on none).
    for ((client, port), tag) in relay_senders.iter().zip(RELAY_TAGS) {
        let drops = flush_drops(client);
        let dropped: u64 = drops.values().sum();
        assert_eq!(client.tx_dropped(port), dropped, "seed {seed}: sender {tag}: drops told and counted");
        for (r, seq) in orders.iter().enumerate() {
            let on_relay = seq.iter().filter(|(t, _)| *t == tag).count() as u64;
            assert_eq!(
                on_relay + dropped,
                u64::from(PER_RELAY_SENDER),
                "seed {seed}: rack{}: sender {tag}'s frames on the bus plus those reported dropped ({drops:?})",
                r + 1
            );
        }
    }
    // The restarted owner's frames are everywhere.
    for (r, seq) in orders.iter().enumerate() {
        let counters: Vec<u32> = seq.iter().filter(|(t, _)| *t == RESTARTED_TAG).map(|&(_, n)| n).collect();
        assert_eq!(counters, (0..AFTER_RESTART).collect::<Vec<_>>(), "seed {seed}: rack{}", r + 1);
    }
    // The first owner's frames on the relays are the first ones it sent,
    // none missing between; those its hub never published died with it.
    let from_owner: Vec<u32> = {
        let mut c: Vec<u32> = everywhere.iter().filter(|(t, _)| *t == OWNER_TAG).map(|&(_, n)| n).collect();
        c.sort_unstable();
        c
    };
    assert_eq!(from_owner, (0..from_owner.len() as u32).collect::<Vec<_>>(), "seed {seed}: the owner's frames");
    assert!(from_owner.len() <= owner_sent.load(Ordering::Relaxed), "seed {seed}");
    // A relay's frame the first owner committed (its listener saw it) is on
    // the relays: in the events they applied, or sent again to the new owner.
    for (tag, counter) in order(&first_owner_frames) {
        if RELAY_TAGS.contains(&tag) {
            assert!(everywhere.contains(&(tag, counter)), "seed {seed}: sender {tag}'s frame {counter} was lost");
        }
    }
    let (restarted, sender) = restarted;
    assert_eq!(flush_drops(&sender), HashMap::new(), "seed {seed}: the restarted owner's sender");
    drop(restarted);
    // How each relay ended the first owner's term: what it fetched from the
    // other, what it lacked.
    let ends: Vec<String> = relays.iter().flat_map(|r| r.log()).filter(|l| l.contains("term ends here")).collect();
    eprintln!(
        "seed {seed}: killed after {kill_after} frames; the relays hold {} and {} frames; the first owner's listener \
         saw {}; {ends:#?}",
        orders[0].len(),
        orders[1].len(),
        first_owner_frames.len()
    );
}

#[test]
fn the_owner_killed_mid_traffic_and_restarted_every_frame_is_on_every_relay_or_reported() {
    for seed in [0x0F_A7E1, 0x0F_A7E2, 0x0F_A7E3] {
        owner_killed_and_restarted(seed);
    }
}

/// A loopback hub `name` listening for federation on `listen`, connecting
/// to `connect`, with `extra` keys in `[federation]` and the channel's
/// `owner` when it relays.
fn loopback(name: &str, listen: u16, connect: &[u16], owner: Option<&str>, extra: &str) -> String {
    let connect: Vec<String> = connect.iter().map(|p| format!("\"tcp/127.0.0.1:{p}\"")).collect();
    let owner = owner.map(|o| format!("owner = \"{o}\"\n")).unwrap_or_default();
    format!(
        "[hub]\nname = \"{name}\"\n\n[federation]\nlisten = [\"tcp/127.0.0.1:{listen}\"]\nconnect = [{}]\n{extra}\n\
         [[channel]]\nname = \"body\"\nfederated = true\n{owner}",
        connect.join(", ")
    )
}

/// Read `child`'s standard output to its end on a thread, counting lines in `lines`.
fn read_lines(child: &mut std::process::Child, lines: &std::sync::Arc<AtomicUsize>) -> std::thread::JoinHandle<String> {
    use std::io::BufRead;
    let (out, lines) = (child.stdout.take().unwrap(), std::sync::Arc::clone(lines));
    std::thread::spawn(move || {
        let mut text = String::new();
        for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            text.push_str(&line);
            text.push('\n');
            lines.fetch_add(1, Ordering::Relaxed);
        }
        text
    })
}

#[test]
fn gen_and_dump_on_a_relay_ride_out_the_owners_restart_and_dump_tells_waiting_and_live() {
    use std::process::Stdio;
    const FRAMES: usize = 2_000;
    let ports = [free_port(), free_port()];
    let owner_config = loopback("rack1", ports[0], &[], None, "");
    let owner = FIELDHUB.start_with(Some(&owner_config), &[]);
    owner.wait_for_log("this hub owns the channel");
    let relay = FIELDHUB.start_with(Some(&loopback("rack2", ports[1], &[ports[0]], Some("rack1"), "")), &[]);
    relay.wait_for_log("the owner is there");

    let mut dump = FIELDHUB
        .command()
        .args(["dump", "--hub", &relay.url, "--lossless", "--port", "dumper", "-n", &FRAMES.to_string(), "body"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let dumped = std::sync::Arc::new(AtomicUsize::new(0));
    let dump_out = read_lines(&mut dump, &dumped);
    let probe = relay.client("probe");
    wait_until(deadline(), "dump's port is open", || probe.stats().unwrap().ports.iter().any(|p| p.name == "dumper"));
    // One frame a millisecond, incrementing payload; confirmations may
    // wait out the owner's absence.
    let gen = FIELDHUB
        .command()
        .args(["gen", "--hub", &relay.url, "--timeout", "60", "-n", &FRAMES.to_string(), "-g", "1"])
        .args(["-I", "123", "-L", "8", "-D", "i", "body"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_until(deadline(), "a fifth of the frames dumped", || dumped.load(Ordering::Relaxed) >= FRAMES / 5);
    drop(owner);
    relay.wait_for_log("the owner hub left");
    let owner = FIELDHUB.start_with(Some(&owner_config), &[]);
    owner.wait_for_log("this hub owns the channel");

    let gen = gen.wait_with_output().unwrap();
    let gen_err = String::from_utf8_lossy(&gen.stderr);
    assert!(gen.status.success(), "gen on the relay failed across the owner's restart: {gen_err}");
    let status = dump.wait().unwrap();
    let mut dump_err = String::new();
    std::io::Read::read_to_string(&mut dump.stderr.take().unwrap(), &mut dump_err).unwrap();
    let out = dump_out.join().unwrap();
    assert!(status.success(), "dump: {dump_err}");
    // Every frame once, in the order gen sent them: the payload counts up.
    let counters: Vec<u64> = out
        .lines()
        .map(|line| {
            let bytes: Vec<u8> = line.split_whitespace().skip(3).map(|b| u8::from_str_radix(b, 16).unwrap()).collect();
            u64::from_le_bytes(bytes.try_into().unwrap())
        })
        .collect();
    assert_eq!(counters, (0..FRAMES as u64).collect::<Vec<_>>(), "dump's frames");
    let waiting = dump_err.find("dump: waiting: channel 'body'");
    let live = dump_err.rfind("dump: live: channel 'body'");
    assert!(
        waiting.zip(live).is_some_and(|(w, l)| w < l),
        "dump did not print the channel's waiting, then live: {dump_err}"
    );
    assert!(dump_err.contains("rack1"), "the owner is named: {dump_err}");
}

#[test]
fn a_relay_frame_the_owners_bus_drops_reaches_its_sender_as_dropped_with_the_reason() {
    let ports = [free_port(), free_port()];
    let owner = FIELDHUB.start_with(Some(&loopback("rack1", ports[0], &[], None, "")), &[]);
    owner.wait_for_log("this hub owns the channel");
    let relay = FIELDHUB.start_with(Some(&loopback("rack2", ports[1], &[ports[0]], Some("rack1"), "")), &[]);
    relay.wait_for_log("the owner is there");
    // The owner's fault rule drops 0x666 as it leaves its sender's queue.
    let rule = serde_json::json!({"channel": "body", "at": "sender", "id": 0x666, "mask": 0x7FF,
        "action": {"type": "drop"}});
    ok(&owner, "POST", "/api/v1/faults", Some(rule));
    let (sender, listener) = (relay.client("sender"), relay.client("listener"));
    let tx = sender.open_port_with("body", &lossless()).unwrap();
    listener.open_port_with("body", &lossless()).unwrap();
    listener.flush().unwrap();

    // Alone in its queue, with nothing after it: the flush is answered, and
    // says why the frame is not on the bus.
    sender.send(&tx, &fieldhub_client::Frame::can(0x666, false, &[1]).unwrap()).unwrap();
    match sender.flush() {
        Err(ClientError::Dropped { reason, dropped: 1, .. }) if reason == DropReason::FaultRule as u16 => {}
        other => panic!("the owner's drop did not reach the relay's sender: {other:?}"),
    }
    // The next frame is on the bus, and the drop is not counted again.
    sender.send(&tx, &numbered(0x123, 1, 0)).unwrap();
    sender.flush().unwrap();
    assert_eq!(recv_n(&listener, 1)[0].frame.id(), 0x123);
    assert_nothing_pending(&listener);
    assert_eq!(sender.tx_dropped(&tx), 1);
    let stats = sender.stats().unwrap();
    let port = stats.ports.iter().find(|p| p.port_id == tx.port_id).unwrap();
    assert_eq!(port.tx_dropped_by_reason, [("fault_rule".to_owned(), 1)].into(), "counted by the owner's reason");
}

#[test]
fn a_federation_token_another_hub_refuses_is_named_on_both_sides_and_told_to_waiting_clients() {
    let (secret, other) = (token_file("rack-secret"), token_file("another-secret"));
    let token = |path: &std::path::Path| format!("token_file = \"{}\"\n", path.display());
    let ports = [free_port(), free_port()];
    // The owner only listens: Zenoh tells a refusal there only at debug
    // level, and the hub names it all the same.
    let owner = FIELDHUB.start_with(Some(&loopback("rack1", ports[0], &[], None, &token(&secret))), &[]);
    owner.wait_for_log("this hub owns the channel");
    let relay =
        FIELDHUB.start_with(Some(&loopback("rack2", ports[1], &[ports[0]], Some("rack1"), &token(&other))), &[]);
    relay.wait_for_log("this hub relays the channel");
    let sender = relay.client("sender");
    let tx = sender.open_port_with("body", &lossless()).unwrap();
    sender.send(&tx, &numbered(0x123, 1, 0)).unwrap();

    // The frame waits; its sender is told why, with what to fix.
    let told = wait_for(deadline(), "the relay's client told the token is refused", || {
        sender
            .channel_events()
            .into_iter()
            .find(|e| e.condition == Some(ChannelCondition::Waiting) && e.text.contains("federation tokens differ"))
    });
    assert!(told.text.contains("rack1") && told.text.contains("token_file"), "{told:?}");
    for (hub, file, refusal) in
        [(&relay, &other, "refused this hub's link"), (&owner, &secret, "tried to link to this hub and was refused")]
    {
        let line = hub.wait_for_log(refusal);
        assert!(line.contains("token_file") && line.contains(&file.display().to_string()), "{line}");
    }
    assert_eq!(sender.stats().unwrap().ports.iter().find(|p| p.port_id == tx.port_id).unwrap().tx_pending, 1);
}
