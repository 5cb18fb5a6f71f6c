//! The soak with the attacks mixed in (issue 34): `fieldhub bench soak
//! --hostile`, brief — clients killed at random moments while, all along, a
//! hostile client attaches over shared memory, writes over the hub's bell
//! page and its own segment and punches holes in both; silent connections
//! hold handshake slots over TCP and the unix socket; keep-alive HTTP
//! connections beyond the hub's slots ask what it refuses while legitimate
//! requests must be answered; and connections send garbage. Every lossless
//! receiver must still see one gap-free order, the same for all, and the
//! hub must give back its descriptors and threads.

use crate::FIELDHUB;

#[test]
fn a_brief_soak_with_the_attacks_mixed_in_keeps_one_gap_free_order() {
    let out = FIELDHUB
        .command()
        .args(["bench", "soak", "--hostile", "--frames", "3000", "--clients", "8", "--kills", "6", "--seed", "34"])
        .arg("--json")
        .output()
        .expect("run fieldhub bench soak");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("the soak report is JSON ({e}): {}", String::from_utf8_lossy(&out.stderr)));
    assert!(out.status.success(), "{report:#}\n{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(report["problems"], serde_json::json!([]), "{report:#}");
    assert_eq!(report["kills"], 6);
    assert!(report["hostile_attacks"].as_u64().unwrap() > 0, "the hostile client attacked: {report:#}");
    for attack in ["silent_opened", "http_refused", "http_answered", "garbage_closed"] {
        assert!(report["attacks"][attack].as_u64().unwrap() > 0, "{attack}: {report:#}");
    }
    assert!(report["frames_per_receiver"].as_u64().unwrap() >= 3000, "{report:#}");
    assert_eq!(report["before"]["descriptors"], report["after"]["descriptors"], "{report:#}");
    assert_eq!(report["before"]["threads"], report["after"]["threads"], "{report:#}");
}
