//! libfieldhub: the fieldhub client (`fieldhub-client`) behind a C ABI, for
//! firmware built for the PC. The header `include/fieldhub.h` is generated
//! from this crate by cbindgen (`cbindgen.toml`) and committed; the test
//! `header_is_up_to_date` fails when it is stale (`FIELDHUB_BLESS=1` rewrites it).
//!
//! # Invariants
//!
//! - No panic crosses the boundary: every entry point runs its body inside
//!   `catch_unwind` and turns a panic into `FH_ERR_INTERNAL` with the panic's
//!   message as the client's last error. The `test-hooks` feature adds
//!   `fh_test_inject_panic` so the C tests can prove it.
//! - No global state: everything lives in the `fh_client` the caller holds.
//! - The data path (`fh_send`, `fh_recv`, including their timeouts) does not
//!   allocate: ports are looked up in a fixed table of lock-free slots, and a
//!   timeout records the code's static message in a buffer that is reused.
//! - `fh_client` is `Sync`; the thread rules in the header are about meaning
//!   (who gets which frame), not memory safety — except `fh_client_free`,
//!   which must not race with any other call on the same handle.

mod frame;
mod lin;
mod raw;
mod status;
mod time;
mod xl;

use std::ffi::{c_char, c_int, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use arc_swap::ArcSwapOption;
use fieldhub_client::{Client, ClientError, ClientOptions, Filter, Port, PortConfig, CAN_INV_FILTER};
use fieldhub_proto::limits::MAX_PORTS_PER_CLIENT;

pub use frame::*;
pub use lin::*;
pub use raw::*;
use status::fh_status::*;
pub use status::{fh_status, Failure};
pub use time::*;
pub use xl::*;

/// A client's handle for one of its ports (0..31), as `fh_port_open` returns it.
#[allow(non_camel_case_types)]
pub type fh_port = u16;

/// `fh_port_open` flag: receive this port's own frames back once they are on
/// the bus, marked `FH_META_ECHO` (SocketCAN `CAN_RAW_RECV_OWN_MSGS`).
pub const FH_PORT_RECEIVE_OWN: u32 = 0x1;
/// `fh_port_open` flag: when this port's receive queue in the hub is full,
/// hold the channel instead of dropping frames for this port.
pub const FH_PORT_BLOCK_ON_OVERFLOW: u32 = 0x2;
/// `fh_port_open` flag: take CAN FD frames (SocketCAN `CAN_RAW_FD_FRAMES`).
/// Without it the port receives no CAN FD frame, and `fh_send` refuses one
/// with `FH_ERR_INVALID_FRAME`; with it, CAN FD frames may be sent while
/// the channel carries them (`FH_STATUS_CHANNEL_FD` in `fh_port_status.flags`).
pub const FH_PORT_FD: u32 = 0x4;
/// `fh_port_open` flag: listen-only, like a controller in listen-only mode
/// (`ip link set can0 type can listen-only on`): the port receives but never
/// transmits or acknowledges; `fh_send` on it fails with
/// `FH_ERR_INVALID_FRAME`.
pub const FH_PORT_LISTEN_ONLY: u32 = 0x8;
/// `fh_port_open` flag: transmit-only — the port sends but receives nothing
/// (with `FH_PORT_RECEIVE_OWN`, only its own frames, as confirmations) and
/// does not acknowledge: for a sender that never reads, which would
/// otherwise have every frame of the channel queued for it. Not together
/// with `FH_PORT_LISTEN_ONLY`.
pub const FH_PORT_TRANSMIT_ONLY: u32 = 0x10;
/// `fh_connect_opts` flag: join the hub's virtual time as a synchronised
/// participant — bus time advances only once this client has finished its
/// step (`fh_step`). A hub in real time refuses the connection.
pub const FH_CONNECT_SYNCHRONIZED: u32 = 0x1;
/// `fh_connect_opts` flag, together with `FH_CONNECT_SYNCHRONIZED`: this
/// participant may step ahead — send frames for later bus times
/// (`fh_send_at`) and end many steps at once (`fh_step_ahead`). A hub that
/// does not know stepping ahead refuses the connection, naming it.
pub const FH_CONNECT_AHEAD: u32 = 0x2;
/// `fh_port_status.flags` bit: the port's channel carries CAN FD frames.
pub const FH_STATUS_CHANNEL_FD: u32 = 0x1;
/// Most filters one port takes (SocketCAN's `CAN_RAW_FILTER_MAX`).
pub const FH_MAX_FILTERS: usize = 512;

/// The state and counters of a port, filled by `fh_port_get_status`.
///
/// The struct grows at its end in later versions. Set `struct_size` to
/// `sizeof(fh_port_status)` before the call; the library fills at most that
/// many bytes and sets `struct_size` to the number it filled, so a program
/// built against an older header keeps working with a newer library and
/// can tell which fields a newer header's program got from an older library.
#[repr(C)]
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct fh_port_status {
    /// In: `sizeof(fh_port_status)`. Out: bytes filled.
    pub struct_size: u32,
    /// Hub-wide id of the port (`fh_meta.sender` of its frames).
    pub port_id: u32,
    /// Hub-wide id of the port's channel (`fh_meta.channel_id`).
    pub channel_id: u16,
    /// The port handle asked about.
    pub port: u16,
    /// `FH_STATUS_CHANNEL_FD` when the port's channel carries CAN FD
    /// frames; other bits are 0 in this version.
    pub flags: u32,
    /// Frames the hub dropped for this port because the program did not
    /// receive fast enough (receive overrun), since the port was opened.
    pub rx_dropped: u64,
}

/// One connection to a hub. Opaque; create with `fh_client_new`.
#[allow(non_camel_case_types)]
pub struct fh_client {
    client: OnceLock<Client>,
    /// Indexed by port handle. Lock-free to read, so `fh_send` takes no lock
    /// that `fh_port_open`/`fh_port_close` hold.
    ports: [ArcSwapOption<Port>; MAX_PORTS_PER_CLIENT],
    last_error: Mutex<String>,
    #[cfg(feature = "test-hooks")]
    panic_armed: std::sync::atomic::AtomicBool,
}

impl fh_client {
    fn new() -> Self {
        Self {
            client: OnceLock::new(),
            ports: std::array::from_fn(|_| ArcSwapOption::empty()),
            last_error: Mutex::new(String::new()),
            #[cfg(feature = "test-hooks")]
            panic_armed: std::sync::atomic::AtomicBool::new(false),
        }
    }

    fn connected(&self) -> Result<&Client, Failure> {
        self.client.get().ok_or(Failure::bare(FH_ERR_NOT_CONNECTED))
    }

    fn port(&self, handle: fh_port) -> Result<Arc<Port>, Failure> {
        self.ports
            .get(usize::from(handle))
            .and_then(|slot| slot.load_full())
            .ok_or_else(|| Failure::new(FH_ERR_PORT_NOT_OPEN, format!("port {handle} is not open on this client")))
    }

    /// Send on `port` with `send` (a send that may wait for room, or one
    /// for a later bus time): what `fh_send` and its kin share. A full send
    /// queue is `FH_ERR_TIMEOUT`.
    fn send_on(
        &self,
        port: fh_port,
        send: impl FnOnce(&Client, &Port) -> Result<(), ClientError>,
    ) -> Result<(), Failure> {
        let client = self.connected()?;
        let open = self.port(port)?;
        match send(client, &open) {
            Ok(()) => Ok(()),
            Err(ClientError::SendQueueFull(_)) => Err(Failure::bare(FH_ERR_TIMEOUT)),
            Err(e) => Err(e.into()),
        }
    }

    fn record(&self, failure: &Failure) {
        // A panic while this lock was held left a plain string behind; keep going.
        let mut last = self.last_error.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        last.clear();
        match &failure.detail {
            Some(detail) => last.push_str(detail),
            None => last.push_str(failure.status.message().to_str().unwrap_or_default()),
        }
    }
}

/// Run `body` for the client behind `client`, catching panics, recording a
/// failure's details as the last error and returning the status as `int`.
///
/// # Safety
/// `client` is NULL or a pointer from `fh_client_new` not yet freed.
unsafe fn with_client(client: *const fh_client, body: impl FnOnce(&fh_client) -> Result<(), Failure>) -> c_int {
    // SAFETY: the caller guarantees NULL or a live handle from fh_client_new.
    let Some(client) = (unsafe { client.as_ref() }) else {
        return FH_ERR_INVALID_ARGUMENT as c_int;
    };
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        #[cfg(feature = "test-hooks")]
        if client.panic_armed.swap(false, std::sync::atomic::Ordering::Relaxed) {
            panic!("panic injected by fh_test_inject_panic");
        }
        body(client)
    }));
    let failure = match outcome {
        Ok(Ok(())) => return FH_OK as c_int,
        Ok(Err(failure)) => failure,
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic without a message".into());
            Failure::new(FH_ERR_INTERNAL, format!("internal error in libfieldhub, caught before it could crash the program (please report it): {what}"))
        }
    };
    client.record(&failure);
    failure.status as c_int
}

