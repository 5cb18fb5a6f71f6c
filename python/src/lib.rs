//! `fieldhub._native`: the Rust client and hub behind the Python package.
//!
//! Python code never speaks the wire protocol itself: it calls the same
//! client crate as every other binding. Every blocking call releases the GIL
//! while it waits, and waits in short slices (`SIGNAL_SLICE`) with Python's
//! signal handlers run between them, so Ctrl-C interrupts a `recv` or `send`
//! that would wait forever. A client may be closed from any thread while
//! others are blocked in it: they return with a `closed` error. Errors become `fieldhub._native.Error` with a `kind`
//! (`connect`, `refused`, `rejected`, `closed`, `timeout`, `invalid`) and the
//! client's full message; the Python layer maps them to python-can's errors.

mod exit;
mod lin;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use fieldhub_client::{Client, ClientError, ClientOptions, Filter, Frame, FrameFlags, Port, PortConfig, WakeFilter};
use fieldhub_hub::config::ListenAddr;
use fieldhub_hub::{Hub, HubConfig, TimeMode};
use fieldhub_proto::frame::{fd_len_to_dlc, FrameKind};
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

create_exception!(_native, Error, PyException, "A fieldhub client or hub error; `kind` says which.");

fn error(kind: &str, message: String) -> PyErr {
    Python::with_gil(|py| {
        let err = Error::new_err(message);
        let _ = err.value(py).setattr("kind", kind);
        err
    })
}

fn client_error(e: ClientError) -> PyErr {
    let kind = match &e {
        ClientError::InvalidUrl { .. } | ClientError::TokenFile(_) | ClientError::Unsupported { .. } => "invalid",
        // A setting that cannot be used is the caller's to fix; a failed
        // handshake is a connection that failed.
        ClientError::Tls { error, .. } if error.is_setting() => "invalid",
        ClientError::Tls { .. } => "connect",
        ClientError::FrameNotAllowed { .. } => "not_allowed",
        ClientError::Connect { .. } | ClientError::UntrustedHub { .. } => "connect",
        ClientError::Refused { .. } => "refused",
        ClientError::Rejected { .. }
        | ClientError::PortNotOpen(_)
        | ClientError::NotSynchronized
        | ClientError::NotAhead
        | ClientError::TooManyWakeFilters { .. }
        | ClientError::StepAheadRunning { .. }
        | ClientError::NoStepAhead
        | ClientError::StepNotForward { .. } => "rejected",
        ClientError::Closed { .. } | ClientError::Protocol(_) => "closed",
        ClientError::Timeout(_) | ClientError::SendQueueFull(_) | ClientError::RequestQueueFull(_) => "timeout",
        ClientError::Dropped { .. } => "dropped",
    };
    // The chain (e.g. "connection refused") belongs in the message.
    let mut message = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    error(kind, message)
}

/// Longest a blocking call waits without looking at Python's signal
/// handlers: Ctrl-C takes effect within about this long.
const SIGNAL_SLICE: Duration = Duration::from_millis(50);

/// Wait up to `timeout` (`None`: no limit) for `attempt` to give a value,
/// without the GIL, calling it with slices of at most [`SIGNAL_SLICE`] and
/// running Python's signal handlers between them (a `KeyboardInterrupt`
/// they raise ends the wait). `Ok(None)` when the timeout passes.
fn wait_in_slices<T: Send>(
    py: Python<'_>,
    timeout: Option<Duration>,
    attempt: impl Fn(Duration) -> Result<Option<T>, ClientError> + Sync,
) -> PyResult<Option<T>> {
    let deadline = timeout.map(|t| Instant::now() + t);
    loop {
        let slice = deadline.map_or(SIGNAL_SLICE, |d| d.saturating_duration_since(Instant::now()).min(SIGNAL_SLICE));
        if let Some(value) = exit::released(py, || attempt(slice)).map_err(client_error)? {
            return Ok(Some(value));
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Ok(None);
        }
        py.check_signals()?;
    }
}

