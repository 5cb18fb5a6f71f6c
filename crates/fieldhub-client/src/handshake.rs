//! The handshake of `spec/protocol.md` section 5, once for every transport:
//! send `HELLO`, answer the hub's `CHALLENGE` (if it has a token) with
//! `AUTH` — a MAC under the token, which never leaves this process (5.1) —
//! then read the hub's verdict and tell what it means.
//!
//! A transport only moves the messages ([`Greeting`]); every outcome —
//! `WELCOME`, `REFUSE`, an `ERROR` (a hub answers `HELLO` on a stream that
//! is already in a session that way), any other message, a version this
//! client does not speak, no answer in time, the hub gone — becomes the same
//! [`ClientError`] with the same text whatever the transport.

use std::time::Instant;

use fieldhub_proto::auth::auth_mac;
use fieldhub_proto::limits::PROTOCOL_VERSION;
use fieldhub_proto::wire::{self, Auth, Hello, Message, SessionOptions};

use crate::{ClientError, ClientOptions};

/// What a handshake established.
#[derive(Debug)]
pub(crate) struct Session {
    pub client_id: u32,
    pub hub_name: String,
}

/// How a transport carries the handshake's messages.
pub(crate) trait Greeting {
    /// Send an encoded message (`HELLO`, `AUTH`; length prefix included).
    fn send_handshake(&mut self, message: &[u8]) -> Result<(), Fault>;
    /// The body of the hub's next message, waiting at most until `deadline`.
    fn answer(&mut self, deadline: Instant) -> Result<&[u8], Fault>;
}

/// Why a transport could not move a handshake message.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Fault {
    /// The transport itself failed (a write, a socket option).
    #[error(transparent)]
    Io(std::io::Error),
    #[error("no answer to HELLO in time")]
    TimedOut,
    #[error("the hub closed the connection during the handshake")]
    Closed,
    /// What arrived cannot be a message.
    #[error("the answer to HELLO is not a fieldhub message ({0})")]
    Garbled(String),
    /// A shared ring breaks `spec/shm.md`'s rules.
    #[error("the hub broke the shared ring during the handshake: {0}")]
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))] // the shared-memory links only (Linux)
    Corrupt(String),
}

/// A first message that is not a `WELCOME` this client can use.
#[derive(Debug, thiserror::Error)]
enum Unwelcome {
    #[error("expected WELCOME, got ERROR: {0}")]
    Error(String),
    #[error("expected WELCOME, got {0}")]
    Unexpected(&'static str),
    #[error("expected WELCOME after AUTH, got a second CHALLENGE")]
    SecondChallenge,
    #[error(
        "the hub welcomed this client with protocol version {0}, but this client speaks only version \
         {PROTOCOL_VERSION}; use a client of the hub's release"
    )]
    Version(u16),
}

