//! The stream link (`Link` over a byte stream): TCP, TLS over TCP
//! (`tls.rs`), a unix socket, or a serial device (`serial:PATH`, as a QEMU guest's virtio-serial port bound
//! to the hub's unix socket on the host).
//!
//! Sending queues frames for the writer thread ([`Link::tend`]), which packs
//! them into `FRAMES` messages — many frames per write under load, one at
//! once when idle. The link is not direct: the client's reader thread holds
//! the consumer token for the link's life and reads length-prefixed
//! messages ([`Link::take`], without a deadline) through the same buffered
//! reader that took `WELCOME`, so nothing the hub sent right after it is
//! lost. A message the consumer holds back (a lossless frame without room)
//! is kept in a buffer and handed over first on the next `take`. The
//! application's threads wait on a doorbell in private memory that the
//! reader rings.
//!
//! Invariant: the stream is written by one thread only (the handshake, then
//! the writer), so messages never interleave; a queue of at most
//! [`SEND_QUEUE`] frames bounds what waits in the client.

use std::io::{self, BufReader, Read, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use arc_swap::ArcSwapOption;
use crossbeam_channel::{Receiver, SendTimeoutError, Sender};
use fieldhub_proto::limits::MAX_MESSAGE_LEN;
use fieldhub_proto::stream::{MessageReader, ReadError};
use fieldhub_proto::wire::Packer;
use fieldhub_proto::{Frame, FrameMeta};
use fieldhub_shm::bell::LocalBell;

use crate::handshake::{handshake, Fault, Greeting, Session};
use crate::link::{Flow, Link, SendFail, Took};
use crate::local_stream::{connect_unix, SerialStream, UnixStream};
use crate::tls::TlsStream;
use crate::url::HubUrl;
use crate::{lock, spin, ClientError, ClientOptions, GOODBYE_GRACE, SEND_QUEUE};

/// The writer stops packing and writes once this many bytes are pending.
const WRITE_CHUNK: usize = 64 * 1024;

/// What waits in the send queue.
enum WriteItem {
    Frame {
        port: u16,
        frame: Frame,
        /// The bus time it is for (`AHEAD` participants; else 0).
        at_ns: u64,
    },
    /// An encoded message (control plane; allocation is fine).
    Message(Vec<u8>),
}

/// A connected stream link.
pub(crate) struct StreamLink {
    /// For shutting the stream down; the reader and the writer have clones.
    stream: Stream,
    /// Locked by the consumer-token holder (the reader thread) only.
    reader: Mutex<StreamReader>,
    /// What the application's threads wait on; rung by the reader.
    bell: LocalBell,
    /// The send queue; emptied by `close`, which lets the writer finish.
    to_writer: ArcSwapOption<Sender<WriteItem>>,
    /// Taken by the writer thread when it starts.
    writer: Mutex<Option<Writer>>,
    /// Disconnected once the writer has returned.
    written: Receiver<()>,
}

/// The receive side: the reader, and a message held back by the consumer.
struct StreamReader {
    messages: MessageReader<BufReader<Stream>>,
    /// The body of the message held back (`holding`); reused.
    held: Vec<u8>,
    holding: bool,
}

/// The writer thread's own: its stream handle, the queue's receiving end
/// (dropped on return, which fails senders at once) and `done`.
struct Writer {
    stream: Stream,
    queue: Receiver<WriteItem>,
    /// Dropped on return, which tells `close` the goodbye has been written.
    _done: Sender<()>,
}

impl StreamLink {
    /// Connect to `url` and perform the handshake.
    pub fn connect(url: &str, parsed: &HubUrl, options: &ClientOptions) -> Result<(Self, Session), ClientError> {
        let connect_error = |source| ClientError::Connect { url: url.into(), source };
        let deadline = Instant::now() + options.timeout;
        let mut stream = Stream::connect(parsed, options.timeout).map_err(|source| match (source.kind(), parsed) {
            // `local_stream` on a platform without unix sockets and serial devices (Windows).
            (io::ErrorKind::Unsupported, HubUrl::Unix(_)) => {
                ClientError::Unsupported { url: url.into(), what: "a unix socket (unix:)" }
            }
            (io::ErrorKind::Unsupported, HubUrl::Serial(_)) => {
                ClientError::Unsupported { url: url.into(), what: "a serial device (serial:)" }
            }
            _ => connect_error(source),
        })?;
        crate::hub_owner::check(url, &stream)?;
        if let (HubUrl::Tls { host, .. }, Stream::Tcp(tcp)) = (parsed, &stream) {
            let tcp = tcp.try_clone().map_err(connect_error)?;
            let tls = crate::tls::handshake(tcp, host, &options.tls, deadline)
                .map_err(|error| ClientError::Tls { url: url.into(), error: Box::new(error) })?;
            stream = Stream::Tls(tls);
        }
        let mut reader =
            MessageReader::new(BufReader::with_capacity(WRITE_CHUNK, stream.try_clone().map_err(connect_error)?));
        let session = handshake(url, options, deadline, &mut StreamGreeting::new(&mut stream, &mut reader))?;
        stream.set_read_timeout(None).map_err(connect_error)?;
        let (to_writer, queue) = crossbeam_channel::bounded(SEND_QUEUE);
        let (done, written) = crossbeam_channel::bounded(0);
        let writer = Writer { stream: stream.try_clone().map_err(connect_error)?, queue, _done: done };
        let link = Self {
            stream,
            reader: Mutex::new(StreamReader { messages: reader, held: Vec::new(), holding: false }),
            bell: LocalBell::default(),
            to_writer: ArcSwapOption::from_pointee(to_writer),
            writer: Mutex::new(Some(writer)),
            written,
        };
        Ok((link, session))
    }

    fn queue(&self, item: WriteItem, timeout: Option<Duration>) -> Result<(), SendFail> {
        let to_writer = self.to_writer.load();
        let Some(to_writer) = to_writer.as_deref() else {
            return Err(SendFail::Closed);
        };
        match timeout {
            None => to_writer.send(item).map_err(|_| SendFail::Closed),
            Some(t) => to_writer.send_timeout(item, t).map_err(|e| match e {
                SendTimeoutError::Timeout(_) => SendFail::Timeout,
                SendTimeoutError::Disconnected(_) => SendFail::Closed,
            }),
        }
    }
}

impl Link for StreamLink {
    fn send_frame(&self, port: u16, frame: &Frame, at_ns: u64, timeout: Option<Duration>) -> Result<(), SendFail> {
        self.queue(WriteItem::Frame { port, frame: frame.clone(), at_ns }, timeout)
    }

    fn send_message(&self, message: Vec<u8>, timeout: Option<Duration>) -> Result<(), SendFail> {
        self.queue(WriteItem::Message(message), timeout)
    }

    fn direct(&self) -> bool {
        false
    }

    /// Reads until `until()` holds or the stream ends; the deadline is
    /// ignored (the reader thread passes none: a blocking read cannot end
    /// half-way through a message).
    fn take(
        &self,
        _deadline: Option<Instant>,
        until: &dyn Fn() -> bool,
        deliver: &mut dyn FnMut(&[u8]) -> Flow,
    ) -> Took {
        let mut reader = lock(&self.reader);
        let StreamReader { messages, held, holding } = &mut *reader;
        loop {
            if until() {
                return Took::Until;
            }
            let flow = if *holding {
                match deliver(&held[..]) {
                    Flow::Hold => return Took::Held,
                    flow => {
                        *holding = false;
                        flow
                    }
                }
            } else {
                let body = match messages.read(MAX_MESSAGE_LEN) {
                    Ok(body) => body,
                    Err(ReadError::Closed) => return Took::Ended("the hub closed the connection".into()),
                    Err(e) => return Took::Ended(format!("connection to the hub lost: {e}")),
                };
                let flow = deliver(body);
                if matches!(flow, Flow::Hold) {
                    held.clear();
                    held.extend_from_slice(body);
                    *holding = true;
                    return Took::Held;
                }
                flow
            };
            if let Flow::Close(reason) = flow {
                return Took::Ended(reason);
            }
        }
    }

    fn wait(&self, deadline: Option<Instant>, ready: &dyn Fn() -> bool) -> bool {
        spin::wait(self.bell.bell(), spin::FOLLOWER_SPIN, deadline, ready)
    }

    fn notify(&self) {
        self.bell.bell().ring();
    }

    /// The writer: runs until the send queue is closed and drained, or a
    /// write fails.
    fn tend(&self) -> Option<String> {
        let writer = lock(&self.writer).take()?;
        writer.run().err().map(|e| format!("cannot write to the hub: {e}"))
    }

    fn close(&self) {
        // The writer exits once its queue is drained and closed.
        self.to_writer.store(None);
        // A hub that stopped reading must not hang the close, so the wait
        // is bounded; the shutdown then fails the writer's write.
        let _ = self.written.recv_timeout(GOODBYE_GRACE);
        self.stream.shutdown();
        // A reader waiting for room for a held message looks again.
        self.bell.bell().wake();
    }
}

impl Writer {
    fn run(mut self) -> io::Result<()> {
        let mut packer = Packer::new();
        while let Ok(first) = self.queue.recv() {
            let mut item = Some(first);
            while let Some(next) = item.take() {
                match next {
                    WriteItem::Frame { port, frame, at_ns } => {
                        packer.push_frame(port, &frame, &FrameMeta { timestamp_ns: at_ns, ..FrameMeta::default() })
                    }
                    WriteItem::Message(bytes) => packer.push_encoded(&bytes),
                }
                if packer.len() < WRITE_CHUNK {
                    item = self.queue.try_recv().ok();
                }
            }
            if !packer.is_empty() {
                self.stream.write_all(packer.finish())?;
                packer.clear();
            }
        }
        Ok(())
    }
}

/// The handshake over a stream: `HELLO` written, the answer read through
/// the reader the link keeps.
pub(crate) struct StreamGreeting<'a> {
    stream: &'a mut Stream,
    reader: &'a mut MessageReader<BufReader<Stream>>,
}