/// Wait (Ctrl-C interrupts) for the grant of a step ahead whose wait an
/// earlier call gave up (`KeyboardInterrupt`): the hub never cancels a
/// step, so a participant's next step starts where that one ends.
fn finish_step_ahead(py: Python<'_>, client: &Client) -> PyResult<()> {
    if !client.step_ahead_running() {
        return Ok(());
    }
    let awaited = |slice| match client.await_step_ahead(Some(slice)) {
        // Another thread awaited it meanwhile: it is over all the same.
        Err(ClientError::NoStepAhead) => Ok(Some(0)),
        other => other,
    };
    wait_in_slices(py, None, awaited).map(drop)
}

/// A lock whose holder panicked leaves plain data behind; keep going.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn seconds(timeout: Option<f64>) -> PyResult<Option<Duration>> {
    match timeout {
        None => Ok(None),
        Some(t) if t.is_finite() && t >= 0.0 => Ok(Some(Duration::from_secs_f64(t))),
        Some(t) => Err(error("invalid", format!("timeout {t} is not a non-negative number of seconds"))),
    }
}

/// A received frame as a plain tuple, cheap to build and to unpack:
/// (port, kind, id, flags, len, data, timestamp_ns, seq, sender, channel_id, len8_dlc), with
/// the wire's flag bits (1 extended, 2 remote, 4 BRS, 8 ESI, 16 echo; LIN's
/// meanings of the low four: spec/protocol.md 4.2) and `len8_dlc` the record's
/// field of that name (a LIN frame's checksum byte).
/// (port, kind, id, flags, len, data, timestamp_ns, seq, sender, channel, len8_dlc, af).
type Received<'py> = (u16, &'static str, u32, u8, usize, Bound<'py, PyBytes>, u64, u64, u32, u16, u8, u32);

/// One connection to a hub.
///
/// Frozen, so every method borrows it shared: one thread may close it while
/// others are blocked in `recv` or `send` (a `&mut self` method would fail
/// there with "Already borrowed"). Each call takes its own reference to the
/// client and waits without holding any lock of this object.
#[pyclass(module = "fieldhub._native", frozen)]
struct NativeClient {
    /// `None` once closed.
    client: Mutex<Option<Arc<Client>>>,
    ports: Mutex<HashMap<u16, Port>>,
    /// The hub's URL: the one given, else the default the client reached.
    #[pyo3(get)]
    url: String,
    /// Given no URL: why `shm://default` could not be used and TCP was,
    /// one line (`fieldhub_client::connect_default`); `None` otherwise.
    #[pyo3(get)]
    fallback: Option<String>,
}

impl NativeClient {
    /// Queue `frame` on port `handle`, waiting at most `timeout` seconds
    /// (None: as long as it takes) for room, in slices (Ctrl-C works).
    fn send_frame(&self, py: Python<'_>, handle: u16, frame: &Frame, timeout: Option<f64>) -> PyResult<()> {
        let port = self.port(handle)?;
        let client = self.client()?;
        let timeout = seconds(timeout)?;
        let sent = wait_in_slices(py, timeout, |slice| match client.send_timeout(&port, frame, Some(slice)) {
            Ok(()) => Ok(Some(())),
            Err(ClientError::SendQueueFull(_)) => Ok(None),
            Err(e) => Err(e),
        })?;
        sent.ok_or_else(|| client_error(ClientError::SendQueueFull(timeout.unwrap_or_default())))
    }

    fn client(&self) -> PyResult<Arc<Client>> {
        lock(&self.client).clone().ok_or_else(|| error("closed", "the bus has been shut down".into()))
    }

    fn port(&self, handle: u16) -> PyResult<Port> {
        // A closed client has no ports: say why, not which.
        self.client()?;
        lock(&self.ports).get(&handle).cloned().ok_or_else(|| error("rejected", format!("port {handle} is not open")))
    }
}

