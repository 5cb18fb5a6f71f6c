//! The part of SIL Kit's stable C API (5.x) the bridge calls, declared by
//! hand from its public headers (`silkit/capi/Types.h`,
//! `InterfaceIdentifiers.h`, `Participant.h`, `SilKit.h`, `Can.h`,
//! `Orchestration.h`): no
//! bindings generator, no SIL Kit headers at build time. The headers pack
//! structs to 8 bytes, which for these fields is the natural C layout, so
//! `#[repr(C)]` matches; the tests pin every size and offset.
//!
//! On Linux `SilKitCALL` is empty: every function is `extern "C"`.

use std::ffi::{c_char, c_void};

/// `SilKit_ReturnCode`: 0 is success, anything else an error whose text
/// `SilKit_GetLastErrorString` gives (per calling thread).
pub type ReturnCode = i32;
/// `SilKit_ReturnCode_SUCCESS`.
pub const SUCCESS: ReturnCode = 0;

/// `SilKit_Direction`.
pub type Direction = u8;
/// `SilKit_Direction_Receive`: frames other participants sent. A handler
/// registered for it alone never sees the controller's own frames.
pub const DIRECTION_RECEIVE: Direction = 2;

/// `SilKit_HandlerId`.
pub type HandlerId = u64;

/// `SilKit_StructHeader`: the first member of every versioned struct.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct StructHeader {
    /// Encoded by `SK_ID_MAKE`: 'S', 'K', service, data type, version.
    pub version: u64,
    /// `_reserved[3]`, for future expansions; zero.
    pub reserved: [u64; 3],
}

/// `SK_ID_MAKE(service, datatype)` with the data type's version.
pub(crate) const fn struct_version(service: u64, datatype: u64, version: u64) -> u64 {
    (83 << 56) | (75 << 48) | (service << 40) | (datatype << 32) | (version << 24)
}

/// `SK_ID_SERVICE_Can`.
pub(crate) const SERVICE_CAN: u64 = 1;
/// `SilKit_CanFrame_STRUCT_VERSION` (data type 1, version 1).
pub const CAN_FRAME_VERSION: u64 = struct_version(SERVICE_CAN, 1, 1);

/// `SK_ID_SERVICE_Participant`: the lifecycle's and workflow's structs.
const SERVICE_PARTICIPANT: u64 = 7;
/// `SilKit_LifecycleConfiguration_STRUCT_VERSION` (data type 2, version 1).
pub const LIFECYCLE_CONFIGURATION_VERSION: u64 = struct_version(SERVICE_PARTICIPANT, 2, 1);
/// `SilKit_WorkflowConfiguration_STRUCT_VERSION` (data type 3, version 3).
pub const WORKFLOW_CONFIGURATION_VERSION: u64 = struct_version(SERVICE_PARTICIPANT, 3, 3);

/// `SilKit_NanosecondsTime`: simulation time, nanoseconds since its start.
pub type NanosecondsTime = u64;

/// `SilKit_OperationMode`.
pub type OperationMode = i8;
/// `SilKit_OperationMode_Coordinated`: the participant starts and stops
/// with the system, when every required participant is there.
pub const OPERATION_MODE_COORDINATED: OperationMode = 10;

/// `SilKit_ParticipantState`.
pub type ParticipantState = i16;

/// `SilKit_StringList`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct StringList {
    pub num_strings: usize,
    pub strings: *mut *mut c_char,
}

/// `SilKit_LifecycleConfiguration`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct LifecycleConfiguration {
    pub header: StructHeader,
    pub operation_mode: OperationMode,
}

/// `SilKit_WorkflowConfiguration`: the participants the system waits for.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct WorkflowConfiguration {
    pub header: StructHeader,
    pub required_participant_names: *mut StringList,
}

/// `SilKit_ByteVector`: bytes owned by whoever filled the struct.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ByteVector {
    pub data: *const u8,
    pub size: usize,
}

/// `SilKit_CanFrameFlag` bits of [`CanFrame::flags`].
pub mod flag {
    /// Identifier extension: a 29-bit identifier.
    pub const IDE: u32 = 1 << 9;
    /// Remote transmission request.
    pub const RTR: u32 = 1 << 4;
    /// FD format indicator.
    pub const FDF: u32 = 1 << 12;
    /// Bit rate switch (FD only).
    pub const BRS: u32 = 1 << 13;
    /// Error state indicator (FD only).
    pub const ESI: u32 = 1 << 14;
    /// XL format indicator (CAN XL, which fieldhub does not carry).
    pub const XLF: u32 = 1 << 15;
}

/// `SilKit_CanFrame`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct CanFrame {
    pub header: StructHeader,
    pub id: u32,
    /// [`flag`] bits.
    pub flags: u32,
    pub dlc: u16,
    /// SDU type (CAN XL only).
    pub sdt: u8,
    /// Virtual CAN network id (CAN XL only).
    pub vcid: u8,
    /// Acceptance field (CAN XL only).
    pub af: u32,
    pub data: ByteVector,
}

