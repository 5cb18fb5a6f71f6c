//! Federated hubs (issue 20) in three Linux network namespaces joined by
//! veth pairs, as on three machines: each hub's Zenoh links cross a real
//! link between network stacks. The test's clients reach each hub over its
//! unix socket (a filesystem socket is not bound to a network namespace),
//! so the only traffic between hubs is the federation's.
//!
//! Needs root to make the namespaces; without it the test says so and
//! passes as skipped, unless `FIELDHUB_NETNS_REQUIRED=1`.

use crate::FIELDHUB;
use fieldhub_client::{PortConfig, Received};
use fieldhub_testkit::federation::{check_senders, order, token_file};
use fieldhub_testkit::netns::Lab;
use fieldhub_testkit::*;

const FRAMES: u32 = 100_000;

/// The Zenoh port every hub listens on, each in its own namespace.
const ZENOH_PORT: u16 = 7447;

/// Hub `i` of the lab: `rack0` owns `body`; each hub connects to those
/// started before it, over the veth link between their namespaces.
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

/// Bytes received and sent on interface `dev` of namespace `i`.
fn link_bytes(lab: &Lab, i: usize, dev: &str) -> u64 {
    let read = |what: &str| -> u64 {
        let out = lab.run(i, "cat", &[&format!("/sys/class/net/{dev}/statistics/{what}")]).unwrap();
        String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
    };
    read("rx_bytes") + read("tx_bytes")
}

#[test]
fn hundred_thousand_frames_from_three_namespaced_hubs_arrive_everywhere_in_one_order() {
    let Some(lab) = Lab::new(FIELDHUB, "hundred_thousand_frames_from_three_namespaced_hubs", 3) else { return };
    // The hubs listen beyond loopback, so their links need the shared token.
    let token = token_file("netns-federation-secret");
    let owner = lab.hub(0, &config(&lab, 0, &token));
    owner.wait_for_log("this hub owns the channel");
    let relays = [lab.hub(1, &config(&lab, 1, &token)), lab.hub(2, &config(&lab, 2, &token))];
    for relay in &relays {
        relay.wait_for_log("the owner is there");
    }
    let hubs = [&owner, &relays[0], &relays[1]];
    let before: Vec<u64> = [(1, "v0"), (2, "v0")].iter().map(|&(i, dev)| link_bytes(&lab, i, dev)).collect();

    // Sender `i` on hub `i` sends its share; the shares add up to FRAMES.
    let share = |i: u8| FRAMES / 3 + u32::from(u32::from(i) < FRAMES % 3);
    let echoing = PortConfig { receive_own: true, block_on_overflow: true, ..Default::default() };
    let senders: Vec<_> = hubs
        .iter()
        .enumerate()
        .map(|(i, hub)| {
            let client = hub.client(&format!("sender-{i}"));
            let port = client.open_port_with("body", &echoing).unwrap();
            (client, port)
        })
        .collect();
    let listeners: Vec<_> = hubs
        .iter()
        .enumerate()
        .map(|(i, hub)| {
            let client = hub.client(&format!("listener-{i}"));
            client.open_port_with("body", &lossless()).unwrap();
            client
        })
        .collect();

    let total = FRAMES as usize;
    let seen: Vec<Vec<Received>> = std::thread::scope(|s| {
        let receiving: Vec<_> = senders
            .iter()
            .map(|(client, _)| client)
            .chain(&listeners)
            .map(|client| s.spawn(move || recv_n(client, total)))
            .collect();
        for (tag, (client, port)) in senders.iter().enumerate() {
            s.spawn(move || {
                for n in 0..share(tag as u8) {
                    client.send_timeout(port, &numbered(0x100 + tag as u32, tag as u8, n), Some(PATIENCE)).unwrap();
                }
            });
        }
        receiving.into_iter().map(|t| t.join().unwrap()).collect()
    });

    let counts: Vec<(u8, u32)> = (0..3u8).map(|s| (s, share(s))).collect();
    let reference = order(&seen[0]);
    let names = ["sender on rack0", "sender on rack1", "sender on rack2", "listener on rack0", "listener on rack1"];
    for (i, frames) in seen.iter().enumerate() {
        let name = names.get(i).copied().unwrap_or("listener on rack2");
        check_senders(name, frames, &counts);
        assert!(order(frames) == reference, "{name} saw another order than the sender on the owner");
    }
    for ((client, port), listener) in senders.iter().zip(&listeners) {
        client.flush().unwrap();
        assert_eq!(client.rx_dropped(port), 0);
        assert_nothing_pending(client);
        listener.flush().unwrap();
        assert_nothing_pending(listener);
    }
    for (i, (client, _)) in senders.iter().enumerate() {
        let stats = client.stats().unwrap();
        let f = stats.channels.iter().find(|c| c.name == "body").unwrap().federation.clone().unwrap();
        assert_eq!((f.epoch, f.last_seq, f.desyncs, f.stale), (1, u64::from(FRAMES), 0, 0), "rack{i}");
    }
    // The events crossed the veth links: each relay's link to the owner
    // carried at least 16 bytes per committed event.
    for (k, &(i, dev)) in [(1, "v0"), (2, "v0")].iter().enumerate() {
        let carried = link_bytes(&lab, i, dev) - before[k];
        assert!(carried >= 16 * u64::from(FRAMES), "rack{i}'s link to the owner carried only {carried} bytes");
    }
}