/// A `&str` from a C string argument; `what` names it in the error.
///
/// # Safety
/// `text` is NULL or points to a NUL-terminated string.
unsafe fn text_arg<'a>(text: *const c_char, what: &str) -> Result<Option<&'a str>, Failure> {
    if text.is_null() {
        return Ok(None);
    }
    // SAFETY: non-NULL and NUL-terminated by the caller's contract.
    let text = unsafe { CStr::from_ptr(text) };
    text.to_str().map(Some).map_err(|_| Failure::invalid_argument(format!("{what} is not valid UTF-8")))
}

/// `None` (wait forever) for a negative timeout, else that many milliseconds.
fn timeout(ms: c_int) -> Option<Duration> {
    u64::try_from(ms).ok().map(Duration::from_millis)
}

/// The static message for a status code (any `int`; unknown values get a
/// message saying so). Never NULL; do not free.
#[no_mangle]
pub extern "C" fn fh_strerror(status: c_int) -> *const c_char {
    catch_unwind(|| status::message_ptr(status)).unwrap_or(status::UNKNOWN_CODE_MESSAGE.as_ptr())
}

/// A new, unconnected client handle (NULL only when out of memory). Connect
/// it with `fh_connect`; free it with `fh_client_free`.
#[no_mangle]
pub extern "C" fn fh_client_new() -> *mut fh_client {
    catch_unwind(|| Box::into_raw(Box::new(fh_client::new()))).unwrap_or(std::ptr::null_mut())
}

