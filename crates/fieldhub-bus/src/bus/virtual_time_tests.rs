//! Virtual time on the in-process bus: how bus time advances, what a step's
//! frames become, that nothing depends on the order the bus reads them, and
//! that observers hold nothing back and lose nothing.

use std::time::Duration;

use fieldhub_proto::bits::FrameBits;
use fieldhub_proto::wire::{ErrorCode, PortOptions};
use fieldhub_proto::{Frame, FrameFlags, FrameMeta};

use super::harness::{Harness, TestClient};
use crate::fault::FaultSpec;
use crate::inbox::Inbound;
use crate::outbox::{Outbound, OUTBOX_FRAMES};
use crate::request::{ControlRequest, TimeCommand};

const TIMED: &str = r#"
    [hub]
    time = "virtual"
    [[channel]]
    name = "can0"
    timing = "timed"
    bitrate = 500000
"#;

/// An ideal channel: every frame of a window goes at its start.
const IDEAL: &str = r#"
    [hub]
    time = "virtual"
    [[channel]]
    name = "can0"
"#;

const MS: u64 = 1_000_000;

fn can(id: u32, data: &[u8]) -> Frame {
    Frame::can(id, false, data).unwrap()
}

/// The bus times of the `GRANT`s `client` got so far.
fn grants(h: &Harness, client: &TestClient) -> Vec<u64> {
    h.items(client)
        .into_iter()
        .filter_map(|item| match item {
            Outbound::Grant { now_ns } => Some(now_ns),
            _ => None,
        })
        .collect()
}

#[test]
fn bus_time_waits_for_every_participant_and_advances_to_the_smallest_boundary() {
    let mut h = Harness::in_virtual_time(TIMED);
    let (fast, slow) = (h.connect_synchronized("fast"), h.connect_synchronized("slow"));
    assert_eq!((grants(&h, &fast), grants(&h, &slow)), (vec![0], vec![0]), "each joins at bus time 0");

    h.announce(&fast, MS);
    assert!(!h.advance_virtual_time(), "slow is still computing its step");
    h.announce(&slow, 3 * MS);
    assert!(h.advance_virtual_time());
    assert_eq!(h.bus.clock.now(), MS);
    assert_eq!((grants(&h, &fast), grants(&h, &slow)), (vec![MS], vec![]), "slow stays done up to 3 ms");

    h.announce(&fast, 2 * MS);
    assert!(h.advance_virtual_time());
    h.announce(&fast, 3 * MS);
    assert!(h.advance_virtual_time());
    assert!(!h.advance_virtual_time(), "both compute again");
    assert_eq!((grants(&h, &fast), grants(&h, &slow)), (vec![2 * MS, 3 * MS], vec![3 * MS]));
}

#[test]
fn a_step_that_does_not_move_forward_is_refused_and_observers_are_never_waited_for() {
    let mut h = Harness::in_virtual_time(TIMED);
    let (ecu, observer) = (h.connect_synchronized("ecu"), h.connect("observer"));
    h.items(&ecu);
    h.announce(&ecu, 0);
    h.announce(&observer, MS);
    let refused = |items: Vec<Outbound>| {
        items.iter().any(|item| matches!(item, Outbound::Error { code: ErrorCode::TimeMode, fatal: false, .. }))
    };
    assert!(refused(h.items(&ecu)), "a step to the time it stands at");
    assert!(refused(h.items(&observer)), "a step from a session that is not synchronised");
    h.announce(&ecu, MS);
    h.announce(&ecu, 2 * MS);
    assert!(refused(h.items(&ecu)), "a second step before the first one's grant");
    assert!(h.advance_virtual_time(), "the observer holds nothing back");
    assert_eq!(grants(&h, &ecu), [MS], "the first announced boundary stands");
}

