//! A hub configured for SIL Kit on a machine without SIL Kit: it says where
//! it looked for the library and how to fix it, and the rest of the hub runs.

use crate::FIELDHUB;
use fieldhub_client::Frame;
use fieldhub_testkit::recv_n;

const CONFIG: &str = r#"
[[channel]]
name = "can0"

[[silkit]]
channel = "can0"
registry = "silkit://127.0.0.1:8500"
network = "CAN1"
"#;

#[test]
fn without_the_library_the_hub_names_where_it_looked_and_runs_on() {
    let nowhere = std::env::temp_dir().join("fieldhub-no-silkit-here/libSilKit.so");
    let nowhere = nowhere.to_str().expect("a UTF-8 temporary directory");
    let hub = FIELDHUB.start_with_env(Some(CONFIG), &[], &[("FIELDHUB_SILKIT_LIB", nowhere), ("LD_LIBRARY_PATH", "")]);
    let outcome = hub.wait_for_log("SIL Kit");
    assert!(
        !outcome.contains("SIL Kit library loaded"),
        "libSilKit.so is on this system's loader path, so this machine cannot show a missing library: \
         run this test where SIL Kit is not installed system-wide (make test-silkit keeps it in target/silkit)"
    );
    let error = hub.wait_for_log("SIL Kit bridges not started");
    for needle in [nowhere, "the system's loader path (libSilKit.so)", "FIELDHUB_SILKIT_LIB=/path/libSilKit.so", "can0"]
    {
        assert!(error.contains(needle), "'{needle}' missing from: {error}");
    }

    let (a, b) = (hub.client("a"), hub.client("b"));
    let (tx, _rx) = (a.open_port("can0").unwrap(), b.open_port("can0").unwrap());
    let frame = Frame::can(0x123, false, &[1, 2, 3]).unwrap();
    a.send(&tx, &frame).unwrap();
    assert!(recv_n(&b, 1)[0].frame == frame);
}
