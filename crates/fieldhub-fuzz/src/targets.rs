//! The targets. Each says what reads this input in the product.

use std::path::PathBuf;
use std::sync::OnceLock;

use fieldhub_bus::fault::{FaultRule, FaultSpec};
use fieldhub_bus::port_id::PortId;
use fieldhub_bus::request::{ChannelUpdate, RecordingSpec};
use fieldhub_hub::cannelloni_codec::{decode_packet, encode_record, StreamDecoder};
use fieldhub_hub::config::{ChannelConfig, HubConfig, RouteConfig};
use fieldhub_hub::socketcand_protocol::{self, Command, Element, Elements};
use fieldhub_proto::limits::{MAX_HELLO_LEN, MAX_MESSAGE_LEN};
use fieldhub_proto::wire::{check_length, decode, encode, msg, DecodeError, FramesReader, Message, LENGTH_PREFIX};
use fieldhub_proto::Frame;
use fieldhub_shm::layout::SLOT_SIZE;
use fieldhub_shm::ring::{slots_for, Consumer, LocalRing, Producer};

/// The wire decoder (a TCP, unix-socket or serial client's bytes): as one
/// message body, and as a stream of length-prefixed messages, the first
/// held to `MAX_HELLO_LEN` as a new connection's is. Every accepted message
/// re-encodes to exactly its bytes.
pub fn wire(data: &[u8]) {
    let mut out = Vec::new();
    round_trip(data, &mut out);
    let mut rest = data;
    let mut max = MAX_HELLO_LEN;
    while rest.len() >= LENGTH_PREFIX {
        let len = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]);
        let Ok(len) = check_length(len, max) else { return };
        assert!(len <= max as usize);
        let Some(body) = rest.get(LENGTH_PREFIX..LENGTH_PREFIX + len) else { return };
        round_trip(body, &mut out);
        rest = &rest[LENGTH_PREFIX + len..];
        max = MAX_MESSAGE_LEN;
    }
}

fn round_trip(body: &[u8], out: &mut Vec<u8>) {
    one_pass_agrees(body);
    let Ok(message) = decode(body) else { return };
    if let Message::Frames(batch) = &message {
        assert_eq!(batch.iter().count(), batch.len());
        for record in batch.iter() {
            assert!(record.frame.data().len() <= record.frame.len());
        }
    }
    out.clear();
    encode(out, &message);
    assert_eq!(&out[..LENGTH_PREFIX], &(body.len() as u32).to_le_bytes());
    assert_eq!(&out[LENGTH_PREFIX..], body, "{message:?} re-encodes differently");
}

/// The hub's shared-memory intake reads a client's `FRAMES` message in one
/// pass (`FramesReader`): it must take exactly the batches `decode` takes,
/// with the same frames, and refuse the others with the same error.
fn one_pass_agrees(body: &[u8]) {
    let Some((&msg::FRAMES, payload)) = body.split_first() else { return };
    let read_in_one_pass = || -> Result<Vec<(u16, Frame, u64)>, DecodeError> {
        let mut reader = FramesReader::new(payload)?;
        let mut records = Vec::new();
        while let Some(record) = reader.next_record()? {
            let mut frame = Frame::EMPTY;
            record.write_into(&mut frame);
            records.push((record.port(), frame, record.timestamp_ns()));
        }
        Ok(records)
    };
    match (decode(body), read_in_one_pass()) {
        (Ok(Message::Frames(batch)), Ok(read)) => {
            let decoded: Vec<_> = batch.iter().map(|r| (r.port, r.frame, r.meta.timestamp_ns)).collect();
            assert_eq!(read, decoded, "the one-pass reader differs from decode");
        }
        (Err(decoded), Err(read)) => assert_eq!(read, decoded, "the one-pass reader fails differently"),
        (decoded, read) => panic!("decode gave {decoded:?}, the one-pass reader {read:?}"),
    }
}