/// Two senders contend with the same identifier in every step, plus a
/// seeded fault rule; `reverse` flips the order the bus reads their frames
/// in. Returns everything the receiver got.
fn contended_run(reverse: bool) -> Vec<(Frame, FrameMeta)> {
    let mut h = Harness::in_virtual_time(TIMED);
    let (a, b, rx) = (h.connect_synchronized("a"), h.connect_synchronized("b"), h.connect("rx"));
    let pa = h.open(&a, "can0", "ecu_a", PortOptions::empty());
    let pb = h.open(&b, "can0", "ecu_b", PortOptions::empty());
    h.open(&rx, "can0", "rx", PortOptions::empty());
    let spec: FaultSpec = serde_json::from_value(serde_json::json!({
        "channel": "can0", "at": "bus", "action": {"type": "drop"}, "probability": 0.3, "seed": 7
    }))
    .unwrap();
    h.control(ControlRequest::AddFault(spec)).unwrap();
    for step in 0..50u8 {
        let sends: [(&TestClient, u16, u8); 2] = [(&a, pa, 0xA), (&b, pb, 0xB)];
        let order: Vec<_> = if reverse { sends.iter().rev().collect() } else { sends.iter().collect() };
        for &&(client, port, tag) in &order {
            h.send(client, port, can(0x100, &[tag, step]));
        }
        let until = u64::from(step + 1) * MS;
        h.announce(&b, until);
        h.announce(&a, until);
        assert!(h.advance_virtual_time());
    }
    h.frames(&rx)
}

#[test]
fn ties_and_fault_dice_follow_port_names_not_the_order_the_bus_read_the_frames() {
    let first = contended_run(false);
    let second = contended_run(true);
    assert_eq!(first, second, "the same run, whatever the arrival order within a step");
    assert!(first.len() > 40 && first.len() < 90, "the rule dropped some of 100 frames: {}", first.len());
    // Equal arbitration fields: the port that sorts first (ecu_a) goes first.
    assert_eq!(first[0].0.data()[0], 0xA);
}

#[test]
fn a_window_s_frames_end_at_their_exact_bit_time_and_carry_bus_time() {
    let mut h = Harness::in_virtual_time(TIMED);
    let (ecu, rx) = (h.connect_synchronized("ecu"), h.connect("rx"));
    let port = h.open(&ecu, "can0", "ecu", PortOptions::empty());
    h.open(&rx, "can0", "rx", PortOptions::empty());
    let (first, second) = (can(0x10, &[1; 8]), can(0x20, &[2; 2]));
    h.send(&ecu, port, first.clone());
    h.send(&ecu, port, second.clone());
    h.announce(&ecu, MS);
    assert!(h.advance_virtual_time());
    let first_ns = FrameBits::of(&first).duration_ns(500_000, 500_000);
    let second_ns = FrameBits::of(&second).duration_ns(500_000, 500_000);
    let stamps: Vec<u64> = h.frames(&rx).iter().map(|(_, meta)| meta.timestamp_ns).collect();
    assert_eq!(stamps, [first_ns, first_ns + second_ns], "sent at bus time 0, back to back");
}

#[test]
fn a_port_closed_before_its_step_ends_takes_its_frames_along_and_its_client_stays() {
    let mut h = Harness::in_virtual_time(TIMED);
    let (ecu, rx) = (h.connect_synchronized("ecu"), h.connect("rx"));
    let (gone, kept) =
        (h.open(&ecu, "can0", "gone", PortOptions::empty()), h.open(&ecu, "can0", "kept", PortOptions::empty()));
    h.open(&rx, "can0", "rx", PortOptions::empty());
    h.send(&ecu, gone, can(0x1, &[1]));
    h.send(&ecu, kept, can(0x2, &[2]));
    h.bus.handle(crate::inbox::Inbound::ClosePort { client: ecu.id, port: gone });
    h.announce(&ecu, MS);
    assert!(h.advance_virtual_time());
    let ids: Vec<u32> = h.frames(&rx).iter().map(|(f, _)| f.id()).collect();
    assert_eq!(ids, [0x2], "the closed port's frame left with it");
    let items = h.items(&ecu);
    assert!(!items.iter().any(|i| matches!(i, Outbound::Error { .. })), "no error for the client: {items:?}");
    assert!(items.iter().any(|i| matches!(i, Outbound::Grant { now_ns: MS })));
}

#[test]
fn a_stalled_participant_is_reported_and_with_drop_no_longer_holds_time_back() {
    let config = format!(
        "{}\n",
        TIMED.replace("time = \"virtual\"", "time = \"virtual\"\nstep_timeout_ms = 1\non_stall = \"drop\"")
    );
    let mut h = Harness::in_virtual_time(&config);
    let (ecu, stuck) = (h.connect_synchronized("ecu"), h.connect_synchronized("stuck"));
    h.items(&stuck);
    h.announce(&ecu, MS);
    assert!(!h.advance_virtual_time());
    h.wall.advance(Duration::from_millis(2));
    h.bus.report_stalls();
    let reported = h.items(&stuck);
    assert!(
        reported.iter().any(|item| matches!(item, Outbound::Error { code: ErrorCode::StepTimeout, fatal: false, .. })),
        "{reported:?}"
    );
    assert!(h.advance_virtual_time(), "time goes on without the stalled participant");
    assert_eq!(grants(&h, &ecu), [0, MS]);
    assert!(h.items(&stuck).is_empty(), "a dropped participant gets no more grants");
}

