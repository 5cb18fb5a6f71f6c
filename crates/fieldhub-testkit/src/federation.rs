//! Federation test support: hub configurations and order checks for
//! sequence-numbered traffic seen on several hubs.

use std::collections::HashMap;

use fieldhub_client::{Client, Port, PortConfig, Received};

use crate::hub::HubProcess;
use crate::traffic::number_of;

/// An owner-only file holding `secret`, for `[federation] token_file`;
/// removed when dropped.
pub fn token_file(secret: &str) -> tempfile::TempPath {
    use std::io::Write;
    let mut file = tempfile::Builder::new().prefix("fieldhub-test-token-").tempfile().expect("a token file");
    writeln!(file, "{secret}").expect("write the token");
    file.into_temp_path()
}

/// A loopback TCP port nobody listens on now, for a hub's Zenoh endpoint.
pub fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().expect("local address").port()
}

/// A sender on `relay` and a listener on each hub, on the CAN FD or XL
/// channel `channel` (lossless, the sender seeing its echoes), ready: the
/// sender, its port, the owner's listener, the relay's.
pub fn relay_sender_and_listeners(
    owner: &HubProcess,
    relay: &HubProcess,
    channel: &str,
) -> (Client, Port, Client, Client) {
    let fd = PortConfig { fd: true, block_on_overflow: true, ..Default::default() };
    let (sender, on_owner, on_relay) = (relay.client("sender"), owner.client("listener"), relay.client("listener"));
    let port = sender.open_port_with(channel, &fd).expect("the sender's port");
    for listener in [&on_owner, &on_relay] {
        listener.open_port_with(channel, &fd).expect("a listener's port");
        listener.flush().expect("the listener's port open");
    }
    (sender, port, on_owner, on_relay)
}

/// `(sender, counter)` of every frame, in the order received.
pub fn order(frames: &[Received]) -> Vec<(u8, u32)> {
    frames.iter().map(|r| number_of(&r.frame)).collect()
}

/// Each sender's counters in the order sent, nothing missing or doubled:
/// sender `s` sent `counts[s]` frames numbered from 0.
pub fn check_senders(name: &str, frames: &[Received], counts: &[(u8, u32)]) {
    let mut next: HashMap<u8, u32> = HashMap::new();
    for r in frames {
        let (sender, counter) = number_of(&r.frame);
        let expected = next.entry(sender).or_insert(0);
        assert_eq!(counter, *expected, "{name}: frame {counter} of sender {sender} out of order, lost or doubled");
        *expected += 1;
    }
    for (sender, count) in counts {
        assert_eq!(next.get(sender).copied(), Some(*count), "{name}: not every frame of sender {sender}");
    }
    for pair in frames.windows(2) {
        assert!(pair[1].meta.seq > pair[0].meta.seq, "{name}: sequence went backwards");
    }
}
