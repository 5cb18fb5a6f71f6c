//! Clients spoken by hand, which say exactly what a test makes them say and
//! read only when the test reads: [`RawStream`] over TCP, [`RawShm`] over
//! shared memory (through the shm crate's types to speak the protocol, and
//! through [`RawMapping`]s of the same memory to break it).

use fieldhub_client::Frame;

use crate::hub::HubProcess;
use crate::wait::{deadline, wait_until, PATIENCE};

/// A stream client spoken by hand: it says exactly what a test makes it say
/// and reads only when the test reads.
pub struct RawStream {
    pub stream: std::net::TcpStream,
}

impl RawStream {
    /// Connect to the hub's TCP address.
    pub fn connect(hub: &HubProcess) -> Self {
        let stream = std::net::TcpStream::connect(hub.url.strip_prefix("tcp://").unwrap()).expect("connect");
        stream.set_read_timeout(Some(PATIENCE)).unwrap();
        Self { stream }
    }

    /// Connect with a receive buffer of about `bytes` set before the
    /// connection is made (so the advertised window stays small): a reader
    /// that stops reading backs the hub up after little data.
    pub fn connect_with_small_window(hub: &HubProcess, bytes: i32) -> Self {
        use std::os::fd::FromRawFd;
        let addr: std::net::SocketAddrV4 = hub.url.strip_prefix("tcp://").unwrap().parse().expect("IPv4 address");
        // SAFETY: plain system calls on a descriptor this function creates
        // and hands to `TcpStream`, which owns it from then on; the option
        // and address structures live on the stack for the calls.
        unsafe {
            let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
            assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
            let set = libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_RCVBUF,
                (&bytes as *const i32).cast(),
                std::mem::size_of::<i32>() as libc::socklen_t,
            );
            assert_eq!(set, 0, "SO_RCVBUF: {}", std::io::Error::last_os_error());
            let sa = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: addr.port().to_be(),
                sin_addr: libc::in_addr { s_addr: u32::from(*addr.ip()).to_be() },
                sin_zero: [0; 8],
            };
            let connected = libc::connect(
                fd,
                (&sa as *const libc::sockaddr_in).cast(),
                std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
            );
            assert_eq!(connected, 0, "connect: {}", std::io::Error::last_os_error());
            let stream = std::net::TcpStream::from_raw_fd(fd);
            stream.set_read_timeout(Some(PATIENCE)).unwrap();
            Self { stream }
        }
    }

    pub fn send(&mut self, message: &fieldhub_proto::wire::Message<'_>) {
        use std::io::Write;
        let mut bytes = Vec::new();
        fieldhub_proto::wire::encode(&mut bytes, message);
        self.stream.write_all(&bytes).expect("write to the hub");
    }

    /// HELLO, then WELCOME (panics on anything else); returns the client id.
    pub fn hello(&mut self, name: &str) -> u32 {
        use fieldhub_proto::wire::{self, Hello, Message};
        self.send(&Message::Hello(Hello {
            version: fieldhub_proto::limits::PROTOCOL_VERSION,
            name,

            options: Default::default(),
        }));
        let body = self.read_message().expect("the hub closed the connection instead of answering HELLO");
        match wire::decode(&body) {
            Ok(Message::Welcome(w)) => w.client_id,
            Ok(Message::Refuse(r)) => panic!("the hub refused the connection: {}", r.text),
            other => panic!("expected WELCOME, got {other:?}"),
        }
    }

    /// HELLO, and when the hub answers CHALLENGE, AUTH: the MAC under
    /// `token` (`None`: the answer of a client without one). Returns the
    /// hub's verdict (the body of its WELCOME, REFUSE or whatever it sent)
    /// and the AUTH sent, if the hub challenged.
    pub fn handshake_with(&mut self, name: &str, token: Option<&str>) -> (Vec<u8>, Option<fieldhub_proto::wire::Auth>) {
        use fieldhub_proto::wire::{self, Auth, Hello, Message};
        let hello = Hello { version: fieldhub_proto::limits::PROTOCOL_VERSION, name, options: Default::default() };
        self.send(&Message::Hello(hello));
        let body = self.read_message().expect("the hub closed the connection instead of answering HELLO");
        let Ok(Message::Challenge(challenge)) = wire::decode(&body) else { return (body, None) };
        let auth = match token {
            Some(token) => Auth { mac: fieldhub_proto::auth::auth_mac(token.as_bytes(), &challenge, &hello) },
            None => Auth::NO_TOKEN,
        };
        self.send(&Message::Auth(auth));
        (self.read_message().expect("the hub closed the connection instead of answering AUTH"), Some(auth))
    }

    /// OPEN_PORT and its PORT_OPENED (frames that come first are skipped).
    pub fn open_port(
        &mut self,
        channel: &str,
        options: fieldhub_proto::wire::PortOptions,
    ) -> fieldhub_proto::wire::PortOpened {
        use fieldhub_proto::wire::{self, Message, OpenPort};
        self.send(&Message::OpenPort(OpenPort { request: 1, options, channel, port_name: "" }));
        loop {
            let body = self.read_message().expect("the hub closed the connection instead of answering OPEN_PORT");
            match wire::decode(&body) {
                Ok(Message::PortOpened(opened)) => return opened,
                Ok(Message::Frames(_)) => {}
                other => panic!("expected PORT_OPENED, got {other:?}"),
            }
        }
    }

    /// One `FRAMES` message of `frames` from port `port`, as a client that
    /// checks nothing itself would send it.
    pub fn send_frames(&mut self, port: u16, frames: &[Frame]) {
        use std::io::Write;
        let mut bytes = Vec::new();
        let mut batch = fieldhub_proto::wire::BatchEncoder::begin(&mut bytes);
        for frame in frames {
            batch.push(&mut bytes, port, frame, &fieldhub_proto::FrameMeta::default());
        }
        batch.finish(&mut bytes);
        self.stream.write_all(&bytes).expect("write to the hub");
    }

    /// The next message body, or `None` once the hub has closed the stream.
    pub fn read_message(&mut self) -> Option<Vec<u8>> {
        use std::io::Read;
        let mut prefix = [0u8; 4];
        self.stream.read_exact(&mut prefix).ok()?;
        let mut body = vec![0u8; u32::from_le_bytes(prefix) as usize];
        self.stream.read_exact(&mut body).ok()?;
        Some(body)
    }
}