/// End the connection from any thread, also while other threads are blocked
/// in `fh_recv`, `fh_send`, `fh_flush` or `fh_port_open` on this handle:
/// frames already queued by `fh_send` are written first (for at most one
/// second), then every blocked call returns `FH_ERR_CLOSED`, and so does
/// every later call. The handle stays valid until `fh_client_free`, which
/// the program calls once no other thread uses it. Closing twice, or a
/// handle never connected, does nothing more.
///
/// Errors: `FH_ERR_INVALID_ARGUMENT` (NULL).
///
/// # Safety
/// `client` is NULL or a live handle from `fh_client_new`.
#[no_mangle]
pub unsafe extern "C" fn fh_close(client: *mut fh_client) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_client(client, |c| {
            if let Some(connected) = c.client.get() {
                connected.close();
            }
            Ok(())
        })
    }
}

/// Close the connection (frames queued by `fh_send` are written first, for
/// at most one second) and free the handle. NULL is ignored.
///
/// # Safety
/// `client` is NULL or a handle from `fh_client_new`, not used afterwards and
/// not in use by any other thread during the call.
#[no_mangle]
pub unsafe extern "C" fn fh_client_free(client: *mut fh_client) {
    if client.is_null() {
        return;
    }
    // SAFETY: the caller hands over a handle from fh_client_new (Box::into_raw)
    // that nothing else uses any more.
    let client = unsafe { Box::from_raw(client) };
    // A panic while closing leaves nothing to report it to; the memory is
    // released either way.
    let _ = catch_unwind(AssertUnwindSafe(move || drop(client)));
}

