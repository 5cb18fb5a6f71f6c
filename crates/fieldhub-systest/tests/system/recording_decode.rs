//! `POST /api/v1/recordings/decode`, which reads the recording the web
//! monitor's plot view opens: every format the hub reads comes back as the
//! frames written, decoded with a channel's DBC on request; a broken file
//! is a 400 naming where it broke, an oversized one a 413 naming the cap;
//! only an access that may control the hub, and no other site's page, may
//! use it.

use std::io::Cursor;

use crate::FIELDHUB;
use fieldhub_log::mdf4::Mdf4Writer;
use fieldhub_log::{Direction, Format, Recorder, RecorderOptions};
use fieldhub_proto::{Frame, FrameFlags};
use fieldhub_testkit::{base, control, HubProcess};
use serde_json::{json, Value};

const CONFIG: &str = r#"
[hub]
token = "sesame"
monitor_token = "look"
[[channel]]
name = "can0"
"#;

const DBC: &str = "VERSION \"\"\n\nNS_ :\n\nBS_:\n\nBU_: ECU\n\n\
BO_ 256 Engine: 8 ECU\n SG_ Speed : 0|16@1+ (0.1,0) [0|6553.5] \"km/h\" Vector__XXX\n\n";

/// Microseconds of the first frame.
const START_US: u64 = 1_700_000_000_000_000;

/// The frames every file holds: classic, extended, CAN FD and remote.
fn frames() -> Vec<(u64, Frame)> {
    vec![
        (START_US, Frame::can(0x100, false, &[0xF4, 0x01, 0, 0, 0, 0, 0, 0]).unwrap()),
        (START_US + 10_000, Frame::can(0x1ABC_DEF0, true, &[1, 2, 3]).unwrap()),
        (START_US + 20_000, Frame::can_fd(0x200, FrameFlags::BRS, &[0x55; 12]).unwrap()),
        (START_US + 30_000, Frame::remote(0x300, false, 2).unwrap()),
    ]
}

/// What the endpoint answers for [`frames`]: [µs, id, flags, hex].
fn expected() -> Vec<Value> {
    vec![
        json!([START_US, 0x100, 0, "F401000000000000"]),
        json!([START_US + 10_000, 0x1ABC_DEF0, 1, "010203"]),
        json!([START_US + 20_000, 0x200, 16 | 4, "555555555555555555555555"]),
        json!([START_US + 30_000, 0x300, 2, ""]),
    ]
}

/// [`frames`] written by fieldhub-log's writer of `format` (`None`: MDF4).
fn file(format: Option<Format>) -> Vec<u8> {
    let channel = "can0";
    match format {
        None => {
            let mut writer = Mdf4Writer::new(Vec::new(), &[channel.to_owned()], START_US * 1_000);
            for (us, frame) in frames() {
                writer.record(us * 1_000, channel, &frame, Direction::Rx).unwrap();
            }
            writer.finish().unwrap()
        }
        Some(format) => {
            let options = RecorderOptions { start_ns: START_US * 1_000, ..Default::default() };
            let mut recorder = Recorder::new(Cursor::new(Vec::new()), format, &options);
            for (us, frame) in frames() {
                recorder.record(us * 1_000, channel, &frame, Direction::Rx).unwrap();
            }
            recorder.finish_file().unwrap().into_inner()
        }
    }
}

/// (status, JSON body) of one decode request.
fn decode(hub: &HubProcess, query: &str, token: Option<&str>, origin: Option<&str>, body: &[u8]) -> (u16, Value) {
    let path = format!("/api/v1/recordings/decode{query}");
    let mut request = control::request(hub, "POST", &path, token).set("content-type", "application/octet-stream");
    if let Some(origin) = origin {
        request = request.set("origin", origin);
    }
    let (status, response) = control::answered(request.send_bytes(body), "POST decode");
    (status, response.into_json().unwrap())
}

