//! When the client says GOODBYE. A scripted hub on a unix socket records
//! every message the client sends: a real hub cannot show what arrives after
//! it has gone, which is the case that matters on a QEMU virtio-serial port —
//! there the host end reconnects, and whatever the guest wrote after the hub
//! left reaches the next hub as the start of a stranger's session.

use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::thread::JoinHandle;
use std::time::Duration;

use fieldhub_client::Client;
use fieldhub_proto::limits::{MAX_MESSAGE_LEN, PROTOCOL_VERSION};
use fieldhub_proto::stream::{MessageReader, ReadError};
use fieldhub_proto::wire::{decode, encode, ErrorReport, Message, Welcome};

/// A one-connection hub: answers HELLO with WELCOME, says GOODBYE itself if
/// asked to, then returns the type names of everything the client sent after
/// its HELLO, until the client closes the stream.
struct ScriptedHub {
    url: String,
    session: JoinHandle<Vec<String>>,
    _dir: TempDir,
}

impl ScriptedHub {
    fn start(says_goodbye: bool) -> Self {
        let dir = TempDir::new();
        let path = dir.0.join("hub.sock");
        let listener = UnixListener::bind(&path).unwrap();
        let session = std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            let mut reader = MessageReader::new(stream.try_clone().unwrap());
            let hello = decode(reader.read(MAX_MESSAGE_LEN).unwrap()).unwrap();
            assert!(matches!(hello, Message::Hello(_)), "expected HELLO, got {}", hello.type_name());
            send(&stream, &Message::Welcome(Welcome { version: PROTOCOL_VERSION, client_id: 1, hub_name: "scripted" }));
            if says_goodbye {
                let report = ErrorReport { code: 0, request: 0, fatal: true, text: "the hub is shutting down" };
                send(&stream, &Message::Goodbye(report));
            }
            let mut sent = Vec::new();
            loop {
                match reader.read(MAX_MESSAGE_LEN) {
                    Ok(body) => sent.push(decode(body).unwrap().type_name().to_owned()),
                    Err(ReadError::Closed) => return sent,
                    Err(e) => panic!("reading the client: {e}"),
                }
            }
        });
        Self { url: format!("unix:{}", path.display()), session, _dir: dir }
    }

    /// What the client sent after HELLO, once it has closed the stream.
    fn client_sent(self) -> Vec<String> {
        self.session.join().unwrap()
    }
}

fn send(mut stream: &UnixStream, message: &Message<'_>) {
    use std::io::Write;
    let mut bytes = Vec::new();
    encode(&mut bytes, message);
    stream.write_all(&bytes).unwrap();
}

struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Self {
        let path = std::env::temp_dir().join(format!(
            "fieldhub-goodbye-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir(&path).unwrap();
        Self(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn a_closing_client_says_goodbye() {
    let hub = ScriptedHub::start(false);
    let client = Client::connect(&hub.url).unwrap();
    drop(client);
    assert_eq!(hub.client_sent(), ["GOODBYE"]);
}

#[test]
fn a_client_whose_hub_said_goodbye_sends_nothing_more() {
    let hub = ScriptedHub::start(true);
    let client = Client::connect(&hub.url).unwrap();
    let ended = client.recv(Some(Duration::from_secs(60))).unwrap_err();
    assert!(ended.to_string().contains("the hub said goodbye: the hub is shutting down"), "{ended}");
    drop(client);
    assert_eq!(hub.client_sent(), Vec::<String>::new());
}
