//! An overloaded channel in virtual time: bus time never waits on what only
//! bus time can release. A participant's sends are part of its step and
//! never wait for transmit credit; its frames
//! queue per port, arbitration decides, lower priorities wait, and a
//! participant whose queue outgrows a real-time one is told so — the run
//! goes on. Past what the hub holds of a participant its frames are refused
//! at once, each one told and counted. One that does not end its step is
//! reported with the reason.

use std::time::Duration;

use fieldhub_proto::bits::FrameBits;
use fieldhub_proto::fate::DropReason;
use fieldhub_proto::wire::{ErrorCode, PortOptions};
use fieldhub_proto::{Frame, FrameMeta};

use super::super::harness::{Harness, TestClient};
use super::{can, grants, port_stats, MS, TIMED};
use crate::credit::{PARTICIPANT_CREDITS, TX_CREDITS};
use crate::outbox::Outbound;

/// A frame's start on the wire: its end of frame less its duration at
/// 500 kbit/s.
fn start_ns(frame: &Frame, meta: &FrameMeta) -> u64 {
    meta.timestamp_ns - FrameBits::of(frame).duration_ns(500_000, 500_000)
}

/// `participants` synchronised ECUs, ECU `i` sending one 8-byte frame with
/// identifier `0x100 + i` (ECU 0 wins arbitration) in every 1 ms step for
/// 2 s of bus time on the 500 kbit/s timed channel; `reverse` flips the
/// order the bus reads their frames and steps in. Returns what an observer
/// received and the `TX_QUEUE_FULL` reports each ECU got.
fn overloaded_run(participants: u16, reverse: bool) -> (Vec<(Frame, FrameMeta)>, Vec<usize>) {
    let mut h = Harness::in_virtual_time(TIMED);
    let rx = h.connect("rx");
    h.open(&rx, "can0", "rx", PortOptions::empty());
    let ecus: Vec<(TestClient, u16, u32)> = (0..participants)
        .map(|i| {
            let ecu = h.connect_synchronized(&format!("ecu{i:02}"));
            let port = h.open(&ecu, "can0", &format!("ecu{i:02}"), PortOptions::empty());
            (ecu, port, 0x100 + u32::from(i))
        })
        .collect();
    let order: Vec<&(TestClient, u16, u32)> = if reverse { ecus.iter().rev().collect() } else { ecus.iter().collect() };
    let mut told = vec![0; ecus.len()];
    let mut received = Vec::new();
    for step in 0..2000u64 {
        for &(ecu, port, id) in &order {
            let data = [(step >> 8) as u8, step as u8, *id as u8, 0, 0, 0, 0, 0];
            assert!(h.send_with_credit(ecu, *port, can(*id, &data)), "a participant's send never waits in its step");
        }
        for &(ecu, ..) in &order {
            h.announce(ecu, (step + 1) * MS);
        }
        assert!(h.advance_virtual_time(), "bus time moves at step {step}");
        for (n, (ecu, ..)) in ecus.iter().enumerate() {
            let items = h.items(ecu);
            told[n] +=
                items.iter().filter(|i| matches!(i, Outbound::Error { code: ErrorCode::TxQueueFull, .. })).count();
            assert!(matches!(items.last(), Some(Outbound::Grant { now_ns }) if *now_ns == (step + 1) * MS));
        }
        received.extend(h.frames(&rx));
    }
    assert_eq!(h.bus.clock.now(), 2000 * MS, "2 s of bus time");
    for (ecu, ..) in &ecus {
        assert_eq!(grants(&h, ecu), [] as [u64; 0]);
    }
    (received, told)
}

/// Whether every frame won arbitration: no frame queued before it started,
/// with a lower identifier, went after it. (One queued at the very bit time
/// it started came too late: the bus chose it as the intermission before
/// it ended.)
fn in_arbitration_order(frames: &[(Frame, FrameMeta)]) -> Result<(), String> {
    // A frame sent in the step that started at k ms was queued at k ms: its
    // data holds the step.
    let queued_ns = |frame: &Frame| (u64::from(frame.data()[0]) << 8 | u64::from(frame.data()[1])) * MS;
    for (n, (frame, meta)) in frames.iter().enumerate() {
        let start = start_ns(frame, meta);
        if let Some((later, _)) = frames[n + 1..].iter().find(|(o, _)| o.id() < frame.id() && queued_ns(o) < start) {
            return Err(format!("{frame:?} started at {start} ns before {later:?}, queued by then"));
        }
    }
    Ok(())
}