/// A port's counters as `STATS` shows them.
pub(super) fn port_stats(h: &mut Harness, name: &str) -> fieldhub_proto::stats::PortStats {
    h.bus.stats().ports.into_iter().find(|p| p.name == name).expect("the port is open")
}

/// `TIME` as the control API answers it.
fn real_time_factor(h: &mut Harness) -> f64 {
    h.control(ControlRequest::Time).unwrap()["real_time_factor"].as_f64().unwrap()
}

#[test]
fn a_lossless_observer_that_falls_behind_holds_nothing_and_is_told_what_it_missed() {
    let mut h = Harness::in_virtual_time(IDEAL);
    let (ecu, dump) = (h.connect_synchronized("ecu"), h.connect("dump"));
    let port = h.open(&ecu, "can0", "ecu", PortOptions::empty());
    h.open(&dump, "can0", "dump", PortOptions::BLOCK_ON_OVERFLOW);
    // The observer reads nothing: two windows carry more than its outbox
    // holds (one participant's step is at most PARTICIPANT_CREDITS frames,
    // the size of an outbox).
    let total = OUTBOX_FRAMES as u32 + 10;
    for (step, frames) in [(1, 0..OUTBOX_FRAMES as u32), (2, OUTBOX_FRAMES as u32..total)] {
        for n in frames {
            h.send(&ecu, port, can(0x100, &n.to_le_bytes()));
        }
        h.announce(&ecu, step * MS);
        assert!(h.advance_virtual_time());
    }
    assert!(h.bus.channels[0].held_by.is_none(), "an observer's port never holds the channel");
    assert_eq!(port_stats(&mut h, "ecu").tx_frames, u64::from(total), "every frame of the participant went");
    assert_eq!(port_stats(&mut h, "dump").rx_dropped, 10, "what did not fit is counted");
    assert_eq!(h.frames(&dump).len(), OUTBOX_FRAMES);

    // It reads again: the next frame comes after the report of what it missed.
    h.send(&ecu, port, can(0x100, &total.to_le_bytes()));
    h.announce(&ecu, 3 * MS);
    assert!(h.advance_virtual_time());
    let items = h.items(&dump);
    assert!(matches!(items[..], [Outbound::RxOverflow { dropped: 10, .. }, Outbound::Frame { .. }]), "{items:?}");
}

#[test]
fn a_participant_s_stall_report_names_the_lossless_port_that_holds_its_frames() {
    let config = IDEAL.replace("time = \"virtual\"", "time = \"virtual\"\nstep_timeout_ms = 1");
    let mut h = Harness::in_virtual_time(&config);
    let (slow_reader, sender) = (h.connect_synchronized("slow_reader"), h.connect_synchronized("sender"));
    h.open(&slow_reader, "can0", "slow_port", PortOptions::BLOCK_ON_OVERFLOW);
    let port = h.open(&sender, "can0", "sender", PortOptions::empty());
    // The reader is done up to 100 ms and reads nothing meanwhile; the
    // sender fills its port in one step, and its frames of the next wait
    // behind the full port and never leave.
    h.announce(&slow_reader, 100 * MS);
    for (step, frames) in [(1, 0..OUTBOX_FRAMES as u32), (2, OUTBOX_FRAMES as u32..OUTBOX_FRAMES as u32 + 5)] {
        for n in frames {
            h.send(&sender, port, can(0x100, &n.to_le_bytes()));
        }
        h.announce(&sender, step * MS);
        assert!(h.advance_virtual_time());
    }
    assert!(h.bus.channels[0].held_by.is_some(), "a participant's lossless port still holds its channel");
    h.items(&sender);
    h.wall.advance(Duration::from_millis(2));
    h.bus.report_stalls();
    let text = match &h.items(&sender)[..] {
        [Outbound::Error { code: ErrorCode::StepTimeout, text, .. }] => text.clone(),
        other => panic!("the stalled sender was not told: {other:?}"),
    };
    assert!(text.contains("held by the lossless port 'slow_port' of 'slow_reader'"), "{text}");
    let reported: Vec<Outbound> =
        h.items(&slow_reader).into_iter().filter(|i| matches!(i, Outbound::Error { .. })).collect();
    assert!(reported.is_empty(), "a participant that is done is never reported: {reported:?}");
}

