/* The few declarations of Vector SIL Kit's stable C API (5.x) that silkit_peer.c uses, written
 * from SIL Kit's public headers (silkit/capi/Types.h, InterfaceIdentifiers.h, Participant.h,
 * SilKit.h, Can.h) so the peer builds against libSilKit.so alone, without SIL Kit's headers. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
typedef int32_t SilKit_ReturnCode;
#define SilKit_ReturnCode_SUCCESS ((SilKit_ReturnCode)0)
typedef uint8_t SilKit_Direction;
#define SilKit_Direction_Receive ((SilKit_Direction)2)
typedef uint64_t SilKit_HandlerId;
typedef struct { uint64_t version; uint64_t _reserved[3]; } SilKit_StructHeader;
typedef struct { const uint8_t *data; size_t size; } SilKit_ByteVector;
#define SilKit_CanFrameFlag_ide (1u << 9)
#define SilKit_CanFrameFlag_rtr (1u << 4)
#define SilKit_CanFrameFlag_fdf (1u << 12)
#define SilKit_CanFrameFlag_brs (1u << 13)
#define SilKit_CanFrameFlag_esi (1u << 14)
typedef struct {
  SilKit_StructHeader structHeader; uint32_t id; uint32_t flags; uint16_t dlc; uint8_t sdt; uint8_t vcid; uint32_t af;
  SilKit_ByteVector data;
} SilKit_CanFrame;
typedef struct {
  SilKit_StructHeader structHeader; uint64_t timestamp; SilKit_CanFrame *frame; SilKit_Direction direction; void *userContext;
} SilKit_CanFrameEvent;
typedef struct SilKit_ParticipantConfiguration SilKit_ParticipantConfiguration;
typedef struct SilKit_Participant SilKit_Participant;
typedef struct SilKit_CanController SilKit_CanController;
typedef void (*SilKit_CanFrameHandler_t)(void *context, SilKit_CanController *controller, SilKit_CanFrameEvent *ev);
/* SK_ID_MAKE(Can, SilKit_CanFrame): 'S' 'K', service Can = 1, data type CanFrame = 1, version 1 */
#define SilKit_CanFrame_STRUCT_VERSION ((83ull << 56) | (75ull << 48) | (1ull << 40) | (1ull << 32) | (1ull << 24))
#define SilKit_Struct_Init(T, V) do { memset(&(V), 0, sizeof(V)); (V).structHeader.version = T##_STRUCT_VERSION; } while (0)
const char *SilKit_GetLastErrorString(void);
SilKit_ReturnCode SilKit_ParticipantConfiguration_FromString(SilKit_ParticipantConfiguration **out, const char *text);
SilKit_ReturnCode SilKit_Participant_Create(SilKit_Participant **out, SilKit_ParticipantConfiguration *cfg, const char *name, const char *registryUri);
SilKit_ReturnCode SilKit_Participant_Destroy(SilKit_Participant *participant);
SilKit_ReturnCode SilKit_CanController_Create(SilKit_CanController **out, SilKit_Participant *p, const char *name, const char *network);
SilKit_ReturnCode SilKit_CanController_AddFrameHandler(SilKit_CanController *c, void *ctx, SilKit_CanFrameHandler_t h, SilKit_Direction mask, SilKit_HandlerId *out);
SilKit_ReturnCode SilKit_CanController_Start(SilKit_CanController *c);
SilKit_ReturnCode SilKit_CanController_SendFrame(SilKit_CanController *c, SilKit_CanFrame *frame, void *userContext);
/* Synchronised time (silkit/capi/Orchestration.h), for silkit_sync_peer.c. */
typedef int8_t SilKit_OperationMode;
#define SilKit_OperationMode_Coordinated ((SilKit_OperationMode)10)
typedef int16_t SilKit_ParticipantState;
typedef uint64_t SilKit_NanosecondsTime;
typedef struct { SilKit_StructHeader structHeader; SilKit_OperationMode operationMode; } SilKit_LifecycleConfiguration;
/* SK_ID_MAKE(Participant, SilKit_LifecycleConfiguration): service 7, data type 2, version 1 */
#define SilKit_LifecycleConfiguration_STRUCT_VERSION ((83ull << 56) | (75ull << 48) | (7ull << 40) | (2ull << 32) | (1ull << 24))
typedef struct SilKit_LifecycleService SilKit_LifecycleService;
typedef struct SilKit_TimeSyncService SilKit_TimeSyncService;
typedef void (*SilKit_TimeSyncService_SimulationStepHandler_t)(void *context, SilKit_TimeSyncService *s, SilKit_NanosecondsTime now, SilKit_NanosecondsTime duration);
SilKit_ReturnCode SilKit_LifecycleService_Create(SilKit_LifecycleService **out, SilKit_Participant *p, const SilKit_LifecycleConfiguration *cfg);
SilKit_ReturnCode SilKit_TimeSyncService_Create(SilKit_TimeSyncService **out, SilKit_LifecycleService *l);
SilKit_ReturnCode SilKit_TimeSyncService_SetSimulationStepHandler(SilKit_TimeSyncService *s, void *ctx, SilKit_TimeSyncService_SimulationStepHandler_t h, SilKit_NanosecondsTime initialStepSize);
SilKit_ReturnCode SilKit_LifecycleService_StartLifecycle(SilKit_LifecycleService *l);
SilKit_ReturnCode SilKit_LifecycleService_Stop(SilKit_LifecycleService *l, const char *reason);
SilKit_ReturnCode SilKit_LifecycleService_WaitForLifecycleToComplete(SilKit_LifecycleService *l, SilKit_ParticipantState *out);
/* Transmit acknowledgements and both directions, for silkit_netsim_peer.c (silkit/capi/Can.h). */
#define SilKit_Direction_Send ((SilKit_Direction)1)
#define SilKit_Direction_SendReceive ((SilKit_Direction)3)
typedef int32_t SilKit_CanTransmitStatus;
#define SilKit_CanTransmitStatus_DefaultMask ((SilKit_CanTransmitStatus)7)
typedef struct {
  SilKit_StructHeader structHeader; void *userContext; SilKit_NanosecondsTime timestamp; SilKit_CanTransmitStatus status; uint32_t canId;
} SilKit_CanFrameTransmitEvent;
typedef void (*SilKit_CanFrameTransmitHandler_t)(void *context, SilKit_CanController *controller, SilKit_CanFrameTransmitEvent *ev);
SilKit_ReturnCode SilKit_CanController_AddFrameTransmitHandler(SilKit_CanController *c, void *ctx, SilKit_CanFrameTransmitHandler_t h, SilKit_CanTransmitStatus mask, SilKit_HandlerId *out);
typedef int32_t SilKit_CanControllerState;
typedef struct { SilKit_StructHeader structHeader; SilKit_NanosecondsTime timestamp; SilKit_CanControllerState state; } SilKit_CanStateChangeEvent;
typedef void (*SilKit_CanStateChangeHandler_t)(void *context, SilKit_CanController *controller, SilKit_CanStateChangeEvent *ev);
SilKit_ReturnCode SilKit_CanController_AddStateChangeHandler(SilKit_CanController *c, void *ctx, SilKit_CanStateChangeHandler_t h, SilKit_HandlerId *out);
SilKit_ReturnCode SilKit_CanController_Stop(SilKit_CanController *c);