/// Connect `client` to the hub at `url` (`tcp://HOST:PORT`, `tls://HOST:PORT`,
/// `unix:PATH`, `shm://NAME`, `ivshmem://PATH` or `serial:PATH`; NULL: the default hub,
/// as the fieldhub tools pick it — `$FIELDHUB_HUB`, else `shm://default` when the local
/// hub serves it (TCP instead, with one line on stderr saying why, when its shared memory
/// cannot be used), else `tcp://127.0.0.1:29536`) and introduce it as `name` (NULL: "client"), with `token` if the hub needs one (NULL:
/// `$FIELDHUB_TOKEN`, else the file `$FIELDHUB_TOKEN_FILE` names, else none). Waits at most 5 seconds. A handle connects once; for a new
/// connection use a new handle.
///
/// `tls://` takes its settings from the environment: `$FIELDHUB_TLS_CA` (PEM CA
/// bundle to trust the hub's certificate with; else the system's),
/// `$FIELDHUB_TLS_CERT` and `$FIELDHUB_TLS_KEY` (this client's certificate, for a
/// hub with mutual TLS), `$FIELDHUB_TLS_SERVER_NAME` (the name the hub's
/// certificate holds, when not HOST).
///
/// Errors: `FH_ERR_INVALID_URL`, `FH_ERR_CONNECT` (no hub there, or a TLS hub
/// this client does not trust), `FH_ERR_REFUSED` (token, version, client
/// certificate), `FH_ERR_TIMEOUT`, `FH_ERR_INVALID_ARGUMENT` (also unusable
/// `FIELDHUB_TLS_*` files).
///
/// # Safety
/// `client` is a live handle; `url`, `name`, `token` are NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn fh_connect(
    client: *mut fh_client,
    url: *const c_char,
    name: *const c_char,
    token: *const c_char,
) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe { fh_connect_opts(client, url, name, token, 0) }
}

/// `fh_connect` with `flags`: `FH_CONNECT_SYNCHRONIZED` (with
/// `FH_CONNECT_AHEAD` or not), or 0 (then it is `fh_connect`). Other bits,
/// and `FH_CONNECT_AHEAD` alone, are `FH_ERR_INVALID_ARGUMENT`.
///
/// Errors: those of `fh_connect`; `FH_ERR_REFUSED` also when a synchronised
/// participant connects to a hub in real time.
///
/// # Safety
/// `client` is a live handle; `url`, `name`, `token` are NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn fh_connect_opts(
    client: *mut fh_client,
    url: *const c_char,
    name: *const c_char,
    token: *const c_char,
    flags: u32,
) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_client(client, |c| {
            if flags & !(FH_CONNECT_SYNCHRONIZED | FH_CONNECT_AHEAD) != 0 {
                return Err(Failure::invalid_argument(format!("unknown fh_connect_opts flags 0x{flags:x}")));
            }
            if flags & FH_CONNECT_AHEAD != 0 && flags & FH_CONNECT_SYNCHRONIZED == 0 {
                return Err(Failure::invalid_argument("FH_CONNECT_AHEAD needs FH_CONNECT_SYNCHRONIZED"));
            }
            let url = text_arg(url, "url")?;
            let mut options = ClientOptions {
                synchronized: flags & FH_CONNECT_SYNCHRONIZED != 0,
                ahead: flags & FH_CONNECT_AHEAD != 0,
                ..Default::default()
            };
            if let Some(name) = text_arg(name, "name")? {
                options.name = name.to_owned();
            }
            options.token = text_arg(token, "token")?.map(str::to_owned);
            if c.client.get().is_some() {
                return Err(Failure::invalid_argument("this client is already connected; use a new handle"));
            }
            let connected = match url {
                Some(url) => Client::connect_with(url, &options)?,
                None => fieldhub_client::connect_default(&options, |why| eprintln!("fieldhub: {why}"))?,
            };
            c.client
                .set(connected)
                .map_err(|_| Failure::invalid_argument("this client was connected by another thread meanwhile"))
        })
    }
}

