//! SIL Kit's network simulator role for one CAN network: SIL Kit routes
//! every CAN controller's requests on that network here instead of
//! delivering frames itself, and shows its controllers only the events the
//! simulator produces.
//!
//! What SIL Kit calls arrives on its threads as [`SimulatorEvent`]s, in the
//! order SIL Kit delivers them, at the [`SimulatorSink`] given at
//! [`NetworkSimulator::start`]; the sink also gets the [`EventProducer`], so
//! it may answer at once (a full transmit queue). Everything the
//! controllers see — frames, transmit acknowledgements, controller and
//! error states — goes through the [`EventProducer`], from any thread.
//!
//! Invariants:
//! - SIL Kit keeps pointers to the function tables (statics here) and to
//!   the network's and each controller's context: those live until the
//!   participant is destroyed, which ends every call into them.
//! - Nothing unwinds across the C boundary: every callback catches panics.
//! - A request whose struct is not the version this code reads is refused
//!   (counted in [`NetworkSimulator::refused_requests`]), never misread.

use std::ffi::c_void;
use std::panic::AssertUnwindSafe;
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use fieldhub_proto::frame::Frame;

use crate::convert::{from_silkit, to_silkit, ConvertError};
use crate::ffi::{self, StructHeader};
use crate::library::SilKitLibrary;
use crate::netsim_ffi::{self as netsim, ControllerDescriptor};
use crate::participant::{c_text, checked, create_participant, SilKitError};

/// Where and as whom to simulate.
#[derive(Clone, Debug)]
pub struct SimulatorOptions {
    /// `silkit://host:port`.
    pub registry: String,
    /// The participant name, unique in the simulation.
    pub participant: String,
    /// The CAN network the participant simulates.
    pub network: String,
}

/// What SIL Kit asks of the simulated network.
#[derive(Debug)]
pub enum SimulatorEvent {
    /// A CAN controller on the network appeared; its requests follow.
    ControllerAdded(ControllerDescriptor),
    /// A controller left the simulation.
    ControllerRemoved(ControllerDescriptor),
    /// A controller asks to transmit a frame; `user_context` goes back in
    /// its transmit event.
    FrameRequest { controller: ControllerDescriptor, frame: Result<Frame, ConvertError>, user_context: usize },
    /// A controller asks for a mode: `state` is a `SilKit_CanControllerState`,
    /// `flags` the [`netsim::mode_flag`] bits.
    ControllerMode { controller: ControllerDescriptor, state: i32, flags: i32 },
    /// A controller's baud rates, in bit/s.
    Baudrate { controller: ControllerDescriptor, rate: u32, fd_rate: u32 },
}

/// Called on SIL Kit's threads for every request, in SIL Kit's order. It
/// must not block for long: SIL Kit's reception waits for it.
pub type SimulatorSink = Box<dyn Fn(&EventProducer, SimulatorEvent) + Send + Sync>;

/// A transmit acknowledgement's status (`SilKit_CanTransmitStatus`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransmitStatus {
    /// The frame was on the bus.
    Transmitted,
    /// The frame never went out (cancelled, or removed by the bus).
    Canceled,
    /// Refused at once: the controller's transmit queue was full.
    QueueFull,
}

/// Whether a frame event shows a controller its own frame or another's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    Send,
    Receive,
}

/// A controller's error state (`SilKit_CanErrorState`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorState {
    Active,
    Passive,
    BusOff,
}

/// Produces the events SIL Kit's controllers on the network see. Until SIL
/// Kit hands over its producer (when the first controller appears) there
/// is nobody to produce for, and producing is an error.
pub struct EventProducer {
    library: Arc<SilKitLibrary>,
    producer: AtomicPtr<netsim::CanEventProducer>,
}

