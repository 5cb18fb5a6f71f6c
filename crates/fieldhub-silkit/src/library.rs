//! Finding and opening `libSilKit.so` at run time.
//!
//! Looked for in this order: the file `FIELDHUB_SILKIT_LIB` names, then
//! `libSilKit.so` on the system's loader path (`LD_LIBRARY_PATH`, the
//! loader cache, the default directories). Every function the bridge calls
//! is resolved when the library opens, so a library too old or not SIL Kit
//! at all fails here, with its name, instead of at the first frame.

use std::ffi::CStr;
use std::path::PathBuf;

use crate::{ffi, netsim_ffi};

/// The environment variable that names the library file.
pub const LIBRARY_ENV: &str = "FIELDHUB_SILKIT_LIB";
/// The file name the system's loader is asked for.
pub const LIBRARY_NAME: &str = "libSilKit.so";

/// Why SIL Kit cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// No candidate could be opened; each attempt with its reason.
    #[error(
        "cannot load SIL Kit's C library ({}); install SIL Kit or point fieldhub at its library: \
         {LIBRARY_ENV}=/path/libSilKit.so (the silkit-py wheel ships one in SilKit_py/)",
        attempts.iter().map(|(place, why)| format!("{place}: {why}")).collect::<Vec<_>>().join("; ")
    )]
    NotFound { attempts: Vec<(String, String)> },
    /// The library opened but lacks a function of the C API.
    #[error("{path} is not SIL Kit's C library, or one older than 4.0: it has no {symbol} ({source})")]
    MissingSymbol { path: String, symbol: &'static str, source: libloading::Error },
}

/// The C API's functions, resolved from one open library.
#[derive(Clone, Copy)]
pub(crate) struct Api {
    pub last_error: ffi::GetLastErrorString,
    pub config_from_string: ffi::ParticipantConfigurationFromString,
    pub config_destroy: ffi::ParticipantConfigurationDestroy,
    pub participant_create: ffi::ParticipantCreate,
    pub participant_destroy: ffi::ParticipantDestroy,
    pub controller_create: ffi::CanControllerCreate,
    pub add_frame_handler: ffi::CanControllerAddFrameHandler,
    pub controller_start: ffi::CanControllerStart,
    pub send_frame: ffi::CanControllerSendFrame,
    pub lifecycle_create: ffi::LifecycleServiceCreate,
    pub lifecycle_start: ffi::LifecycleServiceStartLifecycle,
    pub lifecycle_stop: ffi::LifecycleServiceStop,
    pub time_sync_create: ffi::TimeSyncServiceCreate,
    pub set_step_handler_async: ffi::TimeSyncServiceSetSimulationStepHandlerAsync,
    pub complete_step: ffi::TimeSyncServiceCompleteSimulationStep,
    pub system_controller_create: ffi::SystemControllerCreate,
    pub set_workflow: ffi::SystemControllerSetWorkflowConfiguration,
    /// The experimental network simulator, when the library has it (4.0.50
    /// and later); only the simulator mode needs it.
    pub netsim: Option<NetSimApi>,
}

/// The network simulator's functions (`netsim_ffi`).
#[derive(Clone, Copy)]
pub(crate) struct NetSimApi {
    pub create: netsim_ffi::NetworkSimulatorCreate,
    pub simulate_network: netsim_ffi::NetworkSimulatorSimulateNetwork,
    pub start: netsim_ffi::NetworkSimulatorStart,
    pub produce: netsim_ffi::CanEventProducerProduce,
}

/// An open `libSilKit.so`. The functions it resolved stay valid while it
/// lives; whatever calls them holds it (participants keep an `Arc`).
pub struct SilKitLibrary {
    api: Api,
    origin: String,
    // Declared last: dropped after nothing can call into it any more.
    _library: libloading::Library,
}

impl SilKitLibrary {
    /// Open the library where [`LIBRARY_ENV`] says, else where the system's
    /// loader finds it.
    pub fn load() -> Result<Self, LoadError> {
        let mut attempts = Vec::new();
        if let Some(path) = std::env::var_os(LIBRARY_ENV).filter(|p| !p.is_empty()) {
            let path = PathBuf::from(path);
            let place = format!("{LIBRARY_ENV}={}", path.display());
            match open(path.as_os_str()) {
                Ok(library) => return Self::resolve(library, path.display().to_string()),
                Err(why) => attempts.push((place, why.to_string())),
            }
        } else {
            attempts.push((LIBRARY_ENV.to_owned(), "not set".to_owned()));
        }
        match open(LIBRARY_NAME.as_ref()) {
            Ok(library) => Self::resolve(library, format!("{LIBRARY_NAME} (system loader path)")),
            Err(why) => {
                attempts.push((format!("the system's loader path ({LIBRARY_NAME})"), why.to_string()));
                Err(LoadError::NotFound { attempts })
            }
        }
    }

