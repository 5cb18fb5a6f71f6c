//! Another local user against root's hub (issue 34, attacks 1, 2 and 3):
//! `nobody` (through `setpriv`) links a hub of its own to root's federation,
//! fills the hub's handshake slots with silent connections, and holds the
//! control API's connections. Each is refused while a numbered pair of
//! root's clients runs throughout and loses nothing, and root's new
//! clients — TCP, shared memory, HTTP, TLS — get in.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::time::Instant;

use super::attacker::{nobody_command, AsNobody, Pair, NOBODY};
use crate::FIELDHUB;
use fieldhub_testkit::federation::free_port;
use fieldhub_testkit::*;

/// The pair's frames: identifier and sender tag.
const PAIR_ID: u32 = 0x3A;
const PAIR_TAG: u8 = 3;

fn hold_connections(address: &str, count: u32, first: &str) -> String {
    let (host, port) = address.rsplit_once(':').expect("HOST:PORT");
    format!(
        "trap '' PIPE; for i in $(seq {count}); do exec {{fd}}<>/dev/tcp/{host}/{port} || exit 1; \
         printf '{first}' >&$fd; done; echo held"
    )
}

/// The hub's lines refusing `nobody`'s connections.
fn refusals_of_nobody(hub: &HubProcess, needle: &str) -> usize {
    let who = format!("user id {NOBODY}");
    hub.log().iter().filter(|l| l.contains(needle) && l.contains(&who)).count()
}

/// At most one line per peer per interval (`session/peer_key.rs`), over
/// the time the attack has run.
fn refusal_lines_allowed(since: Instant) -> usize {
    1 + (since.elapsed().as_secs() / 10) as usize
}

#[test]
fn silent_connections_of_another_user_hold_only_their_share_of_handshakes_and_every_transport_still_admits() {
    let hub = FIELDHUB.start_shm();
    let pair = Pair::start(hub.shm_client("pair-sender"), hub.client("pair-receiver"), "can0", PAIR_ID, PAIR_TAG);
    let address = hub.url.strip_prefix("tcp://").expect("a TCP hub");
    let started = Instant::now();
    let attack = AsNobody::bash(&format!("{}; read", hold_connections(address, 300, "")));
    assert_eq!(attack.line(), "held");

    // While nobody holds its connections, every way in admits root's.
    let (tcp, shm) = (hub.client("late-tcp"), hub.shm_client("late-shm"));
    let tx = tcp.open_port("can1").unwrap();
    shm.open_port_with("can1", &lossless()).unwrap();
    shm.flush().unwrap();
    exchange_numbered(&tcp, &tx, &shm, 0x100, 1, 200);
    let stats = fieldhub_testkit::control::ok(&hub, "GET", "/api/v1/stats", None);
    assert!(stats.is_object(), "{stats}");

    let made_room = refusals_of_nobody(&hub, "closed to make room");
    assert!(made_room >= 1, "nobody's oldest connections were closed for its new ones: {:#?}", hub.log());
    let lines = refusals_of_nobody(&hub, "refusing connection");
    assert!(lines <= refusal_lines_allowed(started), "{lines} lines for one peer: {:#?}", hub.log());
    drop(attack);
    pair.finish();
}

#[test]
fn silent_connections_of_another_user_leave_a_tls_hub_admitting_root_over_tls() {
    let certs = Certs::make("silent-tls");
    let (cert, key) = (certs.path("hub.crt").display().to_string(), certs.path("hub.key").display().to_string());
    let hub = FIELDHUB.start_with(None, &["--tls-cert", &cert, "--tls-key", &key]);
    let url = hub.url.replacen("tcp://", "tls://", 1);
    let connect = |name: &str| {
        let tls = fieldhub_client::tls::TlsOptions { ca: Some(certs.path("ca.crt")), ..Default::default() };
        let options = fieldhub_client::ClientOptions { name: name.into(), tls, ..Default::default() };
        fieldhub_client::Client::connect_with(&url, &options).unwrap_or_else(|e| panic!("{name} over {url}: {e}"))
    };
    let pair = Pair::start(connect("pair-sender"), connect("pair-receiver"), "can0", PAIR_ID, PAIR_TAG);
    let address = hub.url.strip_prefix("tcp://").expect("a TCP address");
    let attack = AsNobody::bash(&format!("{}; read", hold_connections(address, 300, "")));
    assert_eq!(attack.line(), "held");

    // nobody's 300 silent connections on the TLS port leave root's TLS clients their way in.
    let (tx, rx) = (connect("late-tls-tx"), connect("late-tls-rx"));
    let port = tx.open_port("can1").unwrap();
    rx.open_port_with("can1", &lossless()).unwrap();
    rx.flush().unwrap();
    exchange_numbered(&tx, &port, &rx, 0x101, 2, 200);
    let made_room = refusals_of_nobody(&hub, "closed to make room");
    assert!(made_room >= 1, "nobody's oldest connections were closed for its new ones: {:#?}", hub.log());
    drop(attack);
    pair.finish();
}

