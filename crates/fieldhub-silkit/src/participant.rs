//! One SIL Kit participant with one CAN controller on one network: the
//! bridge's end in SIL Kit.
//!
//! Frames other participants send arrive on SIL Kit's own threads and are
//! handed, converted, to the [`FrameSink`] given at [`CanParticipant::join`];
//! the controller's own frames are never handed back (the handler is
//! registered for the receive direction only). [`CanParticipant::send`]
//! transmits a frame; SIL Kit copies it before the call returns.
//!
//! [`CanParticipant::join_synchronized`] joins SIL Kit's synchronised time
//! as well: each step is handed to a [`StepSink`] and lasts until
//! [`CanParticipant::complete_step`], so the caller decides when SIL Kit's
//! time goes on.

use std::ffi::{c_void, CString};
use std::panic::AssertUnwindSafe;
use std::ptr::{self, NonNull};
use std::sync::Arc;

use fieldhub_proto::frame::Frame;

use crate::convert::{from_silkit, to_silkit, ConvertError};
use crate::ffi;
use crate::library::SilKitLibrary;

/// SIL Kit's own log: warnings and errors to standard output, where a hub
/// started by hand shows them next to its own.
const PARTICIPANT_CONFIGURATION: &str = "Logging: {Sinks: [{Type: Stdout, Level: Warn}]}";

/// Called on a SIL Kit thread for every frame another participant sent, in
/// the order SIL Kit delivers them, with the event's timestamp (the
/// sender's simulation time when it is synchronised). It must not call
/// back into the participant; it may wait, which holds SIL Kit's reception
/// back.
pub type FrameSink = Box<dyn Fn(u64, Result<Frame, ConvertError>) + Send + Sync>;

/// Called on a SIL Kit thread when a step of synchronised time begins:
/// `(now, duration)` in nanoseconds since the simulation's start. The step
/// lasts until [`CanParticipant::complete_step`] is called from another
/// thread; SIL Kit's time waits for it.
pub type StepSink = Box<dyn Fn(u64, u64) + Send + Sync>;

/// How to join SIL Kit's synchronised time.
#[derive(Clone, Debug)]
pub struct SyncOptions {
    /// The participants the system waits for (its workflow configuration,
    /// which this participant sets), this one included.
    pub required_participants: Vec<String>,
    /// The step this participant asks for, in nanoseconds.
    pub step_ns: u64,
}

/// Where and as whom to join.
#[derive(Clone, Debug)]
pub struct JoinOptions {
    /// `silkit://host:port`.
    pub registry: String,
    /// The participant name, unique in the simulation.
    pub participant: String,
    /// The CAN network (SIL Kit's network name) the controller is on.
    pub network: String,
}

