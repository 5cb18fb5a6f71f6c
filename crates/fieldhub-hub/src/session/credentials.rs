//! Who a client is — one rule for frame sessions on every transport and
//! for the control API.
//!
//! A hub with a token requires it from every client: the hub's token gives
//! full access, the monitor token (`[hub] monitor_token`) lets a client
//! receive and read, never transmit or change anything; an `[[access]]`
//! token gives what its table grants ([`Grant`]: channels to read, to
//! write, control or not); anything else is refused. A hub without a token admits with full access the processes of
//! the user it runs as (`peer_user.rs`: the kernel says who is at the other
//! end of a unix socket or of TCP from this machine) and the transports the
//! operator configured, and refuses everyone else: other local users and
//! other machines. `--insecure-local` (`[hub] insecure_local`, only
//! without a token and on loopback) admits every local user, as hubs did
//! before. Comparisons take the same time whatever prefix matches.
//!
//! A frame session proves its token without sending it (`AUTH`, the MAC of
//! the handshake under the token: [`Credentials::access_by_mac`]); the
//! control API's bearer token is compared as sent ([`Credentials::access`]).
//!
//! Mutual TLS (`[hub] tls_client_ca`): a client certificate the hub
//! verified stands in for the token — full access without one. A token
//! such a client proves anyway is still checked (the monitor token makes
//! it read-only, a wrong one is refused). Without `tls_client_ca`, TLS only
//! hides the traffic: the rules above apply over it unchanged.
//!
//! Every client refused here is counted by the transport that refused it
//! ([`Credentials::count_refusal`]), for `STATS`' `auth_refused`.

use std::sync::Arc;

use fieldhub_proto::auth;
use fieldhub_proto::limits::MAC_LEN;

use crate::config::AccessConfig;
use crate::session::peer_user::PeerOrigin;
pub use fieldhub_bus::access::{Access, Grant};
use fieldhub_bus::auth_refusals::{AuthRefusals, AuthTransport};

/// Why a client is not admitted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refused {
    /// The hub has a token and it presented none.
    TokenRequired,
    /// It presented a token that is not the hub's.
    WrongToken,
    /// It presented none and is not the hub's user; says who it is.
    NotHubUser(String),
}

/// The hub's tokens and whether every local user is let in.
#[derive(Clone, Debug, Default)]
pub struct Credentials {
    token: Option<String>,
    monitor_token: Option<String>,
    /// `[[access]]` tokens and their grants.
    grants: Vec<(String, Arc<Grant>)>,
    insecure_local: bool,
    /// Clients refused, per transport; the bus reports the same counters.
    refusals: Arc<AuthRefusals>,
}

impl Credentials {
    /// A monitor token without a token, or `insecure_local` with one, is
    /// refused by the configuration (`config.rs`); here the token wins.
    pub fn new(token: Option<String>, monitor_token: Option<String>, insecure_local: bool) -> Self {
        let monitor_token = monitor_token.filter(|_| token.is_some());
        let insecure_local = insecure_local && token.is_none();
        Self { token, monitor_token, grants: Vec::new(), insecure_local, refusals: Arc::default() }
    }

    /// Count refusals in `refusals` (the counters `STATS` reports).
    pub fn counting_refusals_in(mut self, refusals: Arc<AuthRefusals>) -> Self {
        self.refusals = refusals;
        self
    }

    /// A client was refused on `transport` for its credentials.
    pub fn count_refusal(&self, transport: AuthTransport) {
        self.refusals.count(transport);
    }

    /// Add the `[[access]]` tables whose tokens were read (the
    /// configuration needs the hub's token beside them; without it they are
    /// ignored, as a monitor token is).
    pub fn with_grants(mut self, access: &[AccessConfig]) -> Self {
        if self.token.is_some() {
            self.grants = access
                .iter()
                .filter_map(|a| {
                    Some((
                        a.token.clone()?,
                        Arc::new(Grant::new(a.name.clone(), a.read.clone(), a.write.clone(), a.control)),
                    ))
                })
                .collect();
        }
        self
    }

    /// Whether the hub has a token (every client needs it then).
    pub fn has_token(&self) -> bool {
        self.token.is_some()
    }

    /// The access of a client that presented `presented` (empty: none)
    /// and came from `origin`: the control API's bearer token, or a client
    /// without a protocol handshake (socketcand) presenting nothing.
    pub fn access(&self, presented: &str, origin: &PeerOrigin) -> Result<Access, Refused> {
        let proof =
            (!presented.is_empty()).then_some(|token: &str| constant_time_eq(token.as_bytes(), presented.as_bytes()));
        self.decide(proof, origin)
    }