#[test]
fn a_participant_dropped_for_stalling_is_told_so_when_it_steps_again_and_holds_nothing_as_an_observer() {
    let config = IDEAL.replace("time = \"virtual\"", "time = \"virtual\"\nstep_timeout_ms = 1\non_stall = \"drop\"");
    let mut h = Harness::in_virtual_time(&config);
    let (ecu, stuck) = (h.connect_synchronized("ecu"), h.connect_synchronized("stuck"));
    let port = h.open(&ecu, "can0", "ecu", PortOptions::empty());
    h.open(&stuck, "can0", "stuck", PortOptions::BLOCK_ON_OVERFLOW);
    h.announce(&ecu, MS);
    h.wall.advance(Duration::from_millis(2));
    h.bus.report_stalls();
    assert!(h.advance_virtual_time(), "time goes on without it");
    h.items(&stuck);
    // Resumed, it steps as if nothing happened.
    h.announce(&stuck, 2 * MS);
    let text = match &h.items(&stuck)[..] {
        [Outbound::Error { code: ErrorCode::TimeMode, fatal: false, text, .. }] => text.clone(),
        other => panic!("the refused step was not reported: {other:?}"),
    };
    assert!(text.contains("dropped for stalling") && text.contains("GRANT 0 ns"), "{text}");
    assert!(!text.contains("is not a synchronised participant"), "{text}");
    // As an observer its lossless port no longer holds the participants' frames.
    for (step, frames) in [(2, 0..OUTBOX_FRAMES as u32), (3, OUTBOX_FRAMES as u32..OUTBOX_FRAMES as u32 + 1)] {
        for n in frames {
            h.send(&ecu, port, can(0x100, &n.to_le_bytes()));
        }
        h.announce(&ecu, step * MS);
        assert!(h.advance_virtual_time());
    }
    assert!(h.bus.channels[0].held_by.is_none());
    assert_eq!(port_stats(&mut h, "stuck").rx_dropped, 1);
}

#[test]
fn an_observer_s_frames_wait_at_the_bus_time_they_were_sent_and_go_out_when_time_moves() {
    let mut h = Harness::in_virtual_time(IDEAL);
    let (tool, rx) = (h.connect("send"), h.connect("rx"));
    let port = h.open(&tool, "can0", "send", PortOptions::empty());
    h.open(&rx, "can0", "rx", PortOptions::empty());
    h.send(&tool, port, can(0x123, &[1]));
    h.bus.handle(Inbound::Ping { client: tool.id, nonce: 7 });
    assert!(!h.advance_virtual_time(), "nothing moves bus time");
    h.bus.serve();
    assert!(h.items(&tool).iter().any(|i| matches!(i, Outbound::Pong { nonce: 7 })), "placed: confirmed");
    assert!(h.frames(&rx).is_empty(), "not on the bus before bus time moves");
    h.control(ControlRequest::SetTime(TimeCommand::RunUntil { until_ns: 5 * MS })).unwrap();
    assert!(h.advance_virtual_time());
    let got = h.frames(&rx);
    assert_eq!(got.iter().map(|(f, m)| (f.id(), m.timestamp_ns)).collect::<Vec<_>>(), [(0x123, 0)], "at bus time 0");
}

#[test]
fn a_frame_refused_as_it_comes_is_refused_before_its_sender_hears_it_placed_not_when_time_moves() {
    let mut h = Harness::in_virtual_time(IDEAL);
    let (tool, rx) = (h.connect("send"), h.connect("rx"));
    let port = h.open(&tool, "can0", "send", PortOptions::FD);
    h.open(&rx, "can0", "rx", PortOptions::empty());
    // can0 is classic CAN: a CAN FD frame never goes on it.
    h.send(&tool, port, Frame::can_fd(0x123, FrameFlags::empty(), &[1; 12]).unwrap());
    h.bus.handle(Inbound::Ping { client: tool.id, nonce: 7 });
    assert!(!h.advance_virtual_time(), "nothing moves bus time");
    h.bus.serve();
    let items = h.items(&tool);
    let refused = items.iter().position(|i| matches!(i, Outbound::Error { code: ErrorCode::InvalidFrame, .. }));
    let placed = items.iter().position(|i| matches!(i, Outbound::Pong { nonce: 7 }));
    assert!(refused.is_some() && refused < placed, "refused before the confirmation: {items:?}");
    assert_eq!(port_stats(&mut h, "send").tx_refused, 1);
    h.control(ControlRequest::SetTime(TimeCommand::RunUntil { until_ns: 5 * MS })).unwrap();
    assert!(h.advance_virtual_time());
    assert!(h.frames(&rx).is_empty(), "the refused frame never reaches the bus");
    assert_eq!(port_stats(&mut h, "send").tx_refused, 1, "refused once, not again when time moved");
}

