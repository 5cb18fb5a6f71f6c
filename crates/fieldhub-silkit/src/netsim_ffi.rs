//! SIL Kit's experimental network simulator C API (5.x), declared by hand
//! from its public headers (`silkit/capi/NetworkSimulator.h`,
//! `EventProducer.h`, `Can.h`): the CAN part only. A network simulator
//! receives every CAN controller's requests on the networks it simulates
//! and produces the events those controllers see.
//!
//! The struct versions of this API's own structs (service 8) are not in the
//! public `InterfaceIdentifiers.h` of the 5.0 headers; they were read from
//! `libSilKit.so` 5.0.3, which writes data types 7–9 into the requests it
//! hands over and checks data type 1 on the receivers list. Of the function
//! tables (data types 2 and 3 here) it checks only that they carry a valid
//! SIL Kit id. The tests pin every size and offset and every id.

use std::ffi::{c_char, c_void};

use crate::ffi::{struct_version, CanFrame, NanosecondsTime, ReturnCode, StructHeader, SERVICE_CAN};

/// `SK_ID_SERVICE` of the network simulator's structs.
const SERVICE_NETWORK_SIMULATION: u64 = 8;
/// `SilKit_Experimental_EventReceivers` (data type 1, version 1).
pub const EVENT_RECEIVERS_VERSION: u64 = struct_version(SERVICE_NETWORK_SIMULATION, 1, 1);
/// `SilKit_Experimental_SimulatedNetworkFunctions` (a valid id is all 5.0 checks).
pub const SIMULATED_NETWORK_FUNCTIONS_VERSION: u64 = struct_version(SERVICE_NETWORK_SIMULATION, 2, 1);
/// `SilKit_Experimental_SimulatedCanControllerFunctions`.
pub const SIMULATED_CAN_CONTROLLER_FUNCTIONS_VERSION: u64 = struct_version(SERVICE_NETWORK_SIMULATION, 3, 1);
/// `SilKit_Experimental_NetSim_CanConfigureBaudrate` as SIL Kit 5.0.3 writes it.
pub const CAN_CONFIGURE_BAUDRATE_VERSION: u64 = struct_version(SERVICE_NETWORK_SIMULATION, 7, 1);
/// `SilKit_Experimental_NetSim_CanControllerMode` as SIL Kit 5.0.3 writes it.
pub const CAN_CONTROLLER_MODE_VERSION: u64 = struct_version(SERVICE_NETWORK_SIMULATION, 8, 1);
/// `SilKit_Experimental_NetSim_CanFrameRequest` as SIL Kit 5.0.3 writes it.
pub const CAN_FRAME_REQUEST_VERSION: u64 = struct_version(SERVICE_NETWORK_SIMULATION, 9, 1);

/// `SilKit_CanFrameTransmitEvent_STRUCT_VERSION` (data type 2, version 2:
/// with `canId`).
pub const CAN_FRAME_TRANSMIT_EVENT_VERSION: u64 = struct_version(SERVICE_CAN, 2, 2);
/// `SilKit_CanFrameEvent_STRUCT_VERSION` (data type 3, version 1).
pub const CAN_FRAME_EVENT_VERSION: u64 = struct_version(SERVICE_CAN, 3, 1);
/// `SilKit_CanStateChangeEvent_STRUCT_VERSION` (data type 4, version 1).
pub const CAN_STATE_CHANGE_EVENT_VERSION: u64 = struct_version(SERVICE_CAN, 4, 1);
/// `SilKit_CanErrorStateChangeEvent_STRUCT_VERSION` (data type 5, version 1).
pub const CAN_ERROR_STATE_CHANGE_EVENT_VERSION: u64 = struct_version(SERVICE_CAN, 5, 1);

/// `SilKit_Experimental_SimulatedNetworkType`.
pub type SimulatedNetworkType = u32;
/// `SilKit_NetworkType_CAN`.
pub const NETWORK_TYPE_CAN: SimulatedNetworkType = 1;

/// `SilKit_Experimental_ControllerDescriptor`: which controller, unique in
/// the simulation; 0 is invalid.
pub type ControllerDescriptor = u64;

/// `SilKit_Direction_Send`: the event of a controller's own frame.
pub const DIRECTION_SEND: crate::ffi::Direction = 1;