impl<'a> StreamGreeting<'a> {
    pub fn new(stream: &'a mut Stream, reader: &'a mut MessageReader<BufReader<Stream>>) -> Self {
        Self { stream, reader }
    }
}

impl Greeting for StreamGreeting<'_> {
    fn send_handshake(&mut self, message: &[u8]) -> Result<(), Fault> {
        self.stream.write_all(message).map_err(Fault::Io)
    }

    fn answer(&mut self, deadline: Instant) -> Result<&[u8], Fault> {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Fault::TimedOut);
        }
        self.stream.set_read_timeout(Some(left)).map_err(Fault::Io)?;
        self.reader.read(MAX_MESSAGE_LEN).map_err(|e| match e {
            ReadError::Io(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                Fault::TimedOut
            }
            ReadError::Io(e) => Fault::Io(e),
            ReadError::Closed => Fault::Closed,
            other => Fault::Garbled(other.to_string()),
        })
    }
}

/// The kernel send buffer of a stream connection. Set, so the kernel does not
/// grow it to megabytes: frames waiting there are frames the sender is ahead
/// of the bus by (`spec/protocol.md` 6.5a).
pub const SEND_BUFFER: usize = 16 * 1024;

/// A connected stream to a hub.
pub(crate) enum Stream {
    Tcp(TcpStream),
    /// `tls://`: made from a connected `Tcp` once its handshake is done.
    Tls(TlsStream),
    Unix(UnixStream),
    Serial(SerialStream),
}

