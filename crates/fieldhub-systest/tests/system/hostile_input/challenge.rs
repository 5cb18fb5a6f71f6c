//! The token never crosses the connection (issue 34, attack 7;
//! `spec/protocol.md` 5.1): a hub with a token answers `HELLO` with a
//! `CHALLENGE`, and the client proves the token with a MAC over its nonce.
//! What a listener on the path records is of no use to it: the token's bytes
//! are not in it, an `AUTH` it replays answers a nonce the hub no longer
//! asks, and a client of the old version, which sent its token in clear, is
//! refused with what to upgrade. Over shared memory and ivshmem the same
//! challenge admits the token's holder; every refusal is counted per
//! transport in `STATS` (`auth_refused`).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use super::attacker::Pair;
use crate::FIELDHUB;
use fieldhub_proto::wire::{self, ErrorCode, Message};
use fieldhub_testkit::*;

const TOKEN: &str = "a-token-no-capture-may-hold-7f3a9c51";
/// The numbered pair that runs while tokens are guessed.
const PAIR_ID: u32 = 0x3C;
const PAIR_TAG: u8 = 11;

/// The hub's verdict: its `REFUSE`'s code and text, or a panic.
fn refusal(body: &[u8]) -> (u16, String) {
    match wire::decode(body) {
        Ok(Message::Refuse(r)) => (r.code, r.text.to_owned()),
        other => panic!("expected REFUSE, got {other:?}"),
    }
}

/// A relay between a client and the hub's TCP listener that keeps every
/// byte either way: what an eavesdropper on the path sees.
struct Tap {
    url: String,
    /// Client to hub, hub to client.
    seen: [Arc<Mutex<Vec<u8>>>; 2],
}

impl Tap {
    fn to(hub: &HubProcess) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("tcp://{}", listener.local_addr().unwrap());
        let upstream = hub.url.strip_prefix("tcp://").unwrap().to_owned();
        let seen = [Arc::new(Mutex::new(Vec::new())), Arc::new(Mutex::new(Vec::new()))];
        let [up, down] = seen.clone();
        std::thread::spawn(move || {
            let Ok((client, _)) = listener.accept() else { return };
            let hub = TcpStream::connect(upstream).unwrap();
            let copy = |mut from: TcpStream, mut to: TcpStream, seen: Arc<Mutex<Vec<u8>>>| {
                std::thread::spawn(move || {
                    let mut buf = [0u8; 4096];
                    while let Ok(n @ 1..) = from.read(&mut buf) {
                        seen.lock().unwrap().extend_from_slice(&buf[..n]);
                        if to.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                    let _ = to.shutdown(std::net::Shutdown::Write);
                })
            };
            let up = copy(client.try_clone().unwrap(), hub.try_clone().unwrap(), up);
            let down = copy(hub, client, down);
            let _ = (up.join(), down.join());
        });
        Self { url, seen }
    }

    /// The message types seen one way (0: client to hub), and its bytes.
    fn seen(&self, way: usize) -> (Vec<&'static str>, Vec<u8>) {
        let bytes = self.seen[way].lock().unwrap().clone();
        let (mut types, mut rest) = (Vec::new(), &bytes[..]);
        while let Some(len) = rest.get(..4).map(|p| u32::from_le_bytes(p.try_into().unwrap()) as usize) {
            let Some(body) = rest.get(4..4 + len) else { break };
            types.push(wire::decode(body).map_or("?", |m| m.type_name()));
            rest = &rest[4 + len..];
        }
        (types, bytes)
    }
}

