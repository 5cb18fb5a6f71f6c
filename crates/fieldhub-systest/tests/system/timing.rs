//! `timed` channels: frames occupy the bus for their exact bit time, and the
//! schedule — read from hub timestamps — is exactly what the bit lengths
//! predict.

use crate::FIELDHUB;
use fieldhub_client::{Frame, PortConfig};
use fieldhub_proto::bits::FrameBits;
use fieldhub_testkit::*;

const TIMED: &str = r#"
[[channel]]
name = "can0"
bitrate = 500000
timing = "timed"

[[channel]]
name = "slow"
bitrate = 500
timing = "timed"

[[channel]]
name = "fd0"
protocol = "canfd"
bitrate = 1000000
data_bitrate = 4000000
timing = "timed"
"#;

fn duration(frame: &Frame, nominal: u32, data: u32) -> u64 {
    FrameBits::of(frame).duration_ns(nominal, data)
}

#[test]
fn saturated_timed_channel_runs_frames_back_to_back_at_their_bit_length() {
    let hub = FIELDHUB.start_with(Some(TIMED), &[]);
    let sender = hub.client("sender");
    let listener = hub.client("listener");
    let tx = sender.open_port("can0").unwrap();
    listener.open_port_with("can0", &lossless()).unwrap();
    // Varied content, so stuffing differs from frame to frame.
    let frames: Vec<Frame> = (0..6000u32)
        .map(|i| {
            let len = (i % 9) as usize;
            let data: Vec<u8> = (0..len).map(|b| (i.wrapping_mul(31) as u8).wrapping_add(b as u8 * 17)).collect();
            Frame::can(0x100 + (i % 0x500), false, &data).unwrap()
        })
        .collect();
    std::thread::scope(|s| {
        s.spawn(|| frames.iter().for_each(|f| sender.send(&tx, f).unwrap()));
        let got = recv_n(&listener, frames.len());
        for (r, sent) in got.iter().zip(&frames) {
            assert_eq!(r.frame, *sent, "one sender: FIFO order");
        }
        // After the first frames the sender is far ahead of the bus: each
        // frame ends exactly its own duration after the previous one.
        for k in 10..got.len() {
            let gap = got[k].meta.timestamp_ns - got[k - 1].meta.timestamp_ns;
            assert_eq!(gap, duration(&got[k].frame, 500_000, 500_000), "frame {k}");
        }
        // Bus load: everything sent is inside the 10 s window once the
        // current 100 ms bucket is complete.
        let busy: u64 = frames.iter().map(|f| duration(f, 500_000, 500_000)).sum();
        let expected = 100.0 * busy as f64 / 10e9;
        let can0 = || listener.stats().unwrap().channels.into_iter().find(|c| c.name == "can0").unwrap();
        let near = |load: f64| (load - expected).abs() <= expected * 0.01;
        let load = || can0().load_10s;
        wait_until(deadline(), format_args!("a 10 s bus load of {expected} % (within 1 %)"), || near(load()));
        let can0 = can0();
        let bits: u64 = frames.iter().map(|f| u64::from(FrameBits::of(f).total)).sum();
        assert_eq!(can0.bits, bits);
    });
}

#[test]
fn frames_pending_together_go_in_arbitration_order_on_a_timed_bus() {
    let hub = FIELDHUB.start_with(Some(TIMED), &[]);
    let listener = hub.client("listener");
    listener.open_port_with("slow", &lossless()).unwrap();
    let blocker = hub.client("blocker");
    let b = blocker.open_port("slow").unwrap();
    let contenders = [
        Frame::can(0x300, false, &[3]).unwrap(),
        Frame::remote(0x100, false, 1).unwrap(),
        Frame::can(0x100 << 18, true, &[2]).unwrap(),
        Frame::can(0x100, false, &[1]).unwrap(),
    ];
    let clients: Vec<_> = contenders.iter().enumerate().map(|(i, _)| hub.client(&format!("node{i}"))).collect();
    let ports: Vec<_> = clients.iter().map(|c| c.open_port("slow").unwrap()).collect();
    // At 500 bit/s an 8-byte frame keeps the bus busy for about 220 ms. Two
    // of them: once only one waits in the blocker's queue, the first is on
    // the wire and the contenders queue up behind it.
    blocker.send(&b, &Frame::can(0x7FF, false, &[0; 8]).unwrap()).unwrap();
    blocker.send(&b, &Frame::can(0x7FF, false, &[1; 8]).unwrap()).unwrap();
    let waiting =
        || listener.stats().unwrap().ports.iter().find(|p| p.port_id == b.port_id).map_or(0, |p| p.tx_pending);
    wait_until(deadline(), "the blocker's first frame is on the bus and one waits", || waiting() == 1);
    for ((client, port), frame) in clients.iter().zip(&ports).zip(&contenders) {
        client.send(port, frame).unwrap();
    }
    let order: Vec<Frame> = recv_n(&listener, 6).into_iter().map(|r| r.frame).collect();
    assert_eq!(order[0].data(), [0; 8]);
    // Data before remote with the same id; base format before extended with
    // the same base bits; then the higher id; the blocker's 0x7FF last.
    let [c0, c1, c2, c3] = contenders;
    assert_eq!(order[1..5], [c3, c1, c2, c0]);
    assert_eq!(order[5].data(), [1; 8]);
}

#[test]
fn brs_frames_spend_their_data_phase_at_the_data_bitrate() {
    let hub = FIELDHUB.start_with(Some(TIMED), &[]);
    let sender = hub.client("sender");
    let listener = hub.client("listener");
    let tx = sender.open_port_with("fd0", &PortConfig { fd: true, ..Default::default() }).unwrap();
    listener.open_port_with("fd0", &lossless()).unwrap();
    let flags = [fieldhub_client::FrameFlags::empty(), fieldhub_client::FrameFlags::BRS];
    let frames: Vec<Frame> = (0..400).map(|i| Frame::can_fd(0x123, flags[i % 2], &[i as u8; 64]).unwrap()).collect();
    for f in &frames {
        sender.send(&tx, f).unwrap();
    }
    let got = recv_n(&listener, frames.len());
    for k in 10..got.len() {
        let gap = got[k].meta.timestamp_ns - got[k - 1].meta.timestamp_ns;
        assert_eq!(gap, duration(&got[k].frame, 1_000_000, 4_000_000), "frame {k}");
    }
    let with_brs = duration(&frames[1], 1_000_000, 4_000_000);
    let without = duration(&frames[0], 1_000_000, 4_000_000);
    assert!(with_brs * 2 < without, "BRS at 4 Mbit/s must be much shorter: {with_brs} vs {without}");
    let _ = PortConfig::default();
}

#[test]
fn flush_on_a_timed_channel_waits_for_the_frame_on_the_wire() {
    let hub = FIELDHUB.start_with(Some(TIMED), &[]);
    let sender = hub.client("sender");
    let listener = hub.client("listener");
    let tx = sender.open_port("slow").unwrap();
    listener.open_port_with("slow", &lossless()).unwrap();
    // About 220 ms on the wire at 500 bit/s.
    sender.send(&tx, &Frame::can(0x10, false, &[0; 8]).unwrap()).unwrap();
    sender.flush().unwrap();
    // The frame is sequenced, so the listener's own barrier finds it queued.
    listener.flush().unwrap();
    assert!(listener.try_recv().unwrap().is_some(), "flush returned before the frame was on the bus");
}