/// A shared-memory ring a client scribbled on, as the hub reads a to-hub
/// ring: slots of arbitrary bytes, then `head` and `tail` words moved to
/// wherever the input says. Every message taken is then decoded.
pub fn shm_ring(data: &[u8]) {
    const SLOTS: u32 = 16;
    let Some((words, content)) = data.split_first_chunk::<8>() else { return };
    let local = LocalRing::new(SLOTS);
    let ring = local.ring();
    let mut producer = Producer::starting_at(0);
    // The content fills the slots: one message whose body is the input,
    // as much of it as fits.
    let body = &content[..content.len().min(SLOTS as usize * SLOT_SIZE - LENGTH_PREFIX)];
    if !body.is_empty() {
        let mut message = (body.len() as u32).to_le_bytes().to_vec();
        message.extend_from_slice(body);
        debug_assert!(slots_for(message.len()) <= SLOTS);
        producer.try_push(&ring, &message).expect("an empty ring takes one message that fits");
    }
    // The client then moves the indices anywhere.
    let head = u32::from_le_bytes([words[0], words[1], words[2], words[3]]);
    let tail = u32::from_le_bytes([words[4], words[5], words[6], words[7]]);
    local.head_word().store(head, std::sync::atomic::Ordering::Release);
    let mut consumer = Consumer::starting_at(tail);
    let mut taken = Vec::new();
    for _ in 0..2 * SLOTS {
        match consumer.pop(&ring, MAX_MESSAGE_LEN as usize, &mut taken) {
            Ok(true) => {
                assert!(!taken.is_empty() && taken.len() <= MAX_MESSAGE_LEN as usize);
                one_pass_agrees(&taken);
                let _ = decode(&taken);
            }
            Ok(false) | Err(_) => return,
        }
    }
}

/// The headers of shared-memory segments, doorbells and ivshmem regions,
/// as a client maps what the hub (or, across a VM border, the other side)
/// wrote.
pub fn shm_headers(data: &[u8]) {
    use fieldhub_shm::layout::{parse_bell_header, RegionHeader, SegmentHeader};
    if let Ok(header) = SegmentHeader::parse(data) {
        assert_eq!(SegmentHeader::parse(&header.encode()).ok(), Some(header));
    }
    if let Ok(header) = RegionHeader::parse(data) {
        assert_eq!(RegionHeader::parse(&header.encode()).ok(), Some(header));
    }
    let _ = parse_bell_header(data);
}

/// cannelloni's formats as a peer sends them (`transport/cannelloni/`): a
/// UDP packet, and the same bytes as a TCP stream fed in two pieces. Every
/// frame decoded encodes to a record that decodes to the same frame.
pub fn cannelloni(data: &[u8]) {
    let mut frames = Vec::new();
    let _ = decode_packet(data, &mut frames);
    let mut stream = StreamDecoder::default();
    let (front, back) = data.split_at(data.len() / 2);
    for piece in [front, back] {
        stream.feed(piece);
        while let Ok(Some(frame)) = stream.next_frame() {
            frames.push(frame);
        }
    }
    let mut bytes = Vec::new();
    frames.iter().for_each(|frame| encode_record(frame, &mut bytes));
    let mut again = StreamDecoder::default();
    again.feed(&bytes);
    for frame in &frames {
        assert_eq!(again.next_frame(), Ok(Some(frame.clone())), "a decoded frame re-encodes to itself");
    }
    assert_eq!(again.next_frame(), Ok(None));
}

/// A socketcand client's bytes (`transport/socketcand/`), fed in two
/// pieces: every element is parsed; every refusal is one `< error … >`
/// element; a frame a client sends is written back as one `< frame … >`.
pub fn socketcand(data: &[u8]) {
    let one_element = |line: &str| {
        assert!(line.starts_with('<') && line.ends_with('>'), "{line}");
        assert_eq!(line.matches('<').count() + line.matches('>').count(), 2, "{line}");
    };
    let mut elements = Elements::default();
    let (front, back) = data.split_at(data.len() / 2);
    for piece in [front, back] {
        elements.push(piece);
        while let Some(element) = elements.next_element() {
            let text = match element {
                Element::Command(text) => text,
                Element::Bad(e) => {
                    one_element(&socketcand_protocol::error_line(&e.0));
                    continue;
                }
            };
            match socketcand_protocol::parse(text) {
                Ok(Command::Send(frame) | Command::Add { frame, .. } | Command::Update(frame)) => {
                    assert!(frame.len() <= 8 && !frame.is_fd());
                    let mut line = String::new();
                    socketcand_protocol::format_frame(&mut line, &frame, 1);
                    one_element(&line);
                }
                Ok(_) => {}
                Err(e) => one_element(&socketcand_protocol::error_line(&e.0)),
            }
        }
    }
}

