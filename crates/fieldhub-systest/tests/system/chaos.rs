//! The chaos suite of the local path, briefly (`fieldhub bench soak --chaos`
//! runs hundreds of seeds): real hubs, numbered senders on shared memory,
//! TCP and unix sockets, lossless receivers, and a seeded schedule of fault
//! rules, shorts, forced bus-off, pulled cables and SIGKILLed clients. Every
//! numbered frame must be on every receiver in one order, or reported to its
//! sender and counted by the hub (docs/frame-fate.md).

use serde_json::Value;

use crate::FIELDHUB;

#[test]
fn every_numbered_frame_is_on_every_receiver_or_reported_to_its_sender_under_seeded_chaos() {
    let out = FIELDHUB
        .command()
        .args(["bench", "soak", "--chaos", "--seed", "1", "--runs", "12", "--frames", "400", "--json"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}\n{stdout}", String::from_utf8_lossy(&out.stderr));
    let report: Value = serde_json::from_str(&stdout).unwrap();
    let seeds = report["seeds"].as_array().unwrap();
    assert_eq!(seeds.len(), 12);
    let mut reasons = std::collections::BTreeSet::new();
    for seed in seeds {
        assert_eq!(seed["problems"], Value::Array(vec![]), "{seed}");
        let dropped: u64 = seed["dropped"].as_object().unwrap().values().map(|n| n.as_u64().unwrap()).sum();
        assert_eq!(seed["on_bus"].as_u64().unwrap() + dropped, seed["sent"].as_u64().unwrap(), "{seed}");
        reasons.extend(seed["dropped"].as_object().unwrap().keys().cloned());
    }
    // The schedule did take frames off the bus, for more than one reason:
    // the contract was tested, not only a quiet bus.
    for reason in ["bus_off", "fault_rule", "unplugged"] {
        assert!(reasons.contains(reason), "no seed dropped frames for {reason}: {reasons:?}");
    }
}