/// Introduce this client (`options.name`, proving `options.token` if the
/// hub asks) to the hub at `url` over `transport`, waiting for the answers
/// at most until `deadline`.
pub(crate) fn handshake(
    url: &str,
    options: &ClientOptions,
    deadline: Instant,
    transport: &mut impl Greeting,
) -> Result<Session, ClientError> {
    let failed = |fault: Fault| match fault {
        // TLS that failed after its handshake (TLS 1.3: the hub checks the
        // client's certificate then) says what to set.
        Fault::Io(source) => match source.downcast::<crate::tls::TlsError>() {
            Ok(tls) => ClientError::Tls { url: url.into(), error: Box::new(tls) },
            Err(source) => ClientError::Connect { url: url.into(), source },
        },
        // A hub answers HELLO at once: silence or another protocol is
        // another program on the address (an HTTP server on the hub's
        // port waits for a request line that never comes).
        Fault::TimedOut => ClientError::Protocol(format!(
            "something that is not a fieldhub hub answers at {url}: no answer to HELLO within {:?} \
             (or a hub too busy to answer); give the address of a fieldhub hub",
            options.timeout
        )),
        Fault::Garbled(_) => ClientError::Protocol(format!(
            "something that is not a fieldhub hub answers at {url}: {fault}; give the address of a fieldhub hub"
        )),
        Fault::Closed => ClientError::Closed { reason: fault.to_string() },
        Fault::Corrupt(_) => ClientError::Protocol(fault.to_string()),
    };
    let hello = Hello {
        version: PROTOCOL_VERSION,
        name: &options.name,
        options: match (options.synchronized, options.ahead) {
            (true, true) => SessionOptions::SYNCHRONIZED | SessionOptions::AHEAD,
            (true, false) => SessionOptions::SYNCHRONIZED,
            (false, _) => SessionOptions::empty(),
        },
    };
    let mut bytes = Vec::new();
    wire::encode(&mut bytes, &Message::Hello(hello));
    transport.send_handshake(&bytes).map_err(failed)?;
    let garbled = |e: wire::DecodeError| failed(Fault::Garbled(e.to_string()));
    let mut challenged = false;
    loop {
        let body = transport.answer(deadline).map_err(failed)?;
        let unwelcome = |why: Unwelcome| ClientError::Protocol(why.to_string());
        let challenge = match wire::decode(body).map_err(garbled)? {
            Message::Welcome(w) if w.version == PROTOCOL_VERSION => {
                return Ok(Session { client_id: w.client_id, hub_name: w.hub_name.to_owned() })
            }
            Message::Welcome(w) => return Err(unwelcome(Unwelcome::Version(w.version))),
            // A hub that does not know AHEAD refuses its bit as reserved.
            Message::Refuse(r) if options.ahead && r.text.contains("session options") => {
                let text = format!(
                    "the hub does not step participants ahead (it refused the AHEAD option: {}); connect without \
                     `ahead` and step every period, or update the hub",
                    r.text
                );
                return Err(ClientError::Refused { url: url.into(), code: r.code, text });
            }
            Message::Refuse(r) => {
                return Err(ClientError::Refused { url: url.into(), code: r.code, text: r.text.into() })
            }
            Message::Error(report) => return Err(unwelcome(Unwelcome::Error(report.text.into()))),
            Message::Challenge(_) if challenged => return Err(unwelcome(Unwelcome::SecondChallenge)),
            Message::Challenge(challenge) => challenge,
            other => return Err(unwelcome(Unwelcome::Unexpected(other.type_name()))),
        };
        // Without a token there is nothing to prove: the hub decides as
        // for any client without one (it may know the peer's user).
        let auth = match options.token.as_deref() {
            Some(token) => Auth { mac: auth_mac(token.as_bytes(), &challenge, &hello) },
            None => Auth::NO_TOKEN,
        };
        bytes.clear();
        wire::encode(&mut bytes, &Message::Auth(auth));
        transport.send_handshake(&bytes).map_err(failed)?;
        challenged = true;
    }
}

/// One test per outcome, each run over every transport's [`Greeting`] — a
/// stream (socket pair), the shm session socket (socket pair) and the rings
/// of an ivshmem segment (a memfd) — against a scripted hub that has its
/// answer waiting. Every transport must give the same result.
#[cfg(test)]
mod tests {
    use std::io::{BufReader, Write};
    use std::os::unix::net::UnixStream;
    use std::time::Duration;

    use fieldhub_proto::limits::{MAX_MESSAGE_LEN, NONCE_LEN};
    use fieldhub_proto::stream::MessageReader;
    use fieldhub_proto::wire::{decode, encode, Challenge, ErrorCode, ErrorReport, Welcome};
    use fieldhub_shm::{ClientSegment, Consumer, Producer, SegmentHeader};

    use super::*;
    use crate::ivshmem::RingGreeting;
    use crate::shm::SocketGreeting;
    use crate::stream::{Stream, StreamGreeting};

    const URL: &str = "unix:/run/hub.sock";

    fn options() -> ClientOptions {
        ClientOptions {
            name: "ecu".into(),
            token: Some("sesame".into()),
            timeout: Duration::from_millis(50),
            synchronized: false,
            ahead: false,
            tls: Default::default(),
        }
    }

    fn deadline() -> Instant {
        Instant::now() + options().timeout
    }

    fn encoded(message: &Message<'_>) -> Vec<u8> {
        let mut bytes = Vec::new();
        encode(&mut bytes, message);
        bytes
    }

    /// What the scripted hub received first must be this client's `HELLO`;
    /// the rest is returned.
    fn after_hello(mut received: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
        match decode(&received.remove(0)).unwrap() {
            Message::Hello(h) => assert_eq!((h.version, h.name), (PROTOCOL_VERSION, "ecu")),
            other => panic!("the hub got {} instead of HELLO", other.type_name()),
        }
        received
    }

