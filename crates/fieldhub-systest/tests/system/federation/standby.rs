//! Owner loss with a standby (issue 20): the owner hub is killed while
//! every hub sends numbered frames; the relays tell their clients the
//! channel waits, the configured standby takes it over with a higher epoch
//! and traffic goes on, in one order on every hub, nothing out of order,
//! and what one hub lacks of the old owner's last events reported to it.
//! The old owner that comes back with its older epoch does not take the
//! channel back: it sees the newer owner and relays the channel from then on.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::FIELDHUB;
use fieldhub_client::fate::ChannelCondition;
use fieldhub_client::{Client, ClientError, Received};
use fieldhub_testkit::federation::{free_port, order};
use fieldhub_testkit::*;

const PER_SENDER: u32 = 3_000;

fn config(name: &str, listen: u16, connect: &[u16], extra: &str) -> String {
    let connect: Vec<String> = connect.iter().map(|p| format!("\"tcp/127.0.0.1:{p}\"")).collect();
    format!(
        "[hub]\nname = \"{name}\"\n\n[federation]\nlisten = [\"tcp/127.0.0.1:{listen}\"]\nconnect = [{}]\n\n\
         [[channel]]\nname = \"body\"\nfederated = true\n{extra}",
        connect.join(", ")
    )
}

/// Flush until the hub has nothing left to report; the errors and drops
/// (`TX_DROPPED`), in order.
fn flush_errors(client: &Client) -> Vec<String> {
    let mut errors = Vec::new();
    loop {
        match client.flush() {
            Ok(_) => return errors,
            Err(ClientError::Rejected { text, .. }) => errors.push(text),
            Err(dropped @ ClientError::Dropped { .. }) => errors.push(dropped.to_string()),
            Err(other) => panic!("flush failed: {other:?}"),
        }
    }
}

/// Each sender's counters rise strictly: nothing doubled or out of order.
fn assert_rising(name: &str, frames: &[Received]) {
    let mut last: [Option<u32>; 4] = [None; 4];
    for (sender, counter) in order(frames) {
        let slot = &mut last[sender as usize];
        assert!(slot.is_none_or(|l| counter > l), "{name}: sender {sender}'s frame {counter} after {slot:?}");
        *slot = Some(counter);
    }
}

/// Receive until the last frames of the senders on the standby and the
/// relay (2 and 3) are in; counts frames in `progress` on the way.
fn receive_until_both_finished(client: &Client, progress: &AtomicUsize) -> Vec<Received> {
    let mut got = Vec::new();
    let mut finished = [false; 2];
    while finished != [true, true] {
        let Some(r) = client.recv(Some(Duration::from_secs(20))).unwrap() else { return got };
        let (sender, counter) = number_of(&r.frame);
        if (2..=3).contains(&sender) && counter == PER_SENDER - 1 {
            finished[sender as usize - 2] = true;
        }
        got.push(r);
        progress.fetch_add(1, Ordering::Relaxed);
    }
    got
}

fn federation(client: &Client) -> fieldhub_proto::stats::FederationStats {
    let stats = client.stats().unwrap();
    stats.channels.iter().find(|c| c.name == "body").unwrap().federation.clone().unwrap()
}