/// A read-write shared mapping of a whole file, for writing words the
/// protocol reserves to the other side (what a hostile client can do).
pub struct RawMapping {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain shared memory, accessed only through atomics.
unsafe impl Send for RawMapping {}
// SAFETY: as above.
unsafe impl Sync for RawMapping {}

impl RawMapping {
    /// Map all of `fd` (shared, read-write).
    pub fn map(fd: &std::os::fd::OwnedFd) -> Self {
        use std::os::fd::AsRawFd;
        let len = std::fs::File::from(fd.try_clone().unwrap()).metadata().unwrap().len() as usize;
        // SAFETY: a fresh mapping of a file we hold; the kernel picks the
        // address; the result is checked before use.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        assert_ne!(ptr, libc::MAP_FAILED, "mmap: {}", std::io::Error::last_os_error());
        Self { ptr: ptr.cast(), len }
    }

    /// The `u32` word at `offset` (4-aligned, inside the mapping).
    pub fn word(&self, offset: usize) -> &std::sync::atomic::AtomicU32 {
        assert!(offset % 4 == 0 && offset + 4 <= self.len);
        // SAFETY: in bounds and aligned (checked above; mappings are
        // page-aligned); the mapping lives as long as the borrow.
        unsafe { &*self.ptr.add(offset).cast::<std::sync::atomic::AtomicU32>() }
    }
}

impl Drop for RawMapping {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly what `map` mapped; no borrow outlives self.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// Offsets of the words in a client segment and the hub's bell segment
/// (`spec/shm.md` 2.1 and 2.2).
pub mod shm_words {
    pub const HUB_BELL_WORD: usize = 0x40;
    pub const HUB_BELL_ARMED: usize = 0x44;
    pub const TO_HUB_HEAD: usize = 0x0C0;
    pub const TO_HUB_TAIL: usize = 0x100;
    pub const TO_CLIENT_HEAD: usize = 0x140;
    pub const TO_CLIENT_TAIL: usize = 0x180;
}

/// A shared-memory client made by hand: the session handshake, then its
/// segment and the hub's bell both through the crate's types (to speak the
/// protocol) and as raw mappings (to break it).
pub struct RawShm {
    pub session: std::os::unix::net::UnixStream,
    pub segment: fieldhub_shm::ClientSegment,
    pub bell: fieldhub_shm::BellSegment,
    pub raw_segment: RawMapping,
    pub raw_bell: RawMapping,
    to_hub: fieldhub_shm::Producer,
    from_hub: fieldhub_shm::Consumer,
}

impl RawShm {
    /// Connect to the hub's session socket and complete the handshake.
    pub fn connect(hub: &HubProcess, name: &str) -> Self {
        use fieldhub_proto::wire::{self, Hello, Message};
        use std::io::Write;
        let shm_name = hub.shm_url.as_deref().expect("a hub serving shm").strip_prefix("shm://").unwrap();
        let path = fieldhub_shm::socket::socket_path(shm_name).unwrap();
        let mut session = std::os::unix::net::UnixStream::connect(path).expect("connect to the session socket");
        let mut hello = Vec::new();
        let version = fieldhub_proto::limits::PROTOCOL_VERSION;
        wire::encode(&mut hello, &Message::Hello(Hello { version, name, options: Default::default() }));
        session.write_all(&hello).unwrap();
        session.set_read_timeout(Some(PATIENCE)).unwrap();
        let (mut welcome, mut fds) = (vec![0u8; 256], Vec::new());
        let n = fieldhub_shm::socket::recv_with_fds(&session, &mut welcome, &mut fds).unwrap();
        assert!(n > 4, "the hub closed the session socket during the handshake");
        match wire::decode(&welcome[4..n]) {
            Ok(Message::Welcome(_)) => {}
            other => panic!("expected WELCOME, got {other:?}"),
        }
        assert_eq!(fds.len(), 2, "WELCOME carries the segment and the bell");
        let bell_fd = fds.pop().unwrap();
        let segment_fd = fds.pop().unwrap();
        let raw_segment = RawMapping::map(&segment_fd);
        let raw_bell = RawMapping::map(&bell_fd);
        Self {
            session,
            segment: fieldhub_shm::ClientSegment::open(segment_fd).unwrap(),
            bell: fieldhub_shm::BellSegment::open(bell_fd).unwrap(),
            raw_segment,
            raw_bell,
            to_hub: fieldhub_shm::Producer::starting_at(0),
            from_hub: fieldhub_shm::Consumer::starting_at(0),
        }
    }