    /// The access of a client that answered a `CHALLENGE` with `mac` over
    /// `transcript` (`fieldhub_proto::auth`); `None`: it has no token.
    pub fn access_by_mac(
        &self,
        proof: Option<(&[u8], &[u8; MAC_LEN])>,
        origin: &PeerOrigin,
    ) -> Result<Access, Refused> {
        let proof = proof.map(|(transcript, mac)| move |token: &str| auth::verify(token.as_bytes(), transcript, mac));
        self.decide(proof, origin)
    }

    /// Whether a hub sends `CHALLENGE`: it has a token a client could prove.
    pub fn challenges(&self) -> bool {
        self.token.is_some()
    }

    /// The one rule: `proves` tells whether the client holds a token (each
    /// comparison in constant time); `None` when it presented nothing.
    fn decide(&self, proves: Option<impl Fn(&str) -> bool>, origin: &PeerOrigin) -> Result<Access, Refused> {
        if *origin == PeerOrigin::Certified && (proves.is_none() || self.token.is_none()) {
            return Ok(Access::Full);
        }
        let Some(token) = &self.token else {
            // Without a token, who the client is decides; a token it
            // presents says nothing.
            if self.insecure_local {
                return Ok(Access::Full);
            }
            return origin.check_hub_user().map(|()| Access::Full).map_err(Refused::NotHubUser);
        };
        let Some(proves) = proves else { return Err(Refused::TokenRequired) };
        if proves(token) {
            return Ok(Access::Full);
        }
        if self.monitor_token.as_deref().is_some_and(&proves) {
            return Ok(Access::ReadOnly);
        }
        self.grants
            .iter()
            .find(|(token, _)| proves(token))
            .map(|(_, grant)| Access::Granted(Arc::clone(grant)))
            .ok_or(Refused::WrongToken)
    }
}