/// `SilKit_CanTransmitStatus`.
pub type CanTransmitStatus = i32;
/// `SilKit_CanTransmitStatus_Transmitted`: the frame was on the bus.
pub const TRANSMIT_STATUS_TRANSMITTED: CanTransmitStatus = 1;
/// `SilKit_CanTransmitStatus_Canceled`: the frame never went out.
pub const TRANSMIT_STATUS_CANCELED: CanTransmitStatus = 2;
/// `SilKit_CanTransmitStatus_TransmitQueueFull`: refused, the controller's
/// transmit queue was full.
pub const TRANSMIT_STATUS_TRANSMIT_QUEUE_FULL: CanTransmitStatus = 4;

/// `SilKit_CanControllerState`.
pub type CanControllerState = i32;
pub const CONTROLLER_STATE_UNINIT: CanControllerState = 0;
pub const CONTROLLER_STATE_STOPPED: CanControllerState = 1;
pub const CONTROLLER_STATE_STARTED: CanControllerState = 2;
pub const CONTROLLER_STATE_SLEEP: CanControllerState = 3;

/// `SilKit_CanErrorState`.
pub type CanErrorState = i32;
pub const ERROR_STATE_NOT_AVAILABLE: CanErrorState = 0;
pub const ERROR_STATE_ERROR_ACTIVE: CanErrorState = 1;
pub const ERROR_STATE_ERROR_PASSIVE: CanErrorState = 2;
pub const ERROR_STATE_BUS_OFF: CanErrorState = 3;

/// `SilKit_Experimental_NetSim_CanControllerModeFlags` bits.
pub mod mode_flag {
    /// Reset the error counters to zero, the error state to active.
    pub const RESET_ERROR_HANDLING: i32 = 1 << 0;
    /// Cancel every transmit request still waiting.
    pub const CANCEL_TRANSMIT_REQUESTS: i32 = 1 << 1;
}

/// Opaque `SilKit_Experimental_NetworkSimulator`.
#[repr(C)]
pub struct NetworkSimulator {
    _opaque: [u8; 0],
}

/// Opaque `SilKit_Experimental_CanEventProducer` (what `SetEventProducer`
/// hands over as a `void*` on a CAN network).
#[repr(C)]
pub struct CanEventProducer {
    _opaque: [u8; 0],
}

/// `SilKit_Experimental_EventReceivers`.
#[repr(C)]
#[derive(Debug)]
pub struct EventReceivers {
    pub header: StructHeader,
    pub num_receivers: usize,
    pub controller_descriptors: *const ControllerDescriptor,
}

/// `SilKit_Experimental_SimulatedNetworkFunctions`: what SIL Kit calls on
/// the simulated network. SIL Kit keeps the pointer: the table must outlive
/// the simulator.
#[repr(C)]
pub struct SimulatedNetworkFunctions {
    pub header: StructHeader,
    pub provide_simulated_controller: unsafe extern "C" fn(
        out_controller: *mut *mut c_void,
        out_functions: *mut *const c_void,
        descriptor: ControllerDescriptor,
        simulated_network: *mut c_void,
    ),
    pub simulated_controller_removed:
        unsafe extern "C" fn(descriptor: ControllerDescriptor, simulated_network: *mut c_void),
    pub set_event_producer: unsafe extern "C" fn(event_producer: *mut c_void, simulated_network: *mut c_void),
}

/// `SilKit_Experimental_NetSim_CanFrameRequest`.
#[repr(C)]
#[derive(Debug)]
pub struct CanFrameRequest {
    pub header: StructHeader,
    pub frame: *mut CanFrame,
    /// The sender's `userContext` of `SilKit_CanController_SendFrame`.
    pub user_context: *mut c_void,
}

/// `SilKit_Experimental_NetSim_CanConfigureBaudrate`.
#[repr(C)]
#[derive(Debug)]
pub struct CanConfigureBaudrate {
    pub header: StructHeader,
    pub rate: u32,
    pub fd_rate: u32,
    pub xl_rate: u32,
}

/// `SilKit_Experimental_NetSim_CanControllerMode`.
#[repr(C)]
#[derive(Debug)]
pub struct CanControllerMode {
    pub header: StructHeader,
    /// [`mode_flag`] bits.
    pub flags: i32,
    pub state: CanControllerState,
}