#[test]
fn a_tcp_capture_of_a_whole_session_holds_no_token_bytes() {
    let hub = FIELDHUB.start_with_token(TOKEN);
    let tap = Tap::to(&hub);
    let client = client_with_token(&tap.url, "tapped", TOKEN);
    let listener = client_with_token(&hub.url, "listener", TOKEN);
    listener.open_port_with("can0", &lossless()).unwrap();
    let port = client.open_port("can0").unwrap();
    for i in 0..50 {
        client.send(&port, &numbered(0x11, 3, i)).unwrap();
    }
    client.flush().unwrap();
    assert_eq!(recv_n(&listener, 50).len(), 50);
    client.close();
    let (up, up_bytes) = wait_for(deadline(), "the session's end through the tap", || {
        let (types, bytes) = tap.seen(0);
        types.contains(&"GOODBYE").then_some((types, bytes))
    });
    let (down, down_bytes) = tap.seen(1);
    assert_eq!(up[..2], ["HELLO", "AUTH"], "a challenged session: {up:?}");
    assert_eq!(down[..2], ["CHALLENGE", "WELCOME"], "{down:?}");
    assert!(up.contains(&"FRAMES"), "the frames went through the tap: {up:?}");
    for bytes in [up_bytes, down_bytes] {
        assert!(!bytes.windows(8).any(|w| TOKEN.as_bytes().windows(8).any(|t| t == w)), "token bytes crossed");
    }
}

/// A client of the hub at `url` proving `token`.
fn client_with_token(url: &str, name: &str, token: &str) -> fieldhub_client::Client {
    let options = fieldhub_client::ClientOptions { name: name.into(), token: Some(token.into()), ..Default::default() };
    fieldhub_client::Client::connect_with(url, &options).expect("the token is admitted")
}

#[test]
fn an_auth_replayed_against_a_new_nonce_is_refused() {
    let hub = FIELDHUB.start_with_token(TOKEN);
    let mut first = RawStream::connect(&hub);
    let (verdict, auth) = first.handshake_with("original", Some(TOKEN));
    assert!(matches!(wire::decode(&verdict), Ok(Message::Welcome(_))), "the holder is welcomed");
    let recorded = auth.expect("a hub with a token challenges");
    // The eavesdropper sends the same HELLO and replays the AUTH it saw.
    let mut replay = RawStream::connect(&hub);
    replay.send(&Message::Hello(wire::Hello {
        version: fieldhub_proto::limits::PROTOCOL_VERSION,
        name: "original",
        options: Default::default(),
    }));
    let challenge = replay.read_message().unwrap();
    assert!(matches!(wire::decode(&challenge), Ok(Message::Challenge(_))));
    replay.send(&Message::Auth(recorded));
    let (code, text) = refusal(&replay.read_message().expect("a REFUSE"));
    assert_eq!(code, ErrorCode::Unauthorized as u16);
    assert!(text.starts_with("wrong token"), "{text}");
    assert!(replay.read_message().is_none(), "the hub closed the replaying connection");
    // The original session goes on.
    let opened = first.open_port("can0", Default::default());
    assert_ne!(opened.port_id, 0);
}

#[test]
fn a_wrong_token_is_refused_and_counted_and_the_right_one_still_admitted() {
    let hub = FIELDHUB.start_with_token(TOKEN);
    let (talker, listener) =
        (client_with_token(&hub.url, "pair-sender", TOKEN), client_with_token(&hub.url, "pair-receiver", TOKEN));
    let pair = Pair::start(talker, listener, "can0", PAIR_ID, PAIR_TAG);
    for attempt in 1..=3 {
        let mut guess = RawStream::connect(&hub);
        let (verdict, _) = guess.handshake_with("guess", Some("open-sesame"));
        let (code, text) = refusal(&verdict);
        assert_eq!(code, ErrorCode::Unauthorized as u16, "attempt {attempt}");
        assert!(text.starts_with("wrong token"), "{text}");
    }
    // The first refusal is logged with the count; the others of this peer
    // are held back by the refusal log (one line per peer per interval).
    hub.wait_for_log("wrong tokens refused since the hub started: 1");
    let mut without = RawStream::connect(&hub);
    let (code, text) = refusal(&without.handshake_with("tokenless", None).0);
    assert_eq!(code, ErrorCode::Unauthorized as u16);
    assert!(text.starts_with("this hub requires a token"), "{text}");
    let client = client_with_token(&hub.url, "holder", TOKEN);
    client.open_port("can0").expect("the right token is still admitted");
    // Each refusal is counted for its transport: STATS and the control API
    // say so (a request without the bearer token is one more, over HTTP).
    let counted = client.stats().unwrap().auth_refused;
    assert_eq!(counted, [("tcp".to_owned(), 4)].into(), "3 wrong tokens and 1 without, over TCP");
    assert_eq!(control::api(&hub, "GET", "/api/v1/stats", None).0, 401);
    let stats: serde_json::Value = ureq::get(&format!("{}/api/v1/stats", control::base(&hub)))
        .set("Authorization", &format!("Bearer {TOKEN}"))
        .call()
        .expect("the token holder reads the statistics")
        .into_json()
        .unwrap();
    assert_eq!(stats["auth_refused"], serde_json::json!({"tcp": 4, "http": 1}), "{stats}");
    pair.wait_for_more(100);
    pair.finish();
}