/// Copy the details of the most recent failure on `client` (from any thread)
/// into `buffer` (NUL-terminated, truncated to `size` bytes) and return the
/// full length of the text, as `snprintf` does. Successful calls leave it
/// alone. `buffer` may be NULL when `size` is 0. A NULL client gives 0.
///
/// # Safety
/// `client` is NULL or a live handle; `buffer` has room for `size` bytes.
#[no_mangle]
pub unsafe extern "C" fn fh_last_error(client: *const fh_client, buffer: *mut c_char, size: usize) -> usize {
    // SAFETY: the caller guarantees NULL or a live handle.
    let Some(client) = (unsafe { client.as_ref() }) else {
        return 0;
    };
    catch_unwind(AssertUnwindSafe(|| {
        let last = client.last_error.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if !buffer.is_null() && size > 0 {
            let n = last.len().min(size - 1);
            // SAFETY: the caller guarantees `size` writable bytes at `buffer`;
            // n + 1 <= size, and a String never overlaps the caller's buffer.
            unsafe {
                std::ptr::copy_nonoverlapping(last.as_ptr(), buffer.cast::<u8>(), n);
                *buffer.add(n) = 0;
            }
        }
        last.len()
    }))
    .unwrap_or(0)
}

/// Open a port on `channel` and store its handle in `*port`. `name` is the
/// port's hub-wide name (NULL: the hub names it `<client>.<n>`); with a name
/// the hub's configuration wires, `channel` may be "". `flags`:
/// `FH_PORT_RECEIVE_OWN`, `FH_PORT_BLOCK_ON_OVERFLOW`, `FH_PORT_FD`,
/// `FH_PORT_LISTEN_ONLY`, `FH_PORT_TRANSMIT_ONLY`. A new port receives every
/// frame it takes (no filters; CAN FD frames only with `FH_PORT_FD`).
///
/// Errors: `FH_ERR_UNKNOWN_CHANNEL`, `FH_ERR_TOO_MANY_PORTS`,
/// `FH_ERR_PORT_NAME_TAKEN`, `FH_ERR_NOT_CONNECTED`, `FH_ERR_CLOSED`,
/// `FH_ERR_TIMEOUT`, `FH_ERR_INVALID_ARGUMENT`.
///
/// # Safety
/// `client` is a live handle; `channel` and `name` are NULL or
/// NUL-terminated; `port` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn fh_port_open(
    client: *mut fh_client,
    channel: *const c_char,
    name: *const c_char,
    flags: u32,
    port: *mut fh_port,
) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_client(client, |c| {
            let channel = text_arg(channel, "channel")?.ok_or_else(|| Failure::invalid_argument("channel is NULL"))?;
            let name = text_arg(name, "name")?;
            if port.is_null() {
                return Err(Failure::invalid_argument("port (the output) is NULL"));
            }
            let known = FH_PORT_RECEIVE_OWN
                | FH_PORT_BLOCK_ON_OVERFLOW
                | FH_PORT_FD
                | FH_PORT_LISTEN_ONLY
                | FH_PORT_TRANSMIT_ONLY;
            if flags & !known != 0 {
                return Err(Failure::invalid_argument(format!(
                    "unknown port flags 0x{:X} (known: FH_PORT_RECEIVE_OWN, FH_PORT_BLOCK_ON_OVERFLOW, FH_PORT_FD, \
                     FH_PORT_LISTEN_ONLY, FH_PORT_TRANSMIT_ONLY)",
                    flags & !known
                )));
            }
            let config = PortConfig {
                name: name.map(str::to_owned),
                receive_own: flags & FH_PORT_RECEIVE_OWN != 0,
                block_on_overflow: flags & FH_PORT_BLOCK_ON_OVERFLOW != 0,
                fd: flags & FH_PORT_FD != 0,
                listen_only: flags & FH_PORT_LISTEN_ONLY != 0,
                transmit_only: flags & FH_PORT_TRANSMIT_ONLY != 0,
            };
            let opened = c.connected()?.open_port_with(channel, &config)?;
            let handle = opened.handle;
            let slot = c.ports.get(usize::from(handle)).ok_or_else(|| {
                Failure::new(FH_ERR_PROTOCOL, format!("the hub gave port handle {handle}, beyond the 32 allowed"))
            })?;
            slot.store(Some(Arc::new(opened)));
            // SAFETY: checked non-NULL above; writable by the caller's contract.
            *port = handle;
            Ok(())
        })
    }
}