/// A hub configuration file.
pub fn config(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(config) = HubConfig::parse(text, "fuzz.toml") {
        let _ = config.validate("fuzz.toml");
    }
}

/// A fault rule as `POST /api/v1/faults` takes it: parsed, then compiled
/// as the bus compiles it.
pub fn fault_rule(data: &[u8]) {
    let Ok(spec) = serde_json::from_slice::<FaultSpec>(data) else { return };
    let port = |name: &str| PortId::client(7).filter(|_| name == "ecu");
    let _ = FaultRule::compile(1, &spec, 1_000_000_000, port);
}

/// The other JSON bodies of the control API, each with the checks the API
/// applies before a request reaches the bus.
pub fn http_bodies(data: &[u8]) {
    if let Ok(channel) = serde_json::from_slice::<ChannelConfig>(data) {
        let _ = channel.check_rates();
    }
    if let Ok(route) = serde_json::from_slice::<RouteConfig>(data) {
        let _ = route.check_values();
    }
    let _ = serde_json::from_slice::<ChannelUpdate>(data);
    let _ = serde_json::from_slice::<RecordingSpec>(data);
}

/// A recording's path as a client asks for it: whatever it says, the file
/// the hub would write is inside the recordings directory.
pub fn recording_path(data: &[u8]) {
    let Ok(requested) = std::str::from_utf8(data) else { return };
    let dir = recordings_dir();
    if let Ok(file) = fieldhub_hub::recording::path::resolve(dir, requested) {
        let root = dir.canonicalize().expect("the directory exists once resolve ran");
        assert!(file.starts_with(&root), "{requested:?} resolved to {} outside {}", file.display(), root.display());
    }
}

/// One directory for every run of [`recording_path`] in this process.
fn recordings_dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("fieldhub-fuzz-recordings-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("sub")).expect("create the recordings directory");
        dir
    })
}

/// A candump log (`fieldhub replay`, python-can's player), read whole.
pub fn candump(data: &[u8]) {
    let reader = fieldhub_log::candump::CandumpReader::new(data);
    reader.take(10_000).for_each(drop);
}

/// A Vector ASC trace, read whole.
pub fn asc(data: &[u8]) {
    let reader = fieldhub_log::asc::AscReader::new(data, fieldhub_log::DateZone::Fixed(0));
    reader.take(10_000).for_each(drop);
}

/// A Vector BLF file (`fieldhub replay`/`convert` of a `.blf`), read
/// whole; what it holds, in time order, recorded as BLF reads back the same.
pub fn blf(data: &[u8]) {
    use fieldhub_log::{Direction, Format, LogReader, Record, Recorder};
    let records: Vec<Record> = fieldhub_log::blf::BlfReader::new(data).take(10_000).map_while(Result::ok).collect();
    if !records.windows(2).all(|pair| pair[0].timestamp_ns <= pair[1].timestamp_ns) {
        return;
    }
    let mut recorder = Recorder::new(std::io::Cursor::new(Vec::new()), Format::Blf, &Default::default());
    for r in &records {
        let direction = r.direction.unwrap_or(Direction::Rx);
        recorder.record(r.timestamp_ns, &r.channel, &r.frame, direction).expect("record to memory");
    }
    let bytes = recorder.finish_file().expect("finish in memory").into_inner();
    let again: Vec<Record> = LogReader::new(&bytes[..], Format::Blf, &Default::default())
        .collect::<Result<_, _>>()
        .expect("what fieldhub writes reads");
    assert_eq!(again, records);
}

