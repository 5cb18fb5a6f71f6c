//! Federation test support: hub configurations and order checks for
//! sequence-numbered traffic seen on several hubs.

use std::collections::HashMap;

use fieldhub_client::Received;

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
