//! Local clients find the hub of the built-in configuration over shared
//! memory without being told a URL.
//!
//! The test runs alone in a test process of its own (`in_own_process`)
//! whose `XDG_RUNTIME_DIR` is a private directory, so its `shm://default`
//! can neither meet a hub a developer runs nor the hubs of other tests.

use fieldhub_client::default_hub_url;
use fieldhub_testkit::*;

use crate::FIELDHUB;

#[test]
fn local_clients_use_the_default_hub_over_shared_memory_when_it_serves_it() {
    let runtime_dir = std::env::temp_dir().join(format!("fieldhub-default-hub-{}-{}", std::process::id(), unique()));
    std::fs::create_dir_all(&runtime_dir).unwrap();
    let env = [("XDG_RUNTIME_DIR", Some(runtime_dir.as_os_str())), ("FIELDHUB_HUB", None)];
    let test = concat!(module_path!(), "::local_clients_use_the_default_hub_over_shared_memory_when_it_serves_it");
    in_own_process(test, &env, the_default_hub_serves_local_clients_over_shared_memory);
    let _ = std::fs::remove_dir_all(&runtime_dir);
}

/// The test's body, in its own process with a private `XDG_RUNTIME_DIR`.
fn the_default_hub_serves_local_clients_over_shared_memory() {
    assert!(default_hub_url().starts_with("tcp://"), "no hub serves shm://default yet");
    let hub = FIELDHUB.start_with(None, &["--shm", "default"]);
    assert_eq!(default_hub_url(), "shm://default");

    let watcher = hub.client("watcher");
    let port = watcher.open_port("can0").unwrap();
    let sent = FIELDHUB.command().args(["send", "can0", "123#C0FFEE"]).env_remove("FIELDHUB_HUB").output().unwrap();
    assert!(sent.status.success(), "fieldhub send without --hub failed: {}", String::from_utf8_lossy(&sent.stderr));
    let got = watcher.recv(Some(PATIENCE)).unwrap().expect("the frame sent over shared memory arrives");
    assert_eq!((got.port, got.frame.id(), got.frame.data()), (port.handle, 0x123, &[0xC0, 0xFF, 0xEE][..]));

    // The client really went through shared memory: the hub says so.
    let over_shm = hub.log().iter().any(|l| l.contains("client connected over shared memory"));
    assert!(over_shm, "{:#?}", hub.log());

    // A stopped hub removes its socket: clients fall back to TCP.
    drop(watcher);
    assert!(hub.terminate().success());
    assert!(default_hub_url().starts_with("tcp://"), "the socket of a stopped hub is gone");
}
