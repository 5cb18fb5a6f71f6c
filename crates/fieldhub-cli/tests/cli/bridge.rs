//! `fieldhub bridge socketcan` fails with an error that says what to do: on
//! a kernel without AF_CAN (this CI host), that SocketCAN is missing; where
//! AF_CAN exists, that the interface does not exist.

use crate::FIELDHUB;

fn host_has_af_can() -> bool {
    // SAFETY: socket(2) with constant arguments; the descriptor, if any, is
    // closed right away and never used.
    unsafe {
        let fd = libc::socket(libc::AF_CAN, libc::SOCK_RAW, libc::CAN_RAW);
        if fd >= 0 {
            libc::close(fd);
        }
        fd >= 0
    }
}

#[test]
fn bridge_explains_a_missing_af_can_or_a_missing_interface() {
    let out = FIELDHUB
        .command()
        .args(["bridge", "socketcan", "fhnosuchcan0", "--hub", "unix:/nonexistent/hub.sock"])
        .output()
        .unwrap();
    assert!(!out.status.success(), "the bridge must not start");
    let stderr = String::from_utf8_lossy(&out.stderr);
    if host_has_af_can() {
        assert!(stderr.contains("cannot open SocketCAN interface 'fhnosuchcan0'"), "{stderr}");
        assert!(stderr.contains("ip link"), "{stderr}");
    } else {
        assert!(stderr.contains("this kernel has no SocketCAN (AF_CAN)"), "{stderr}");
        assert!(stderr.contains("load the `can` and `can-raw` modules"), "{stderr}");
    }
}

#[test]
fn hub_with_a_socketcan_port_names_the_port_when_it_cannot_open_the_interface() {
    let dir = std::env::temp_dir().join(format!("fieldhub-socketcan-port-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("hub.toml");
    std::fs::write(
        &config,
        "[[channel]]\nname = \"can0\"\n[[port]]\nname = \"adapter\"\nchannel = \"can0\"\nsocketcan = \"fhnosuchcan0\"\n",
    )
    .unwrap();
    let sock = dir.join("hub.sock");
    let out = FIELDHUB
        .command()
        .args(["hub", "--no-shm", "--config"])
        .arg(&config)
        .arg("--listen")
        .arg(format!("unix:{}", sock.display()))
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(!out.status.success(), "the hub must not start without its SocketCAN port");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("SocketCAN port 'adapter'"), "{stderr}");
    if host_has_af_can() {
        assert!(stderr.contains("cannot open SocketCAN interface 'fhnosuchcan0'"), "{stderr}");
    } else {
        assert!(stderr.contains("this kernel has no SocketCAN (AF_CAN)"), "{stderr}");
    }
}
