//! `fieldhub stats`: on a hub larger than one `STATS` message (issue 16: it
//! printed invalid JSON past ~1,900 ports) the document stays valid JSON,
//! says how much it left out, and the control API still has everything.
//! (Into a pipe closed early it ends quietly: `rough_edges`.)

use crate::FIELDHUB;
use fieldhub_proto::stats::HubStats;
use fieldhub_testkit::api;

#[test]
fn stats_of_two_thousand_ports_are_valid_json_that_says_what_was_left_out() {
    let hub = FIELDHUB.start();
    let clients: Vec<_> = (0..64).map(|n| hub.client(&format!("ecu-with-a-long-name-{n:03}"))).collect();
    for client in &clients {
        for _ in 0..32 {
            client.open_port("can0").unwrap();
        }
    }
    let out = FIELDHUB.command().args(["stats", "--json", "--hub", &hub.url]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stats: HubStats = serde_json::from_slice(&out.stdout).expect("valid JSON");
    let omitted = stats.omitted.expect("a cut document says so");
    assert!(omitted.ports > 0, "2,048 ports do not fit one message");
    assert_eq!(stats.ports.len() + omitted.ports as usize, 64 * 32, "kept and left out add up");

    let text = FIELDHUB.command().args(["stats", "--hub", &hub.url]).output();
    let text = String::from_utf8(text.unwrap().stdout).unwrap();
    assert!(text.contains(&format!("{} ports", omitted.ports)), "the table says what it lacks: {text}");

    let (status, all) = api(&hub, "GET", "/api/v1/stats", None);
    assert_eq!(status, 200);
    assert_eq!(all["ports"].as_array().unwrap().len(), 64 * 32, "the control API has them all");
    assert!(all.get("omitted").is_none());
}