fn overload_goes_on_in_arbitration_order(participants: u16) {
    let (first, told) = overloaded_run(participants, false);
    let (second, _) = overloaded_run(participants, true);
    assert!(first == second, "two runs, the frames read in opposite orders, gave different buses");
    in_arbitration_order(&first).unwrap();
    // 8-byte frames of about 0.25 ms, five or more per 1 ms: the channel
    // is never idle.
    let busy_ns: u64 = first.iter().map(|(frame, meta)| meta.timestamp_ns - start_ns(frame, meta)).sum();
    assert!(busy_ns > 1_950 * MS, "the channel was busy {busy_ns} ns of 2 s ({} frames)", first.len());
    let from = |ecu: u32| first.iter().filter(|(f, _)| f.id() == 0x100 + ecu).count();
    assert_eq!(from(2), 2000, "the highest priorities lose nothing");
    let lowest = participants as u32 - 1;
    assert!(from(lowest) < 400, "the lowest priority starves: {} of 2000", from(lowest));
    assert!(told[participants as usize - 1] > 0, "the starving participant is told its queue is full");
    assert_eq!(told[0], 0, "the winner never is");
}

#[test]
fn five_participants_overloading_a_500_kbit_channel_at_1_ms_steps_run_on_in_arbitration_order() {
    overload_goes_on_in_arbitration_order(5);
}

#[test]
fn ten_participants_overloading_a_500_kbit_channel_at_1_ms_steps_run_on_in_arbitration_order() {
    overload_goes_on_in_arbitration_order(10);
}

#[test]
fn ten_thousand_frames_sent_in_one_step_go_out_in_order_over_the_following_steps() {
    let mut h = Harness::in_virtual_time(TIMED);
    let (ecu, rx) = (h.connect_synchronized("ecu"), h.connect("rx"));
    let port = h.open(&ecu, "can0", "ecu", PortOptions::empty());
    h.open(&rx, "can0", "rx", PortOptions::empty());
    for n in 0..10_000u32 {
        assert!(h.send_with_credit(&ecu, port, can(0x100, &n.to_le_bytes())), "frame {n} waited for credit");
    }
    let mut received = Vec::new();
    let mut told = Vec::new();
    let mut over_a_queue = Vec::new();
    let mut step = 0;
    while received.len() < 10_000 {
        step += 1;
        assert!(step < 400, "the frames went out in 4 s of bus time");
        h.announce(&ecu, step * 10 * MS);
        assert!(h.advance_virtual_time());
        let items = h.items(&ecu);
        if let Some(Outbound::Error { code: ErrorCode::TxQueueFull, fatal: false, text, .. }) = items.first() {
            told.push((step, text.clone()));
        }
        assert!(matches!(items.last(), Some(Outbound::Grant { .. })), "{items:?}");
        received.extend(h.frames(&rx).into_iter().map(|(f, _)| u32::from_le_bytes(f.data().try_into().unwrap())));
        if 10_000 - received.len() > TX_CREDITS as usize {
            over_a_queue.push(step);
        }
    }
    assert_eq!(received, (0..10_000).collect::<Vec<_>>(), "every frame, in the order sent");
    // Told at every grant after which more than a real-time queue waited.
    assert!(step > 100, "the frames took many steps: {step}");
    assert_eq!(told.iter().map(|(step, _)| *step).collect::<Vec<_>>(), over_a_queue);
    assert!(told[0].1.contains("on port 'ecu' of channel 'can0'"), "{}", told[0].1);
    assert_eq!(port_stats(&mut h, "ecu").tx_frames, 10_000);
}

/// The frames `TX_DROPPED queue_full` reported among `items`.
fn refused(items: &[Outbound]) -> u32 {
    items
        .iter()
        .map(|item| match item {
            Outbound::TxDropped { reason: DropReason::QueueFull, dropped, .. } => *dropped,
            _ => 0,
        })
        .sum()
}

