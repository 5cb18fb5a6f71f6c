//! A relay hub (a real process) against an owner the test plays itself over
//! Zenoh, publishing committed events exactly as an owner hub does — with
//! the gaps and old epochs an owner hub never produces on purpose: a gap the
//! owner's history fills is filled in order; one it cannot fill is reported
//! to the channel's clients and counted, never skipped silently; events of
//! an older epoch are refused.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use crate::FIELDHUB;
use fieldhub_client::{ClientError, Frame};
use fieldhub_hub::federation::event::Event;
use fieldhub_testkit::federation::free_port;
use fieldhub_testkit::*;
use zenoh::qos::CongestionControl;
use zenoh::Wait;

/// The owner's side of the protocol: its liveliness token, its events and
/// the history it answers queries from.
struct PlayedOwner {
    /// Held open for the test: the entities below live as long as it.
    _session: zenoh::Session,
    publisher: zenoh::pubsub::Publisher<'static>,
    history: Arc<Mutex<BTreeMap<u64, Vec<u8>>>>,
    _queryable: zenoh::query::Queryable<()>,
    _token: zenoh::liveliness::LivelinessToken,
}

impl PlayedOwner {
    fn listen(port: u16) -> Self {
        let mut config = zenoh::Config::default();
        for (key, value) in [
            ("mode", "\"peer\"".to_owned()),
            ("listen/endpoints", format!("[\"tcp/127.0.0.1:{port}\"]")),
            ("scouting/multicast/enabled", "false".to_owned()),
        ] {
            config.insert_json5(key, &value).unwrap();
        }
        let session = zenoh::open(config).wait().unwrap();
        let history: Arc<Mutex<BTreeMap<u64, Vec<u8>>>> = Arc::default();
        let queryable = {
            let history = Arc::clone(&history);
            session
                .declare_queryable("fieldhub/body/history")
                .callback(move |query| {
                    let p = query.parameters();
                    let bound = |k: &str| p.get(k).and_then(|v| v.parse::<u64>().ok()).unwrap();
                    let mut out = Vec::new();
                    // Like the owner hub: nothing when the start is not kept.
                    let history = history.lock().unwrap();
                    if history.contains_key(&bound("from")) {
                        for bytes in history.range(bound("from")..=bound("to")).map(|(_, b)| b) {
                            out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
                            out.extend_from_slice(bytes);
                        }
                    }
                    query.reply("fieldhub/body/history", out).wait().unwrap();
                })
                .wait()
                .unwrap()
        };
        let publisher = session
            .declare_publisher("fieldhub/body/events")
            .congestion_control(CongestionControl::Block)
            .wait()
            .unwrap();
        let token = session.liveliness().declare_token("fieldhub/body/owner/played/1").wait().unwrap();
        Self { _session: session, publisher, history, _queryable: queryable, _token: token }
    }

    fn event(epoch: u64, seq: u64) -> Vec<u8> {
        let frame = Frame::can(seq as u32, false, &[epoch as u8]).unwrap();
        let event = Event { epoch, seq, start_ns: seq * 1000, end_ns: seq * 1000 + 230, origin: None, frame };
        let mut bytes = Vec::new();
        event.encode(&mut bytes);
        bytes
    }

    /// Keep the event in the history without publishing it: lost in transit.
    fn keep_only(&self, epoch: u64, seq: u64) {
        self.history.lock().unwrap().insert(seq, Self::event(epoch, seq));
    }

    fn publish(&self, epoch: u64, seq: u64) {
        self.keep_only(epoch, seq);
        self.publisher.put(Self::event(epoch, seq)).wait().unwrap();
    }
}

#[test]
fn gaps_are_filled_from_history_or_reported_never_skipped() {
    let ports = [free_port(), free_port()];
    let owner = PlayedOwner::listen(ports[0]);
    let config = format!(
        "[hub]\nname = \"edge\"\n[federation]\nlisten = [\"tcp/127.0.0.1:{}\"]\nconnect = [\"tcp/127.0.0.1:{}\"]\n\
         [[channel]]\nname = \"body\"\nfederated = true\nowner = \"played\"\n",
        ports[1], ports[0]
    );
    let relay = FIELDHUB.start_with(Some(&config), &[]);
    relay.wait_for_log("the owner is there");
    let listener = relay.client("listener");
    listener.open_port_with("body", &lossless()).unwrap();
    // The listener's port is open once a flush comes back; events from now on reach it.
    listener.flush().unwrap();
    let ids = |n: usize| -> Vec<(u32, u8)> {
        recv_n(&listener, n).iter().map(|r| (r.frame.id(), r.frame.data()[0])).collect()
    };

    // 3 is lost in transit but kept in the history: fetched, applied in place.
    owner.publish(1, 1);
    owner.publish(1, 2);
    owner.keep_only(1, 3);
    owner.publish(1, 4);
    assert_eq!(ids(4), [(1, 1), (2, 1), (3, 1), (4, 1)]);
    listener.flush().unwrap();

    // 5 and 6 are lost and gone from the history: reported, then 7 applied.
    owner.publish(1, 7);
    assert_eq!(ids(1), [(7, 1)]);
    match listener.flush() {
        Err(ClientError::Rejected { text, .. }) => {
            assert!(text.contains("desynchronised") && text.contains("5..=6"), "{text}")
        }
        other => panic!("the lost events were not reported: {other:?}"),
    }

    // A new owner epoch starts over; events of the old one are refused.
    owner.publish(2, 1);
    owner.publish(1, 8);
    owner.publish(2, 2);
    assert_eq!(ids(2), [(1, 2), (2, 2)]);
    listener.flush().unwrap();
    assert_nothing_pending(&listener);

    let stats = listener.stats().unwrap();
    let f = stats.channels.iter().find(|c| c.name == "body").unwrap().federation.clone().unwrap();
    assert_eq!(
        (f.role.as_str(), f.owner.as_str(), f.epoch, f.last_seq, f.gaps_recovered, f.desyncs, f.stale),
        ("relay", "played", 2, 2, 1, 1, 1)
    );
}