/// Close a port; frames still in flight for it are discarded. The handle
/// may be given out again by a later `fh_port_open`.
///
/// # Safety
/// `client` is a live handle.
#[no_mangle]
pub unsafe extern "C" fn fh_port_close(client: *mut fh_client, port: fh_port) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_client(client, |c| {
            let open = c.port(port)?;
            c.ports[usize::from(port)].store(None);
            c.connected()?.close_port(&open)?;
            Ok(())
        })
    }
}

/// Queue `frame` for sending on `port`, waiting at most `timeout_ms` for room
/// in the send queue (0: do not wait; negative: wait as long as it takes).
/// Returns when the frame is queued, not when it is on the bus (`fh_flush`
/// waits for that). The hub checks what only it can know (for example a CAN
/// FD frame on a classic channel) and reports it through `fh_flush`.
///
/// Errors: `FH_ERR_INVALID_FRAME` (checked here: id range, len, flags; the
/// last error says what), `FH_ERR_TIMEOUT` (queue full), `FH_ERR_PORT_NOT_OPEN`,
/// `FH_ERR_CLOSED`, `FH_ERR_NOT_CONNECTED`, `FH_ERR_INVALID_ARGUMENT`.
///
/// # Safety
/// `client` is a live handle; `frame` is NULL or points to an `fh_frame`.
#[no_mangle]
pub unsafe extern "C" fn fh_send(
    client: *mut fh_client,
    port: fh_port,
    frame: *const fh_frame,
    timeout_ms: c_int,
) -> c_int {
    // SAFETY: NULL or a valid fh_frame by the caller's contract.
    unsafe { send_built(client, port, || frame.as_ref().map(fh_frame::to_frame), timeout_ms) }
}

/// `fh_send`'s and `fh_send_xl`'s body: the frame `build` makes from the
/// caller's struct (`None`: the pointer was NULL), queued on `port`.
///
/// # Safety
/// `client` is a live handle.
pub(crate) unsafe fn send_built(
    client: *mut fh_client,
    port: fh_port,
    build: impl FnOnce() -> Option<Result<fieldhub_client::Frame, Failure>>,
    timeout_ms: c_int,
) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_client(client, |c| {
            let frame = build().ok_or_else(|| Failure::invalid_argument("frame is NULL"))??;
            c.send_on(port, |client, open| client.send_timeout(open, &frame, timeout(timeout_ms)))
        })
    }
}