/// `SilKit_CanFrameEvent`: what a frame handler is given.
#[repr(C)]
#[derive(Debug)]
pub struct CanFrameEvent {
    pub header: StructHeader,
    /// `SilKit_NanosecondsTime`: reception time.
    pub timestamp: u64,
    pub frame: *mut CanFrame,
    pub direction: Direction,
    pub user_context: *mut c_void,
}

/// Opaque `SilKit_ParticipantConfiguration`.
#[repr(C)]
pub struct ParticipantConfiguration {
    _opaque: [u8; 0],
}

/// Opaque `SilKit_Participant`.
#[repr(C)]
pub struct Participant {
    _opaque: [u8; 0],
}

/// Opaque `SilKit_CanController`.
#[repr(C)]
pub struct CanController {
    _opaque: [u8; 0],
}

/// Opaque `SilKit_LifecycleService`.
#[repr(C)]
pub struct LifecycleService {
    _opaque: [u8; 0],
}

/// Opaque `SilKit_TimeSyncService`.
#[repr(C)]
pub struct TimeSyncService {
    _opaque: [u8; 0],
}

/// Opaque `SilKit_Experimental_SystemController`.
#[repr(C)]
pub struct SystemController {
    _opaque: [u8; 0],
}

/// `SilKit_CanFrameHandler_t`.
pub type CanFrameHandler =
    unsafe extern "C" fn(context: *mut c_void, controller: *mut CanController, event: *mut CanFrameEvent);

/// `SilKit_GetLastErrorString`.
pub type GetLastErrorString = unsafe extern "C" fn() -> *const c_char;
/// `SilKit_ParticipantConfiguration_FromString`.
pub type ParticipantConfigurationFromString =
    unsafe extern "C" fn(out: *mut *mut ParticipantConfiguration, text: *const c_char) -> ReturnCode;
/// `SilKit_ParticipantConfiguration_Destroy`.
pub type ParticipantConfigurationDestroy = unsafe extern "C" fn(config: *mut ParticipantConfiguration) -> ReturnCode;
/// `SilKit_Participant_Create`.
pub type ParticipantCreate = unsafe extern "C" fn(
    out: *mut *mut Participant,
    config: *mut ParticipantConfiguration,
    name: *const c_char,
    registry_uri: *const c_char,
) -> ReturnCode;
/// `SilKit_Participant_Destroy`.
pub type ParticipantDestroy = unsafe extern "C" fn(participant: *mut Participant) -> ReturnCode;
/// `SilKit_CanController_Create`.
pub type CanControllerCreate = unsafe extern "C" fn(
    out: *mut *mut CanController,
    participant: *mut Participant,
    name: *const c_char,
    network: *const c_char,
) -> ReturnCode;
/// `SilKit_CanController_AddFrameHandler`.
pub type CanControllerAddFrameHandler = unsafe extern "C" fn(
    controller: *mut CanController,
    context: *mut c_void,
    handler: CanFrameHandler,
    direction_mask: Direction,
    out: *mut HandlerId,
) -> ReturnCode;
/// `SilKit_CanController_Start`.
pub type CanControllerStart = unsafe extern "C" fn(controller: *mut CanController) -> ReturnCode;
/// `SilKit_CanController_SendFrame`.
pub type CanControllerSendFrame =
    unsafe extern "C" fn(controller: *mut CanController, frame: *mut CanFrame, user_context: *mut c_void) -> ReturnCode;

/// `SilKit_LifecycleService_Create`.
pub type LifecycleServiceCreate = unsafe extern "C" fn(
    out: *mut *mut LifecycleService,
    participant: *mut Participant,
    config: *const LifecycleConfiguration,
) -> ReturnCode;
/// `SilKit_LifecycleService_StartLifecycle`.
pub type LifecycleServiceStartLifecycle = unsafe extern "C" fn(service: *mut LifecycleService) -> ReturnCode;
/// `SilKit_LifecycleService_Stop`.
pub type LifecycleServiceStop =
    unsafe extern "C" fn(service: *mut LifecycleService, reason: *const c_char) -> ReturnCode;
/// `SilKit_LifecycleService_WaitForLifecycleToComplete`.
pub type LifecycleServiceWaitForLifecycleToComplete =
    unsafe extern "C" fn(service: *mut LifecycleService, out: *mut ParticipantState) -> ReturnCode;
/// `SilKit_TimeSyncService_Create`.
pub type TimeSyncServiceCreate =
    unsafe extern "C" fn(out: *mut *mut TimeSyncService, lifecycle: *mut LifecycleService) -> ReturnCode;