impl EventProducer {
    /// `frame` on the bus at `timestamp` (ns), to `receivers`.
    pub fn frame(
        &self,
        frame: &Frame,
        timestamp: u64,
        direction: Direction,
        user_context: usize,
        receivers: &[ControllerDescriptor],
    ) -> Result<(), SilKitError> {
        let mut silkit = to_silkit(frame)?;
        let mut event = ffi::CanFrameEvent {
            header: header(netsim::CAN_FRAME_EVENT_VERSION),
            timestamp,
            frame: silkit.raw_mut(),
            direction: match direction {
                Direction::Send => netsim::DIRECTION_SEND,
                Direction::Receive => ffi::DIRECTION_RECEIVE,
            },
            user_context: user_context as *mut c_void,
        };
        self.produce(&mut event.header, receivers)
    }

    /// The acknowledgement of a frame `controller` asked to transmit.
    pub fn transmit_status(
        &self,
        controller: ControllerDescriptor,
        can_id: u32,
        status: TransmitStatus,
        timestamp: u64,
        user_context: usize,
    ) -> Result<(), SilKitError> {
        let mut event = netsim::CanFrameTransmitEvent {
            header: header(netsim::CAN_FRAME_TRANSMIT_EVENT_VERSION),
            user_context: user_context as *mut c_void,
            timestamp,
            status: match status {
                TransmitStatus::Transmitted => netsim::TRANSMIT_STATUS_TRANSMITTED,
                TransmitStatus::Canceled => netsim::TRANSMIT_STATUS_CANCELED,
                TransmitStatus::QueueFull => netsim::TRANSMIT_STATUS_TRANSMIT_QUEUE_FULL,
            },
            can_id,
        };
        self.produce(&mut event.header, &[controller])
    }

    /// `controller` is now in `state` (a `SilKit_CanControllerState`).
    pub fn controller_state(
        &self,
        controller: ControllerDescriptor,
        state: i32,
        timestamp: u64,
    ) -> Result<(), SilKitError> {
        let mut event =
            netsim::CanStateChangeEvent { header: header(netsim::CAN_STATE_CHANGE_EVENT_VERSION), timestamp, state };
        self.produce(&mut event.header, &[controller])
    }

    /// `controller`'s error state changed.
    pub fn error_state(
        &self,
        controller: ControllerDescriptor,
        state: ErrorState,
        timestamp: u64,
    ) -> Result<(), SilKitError> {
        let error_state = match state {
            ErrorState::Active => netsim::ERROR_STATE_ERROR_ACTIVE,
            ErrorState::Passive => netsim::ERROR_STATE_ERROR_PASSIVE,
            ErrorState::BusOff => netsim::ERROR_STATE_BUS_OFF,
        };
        let mut event = netsim::CanErrorStateChangeEvent {
            header: header(netsim::CAN_ERROR_STATE_CHANGE_EVENT_VERSION),
            timestamp,
            error_state,
        };
        self.produce(&mut event.header, &[controller])
    }

    fn produce(&self, event: &mut StructHeader, receivers: &[ControllerDescriptor]) -> Result<(), SilKitError> {
        let Some(api) = self.library.api().netsim else { return Err(no_simulator(&self.library)) };
        // SYNC POINT with the Release store in `set_event_producer`.
        let producer = self.producer.load(Ordering::Acquire);
        if producer.is_null() {
            return Err(SilKitError::Call {
                call: "SilKit_Experimental_CanEventProducer_Produce",
                code: -1,
                text: "SIL Kit has not handed over its event producer yet (no controller on the network)".into(),
            });
        }
        if receivers.is_empty() {
            return Ok(());
        }
        let list = netsim::EventReceivers {
            header: header(netsim::EVENT_RECEIVERS_VERSION),
            num_receivers: receivers.len(),
            controller_descriptors: receivers.as_ptr(),
        };
        // SAFETY: the producer is SIL Kit's, alive while the participant
        // is; the event struct starts with its header and is of the type its
        // version names, and it, its frame and payload, and the receivers
        // outlive the call (SIL Kit copies them).
        let code = unsafe { (api.produce)(producer, event, &list) };
        if code == ffi::SUCCESS {
            Ok(())
        } else {
            Err(SilKitError::Call {
                call: "SilKit_Experimental_CanEventProducer_Produce",
                code,
                text: self.library.last_error(),
            })
        }
    }
}