/// An ASAM MDF4 file (`fieldhub convert` of a `.mf4`), read whole.
pub fn mdf4(data: &[u8]) {
    if let Ok(records) = fieldhub_log::mdf4::read(data, fieldhub_log::DateZone::Fixed(0)) {
        assert!(records.windows(2).all(|pair| pair[0].timestamp_ns <= pair[1].timestamp_ns));
    }
}

/// cansend's syntax (`fieldhub send`, the monitor's send form) and the
/// log line, one line at a time; a frame that parses prints back to text
/// that parses to the same frame.
pub fn cansend(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    for line in text.lines() {
        if let Ok(frame) = fieldhub_proto::text::parse_cansend(line) {
            let printed = fieldhub_proto::text::format_cansend(&frame);
            assert_eq!(fieldhub_proto::text::parse_cansend(&printed).as_ref(), Ok(&frame), "{line:?} → {printed}");
        }
        let _ = fieldhub_proto::text::parse_log_line(line);
    }
}

/// A DBC file (`[[channel]] dbc`, an upload to the monitor), and a frame
/// decoded with it.
pub fn dbc(data: &[u8]) {
    let Ok(database) = fieldhub_dbc::Database::from_bytes(data) else { return };
    for id in [0x100, 0x123, 0x7FF] {
        let _ = database.decode(id, false, &[0xA5; 8]);
    }
}

/// A LIN description file (`[channel.lin] ldf`): it parses or names its
/// line and column, and what parses keeps the reader's promises — every
/// schedule entry names a defined frame with a delay, every frame a 6-bit
/// identifier and 1 to 8 bytes, and each frame has a checksum model.
pub fn ldf(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let ldf = match fieldhub_ldf::parse(text) {
        Ok(ldf) => ldf,
        Err(e) => return assert!(e.line >= 1 && e.column >= 1 && !e.message.is_empty(), "{e:?}"),
    };
    for frame in &ldf.frames {
        assert!(frame.id <= 0x3F && (1..=8).contains(&frame.length), "{frame:?}");
        let _ = ldf.classic_checksum(frame);
    }
    for entry in ldf.schedule_tables.iter().flat_map(|t| &t.entries) {
        assert!(ldf.frame(&entry.frame).is_some() && entry.delay_us > 0, "{entry:?}");
    }
}

/// A DBC file read for a rest-bus simulation, every node simulated, as
/// `fieldhub rbs` and `[[rbs]]` read theirs: it loads or names its line,
/// what loads plans or says why not, and what plans is built into the
/// engine's jobs as the hub builds them (the first message's first signal
/// an alive counter, its last a checksum) and runs one cycle of each.
pub fn rbs(data: &[u8]) {
    use fieldhub_bus::cyclic::FrameProducer;
    use fieldhub_rbs::engine::{ChecksumSpec, CounterSpec, Setup, Simulation};

    let Ok(dbc) = fieldhub_rbs::load::load(data) else { return };
    let every_node = fieldhub_rbs::plan::NodeSelection::Except(Vec::new());
    if let Ok(planned) = fieldhub_rbs::plan::plan(&dbc, &every_node, Some(100)) {
        assert!(planned.iter().all(|m| m.payload.len() <= 64), "a planned payload fits a CAN FD frame");
    }
    let first = dbc.messages.first();
    let rule = |last: bool| {
        let message = first?;
        let signal = if last { message.signals.last() } else { message.signals.first() }?;
        Some((message.name.clone(), signal.name.clone()))
    };
    let counters = rule(false).map(|(message, signal)| CounterSpec { message, signal, min: None, max: None });
    let checksums = rule(true).map(|(message, signal)| ChecksumSpec {
        message,
        signal,
        algorithm: fieldhub_rbs::protect::Algorithm::Xor,
        data_id: Some(0x1234),
    });
    let setup = Setup {
        nodes: every_node,
        default_cycle_ms: Some(100),
        counters: counters.into_iter().collect(),
        checksums: checksums.into_iter().collect(),
    };
    let Ok(mut simulation) = Simulation::build(&dbc, &setup) else { return };
    for job in &mut simulation.jobs {
        if let Some(frame) = job.produce(0) {
            assert!(frame.data().len() <= 64, "a simulated frame fits a CAN FD frame");
        }
    }
}
