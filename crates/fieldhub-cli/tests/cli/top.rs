//! `fieldhub top`: the live per-identifier and bus-load view, driven
//! without a terminal (`-n N` refreshes into a pipe, each a plain block).

use fieldhub_proto::Frame;

use crate::FIELDHUB;

#[test]
fn top_lists_each_identifiers_frames_and_the_channels_load_for_n_refreshes() {
    let hub = FIELDHUB.start();
    let client = hub.client("sender");
    let port = client.open_port("can0").unwrap();
    for (id, extended, count) in [(0x123, false, 30), (0x1ABC_DEF0, true, 12)] {
        for n in 0..count {
            client.send(&port, &Frame::can(id, extended, &[n as u8]).unwrap()).unwrap();
        }
    }
    client.flush().unwrap();

    let out = FIELDHUB
        .command()
        .args(["top", "--hub", &hub.url, "-n", "2", "-i", "50", "--sort", "frames", "can0"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    // Two refreshes, plain text (no terminal control codes into a pipe).
    assert_eq!(text.lines().filter(|l| l.starts_with("hub ")).count(), 2, "{text}");
    assert!(!text.contains('\x1b'), "{text}");
    let snapshots: Vec<&str> = text.split("\n\nhub ").collect();
    assert_eq!(snapshots.len(), 2, "{text}");
    for snapshot in &snapshots {
        assert!(snapshot.contains("\ncan0  can 500000 bit/s  load "), "{snapshot}");
        assert!(!snapshot.contains("\ncan1 "), "only the channel asked for: {snapshot}");
        let rows: Vec<Vec<&str>> = snapshot
            .lines()
            .map(|l| l.split_whitespace().collect())
            .filter(|w: &Vec<&str>| w.len() == 4 && (w[0] == "123" || w[0] == "1ABCDEF0"))
            .collect();
        // Most frames first; the identifiers as cansend writes them.
        assert_eq!(
            rows.iter().map(|w| (w[0], w[1])).collect::<Vec<_>>(),
            [("123", "30"), ("1ABCDEF0", "12")],
            "{snapshot}"
        );
    }
    // The channel's frame rate needs two counts: the first refresh has none, the second one.
    assert!(snapshots[0].contains(" - frames/s  42 frames  0 dropped"), "{}", snapshots[0]);
    assert!(snapshots[1].contains(" 0.0 frames/s  42 frames  0 dropped"), "{}", snapshots[1]);
}

#[test]
fn top_names_a_channel_the_hub_does_not_have() {
    let hub = FIELDHUB.start();
    let out = FIELDHUB.command().args(["top", "--hub", &hub.url, "-n", "1", "nosuch"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("the hub has no channel 'nosuch'"), "{out:?}");
}