    /// Where the library was found, for logs.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// Whether the library has the experimental network simulator API
    /// (SIL Kit 4.0.50 and later), which the simulator mode needs.
    pub fn has_network_simulator(&self) -> bool {
        self.api.netsim.is_some()
    }

    pub(crate) fn api(&self) -> &Api {
        &self.api
    }

    /// The calling thread's last SIL Kit error text.
    pub(crate) fn last_error(&self) -> String {
        // SAFETY: SilKit_GetLastErrorString takes nothing and returns a
        // pointer to a NUL-terminated thread-local string, or null.
        let text = unsafe { (self.api.last_error)() };
        if text.is_null() {
            return "no error text".to_owned();
        }
        // SAFETY: non-null, NUL-terminated, valid until this thread's next
        // SIL Kit call; copied out at once.
        unsafe { CStr::from_ptr(text) }.to_string_lossy().into_owned()
    }

    fn resolve(library: libloading::Library, origin: String) -> Result<Self, LoadError> {
        macro_rules! symbol {
            ($name:literal) => {{
                // SAFETY: the type each field is declared with is the
                // function's signature in SIL Kit's C headers (see `ffi`).
                match unsafe { library.get(concat!($name, "\0").as_bytes()) } {
                    Ok(f) => *f,
                    Err(source) => {
                        return Err(LoadError::MissingSymbol { path: origin, symbol: $name, source });
                    }
                }
            }};
        }
        let api = Api {
            last_error: symbol!("SilKit_GetLastErrorString"),
            config_from_string: symbol!("SilKit_ParticipantConfiguration_FromString"),
            config_destroy: symbol!("SilKit_ParticipantConfiguration_Destroy"),
            participant_create: symbol!("SilKit_Participant_Create"),
            participant_destroy: symbol!("SilKit_Participant_Destroy"),
            controller_create: symbol!("SilKit_CanController_Create"),
            add_frame_handler: symbol!("SilKit_CanController_AddFrameHandler"),
            controller_start: symbol!("SilKit_CanController_Start"),
            send_frame: symbol!("SilKit_CanController_SendFrame"),
            lifecycle_create: symbol!("SilKit_LifecycleService_Create"),
            lifecycle_start: symbol!("SilKit_LifecycleService_StartLifecycle"),
            lifecycle_stop: symbol!("SilKit_LifecycleService_Stop"),
            time_sync_create: symbol!("SilKit_TimeSyncService_Create"),
            set_step_handler_async: symbol!("SilKit_TimeSyncService_SetSimulationStepHandlerAsync"),
            complete_step: symbol!("SilKit_TimeSyncService_CompleteSimulationStep"),
            system_controller_create: symbol!("SilKit_Experimental_SystemController_Create"),
            set_workflow: symbol!("SilKit_Experimental_SystemController_SetWorkflowConfiguration"),
            netsim: Self::netsim(&library),
        };
        Ok(Self { api, origin, _library: library })
    }
}

impl SilKitLibrary {
    /// The network simulator's functions, or `None` when any is missing.
    fn netsim(library: &libloading::Library) -> Option<NetSimApi> {
        // SAFETY: each type is the function's signature in SIL Kit's C
        // headers (see `netsim_ffi`).
        unsafe {
            Some(NetSimApi {
                create: *library.get(b"SilKit_Experimental_NetworkSimulator_Create\0").ok()?,
                simulate_network: *library.get(b"SilKit_Experimental_NetworkSimulator_SimulateNetwork\0").ok()?,
                start: *library.get(b"SilKit_Experimental_NetworkSimulator_Start\0").ok()?,
                produce: *library.get(b"SilKit_Experimental_CanEventProducer_Produce\0").ok()?,
            })
        }
    }
}

fn open(name: &std::ffi::OsStr) -> Result<libloading::Library, libloading::Error> {
    // SAFETY: opening runs the library's initialisers. libSilKit.so's only
    // set up its own C++ runtime state; a file that is not SIL Kit is
    // rejected by `resolve` before any of its functions is called.
    unsafe { libloading::Library::new(name) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_library_names_every_place_looked_and_the_fix() {
        let error = LoadError::NotFound {
            attempts: vec![
                ("FIELDHUB_SILKIT_LIB=/nowhere/libSilKit.so".into(), "No such file".into()),
                ("the system's loader path (libSilKit.so)".into(), "not found".into()),
            ],
        };
        let text = error.to_string();
        for needle in ["/nowhere/libSilKit.so: No such file", "loader path", "FIELDHUB_SILKIT_LIB=/path/libSilKit.so"] {
            assert!(text.contains(needle), "{text}");
        }
    }
}