#[pymethods]
impl NativeClient {
    #[new]
    /// `url`: `None` for the default hub, as the fieldhub tools pick it
    /// (then `fallback` says why it is TCP, if it is). `tls_*`: the TLS
    /// settings of a `tls://` URL (`None`: the environment's `FIELDHUB_TLS_*`).
    #[pyo3(signature = (url, name, token=None, timeout=5.0, synchronized=false, tls_ca=None, tls_cert=None,
                        tls_key=None, tls_server_name=None, ahead=false))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        url: Option<String>,
        name: String,
        token: Option<String>,
        timeout: f64,
        synchronized: bool,
        tls_ca: Option<std::path::PathBuf>,
        tls_cert: Option<std::path::PathBuf>,
        tls_key: Option<std::path::PathBuf>,
        tls_server_name: Option<String>,
        ahead: bool,
    ) -> PyResult<Self> {
        let timeout = seconds(Some(timeout))?.unwrap_or_default();
        let tls =
            fieldhub_client::tls::TlsOptions { ca: tls_ca, cert: tls_cert, key: tls_key, server_name: tls_server_name };
        let options = ClientOptions { name, token, timeout, synchronized, ahead, tls };
        let mut fallback = None;
        let (client, url) = exit::released(py, || match url {
            Some(url) => Client::connect_with(&url, &options).map(|client| (client, url)),
            None => fieldhub_client::connect_default_url(&options, |why| fallback = Some(why.to_owned())),
        })
        .map_err(client_error)?;
        Ok(Self { client: Mutex::new(Some(Arc::new(client))), ports: Mutex::new(HashMap::new()), url, fallback })
    }

    /// Open a port; returns (handle, channel_id, port_id).
    /// `fd`: take CAN FD frames; `listen_only`: never transmit or acknowledge;
    /// `transmit_only`: receive nothing but (with `receive_own`) its own frames.
    #[pyo3(signature = (channel, name=None, receive_own=false, block_on_overflow=false, fd=false, listen_only=false, transmit_only=false))]
    #[allow(clippy::too_many_arguments)]
    fn open_port(
        &self,
        py: Python<'_>,
        channel: String,
        name: Option<String>,
        receive_own: bool,
        block_on_overflow: bool,
        fd: bool,
        listen_only: bool,
        transmit_only: bool,
    ) -> PyResult<(u16, u16, u32, bool)> {
        let config = PortConfig { name, receive_own, block_on_overflow, fd, listen_only, transmit_only };
        let client = self.client()?;
        let port = exit::released(py, || client.open_port_with(&channel, &config)).map_err(client_error)?;
        let answer = (port.handle, port.channel_id, port.port_id, port.channel_fd);
        lock(&self.ports).insert(port.handle, port);
        Ok(answer)
    }

    fn close_port(&self, py: Python<'_>, handle: u16) -> PyResult<()> {
        let port = self.port(handle)?;
        let client = self.client()?;
        exit::released(py, || client.close_port(&port)).map_err(client_error)?;
        lock(&self.ports).remove(&handle);
        Ok(())
    }

    /// Send one frame. `kind` is "can", "canfd" or "error". `at_ns`: for
    /// that bus time of a later step (a participant that steps ahead; it
    /// never waits, so `timeout` does not apply).
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (handle, kind, id, extended, remote, brs, esi, dlc, data, timeout=None, at_ns=None))]
    fn send(
        &self,
        py: Python<'_>,
        handle: u16,
        kind: &str,
        id: u32,
        extended: bool,
        remote: bool,
        brs: bool,
        esi: bool,
        dlc: usize,
        data: &[u8],
        timeout: Option<f64>,
        at_ns: Option<u64>,
    ) -> PyResult<()> {
        let invalid = |e: fieldhub_proto::FrameError| error("invalid", e.to_string());
        let frame = match kind {
            "error" => {
                let mut bytes = [0u8; 8];
                let n = data.len().min(8);
                bytes[..n].copy_from_slice(&data[..n]);
                Frame::error(id, bytes).map_err(invalid)?
            }
            "canfd" => {
                let mut flags = FrameFlags::empty();
                for (set, flag) in [(extended, FrameFlags::EXTENDED), (brs, FrameFlags::BRS), (esi, FrameFlags::ESI)] {
                    if set {
                        flags = flags.union(flag);
                    }
                }
                if fd_len_to_dlc(data.len()).is_none() {
                    return Err(error(
                        "invalid",
                        format!("{} is not a valid CAN FD length (0..=8, 12, 16, 20, 24, 32, 48, 64)", data.len()),
                    ));
                }
                Frame::can_fd(id, flags, data).map_err(invalid)?
            }
            _ if remote => Frame::remote(id, extended, dlc).map_err(invalid)?,
            _ => {
                let mut frame = Frame::can(id, extended, data).map_err(invalid)?;
                if data.len() == 8 && dlc > 8 {
                    frame.set_len8_dlc(dlc as u8).map_err(invalid)?;
                }
                frame
            }
        };
        match at_ns {
            Some(at_ns) => self.client()?.send_at(&self.port(handle)?, &frame, at_ns).map_err(client_error),
            None => self.send_frame(py, handle, &frame, timeout),
        }
    }

    /// Send a CAN XL frame (spec/protocol.md 4.1.2): the 11-bit `priority`,
    /// `vcid`, `sdt`, the SEC and RRS bits, the acceptance field `af` and
    /// 1..=2048 data bytes.
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (handle, priority, vcid, sdt, sec, rrs, af, data, timeout=None))]
    fn send_xl(
        &self,
        py: Python<'_>,
        handle: u16,
        priority: u16,
        vcid: u8,
        sdt: u8,
        sec: bool,
        rrs: bool,
        af: u32,
        data: &[u8],
        timeout: Option<f64>,
    ) -> PyResult<()> {
        let mut flags = FrameFlags::empty();
        flags.set(FrameFlags::XL_SEC, sec);
        flags.set(FrameFlags::XL_RRS, rrs);
        let frame = Frame::can_xl(priority, vcid, sdt, flags, af, data).map_err(|e| error("invalid", e.to_string()))?;
        self.send_frame(py, handle, &frame, timeout)
    }

    /// Send a raw frame (spec/protocol.md 4.1.3): a 32-bit `id` and
    /// 0..=2048 data bytes, for a `protocol = "raw"` channel.
    #[pyo3(signature = (handle, id, data, timeout=None))]
    fn send_raw(&self, py: Python<'_>, handle: u16, id: u32, data: &[u8], timeout: Option<f64>) -> PyResult<()> {
        let frame = Frame::raw(id, data).map_err(|e| error("invalid", e.to_string()))?;
        self.send_frame(py, handle, &frame, timeout)
    }

    /// Send a LIN slave's frame (`lin.rs`): `form` "publish" (a one-shot
    /// response), "stand" (a standing response) or "withdraw" (its
    /// withdrawal, no data).
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (handle, form, id, data, classic=false, timeout=None))]
    fn send_lin(
        &self,
        py: Python<'_>,
        handle: u16,
        form: &str,
        id: u8,
        data: &[u8],
        classic: bool,
        timeout: Option<f64>,
    ) -> PyResult<()> {
        let frame = lin::lin_frame(form, id, data, classic)?;
        self.send_frame(py, handle, &frame, timeout)
    }

    /// The next frame, or None when `timeout` (seconds; None: forever) passes.
    #[pyo3(signature = (timeout=None))]
    fn recv<'py>(&self, py: Python<'py>, timeout: Option<f64>) -> PyResult<Option<Received<'py>>> {
        let client = self.client()?;
        let timeout = seconds(timeout)?;
        let Some(r) = wait_in_slices(py, timeout, |slice| client.recv(Some(slice)))? else {
            return Ok(None);
        };
        let f = r.frame;
        let kind = match f.kind() {
            FrameKind::Can => "can",
            FrameKind::CanFd => "canfd",
            FrameKind::Error => "error",
            FrameKind::Lin => "lin",
            FrameKind::CanXl => "canxl",
            FrameKind::Raw => "raw",
        };
        Ok(Some((
            r.port,
            kind,
            f.id(),
            f.flags().bits(),
            f.len(),
            PyBytes::new(py, f.data()),
            r.meta.timestamp_ns,
            r.meta.seq,
            r.meta.sender,
            r.meta.channel,
            f.len8_dlc(),
            f.acceptance_field(),
        )))
    }

    /// A file descriptor readable while frames are waiting.
    fn fileno(&self) -> PyResult<i32> {
        self.client()?.fileno().map_err(client_error)
    }

    /// Acceptance filters in SocketCAN form: [(can_id, can_mask)], or None for all.
    #[pyo3(signature = (handle, filters=None))]
    fn set_filters(&self, handle: u16, filters: Option<Vec<(u32, u32)>>) -> PyResult<()> {
        let filters: Option<Vec<Filter>> =
            filters.map(|list| list.into_iter().map(|(can_id, can_mask)| Filter { can_id, can_mask }).collect());
        self.client()?.set_filters(&self.port(handle)?, filters.as_deref()).map_err(client_error)
    }

    /// Wait until everything sent so far is on the bus; returns the round trip in seconds.
    fn flush(&self, py: Python<'_>) -> PyResult<f64> {
        let client = self.client()?;
        exit::released(py, || client.flush()).map(|d| d.as_secs_f64()).map_err(client_error)
    }

    /// Virtual time: the bus time (ns) this participant stands at; None for
    /// a client that is not a synchronised participant.
    fn now(&self) -> PyResult<Option<u64>> {
        Ok(self.client()?.now())
    }

    /// Virtual time: end this participant's step at bus time `until_ns` and
    /// wait (Ctrl-C interrupts) until bus time is there; returns it.
    fn step(&self, py: Python<'_>, until_ns: u64) -> PyResult<u64> {
        let client = self.client()?;
        exit::released(py, || client.begin_step(until_ns)).map_err(client_error)?;
        let reached = wait_in_slices(py, None, |slice| client.await_time(until_ns, Some(slice)))?;
        reached.ok_or_else(|| error("closed", "the wait for bus time ended without it".into()))
    }

    /// Virtual time, stepping ahead: end this participant's step as done
    /// up to `until_ns` in steps of `period_ns`, woken earlier only by a
    /// frame matching one of `filters` ((can_id, can_mask) in SocketCAN
    /// form; empty: any frame); waits (Ctrl-C interrupts) and returns the
    /// bus time granted. An interrupted step runs on at the hub
    /// (`finish_step_ahead` waits for its grant).
    fn step_ahead(&self, py: Python<'_>, until_ns: u64, period_ns: u64, filters: Vec<(u32, u32)>) -> PyResult<u64> {
        let client = self.client()?;
        let filters: Vec<WakeFilter> = filters.into_iter().map(|(can_id, mask)| WakeFilter { can_id, mask }).collect();
        exit::released(py, || client.begin_step_ahead(until_ns, period_ns, &filters)).map_err(client_error)?;
        let granted = wait_in_slices(py, None, |slice| client.await_step_ahead(Some(slice)))?;
        granted.ok_or_else(|| error("closed", "the wait for the step's grant ended without it".into()))
    }

    /// Wait (Ctrl-C interrupts) for the grant of a step ahead whose wait
    /// was interrupted; nothing when none runs.
    fn finish_step_ahead(&self, py: Python<'_>) -> PyResult<()> {
        let client = self.client()?;
        finish_step_ahead(py, &client)
    }

    /// The port's controller state from the hub: `active`, `passive` or `bus_off`.
    fn port_state(&self, py: Python<'_>, handle: u16) -> PyResult<String> {
        let port_id = self.port(handle)?.port_id;
        let client = self.client()?;
        let stats = exit::released(py, || client.stats()).map_err(client_error)?;
        stats
            .ports
            .into_iter()
            .find(|p| p.port_id == port_id)
            .map(|p| p.error_state)
            .ok_or_else(|| error("closed", format!("the hub no longer lists port {port_id}")))
    }

    /// The bitrates of the port's channel: (nominal, data phase), in bit/s.
    fn channel_bitrates(&self, py: Python<'_>, handle: u16) -> PyResult<(u32, u32)> {
        let port = self.port(handle)?;
        let client = self.client()?;
        let stats = exit::released(py, || client.stats()).map_err(client_error)?;
        let channel_id = stats.ports.iter().find(|p| p.port_id == port.port_id).map(|p| p.channel.clone());
        let channel = channel_id.unwrap_or_else(|| port.channel.clone());
        stats
            .channels
            .into_iter()
            .find(|c| c.name == channel)
            .map(|c| (c.bitrate, c.data_bitrate))
            .ok_or_else(|| error("closed", format!("the hub no longer lists channel '{channel}'")))
    }

    /// Frames the hub dropped for this port because it was not read fast enough.
    fn rx_dropped(&self, handle: u16) -> PyResult<u64> {
        Ok(self.client()?.rx_dropped(&self.port(handle)?))
    }

    /// Whether this participant's queue in the hub was full at its last
    /// step boundary (`ERROR tx_queue_full`): its channel carries less than
    /// it sends. Always false outside virtual time.
    fn tx_queue_full(&self) -> PyResult<bool> {
        Ok(self.client()?.tx_queue_full())
    }

    /// Disconnect, from any thread: calls blocked in other threads return
    /// with a `closed` error, and further calls raise one.
    fn close(&self, py: Python<'_>) {
        let client = lock(&self.client).take();
        if let Some(client) = client {
            // Whichever thread lets go of the client last joins its threads.
            exit::released(py, || {
                client.close();
                drop(client);
            });
        }
        lock(&self.ports).clear();
    }
}