#[test]
fn an_observer_that_leaves_before_bus_time_moves_loses_none_of_its_frames() {
    let mut h = Harness::in_virtual_time(TIMED);
    let (ecu, tool, closer, rx) =
        (h.connect_synchronized("ecu"), h.connect("gen"), h.connect("closer"), h.connect("rx"));
    let port = h.open(&tool, "can0", "gen", PortOptions::empty());
    let closing = h.open(&closer, "can0", "closer", PortOptions::empty());
    h.open(&rx, "can0", "rx", PortOptions::empty());
    // Ten 8-byte frames take about 2.2 ms at 500 kbit/s: a 1 ms window
    // leaves most of them in the port's FIFO.
    for n in 0..10u8 {
        h.send(&tool, port, can(0x200, &[n; 8]));
    }
    h.announce(&ecu, MS);
    assert!(h.advance_virtual_time());
    let first = h.frames(&rx).len();
    assert!((1..10).contains(&first), "{first} of 10 in the first window");
    // Two more frames placed at 1 ms, then the client leaves; another
    // observer closes its port with a frame placed.
    h.send(&tool, port, can(0x200, &[10; 8]));
    h.send(&tool, port, can(0x200, &[11; 8]));
    h.bus.handle(Inbound::Detach { client: tool.id, reason: "said goodbye".into() });
    h.send(&closer, closing, can(0x300, &[1]));
    h.items(&closer);
    h.bus.handle(Inbound::ClosePort { client: closer.id, port: closing });
    h.announce(&ecu, 10 * MS);
    assert!(h.advance_virtual_time());
    let rest: Vec<(u32, u8)> = h.frames(&rx).iter().map(|(f, _)| (f.id(), f.data()[0])).collect();
    let from_gen: Vec<u8> = rest.iter().filter(|(id, _)| *id == 0x200).map(|&(_, n)| n).collect();
    assert_eq!(from_gen, (first as u8..12).collect::<Vec<_>>(), "the rest of gen's frames, in order");
    assert!(rest.contains(&(0x300, 1)), "the closed port's frame too: {rest:?}");
    let after_closing = h.items(&closer);
    assert!(
        matches!(after_closing[..], [Outbound::PortClosed { .. }]),
        "a closed port receives nothing: {after_closing:?}"
    );
    // Once their frames are on the bus the ports are gone.
    h.announce(&ecu, 20 * MS);
    assert!(h.advance_virtual_time());
    let ports = h.control(ControlRequest::Ports).unwrap();
    let names: Vec<&str> = ports.as_array().unwrap().iter().filter_map(|p| p["name"].as_str()).collect();
    assert_eq!(names, ["rx"]);
    assert_eq!(h.bus.channels[0].members.iter().count(), 1, "only rx is on the channel");
}

#[test]
fn the_real_time_factor_counts_only_wall_clock_time_in_which_bus_time_was_free_to_move() {
    let mut h = Harness::in_virtual_time(IDEAL);
    h.wall.advance(Duration::from_secs(3));
    let ecu = h.connect_synchronized("ecu");
    // It computes a 100 ms step in 10 ms.
    h.wall.advance(Duration::from_millis(10));
    h.announce(&ecu, 100 * MS);
    assert!(h.advance_virtual_time());
    assert_eq!(real_time_factor(&mut h), 10.0);
    // Held by the control API for a second: not the run's pace.
    h.control(ControlRequest::SetTime(TimeCommand::Pause)).unwrap();
    h.wall.advance(Duration::from_secs(1));
    h.control(ControlRequest::SetTime(TimeCommand::Resume)).unwrap();
    h.wall.advance(Duration::from_millis(20));
    h.announce(&ecu, 200 * MS);
    assert!(h.advance_virtual_time());
    assert_eq!(real_time_factor(&mut h), 200.0 / 30.0);
    // The run is over: idling afterwards changes nothing.
    h.bus.handle(Inbound::Detach { client: ecu.id, reason: "done".into() });
    h.wall.advance(Duration::from_secs(60));
    assert_eq!(real_time_factor(&mut h), 200.0 / 30.0);
}

mod ahead;
mod overload;
mod step_length;