#[test]
fn a_standby_takes_over_a_killed_owner_with_a_higher_epoch_and_the_old_owner_then_relays() {
    let ports = [free_port(), free_port(), free_port()];
    let owner_config = config("rack1", ports[0], &[], "");
    let owner = FIELDHUB.start_with(Some(&owner_config), &[]);
    owner.wait_for_log("this hub owns the channel");
    let standby =
        FIELDHUB.start_with(Some(&config("rack2", ports[1], &[ports[0]], "owner = \"rack1\"\nstandby = true\n")), &[]);
    let relay =
        FIELDHUB.start_with(Some(&config("rack3", ports[2], &[ports[0], ports[1]], "owner = \"rack1\"\n")), &[]);
    standby.wait_for_log("the owner is there");
    relay.wait_for_log("the owner is there");

    let owner_sender = owner.client("owner-sender");
    let owner_tx = owner_sender.open_port_with("body", &lossless()).unwrap();
    let senders: Vec<(Client, fieldhub_client::Port)> = [&standby, &relay]
        .iter()
        .map(|hub| {
            let client = hub.client("sender");
            let port = client.open_port_with("body", &lossless()).unwrap();
            (client, port)
        })
        .collect();
    let listeners: Vec<Client> = [&standby, &relay]
        .iter()
        .map(|hub| {
            let client = hub.client("listener");
            client.open_port_with("body", &lossless()).unwrap();
            client
        })
        .collect();
    // Watches for the report: its port on the channel takes no frames, so
    // its flushes never wait behind a full receive queue.
    let watcher = relay.client("watcher");
    let watching = watcher.open_port("body").unwrap();
    watcher.set_filters(&watching, Some(&[])).unwrap();
    watcher.flush().unwrap();

    let progress = AtomicUsize::new(0);
    let first_half_committed = AtomicBool::new(false);
    let started = Instant::now();
    let (frames, reported_after) = std::thread::scope(|s| {
        let receiving: Vec<_> =
            listeners.iter().map(|l| s.spawn(|| receive_until_both_finished(l, &progress))).collect();
        // The relay's sender runs through the owner's death.
        s.spawn(|| {
            let (client, port) = &senders[1];
            for n in 0..PER_SENDER {
                client.send_timeout(port, &numbered(0x103, 3, n), Some(PATIENCE)).unwrap();
            }
        });
        // The standby's sender pauses while the owner dies: a frame of its
        // own the old owner committed and published to the relay but not to
        // it would be sent again (see docs/federation.md, Limits).
        s.spawn(|| {
            let (client, port) = &senders[0];
            let send = |n| client.send_timeout(port, &numbered(0x102, 2, n), Some(PATIENCE)).unwrap();
            (0..PER_SENDER / 2).for_each(send);
            // Committed on every hub once flushed (the owner is still there).
            while let Err(ClientError::Timeout(_)) = client.flush() {}
            first_half_committed.store(true, Ordering::Release);
            standby.wait_for_log("this hub takes the channel over");
            flush_errors(client);
            (PER_SENDER / 2..PER_SENDER).for_each(send);
        });
        // The owner's own sender runs until its hub dies under it.
        s.spawn(|| {
            for n in 0..PER_SENDER {
                if owner_sender.send_timeout(&owner_tx, &numbered(0x101, 1, n), Some(PATIENCE)).is_err() {
                    break;
                }
            }
        });
        // Mid-traffic: once the listeners have seen a quarter of the frames.
        wait_until(started + PATIENCE, "the traffic before the owner's death goes on", || {
            progress.load(Ordering::Relaxed) >= PER_SENDER as usize && first_half_committed.load(Ordering::Acquire)
        });
        let killed_at = Instant::now();
        drop(owner);
        // Every client port on the channel is told it waits for an owner.
        let waiting = poll(deadline(), || {
            watcher.channel_events().into_iter().find(|e| e.condition == Some(ChannelCondition::Waiting))
        })
        .unwrap_or_else(|| panic!("the relay's clients were not told the channel waits; log: {:#?}", relay.log()));
        assert!(waiting.text.contains("body") && waiting.text.contains("rack1"), "{waiting:?}");
        let reported_after = killed_at.elapsed();
        let frames: Vec<Vec<Received>> = receiving.into_iter().map(|t| t.join().unwrap()).collect();
        (frames, reported_after)
    });
    eprintln!("the relay reported the owner's death {reported_after:?} after the kill");
    let federation_log = |hub: &HubProcess| -> Vec<String> {
        hub.log()
            .into_iter()
            .filter(|l| l.contains("federation") || l.contains("ERROR") || l.contains("WARN"))
            .collect()
    };
    for (i, got) in frames.iter().enumerate() {
        let last = |tag| counters_from(got, tag).last().copied();
        assert!(
            last(2) == Some(PER_SENDER - 1) && last(3) == Some(PER_SENDER - 1),
            "listener {i} stopped at {:?}/{:?}; standby: {:#?}; relay: {:#?}",
            last(2),
            last(3),
            federation_log(&standby),
            federation_log(&relay)
        );
    }
    standby.wait_for_log("this hub takes the channel over");
    for (client, _) in &senders {
        flush_errors(client);
    }
    for (i, got) in frames.iter().enumerate() {
        assert_rising(&format!("listener {i}"), got);
    }
    // Every frame the two surviving senders sent after the takeover is
    // there.
    for (i, got) in frames.iter().enumerate() {
        for tag in [2u8, 3] {
            let counters = counters_from(got, tag);
            assert_eq!(counters.last(), Some(&(PER_SENDER - 1)), "listener {i}: sender {tag} did not finish");
        }
    }
    // One order on both hubs: the frames both saw are in the same order,
    // and a frame one lacks of the old owner's last events (the other
    // applied it, and its history was not to be had) is reported to it.
    let [a, b] = [order(&frames[0]), order(&frames[1])];
    let in_b: std::collections::HashSet<_> = b.iter().copied().collect();
    let in_a: std::collections::HashSet<_> = a.iter().copied().collect();
    let common_a: Vec<_> = a.iter().copied().filter(|f| in_b.contains(f)).collect();
    let common_b: Vec<_> = b.iter().copied().filter(|f| in_a.contains(f)).collect();
    assert!(common_a == common_b, "the standby and the relay saw the frames they share in different orders");
    for (listener, held, other) in [(&listeners[0], &in_a, &in_b), (&listeners[1], &in_b, &in_a)] {
        let lacking = other.difference(held).count();
        let missed: u64 = listener
            .channel_events()
            .iter()
            .filter(|e| e.condition == Some(ChannelCondition::Gap))
            .map(|e| u64::from(e.missed))
            .sum();
        assert!(lacking as u64 <= missed, "a listener lacks {lacking} frames the other holds, told of {missed}");
    }

    let (on_standby, on_relay) = (federation(&senders[0].0), federation(&senders[1].0));
    assert_eq!((on_standby.role.as_str(), on_standby.owner.as_str(), on_standby.epoch), ("owner", "rack2", 2));
    assert_eq!((on_relay.role.as_str(), on_relay.owner.as_str(), on_relay.epoch), ("relay", "rack2", 2));

    // The old owner comes back with its configured epoch 1: it sees rack2's
    // newer epoch and relays the channel; its own frames reach everyone
    // through rack2.
    let returned = FIELDHUB.start_with(Some(&owner_config), &[]);
    returned.wait_for_log("changed hands");
    let back = returned.client("back");
    let back_tx = back.open_port_with("body", &lossless()).unwrap();
    let listen_back = returned.client("listener");
    listen_back.open_port_with("body", &lossless()).unwrap();
    flush_errors(&back);
    flush_errors(&listen_back);
    for n in 0..100 {
        back.send_timeout(&back_tx, &numbered(0x105, 5, n), Some(PATIENCE)).unwrap();
    }
    back.flush().unwrap();
    for listener in [&listeners[1], &listen_back] {
        // Only the returned hub's sender sends now.
        assert_eq!(counters_from(&recv_n(listener, 100), 5), (0..100).collect::<Vec<_>>());
        flush_errors(listener);
        assert_nothing_pending(listener);
    }
    let f = federation(&back);
    assert_eq!((f.role.as_str(), f.owner.as_str(), f.epoch), ("relay", "rack2", 2));
    let f = federation(&senders[1].0);
    assert_eq!((f.owner.as_str(), f.epoch), ("rack2", 2), "the relay still follows rack2's epoch 2");
}