/// Run a hub in this process until SIGINT or SIGTERM: what `python -m
/// fieldhub hub` does. Prints `listening on …` and `serving shared memory
/// as shm://NAME` lines to stderr first, for people. `shm` replaces the
/// configured shared-memory name; `no_shm` serves none. Once the hub is
/// started, `on_ready` (if given) is called with a dict of its actual
/// addresses, the same fields as the `fieldhub hub --ready-fd` line; if it
/// raises, the hub stops and the exception propagates. `recordings_dir`
/// replaces `[hub] recordings_dir`, where control-API recordings are written.
#[pyfunction]
#[pyo3(signature = (config_text=None, origin="configuration", listen=Vec::new(), token_file=None, shm=None, no_shm=false, on_ready=None, recordings_dir=None, time=None))]
#[allow(clippy::too_many_arguments)]
fn run_hub(
    py: Python<'_>,
    config_text: Option<String>,
    origin: &str,
    listen: Vec<String>,
    token_file: Option<std::path::PathBuf>,
    shm: Option<String>,
    no_shm: bool,
    on_ready: Option<PyObject>,
    recordings_dir: Option<std::path::PathBuf>,
    time: Option<&str>,
) -> PyResult<()> {
    let text = config_text.unwrap_or_else(|| fieldhub_hub::config::DEFAULT_CONFIG.to_owned());
    let mut config = HubConfig::parse(&text, origin).map_err(|e| error("invalid", e.to_string()))?;
    if !listen.is_empty() {
        config.hub.listen = listen;
    }
    // As `fieldhub hub`: the token file, else the environment, else the configuration's.
    let token = match token_file {
        Some(path) => {
            Some(fieldhub_client::token::read_token_file(&path).map_err(|e| error("invalid", e.to_string()))?)
        }
        None => fieldhub_client::token::token_from_environment().map_err(|e| error("invalid", e.to_string()))?,
    };
    if token.is_some() {
        config.hub.token = token;
    }
    if shm.is_some() || no_shm {
        config.hub.shm = shm;
    }
    if let Some(dir) = recordings_dir {
        config.hub.recordings_dir = dir;
    }
    config.hub.time = match time {
        None => config.hub.time,
        Some("real") => TimeMode::Real,
        Some("virtual") => TimeMode::Virtual,
        Some(other) => return Err(error("invalid", format!("time = {other:?}: \"real\" or \"virtual\""))),
    };
    config.validate(origin).map_err(|e| error("invalid", e.to_string()))?;
    // This process exists to run the hub: a panic on one of its threads ends
    // it loudly (exit 70) instead of leaving a hub that no longer answers.
    fieldhub_hub::fatal::exit_on_panic(None);
    use signal_hook::consts::{SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])
        .map_err(|e| error("invalid", format!("cannot watch for SIGINT/SIGTERM: {e}")))?;
    // A Ctrl-C that came before the watch above is pending in Python's own
    // handler, which runs only when this call returns: honour it now instead
    // of running a hub that signal will never stop.
    py.check_signals()?;
    py.allow_threads(|| -> PyResult<()> {
        let mut hub = Hub::start(config.clone()).map_err(|e| error("invalid", e.to_string()))?;
        for addr in hub.listen_addrs() {
            eprintln!("listening on {addr}");
        }
        if let Some(name) = &config.hub.shm {
            eprintln!("serving shared memory as shm://{name}");
        }
        if let Some(on_ready) = &on_ready {
            if let Err(e) = Python::with_gil(|py| on_ready.call1(py, (ready_dict(py, &hub, &config)?,))) {
                hub.shutdown();
                return Err(e);
            }
        }
        signals.forever().next();
        hub.shutdown();
        Ok(())
    })
}

