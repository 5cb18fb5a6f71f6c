//! One SIL Kit participant with one CAN controller on one network: the
//! bridge's end in SIL Kit.
//!
//! Frames other participants send arrive on SIL Kit's own threads and are
//! handed, converted, to the [`FrameSink`] given at [`CanParticipant::join`];
//! the controller's own frames are never handed back (the handler is
//! registered for the receive direction only). [`CanParticipant::send`]
//! transmits a frame; SIL Kit copies it before the call returns.

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
/// the order SIL Kit delivers them. It must not call back into the
/// participant; it may wait, which holds SIL Kit's reception back.
pub type FrameSink = Box<dyn Fn(Result<Frame, ConvertError>) + Send + Sync>;

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
        let api = *library.api();
        let text = |what: &'static str, text: &str| {
            CString::new(text).map_err(|_| SilKitError::Nul { what, text: text.to_owned() })
        };
        let registry = text("registry URI", &options.registry)?;
        let name = text("participant name", &options.participant)?;
        let network = text("network name", &options.network)?;
        let configuration = text("participant configuration", PARTICIPANT_CONFIGURATION)?;

        let mut config = ptr::null_mut();
        // SAFETY: `config` is a valid out-pointer, the text NUL-terminated.
        let code = unsafe { (api.config_from_string)(&mut config, configuration.as_ptr()) };
        let config = checked(&library, "SilKit_ParticipantConfiguration_FromString", code, config)?;
        let mut participant = ptr::null_mut();
        // SAFETY: out-pointer valid; `config` was just created; the strings
        // are NUL-terminated and outlive the call.
        let code =
            unsafe { (api.participant_create)(&mut participant, config.as_ptr(), name.as_ptr(), registry.as_ptr()) };
        let participant = match checked(&library, "SilKit_Participant_Create", code, participant) {
            Ok(participant) => participant,
            Err(e) => {
                // SAFETY: created above and used by nothing else.
                unsafe { (api.config_destroy)(config.as_ptr()) };
                return Err(e);
            }
        };
        let sink = NonNull::from(Box::leak(Box::new(sink)));
        // From here on, dropping `joined` undoes everything.
        let mut joined = Self { library, config, participant, controller: NonNull::dangling(), sink };
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
        Ok(joined)
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
        // SAFETY: the participant is live and destroyed once; destroying it
        // destroys its controller and stops the threads that call
        // `on_frame`, so the sink and the configuration are unused after.
        unsafe { (api.participant_destroy)(self.participant.as_ptr()) };
        // SAFETY: leaked in `join`, no longer referenced by SIL Kit.
        drop(unsafe { Box::from_raw(self.sink.as_ptr()) });
        // SAFETY: created in `join`, used by nothing since the participant went.
        unsafe { (api.config_destroy)(self.config.as_ptr()) };
    }
}

/// A created object, or the call's error with SIL Kit's text.
fn checked<T>(
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
        sink(from_silkit(raw, payload));
    }));
}