#[test]
fn a_recording_in_each_format_the_hub_reads_comes_back_as_its_frames_with_their_signals() {
    let hub = FIELDHUB.start_with(Some(CONFIG), &[]);
    let put = ureq::put(&format!("{}/api/v1/channels/can0/dbc", base(&hub)))
        .set("authorization", "Bearer sesame")
        .send_json(json!({ "text": DBC }));
    assert_eq!(put.map(|r| r.status()).ok(), Some(200), "the DBC is loaded");
    for (format, name) in
        [(Some(Format::Candump), "candump"), (Some(Format::Asc), "asc"), (Some(Format::Blf), "blf"), (None, "mf4")]
    {
        let (status, answer) = decode(&hub, "?dbc=can0", Some("sesame"), None, &file(format));
        assert_eq!(status, 200, "{name}: {answer}");
        assert_eq!(answer["format"], name, "found from the file's first bytes");
        assert_eq!(answer["truncated"], false);
        let frames = answer["frames"].as_array().unwrap();
        let got: Vec<Value> = frames.iter().map(|f| json!([f[1], f[2], f[3], f[4]])).collect();
        assert_eq!(got, expected(), "{name}: every frame with its time, id, flags and data");
        assert_eq!(frames[0][5], json!(["Engine", [["Speed", 50.0]]]), "{name}: 0x1F4 * 0.1 km/h");
        assert!(frames[1][5].is_null(), "{name}: an identifier the DBC does not define has no values");
    }
    let (status, answer) = decode(&hub, "?format=asc", Some("sesame"), None, &file(Some(Format::Asc)));
    assert_eq!((status, &answer["format"]), (200, &json!("asc")), "a named format: {answer}");
    let (status, answer) = decode(&hub, "?dbc=can9", Some("sesame"), None, &file(Some(Format::Asc)));
    assert_eq!(status, 404, "{answer}");
    assert!(answer["error"].as_str().unwrap().contains("channel 'can9' has no DBC file"), "{answer}");
}

#[test]
fn a_broken_recording_is_refused_with_where_the_reader_stopped_and_an_oversized_one_with_the_cap() {
    let hub = FIELDHUB.start_with(Some(CONFIG), &[]);
    let mut blf = file(Some(Format::Blf));
    let at = blf.len() - 20;
    blf.truncate(at);
    let (status, answer) = decode(&hub, "", Some("sesame"), None, &blf);
    assert_eq!(status, 400, "{answer}");
    let text = answer["error"].as_str().unwrap();
    assert!(text.starts_with("not a readable blf recording: BLF at byte "), "the byte offset: {text}");
    let (status, answer) = decode(&hub, "", Some("sesame"), None, b"(1700000000.000000) can0 123#00\n(oops) can0 1\n");
    assert_eq!(status, 400, "{answer}");
    assert!(answer["error"].as_str().unwrap().starts_with("not a readable candump recording: line 2: "), "{answer}");
    let mut mdf = file(None);
    mdf[64..68].copy_from_slice(b"##XX");
    let (status, answer) = decode(&hub, "", Some("sesame"), None, &mdf);
    assert_eq!(status, 400, "{answer}");
    assert!(answer["error"].as_str().unwrap().contains("MDF4 block at byte 64"), "{answer}");
    let (status, answer) = decode(&hub, "", Some("sesame"), None, b"");
    assert_eq!(status, 400, "{answer}");
    let (status, answer) = decode(&hub, "?format=trc", Some("sesame"), None, &blf);
    assert_eq!(status, 400, "{answer}");
    assert!(answer["error"].as_str().unwrap().contains("use candump, asc, blf or mf4"), "{answer}");

    let oversized = vec![b'\n'; 32 * 1024 * 1024 + 1];
    let (status, answer) = decode(&hub, "", Some("sesame"), None, &oversized);
    assert_eq!(status, 413, "{answer}");
    assert!(answer["error"].as_str().unwrap().contains("larger than the 32 MiB"), "{answer}");
    let (status, _) = decode(&hub, "", Some("sesame"), None, &file(Some(Format::Candump)));
    assert_eq!(status, 200, "the hub reads the next file");
}

#[test]
fn only_an_access_that_may_control_the_hub_and_no_other_sites_page_may_decode() {
    let hub = FIELDHUB.start_with(Some(CONFIG), &[]);
    let log = file(Some(Format::Candump));
    let (status, answer) = decode(&hub, "", None, None, &log);
    assert_eq!(status, 401, "no token: {answer}");
    let (status, answer) = decode(&hub, "", Some("look"), None, &log);
    assert_eq!(status, 403, "the monitor token: {answer}");
    assert!(answer["error"].as_str().unwrap().contains("read-only"), "{answer}");
    let host = base(&hub).replace("http://", "");
    let (status, answer) = decode(&hub, "", Some("sesame"), Some("https://evil.example"), &log);
    assert_eq!(status, 403, "another site's page, even with the token: {answer}");
    assert!(answer["error"].as_str().unwrap().contains("pages of other sites"), "{answer}");
    let (status, answer) = decode(&hub, "", Some("sesame"), Some(&format!("http://{host}")), &log);
    assert_eq!(status, 200, "the hub's own page: {answer}");
}
