//! The LDF reader on whole files: what it takes from them, and the errors
//! of broken and hostile ones (each naming line, column and what to do).

use fieldhub_ldf::{parse, Publisher, MAX_LDF_BYTES};

const BODY: &str = include_str!("files/body.ldf");
const MIXED: &str = include_str!("files/mixed.ldf");
const EVENTS: &str = include_str!("files/events.ldf");

#[test]
fn a_body_cluster_gives_its_speed_nodes_frames_and_tables() {
    let ldf = parse(BODY).unwrap();
    assert_eq!((ldf.speed_bps, ldf.protocol_version.as_str(), ldf.master.as_str()), (19_200, "2.1", "BCM"));
    assert_eq!(ldf.slaves, ["door", "seat"]);
    let frames: Vec<_> = ldf.frames.iter().map(|f| (f.name.as_str(), f.id, f.length, f.publisher.clone())).collect();
    let node = |n: &str| Publisher::Node(n.into());
    assert_eq!(
        frames,
        [
            ("DoorStatus", 0x10, 2, node("door")),
            ("SeatStatus", 0x11, 4, node("seat")),
            ("BcmCommand", 0x20, 1, node("BCM")),
            ("MasterReq", 0x3C, 8, node("BCM")),
            ("SlaveResp", 0x3D, 8, Publisher::AnySlave),
        ]
    );
    let normal = ldf.schedule_table("Normal").unwrap();
    let slots: Vec<_> = normal.entries.iter().map(|e| (e.frame.as_str(), e.delay_us)).collect();
    assert_eq!(slots, [("DoorStatus", 10_000), ("SeatStatus", 10_000), ("BcmCommand", 15_000)]);
    assert_eq!(ldf.schedule_tables[1].name, "Diagnostics");
}

#[test]
fn checksums_are_classic_for_diagnostic_frames_and_lin_1_nodes_only() {
    let body = parse(BODY).unwrap();
    let classic: Vec<_> = body.frames.iter().map(|f| (f.id, body.classic_checksum(f))).collect();
    assert_eq!(classic, [(0x10, false), (0x11, false), (0x20, false), (0x3C, true), (0x3D, true)]);
    let mixed = parse(MIXED).unwrap();
    assert_eq!(mixed.speed_bps, 10_417);
    let classic: Vec<_> = mixed.frames.iter().map(|f| (f.name.as_str(), mixed.classic_checksum(f))).collect();
    assert_eq!(classic, [("WiperState", false), ("MirrorState", true), ("GatewayCommand", false)]);
}

#[test]
fn event_triggered_and_sporadic_frames_give_their_frames_collision_table_and_slots() {
    let ldf = parse(EVENTS).unwrap();
    let events: Vec<_> = ldf
        .event_triggered_frames
        .iter()
        .map(|e| (e.name.as_str(), e.id, e.collision_table.as_deref(), e.frames.join(" ")))
        .collect();
    assert_eq!(events, [("DoorEvents", 0x30, Some("DoorCollision"), "LeftDoor RightDoor".to_owned())]);
    assert_eq!(ldf.sporadic_frames[0].name, "SeatCommands");
    assert_eq!(ldf.sporadic_frames[0].frames, ["SeatHeater", "SeatFanSpeed"]);
    let normal: Vec<_> = ldf.schedule_tables[0].entries.iter().map(|e| e.frame.as_str()).collect();
    assert_eq!(normal, ["DoorEvents", "SeatState", "SeatCommands"]);
    // LIN 2.0 writes no collision table.
    let old = EVENTS.replace("DoorEvents: DoorCollision, 0x30", "DoorEvents: 0x30");
    assert_eq!(parse(&old).unwrap().event_triggered_frames[0].collision_table, None);
}

#[test]
fn event_triggered_and_sporadic_mistakes_are_named() {
    let error = |from: &str, to: &str| {
        assert!(EVENTS.contains(from), "{from}");
        parse(&EVENTS.replace(from, to)).unwrap_err().to_string()
    };
    let text = error("DoorCollision, 0x30", "Nightly, 0x30");
    assert!(
        text.contains("resolves collisions with schedule table 'Nightly', which Schedule_tables does not define"),
        "{text}"
    );
    let text = error("0x30, LeftDoor", "0x20, LeftDoor");
    assert!(text.contains("event-triggered frame 'DoorEvents' has identifier 0x20, which another frame has"), "{text}");
    let text = error("SeatHeater, SeatFanSpeed;", "SeatHeater, DoorEvents;");
    assert!(
        text.contains("sporadic frame 'SeatCommands' carries 'DoorEvents', which is not a frame of Frames"),
        "{text}"
    );
    let text = error("SeatCommands: SeatHeater", "SeatState: SeatHeater");
    assert!(text.contains("'SeatState' names two frames"), "{text}");
    let text = error("    SeatCommands delay 10 ms;", "    SeatOrders delay 10 ms;");
    assert!(text.contains("schedules 'SeatOrders', which no Frames, Diagnostic_frames, Event_triggered_frames or Sporadic_frames entry defines"), "{text}");
}