impl Stream {
    /// Connect to `url`, giving up after `timeout`; `tls://` gives the
    /// TCP connection its TLS handshake is then performed on.
    pub fn connect(url: &HubUrl, timeout: Duration) -> io::Result<Self> {
        match url {
            HubUrl::Tcp { host, port } | HubUrl::Tls { host, port } => {
                let mut last = io::Error::new(io::ErrorKind::NotFound, format!("'{host}' resolves to no address"));
                for addr in (host.as_str(), *port).to_socket_addrs()? {
                    match TcpStream::connect_timeout(&addr, timeout) {
                        Ok(stream) => {
                            // Frames are packed by the writer; Nagle would only add delay.
                            stream.set_nodelay(true)?;
                            rustix::net::sockopt::set_socket_send_buffer_size(&stream, SEND_BUFFER)?;
                            return Ok(Self::Tcp(stream));
                        }
                        Err(e) => last = e,
                    }
                }
                Err(last)
            }
            HubUrl::Unix(path) => connect_unix(path, SEND_BUFFER).map(Self::Unix),
            HubUrl::Serial(path) => SerialStream::open(path).map(Self::Serial),
            HubUrl::Shm { .. } | HubUrl::Ivshmem(_) => {
                Err(io::Error::new(io::ErrorKind::InvalidInput, "shared memory is not a stream transport"))
            }
        }
    }

    /// A second handle to the same stream.
    pub fn try_clone(&self) -> io::Result<Self> {
        match self {
            Self::Tcp(s) => s.try_clone().map(Self::Tcp),
            Self::Tls(s) => s.try_clone().map(Self::Tls),
            Self::Unix(s) => s.try_clone().map(Self::Unix),
            Self::Serial(s) => s.try_clone().map(Self::Serial),
        }
    }

    /// Close both directions, waking a blocked reader.
    pub fn shutdown(&self) {
        let _ = match self {
            Self::Tcp(s) => s.shutdown(Shutdown::Both),
            Self::Tls(s) => s.tcp().shutdown(Shutdown::Both),
            Self::Unix(s) => s.shutdown(Shutdown::Both),
            Self::Serial(s) => {
                s.shutdown();
                Ok(())
            }
        };
    }

    /// Bound blocking reads (`None`: wait forever).
    pub fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        match self {
            Self::Tcp(s) => s.set_read_timeout(timeout),
            Self::Tls(s) => s.tcp().set_read_timeout(timeout),
            Self::Unix(s) => s.set_read_timeout(timeout),
            Self::Serial(s) => {
                s.set_read_timeout(timeout);
                Ok(())
            }
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Self::Tcp(s) => s.read(buf),
            Self::Tls(s) => s.read(buf),
            Self::Unix(s) => s.read(buf),
            Self::Serial(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Self::Tcp(s) => s.write(buf),
            Self::Tls(s) => s.write(buf),
            Self::Unix(s) => s.write(buf),
            Self::Serial(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Self::Tcp(s) => s.flush(),
            Self::Tls(s) => s.flush(),
            Self::Unix(s) => s.flush(),
            Self::Serial(s) => s.flush(),
        }
    }
}