/// `SilKit_TimeSyncService_SimulationStepHandler_t`.
pub type SimulationStepHandler = unsafe extern "C" fn(
    context: *mut c_void,
    service: *mut TimeSyncService,
    now: NanosecondsTime,
    duration: NanosecondsTime,
);
/// `SilKit_TimeSyncService_SetSimulationStepHandlerAsync`: the step ends
/// when `SilKit_TimeSyncService_CompleteSimulationStep` is called (from
/// another thread), not when the handler returns.
pub type TimeSyncServiceSetSimulationStepHandlerAsync = unsafe extern "C" fn(
    service: *mut TimeSyncService,
    context: *mut c_void,
    handler: SimulationStepHandler,
    initial_step: NanosecondsTime,
) -> ReturnCode;
/// `SilKit_TimeSyncService_CompleteSimulationStep`.
pub type TimeSyncServiceCompleteSimulationStep = unsafe extern "C" fn(service: *mut TimeSyncService) -> ReturnCode;
/// `SilKit_Experimental_SystemController_Create`.
pub type SystemControllerCreate =
    unsafe extern "C" fn(out: *mut *mut SystemController, participant: *mut Participant) -> ReturnCode;
/// `SilKit_Experimental_SystemController_SetWorkflowConfiguration`.
pub type SystemControllerSetWorkflowConfiguration =
    unsafe extern "C" fn(controller: *mut SystemController, config: *const WorkflowConfiguration) -> ReturnCode;

#[cfg(test)]
mod tests {
    use std::mem::{offset_of, size_of};

    use super::*;

    #[test]
    fn struct_header_is_32_bytes() {
        assert_eq!(size_of::<StructHeader>(), 32);
        assert_eq!(offset_of!(StructHeader, version), 0);
        assert_eq!(offset_of!(StructHeader, reserved), 8);
    }

    #[test]
    fn byte_vector_is_a_pointer_and_a_size() {
        assert_eq!(size_of::<ByteVector>(), 16);
        assert_eq!((offset_of!(ByteVector, data), offset_of!(ByteVector, size)), (0, 8));
    }

    #[test]
    fn can_frame_is_64_bytes_laid_out_as_the_header_says() {
        assert_eq!(size_of::<CanFrame>(), 64);
        let offsets = [
            offset_of!(CanFrame, header),
            offset_of!(CanFrame, id),
            offset_of!(CanFrame, flags),
            offset_of!(CanFrame, dlc),
            offset_of!(CanFrame, sdt),
            offset_of!(CanFrame, vcid),
            offset_of!(CanFrame, af),
            offset_of!(CanFrame, data),
        ];
        assert_eq!(offsets, [0, 32, 36, 40, 42, 43, 44, 48]);
    }

    #[test]
    fn can_frame_event_is_laid_out_as_the_header_says() {
        assert_eq!(size_of::<CanFrameEvent>(), 64);
        let offsets = [
            offset_of!(CanFrameEvent, header),
            offset_of!(CanFrameEvent, timestamp),
            offset_of!(CanFrameEvent, frame),
            offset_of!(CanFrameEvent, direction),
            offset_of!(CanFrameEvent, user_context),
        ];
        assert_eq!(offsets, [0, 32, 40, 48, 56]);
    }

    /// The value `SilKit_Struct_Init(SilKit_CanFrame, f)` writes, as the
    /// peer program's header spells it out.
    #[test]
    fn can_frame_version_is_sk_can_frame_v1() {
        assert_eq!(CAN_FRAME_VERSION, (83 << 56) | (75 << 48) | (1 << 40) | (1 << 32) | (1 << 24));
        assert_eq!(CAN_FRAME_VERSION.to_be_bytes()[..5], [b'S', b'K', 1, 1, 1]);
    }

    #[test]
    fn lifecycle_and_workflow_structs_are_laid_out_as_the_header_says() {
        assert_eq!(size_of::<StringList>(), 16);
        assert_eq!((offset_of!(StringList, num_strings), offset_of!(StringList, strings)), (0, 8));
        // A header and an i8, padded to the header's 8-byte alignment.
        assert_eq!(size_of::<LifecycleConfiguration>(), 40);
        assert_eq!(offset_of!(LifecycleConfiguration, operation_mode), 32);
        assert_eq!(size_of::<WorkflowConfiguration>(), 40);
        assert_eq!(offset_of!(WorkflowConfiguration, required_participant_names), 32);
    }

    /// `SK_ID_MAKE(Participant, ...)`: service 7, data types 2 and 3,
    /// versions 1 and 3 (`InterfaceIdentifiers.h`).
    #[test]
    fn orchestration_struct_versions_are_sk_participant_ids() {
        assert_eq!(LIFECYCLE_CONFIGURATION_VERSION.to_be_bytes()[..5], [b'S', b'K', 7, 2, 1]);
        assert_eq!(WORKFLOW_CONFIGURATION_VERSION.to_be_bytes()[..5], [b'S', b'K', 7, 3, 3]);
        assert_eq!(OPERATION_MODE_COORDINATED, 10);
    }

    #[test]
    fn flags_are_the_header_bits() {
        assert_eq!(
            [flag::RTR, flag::IDE, flag::FDF, flag::BRS, flag::ESI, flag::XLF],
            [0x10, 0x200, 0x1000, 0x2000, 0x4000, 0x8000]
        );
    }
}
