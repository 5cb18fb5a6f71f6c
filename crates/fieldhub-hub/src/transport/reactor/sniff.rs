//! Sniffing: what a new TCP connection speaks, told from its first bytes
//! before any of them is acted on — the binary protocol (its `HELLO`
//! follows), HTTP (the control server's), or, on a TLS port, plaintext.
//!
//! - **Plain TCP**: the first [`SNIFF_LEN`] bytes are peeked, not taken, so
//!   the `HELLO` or the request line is still in the socket for whoever
//!   reads it next.
//! - **TLS** (`[hub] tls_cert`): the socket layer (`tls.rs`) peeks for a
//!   TLS handshake record first. A plaintext peer is refused in plaintext,
//!   in its own protocol (a `REFUSE`, or an HTTP `400`), with one log line;
//!   a TLS peer is sniffed on its first decrypted bytes, which rustls
//!   cannot peek: they are read into the input buffer, where the `HELLO`
//!   (or the request, handed over with them) then already is.
//! - Unix sockets are not sniffed; they speak the protocol.
//!
//! Invariants: the decision ([`Sniffed`]) depends on the first bytes alone
//! ([`decide`], [`peeked`], [`opening`]); nothing is taken from a plain
//! socket while sniffing; an HTTP request line goes to the control server
//! only when one serves (`http`), else it is the protocol's to refuse.
//! Imports from the reactor only the connection.

use std::io::{self, ErrorKind};

use fieldhub_proto::wire::ErrorCode;

use super::conn::{duplicate, Conn, Flow, Phase, Socket};
use crate::session::Violation;
use crate::transport::http::{looks_like_http, HttpConnection};
use crate::transport::tls::Opening;

/// Bytes that tell an HTTP request line from the protocol's `HELLO`.
const SNIFF_LEN: usize = 4;

/// What a connection's first bytes make of it.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Sniffed {
    /// Too few bytes yet.
    Wait,
    /// The peer closed (or the socket failed) before saying anything.
    Closed,
    /// The binary protocol: its `HELLO` is next.
    Protocol,
    /// An HTTP request line: the control server's.
    Http,
    /// Plaintext on a TLS port; `http`: an HTTP request line.
    Plaintext { http: bool },
}

/// The first plaintext bytes: an HTTP request line (when `http`, a control
/// server, takes it) or the protocol; [`Sniffed::Wait`] until
/// [`SNIFF_LEN`] bytes are here.
pub(super) fn decide(first: &[u8], http: bool) -> Sniffed {
    let Some(first) = first.get(..SNIFF_LEN) else { return Sniffed::Wait };
    if http && looks_like_http(first) {
        Sniffed::Http
    } else {
        Sniffed::Protocol
    }
}

/// A plain TCP connection by what peeking its first bytes gave.
pub(super) fn peeked(peek: io::Result<&[u8]>, http: bool) -> Sniffed {
    match peek {
        Ok([]) => Sniffed::Closed,
        Ok(first) => decide(first, http),
        Err(e) if e.kind() == ErrorKind::WouldBlock => Sniffed::Wait,
        Err(_) => Sniffed::Closed,
    }
}

/// A TLS port's connection by what the socket layer saw of its first
/// bytes; `None` once they are TLS: sniff its decrypted bytes next.
pub(super) fn opening(opening: Opening, http: bool) -> Option<Sniffed> {
    match opening {
        Opening::Tls => None,
        Opening::Wait => Some(Sniffed::Wait),
        Opening::Closed => Some(Sniffed::Closed),
        Opening::Plain(first) => Some(Sniffed::Plaintext { http: http && looks_like_http(&first) }),
    }
}

/// Sniff a connection in [`Phase::Sniff`]: move it on to its `HELLO`,
/// hand it over, refuse it, or wait for more bytes.
pub(super) fn sniff(conn: &mut Conn, http: bool) -> Flow {
    let sniffed = match &mut conn.socket {
        Socket::Tcp(stream) => {
            let mut first = [0u8; SNIFF_LEN];
            peeked(stream.peek(&mut first).map(|n| &first[..n]), http)
        }
        Socket::Tls(tls) => {
            let opened = if tls.opened() { None } else { opening(tls.opening(), http) };
            match opened {
                Some(sniffed) => sniffed,
                None => match decide(conn.input.buffered(), http) {
                    // Handshake under way, or the first bytes not all here:
                    // read on (a plain socket would only be peeked again).
                    Sniffed::Wait => return Flow::Continue,
                    sniffed => {
                        if tls.certified() {
                            conn.slot.certified();
                        }
                        sniffed
                    }
                },
            }
        }
        #[cfg(target_os = "linux")]
        Socket::Unix(_) => Sniffed::Protocol,
    };
    match sniffed {
        Sniffed::Wait => {
            // Nothing was taken: the next bytes come with a new event.
            conn.unread = false;
            Flow::Paused
        }
        Sniffed::Closed => Flow::Close(String::new()),
        Sniffed::Http => Flow::HandOver,
        Sniffed::Protocol => {
            conn.phase = Phase::Hello { shm: false };
            Flow::Continue
        }
        Sniffed::Plaintext { http } => refuse_plaintext(conn, http),
    }
}

