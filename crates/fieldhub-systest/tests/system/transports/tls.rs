//! TLS and mutual TLS (issue 16, `docs/security.md` "TLS and mutual TLS"):
//! a hub with `--tls-cert`/`--tls-key` speaks TLS on TCP, frames and the
//! control API alike; with `--tls-client-ca` a client needs a certificate
//! that CA signed. Real processes; the certificates are made per test, in
//! the test process (`fieldhub_testkit::certs`).

use std::path::Path;
use std::process::Output;
use std::time::Instant;

use crate::FIELDHUB;
use fieldhub_client::tls::{TlsError, TlsOptions};
use fieldhub_client::{Client, ClientError, ClientOptions};
use fieldhub_testkit::{exchange_numbered, lossless, Certs, HubProcess};

/// The hub's side of the certificates (`fieldhub_testkit::certs`): a CA,
/// a hub certificate it signed (for `localhost` and 127.0.0.1), a client
/// certificate it signed, and a client certificate of another CA.
trait HubCerts {
    fn arg(&self, name: &str) -> String;
    /// A hub speaking TLS; with `mutual`, clients need a certificate of `ca.crt`.
    fn hub(&self, mutual: bool) -> HubProcess;
    /// Trust `ca`, present `client` (`NAME.crt` and `NAME.key`) if given.
    fn options(&self, name: &str, ca: &str, client: Option<&str>) -> ClientOptions;
}

impl HubCerts for Certs {
    fn arg(&self, name: &str) -> String {
        self.path(name).display().to_string()
    }

    fn hub(&self, mutual: bool) -> HubProcess {
        let (cert, key, ca) = (self.arg("hub.crt"), self.arg("hub.key"), self.arg("ca.crt"));
        let mut args = vec!["--tls-cert", &cert, "--tls-key", &key];
        if mutual {
            args.extend(["--tls-client-ca", &ca]);
        }
        FIELDHUB.start_with(None, &args)
    }

    fn options(&self, name: &str, ca: &str, client: Option<&str>) -> ClientOptions {
        let tls = TlsOptions {
            ca: Some(self.path(ca)),
            cert: client.map(|c| self.path(&format!("{c}.crt"))),
            key: client.map(|c| self.path(&format!("{c}.key"))),
            server_name: None,
        };
        ClientOptions { name: name.into(), tls, ..Default::default() }
    }
}

/// The hub's TCP address as a `tls://` URL.
fn tls_url(hub: &HubProcess) -> String {
    hub.url.replacen("tcp://", "tls://", 1)
}

fn connect(hub: &HubProcess, options: &ClientOptions) -> Result<Client, ClientError> {
    Client::connect_with(&tls_url(hub), options)
}

/// The TLS error a refused connection carries.
fn tls_error(outcome: Result<Client, ClientError>) -> TlsError {
    match outcome {
        Err(ClientError::Tls { error, .. }) => *error,
        Err(other) => panic!("expected a TLS error, got: {other}"),
        Ok(_) => panic!("expected a TLS error, but the client was admitted"),
    }
}

/// `fieldhub ARGS` with `env`, and no TLS or token settings of the test's own.
fn fieldhub(args: &[&str], env: &[(&str, &Path)]) -> Output {
    let mut command = FIELDHUB.command();
    for var in ["FIELDHUB_TLS_CA", "FIELDHUB_TLS_CERT", "FIELDHUB_TLS_KEY", "FIELDHUB_TOKEN", "FIELDHUB_TOKEN_FILE"] {
        command.env_remove(var);
    }
    command.args(args).envs(env.iter().map(|(k, v)| (*k, v.as_os_str()))).output().unwrap()
}

fn text(output: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}

#[test]
fn a_client_that_trusts_the_hubs_ca_exchanges_10000_numbered_frames_in_order() {
    let certs = Certs::make("exchange");
    let hub = certs.hub(false);
    let sender = connect(&hub, &certs.options("sender", "ca.crt", None)).expect("a client trusting the CA connects");
    let receiver = connect(&hub, &certs.options("receiver", "ca.crt", None)).expect("connect");
    let tx = sender.open_port("can0").unwrap();
    receiver.open_port_with("can0", &lossless()).unwrap();
    let started = Instant::now();
    exchange_numbered(&sender, &tx, &receiver, 0x123, 1, 10_000);
    eprintln!("10,000 frames over TLS (debug build, loopback): {:?}", started.elapsed());
    hub.wait_for_log("client connected over TLS");
}

