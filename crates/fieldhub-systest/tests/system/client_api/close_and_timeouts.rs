//! What applications with several threads meet: a client closed from one
//! thread while others are blocked in it, and a request that times out
//! behind a full send queue — a timeout, not the end of the connection.

use std::time::Duration;

use crate::FIELDHUB;
use fieldhub_client::{Client, ClientError, ClientOptions, Frame};

/// One channel so slow (50 bit/s, about 2 s a frame) that a fast sender
/// fills every buffer between it and the bus within a few thousand frames.
const SLOW: &str = r#"
[[channel]]
name = "slow"
bitrate = 50
timing = "timed"
"#;

fn assert_closed_by_client(outcome: Result<(), ClientError>) {
    match outcome {
        Err(ClientError::Closed { reason }) => assert!(reason.contains("client closed"), "reason: {reason}"),
        other => panic!("expected the client's close, got {other:?}"),
    }
}

#[test]
fn closing_from_another_thread_wakes_a_blocked_recv_over_tcp_and_shm() {
    let hub = FIELDHUB.start_shm();
    for client in [hub.client("tcp-receiver"), hub.shm_client("shm-receiver")] {
        client.open_port("can0").unwrap();
        std::thread::scope(|s| {
            let blocked = s.spawn(|| client.recv(None).map(|_| ()));
            // Whether the receiver is already waiting or not yet: either way
            // it must end with the close, never wait on.
            client.close();
            assert_closed_by_client(blocked.join().unwrap());
        });
        assert_closed_by_client(client.recv(Some(Duration::ZERO)).map(|_| ()));
        client.close();
    }
}

#[test]
fn closing_from_another_thread_wakes_a_send_blocked_on_a_full_queue() {
    let hub = FIELDHUB.start_with(Some(SLOW), &[]);
    let client = hub.client("sender");
    let port = client.open_port("slow").unwrap();
    let frame = Frame::can(0x10, false, &[1]).unwrap();
    std::thread::scope(|s| {
        // Without a timeout: once the buffers are full this waits for room
        // that only the close ends.
        let blocked = s.spawn(|| -> Result<(), ClientError> {
            loop {
                client.send(&port, &frame)?;
            }
        });
        // Held back for good: a send with a short timeout finds no room.
        while client.send_timeout(&port, &frame, Some(Duration::from_millis(250))).is_ok() {}
        client.close();
        assert_closed_by_client(blocked.join().unwrap());
    });
}

#[test]
fn a_request_that_cannot_be_queued_times_out_and_the_connection_stays_open() {
    let hub = FIELDHUB.start_with(Some(SLOW), &[]);
    // Long enough that opening the port never times out on a busy machine.
    let options = ClientOptions { name: "sender".into(), timeout: Duration::from_secs(2), ..Default::default() };
    let client = Client::connect_with(&hub.url, &options).unwrap();
    let port = client.open_port("slow").unwrap();
    let frame = Frame::can(0x10, false, &[1]).unwrap();
    // Fill the send queue until a sender is held back for a while.
    while client.send_timeout(&port, &frame, Some(Duration::from_millis(250))).is_ok() {}
    match client.flush() {
        Err(ClientError::RequestQueueFull(t)) => assert_eq!(t, options.timeout),
        other => panic!("a flush behind a full send queue should time out, got {other:?}"),
    }
    // Still connected: the next send finds the queue full, not the connection closed.
    match client.send_timeout(&port, &frame, Some(Duration::ZERO)) {
        Ok(()) | Err(ClientError::SendQueueFull(_)) => {}
        Err(e) => panic!("the connection should still be open: {e}"),
    }
}