/// Receive the next frame on any of the client's ports into `*frame`,
/// waiting at most `timeout_ms` (0: only take what is already there;
/// negative: wait as long as it takes). When `meta` is not NULL it receives
/// the frame's metadata, including the receiving port (`meta->port`).
///
/// Returns `FH_OK` with a frame, `FH_ERR_TIMEOUT` when none came in time,
/// `FH_ERR_CLOSED` once the connection has ended and every frame is taken.
///
/// # Safety
/// `client` is a live handle; `frame` and `meta` are NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn fh_recv(
    client: *mut fh_client,
    frame: *mut fh_frame,
    meta: *mut fh_meta,
    timeout_ms: c_int,
) -> c_int {
    // SAFETY: forwarded caller contract: `frame` NULL or writable.
    unsafe {
        recv_into(client, frame.is_null(), meta, timeout_ms, |received| {
            let out = fh_frame::from_frame(received).ok_or_else(|| {
                let instead = if received.is_raw() { "fh_recv_raw" } else { "fh_recv_xl" };
                Failure::invalid_argument(format!(
                    "received {received:?}, which fh_frame cannot hold: receive it with {instead}"
                ))
            })?;
            // SAFETY: checked non-NULL; writable by the caller's contract.
            *frame = out;
            Ok(())
        })
    }
}

/// `fh_recv`'s, `fh_recv_xl`'s and `fh_recv_raw`'s body: the next frame handed to `write`
/// (the output is NULL when `out_is_null`), its metadata into `*meta`.
///
/// # Safety
/// `client` is a live handle; `meta` is NULL or writable.
pub(crate) unsafe fn recv_into(
    client: *mut fh_client,
    out_is_null: bool,
    meta: *mut fh_meta,
    timeout_ms: c_int,
    write: impl FnOnce(&fieldhub_client::Frame) -> Result<(), Failure>,
) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_client(client, |c| {
            if out_is_null {
                return Err(Failure::invalid_argument("frame (the output) is NULL"));
            }
            let received = c.connected()?.recv(timeout(timeout_ms))?.ok_or(Failure::bare(FH_ERR_TIMEOUT))?;
            write(&received.frame)?;
            if let Some(meta) = meta.as_mut() {
                *meta = fh_meta::new(received.port, &received.frame, &received.meta);
            }
            Ok(())
        })
    }
}

/// Wait until every frame sent so far is on the bus (sequenced and handed to
/// every receiver) or reported off it, at most 5 seconds, and report the
/// first error the hub raised about this client's frames since the last
/// `fh_flush`: `FH_ERR_INVALID_FRAME` for a CAN FD frame sent on a classic
/// channel, `FH_ERR_DROPPED` for frames the hub dropped (a bus-off
/// controller, a fault rule, a lost federation owner, an unplugged port;
/// the last error says which port, how many and why). Each call reports one
/// error; call it again until `FH_OK` to hear of them all.
///
/// # Safety
/// `client` is a live handle.
#[no_mangle]
pub unsafe extern "C" fn fh_flush(client: *mut fh_client) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe { with_client(client, |c| c.connected()?.flush().map(drop).map_err(Failure::from)) }
}