/// A client of `url` presenting `token`: its refusal (code, text), or the
/// client.
fn connect_or_refusal(url: &str, name: &str, token: &str) -> Result<fieldhub_client::Client, (u16, String)> {
    let options = fieldhub_client::ClientOptions { name: name.into(), token: Some(token.into()), ..Default::default() };
    fieldhub_client::Client::connect_with(url, &options).map_err(|e| match e {
        fieldhub_client::ClientError::Refused { code, text, .. } => (code, text),
        other => panic!("expected the hub's REFUSE, got {other}"),
    })
}

#[test]
fn shared_memory_and_ivshmem_clients_prove_the_token_and_a_wrong_one_is_refused_and_counted() {
    let region =
        std::path::Path::new("/dev/shm").join(format!("fieldhub-challenge-{}-{}", std::process::id(), unique()));
    let shm_name = format!("challenge-{}-{}", std::process::id(), unique());
    let hub = FIELDHUB.start_with_env(
        None,
        &["--shm", &shm_name, "--ivshmem", region.to_str().unwrap()],
        &[("FIELDHUB_TOKEN", TOKEN)],
    );
    let shm_url = hub.shm_url.clone().expect("the hub serves shared memory");
    let ivshmem_url = format!("ivshmem://{}", region.display());
    let listener = client_with_token(&hub.url, "listener", TOKEN);
    listener.open_port_with("can0", &lossless()).unwrap();
    listener.flush().unwrap();

    for (url, tag) in [(&shm_url, 1u8), (&ivshmem_url, 2)] {
        let (code, text) = connect_or_refusal(url, "guess", "open-sesame").err().expect("a wrong token is refused");
        assert_eq!(code, ErrorCode::Unauthorized as u16, "{url}");
        assert!(text.starts_with("wrong token"), "{url}: {text}");
        let holder = connect_or_refusal(url, "holder", TOKEN).unwrap_or_else(|r| panic!("{url}: {r:?}"));
        let port = holder.open_port("can0").unwrap();
        for i in 0..20 {
            holder.send(&port, &numbered(0x20 + u32::from(tag), tag, i)).unwrap();
        }
        assert_eq!(flush_all(&holder), 0, "{url}: every frame on the bus");
        let got = recv_n(&listener, 20);
        for (i, r) in got.iter().enumerate() {
            assert_eq!(number_of(&r.frame), (tag, i as u32), "{url}: the holder's frames, in order");
        }
        holder.close();
    }
    let counted = listener.stats().unwrap().auth_refused;
    assert_eq!(counted, [("ivshmem".to_owned(), 1), ("shm".to_owned(), 1)].into(), "one wrong token on each");
    drop(listener);
    drop(hub);
    let _ = std::fs::remove_file(&region);
}

#[test]
fn a_version_1_hello_with_its_token_in_clear_is_refused_naming_both_versions() {
    let hub = FIELDHUB.start_with_token(TOKEN);
    let mut old = RawStream::connect(&hub);
    old.stream.write_all(&fieldhub_bench::soak_hostile::version_1_hello()).unwrap();
    let (code, text) = refusal(&old.read_message().expect("a REFUSE"));
    assert_eq!(code, ErrorCode::UnsupportedVersion as u16);
    assert!(text.starts_with("protocol version 1 is not supported; this hub speaks version 2"), "{text}");
    assert!(text.contains("token in clear") && text.contains("upgrade the client"), "{text}");
}
