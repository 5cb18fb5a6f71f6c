//! Event-triggered and sporadic frames on the LIN master's schedule, on a
//! manually driven clock: every frame's sender, identifier and timestamp
//! (its end of frame) against times computed by hand at 19.2 kbit/s.

use fieldhub_proto::lin::{protected_id, Checksum};
use fieldhub_proto::{Frame, FrameFlags};

use super::lin_tests::{channel_of, config, port, publish, response, run, HEADER_NS, MS, TWO_BYTES_NS};
use crate::channel::Channel;
use crate::config::{LinEventTriggeredConfig, LinSlotConfig, LinSporadicConfig};
use crate::port_id::PortId;

fn slot(id: u8, delay_ms: u64) -> LinSlotConfig {
    LinSlotConfig { id: Some(id), sporadic: None, delay_ms }
}

/// Event-triggered frame 0x30 carrying 0x11 and 0x12, resolved by
/// `collision_schedule`, in a schedule of 0x30 and 0x20, 10 ms each.
fn event_triggered_channel(collision_schedule: Vec<LinSlotConfig>) -> Channel {
    let mut config = config(&[(0x30, 10), (0x20, 10)]);
    let lin = config.lin.as_mut().unwrap();
    lin.event_triggered = vec![LinEventTriggeredConfig {
        name: "DoorEvents".into(),
        id: 0x30,
        frames: vec![0x11, 0x12],
        collision_schedule,
    }];
    channel_of(config)
}

/// A response for frame `id` that an event-triggered frame carries: its
/// protected identifier first.
fn event(id: u8, value: u8) -> Frame {
    Frame::lin(id, Checksum::Enhanced, &[protected_id(id).unwrap(), value]).unwrap()
}

type Seen = (Option<PortId>, u32, FrameFlags, Vec<u8>, u64);

fn seen(channel: &mut Channel, until: u64) -> Vec<Seen> {
    run(channel, until)
        .iter()
        .map(|t| (t.sender, t.frame.id(), t.frame.flags(), t.frame.data().to_vec(), t.timestamp_ns))
        .collect()
}

#[test]
fn an_event_triggered_collision_is_resolved_by_its_collision_schedule_and_the_table_resumes_after_it() {
    let mut channel = event_triggered_channel(vec![slot(0x11, 10), slot(0x12, 10)]);
    publish(&mut channel, 1, [event(0x11, 0x01), event(0x11, 0x03)]);
    publish(&mut channel, 2, [event(0x12, 0x02)]);
    publish(&mut channel, 3, [response(0x20, 2)]);
    let none = FrameFlags::empty();
    // 0 ms: both answer 0x30 and collide — the bus reads 11 01 FC AND
    // 92 02 7A (each answer's checksum made with 0x30's PID 0xF0): 10 00,
    // checksum 78, a 2-byte frame's time. 10 and 20 ms: the collision
    // schedule polls 0x11 and 0x12. 30 ms: the slot after 0x30. 40 ms:
    // 0x30 again, port 1's second event alone, under 0x30. 50 ms: 0x20,
    // which nobody answers now.
    assert_eq!(
        seen(&mut channel, 60 * MS - 1),
        [
            (None, 0x30, FrameFlags::LIN_COLLISION, vec![0x10, 0x00], TWO_BYTES_NS),
            (Some(port(1)), 0x11, none, vec![0x11, 0x01], 10 * MS + TWO_BYTES_NS),
            (Some(port(2)), 0x12, none, vec![0x92, 0x02], 20 * MS + TWO_BYTES_NS),
            (Some(port(3)), 0x20, none, vec![0x20, 0x20], 30 * MS + TWO_BYTES_NS),
            (Some(port(1)), 0x30, none, vec![0x11, 0x03], 40 * MS + TWO_BYTES_NS),
            (None, 0x20, FrameFlags::LIN_NO_RESPONSE, vec![], 50 * MS + HEADER_NS),
        ]
    );
    assert_eq!((channel.lin_collisions(), channel.lin_no_responses()), (Some(1), Some(1)));
    assert_eq!(channel.frames, 6);
    for (n, sent) in [(1, 2), (2, 1), (3, 1)] {
        let member = channel.member_mut(port(n)).unwrap();
        assert_eq!((member.tx.len(), member.counters.tx_frames), (0, sent), "port {n}");
    }
}

