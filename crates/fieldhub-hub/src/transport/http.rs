//! What the reactor does with a TCP connection that speaks HTTP instead of
//! the binary protocol: it recognises the request line ([`looks_like_http`])
//! and hands the connection ([`HttpConnection`]) to whoever serves HTTP
//! ([`HttpHandoff`], the control server). The transport layer defines the
//! hand-over so it never imports the control layer above it.

/// Whether the first bytes of a connection are an HTTP request line.
pub fn looks_like_http(first: &[u8]) -> bool {
    const METHODS: [&[u8]; 9] = [b"GET ", b"POST", b"PUT ", b"DELE", b"HEAD", b"PATC", b"OPTI", b"CONN", b"TRAC"];
    METHODS.iter().any(|m| first.starts_with(m))
}

/// A connection the reactor hands over because it speaks HTTP.
pub enum HttpConnection {
    Plain(std::net::TcpStream),
    /// TLS, its handshake done by the reactor, which also decrypted the
    /// request's first bytes (`read_ahead`). `certified`: the client
    /// presented a certificate `tls_client_ca` verified.
    Tls {
        tcp: std::net::TcpStream,
        session: Box<rustls::ServerConnection>,
        read_ahead: Vec<u8>,
        certified: bool,
    },
}

/// Who serves the HTTP connections the reactor recognises.
pub trait HttpHandoff: Send + Sync {
    /// Take over `connection`; never blocks the reactor.
    fn hand_over(&self, connection: HttpConnection);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_methods_are_told_apart_from_the_binary_handshake() {
        assert!(looks_like_http(b"GET /api/v1/stats HTTP/1.1"));
        assert!(looks_like_http(b"POST"));
        assert!(!looks_like_http(&[0x0c, 0, 0, 0]));
    }
}