#[test]
fn http_connections_of_another_user_cannot_hold_the_control_api_and_a_refused_request_closes_its_connection() {
    let hub = FIELDHUB.start();
    let pair = Pair::start(hub.client("pair-sender"), hub.client("pair-receiver"), "can0", PAIR_ID, PAIR_TAG);
    let address = hub.url.strip_prefix("tcp://").expect("a TCP hub");
    let (host, port) = address.rsplit_once(':').unwrap();
    // 100 slow requests whose heads never end, then one whole request
    // without credentials on a keep-alive connection: its 401 must close it.
    let script = format!(
        "{}; exec {{k}}<>/dev/tcp/{host}/{port}; \
         printf 'GET /api/v1/stats HTTP/1.1\\r\\nHost: {address}\\r\\nConnection: keep-alive\\r\\n\\r\\n' >&$k; \
         echo \"$(head -c 12 <&$k)\"; cat <&$k >/dev/null; echo closed; read",
        hold_connections(address, 100, "GET /api/v1/stats HTTP/1.1\\r\\nHost: x\\r\\n")
    );
    let attack = AsNobody::bash(&script);
    assert_eq!(attack.line(), "held");
    assert_eq!(attack.line(), "HTTP/1.1 401", "nobody is refused");
    assert_eq!(attack.line(), "closed", "and its connection closed after the 401");

    let agent = fieldhub_testkit::control::patient_agent();
    for path in ["/api/v1/stats", "/api/v1/channels", "/ui", "/api/v1/clients"] {
        for _ in 0..5 {
            let (status, answer) = fieldhub_testkit::control::api_via(&agent, &hub, "GET", path, None);
            assert_eq!(status, 200, "GET {path} while nobody holds connections: {answer}");
        }
    }
    drop(attack);
    pair.finish();
}

#[test]
fn a_hub_of_another_user_cannot_link_to_a_federation_that_names_no_token_file() {
    let zenoh = free_port();
    let root_config = tempfile::tempdir().unwrap();
    let owner_config = format!(
        "[hub]\nname = \"rack\"\n\n[federation]\nlisten = [\"tcp/127.0.0.1:{zenoh}\"]\n\n\
         [[channel]]\nname = \"body\"\nfederated = true\n"
    );
    let xdg = root_config.path().to_str().unwrap();
    let owner = FIELDHUB.start_with_env(Some(&owner_config), &[], &[("XDG_CONFIG_HOME", xdg)]);
    let made = owner.wait_for_log("made its user's federation token");
    let token = root_config.path().join("fieldhub/federation.token");
    assert!(made.contains(&token.display().to_string()), "the path is told: {made}");
    let mode = std::fs::metadata(&token).unwrap().mode() & 0o777;
    assert_eq!(mode, 0o600, "owner-only");
    assert_eq!(std::fs::metadata(token.parent().unwrap()).unwrap().mode() & 0o777, 0o700, "in a private folder");
    owner.wait_for_log("this hub owns the channel");
    let pair = Pair::start(owner.client("pair-sender"), owner.client("pair-receiver"), "body", PAIR_ID, PAIR_TAG);

    // nobody's hub: the same channel with a higher epoch, linking to root's.
    let home = tempfile::tempdir().unwrap();
    std::fs::set_permissions(home.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    std::os::unix::fs::chown(home.path(), Some(NOBODY), Some(NOBODY)).unwrap();
    let intruder_config = format!(
        "[hub]\nname = \"intruder\"\n\n[federation]\nlisten = []\nconnect = [\"tcp/127.0.0.1:{zenoh}\"]\n\
         epoch = 99\n\n[[channel]]\nname = \"body\"\nfederated = true\n"
    );
    let xdg = format!("XDG_CONFIG_HOME={}", home.path().display());
    let launcher = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "env", &xdg];
    let intruder = FIELDHUB.start_via(&launcher, &home.path().join("hub.sock"), &intruder_config);
    intruder.wait_for_log("refused this hub's link");
    owner.wait_for_log("another hub tried to link to this hub and was refused");
    assert!(
        !owner.log().iter().any(|l| l.contains("intruder")),
        "root's hub never heard of nobody's: {:#?}",
        owner.log()
    );
    pair.finish();
}

#[test]
fn a_runtime_directory_another_user_made_first_gives_the_hub_a_private_one_that_its_ready_line_names() {
    // The runtime directory's parent is open to everyone, as /tmp is, and
    // nobody made the hub's directory there first.
    let runtime = tempfile::tempdir().unwrap();
    std::fs::set_permissions(runtime.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
    let squatted = runtime.path().join("fieldhub");
    let made = nobody_command("mkdir").arg(&squatted).status().expect("setpriv (util-linux) runs mkdir");
    assert!(made.success(), "nobody makes {}", squatted.display());

    let name = format!("squat-{}-{}", std::process::id(), unique());
    let xdg = runtime.path().to_str().unwrap();
    let hub = FIELDHUB.start_with_env(None, &["--shm", &name], &[("XDG_RUNTIME_DIR", xdg)]);
    let url = hub.shm_url.clone().expect("the hub serves shared memory");
    let private = format!("shm://{name}?dir={}/fieldhub-", runtime.path().display());
    assert!(url.starts_with(&private), "the ready line names the private directory: {url}");
    let told = hub.wait_for_log("cannot use the runtime directory");
    assert!(told.contains(&format!("belongs to user {NOBODY}")) && told.contains(&url), "{told}");

    let pair = Pair::start(hub.shm_client("pair-sender"), hub.client("pair-receiver"), "can0", PAIR_ID, PAIR_TAG);
    let stats = fieldhub_testkit::control::ok(&hub, "GET", "/api/v1/clients", None);
    assert!(stats.to_string().contains("pair-sender"), "{stats}");
    pair.finish();
    assert_eq!(std::fs::read_dir(&squatted).unwrap().count(), 0, "nothing of root's in nobody's directory");
    let dir = std::path::PathBuf::from(url.split_once("?dir=").unwrap().1);
    assert!(hub.terminate().success());
    assert!(!dir.exists(), "the private directory goes with the hub");
}