#[test]
fn a_client_that_does_not_trust_the_hubs_certificate_is_refused_saying_to_set_fieldhub_tls_ca() {
    let certs = Certs::make("untrusted");
    let hub = certs.hub(false);
    let error = tls_error(connect(&hub, &certs.options("doubter", "other-ca.crt", None)));
    assert!(matches!(error, TlsError::Untrusted(_)), "{error:?}");
    let message = error.to_string();
    assert!(message.contains("server certificate not trusted") && message.contains("FIELDHUB_TLS_CA"), "{message}");
    hub.wait_for_log("TLS: received fatal alert");
    // The hub goes on serving clients that trust it.
    connect(&hub, &certs.options("believer", "ca.crt", None)).expect("a trusting client still connects");
}

#[test]
fn with_mutual_tls_a_client_without_a_certificate_is_refused() {
    let certs = Certs::make("no-cert");
    let hub = certs.hub(true);
    let error = tls_error(connect(&hub, &certs.options("anonymous", "ca.crt", None)));
    assert!(matches!(error, TlsError::CertificateRequired), "{error:?}");
    let message = error.to_string();
    assert!(message.contains("FIELDHUB_TLS_CERT") && message.contains("FIELDHUB_TLS_KEY"), "{message}");
    hub.wait_for_log("peer sent no certificates");
    // Over HTTPS too: no certificate, no control API.
    let refused =
        fieldhub(&["ctl", "--hub", &tls_url(&hub), "channels"], &[("FIELDHUB_TLS_CA", &certs.path("ca.crt"))]);
    assert!(!refused.status.success());
    assert!(text(&refused).contains("requires a client certificate"), "{}", text(&refused));
}

#[test]
fn with_mutual_tls_a_certificate_of_another_ca_is_refused_and_one_of_the_trusted_ca_is_admitted() {
    let certs = Certs::make("mutual");
    let hub = certs.hub(true);
    let error = tls_error(connect(&hub, &certs.options("stranger", "ca.crt", Some("stranger"))));
    assert!(matches!(error, TlsError::CertificateRefused(_)), "{error:?}");
    assert!(error.to_string().contains("refused this client's certificate"), "{error}");
    hub.wait_for_log("invalid peer certificate");

    // No token: the certificate is what admits it, sending included.
    let sender = connect(&hub, &certs.options("ecu", "ca.crt", Some("client"))).expect("a certified client connects");
    let receiver = connect(&hub, &certs.options("tester", "ca.crt", Some("client"))).expect("connect");
    let tx = sender.open_port("can0").unwrap();
    receiver.open_port_with("can0", &lossless()).unwrap();
    exchange_numbered(&sender, &tx, &receiver, 0x321, 2, 1_000);

    // A key that is not the certificate's is the client's mistake, said before connecting.
    let mut mismatched = certs.options("confused", "ca.crt", Some("client"));
    mismatched.tls.key = Some(certs.path("stranger.key"));
    let error = tls_error(connect(&hub, &mismatched));
    assert!(error.to_string().contains("does not belong to the client certificate"), "{error}");
}

#[test]
fn a_plaintext_client_on_a_tls_port_is_refused_and_the_hub_keeps_serving_others() {
    let certs = Certs::make("plaintext");
    let mut hub = certs.hub(false);
    let plain = ClientOptions { name: "plain".into(), ..Default::default() };
    match Client::connect_with(&hub.url, &plain) {
        Err(ClientError::Refused { text, .. }) => assert!(text.contains("this port speaks TLS"), "{text}"),
        Err(other) => panic!("expected a refusal in the protocol's own words, got: {other}"),
        Ok(_) => panic!("a plaintext client was admitted on a TLS port"),
    }
    let line = hub.wait_for_log("refusing connection: this port speaks TLS");
    assert!(line.contains("peer="), "{line}");

    // Plain HTTP gets an HTTP answer that says to use https.
    let base = hub.url.replacen("tcp://", "http://", 1);
    match ureq::get(&format!("{base}/api/v1/stats")).call() {
        Err(ureq::Error::Status(400, response)) => {
            assert!(response.into_string().unwrap().contains("https://"));
        }
        other => panic!("expected 400 for plain HTTP on a TLS port, got {other:?}"),
    }
    // Not logged again: refusals are logged once per peer per interval
    // (this one counts in that peer's next line; docs/security.md).

    assert!(hub.is_running());
    let client = connect(&hub, &certs.options("after", "ca.crt", None)).expect("TLS clients are still served");
    client.stats().expect("and answered");
}

