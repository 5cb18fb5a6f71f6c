//! Client features that need a real hub: the ready fd and acceptance filters.

use crate::FIELDHUB;
use fieldhub_client::{Filter, Frame};
use fieldhub_proto::frame::CAN_EFF_FLAG;
use fieldhub_testkit::*;

#[test]
fn ready_fd_is_readable_exactly_while_frames_wait() {
    let hub = FIELDHUB.start();
    let sender = hub.client("sender");
    let receiver = hub.client("receiver");
    let tx = sender.open_port("can0").unwrap();
    receiver.open_port("can0").unwrap();
    assert_ready_fd_follows_the_receive_queue(&sender, &tx, &receiver);
}

#[test]
fn ready_fd_wakes_when_the_hub_goes_away() {
    let hub = FIELDHUB.start();
    let receiver = hub.client("receiver");
    receiver.open_port("can0").unwrap();
    let fd = receiver.fileno().unwrap();
    assert!(hub.terminate().success());
    assert!(readable(fd, 60_000));
    assert!(receiver.recv(Some(PATIENCE)).is_err());
}

#[test]
fn filters_deliver_only_matching_frames() {
    let hub = FIELDHUB.start();
    let sender = hub.client("sender");
    let receiver = hub.client("receiver");
    let tx = sender.open_port("can0").unwrap();
    let rx = receiver.open_port("can0").unwrap();
    let filters = [
        Filter { can_id: 0x100, can_mask: 0x700 | CAN_EFF_FLAG },
        Filter { can_id: 0x1234_5678 | CAN_EFF_FLAG, can_mask: 0x1FFF_FFFF | CAN_EFF_FLAG },
    ];
    receiver.set_filters(&rx, Some(&filters)).unwrap();
    let frames = [
        Frame::can(0x123, false, &[1]).unwrap(),
        Frame::can(0x123, true, &[2]).unwrap(),
        Frame::can(0x223, false, &[3]).unwrap(),
        Frame::can(0x1234_5678, true, &[4]).unwrap(),
        Frame::error(0x4, [0; 8]).unwrap(),
    ];
    for frame in &frames {
        sender.send(&tx, frame).unwrap();
    }
    sender.flush().unwrap();
    let got: Vec<Frame> = recv_n(&receiver, 3).into_iter().map(|r| r.frame).collect();
    assert_eq!(got, [frames[0].clone(), frames[3].clone(), frames[4].clone()]);
    assert_nothing_pending(&receiver);

    receiver.set_filters(&rx, None).unwrap();
    sender.send(&tx, &frames[2]).unwrap();
    assert_eq!(recv_n(&receiver, 1)[0].frame, frames[2]);
}
