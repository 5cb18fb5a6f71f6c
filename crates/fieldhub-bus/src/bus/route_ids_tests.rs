//! Routes come and go without end: ids and gateway ports are recycled, so a
//! hub that added and removed routes past 65,536 times still routes under a
//! port id of the route's own. The system suite runs 2,000 cycles through
//! the control API; the cycles past every 16-bit boundary run here, in
//! milliseconds.

use fieldhub_proto::wire::PortOptions;
use fieldhub_proto::Frame;

use super::harness::Harness;
use crate::config::RouteConfig;
use crate::port_id::PortId;
use crate::request::ControlRequest;

const TWO_CHANNELS: &str = r#"
    [[channel]]
    name = "can0"
    timing = "ideal"
    [[channel]]
    name = "can1"
    timing = "ideal"
"#;

fn route() -> RouteConfig {
    serde_json::from_value(serde_json::json!({"from": "can0", "to": "can1"})).unwrap()
}

#[test]
fn a_route_added_and_removed_seventy_thousand_times_leaves_room_for_another_that_routes_under_its_own_port() {
    let mut h = Harness::new(TWO_CHANNELS);
    let (sender, receiver) = (h.connect("sender"), h.connect("receiver"));
    let tx = h.open(&sender, "can0", "tx", PortOptions::empty());
    h.open(&receiver, "can1", "rx", PortOptions::empty());

    for cycle in 0..70_000u32 {
        let added = h.control(ControlRequest::AddRoute(route())).unwrap_or_else(|e| panic!("cycle {cycle}: {e}"));
        let id = added["route"].as_u64().unwrap_or_else(|| panic!("cycle {cycle}: no route id in {added}"));
        h.control(ControlRequest::RemoveRoute { id: id as u32 }).unwrap_or_else(|e| panic!("cycle {cycle}: {e}"));
    }
    let added = h.control(ControlRequest::AddRoute(route())).unwrap();
    assert_eq!(added["route"], 70_000, "route ids count on past 65,536");
    // A port opened after all that gets a client port id, not the route's.
    let late = h.connect("late");
    h.open(&late, "can1", "late", PortOptions::empty());

    h.send(&sender, tx, Frame::can(0x42, false, &[1]).unwrap());
    h.advance(1_000_000);
    let routed = h.frames(&receiver);
    assert_eq!(routed.len(), 1, "the route carried the frame");
    assert_eq!(routed[0].1.sender, u32::from(PortId::gateway(0)), "under the first gateway port, recycled");
    let late_got = h.frames(&late);
    assert_eq!(late_got.len(), 1);
    assert_eq!(late_got[0].1.sender, routed[0].1.sender);
}

#[test]
fn a_route_added_while_frames_flow_carries_every_frame_sent_after_it_and_none_after_its_removal() {
    // A channel nothing taps keeps no list of its frames: the bus decides
    // before each service, so a route that comes or goes between two
    // frames is served from the next one on.
    let mut h = Harness::new(TWO_CHANNELS);
    let (sender, local, routed) = (h.connect("sender"), h.connect("local"), h.connect("routed"));
    let tx = h.open(&sender, "can0", "tx", PortOptions::empty());
    h.open(&local, "can0", "local", PortOptions::empty());
    h.open(&routed, "can1", "routed", PortOptions::empty());
    let send = |h: &mut Harness, n: u8| {
        h.send(&sender, tx, Frame::can(0x100, false, &[n]).unwrap());
        h.advance(1_000_000);
    };
    let first_bytes = |frames: Vec<(Frame, fieldhub_proto::FrameMeta)>| -> Vec<u8> {
        frames.iter().map(|(f, _)| f.data()[0]).collect()
    };
    (0..3).for_each(|n| send(&mut h, n));
    let added = h.control(ControlRequest::AddRoute(route())).unwrap();
    (3..6).for_each(|n| send(&mut h, n));
    h.control(ControlRequest::RemoveRoute { id: added["route"].as_u64().unwrap() as u32 }).unwrap();
    (6..9).for_each(|n| send(&mut h, n));
    assert_eq!(first_bytes(h.frames(&local)), (0..9).collect::<Vec<u8>>(), "every frame on its own channel");
    assert_eq!(first_bytes(h.frames(&routed)), [3, 4, 5], "the frames sent while the route was there");
}