/// What SIL Kit gets as the simulated network's context.
struct Network {
    producer: Arc<EventProducer>,
    sink: SimulatorSink,
    /// Every controller context handed out, freed with the network. Boxed:
    /// SIL Kit holds each one's address, which must not move as this grows.
    #[allow(clippy::vec_box)]
    controllers: Mutex<Vec<Box<Controller>>>,
    refused: AtomicU64,
}

/// What SIL Kit gets as one controller's context.
struct Controller {
    descriptor: ControllerDescriptor,
    network: *const Network,
}

/// One simulated CAN network. Dropping it leaves the simulation: SIL Kit's
/// threads end before the drop returns, so the sink is not called after.
pub struct NetworkSimulator {
    library: Arc<SilKitLibrary>,
    config: NonNull<ffi::ParticipantConfiguration>,
    participant: NonNull<ffi::Participant>,
    network: NonNull<Network>,
}

// SAFETY: the handles are SIL Kit objects, which SIL Kit lets any thread
// use; the network context is only shared with SIL Kit's threads through
// `Sync` parts (the sink is `Sync`, the rest atomics and a mutex).
unsafe impl Send for NetworkSimulator {}

impl NetworkSimulator {
    /// Join the registry as a participant and simulate the CAN network:
    /// from now on SIL Kit routes its controllers' requests on it to
    /// `sink`. Connecting may take seconds when the registry is not there.
    pub fn start(
        library: Arc<SilKitLibrary>,
        options: &SimulatorOptions,
        sink: SimulatorSink,
    ) -> Result<Self, SilKitError> {
        let Some(api) = library.api().netsim else { return Err(no_simulator(&library)) };
        let network_name = c_text("network name", &options.network)?;
        let (config, participant) = create_participant(&library, &options.registry, &options.participant)?;
        let producer =
            Arc::new(EventProducer { library: Arc::clone(&library), producer: AtomicPtr::new(ptr::null_mut()) });
        let network = Network { producer, sink, controllers: Mutex::new(Vec::new()), refused: AtomicU64::new(0) };
        let network = NonNull::from(Box::leak(Box::new(network)));
        // From here on, dropping `simulator` undoes everything.
        let simulator = Self { library, config, participant, network };
        let mut handle = ptr::null_mut();
        // SAFETY: out-pointer valid, participant live.
        let code = unsafe { (api.create)(&mut handle, participant.as_ptr()) };
        let handle = checked(&simulator.library, "SilKit_Experimental_NetworkSimulator_Create", code, handle)?;
        // SAFETY: simulator live; the name is NUL-terminated (SIL Kit copies
        // it); the context lives until after the participant is destroyed;
        // the function table is a static.
        let code = unsafe {
            (api.simulate_network)(
                handle.as_ptr(),
                network_name.as_ptr(),
                netsim::NETWORK_TYPE_CAN,
                network.as_ptr().cast(),
                &NETWORK_FUNCTIONS,
            )
        };
        simulator.check("SilKit_Experimental_NetworkSimulator_SimulateNetwork", code)?;
        // SAFETY: simulator live; Start waits until every participant has
        // seen the simulator, then returns.
        let code = unsafe { (api.start)(handle.as_ptr()) };
        simulator.check("SilKit_Experimental_NetworkSimulator_Start", code)?;
        Ok(simulator)
    }

    /// The producer of the network's events.
    pub fn producer(&self) -> Arc<EventProducer> {
        // SAFETY: the network context lives as long as `self`.
        Arc::clone(&unsafe { self.network.as_ref() }.producer)
    }