    /// Every message body in `bytes`, in order.
    fn bodies(bytes: &[u8]) -> Vec<Vec<u8>> {
        let mut reader = MessageReader::new(bytes);
        std::iter::from_fn(|| reader.read(MAX_MESSAGE_LEN).ok().map(<[u8]>::to_vec)).collect()
    }

    /// What the hub received over a socket once the client closed it.
    fn received(hub: UnixStream) -> Vec<Vec<u8>> {
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut &hub, &mut bytes).unwrap();
        bodies(&bytes)
    }

    type Outcome = (Result<Session, ClientError>, Vec<Vec<u8>>);

    fn over_stream(answers: &[Message<'_>], options: &ClientOptions) -> Outcome {
        let (client, hub) = UnixStream::pair().unwrap();
        for answer in answers {
            (&hub).write_all(&encoded(answer)).unwrap();
        }
        let mut stream = Stream::Unix(client);
        let mut reader = MessageReader::new(BufReader::new(stream.try_clone().unwrap()));
        let outcome = handshake(URL, options, deadline(), &mut StreamGreeting::new(&mut stream, &mut reader));
        drop((stream, reader));
        (outcome, after_hello(received(hub)))
    }

    fn over_session_socket(answers: &[Message<'_>], options: &ClientOptions) -> Outcome {
        let (client, hub) = UnixStream::pair().unwrap();
        for answer in answers {
            (&hub).write_all(&encoded(answer)).unwrap();
        }
        let outcome = handshake(URL, options, deadline(), &mut SocketGreeting::new(&client));
        drop(client);
        (outcome, after_hello(received(hub)))
    }

    fn over_rings(answers: &[Message<'_>], options: &ClientOptions) -> Outcome {
        let (segment, _fd) = ClientSegment::create(SegmentHeader::standard(1)).unwrap();
        let mut producer = Producer::starting_at(0);
        for answer in answers {
            assert!(producer.try_push(&segment.to_client(), &encoded(answer)).unwrap());
        }
        let outcome = handshake(URL, options, deadline(), &mut RingGreeting::new(&segment));
        let (mut consumer, mut received) = (Consumer::starting_at(0), Vec::new());
        let mut body = Vec::new();
        while consumer.pop(&segment.to_hub(), MAX_MESSAGE_LEN as usize, &mut body).unwrap() {
            received.push(std::mem::take(&mut body));
        }
        (outcome, after_hello(received))
    }

    /// The outcome of a handshake the hub answers with `answers` (none: not
    /// at all), the same over every transport, and what the client sent
    /// after its `HELLO`.
    fn outcome_with(answers: &[Message<'_>], options: &ClientOptions) -> Outcome {
        let [stream, socket, rings] =
            [over_stream(answers, options), over_session_socket(answers, options), over_rings(answers, options)];
        let told = |outcome: &Outcome| match outcome {
            (Ok(session), sent) => format!("{session:?} {sent:?}"),
            (Err(e), sent) => format!("{e:?}: {e} {sent:?}"),
        };
        assert_eq!(told(&stream), told(&socket), "stream and shm session socket differ");
        assert_eq!(told(&stream), told(&rings), "stream and ivshmem rings differ");
        stream
    }

    fn outcome(answer: Option<Message<'_>>) -> Result<Session, ClientError> {
        let (outcome, sent) = outcome_with(answer.as_slice(), &options());
        assert!(sent.is_empty(), "nothing but HELLO without a CHALLENGE");
        outcome
    }

    #[test]
    fn a_challenge_is_answered_with_the_mac_under_the_token_which_never_travels() {
        let challenge = Challenge { nonce: [0x5A; NONCE_LEN], hub_name: "bench" };
        let welcome = Welcome { version: PROTOCOL_VERSION, client_id: 7, hub_name: "bench" };
        let (outcome, sent) = outcome_with(&[Message::Challenge(challenge), Message::Welcome(welcome)], &options());
        assert_eq!(outcome.unwrap().client_id, 7);
        let hello = Hello { version: PROTOCOL_VERSION, name: "ecu", options: SessionOptions::empty() };
        let expected = Auth { mac: auth_mac(b"sesame", &challenge, &hello) };
        assert_eq!(sent, [encoded(&Message::Auth(expected))[4..].to_vec()], "one AUTH, the MAC");
        assert!(!sent[0].windows(6).any(|w| w == b"sesame"), "the token itself is not sent");
    }

    #[test]
    fn a_client_without_a_token_answers_a_challenge_with_nothing_to_prove() {
        let challenge = Challenge { nonce: [1; NONCE_LEN], hub_name: "bench" };
        let refusal = report(ErrorCode::Unauthorized, "this hub requires a token");
        let options = ClientOptions { token: None, ..options() };
        let (outcome, sent) = outcome_with(&[Message::Challenge(challenge), Message::Refuse(refusal)], &options);
        assert_eq!(outcome.unwrap_err().code(), Some(ErrorCode::Unauthorized));
        assert_eq!(sent, [encoded(&Message::Auth(Auth::NO_TOKEN))[4..].to_vec()]);
    }

    #[test]
    fn a_second_challenge_is_a_protocol_error() {
        let challenge = Challenge { nonce: [1; NONCE_LEN], hub_name: "bench" };
        let (outcome, sent) = outcome_with(&[Message::Challenge(challenge), Message::Challenge(challenge)], &options());
        assert_eq!(
            outcome.unwrap_err().to_string(),
            "protocol error talking to the hub: expected WELCOME after AUTH, got a second CHALLENGE"
        );
        assert_eq!(sent.len(), 1, "one AUTH");
    }

    fn report(code: ErrorCode, text: &str) -> ErrorReport<'_> {
        ErrorReport { code: code as u16, request: 0, fatal: true, text }
    }

    #[test]
    fn a_hub_that_does_not_know_the_ahead_option_is_named_as_such() {
        let refusal = report(ErrorCode::Malformed, "session options 0x3 set reserved bits");
        let options = ClientOptions { synchronized: true, ahead: true, ..options() };
        let (outcome, _) = outcome_with(&[Message::Refuse(refusal)], &options);
        let text = outcome.unwrap_err().to_string();
        assert!(text.contains("the hub does not step participants ahead"), "{text}");
        assert!(text.contains("session options 0x3 set reserved bits"), "the hub's own words too: {text}");
    }

    #[test]
    fn welcome_establishes_the_session() {
        let welcome = Welcome { version: PROTOCOL_VERSION, client_id: 7, hub_name: "bench" };
        let session = outcome(Some(Message::Welcome(welcome))).unwrap();
        assert_eq!((session.client_id, session.hub_name.as_str()), (7, "bench"));
    }

    #[test]
    fn refuse_is_a_refusal_with_the_hubs_code_and_text() {
        let err = outcome(Some(Message::Refuse(report(ErrorCode::Unauthorized, "wrong token")))).unwrap_err();
        assert_eq!(err.code(), Some(ErrorCode::Unauthorized));
        assert_eq!(err.to_string(), format!("the hub at {URL} refused the connection (unauthorized): wrong token"));
    }

    #[test]
    fn error_is_a_protocol_error_with_the_hubs_text() {
        let text = "HELLO from \"ecu\" on a connection already in a session; connect again";
        let err = outcome(Some(Message::Error(report(ErrorCode::UnexpectedMessage, text)))).unwrap_err();
        assert!(matches!(err, ClientError::Protocol(_)), "{err:?}");
        assert_eq!(err.to_string(), format!("protocol error talking to the hub: expected WELCOME, got ERROR: {text}"));
    }

    #[test]
    fn another_message_is_a_protocol_error_naming_it() {
        let err = outcome(Some(Message::Pong { nonce: 1 })).unwrap_err();
        assert_eq!(err.to_string(), "protocol error talking to the hub: expected WELCOME, got PONG");
    }

    #[test]
    fn a_welcome_of_another_protocol_version_is_a_protocol_error() {
        let welcome = Welcome { version: PROTOCOL_VERSION + 1, client_id: 7, hub_name: "future" };
        let err = outcome(Some(Message::Welcome(welcome))).unwrap_err();
        assert!(matches!(err, ClientError::Protocol(_)), "{err:?}");
        let text = err.to_string();
        assert!(text.contains(&format!("protocol version {}", PROTOCOL_VERSION + 1)), "{text}");
        assert!(text.contains(&format!("speaks only version {PROTOCOL_VERSION}")), "{text}");
    }

    #[test]
    fn no_answer_in_time_says_something_else_answers_there() {
        let err = outcome(None).unwrap_err();
        assert!(matches!(err, ClientError::Protocol(_)), "{err:?}");
        let text = err.to_string();
        assert!(text.contains(&format!("something that is not a fieldhub hub answers at {URL}")), "{text}");
        assert!(text.contains(&format!("within {:?}", options().timeout)), "{text}");
    }
}