#[test]
fn the_answer_to_an_event_triggered_header_carries_its_checksum_and_the_collision_what_the_bus_read() {
    let mut channel = event_triggered_channel(Vec::new());
    publish(&mut channel, 1, [event(0x11, 0x01)]);
    publish(&mut channel, 2, [event(0x12, 0x02)]);
    let sent = run(&mut channel, 5 * MS);
    let read = &sent[0].frame;
    assert_eq!((read.len8_dlc(), read.flags()), (0x78, FrameFlags::LIN_COLLISION));
    let mut channel = event_triggered_channel(Vec::new());
    publish(&mut channel, 1, [event(0x11, 0x01)]);
    let sent = run(&mut channel, 5 * MS);
    assert_eq!(sent[0].frame, Frame::lin(0x30, Checksum::Enhanced, &[0x11, 0x01]).unwrap());
    assert_eq!(sent[0].frame.len8_dlc(), 0xFC);
}

#[test]
fn without_a_collision_schedule_the_master_polls_the_carried_frames_in_slots_as_long_as_the_event_triggered_one() {
    let mut channel = event_triggered_channel(Vec::new());
    publish(&mut channel, 1, [event(0x11, 0x01)]);
    publish(&mut channel, 2, [event(0x12, 0x02)]);
    let got: Vec<(Option<PortId>, u32, u64)> =
        seen(&mut channel, 40 * MS - 1).into_iter().map(|(sender, id, _, _, at)| (sender, id, at)).collect();
    // 0x30 collides at 0, 0x11 and 0x12 at 10 and 20 ms, then 0x20 (no
    // answer) at 30 ms.
    assert_eq!(
        got,
        [
            (None, 0x30, TWO_BYTES_NS),
            (Some(port(1)), 0x11, 10 * MS + TWO_BYTES_NS),
            (Some(port(2)), 0x12, 20 * MS + TWO_BYTES_NS),
            (None, 0x20, 30 * MS + HEADER_NS),
        ]
    );
}

#[test]
fn an_event_triggered_header_nobody_answers_goes_out_alone_and_is_not_a_missing_response() {
    let mut channel = event_triggered_channel(Vec::new());
    publish(&mut channel, 3, [response(0x20, 2)]);
    let got = seen(&mut channel, 20 * MS - 1);
    assert_eq!(got[0], (None, 0x30, FrameFlags::LIN_NO_RESPONSE, vec![], HEADER_NS));
    assert_eq!(got[1].4, 10 * MS + TWO_BYTES_NS);
    assert_eq!((channel.lin_collisions(), channel.lin_no_responses()), (Some(0), Some(0)));
}

#[test]
fn a_sporadic_slot_sends_its_first_listed_frame_with_a_response_pending_and_is_silent_without_one() {
    let mut config = config(&[(0x10, 10)]);
    let lin = config.lin.as_mut().unwrap();
    lin.schedule.push(LinSlotConfig { id: None, sporadic: Some("SeatChanges".into()), delay_ms: 10 });
    lin.sporadic = vec![LinSporadicConfig { name: "SeatChanges".into(), frames: vec![0x21, 0x22] }];
    let mut channel = channel_of(config);
    publish(&mut channel, 1, (0..3).map(|_| response(0x10, 2)));
    // Port 2's 0x22 was published first, but 0x21 comes first in the list.
    publish(&mut channel, 2, [response(0x22, 2)]);
    publish(&mut channel, 3, [response(0x21, 2)]);
    let got: Vec<(Option<PortId>, u32, u64)> =
        seen(&mut channel, 60 * MS - 1).into_iter().map(|(sender, id, _, _, at)| (sender, id, at)).collect();
    assert_eq!(
        got,
        [
            (Some(port(1)), 0x10, TWO_BYTES_NS),
            (Some(port(3)), 0x21, 10 * MS + TWO_BYTES_NS),
            (Some(port(1)), 0x10, 20 * MS + TWO_BYTES_NS),
            (Some(port(2)), 0x22, 30 * MS + TWO_BYTES_NS),
            (Some(port(1)), 0x10, 40 * MS + TWO_BYTES_NS),
            // 50 ms: nothing pending, nothing on the bus.
        ]
    );
    assert_eq!(channel.lin_no_responses(), Some(0));
}

