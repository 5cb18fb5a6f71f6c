//! Per-client permissions on the bus (`[[access]]`, [`crate::access`]): a
//! port's rights are its client's grant on its channel, decided when it
//! opens — refused, read-only, transmit-only or both — proven on the
//! in-process bus.

use std::sync::Arc;

use fieldhub_proto::wire::{ErrorCode, PortOptions};
use fieldhub_proto::Frame;

use super::harness::{Harness, TestClient};
use crate::access::{Access, Grant};
use crate::outbox::Outbound;

const CHANNELS: &str = r#"
    [[channel]]
    name = "can0"
    [[channel]]
    name = "can1"
    [[channel]]
    name = "can2"
"#;

fn granted(name: &str, read: &[&str], write: &[&str]) -> Access {
    let list = |channels: &[&str]| channels.iter().map(|c| (*c).into()).collect();
    Access::Granted(Arc::new(Grant::new(name.into(), list(read), list(write), false)))
}

fn frame(n: u32) -> Frame {
    Frame::can(0x100, false, &n.to_le_bytes()).unwrap()
}

/// `OPEN_PORT` from `client`: the port's handle, or the error's code and text.
fn try_open(
    h: &mut Harness,
    client: &TestClient,
    channel: &str,
    options: PortOptions,
) -> Result<u16, (ErrorCode, String)> {
    h.bus.handle(crate::inbox::Inbound::OpenPort {
        client: client.id,
        request: 7,
        options,
        channel: channel.into(),
        port_name: String::new(),
    });
    match h.items(client).pop() {
        Some(Outbound::PortOpened { port, .. }) => Ok(port),
        Some(Outbound::Error { code, text, .. }) => Err((code, text)),
        other => panic!("OPEN_PORT answered {other:?}"),
    }
}

fn errors(h: &Harness, client: &TestClient) -> Vec<(ErrorCode, String)> {
    h.items(client)
        .into_iter()
        .filter_map(|item| match item {
            Outbound::Error { code, text, .. } => Some((code, text)),
            _ => None,
        })
        .collect()
}

#[test]
fn a_channel_outside_the_grant_cannot_be_opened_and_the_refusal_names_access_and_channel() {
    let mut h = Harness::new(CHANNELS);
    let hil = h.connect_with("hil", granted("hil-tester", &["can0", "can1"], &["can0"]));
    let (code, text) = try_open(&mut h, &hil, "can2", PortOptions::empty()).unwrap_err();
    assert_eq!(code, ErrorCode::Unauthorized);
    assert_eq!(text, "access 'hil-tester' may not use channel 'can2'");
    assert!(try_open(&mut h, &hil, "can0", PortOptions::empty()).is_ok());
    assert!(try_open(&mut h, &hil, "can1", PortOptions::empty()).is_ok());
}

#[test]
fn a_read_only_grant_receives_but_its_frames_are_refused() {
    let mut h = Harness::new(CHANNELS);
    let (ecu, reader) = (h.connect("ecu"), h.connect_with("reader", granted("hil", &["can0"], &[])));
    let tx = h.open(&ecu, "can0", "ecu", PortOptions::empty());
    let rx = try_open(&mut h, &reader, "can0", PortOptions::empty()).unwrap();
    h.send(&ecu, tx, frame(1));
    h.step();
    assert_eq!(h.frames(&reader).len(), 1, "it reads can0");
    h.send(&reader, rx, frame(2));
    h.step();
    let refused = errors(&h, &reader);
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0].0, ErrorCode::Unauthorized);
    assert!(refused[0].1.contains("access 'hil' may receive on its channel, not send"), "{refused:?}");
    assert!(h.frames(&ecu).is_empty(), "nothing it sent reached the bus");
}

#[test]
fn a_write_only_grant_sends_in_order_and_hears_nothing_but_its_echoes() {
    let mut h = Harness::new(CHANNELS);
    let (ecu, writer) = (h.connect("ecu"), h.connect_with("gen", granted("gen", &[], &["*"])));
    let rx = h.open(&ecu, "can0", "ecu", PortOptions::empty());
    let tx = try_open(&mut h, &writer, "can0", PortOptions::RECEIVE_OWN).unwrap();
    for n in 0..1000 {
        h.send(&writer, tx, frame(n));
        h.step();
    }
    let got = h.frames(&ecu);
    assert_eq!(got.len(), 1000);
    for (n, (f, meta)) in got.iter().enumerate() {
        assert_eq!(f.data(), (n as u32).to_le_bytes(), "frame {n} in order");
        assert_eq!(meta.seq, n as u64 + 1, "sequence numbers without gaps");
    }
    h.send(&ecu, rx, frame(9999));
    h.step();
    let heard = h.frames(&writer);
    assert_eq!(heard.len(), 1000, "its own echoes only, not the ECU's frame");
    assert!(heard.iter().all(|(f, _)| f.is_echo()));
    let stats = h.control(crate::request::ControlRequest::Ports).unwrap();
    let port = stats.as_array().unwrap().iter().find(|p| p["client"] == writer.id).unwrap().clone();
    assert_eq!((port["access"].as_str(), port["transmit_only"].as_bool()), (Some("gen"), Some(true)), "{port}");
}

#[test]
fn the_monitor_token_still_reads_every_channel_and_sends_on_none() {
    let mut h = Harness::new(CHANNELS);
    let monitor = h.connect_with("monitor", Access::ReadOnly);
    for channel in ["can0", "can1", "can2"] {
        let port = try_open(&mut h, &monitor, channel, PortOptions::empty()).unwrap();
        h.send(&monitor, port, frame(1));
        h.step();
        let refused = errors(&h, &monitor);
        assert!(refused[0].1.contains("the monitor token may receive"), "{refused:?}");
    }
}
