//! The loop's tests: a reactor without listeners, whose connections are one
//! end of a unix socket pair (a real descriptor for epoll to watch) and
//! whose bus is the test reading the inbox. Time is given, never slept.

use std::io::{ErrorKind, Read, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use fieldhub_bus::credit::TX_CREDITS;
use fieldhub_bus::inbox::{Inbound, Inbox};
use fieldhub_proto::wire::{self, Message};
use mio::Events;

use super::input::READ_CHUNK;
use super::testing::{self, frames_message};
use super::*;
use crate::session::peer_key::PeerKey;
use crate::session::peer_user::PeerOrigin;
use crate::session::{MAX_HANDSHAKES, MAX_HANDSHAKES_PER_PEER};

/// A reactor without listeners, and the inbox its bus would read.
fn reactor() -> (Reactor, Inbox) {
    let (sessions, inbox) = testing::sessions();
    let (reactor, _handle) = Reactor::new(Vec::new(), sessions, None, None, None).expect("a reactor");
    (reactor, inbox)
}

/// A unix-socket client accepted by `reactor`: the client's end, and the
/// connection's index.
fn connect(reactor: &mut Reactor) -> (UnixStream, usize) {
    connect_as(reactor, PeerKey::Unknown)
}

/// [`connect`] a client that counts against `key`.
fn connect_as(reactor: &mut Reactor, key: PeerKey) -> (UnixStream, usize) {
    let (ours, client) = UnixStream::pair().expect("a socket pair");
    ours.set_nonblocking(true).expect("non-blocking");
    let index = reactor.conns.next_index();
    reactor.admit(Accepted {
        socket: conn::Socket::Unix(ours),
        via: "a unix socket",
        peer: "test".into(),
        origin: PeerOrigin::Operator,
        key,
        phase: Phase::Hello { shm: false },
    });
    (client, index)
}

/// One round of the loop without its clock: what is ready now, then the
/// notices.
fn turn(reactor: &mut Reactor, events: &mut Events) {
    reactor.poll.poll(events, Some(Duration::ZERO)).expect("poll");
    reactor.serve_events(events);
    reactor.serve_notices();
}

/// Everything the hub wrote to `client` and closed after.
fn read_until_closed(client: &mut UnixStream) -> Vec<Vec<u8>> {
    let mut bytes = Vec::new();
    client.read_to_end(&mut bytes).expect("reads to the end");
    testing::bodies(&bytes)
}

fn refusal_text(body: &[u8]) -> String {
    match wire::decode(body) {
        Ok(Message::Refuse(report)) => report.text.to_owned(),
        other => panic!("expected REFUSE, got {other:?}"),
    }
}

/// As much of `bytes` as a non-blocking `client` takes now.
fn write_some(client: &mut UnixStream, bytes: &[u8]) -> usize {
    match client.write(bytes) {
        Ok(n) => n,
        Err(e) if e.kind() == ErrorKind::WouldBlock => 0,
        Err(e) => panic!("the client cannot write: {e}"),
    }
}

/// The frame ids the bus has been sent, each run's in order.
fn forwarded(inbox: &Inbox) -> Vec<Vec<u32>> {
    let mut runs = Vec::new();
    while let Ok(item) = inbox.try_recv() {
        match item {
            Inbound::Frames { frames, .. } => {
                runs.push(frames.iter().map(|(_, frame, _)| frame.id()).collect());
                inbox.recycle(frames);
            }
            other => panic!("expected frames, got {other:?}"),
        }
    }
    runs
}

/// Say `HELLO` and take the client's attach off the inbox: its credit.
fn welcome(
    reactor: &mut Reactor,
    events: &mut Events,
    client: &mut UnixStream,
    inbox: &Inbox,
) -> Arc<fieldhub_bus::credit::TxCredit> {
    client.write_all(&testing::hello()).expect("HELLO sent");
    turn(reactor, events);
    match inbox.try_recv() {
        Ok(Inbound::Attach { credit, .. }) => credit,
        other => panic!("expected the attach, got {other:?}"),
    }
}

#[test]
fn a_connection_that_sends_nothing_is_refused_and_closed_at_its_deadline_not_before() {
    let (mut reactor, _inbox) = reactor();
    let (mut client, index) = connect(&mut reactor);
    let deadline = reactor.deadlines.next().expect("a handshake deadline");

    reactor.expire_handshakes(deadline - Duration::from_millis(1));
    assert!(reactor.conns.get(index).is_some(), "open until its deadline");
    reactor.expire_handshakes(deadline);
    assert!(reactor.conns.get(index).is_none(), "closed at its deadline");

    let messages = read_until_closed(&mut client);
    assert_eq!(messages.len(), 1);
    assert_eq!(refusal_text(&messages[0]), "no HELLO within 5 s");
}

#[test]
fn a_connection_that_sends_too_little_is_refused_and_closed_at_its_deadline() {
    let (mut reactor, _inbox) = reactor();
    let mut events = Events::with_capacity(16);
    let (mut client, index) = connect(&mut reactor);
    let hello = testing::hello();
    client.write_all(&hello[..hello.len() - 1]).expect("sent");
    turn(&mut reactor, &mut events);
    assert!(reactor.conns.get(index).is_some_and(|conn| conn.input.len() == hello.len() - 1), "read, kept");

    reactor.expire_handshakes(reactor.deadlines.next().expect("a handshake deadline"));
    assert!(reactor.conns.get(index).is_none());
    let messages = read_until_closed(&mut client);
    assert_eq!(messages.len(), 1);
    assert_eq!(refusal_text(&messages[0]), "no HELLO within 5 s");
}

#[test]
fn a_client_welcomed_before_its_deadline_outlives_it() {
    let (mut reactor, inbox) = reactor();
    let mut events = Events::with_capacity(16);
    let (mut client, index) = connect(&mut reactor);
    let deadline = reactor.deadlines.next().expect("a handshake deadline");
    welcome(&mut reactor, &mut events, &mut client, &inbox);

    reactor.expire_handshakes(deadline + Duration::from_secs(3600));
    assert!(reactor.conns.get(index).is_some());
    assert_eq!(reactor.deadlines.next(), None, "its deadline is spent");
    client.set_nonblocking(true).expect("non-blocking");
    let mut bytes = vec![0; 1024];
    let n = client.read(&mut bytes).expect("the WELCOME waits");
    let messages = testing::bodies(&bytes[..n]);
    assert!(matches!(wire::decode(&messages[0]), Ok(Message::Welcome(_))), "and nothing else: {messages:?}");
    assert_eq!(messages.len(), 1);
}

#[test]
fn a_frames_batch_from_the_socket_reaches_the_inbox_as_one_item() {
    let (mut reactor, inbox) = reactor();
    let mut events = Events::with_capacity(16);
    let (mut client, _) = connect(&mut reactor);
    welcome(&mut reactor, &mut events, &mut client, &inbox);

    client.write_all(&frames_message(0..100)).expect("sent");
    turn(&mut reactor, &mut events);
    assert_eq!(forwarded(&inbox), [(0..100).collect::<Vec<_>>()]);
}

#[test]
fn a_sender_without_credit_is_read_only_as_far_as_the_read_ahead_and_resumes_when_credit_returns() {
    let (mut reactor, inbox) = reactor();
    let mut events = Events::with_capacity(16);
    let (mut client, index) = connect(&mut reactor);
    let credit = welcome(&mut reactor, &mut events, &mut client, &inbox);
    client.set_nonblocking(true).expect("non-blocking");

    // Far more than the read-ahead and the socket's buffer hold.
    const FRAMES: u32 = 40_000;
    let bytes: Vec<u8> = (0..FRAMES).step_by(100).flat_map(|first| frames_message(first..first + 100)).collect();
    let mut sent = 0;
    // The bus returns no credit: the client writes until its socket is full
    // and stays full.
    let mut idle_rounds = 0;
    while idle_rounds < 2 {
        let n = write_some(&mut client, &bytes[sent..]);
        sent += n;
        turn(&mut reactor, &mut events);
        idle_rounds = if n == 0 { idle_rounds + 1 } else { 0 };
    }
    let mut ids: Vec<u32> = forwarded(&inbox).concat();
    assert_eq!(ids.len(), TX_CREDITS as usize, "as far as credit went");
    let buffered = reactor.conns.get(index).expect("open").input.len();
    assert!(buffered >= INPUT_LIMIT, "it read ahead while waiting: {buffered} bytes");
    assert!(buffered < INPUT_LIMIT + READ_CHUNK, "no further than the read-ahead: {buffered} bytes");
    assert!(sent < bytes.len(), "the sender is held back");

    // The bus transmits those frames and returns their credit: forwarding
    // resumes without a byte more from the client, again as far as credit
    // goes.
    for _ in 0..ids.len() {
        credit.release();
    }
    turn(&mut reactor, &mut events);
    let resumed: Vec<u32> = forwarded(&inbox).concat();
    assert_eq!(resumed.len(), TX_CREDITS as usize);
    ids.extend(resumed);

    // And so on to the last frame, every one once and in order.
    let mut rounds = 0;
    while ids.len() < FRAMES as usize {
        rounds += 1;
        assert!(rounds < 10_000, "stalled after {} frames", ids.len());
        let returned = credit.in_flight();
        for _ in 0..returned {
            credit.release();
        }
        sent += write_some(&mut client, &bytes[sent..]);
        turn(&mut reactor, &mut events);
        ids.extend(forwarded(&inbox).concat());
    }
    assert_eq!(ids, (0..FRAMES).collect::<Vec<_>>());
}

#[test]
fn a_peer_that_opens_more_silent_connections_than_its_share_loses_its_oldest_and_others_still_get_in() {
    let (mut reactor, inbox) = reactor();
    let mut events = Events::with_capacity(4 * MAX_HANDSHAKES);
    let nobody = PeerKey::User(65534);
    // Slots are scarce: others hold theirs, nobody its share.
    let _others: Vec<(UnixStream, usize)> = (0..MAX_HANDSHAKES / 2 - MAX_HANDSHAKES_PER_PEER)
        .map(|i| connect_as(&mut reactor, PeerKey::Address([10, 0, 0, (i / MAX_HANDSHAKES_PER_PEER) as u8].into())))
        .collect();
    let mut silent: Vec<(UnixStream, usize)> =
        (0..MAX_HANDSHAKES_PER_PEER).map(|_| connect_as(&mut reactor, nobody)).collect();
    let (mut oldest, oldest_index) = silent.remove(0);
    let serial = reactor.conns.get(oldest_index).expect("open").serial;
    let _one_more = connect_as(&mut reactor, nobody);
    let reused = reactor.conns.get(oldest_index).is_some_and(|conn| conn.serial != serial);
    assert!(reused, "its oldest was closed to make room, the new one took its place");
    let messages = read_until_closed(&mut oldest);
    assert!(refusal_text(&messages[0]).contains("its oldest goes first"), "told why");
    assert!(
        silent.iter().all(|(_, index)| reactor.conns.get(*index).is_some()),
        "the others stay until their deadline"
    );

    let (mut client, index) = connect_as(&mut reactor, PeerKey::User(0));
    welcome(&mut reactor, &mut events, &mut client, &inbox);
    assert!(reactor.conns.get(index).is_some_and(|conn| conn.held.is_none()), "past its handshake, holds no slot");
}

#[test]
fn with_every_handshake_slot_taken_a_new_connection_closes_the_oldest_of_all_and_is_welcomed() {
    let (mut reactor, inbox) = reactor();
    let mut events = Events::with_capacity(4 * MAX_HANDSHAKES);
    let peers = (MAX_HANDSHAKES / MAX_HANDSHAKES_PER_PEER) as u8;
    let mut silent: Vec<(UnixStream, usize)> = (0..MAX_HANDSHAKES)
        .map(|i| connect_as(&mut reactor, PeerKey::Address([10, 0, 0, i as u8 % peers].into())))
        .collect();
    let (mut oldest, oldest_index) = silent.remove(0);
    let serial = reactor.conns.get(oldest_index).expect("open").serial;
    let (mut client, _) = connect_as(&mut reactor, PeerKey::User(0));
    // The new connection takes the place of the one that made room.
    let index = oldest_index;
    assert!(reactor.conns.get(index).is_some_and(|conn| conn.serial != serial), "the oldest of all made room");
    assert!(refusal_text(&read_until_closed(&mut oldest)[0]).contains("the oldest goes first"));
    welcome(&mut reactor, &mut events, &mut client, &inbox);
    assert!(reactor.conns.get(index).is_some());
    assert_eq!(reactor.pending.total(), MAX_HANDSHAKES - 1, "the silent ones still wait, the client holds none");
}
