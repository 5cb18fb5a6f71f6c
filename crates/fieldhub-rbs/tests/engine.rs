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

fn rpm_raw(bytes: &[u8]) -> u16 {
    u16::from_le_bytes([bytes[2], bytes[3]])
}

#[test]
fn a_ramp_sends_its_value_at_each_cycles_bus_time_from_the_next_cycle_then_holds_its_target() {
    let mut sim = simulation();
    let engine = job(&mut sim, "EngineStatus");
    const MS: u64 = 1_000_000;
    assert_eq!(rpm_raw(&data(engine.produce(0))), 3200);
    // 800 rpm (raw 3200) to 1000 rpm (raw 4000) over 35 ms: 800 raw in 35 ms.
    engine.state().ramp("Rpm", 1000.0, 35.0).unwrap();
    let sent: Vec<u16> = (1..=6).map(|k| rpm_raw(&data(engine.produce(k * 10 * MS)))).collect();
    let expected: Vec<u16> =
        (0..6u64).map(|k| (3200.0 + 800.0 * ((k * 10) as f64 / 35.0).min(1.0)).round_ties_even() as u16).collect();
    assert_eq!(sent, expected, "the ramp starts at the cycle after it was asked for");
    assert_eq!(sent, [3200, 3429, 3657, 3886, 4000, 4000]);
    assert_eq!(engine.state().get("Rpm").unwrap(), 1000.0, "a ramped signal shows its value as last sent");
    // A value set ends a ramp; a new ramp starts from the value the cycle would send.
    engine.state().ramp("Rpm", 0.0, 1000.0).unwrap();
    assert_eq!(rpm_raw(&data(engine.produce(70 * MS))), 4000);
    assert_eq!(rpm_raw(&data(engine.produce(80 * MS))), 3960);
    engine.state().set("Rpm", 500.0).unwrap();
    assert_eq!(rpm_raw(&data(engine.produce(90 * MS))), 2000);
    assert_eq!(rpm_raw(&data(engine.produce(100 * MS))), 2000);
}

#[test]
fn a_ramp_is_refused_on_an_event_message_on_a_computed_signal_and_without_a_duration() {
    let mut sim = simulation();
    let refused = |sim: &mut Simulation, message: &str, signal: &str, ms: f64| {
        job(sim, message).state().ramp(signal, 1.0, ms).unwrap_err().to_string()
    };
    assert_eq!(
        refused(&mut sim, "BodyEvent", "Horn", 100.0),
        "message BodyEvent is sent on change, not in cycles: set its signals instead of ramping them"
    );
    assert!(refused(&mut sim, "EngineStatus", "Counter", 100.0).contains("alive counter"));
    assert!(refused(&mut sim, "EngineStatus", "Rpm", 0.0).contains("more than 0 ms"));
    let err = job(&mut sim, "EngineStatus").state().ramp("Rpm", 20_000.0, 100.0).unwrap_err();
    assert!(err.to_string().ends_with("20000 is outside its range 0..=16383.75"), "{err}");
}

#[test]
fn the_counter_and_checksum_show_as_last_sent_and_are_refused_as_values() {
    let mut sim = simulation();
    let engine = job(&mut sim, "EngineStatus");
    let mut last = Vec::new();
    for _ in 0..3 {
        last = data(engine.produce(0));
    }
    let state = engine.state();
    assert_eq!(state.get("Counter").unwrap(), 2.0);
    assert_eq!(state.get("Checksum").unwrap(), f64::from(last[0]));
    let err = state.set("Counter", 5.0).unwrap_err();
    assert_eq!(
        err.to_string(),
        "message EngineStatus, signal Counter: it is the message's alive counter, which the simulation computes; \
         use counter_stuck or checksum_wrong to fault it"
    );
    assert!(state.check("Checksum", 1.0).unwrap_err().to_string().contains("the message's checksum"));
}