/// `SilKit_Experimental_SimulatedCanControllerFunctions`: what SIL Kit calls
/// on one simulated controller. Kept by SIL Kit, as the network's table.
#[repr(C)]
pub struct SimulatedCanControllerFunctions {
    pub header: StructHeader,
    pub on_set_baudrate: unsafe extern "C" fn(controller: *mut c_void, baudrate: *const CanConfigureBaudrate),
    pub on_frame_request: unsafe extern "C" fn(controller: *mut c_void, request: *const CanFrameRequest),
    pub on_set_controller_mode: unsafe extern "C" fn(controller: *mut c_void, mode: *const CanControllerMode),
}

/// `SilKit_CanFrameEvent` as a simulator produces it (the same layout as
/// [`crate::ffi::CanFrameEvent`]).
pub use crate::ffi::CanFrameEvent;

/// `SilKit_CanFrameTransmitEvent` (version 2).
#[repr(C)]
#[derive(Debug)]
pub struct CanFrameTransmitEvent {
    pub header: StructHeader,
    pub user_context: *mut c_void,
    pub timestamp: NanosecondsTime,
    pub status: CanTransmitStatus,
    pub can_id: u32,
}

/// `SilKit_CanStateChangeEvent`.
#[repr(C)]
#[derive(Debug)]
pub struct CanStateChangeEvent {
    pub header: StructHeader,
    pub timestamp: NanosecondsTime,
    pub state: CanControllerState,
}

/// `SilKit_CanErrorStateChangeEvent`.
#[repr(C)]
#[derive(Debug)]
pub struct CanErrorStateChangeEvent {
    pub header: StructHeader,
    pub timestamp: NanosecondsTime,
    pub error_state: CanErrorState,
}

/// `SilKit_Experimental_NetworkSimulator_Create`.
pub type NetworkSimulatorCreate =
    unsafe extern "C" fn(out: *mut *mut NetworkSimulator, participant: *mut crate::ffi::Participant) -> ReturnCode;
/// `SilKit_Experimental_NetworkSimulator_SimulateNetwork`.
pub type NetworkSimulatorSimulateNetwork = unsafe extern "C" fn(
    simulator: *mut NetworkSimulator,
    network_name: *const c_char,
    network_type: SimulatedNetworkType,
    simulated_network: *mut c_void,
    functions: *const SimulatedNetworkFunctions,
) -> ReturnCode;
/// `SilKit_Experimental_NetworkSimulator_Start`.
pub type NetworkSimulatorStart = unsafe extern "C" fn(simulator: *mut NetworkSimulator) -> ReturnCode;
/// `SilKit_Experimental_CanEventProducer_Produce`.
pub type CanEventProducerProduce = unsafe extern "C" fn(
    producer: *mut CanEventProducer,
    event: *mut StructHeader,
    receivers: *const EventReceivers,
) -> ReturnCode;

/// Whether `version` is the id of data type `datatype` of the network
/// simulator's service (any version: later ones only append fields).
pub fn is_netsim_struct(version: u64, datatype: u64) -> bool {
    version >> 32 == struct_version(SERVICE_NETWORK_SIMULATION, datatype, 0) >> 32
}

#[cfg(test)]
mod tests {
    use std::mem::{offset_of, size_of};

    use super::*;

    #[test]
    fn function_tables_are_a_header_and_three_pointers() {
        assert_eq!(size_of::<SimulatedNetworkFunctions>(), 56);
        assert_eq!(offset_of!(SimulatedNetworkFunctions, provide_simulated_controller), 32);
        assert_eq!(offset_of!(SimulatedNetworkFunctions, simulated_controller_removed), 40);
        assert_eq!(offset_of!(SimulatedNetworkFunctions, set_event_producer), 48);
        assert_eq!(size_of::<SimulatedCanControllerFunctions>(), 56);
        assert_eq!(offset_of!(SimulatedCanControllerFunctions, on_set_baudrate), 32);
        assert_eq!(offset_of!(SimulatedCanControllerFunctions, on_frame_request), 40);
        assert_eq!(offset_of!(SimulatedCanControllerFunctions, on_set_controller_mode), 48);
    }

    #[test]
    fn requests_are_laid_out_as_the_header_says() {
        assert_eq!(size_of::<CanFrameRequest>(), 48);
        assert_eq!((offset_of!(CanFrameRequest, frame), offset_of!(CanFrameRequest, user_context)), (32, 40));
        assert_eq!(size_of::<CanConfigureBaudrate>(), 48);
        let rates = [
            offset_of!(CanConfigureBaudrate, rate),
            offset_of!(CanConfigureBaudrate, fd_rate),
            offset_of!(CanConfigureBaudrate, xl_rate),
        ];
        assert_eq!(rates, [32, 36, 40]);
        assert_eq!(size_of::<CanControllerMode>(), 40);
        assert_eq!((offset_of!(CanControllerMode, flags), offset_of!(CanControllerMode, state)), (32, 36));
    }