    /// Requests SIL Kit handed over in a struct version this code does not
    /// read (never misread; counted).
    pub fn refused_requests(&self) -> u64 {
        // SAFETY: as in `producer`.
        unsafe { self.network.as_ref() }.refused.load(Ordering::Relaxed)
    }

    fn check(&self, call: &'static str, code: ffi::ReturnCode) -> Result<(), SilKitError> {
        if code == ffi::SUCCESS {
            Ok(())
        } else {
            Err(SilKitError::Call { call, code, text: self.library.last_error() })
        }
    }
}

impl Drop for NetworkSimulator {
    fn drop(&mut self) {
        let api = self.library.api();
        // SAFETY: the participant is live and destroyed once; that ends
        // SIL Kit's threads, so the network context is unused after.
        unsafe { (api.participant_destroy)(self.participant.as_ptr()) };
        // SAFETY: leaked in `start`, no longer referenced by SIL Kit.
        drop(unsafe { Box::from_raw(self.network.as_ptr()) });
        // SAFETY: created in `start`, used by nothing since the participant went.
        unsafe { (api.config_destroy)(self.config.as_ptr()) };
    }
}

fn no_simulator(library: &SilKitLibrary) -> SilKitError {
    SilKitError::Call {
        call: "SilKit_Experimental_NetworkSimulator_Create",
        code: -1,
        text: format!(
            "{} has no network simulator API (SIL Kit 4.0.50 or later has it); use SIL Kit 5",
            library.origin()
        ),
    }
}

fn header(version: u64) -> StructHeader {
    StructHeader { version, reserved: [0; 3] }
}

static NETWORK_FUNCTIONS: netsim::SimulatedNetworkFunctions = netsim::SimulatedNetworkFunctions {
    header: StructHeader { version: netsim::SIMULATED_NETWORK_FUNCTIONS_VERSION, reserved: [0; 3] },
    provide_simulated_controller,
    simulated_controller_removed,
    set_event_producer,
};

static CONTROLLER_FUNCTIONS: netsim::SimulatedCanControllerFunctions = netsim::SimulatedCanControllerFunctions {
    header: StructHeader { version: netsim::SIMULATED_CAN_CONTROLLER_FUNCTIONS_VERSION, reserved: [0; 3] },
    on_set_baudrate,
    on_frame_request,
    on_set_controller_mode,
};

/// Run `f` on the network behind a SIL Kit context, catching panics.
///
/// # Safety
/// `context` is the network context `start` registered (SIL Kit passes it
/// back unchanged, and calls only while the participant lives).
unsafe fn with_network(context: *mut c_void, f: impl FnOnce(&Network)) {
    let _ = std::panic::catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: per the function's contract.
        if let Some(network) = unsafe { context.cast::<Network>().as_ref() } {
            f(network);
        }
    }));
}

/// Run `f` on a controller context and its network, catching panics.
///
/// # Safety
/// `controller` is a context `provide_simulated_controller` handed out.
unsafe fn with_controller(controller: *mut c_void, f: impl FnOnce(&Network, ControllerDescriptor)) {
    let _ = std::panic::catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: per the contract, a live `Controller`, whose network
        // outlives it.
        let Some(controller) = (unsafe { controller.cast::<Controller>().as_ref() }) else { return };
        // SAFETY: as above.
        if let Some(network) = unsafe { controller.network.as_ref() } {
            f(network, controller.descriptor);
        }
    }));
}

unsafe extern "C" fn provide_simulated_controller(
    out_controller: *mut *mut c_void,
    out_functions: *mut *const c_void,
    descriptor: ControllerDescriptor,
    simulated_network: *mut c_void,
) {
    // SAFETY: SIL Kit passes back the network context of `start`.
    unsafe {
        with_network(simulated_network, |network| {
            let controller = Box::new(Controller { descriptor, network });
            let pointer: *const Controller = &*controller;
            network.controllers.lock().unwrap_or_else(|e| e.into_inner()).push(controller);
            // SAFETY: SIL Kit passes valid out-pointers; the context lives in
            // `controllers` until the network is freed, the table is static.
            *out_controller = pointer.cast_mut().cast();
            *out_functions = (&CONTROLLER_FUNCTIONS as *const netsim::SimulatedCanControllerFunctions).cast();
            (network.sink)(&network.producer, SimulatorEvent::ControllerAdded(descriptor));
        });
    }
}

