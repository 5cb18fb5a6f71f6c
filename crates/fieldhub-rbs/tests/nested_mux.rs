//! Multiplexing below the top level (`tests/data/nested_mux.dbc`: `Page`
//! is `m1M`, selected by `Service` 1, and selects `Voltage` or `Current`
//! through `SG_MUL_VAL_`): the engine's frame for each selector
//! combination carries exactly the signals its whole chain selects, as the
//! monitor's decoder (`fieldhub-dbc`) reads them back; the encoder of the
//! send-by-signals panel builds the same frames and refuses a value its
//! chain leaves out, naming the multiplexor that does.

use fieldhub_bus::cyclic::FrameProducer;
use fieldhub_dbc::Database;
use fieldhub_rbs::encode::encode;
use fieldhub_rbs::engine::{Setup, Simulation};
use fieldhub_rbs::plan::NodeSelection;

const DBC: &[u8] = include_bytes!("data/nested_mux.dbc");

fn decoded(payload: &[u8]) -> Vec<(String, f64)> {
    let db = Database::from_bytes(DBC).unwrap();
    let frame = db.decode(0x500, false, payload).expect("Diag decodes");
    frame.signals.iter().map(|s| (s.name.to_owned(), s.value)).collect()
}

fn named(pairs: &[(&str, f64)]) -> Vec<(String, f64)> {
    pairs.iter().map(|&(n, v)| (n.to_owned(), v)).collect()
}

#[test]
fn each_selector_combination_sends_exactly_the_signals_its_chain_selects() {
    let dbc = fieldhub_rbs::load::load(DBC).unwrap();
    let setup =
        Setup { nodes: NodeSelection::Except(vec![]), default_cycle_ms: None, counters: vec![], checksums: vec![] };
    let mut sim = Simulation::build(&dbc, &setup).unwrap();
    let diag = &mut sim.jobs[0];
    let first = diag.produce(0).unwrap();
    assert_eq!(first.data(), [1, 0, 0xB0, 0x04, 0, 0, 0, 0xA5], "start values: Service 1, Page 0, Voltage 12 V");
    let combinations: [&[(&str, f64)]; 4] = [
        &[("Service", 1.0), ("Page", 0.0), ("Voltage", 13.5), ("Flags", 1.0)],
        &[("Service", 1.0), ("Page", 1.0), ("Current", -5.5), ("Flags", 2.0)],
        &[("Service", 1.0), ("Page", 2.0), ("Current", 250.0), ("Flags", 3.0)],
        &[("Service", 2.0), ("Status", 7.0), ("Flags", 4.0)],
    ];
    for values in combinations {
        for &(signal, value) in values {
            diag.state().set(signal, value).unwrap();
        }
        let frame = diag.produce(10_000_000).unwrap();
        let mut got = decoded(frame.data());
        got.sort_by(|a, b| a.0.cmp(&b.0));
        let mut want = named(values);
        want.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(got.len(), want.len(), "{got:?}");
        for ((name, value), (wanted, expected)) in got.iter().zip(&want) {
            assert!(name == wanted && (value - expected).abs() < 1e-9, "{got:?} against {want:?}");
        }
        let built = encode(&dbc, "Diag", &named(values)).unwrap();
        assert_eq!(built.payload, frame.data(), "the encoder builds the engine's frame for {values:?}");
    }
}

#[test]
fn a_value_the_chain_leaves_out_is_refused_naming_the_multiplexor_that_does() {
    let dbc = fieldhub_rbs::load::load(DBC).unwrap();
    let refused = |values: &[(&str, f64)]| encode(&dbc, "Diag", &named(values)).unwrap_err().to_string();
    assert_eq!(
        refused(&[("Page", 1.0), ("Voltage", 1.0)]),
        "message Diag, signal Voltage is not in the frame while Page is 1; set Page to select it"
    );
    assert_eq!(
        refused(&[("Service", 2.0), ("Voltage", 1.0)]),
        "message Diag, signal Voltage is not in the frame while Service is 2; set Service to select it",
        "Page selects Voltage, but Service leaves Page out"
    );
}
