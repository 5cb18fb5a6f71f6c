//! The read-only monitor token (`[hub] monitor_token`): its clients receive
//! every frame and read the control API, but cannot transmit, hold virtual
//! time or change anything; the hub's token still gives full access.

use crate::FIELDHUB;
use fieldhub_client::{Client, ClientError, ClientOptions, ErrorCode, Frame};
use fieldhub_testkit::{control, HubProcess};

const CONFIG: &str = r#"
[hub]
token = "sesame"
monitor_token = "look"
[[channel]]
name = "can0"
"#;

fn client(hub: &HubProcess, name: &str, token: &str, synchronized: bool) -> Result<Client, ClientError> {
    let options = ClientOptions { name: name.into(), token: Some(token.into()), synchronized, ..Default::default() };
    Client::connect_with(&hub.url, &options)
}

/// (status, body) of one control API call with `token`.
fn call(hub: &HubProcess, method: &str, path: &str, token: Option<&str>) -> (u16, String) {
    let (status, response) = control::answered(control::request(hub, method, path, token).call(), path);
    (status, response.into_string().unwrap())
}

#[test]
fn a_monitor_client_receives_every_frame_in_order_but_cannot_transmit() {
    let hub = FIELDHUB.start_with(Some(CONFIG), &[]);
    let sender = client(&hub, "ecu", "sesame", false).unwrap();
    let monitor = client(&hub, "monitor", "look", false).unwrap();
    let tx = sender.open_port("can0").unwrap();
    let watching = monitor.open_port("can0").unwrap();
    for n in 0u32..2000 {
        sender.send(&tx, &Frame::can(0x100, false, &n.to_le_bytes()).unwrap()).unwrap();
    }
    sender.flush().unwrap();
    for n in 0u32..2000 {
        let rx = monitor.recv(Some(fieldhub_testkit::PATIENCE)).unwrap().expect("every frame reaches the monitor");
        assert_eq!(rx.frame.data(), n.to_le_bytes(), "frame {n} in order");
    }

    monitor.send(&watching, &Frame::can(0x7FF, false, &[1]).unwrap()).unwrap();
    let refused = monitor.flush().expect_err("a monitor's frame is refused");
    assert_eq!(refused.code(), Some(ErrorCode::Unauthorized), "{refused}");
    assert!(refused.to_string().contains("monitor token"), "{refused}");
    sender.flush().unwrap();
    assert!(sender.try_recv().unwrap().is_none(), "nothing the monitor sent reached the bus");
}

#[test]
fn a_monitor_client_cannot_hold_virtual_time_and_a_wrong_token_is_refused() {
    let hub = FIELDHUB.start_with(Some(&CONFIG.replace("[hub]", "[hub]\ntime = \"virtual\"")), &[]);
    match client(&hub, "monitor", "look", true) {
        Err(error) => {
            assert_eq!(error.code(), Some(ErrorCode::Unauthorized), "{error}");
            assert!(error.to_string().contains("read-only"), "{error}");
        }
        Ok(_) => panic!("a synchronised participant with the monitor token was accepted"),
    }
    assert!(client(&hub, "observer", "look", false).is_ok(), "observing virtual time is reading");
    let wrong = client(&hub, "stranger", "lookie", false).err().expect("a wrong token is refused");
    assert_eq!(wrong.code(), Some(ErrorCode::Unauthorized));
}

#[test]
fn the_monitor_token_reads_the_control_api_but_changes_nothing() {
    let hub = FIELDHUB.start_with(Some(CONFIG), &[]);
    let (status, body) = call(&hub, "GET", "/api/v1/channels", Some("look"));
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("can0"), "{body}");
    let (status, body) = call(&hub, "POST", "/api/v1/channels/can0/short", Some("look"));
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("read-only"), "{body}");
    let (_, channels) = call(&hub, "GET", "/api/v1/channels", Some("look"));
    assert!(channels.contains("\"shorted\":false"), "the refused request changed nothing: {channels}");
    let (status, body) = call(&hub, "POST", "/api/v1/channels/can0/short", Some("sesame"));
    assert_eq!(status, 200, "the hub's token still changes things: {body}");
    let (status, _) = call(&hub, "GET", "/api/v1/channels", None);
    assert_eq!(status, 401);
}