unsafe extern "C" fn simulated_controller_removed(descriptor: ControllerDescriptor, simulated_network: *mut c_void) {
    // SAFETY: SIL Kit passes back the network context of `start`.
    unsafe {
        with_network(simulated_network, |network| {
            (network.sink)(&network.producer, SimulatorEvent::ControllerRemoved(descriptor));
        });
    }
}

unsafe extern "C" fn set_event_producer(event_producer: *mut c_void, simulated_network: *mut c_void) {
    // SAFETY: SIL Kit passes back the network context of `start`.
    unsafe {
        with_network(simulated_network, |network| {
            // SYNC POINT with the Acquire load in `EventProducer::produce`.
            network.producer.producer.store(event_producer.cast(), Ordering::Release);
        });
    }
}

unsafe extern "C" fn on_frame_request(controller: *mut c_void, request: *const netsim::CanFrameRequest) {
    // SAFETY: SIL Kit passes back a context of `provide_simulated_controller`.
    unsafe {
        with_controller(controller, |network, descriptor| {
            // SAFETY: SIL Kit passes a request valid for the call, or null.
            let Some(request) = request.as_ref() else { return };
            // SAFETY: as the request, the frame it points to.
            let raw = request.frame.as_ref();
            let (true, Some(raw)) = (netsim::is_netsim_struct(request.header.version, 9), raw) else {
                network.refused.fetch_add(1, Ordering::Relaxed);
                return;
            };
            let payload: &[u8] = if raw.data.data.is_null() || raw.data.size == 0 {
                &[]
            } else {
                // SAFETY: SIL Kit's byte vector: `size` bytes at `data`,
                // valid for the call.
                std::slice::from_raw_parts(raw.data.data, raw.data.size)
            };
            let event = SimulatorEvent::FrameRequest {
                controller: descriptor,
                frame: from_silkit(raw, payload),
                user_context: request.user_context as usize,
            };
            (network.sink)(&network.producer, event);
        });
    }
}

unsafe extern "C" fn on_set_controller_mode(controller: *mut c_void, mode: *const netsim::CanControllerMode) {
    // SAFETY: SIL Kit passes back a context of `provide_simulated_controller`.
    unsafe {
        with_controller(controller, |network, descriptor| {
            // SAFETY: SIL Kit passes a request valid for the call, or null.
            let Some(mode) = mode.as_ref() else { return };
            if !netsim::is_netsim_struct(mode.header.version, 8) {
                network.refused.fetch_add(1, Ordering::Relaxed);
                return;
            }
            let event = SimulatorEvent::ControllerMode { controller: descriptor, state: mode.state, flags: mode.flags };
            (network.sink)(&network.producer, event);
        });
    }
}

unsafe extern "C" fn on_set_baudrate(controller: *mut c_void, baudrate: *const netsim::CanConfigureBaudrate) {
    // SAFETY: SIL Kit passes back a context of `provide_simulated_controller`.
    unsafe {
        with_controller(controller, |network, descriptor| {
            // SAFETY: SIL Kit passes a request valid for the call, or null.
            let Some(baudrate) = baudrate.as_ref() else { return };
            if !netsim::is_netsim_struct(baudrate.header.version, 7) {
                network.refused.fetch_add(1, Ordering::Relaxed);
                return;
            }
            let event =
                SimulatorEvent::Baudrate { controller: descriptor, rate: baudrate.rate, fd_rate: baudrate.fd_rate };
            (network.sink)(&network.producer, event);
        });
    }
}