/// A started hub's addresses for `run_hub`'s `on_ready`: the fields of the
/// `fieldhub hub --ready-fd` line (crates/fieldhub-cli/src/ready.rs), which
/// `fieldhub.Hub` reads.
fn ready_dict<'py>(py: Python<'py>, hub: &Hub, config: &HubConfig) -> PyResult<Bound<'py, PyDict>> {
    let (mut tcp, mut unix) = (Vec::new(), Vec::new());
    for addr in hub.listen_addrs() {
        match addr {
            ListenAddr::Tcp(addr) => tcp.push(addr.to_string()),
            ListenAddr::Unix(path) => unix.push(path.display().to_string()),
        }
    }
    let ready = PyDict::new(py);
    let tls = config.tls_files().is_some();
    let scheme = if tls { "https" } else { "http" };
    ready.set_item("http", tcp.first().map(|addr| format!("{scheme}://{addr}")))?;
    ready.set_item("tls", tls)?;
    ready.set_item("tcp", tcp)?;
    ready.set_item("unix", unix)?;
    ready.set_item("shm", hub.shm_socket().and(config.hub.shm.as_ref()).map(|name| format!("shm://{name}")))?;
    let ivshmem: Vec<String> = config.hub.ivshmem.iter().map(|path| path.display().to_string()).collect();
    ready.set_item("ivshmem", ivshmem)?;
    ready.set_item("channels", config.channels.iter().map(|c| c.name.as_str()).collect::<Vec<_>>())?;
    let cannelloni: Vec<String> = hub.cannelloni_addrs().iter().map(|a| a.to_string()).collect();
    ready.set_item("cannelloni", cannelloni)?;
    ready.set_item("pid", std::process::id())?;
    Ok(ready)
}

