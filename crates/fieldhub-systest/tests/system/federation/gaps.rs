//! A relay hub (a real process) against an owner the test plays itself over
//! Zenoh, publishing committed events exactly as an owner hub does — with
//! the gaps and old epochs an owner hub never produces on purpose: a gap the
//! owner's history fills is filled in order; one it cannot fill is reported
//! to the channel's clients (`CHANNEL_STATE` gap) and counted, never skipped
//! silently; events of an older epoch are refused. Federation links are
//! always authenticated, so the played owner knows the hubs' token.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use crate::FIELDHUB;
use fieldhub_client::fate::ChannelCondition;
use fieldhub_client::Frame;
use fieldhub_hub::federation::event::{Batch, Body, Event, HistoryQuery, HistoryReply, Term};
use fieldhub_testkit::federation::{free_port, token_file};
use fieldhub_testkit::*;
use zenoh::qos::CongestionControl;
use zenoh::Wait;

/// The events the played owner keeps, by term and sequence number.
type History = BTreeMap<(Term, u64), Vec<u8>>;

/// The owner's side of the protocol: its liveliness token, its events and
/// the history it answers queries from.
struct PlayedOwner {
    /// Held open for the test: the entities below live as long as it.
    _session: zenoh::Session,
    publisher: zenoh::pubsub::Publisher<'static>,
    history: Arc<Mutex<History>>,
    _queryable: zenoh::query::Queryable<()>,
    _token: zenoh::liveliness::LivelinessToken,
}

/// The played owner's term of `epoch`: one incarnation for all.
fn term(epoch: u64) -> Term {
    Term { epoch, incarnation: 1 }
}

impl PlayedOwner {
    /// Listen on `port`, admitting hubs that know `secret` as the hubs'
    /// user-password authentication does (`dictionary`: `fieldhub:SECRET`).
    fn listen(port: u16, secret: &str, dictionary: &std::path::Path) -> Self {
        let mut config = zenoh::Config::default();
        for (key, value) in [
            ("mode", "\"peer\"".to_owned()),
            ("listen/endpoints", format!("[\"tcp/127.0.0.1:{port}\"]")),
            ("scouting/multicast/enabled", "false".to_owned()),
            ("transport/auth/usrpwd/user", "\"fieldhub\"".to_owned()),
            ("transport/auth/usrpwd/password", format!("\"{secret}\"")),
            ("transport/auth/usrpwd/dictionary_file", format!("\"{}\"", dictionary.display())),
        ] {
            config.insert_json5(key, &value).unwrap();
        }
        let session = zenoh::open(config).wait().unwrap();
        let history: Arc<Mutex<History>> = Arc::default();
        let queryable = {
            let history = Arc::clone(&history);
            session
                .declare_queryable("fieldhub/body/history")
                .callback(move |query| {
                    let p = query.parameters();
                    let asked = HistoryQuery::parse(|k| p.get(k)).unwrap();
                    let history = history.lock().unwrap();
                    // Like an owner hub: consecutive events from the one asked
                    // for, nothing when that one is not kept; done with every
                    // epoch but its newest.
                    let mut reply = HistoryReply {
                        last: history.keys().filter(|(t, _)| *t == asked.term).map(|&(_, seq)| seq).max().unwrap_or(0),
                        done: history.keys().any(|(t, _)| *t > asked.term),
                        events: Vec::new(),
                    };
                    for seq in asked.from..=asked.to {
                        let Some(bytes) = history.get(&(asked.term, seq)) else { break };
                        reply.events.push(bytes.clone());
                    }
                    let mut bytes = Vec::new();
                    reply.encode(&mut bytes);
                    query.reply("fieldhub/body/history", bytes).wait().unwrap();
                })
                .wait()
                .unwrap()
        };
        let publisher = session
            .declare_publisher("fieldhub/body/events")
            .congestion_control(CongestionControl::Block)
            .wait()
            .unwrap();
        let token = session.liveliness().declare_token("fieldhub/body/owner/played/1/1").wait().unwrap();
        Self { _session: session, publisher, history, _queryable: queryable, _token: token }
    }

    fn event(epoch: u64, seq: u64) -> Vec<u8> {
        let frame = Frame::can(seq as u32, false, &[epoch as u8]).unwrap();
        let event = Event {
            term: term(epoch),
            seq,
            start_ns: seq * 1000,
            end_ns: seq * 1000 + 230,
            origin: None,
            body: Body::Frame(frame),
        };
        let mut bytes = Vec::new();
        event.encode(&mut bytes);
        bytes
    }

    /// Keep the event in the history without publishing it: lost in transit.
    fn keep_only(&self, epoch: u64, seq: u64) {
        self.history.lock().unwrap().insert((term(epoch), seq), Self::event(epoch, seq));
    }

    fn publish(&self, epoch: u64, seq: u64) {
        self.keep_only(epoch, seq);
        // An owner hub publishes its events in batches; this one, one a batch.
        let mut batch = Batch::with_capacity(1);
        batch.push(|out| out.extend_from_slice(&Self::event(epoch, seq)));
        self.publisher.put(batch.bytes()).wait().unwrap();
    }
}

#[test]
fn gaps_are_filled_from_history_or_reported_never_skipped() {
    let ports = [free_port(), free_port()];
    let (secret, dictionary) = ("gaps-federation-secret", token_file("fieldhub:gaps-federation-secret"));
    let token = token_file(secret);
    let owner = PlayedOwner::listen(ports[0], secret, &dictionary);
    let config = format!(
        "[hub]\nname = \"edge\"\n[federation]\nlisten = [\"tcp/127.0.0.1:{}\"]\nconnect = [\"tcp/127.0.0.1:{}\"]\n\
         token_file = \"{}\"\n[[channel]]\nname = \"body\"\nfederated = true\nowner = \"played\"\n",
        ports[1],
        ports[0],
        token.display()
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
    listener.flush().unwrap();
    let gaps: Vec<_> =
        listener.channel_events().into_iter().filter(|e| e.condition == Some(ChannelCondition::Gap)).collect();
    assert!(
        gaps.len() == 1 && gaps[0].missed == 2 && gaps[0].text.contains("5..=6"),
        "the lost events were not reported: {gaps:?}"
    );

    // A new owner epoch starts over; events of the old one published after
    // it are refused.
    owner.publish(2, 1);
    assert_eq!(ids(1), [(1, 2)]);
    owner.publish(1, 8);
    owner.publish(2, 2);
    assert_eq!(ids(1), [(2, 2)]);
    listener.flush().unwrap();
    assert_nothing_pending(&listener);

    let stats = listener.stats().unwrap();
    let f = stats.channels.iter().find(|c| c.name == "body").unwrap().federation.clone().unwrap();
    assert_eq!(
        (f.role.as_str(), f.owner.as_str(), f.epoch, f.last_seq, f.gaps_recovered, f.desyncs, f.stale),
        ("relay", "played", 2, 2, 1, 1, 1)
    );
}