    /// Publish one message in the to-hub ring and ring the hub's bell.
    pub fn send(&mut self, message: &fieldhub_proto::wire::Message<'_>) {
        let mut bytes = Vec::new();
        fieldhub_proto::wire::encode(&mut bytes, message);
        let (to_hub, segment) = (&mut self.to_hub, &self.segment);
        wait_until(deadline(), "the hub makes room in the to-hub ring", || {
            to_hub.try_push(&segment.to_hub(), &bytes).expect("to-hub ring")
        });
        self.bell.bell().ring();
    }

    /// The next message from the hub (polling the to-client ring).
    pub fn read_message(&mut self) -> Vec<u8> {
        let mut body = Vec::new();
        let limit = fieldhub_proto::limits::MAX_MESSAGE_LEN as usize;
        let (from_hub, segment) = (&mut self.from_hub, &self.segment);
        wait_until(deadline(), "a message from the hub", || {
            from_hub.pop(&segment.to_client(), limit, &mut body).expect("to-client ring")
        });
        body
    }

    /// OPEN_PORT through the ring and its PORT_OPENED.
    pub fn open_port(
        &mut self,
        channel: &str,
        options: fieldhub_proto::wire::PortOptions,
    ) -> fieldhub_proto::wire::PortOpened {
        use fieldhub_proto::wire::{self, Message, OpenPort};
        self.send(&Message::OpenPort(OpenPort { request: 1, options, channel, port_name: "" }));
        loop {
            let body = self.read_message();
            match wire::decode(&body) {
                Ok(Message::PortOpened(opened)) => return opened,
                Ok(Message::Frames(_)) => {}
                other => panic!("expected PORT_OPENED, got {other:?}"),
            }
        }
    }
}