/// The hub a bus connects to without a `hub` argument: `$FIELDHUB_HUB`,
/// else the local hub over shared memory when it serves `shm://default`,
/// else `tcp://127.0.0.1:29536`.
#[pyfunction]
fn default_hub_url() -> String {
    fieldhub_client::default_hub_url()
}

/// Where the session socket of `shm://NAME` lives (for cleaning up after a
/// killed hub).
#[pyfunction]
fn shm_socket_path(name: &str) -> PyResult<String> {
    fieldhub_shm::socket::socket_path(name).map(|path| path.display().to_string()).map_err(|why| error("invalid", why))
}

/// Where the hub serving `shm://NAME` publishes its control API's URL.
#[pyfunction]
fn shm_control_path(name: &str) -> PyResult<String> {
    fieldhub_shm::socket::control_path(name).map(|path| path.display().to_string()).map_err(|why| error("invalid", why))
}

/// Run the `fieldhub` command (hub, dump, send, gen, stats, record,
/// replay, ctl, frame-bits, bench, bridge) with `argv` (the first is the
/// program's name), in this process, as the `fieldhub` binary would; the
/// `fieldhub` script the package installs. `this_command` starts the same
/// command again (the benchmarks start hubs and peers with it). Returns the
/// exit status; help and usage errors exit the process, as the binary does.
#[pyfunction]
fn run_cli(py: Python<'_>, argv: Vec<String>, this_command: Vec<String>) -> PyResult<u8> {
    let (exe, prefix) = this_command.split_first().ok_or_else(|| error("invalid", "this_command is empty".into()))?;
    let launcher = fieldhub_bench::Launcher { exe: exe.into(), prefix: prefix.iter().map(Into::into).collect() };
    Ok(py.allow_threads(|| fieldhub_cli::run(argv, launcher)))
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<NativeClient>()?;
    m.add_function(wrap_pyfunction!(run_hub, m)?)?;
    m.add_function(wrap_pyfunction!(run_cli, m)?)?;
    m.add("Error", m.py().get_type::<Error>())?;
    m.add_function(wrap_pyfunction!(default_hub_url, m)?)?;
    m.add_function(wrap_pyfunction!(shm_socket_path, m)?)?;
    m.add_function(wrap_pyfunction!(shm_control_path, m)?)?;
    m.add_function(wrap_pyfunction!(exit::begin_exit, m)?)?;
    m.add_function(wrap_pyfunction!(exit::calls_in_progress, m)?)?;
    Ok(())
}