/// A plaintext peer on a TLS port: answered in plaintext, in its own
/// protocol (`http`: an HTTP `400`, else a `REFUSE`), so it learns what to do.
fn refuse_plaintext(conn: &mut Conn, http: bool) -> Flow {
    // The TLS state goes; the answer is written on the plain socket.
    if !matches!(conn.socket.take_tls(), Ok(Some(_))) {
        return Flow::Close(String::new());
    }
    if http {
        conn.slot.log_refusal(&Violation::new(ErrorCode::Unauthorized, "plaintext HTTP on a TLS port"));
        let body = "{\"error\":\"this port speaks TLS: use https://\"}\n";
        let head = "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\nconnection: close";
        conn.output.push_encoded(format!("{head}\r\ncontent-length: {}\r\n\r\n{body}", body.len()).as_bytes());
        conn.phase = Phase::Closing;
    } else {
        let text = "this port speaks TLS: connect with tls://HOST:PORT (and FIELDHUB_TLS_CA set to the CA of the \
                    hub's certificate); plaintext tcp:// is refused";
        conn.refuse(&Violation::new(ErrorCode::Unauthorized, text));
    }
    Flow::Continue
}

/// The connection a sniffed HTTP request arrived on, for the control
/// server: TLS with its session and the request's first bytes, which were
/// decrypted into the input buffer already; `None` for a unix socket.
pub(super) fn http_connection(conn: &mut Conn) -> Option<io::Result<HttpConnection>> {
    // The duplicate keeps the connection open when `conn` closes its own.
    match conn.socket.take_tls() {
        Ok(Some(tls)) => {
            let certified = tls.certified();
            let (tcp, session) = tls.into_parts();
            let tcp = std::net::TcpStream::from(tcp);
            let read_ahead = conn.input.buffered().to_vec();
            Some(Ok(HttpConnection::Tls { tcp, session: Box::new(session), read_ahead, certified }))
        }
        Ok(None) => match &conn.socket {
            Socket::Tcp(stream) => Some(duplicate(stream).map(HttpConnection::Plain)),
            _ => None,
        },
        Err(e) => Some(Err(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::reactor::testing;

    /// The first bytes of a TLS 1.2/1.3 ClientHello: a handshake record,
    /// version 3.1, its length.
    const CLIENT_HELLO: [u8; 5] = [0x16, 0x03, 0x01, 0x02, 0x00];

    #[test]
    fn an_http_request_line_goes_to_the_control_server() {
        assert_eq!(decide(b"GET /api/v1/stats HTTP/1.1\r\n", true), Sniffed::Http);
        assert_eq!(decide(b"POST", true), Sniffed::Http);
    }

    #[test]
    fn an_http_request_line_is_the_protocols_to_refuse_when_no_control_server_serves() {
        assert_eq!(decide(b"GET /api/v1/stats HTTP/1.1\r\n", false), Sniffed::Protocol);
    }

    #[test]
    fn the_binary_handshake_is_the_protocol_whether_or_not_http_is_served() {
        let hello = testing::hello();
        assert_eq!(decide(&hello, true), Sniffed::Protocol);
        assert_eq!(decide(&hello, false), Sniffed::Protocol);
    }

    #[test]
    fn a_tls_client_hello_on_a_plaintext_port_is_the_protocol_whose_handshake_refuses_it() {
        // It is no HTTP; the HELLO check refuses its length (the handshake's
        // tests prove that).
        assert_eq!(decide(&CLIENT_HELLO, true), Sniffed::Protocol);
        assert_eq!(peeked(Ok(&CLIENT_HELLO[..4]), true), Sniffed::Protocol);
    }

    #[test]
    fn a_tls_client_hello_on_a_tls_port_goes_on_to_the_decrypted_bytes() {
        assert_eq!(opening(Opening::Tls, true), None);
    }

    #[test]
    fn too_few_bytes_wait_for_more_before_anything_is_decided() {
        for len in 1..SNIFF_LEN {
            assert_eq!(decide(&b"GET "[..len], true), Sniffed::Wait, "{len} bytes");
            assert_eq!(peeked(Ok(&b"GET "[..len]), true), Sniffed::Wait, "{len} bytes peeked");
        }
        assert_eq!(decide(&[], true), Sniffed::Wait, "no decrypted bytes yet");
        assert_eq!(peeked(Err(ErrorKind::WouldBlock.into()), true), Sniffed::Wait);
        assert_eq!(opening(Opening::Wait, true), Some(Sniffed::Wait));
    }

    #[test]
    fn a_peer_that_closes_or_fails_before_its_first_bytes_is_closed() {
        assert_eq!(peeked(Ok(&[]), true), Sniffed::Closed);
        assert_eq!(peeked(Err(ErrorKind::ConnectionReset.into()), true), Sniffed::Closed);
        assert_eq!(opening(Opening::Closed, true), Some(Sniffed::Closed));
    }

    #[test]
    fn plaintext_on_a_tls_port_is_refused_in_its_own_protocol() {
        assert_eq!(opening(Opening::Plain(*b"GET "), true), Some(Sniffed::Plaintext { http: true }));
        let hello = testing::hello();
        let first = [hello[0], hello[1], hello[2], hello[3]];
        assert_eq!(opening(Opening::Plain(first), true), Some(Sniffed::Plaintext { http: false }));
        // Without a control server, HTTP is answered as the protocol is.
        assert_eq!(opening(Opening::Plain(*b"GET "), false), Some(Sniffed::Plaintext { http: false }));
    }
}
