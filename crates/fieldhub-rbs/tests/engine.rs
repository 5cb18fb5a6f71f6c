//! The engine's frames, cycle by cycle, from a DBC with a counter, a
//! CRC-8 checksum, a multiplexed and an event message
//! (`tests/data/body.dbc`): start values, counters counting and wrapping,
//! checksums right (and wrong or stuck when told), values set by name.

use fieldhub_bus::cyclic::FrameProducer;
use fieldhub_proto::Frame;
use fieldhub_rbs::engine::{ChecksumSpec, CounterSpec, EngineError, MessageJob, Setup, Simulation};
use fieldhub_rbs::plan::NodeSelection;
use fieldhub_rbs::protect::Algorithm;

fn simulation() -> Simulation {
    let dbc = fieldhub_rbs::load::load(include_bytes!("data/body.dbc")).unwrap();
    let setup = Setup {
        nodes: NodeSelection::Except(vec!["DUT".into()]),
        default_cycle_ms: None,
        counters: vec![CounterSpec {
            message: "EngineStatus".into(),
            signal: "Counter".into(),
            min: None,
            max: Some(14),
        }],
        checksums: vec![ChecksumSpec {
            message: "EngineStatus".into(),
            signal: "Checksum".into(),
            algorithm: Algorithm::SaeJ1850,
            data_id: None,
        }],
    };
    Simulation::build(&dbc, &setup).unwrap()
}

fn job<'a>(sim: &'a mut Simulation, name: &str) -> &'a mut MessageJob {
    sim.jobs.iter_mut().find(|j| j.state().name == name).unwrap()
}

/// CRC-8/SAE-J1850 bit by bit (poly 0x1D, init 0xFF, xorout 0xFF).
fn j1850(bytes: &[u8]) -> u8 {
    let mut crc = 0xFFu8;
    for &b in bytes {
        crc ^= b;
        for _ in 0..8 {
            crc = if crc & 0x80 != 0 { (crc << 1) ^ 0x1D } else { crc << 1 };
        }
    }
    crc ^ 0xFF
}

fn data(frame: Option<Frame>) -> Vec<u8> {
    frame.expect("a frame this cycle").data().to_vec()
}

#[test]
fn the_simulated_nodes_messages_carry_their_start_values_a_counting_counter_and_a_right_crc() {
    let mut sim = simulation();
    let names: Vec<&str> = sim.jobs.iter().map(|j| j.state().name.as_str()).collect();
    assert_eq!(names, ["EngineStatus", "BodyMux", "BodyEvent"], "DutCommand is the DUT's");
    let engine = job(&mut sim, "EngineStatus");
    let mut counters = Vec::new();
    for _ in 0..17 {
        let bytes = data(engine.produce(0));
        assert_eq!(bytes[0], j1850(&bytes[1..]), "{bytes:02x?}");
        assert_eq!(u16::from_le_bytes([bytes[2], bytes[3]]), 3200, "Rpm's start value, raw");
        assert_eq!(bytes[4], 130);
        counters.push(bytes[1] & 0x0F);
    }
    assert_eq!(counters, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 0, 1], "counts to its max 14, wraps");
}

#[test]
fn a_value_set_by_name_goes_out_in_the_next_cycle_and_a_bad_one_is_refused_naming_the_range() {
    let mut sim = simulation();
    let engine = job(&mut sim, "EngineStatus");
    engine.state().set("Rpm", 1000.0).unwrap();
    let bytes = data(engine.produce(0));
    assert_eq!(u16::from_le_bytes([bytes[2], bytes[3]]), 4000, "1000 rpm at 0.25 rpm per bit");
    assert_eq!(engine.state().get("Rpm").unwrap(), 1000.0);
    let err = engine.state().set("CoolantTemp", 300.0).unwrap_err();
    assert_eq!(err.to_string(), "message EngineStatus, signal CoolantTemp: 300 is outside its range -40..=215");
    let err = engine.state().set("Speed", 1.0).unwrap_err();
    assert!(matches!(err, EngineError::NoSignal { .. }), "{err}");
    assert!(err.to_string().ends_with("its signals are: Checksum, Counter, Rpm, CoolantTemp"), "{err}");
}

#[test]
fn a_stuck_counter_repeats_a_wrong_checksum_fails_and_a_stopped_message_sends_nothing() {
    let mut sim = simulation();
    let engine = job(&mut sim, "EngineStatus");
    data(engine.produce(0));
    engine.state().stick_counter(true);
    engine.state().corrupt_checksum(true);
    let (a, b) = (data(engine.produce(0)), data(engine.produce(0)));
    assert_eq!((a[1] & 0x0F, b[1] & 0x0F), (1, 1));
    assert_eq!(b[0], !j1850(&b[1..]));
    engine.state().enable(false);
    assert!(engine.produce(0).is_none());
}

#[test]
fn a_multiplexed_message_sends_the_signals_its_multiplexor_selects() {
    let mut sim = simulation();
    let mux = job(&mut sim, "BodyMux");
    assert_eq!(data(mux.produce(0)), [1, 3, 0, 0], "page 1: DoorsOpen");
    mux.state().set("LightLevel", 500.0).unwrap();
    mux.state().set("Page", 2.0).unwrap();
    assert_eq!(data(mux.produce(0)), [2, 0xF4, 0x01, 0], "page 2: LightLevel, DoorsOpen left out");
}

#[test]
fn an_event_message_goes_once_at_the_start_and_once_per_change() {
    let mut sim = simulation();
    let event = job(&mut sim, "BodyEvent");
    assert_eq!(event.state().cycle_ms, None);
    assert_eq!(data(event.produce(0)), [0]);
    assert!(event.produce(0).is_none());
    event.state().set("Horn", 1.0).unwrap();
    assert_eq!(data(event.produce(0)), [1]);
    assert!(event.produce(0).is_none());
}
