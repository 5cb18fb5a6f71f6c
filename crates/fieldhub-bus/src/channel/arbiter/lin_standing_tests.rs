//! LIN standing responses on a manually driven clock: a slave's buffer
//! answers every header of its identifier with exact frame times (19.2
//! kbit/s, times from `lin_tests`), a replacement is carried by the next
//! header, a withdrawal leaves the next header unanswered, a one-shot
//! response goes first, and the refusals name their cause.

use fieldhub_proto::lin::Checksum;
use fieldhub_proto::{Frame, FrameFlags};

use super::lin_tests::{
    channel_of, config, lin_channel, port, publish, response, FOUR_BYTES_NS, HEADER_NS, MS, TWO_BYTES_NS,
};
use crate::channel::{Channel, Transmitted};
use crate::config::{LinEventTriggeredConfig, LinSporadicConfig};
use crate::port_id::PortId;

fn standing(id: u8, data: &[u8]) -> Frame {
    Frame::lin_standing(id, Checksum::Enhanced, data).unwrap()
}

/// Serve `channel` at every time it asks for from `from` on, up to `until`,
/// appending what it sent to `sent`; the next time it asks for.
fn serve(channel: &mut Channel, from: u64, until: u64, sent: &mut Vec<Transmitted>) -> u64 {
    let mut now = from;
    while let Some(wake) = channel.service(now, sent) {
        assert!(wake > now, "the channel asked to be served at {wake}, not after {now}");
        if wake > until {
            return wake;
        }
        now = wake;
    }
    u64::MAX
}

/// A frame on the bus: sender, identifier, data, flags, timestamp.
type Seen = (Option<PortId>, u32, Vec<u8>, FrameFlags, u64);

fn seen(sent: &[Transmitted]) -> Vec<Seen> {
    sent.iter().map(|t| (t.sender, t.frame.id(), t.frame.data().to_vec(), t.frame.flags(), t.timestamp_ns)).collect()
}

#[test]
fn a_standing_response_answers_1000_schedule_cycles_with_exact_frame_times() {
    // 0x10 (port 1, 2 bytes) 10 ms, 0x11 (port 2, 4 bytes) 10 ms: a 20 ms
    // cycle; each response published once.
    let mut channel = lin_channel(&[(0x10, 10), (0x11, 10)]);
    channel.stand(port(1), &standing(0x10, &[0xA1, 0xA2])).unwrap();
    channel.stand(port(2), &standing(0x11, &[1, 2, 3, 4])).unwrap();
    const CYCLES: u64 = 1_000;
    let mut sent = Vec::new();
    serve(&mut channel, 0, CYCLES * 20 * MS - 1, &mut sent);
    assert_eq!(sent.len(), 2 * CYCLES as usize);
    for (k, cycle) in sent.chunks(2).enumerate() {
        let start = k as u64 * 20 * MS;
        let expected = vec![
            (Some(port(1)), 0x10, vec![0xA1, 0xA2], FrameFlags::empty(), start + TWO_BYTES_NS),
            (Some(port(2)), 0x11, vec![1, 2, 3, 4], FrameFlags::empty(), start + 10 * MS + FOUR_BYTES_NS),
        ];
        assert_eq!(seen(cycle), expected, "cycle {k}");
        // On the bus a standing response is an ordinary response, its
        // checksum the model's.
        assert_eq!(cycle[0].frame, response_of(0x10, &[0xA1, 0xA2]));
    }
    assert_eq!(channel.lin_no_responses(), Some(0));
    for (n, answers) in [(1, CYCLES), (2, CYCLES)] {
        let member = channel.member_mut(port(n)).unwrap();
        assert_eq!((member.tx.len(), member.counters.tx_frames), (0, answers));
    }
}

fn response_of(id: u8, data: &[u8]) -> Frame {
    Frame::lin(id, Checksum::Enhanced, data).unwrap()
}

#[test]
fn a_replaced_standing_response_is_carried_by_the_next_header() {
    let mut channel = lin_channel(&[(0x10, 10)]);
    channel.stand(port(1), &standing(0x10, &[1])).unwrap();
    let mut sent = Vec::new();
    // Headers at 0, 10 and 20 ms carry 1; replaced at 25 ms, the header
    // at 30 ms carries 2, and so on.
    let next = serve(&mut channel, 0, 25 * MS, &mut sent);
    assert_eq!(next, 30 * MS);
    channel.stand(port(1), &standing(0x10, &[2])).unwrap();
    serve(&mut channel, 25 * MS, 50 * MS - 1, &mut sent);
    let got: Vec<(u8, u64)> = sent.iter().map(|t| (t.frame.data()[0], t.timestamp_ns)).collect();
    let header = |k: u64| k * 10 * MS + 2_812_500; // 54 bits: 1 data byte
    assert_eq!(got, [(1, header(0)), (1, header(1)), (1, header(2)), (2, header(3)), (2, header(4))]);
}