#[test]
fn responses_for_event_triggered_frames_are_refused_unless_they_name_their_frame() {
    let channel = event_triggered_channel(Vec::new());
    let refused = |frame: &Frame| channel.arbitration_refuses(port(1), frame);
    assert_eq!(refused(&event(0x11, 7)), None);
    let text = refused(&response(0x30, 2)).unwrap();
    assert!(
        text.contains(
            "0x30, event-triggered frame DoorEvents; publish the response of one of the frames it carries (0x11, 0x12)"
        ),
        "{text}"
    );
    let text = refused(&Frame::lin(0x11, Checksum::Enhanced, &[0x01, 0x02]).unwrap()).unwrap();
    assert!(text.contains("which event-triggered frame DoorEvents carries, with first byte 0x01"), "{text}");
    let text = refused(&Frame::lin(0x12, Checksum::Enhanced, &[0x12, 1]).unwrap()).unwrap();
    assert!(text.contains("its first byte is the frame's protected identifier 0x92"), "{text}");
    let read = Frame::lin_collision(0x30, &[event(0x11, 1), event(0x12, 2)]).unwrap();
    assert!(refused(&read).unwrap().contains("only the master (the hub) sends"));
}

#[test]
fn event_triggered_and_sporadic_settings_errors_name_the_key() {
    let check = |edit: &dyn Fn(&mut crate::config::LinConfig)| {
        let mut config = config(&[(0x30, 10)]);
        let lin = config.lin.as_mut().unwrap();
        lin.event_triggered = vec![LinEventTriggeredConfig {
            name: "DoorEvents".into(),
            id: 0x30,
            frames: vec![0x11],
            collision_schedule: Vec::new(),
        }];
        edit(lin);
        config.check_arbitration().err()
    };
    assert_eq!(check(&|_| {}), None);
    let (key, text) = check(&|lin| lin.event_triggered[0].frames.clear()).unwrap();
    assert_eq!(key, "lin.event_triggered");
    assert!(text.contains("frames is empty"), "{text}");
    let (key, text) = check(&|lin| lin.event_triggered[0].collision_schedule = vec![slot(0x30, 10)]).unwrap();
    assert_eq!(key, "lin.event_triggered");
    assert!(text.contains("collision_schedule slot 1: 0x30 is event-triggered"), "{text}");
    let (key, text) =
        check(&|lin| lin.schedule.push(LinSlotConfig { id: None, sporadic: Some("S".into()), delay_ms: 5 })).unwrap();
    assert_eq!(key, "lin.schedule");
    assert!(text.contains("slot 2: no sporadic frame is named 'S'"), "{text}");
    let (key, text) = check(&|lin| lin.schedule[0].sporadic = Some("S".into())).unwrap();
    assert_eq!(key, "lin.schedule");
    assert!(text.contains("slot 1: give either id"), "{text}");
    let (key, text) =
        check(&|lin| lin.sporadic = vec![LinSporadicConfig { name: "S".into(), frames: vec![0x30] }]).unwrap();
    assert_eq!(key, "lin.sporadic");
    assert!(text.contains("0x30 is event-triggered; list unconditional frames"), "{text}");
}