#[test]
fn twenty_thousand_frames_in_one_step_on_a_50_kbit_channel_are_held_up_to_the_limit_and_the_rest_refused_at_once() {
    let mut h = Harness::in_virtual_time(&TIMED.replace("500000", "50000"));
    let (ecu, rx, observer) = (h.connect_synchronized("ecu"), h.connect("rx"), h.connect("observer"));
    let port = h.open(&ecu, "can0", "ecu", PortOptions::empty());
    h.open(&rx, "can0", "rx", PortOptions::empty());
    let frame = |n: u32| can(0x100, &n.to_le_bytes());
    h.items(&ecu);
    // Offered in one step: every send is taken at once, none waits for
    // credit, and the hub says exactly which it refused — all past the
    // first PARTICIPANT_CREDITS, the moment each came.
    for n in 0..20_000u32 {
        assert!(h.send_with_credit(&ecu, port, frame(n)), "frame {n} waited for credit");
        let told = refused(&h.items(&ecu));
        assert_eq!(told, u32::from(n >= PARTICIPANT_CREDITS), "frame {n}: refused {told}");
    }
    let accepted = PARTICIPANT_CREDITS;
    assert_eq!(port_stats(&mut h, "ecu").tx_dropped_by_reason.get("queue_full"), Some(&(20_000 - u64::from(accepted))));
    // The run goes on: the accepted frames leave over the following steps
    // in the order sent, and room made by those that left takes new ones.
    let mut received = Vec::new();
    let mut step = 0;
    while received.len() < accepted as usize + 1 {
        step += 1;
        assert!(step < 400, "the frames went out in 40 s of bus time: {} so far", received.len());
        h.announce(&ecu, step * 100 * MS);
        assert!(h.advance_virtual_time(), "bus time moves at step {step}");
        let items = h.items(&ecu);
        assert!(matches!(items.last(), Some(Outbound::Grant { .. })), "{items:?}");
        if step == 1 {
            assert!(matches!(items[0], Outbound::Error { code: ErrorCode::TxQueueFull, fatal: false, .. }));
            assert!(h.send_with_credit(&ecu, port, frame(20_000)), "a frame that fits the room made is taken");
            assert_eq!(refused(&h.items(&ecu)), 0, "and held, not refused");
        }
        received.extend(h.frames(&rx).into_iter().map(|(f, _)| u32::from_le_bytes(f.data().try_into().unwrap())));
    }
    let expected: Vec<u32> = (0..accepted).chain([20_000]).collect();
    assert!(received == expected, "every accepted frame, in the order sent ({} received)", received.len());
    let stats = port_stats(&mut h, "ecu");
    assert_eq!(stats.tx_frames + stats.tx_dropped, 20_001, "accepted + refused = offered");
    // An observer's frames wait for credit as in real time.
    let watching = h.open(&observer, "can0", "observer", PortOptions::empty());
    let placed =
        (0..).take_while(|&n: &u32| h.send_with_credit(&observer, watching, can(0x7FF, &n.to_le_bytes()))).count();
    assert_eq!(placed as u32, TX_CREDITS, "an observer keeps the real-time limit");
}

#[test]
fn a_participant_that_does_not_end_its_step_is_reported_as_step_not_ended() {
    let config = TIMED.replace("time = \"virtual\"", "time = \"virtual\"\nstep_timeout_ms = 1");
    let mut h = Harness::in_virtual_time(&config);
    let (ecu, slow) = (h.connect_synchronized("ecu"), h.connect_synchronized("slow"));
    h.announce(&ecu, MS);
    h.items(&slow);
    h.wall.advance(Duration::from_millis(2));
    h.bus.report_stalls();
    let text = match &h.items(&slow)[..] {
        [Outbound::Error { code: ErrorCode::StepTimeout, text, .. }] => text.clone(),
        other => panic!("the slow participant was not told: {other:?}"),
    };
    assert!(text.contains("step not ended"), "{text}");
    let status = h.control(crate::request::ControlRequest::Time).unwrap();
    let slow_status = status["participants"].as_array().unwrap().iter().find(|p| p["name"] == "slow").cloned();
    assert!(slow_status.is_some_and(|p| p["waits_for"].as_str().unwrap().starts_with("step not ended")), "{status}");
}

#[test]
fn participants_held_for_a_time_participant_that_never_joins_are_told_whom_bus_time_waits_for() {
    let config = TIMED.replace(
        "time = \"virtual\"",
        "time = \"virtual\"\nstep_timeout_ms = 1\ntime_participants = [\"ecu\", \"late\"]",
    );
    let mut h = Harness::in_virtual_time(&config);
    let ecu = h.connect_synchronized("ecu");
    h.announce(&ecu, MS);
    assert!(!h.advance_virtual_time(), "'late' has not joined");
    h.items(&ecu);
    h.wall.advance(Duration::from_millis(2));
    h.bus.report_stalls();
    let text = match &h.items(&ecu)[..] {
        [Outbound::Error { code: ErrorCode::StepTimeout, fatal: false, text, .. }] => text.clone(),
        other => panic!("the waiting participant was not told: {other:?}"),
    };
    assert!(text.contains("waits for 'late' of [hub] time_participants to join"), "{text}");
    h.wall.advance(Duration::from_millis(2));
    h.bus.report_stalls();
    assert!(h.items(&ecu).is_empty(), "told once");
}