#[test]
fn a_withdrawn_standing_response_leaves_the_next_header_unanswered() {
    let mut channel = lin_channel(&[(0x10, 10)]);
    channel.stand(port(1), &standing(0x10, &[1, 2])).unwrap();
    let mut sent = Vec::new();
    serve(&mut channel, 0, 15 * MS, &mut sent);
    channel.stand(port(1), &Frame::lin_withdraw(0x10).unwrap()).unwrap();
    serve(&mut channel, 15 * MS, 40 * MS - 1, &mut sent);
    let none = FrameFlags::LIN_NO_RESPONSE;
    let expected = vec![
        (Some(port(1)), 0x10, vec![1, 2], FrameFlags::empty(), TWO_BYTES_NS),
        (Some(port(1)), 0x10, vec![1, 2], FrameFlags::empty(), 10 * MS + TWO_BYTES_NS),
        (None, 0x10, vec![], none, 20 * MS + HEADER_NS),
        (None, 0x10, vec![], none, 30 * MS + HEADER_NS),
    ];
    assert_eq!(seen(&sent), expected);
    assert_eq!(channel.lin_no_responses(), Some(2));
}

#[test]
fn a_queued_one_shot_response_answers_before_the_standing_one() {
    let mut channel = lin_channel(&[(0x10, 10)]);
    channel.stand(port(1), &standing(0x10, &[7, 7])).unwrap();
    publish(&mut channel, 1, [response(0x10, 2)]);
    let mut sent = Vec::new();
    serve(&mut channel, 0, 30 * MS - 1, &mut sent);
    let data: Vec<Vec<u8>> = sent.iter().map(|t| t.frame.data().to_vec()).collect();
    assert_eq!(data, [vec![0x10, 0x10], vec![7, 7], vec![7, 7]]);
    // The one-shot was confirmed from the FIFO; the standing answers count as sent.
    let member = channel.member_mut(port(1)).unwrap();
    assert_eq!((member.tx.len(), member.counters.tx_frames), (0, 3));
}

#[test]
fn a_port_that_leaves_takes_its_standing_responses_with_it() {
    let mut channel = lin_channel(&[(0x10, 10)]);
    channel.stand(port(1), &standing(0x10, &[1, 2])).unwrap();
    let mut sent = Vec::new();
    serve(&mut channel, 0, 5 * MS, &mut sent);
    channel.detach(port(1));
    serve(&mut channel, 5 * MS, 20 * MS - 1, &mut sent);
    let flags: Vec<FrameFlags> = sent.iter().map(|t| t.frame.flags()).collect();
    assert_eq!(flags, [FrameFlags::empty(), FrameFlags::LIN_NO_RESPONSE]);
    // Another port may stand for it now.
    channel.stand(port(2), &standing(0x10, &[3, 4])).unwrap();
}

#[test]
fn standing_responses_are_refused_with_their_cause() {
    let mut cfg = config(&[(0x10, 10), (0x30, 10), (0x11, 10)]);
    let lin = cfg.lin.as_mut().unwrap();
    lin.event_triggered.push(LinEventTriggeredConfig {
        name: "Doors".into(),
        id: 0x30,
        frames: vec![0x12, 0x13],
        collision_schedule: Vec::new(),
    });
    lin.sporadic.push(LinSporadicConfig { name: "Spo".into(), frames: vec![0x14] });
    lin.schedule[2] = crate::config::LinSlotConfig { id: None, sporadic: Some("Spo".into()), delay_ms: 10 };
    let mut channel = channel_of(cfg);
    // A second port may not stand for an identifier one stands for.
    channel.stand(port(1), &standing(0x10, &[1, 2])).unwrap();
    let taken = channel.stand(port(2), &standing(0x10, &[3, 4])).unwrap_err();
    assert!(taken.contains("another port of the channel stands"), "{taken}");
    // Replacing one's own is fine; withdrawing what one lacks is not.
    channel.stand(port(1), &standing(0x10, &[5, 6])).unwrap();
    let nothing = channel.stand(port(2), &Frame::lin_withdraw(0x10).unwrap()).unwrap_err();
    assert!(nothing.contains("which it does not have"), "{nothing}");
    // Refused as it comes: an identifier only a sporadic slot sends, and
    // one the schedule never sends. A frame the event-triggered frame
    // carries is polled unconditionally by its collision resolution, so
    // it may stand (its first byte its protected identifier).
    let refused = |frame: &Frame| channel.arbitration_refuses(port(1), frame);
    let sporadic = refused(&standing(0x14, &[1])).unwrap();
    assert!(sporadic.contains("no unconditional slot"), "{sporadic}");
    assert!(refused(&standing(0x20, &[1])).unwrap().contains("no unconditional slot"));
    assert!(refused(&Frame::lin_withdraw(0x20).unwrap()).is_some());
    assert_eq!(refused(&standing(0x12, &[0x92, 1])), None);
    assert_eq!(refused(&Frame::lin_withdraw(0x10).unwrap()), None);
}