/// `BODY` with `from` replaced by `to`; the error's line, column and text.
fn broken(from: &str, to: &str) -> (u32, u32, String) {
    assert!(BODY.contains(from), "{from}");
    let err = parse(&BODY.replacen(from, to, 1)).unwrap_err();
    (err.line, err.column, err.message)
}

#[test]
fn mistakes_are_named_with_their_line_and_column() {
    let (line, column, message) = broken("    SeatStatus delay 10 ms;", "    SeatState delay 10 ms;");
    assert_eq!((line, column), (96, 5));
    assert!(message.contains("'Normal' schedules 'SeatState', which no Frames"), "{message}");
    let (line, _, message) = broken("  SeatStatus: 0x11, seat, 4", "  SeatStatus: 0x11, trunk, 4");
    assert_eq!(line, 45);
    assert!(message.contains("published by 'trunk', which is not a node of Nodes (BCM, door, seat)"), "{message}");
    let (_, _, message) = broken("SeatStatus: 0x11", "SeatStatus: 0x10");
    assert!(message.contains("the identifier 0x10 of frame 'DoorStatus' (line 41)"), "{message}");
    let (_, _, message) = broken("Signal_representation {", "Signal_colours {");
    assert!(message.contains("unknown section 'Signal_colours'; an LDF has"), "{message}");
    let (_, _, message) = broken("LIN_speed = 19.2 kbps;", "LIN_speed = 19.2;");
    assert!(message.contains("';' where 'kbps' belongs"), "{message}");
    let (_, _, message) = broken("delay 15 ms", "delay 15.0001 ms");
    assert!(message.contains("at most 3 digits after the point"), "{message}");
    let (_, _, message) = broken("BcmCommand delay 15 ms;", "AssignNAD { door } delay 15 ms;");
    assert!(message.contains("'AssignNAD' in schedule table 'Normal' is a node configuration command"), "{message}");
}

#[test]
fn hostile_files_are_refused_with_a_reason() {
    // Cut short anywhere: never a panic; a file cut between two sections
    // is a smaller LDF, one cut inside a section an error.
    let cuts = (0..BODY.len()).filter(|&n| BODY.is_char_boundary(n));
    let refused = cuts.clone().filter(|&cut| parse(&BODY[..cut]).is_err()).count();
    assert!(refused > cuts.count() * 9 / 10, "{refused}");
    let cut = parse(&BODY[..BODY.find("Schedule_tables").unwrap() + 30]).unwrap_err();
    assert!(cut.message.contains("the file ends inside schedule table 'Normal'"), "{cut}");
    let (_, _, message) = broken("0x11, seat, 4", "0x11, seat, 99999999999999999999999");
    assert!(message.contains("is not a whole number"), "{message}");
    let (_, _, message) = broken("0x11, seat, 4", "0x11, seat, 9");
    assert!(message.contains("the frame length 9 is over 8"), "{message}");
    let (_, _, message) = broken("0x11, seat", "0x40, seat");
    assert!(message.contains("the frame identifier 0x40 is over 63"), "{message}");
    let (_, _, message) = broken("delay 15 ms", "delay 100000000 ms");
    assert!(message.contains("too large"), "{message}");
    // Braces nested a million deep are counted, not recursed into.
    let deep = BODY.replacen("Signals {", &format!("Signals {{{}{}", "{".repeat(1 << 20), "}".repeat(1 << 20)), 1);
    assert!(parse(&deep).is_ok());
    let unbalanced = BODY.replacen("Signals {", &format!("Signals {{{}", "{".repeat(1 << 20)), 1);
    assert!(parse(&unbalanced).unwrap_err().message.contains("ends inside Signals"));
    let huge = " ".repeat(MAX_LDF_BYTES + 1);
    assert!(parse(&huge).unwrap_err().message.contains("over the"));
    assert!(parse("").unwrap_err().message.contains("starts with 'LIN_description_file;'"));
    assert!(parse("\u{feff}").is_err());
}