/// Compare secrets without an early exit that would leak their common prefix.
pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use fieldhub_bus::access::PortRight;

    const MINE: PeerOrigin = PeerOrigin::Operator;
    const STRANGER: PeerOrigin = PeerOrigin::Unknown;

    #[test]
    fn without_a_token_only_the_hubs_user_is_admitted() {
        let creds = Credentials::new(None, None, false);
        assert!(!creds.has_token());
        assert_eq!(creds.access("", &MINE), Ok(Access::Full));
        assert_eq!(creds.access("anything", &MINE), Ok(Access::Full), "a token says nothing to a hub without one");
        assert!(matches!(creds.access("", &STRANGER), Err(Refused::NotHubUser(_))));
        assert!(matches!(creds.access("anything", &STRANGER), Err(Refused::NotHubUser(_))));
    }

    #[test]
    fn insecure_local_admits_every_local_user_but_never_beside_a_token() {
        let open = Credentials::new(None, None, true);
        assert_eq!(open.access("", &STRANGER), Ok(Access::Full));
        let guarded = Credentials::new(Some("sesame".into()), None, true);
        assert_eq!(guarded.access("", &STRANGER), Err(Refused::TokenRequired));
    }

    #[test]
    fn the_token_gives_full_access_the_monitor_token_read_only_and_anything_else_none() {
        let creds = Credentials::new(Some("sesame".into()), Some("look".into()), false);
        assert!(creds.has_token());
        assert_eq!(creds.access("sesame", &STRANGER), Ok(Access::Full));
        assert_eq!(creds.access("look", &STRANGER), Ok(Access::ReadOnly));
        assert_eq!(creds.access("look", &MINE), Ok(Access::ReadOnly), "a presented token is what counts");
        assert_eq!(creds.access("sesam", &MINE), Err(Refused::WrongToken));
        assert_eq!(creds.access("looking", &STRANGER), Err(Refused::WrongToken));
        assert_eq!(creds.access("", &STRANGER), Err(Refused::TokenRequired));
        assert_eq!(creds.access("", &MINE), Err(Refused::TokenRequired), "the hub's own user needs it too");
    }

    /// A client's `AUTH` under `token` for one handshake, checked.
    fn answered(creds: &Credentials, token: Option<&str>, origin: &PeerOrigin) -> Result<Access, Refused> {
        use fieldhub_proto::wire::{Challenge, Hello, SessionOptions};
        let challenge = Challenge { nonce: [9; fieldhub_proto::limits::NONCE_LEN], hub_name: "hub" };
        let hello =
            Hello { version: fieldhub_proto::limits::PROTOCOL_VERSION, name: "ecu", options: SessionOptions::empty() };
        let transcript = auth::transcript(&challenge, &hello);
        let mac = token.map(|token| auth::auth_mac(token.as_bytes(), &challenge, &hello));
        creds.access_by_mac(mac.as_ref().map(|mac| (&transcript[..], mac)), origin)
    }

    #[test]
    fn a_mac_under_a_token_gives_that_tokens_access_and_any_other_mac_none() {
        let creds = Credentials::new(Some("sesame".into()), Some("look".into()), false).with_grants(&[grant(
            "hil",
            "hil-secret",
            &["can0"],
            &[],
            false,
        )]);
        assert!(creds.challenges());
        assert_eq!(answered(&creds, Some("sesame"), &STRANGER), Ok(Access::Full));
        assert_eq!(answered(&creds, Some("look"), &STRANGER), Ok(Access::ReadOnly));
        assert_eq!(answered(&creds, Some("hil-secret"), &STRANGER).unwrap().describe(), "access 'hil'");
        assert_eq!(answered(&creds, Some("sesam"), &MINE), Err(Refused::WrongToken));
        assert_eq!(answered(&creds, None, &MINE), Err(Refused::TokenRequired));
        assert_eq!(answered(&creds, None, &PeerOrigin::Certified), Ok(Access::Full));
        assert_eq!(answered(&creds, Some("look"), &PeerOrigin::Certified), Ok(Access::ReadOnly));
        let open = Credentials::new(None, None, false);
        assert!(!open.challenges(), "a hub without a token has nothing to ask");
    }

    #[test]
    fn a_verified_certificate_stands_in_for_the_token_and_a_presented_token_still_counts() {
        let certified = PeerOrigin::Certified;
        let guarded = Credentials::new(Some("sesame".into()), Some("look".into()), false);
        assert_eq!(guarded.access("", &certified), Ok(Access::Full));
        assert_eq!(guarded.access("look", &certified), Ok(Access::ReadOnly));
        assert_eq!(guarded.access("wrong", &certified), Err(Refused::WrongToken));
        let open = Credentials::new(None, None, false);
        assert_eq!(open.access("", &certified), Ok(Access::Full));
        assert_eq!(open.access("anything", &certified), Ok(Access::Full));
    }

    fn grant(name: &str, token: &str, read: &[&str], write: &[&str], control: bool) -> AccessConfig {
        AccessConfig {
            name: name.into(),
            token_file: "/unused".into(),
            token: Some(token.into()),
            read: read.iter().map(|c| (*c).into()).collect(),
            write: write.iter().map(|c| (*c).into()).collect(),
            control,
        }
    }

    #[test]
    fn an_access_token_gives_its_grant_channel_by_channel() {
        let tables =
            [grant("hil", "hil-secret", &["can0", "can1"], &["can0"], false), grant("ops", "ops", &["*"], &[], true)];
        let creds = Credentials::new(Some("sesame".into()), Some("look".into()), false).with_grants(&tables);
        let hil = creds.access("hil-secret", &STRANGER).unwrap();
        assert_eq!(hil.port_right("can0"), PortRight::Both);
        assert_eq!(hil.port_right("can1"), PortRight::Read);
        assert_eq!(hil.port_right("can2"), PortRight::None);
        assert!(!hil.may_control() && hil.may_read(Some("can1")) && !hil.may_read(None));
        assert_eq!(hil.describe(), "access 'hil'");
        let ops = creds.access("ops", &STRANGER).unwrap();
        assert_eq!(ops.port_right("made-later"), PortRight::Read, "\"*\" covers channels created later");
        assert!(ops.may_control() && ops.may_read(None));
        assert_eq!(creds.access("look", &STRANGER), Ok(Access::ReadOnly), "the monitor token is unchanged");
        assert_eq!(Access::ReadOnly.port_right("can0"), PortRight::Read);
        assert!(!Access::ReadOnly.may_control());
        assert_eq!(creds.access("hil-secre", &STRANGER), Err(Refused::WrongToken));
        let write_only = Credentials::new(Some("s".into()), None, false)
            .with_grants(&[grant("gen", "g", &[], &["*"], false)])
            .access("g", &STRANGER)
            .unwrap();
        assert_eq!(write_only.port_right("can0"), PortRight::Write);
    }

    #[test]
    fn access_tokens_without_the_hubs_token_are_ignored() {
        let creds = Credentials::new(None, None, false).with_grants(&[grant("hil", "h", &["*"], &["*"], true)]);
        assert!(matches!(creds.access("h", &STRANGER), Err(Refused::NotHubUser(_))));
    }

    #[test]
    fn a_monitor_token_without_a_token_is_ignored() {
        let creds = Credentials::new(None, Some("look".into()), false);
        assert!(matches!(creds.access("look", &STRANGER), Err(Refused::NotHubUser(_))));
    }
}
