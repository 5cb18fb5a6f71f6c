//! What a browser may do with the hub's HTTP port. Two attacks come through
//! a browser and need no access to the machine:
//!
//! - a page of another site posting to the hub (cross-site request: a simple
//!   `POST` is sent without asking, and a WebSocket is not held to the
//!   same-origin policy at all) — refused when the request's `Origin` names
//!   another site than the one it went to;
//! - DNS rebinding: a site whose name now resolves to 127.0.0.1, so its page
//!   is same-origin with the hub — refused, on a hub without a token (which
//!   listens on loopback only), when the request names the hub by anything
//!   but an IP address or `localhost`.
//!
//! Tools (curl, `fieldhub ctl`, python) send no `Origin` and name the hub by
//! address: they pass both checks.

use axum::http::{header, HeaderMap};

/// Why a browser's request is refused, if it is.
/// `host_names`: the hub may be named by a host name (it has a token, or
/// the request came over TLS).
pub fn refusal(headers: &HeaderMap, host_names: bool) -> Option<&'static str> {
    if !same_origin(headers) {
        return Some(
            "requests from pages of other sites are refused (the Origin header names another site than this hub)",
        );
    }
    if !host_names && !addressed_by_ip(headers) {
        return Some(
            "a hub without a token answers only requests that name it by IP address or as localhost \
             (http://127.0.0.1:PORT/); give the hub a token (FIELDHUB_TOKEN, --token-file) to reach it under a host name",
        );
    }
    None
}

/// No `Origin` (not a browser), or one naming the host the request went to.
fn same_origin(headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN) else { return true };
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    let origin = origin.to_str().ok().and_then(|o| o.strip_prefix("http://").or_else(|| o.strip_prefix("https://")));
    matches!((origin, host), (Some(origin), Some(host)) if origin == host)
}

/// Whether the request names the hub by IP address or as `localhost`.
fn addressed_by_ip(headers: &HeaderMap) -> bool {
    let Some(host) = headers.get(header::HOST).and_then(|h| h.to_str().ok()) else { return false };
    let name = match host.strip_prefix('[') {
        Some(bracketed) => bracketed.split(']').next().unwrap_or_default(),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    name == "localhost" || name.parse::<std::net::IpAddr>().is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(origin: Option<&str>, host: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, host.parse().unwrap());
        if let Some(origin) = origin {
            headers.insert(header::ORIGIN, origin.parse().unwrap());
        }
        headers
    }

    #[test]
    fn only_the_hubs_own_pages_and_tools_pass_the_origin_check() {
        assert!(same_origin(&headers(Some("http://127.0.0.1:29536"), "127.0.0.1:29536")));
        assert!(same_origin(&headers(None, "127.0.0.1:29536")), "a tool, not a browser");
        assert!(!same_origin(&headers(Some("https://evil.example"), "127.0.0.1:29536")));
        assert!(!same_origin(&headers(Some("http://127.0.0.1:8080"), "127.0.0.1:29536")));
        assert!(!same_origin(&headers(Some("null"), "127.0.0.1:29536")));
    }

    #[test]
    fn without_a_token_only_addresses_and_localhost_reach_the_hub() {
        for host in ["127.0.0.1:29536", "[::1]:29536", "localhost:29536", "127.0.1.1:80", "10.0.0.5:29536"] {
            assert_eq!(refusal(&headers(None, host), false), None, "{host}");
        }
        for host in ["evil.example:29536", "rebind.attacker.test", "localhost.evil.example:1"] {
            assert!(refusal(&headers(None, host), false).is_some(), "{host}");
            assert_eq!(refusal(&headers(None, host), true), None, "{host}: a token guards it");
        }
        let cross_site = headers(Some("https://evil.example"), "127.0.0.1:29536");
        assert!(refusal(&cross_site, true).is_some(), "a token does not excuse another site's page");
    }
}
