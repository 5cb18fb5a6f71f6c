//! How federated hubs use Zenoh (issue 35): the low-latency transport,
//! which never fragments a message, carries full batches of the largest
//! frames; Zenoh receives on the threads that watch the links (the hub's
//! `ZENOH_RUNTIME`), and a `ZENOH_RUNTIME` of the user's is kept.

use crate::FIELDHUB;
use fieldhub_testkit::federation::{free_port, relay_sender_and_listeners};
use fieldhub_testkit::*;

fn config(name: &str, listen: u16, connect: Option<u16>, owner: Option<&str>) -> String {
    let connect = connect.map(|p| format!("\"tcp/127.0.0.1:{p}\"")).unwrap_or_default();
    let owner = owner.map(|o| format!("owner = \"{o}\"\n")).unwrap_or_default();
    format!(
        "[hub]\nname = \"{name}\"\n\n[federation]\nlisten = [\"tcp/127.0.0.1:{listen}\"]\nconnect = [{connect}]\n\n\
         [[channel]]\nname = \"body\"\nfederated = true\n{owner}protocol = \"canxl\"\nxl_data_bitrate = 10000000\n"
    )
}

/// An owner and a relay of the CAN XL channel `body`, linked, each hub
/// started with `env`.
fn owner_and_relay(env: &[(&str, &str)]) -> (HubProcess, HubProcess) {
    let ports = [free_port(), free_port()];
    let owner = FIELDHUB.start_with_env(Some(&config("rack1", ports[0], None, None)), &[], env);
    owner.wait_for_log("this hub owns the channel");
    let relay = FIELDHUB.start_with_env(Some(&config("rack2", ports[1], Some(ports[0]), Some("rack1"))), &[], env);
    relay.wait_for_log("the owner is there");
    (owner, relay)
}

/// The names of a process's threads.
fn threads(pid: u32) -> Vec<String> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).expect("the hub's threads");
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
        .map(|n| n.trim().into())
        .collect()
}

/// The largest frames there are, sent as fast as credit allows: the relay's
/// uplink and the owner's writer each fill batches of them, which must stay
/// within one Zenoh batch (a larger message closes a low-latency link).
#[test]
fn a_flood_of_2048_byte_xl_frames_crosses_the_low_latency_link_whole_and_in_order() {
    let (owner, relay) = owner_and_relay(&[]);
    let (sender, tx, on_owner, on_relay) = relay_sender_and_listeners(&owner, &relay, "body");
    const FRAMES: u32 = 1_000;
    let frame = |n: u32| {
        let data: Vec<u8> = (0..2048u32).map(|i| (i + n) as u8).collect();
        fieldhub_client::Frame::can_xl(0x123, 0x42, 3, fieldhub_client::FrameFlags::empty(), n, &data).unwrap()
    };
    let (got_owner, got_relay) = std::thread::scope(|s| {
        let owner_rx = s.spawn(|| recv_n(&on_owner, FRAMES as usize));
        let relay_rx = s.spawn(|| recv_n(&on_relay, FRAMES as usize));
        for n in 0..FRAMES {
            sender.send(&tx, &frame(n)).unwrap();
        }
        sender.flush().expect("every frame of the relay's sender confirmed");
        (owner_rx.join().unwrap(), relay_rx.join().unwrap())
    });
    for (hub, got) in [("owner", got_owner), ("relay", got_relay)] {
        for (n, received) in got.iter().enumerate() {
            let want = frame(n as u32);
            assert_eq!(received.frame.acceptance_field(), n as u32, "{hub}: frame {n} out of order");
            assert_eq!(received.frame.data(), want.data(), "{hub}: frame {n} not whole");
        }
    }
    for hub in [&owner, &relay] {
        let log = hub.log().join("\n");
        assert!(!log.contains("owner hub left"), "the link closed under the flood: {log}");
    }
}

#[test]
fn zenoh_receives_on_the_threads_that_watch_the_links_unless_the_user_says_otherwise() {
    let (owner, relay) = owner_and_relay(&[]);
    for hub in [&owner, &relay] {
        let names = threads(hub.pid());
        assert!(names.iter().any(|n| n.starts_with("net-")), "Zenoh's net threads: {names:?}");
        let separate: Vec<&String> = names.iter().filter(|n| n.starts_with("rx-") || n.starts_with("acc-")).collect();
        assert!(separate.is_empty(), "receiving handed over to net, yet {separate:?} run");
    }
    drop((owner, relay));

    // The user's own setting stands (Zenoh's default receive runtime, with one worker).
    let mine = "(rx: (worker_threads: 1))";
    let (owner, relay) = owner_and_relay(&[("ZENOH_RUNTIME", mine)]);
    relay.wait_for_log("as ZENOH_RUNTIME=");
    assert!(threads(relay.pid()).iter().any(|n| n == "rx-0"), "the user's runtime setting was not used");
    // And the hubs federate with it: a relay's frame reaches the owner.
    let (sender, tx, listener, _) = relay_sender_and_listeners(&owner, &relay, "body");
    let flags = fieldhub_client::FrameFlags::empty();
    sender.send(&tx, &fieldhub_client::Frame::can_xl(0x7, 0x1, 3, flags, 9, &[1, 2]).unwrap()).unwrap();
    sender.flush().expect("the relay's frame confirmed");
    assert_eq!(recv_n(&listener, 1)[0].frame.acceptance_field(), 9);
}

/// Zenoh would stop the process on an empty `ZENOH_RUNTIME` (it cannot parse
/// it); the hub refuses it first, naming the variable and the fix.
#[test]
fn an_empty_zenoh_runtime_is_refused_naming_the_variable() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hub.toml");
    std::fs::write(&path, config("rack1", free_port(), None, None)).unwrap();
    let out = FIELDHUB
        .command()
        .args(["hub", "--listen", "127.0.0.1:0", "--config"])
        .arg(&path)
        .env("ZENOH_RUNTIME", "")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the hub started with an empty ZENOH_RUNTIME: {stderr}");
    assert!(stderr.contains("ZENOH_RUNTIME is set in the hub's environment but empty"), "{stderr}");
    assert!(!stderr.contains("panicked"), "Zenoh's panic, not the hub's refusal: {stderr}");
}
