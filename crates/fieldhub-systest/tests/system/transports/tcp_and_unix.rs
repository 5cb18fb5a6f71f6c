//! The stream transports, TCP and unix sockets: one bus for clients of
//! both, a hub that says goodbye when it stops, and an idle hub with
//! connected clients that sleeps.

use std::time::Duration;

use fieldhub_testkit::*;

use crate::FIELDHUB;

#[test]
fn sigterm_says_goodbye_to_clients_and_exits_cleanly() {
    let hub = FIELDHUB.start();
    let client = hub.client("stayer");
    client.open_port("can0").unwrap();
    assert!(hub.terminate().success());
    let err = client.recv(Some(PATIENCE)).unwrap_err();
    assert!(err.to_string().contains("the hub said goodbye: the hub is shutting down"), "{err}");
}

#[test]
fn hub_serves_tcp_and_unix_socket_clients_on_one_bus() {
    let socket = std::env::temp_dir().join(format!("fieldhub-test-{}.sock", std::process::id()));
    let listen = format!("unix:{}", socket.display());
    let hub = FIELDHUB.start_with(None, &["--listen", &listen, "--listen", "127.0.0.1:0"]);
    let over_tcp = hub.client("tcp");
    let over_unix = fieldhub_client::Client::connect(&listen).expect("connect over the unix socket");
    let tx = over_unix.open_port("can0").unwrap();
    over_tcp.open_port_with("can0", &lossless()).unwrap();
    for i in 0..10_000 {
        over_unix.send(&tx, &numbered(0x1, 4, i)).unwrap();
    }
    let got = recv_n(&over_tcp, 10_000);
    for (i, r) in got.iter().enumerate() {
        assert_eq!(number_of(&r.frame), (4, i as u32));
    }
    drop((over_unix, over_tcp));
    assert!(hub.terminate().success());
    assert!(!socket.exists(), "a hub that stops removes its socket file");
}

#[test]
fn idle_hub_with_connected_clients_sleeps() {
    let hub = FIELDHUB.start();
    let clients: Vec<_> = (0..3).map(|i| hub.client(&format!("idle{i}"))).collect();
    for c in &clients {
        c.open_port("can0").unwrap();
    }
    let cpu_ticks = || {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", hub.pid())).unwrap();
        let fields: Vec<&str> = stat.rsplit(')').next().unwrap().split_whitespace().collect();
        // utime and stime: fields 14 and 15 of /proc/PID/stat, 12 and 13 after the ')'.
        fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
    };
    let before = cpu_ticks();
    std::thread::sleep(Duration::from_secs(2));
    let used = cpu_ticks() - before;
    // 2 s are 200 clock ticks; a sleeping hub uses next to none of them.
    assert!(used <= 4, "an idle hub used {used} ticks of CPU in 2 s");
}