#[test]
fn ctl_and_stats_work_over_tls_and_https_with_the_ca() {
    let certs = Certs::make("tools");
    let hub = certs.hub(true);
    let env = [
        ("FIELDHUB_TLS_CA", certs.path("ca.crt")),
        ("FIELDHUB_TLS_CERT", certs.path("client.crt")),
        ("FIELDHUB_TLS_KEY", certs.path("client.key")),
    ];
    let env: Vec<(&str, &Path)> = env.iter().map(|(k, v)| (*k, v.as_path())).collect();
    // By name: the certificate holds `localhost`.
    let port = hub.url.rsplit_once(':').unwrap().1;
    let by_name = format!("tls://localhost:{port}");
    let channels = fieldhub(&["ctl", "--hub", &by_name, "channels"], &env);
    assert!(channels.status.success(), "{}", text(&channels));
    assert!(text(&channels).contains("can0"), "{}", text(&channels));
    let stats = fieldhub(&["stats", "--hub", &tls_url(&hub), "--json"], &env);
    assert!(stats.status.success(), "{}", text(&stats));
    assert!(text(&stats).contains("can1"), "{}", text(&stats));
    let sent = fieldhub(&["send", "--hub", &tls_url(&hub), "can0", "123#DEADBEEF"], &env);
    assert!(sent.status.success(), "{}", text(&sent));
    // Without the CA the tools say what to set.
    let untrusted = fieldhub(&["ctl", "--hub", &by_name, "channels"], &env[1..]);
    assert!(!untrusted.status.success());
    assert!(
        text(&untrusted).contains("FIELDHUB_TLS_CA") || text(&untrusted).contains("not trusted"),
        "{}",
        text(&untrusted)
    );
}

#[test]
fn bad_tls_settings_stop_the_hub_at_start_naming_the_file_and_the_mistake() {
    let certs = Certs::make("config");
    let check = |args: &[&str]| {
        let mut all = vec!["hub", "--listen", "127.0.0.1:0", "--no-shm", "--check-config"];
        all.extend_from_slice(args);
        fieldhub(&all, &[])
    };
    let (cert, key, ca) = (certs.arg("hub.crt"), certs.arg("hub.key"), certs.arg("ca.crt"));
    assert!(check(&["--tls-cert", &cert, "--tls-key", &key]).status.success());

    let missing = check(&["--tls-cert", "/nonexistent/hub.crt", "--tls-key", &key]);
    assert!(!missing.status.success());
    let said = text(&missing);
    assert!(said.contains("hub.tls_cert") && said.contains("/nonexistent/hub.crt"), "{said}");

    let client_key = certs.arg("client.key");
    let mismatch = check(&["--tls-cert", &cert, "--tls-key", &client_key]);
    assert!(!mismatch.status.success());
    let said = text(&mismatch);
    assert!(said.contains("does not belong to the certificate") && said.contains("client.key"), "{said}");

    // A text file that holds no PEM block, as an openssl extension file.
    std::fs::write(certs.path("hub.ext"), "subjectAltName=DNS:localhost,IP:127.0.0.1\n").unwrap();
    let not_pem = check(&["--tls-cert", &cert, "--tls-key", &key, "--tls-client-ca", &certs.arg("hub.ext")]);
    let said = text(&not_pem);
    assert!(said.contains("hub.tls_client_ca") && said.contains("holds no certificate"), "{said}");

    let ca_alone = check(&["--tls-client-ca", &ca]);
    assert!(text(&ca_alone).contains("needs hub.tls_cert"), "{}", text(&ca_alone));

    // Mutual TLS authenticates remote clients: no token needed beyond loopback.
    let remote = fieldhub(
        &[
            "hub",
            "--listen",
            "0.0.0.0:0",
            "--no-shm",
            "--check-config",
            "--tls-cert",
            &cert,
            "--tls-key",
            &key,
            "--tls-client-ca",
            &ca,
        ],
        &[],
    );
    assert!(remote.status.success(), "{}", text(&remote));
    let remote_without = fieldhub(
        &["hub", "--listen", "0.0.0.0:0", "--no-shm", "--check-config", "--tls-cert", &cert, "--tls-key", &key],
        &[],
    );
    assert!(text(&remote_without).contains("requires a token"), "{}", text(&remote_without));
}