/// Why a SIL Kit call failed.
#[derive(Debug, thiserror::Error)]
pub enum SilKitError {
    #[error("the {what} '{text}' contains a NUL byte")]
    Nul { what: &'static str, text: String },
    #[error("{call} failed (SIL Kit return code {code}): {text}")]
    Call { call: &'static str, code: i32, text: String },
    #[error(transparent)]
    Convert(#[from] ConvertError),
}

/// A joined participant. Dropping it leaves the simulation: SIL Kit's
/// threads end before the drop returns, so no frame reaches the sink after.
pub struct CanParticipant {
    library: Arc<SilKitLibrary>,
    config: NonNull<ffi::ParticipantConfiguration>,
    participant: NonNull<ffi::Participant>,
    controller: NonNull<ffi::CanController>,
    /// The handler's context: a `Box<FrameSink>` turned into a raw pointer,
    /// freed after the participant.
    sink: NonNull<FrameSink>,
    /// With synchronised time: the lifecycle, the time-sync service and the
    /// step handler's context (a leaked `Box<StepSink>`, freed as `sink`).
    sync: Option<Synchronised>,
}

struct Synchronised {
    lifecycle: NonNull<ffi::LifecycleService>,
    time_sync: NonNull<ffi::TimeSyncService>,
    step: NonNull<StepSink>,
}

// SAFETY: the handles are SIL Kit objects, which SIL Kit lets any thread
// use (its own threads deliver while the user's threads send); the sink is
// `Send + Sync`. Not `Sync`: one thread at a time calls `send`.
unsafe impl Send for CanParticipant {}

impl CanParticipant {
    /// Create the participant (this connects to the registry and may take
    /// seconds when it is not there), its CAN controller on the network,
    /// register `sink` and start the controller.
    pub fn join(library: Arc<SilKitLibrary>, options: &JoinOptions, sink: FrameSink) -> Result<Self, SilKitError> {
        Self::join_with(library, options, sink, None)
    }

    /// [`join`](Self::join) in SIL Kit's synchronised time: a coordinated
    /// lifecycle (it runs when every required participant is there), the
    /// workflow's required participants set, and `step` called at every
    /// step of [`SyncOptions::step_ns`]. The lifecycle is started before
    /// this returns.
    pub fn join_synchronized(
        library: Arc<SilKitLibrary>,
        options: &JoinOptions,
        sync: &SyncOptions,
        sink: FrameSink,
        step: StepSink,
    ) -> Result<Self, SilKitError> {
        Self::join_with(library, options, sink, Some((sync, step)))
    }

    fn join_with(
        library: Arc<SilKitLibrary>,
        options: &JoinOptions,
        sink: FrameSink,
        sync: Option<(&SyncOptions, StepSink)>,
    ) -> Result<Self, SilKitError> {
        let api = *library.api();
        let network = c_text("network name", &options.network)?;
        let (config, participant) = create_participant(&library, &options.registry, &options.participant)?;
        let sink = NonNull::from(Box::leak(Box::new(sink)));
        // From here on, dropping `joined` undoes everything.
        let mut joined = Self { library, config, participant, controller: NonNull::dangling(), sink, sync: None };
        let mut controller = ptr::null_mut();
        // SAFETY: out-pointer valid, participant live, strings NUL-terminated.
        let code = unsafe {
            (api.controller_create)(&mut controller, participant.as_ptr(), network.as_ptr(), network.as_ptr())
        };
        joined.controller = checked(&joined.library, "SilKit_CanController_Create", code, controller)?;
        let mut handler = 0;
        // SAFETY: controller live; the context is the leaked sink, which
        // lives until after the participant is destroyed; `on_frame` has
        // the handler type's signature.
        let code = unsafe {
            (api.add_frame_handler)(
                joined.controller.as_ptr(),
                joined.sink.as_ptr().cast(),
                on_frame,
                ffi::DIRECTION_RECEIVE,
                &mut handler,
            )
        };
        joined.check("SilKit_CanController_AddFrameHandler", code)?;
        // SAFETY: controller live.
        let code = unsafe { (api.controller_start)(joined.controller.as_ptr()) };
        joined.check("SilKit_CanController_Start", code)?;
        if let Some((sync, step)) = sync {
            joined.synchronise(sync, step)?;
        }
        Ok(joined)
    }

    /// Create the coordinated lifecycle and time sync, set the workflow and
    /// the step handler, and start the lifecycle.
    fn synchronise(&mut self, sync: &SyncOptions, step: StepSink) -> Result<(), SilKitError> {
        let api = *self.library.api();
        let names = sync
            .required_participants
            .iter()
            .map(|name| c_text("participant name", name))
            .collect::<Result<Vec<_>, _>>()?;
        let lifecycle_config = ffi::LifecycleConfiguration {
            header: ffi::StructHeader { version: ffi::LIFECYCLE_CONFIGURATION_VERSION, reserved: [0; 3] },
            operation_mode: ffi::OPERATION_MODE_COORDINATED,
        };
        let mut lifecycle = ptr::null_mut();
        // SAFETY: out-pointer valid, participant live, configuration
        // initialised as `SilKit_Struct_Init` would and alive for the call.
        let code = unsafe { (api.lifecycle_create)(&mut lifecycle, self.participant.as_ptr(), &lifecycle_config) };
        let lifecycle = checked(&self.library, "SilKit_LifecycleService_Create", code, lifecycle)?;
        let mut time_sync = ptr::null_mut();
        // SAFETY: out-pointer valid, lifecycle live (owned by the participant).
        let code = unsafe { (api.time_sync_create)(&mut time_sync, lifecycle.as_ptr()) };
        let time_sync = checked(&self.library, "SilKit_TimeSyncService_Create", code, time_sync)?;
        let step = NonNull::from(Box::leak(Box::new(step)));
        // Recorded before anything can fail, so the drop frees the handler.
        self.sync = Some(Synchronised { lifecycle, time_sync, step });
        // SAFETY: service live; the context is the leaked step sink, freed
        // only after the participant is destroyed; `on_step` has the
        // handler type's signature.
        let code =
            unsafe { (api.set_step_handler_async)(time_sync.as_ptr(), step.as_ptr().cast(), on_step, sync.step_ns) };
        self.check("SilKit_TimeSyncService_SetSimulationStepHandlerAsync", code)?;
        let mut controller = ptr::null_mut();
        // SAFETY: out-pointer valid, participant live.
        let code = unsafe { (api.system_controller_create)(&mut controller, self.participant.as_ptr()) };
        let controller = checked(&self.library, "SilKit_Experimental_SystemController_Create", code, controller)?;
        let mut pointers: Vec<*mut std::ffi::c_char> = names.iter().map(|n| n.as_ptr().cast_mut()).collect();
        let mut list = ffi::StringList { num_strings: pointers.len(), strings: pointers.as_mut_ptr() };
        let workflow = ffi::WorkflowConfiguration {
            header: ffi::StructHeader { version: ffi::WORKFLOW_CONFIGURATION_VERSION, reserved: [0; 3] },
            required_participant_names: &mut list,
        };
        // SAFETY: controller live; the workflow, its list and the strings
        // it points to outlive the call (SIL Kit copies them; it does not
        // write through the `char**`).
        let code = unsafe { (api.set_workflow)(controller.as_ptr(), &workflow) };
        self.check("SilKit_Experimental_SystemController_SetWorkflowConfiguration", code)?;
        // SAFETY: lifecycle live; starting returns at once, the lifecycle
        // runs on SIL Kit's threads.
        let code = unsafe { (api.lifecycle_start)(lifecycle.as_ptr()) };
        self.check("SilKit_LifecycleService_StartLifecycle", code)
    }

    /// End the current step of synchronised time, which lets SIL Kit's time
    /// go on. Never from the step handler itself (SIL Kit's rule).
    pub fn complete_step(&self) -> Result<(), SilKitError> {
        let Some(sync) = &self.sync else { return Ok(()) };
        // SAFETY: the service is live while the participant is.
        let code = unsafe { (self.library.api().complete_step)(sync.time_sync.as_ptr()) };
        self.check("SilKit_TimeSyncService_CompleteSimulationStep", code)
    }

    /// Transmit `frame` on the network.
    pub fn send(&self, frame: &Frame) -> Result<(), SilKitError> {
        let mut silkit = to_silkit(frame)?;
        // SAFETY: the controller is live; the struct and the payload it
        // points to (inside `frame`) outlive the call, and SIL Kit copies
        // them before returning. No user context is passed.
        let code =
            unsafe { (self.library.api().send_frame)(self.controller.as_ptr(), silkit.raw_mut(), ptr::null_mut()) };
        self.check("SilKit_CanController_SendFrame", code)
    }

    fn check(&self, call: &'static str, code: ffi::ReturnCode) -> Result<(), SilKitError> {
        if code == ffi::SUCCESS {
            Ok(())
        } else {
            Err(SilKitError::Call { call, code, text: self.library.last_error() })
        }
    }
}

impl Drop for CanParticipant {
    fn drop(&mut self) {
        let api = self.library.api();
        if let Some(sync) = &self.sync {
            let reason = c"fieldhub bridge leaving";
            // SAFETY: lifecycle live. Stopping a lifecycle that is not
            // running fails harmlessly; the error is of no use when leaving.
            unsafe { (api.lifecycle_stop)(sync.lifecycle.as_ptr(), reason.as_ptr()) };
        }
        // SAFETY: the participant is live and destroyed once; destroying it
        // destroys its controller and stops the threads that call
        // `on_frame`, so the sink and the configuration are unused after.
        unsafe { (api.participant_destroy)(self.participant.as_ptr()) };
        // SAFETY: leaked in `join`, no longer referenced by SIL Kit.
        drop(unsafe { Box::from_raw(self.sink.as_ptr()) });
        if let Some(sync) = self.sync.take() {
            // SAFETY: leaked in `synchronise`; the participant that called
            // `on_step` with it is gone.
            drop(unsafe { Box::from_raw(sync.step.as_ptr()) });
        }
        // SAFETY: created in `join`, used by nothing since the participant went.
        unsafe { (api.config_destroy)(self.config.as_ptr()) };
    }
}

/// `text` as a C string, or the error naming `what` held a NUL byte.
pub(crate) fn c_text(what: &'static str, text: &str) -> Result<CString, SilKitError> {
    CString::new(text).map_err(|_| SilKitError::Nul { what, text: text.to_owned() })
}

/// Connect to the registry as participant `name`, with SIL Kit's own log
/// going to standard output. The caller destroys both, the participant
/// first.
pub(crate) fn create_participant(
    library: &SilKitLibrary,
    registry: &str,
    name: &str,
) -> Result<(NonNull<ffi::ParticipantConfiguration>, NonNull<ffi::Participant>), SilKitError> {
    let api = library.api();
    let registry = c_text("registry URI", registry)?;
    let name = c_text("participant name", name)?;
    let configuration = c_text("participant configuration", PARTICIPANT_CONFIGURATION)?;
    let mut config = ptr::null_mut();
    // SAFETY: `config` is a valid out-pointer, the text NUL-terminated.
    let code = unsafe { (api.config_from_string)(&mut config, configuration.as_ptr()) };
    let config = checked(library, "SilKit_ParticipantConfiguration_FromString", code, config)?;
    let mut participant = ptr::null_mut();
    // SAFETY: out-pointer valid; `config` was just created; the strings
    // are NUL-terminated and outlive the call.
    let code = unsafe { (api.participant_create)(&mut participant, config.as_ptr(), name.as_ptr(), registry.as_ptr()) };
    match checked(library, "SilKit_Participant_Create", code, participant) {
        Ok(participant) => Ok((config, participant)),
        Err(e) => {
            // SAFETY: created above and used by nothing else.
            unsafe { (api.config_destroy)(config.as_ptr()) };
            Err(e)
        }
    }
}

/// A created object, or the call's error with SIL Kit's text.
pub(crate) fn checked<T>(
    library: &SilKitLibrary,
    call: &'static str,
    code: ffi::ReturnCode,
    out: *mut T,
) -> Result<NonNull<T>, SilKitError> {
    match NonNull::new(out) {
        Some(created) if code == ffi::SUCCESS => Ok(created),
        _ => Err(SilKitError::Call { call, code, text: library.last_error() }),
    }
}

/// The frame handler SIL Kit calls on its threads. Nothing unwinds out of
/// it: a panic (which the sink should never raise) stops at
/// `catch_unwind`, after the process's panic hook has seen it.
unsafe extern "C" fn on_frame(context: *mut c_void, _: *mut ffi::CanController, event: *mut ffi::CanFrameEvent) {
    let _ = std::panic::catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: the context is the sink `join` registered, alive until
        // the participant is destroyed, which ends these calls first.
        let sink = unsafe { &*context.cast::<FrameSink>() };
        // SAFETY: SIL Kit passes an event valid for the call, or null.
        let Some(event) = (unsafe { event.as_ref() }) else { return };
        // SAFETY: as the event, the frame it points to.
        let Some(raw) = (unsafe { event.frame.as_ref() }) else { return };
        let payload: &[u8] = if raw.data.data.is_null() || raw.data.size == 0 {
            &[]
        } else {
            // SAFETY: SIL Kit's byte vector: `size` bytes at `data`, valid
            // for the call.
            unsafe { std::slice::from_raw_parts(raw.data.data, raw.data.size) }
        };
        sink(event.timestamp, from_silkit(raw, payload));
    }));
}

/// The step handler SIL Kit calls on its thread; as `on_frame`, nothing
/// unwinds out of it.
unsafe extern "C" fn on_step(context: *mut c_void, _: *mut ffi::TimeSyncService, now: u64, duration: u64) {
    let _ = std::panic::catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: the context is the step sink `synchronise` registered,
        // alive until the participant is destroyed, which ends these calls.
        let step = unsafe { &*context.cast::<StepSink>() };
        step(now, duration);
    }));
}