    #[test]
    fn events_and_receivers_are_laid_out_as_the_header_says() {
        assert_eq!(size_of::<EventReceivers>(), 48);
        let receivers = (offset_of!(EventReceivers, num_receivers), offset_of!(EventReceivers, controller_descriptors));
        assert_eq!(receivers, (32, 40));
        assert_eq!(size_of::<CanFrameTransmitEvent>(), 56);
        let transmit = [
            offset_of!(CanFrameTransmitEvent, user_context),
            offset_of!(CanFrameTransmitEvent, timestamp),
            offset_of!(CanFrameTransmitEvent, status),
            offset_of!(CanFrameTransmitEvent, can_id),
        ];
        assert_eq!(transmit, [32, 40, 48, 52]);
        assert_eq!(size_of::<CanStateChangeEvent>(), 48);
        assert_eq!((offset_of!(CanStateChangeEvent, timestamp), offset_of!(CanStateChangeEvent, state)), (32, 40));
        assert_eq!(size_of::<CanErrorStateChangeEvent>(), 48);
        assert_eq!(offset_of!(CanErrorStateChangeEvent, error_state), 40);
    }

    /// The ids libSilKit.so 5.0.3 uses (its code holds them as immediates:
    /// `0x534b0801…` for the receivers, `0x534b0807…`–`0x534b0809…` in the
    /// CAN requests, `0x534b0102 02…` and friends in the producer).
    #[test]
    fn struct_versions_are_the_ones_libsilkit_5_0_3_uses() {
        assert_eq!(EVENT_RECEIVERS_VERSION, 0x534b_0801_0100_0000);
        assert_eq!(CAN_CONFIGURE_BAUDRATE_VERSION, 0x534b_0807_0100_0000);
        assert_eq!(CAN_CONTROLLER_MODE_VERSION, 0x534b_0808_0100_0000);
        assert_eq!(CAN_FRAME_REQUEST_VERSION, 0x534b_0809_0100_0000);
        assert_eq!(CAN_FRAME_TRANSMIT_EVENT_VERSION, 0x534b_0102_0200_0000);
        assert_eq!(CAN_FRAME_EVENT_VERSION, 0x534b_0103_0100_0000);
        assert_eq!(CAN_STATE_CHANGE_EVENT_VERSION, 0x534b_0104_0100_0000);
        assert_eq!(CAN_ERROR_STATE_CHANGE_EVENT_VERSION, 0x534b_0105_0100_0000);
        assert!(is_netsim_struct(CAN_FRAME_REQUEST_VERSION, 9));
        assert!(is_netsim_struct(struct_version(8, 9, 2), 9), "a later version of the request");
        assert!(!is_netsim_struct(CAN_FRAME_REQUEST_VERSION, 8));
        assert!(!is_netsim_struct(CAN_FRAME_EVENT_VERSION, 3));
    }

    #[test]
    fn statuses_and_states_are_the_header_values() {
        let statuses = [TRANSMIT_STATUS_TRANSMITTED, TRANSMIT_STATUS_CANCELED, TRANSMIT_STATUS_TRANSMIT_QUEUE_FULL];
        assert_eq!(statuses, [1, 2, 4]);
        let states =
            [CONTROLLER_STATE_UNINIT, CONTROLLER_STATE_STOPPED, CONTROLLER_STATE_STARTED, CONTROLLER_STATE_SLEEP];
        assert_eq!(states, [0, 1, 2, 3]);
        let errors =
            [ERROR_STATE_NOT_AVAILABLE, ERROR_STATE_ERROR_ACTIVE, ERROR_STATE_ERROR_PASSIVE, ERROR_STATE_BUS_OFF];
        assert_eq!(errors, [0, 1, 2, 3]);
        assert_eq!((mode_flag::RESET_ERROR_HANDLING, mode_flag::CANCEL_TRANSMIT_REQUESTS), (1, 2));
        assert_eq!((NETWORK_TYPE_CAN, DIRECTION_SEND), (1, 1));
    }
}