/// Set the acceptance filters of `port`, replacing the previous ones, with
/// SocketCAN's `CAN_RAW_FILTER` semantics: a frame is received when any
/// filter passes it; `count` 0 receives nothing but error frames; the
/// single filter `{0, 0}` receives everything (the state of a new port).
/// A filter with `CAN_INV_FILTER` in `can_id` is inverted: it passes the
/// frames it does not match. Frames already received into the client's
/// queue are not filtered again.
///
/// Errors: `FH_ERR_INVALID_ARGUMENT` (NULL with `count` > 0, more than
/// `FH_MAX_FILTERS`), `FH_ERR_PORT_NOT_OPEN`, `FH_ERR_NOT_CONNECTED`.
///
/// # Safety
/// `client` is a live handle; `filters` points to `count` filters (may be
/// NULL when `count` is 0).
#[no_mangle]
pub unsafe extern "C" fn fh_set_filters(
    client: *mut fh_client,
    port: fh_port,
    filters: *const fh_filter,
    count: usize,
) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_client(client, |c| {
            if count > FH_MAX_FILTERS {
                return Err(Failure::invalid_argument(format!(
                    "{count} filters given, at most {FH_MAX_FILTERS} are allowed"
                )));
            }
            let given: &[fh_filter] = match count {
                0 => &[],
                _ if filters.is_null() => return Err(Failure::invalid_argument("filters is NULL but count is not 0")),
                // SAFETY: non-NULL, and `count` elements by the caller's contract.
                _ => std::slice::from_raw_parts(filters, count),
            };
            let client = c.connected()?;
            let open = c.port(port)?;
            let set: Vec<Filter> = given.iter().map(|f| Filter { can_id: f.can_id, can_mask: f.can_mask }).collect();
            // A plain filter comparing no bit passes every frame, so the set
            // is no filter at all.
            if set.iter().any(|f| !f.is_inverted() && f.can_mask & !CAN_INV_FILTER == 0) {
                client.set_filters(&open, None)?;
            } else {
                client.set_filters(&open, Some(&set))?;
            }
            Ok(())
        })
    }
}

/// Store in `*fd` a file descriptor that is readable while `fh_recv` has a
/// frame to give (or the connection has ended), for `poll`, `select` or
/// epoll in a firmware main loop. Never read, write or close it; call
/// `fh_recv` when it is readable. It stays valid until `fh_client_free`.
///
/// # Safety
/// `client` is a live handle; `fd` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn fh_fileno(client: *mut fh_client, fd: *mut c_int) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_client(client, |c| {
            let out = fd.as_mut().ok_or_else(|| Failure::invalid_argument("fd (the output) is NULL"))?;
            *out = c.connected()?.fileno()?;
            Ok(())
        })
    }
}

/// Fill `*status` with the state and counters of `port`. Set
/// `status->struct_size = sizeof *status` first (see `fh_port_status`).
///
/// # Safety
/// `client` is a live handle; `status` is NULL or points to at least
/// `status->struct_size` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn fh_port_get_status(
    client: *mut fh_client,
    port: fh_port,
    status: *mut fh_port_status,
) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_client(client, |c| {
            if status.is_null() {
                return Err(Failure::invalid_argument("status (the output) is NULL"));
            }
            // The caller's struct may be shorter than ours: read only its size field.
            let size = std::ptr::addr_of!((*status).struct_size).read_unaligned() as usize;
            if size < std::mem::size_of::<u32>() {
                return Err(Failure::invalid_argument("status->struct_size is not set (use sizeof(fh_port_status))"));
            }
            let client = c.connected()?;
            let open = c.port(port)?;
            let filled = size.min(std::mem::size_of::<fh_port_status>());
            let full = fh_port_status {
                struct_size: filled as u32,
                port_id: open.port_id,
                channel_id: open.channel_id,
                port,
                flags: if client.channel_fd(&open) { FH_STATUS_CHANNEL_FD } else { 0 },
                rx_dropped: client.rx_dropped(&open),
            };
            // SAFETY: `filled` is at most the caller's declared size and at
            // most our struct's size; the two never overlap.
            std::ptr::copy_nonoverlapping((&full as *const fh_port_status).cast::<u8>(), status.cast::<u8>(), filled);
            Ok(())
        })
    }
}

/// Test builds only (`FH_TEST_HOOKS`, cargo feature `test-hooks`): make the
/// next call on `client` panic inside the library, to prove the panic comes
/// back as `FH_ERR_INTERNAL` instead of crashing the program.
///
/// # Safety
/// `client` is a live handle.
#[cfg(feature = "test-hooks")]
#[no_mangle]
pub unsafe extern "C" fn fh_test_inject_panic(client: *mut fh_client) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_client(client, |c| {
            c.panic_armed.store(true, std::sync::atomic::Ordering::Relaxed);
            Ok(())
        })
    }
}
