//! `--ivshmem PATH` aimed at someone's file (issue 34, attack 6): a hub
//! uses only a region file it creates itself or one carrying its own
//! header, and changes nothing — size, bytes, mode — of any other file
//! before refusing it, even one whose first 4 KiB are zeros.

use std::os::unix::fs::PermissionsExt;

use crate::FIELDHUB;
use fieldhub_testkit::*;

#[test]
fn ivshmem_on_an_existing_document_with_a_zero_first_page_refuses_it_and_changes_nothing() {
    let path = std::env::temp_dir().join(format!("fieldhub-hostile-ivshmem-{}.txt", std::process::id()));
    let lines: String = (0..200).map(|n| format!("line {n:03} of someone's document\n")).collect();
    let document = [vec![0u8; 4096], lines.into_bytes()].concat();
    std::fs::write(&path, &document).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();

    let out = FIELDHUB
        .command()
        .args(["hub", "--listen", "127.0.0.1:0", "--no-shm", "--ivshmem"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(!out.status.success(), "the hub serves no such file");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("carries no fieldhub region header"), "{said}");
    assert_eq!(std::fs::read(&path).unwrap(), document, "its bytes and size are as they were");
    assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o644, "and its mode");

    // A path that does not exist yet is the hub's own region: it serves it,
    // and serves it again after a restart.
    std::fs::remove_file(&path).unwrap();
    for _ in 0..2 {
        let hub = FIELDHUB.start_with(None, &["--ivshmem", path.to_str().unwrap()]);
        let (tx, rx) = (hub.client("tx"), hub.client("rx"));
        let port = tx.open_port("can0").unwrap();
        rx.open_port_with("can0", &lossless()).unwrap();
        exchange_numbered(&tx, &port, &rx, 0x10, 1, 100);
        assert!(hub.terminate().success());
    }
    assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
    std::fs::remove_file(&path).unwrap();
}
