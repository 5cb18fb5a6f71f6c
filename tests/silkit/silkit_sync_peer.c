/* A synchronised SIL Kit CAN participant for fieldhub's virtual-time test, against SIL Kit's C API.
 *
 *   silkit_sync_peer URI NETWORK NAME STEPS
 *
 * Coordinated lifecycle, time sync with a 1 ms step. At each of its first STEPS steps (now = k ms)
 * it sends frame k: id 0x123, 5 bytes, tag 0x5C then k (little endian). It prints every frame it
 * receives, one line "NOW_NS TIMESTAMP_NS ID HEXDATA", so the test can see the hub's frames arrive
 * in SIL Kit time too. Two steps later (its last frame is on fieldhub's bus by then) it stops its
 * lifecycle; the test ends it. */
#include "silkit_capi.h"
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TAG 0x5C
#define STEP_NS 1000000ull

static SilKit_CanController *can;
static unsigned long steps;
static atomic_ulong done_steps;
static _Atomic SilKit_NanosecondsTime sim_now;

static void on_frame(void *ctx, SilKit_CanController *c, SilKit_CanFrameEvent *ev) {
  (void)ctx; (void)c;
  const SilKit_CanFrame *f = ev->frame;
  printf("%llu %llu %X ", (unsigned long long)atomic_load(&sim_now), (unsigned long long)ev->timestamp, f->id);
  for (size_t i = 0; i < f->data.size; i++) printf("%02X", f->data.data[i]);
  printf("\n");
  fflush(stdout);
}

static void on_step(void *ctx, SilKit_TimeSyncService *s, SilKit_NanosecondsTime now, SilKit_NanosecondsTime duration) {
  (void)ctx; (void)s; (void)duration;
  atomic_store(&sim_now, now);
  uint32_t k = (uint32_t)(now / STEP_NS);
  if (k >= steps + 2) atomic_store(&done_steps, k);
  if (k >= steps) return;
  uint8_t d[5] = {TAG};
  memcpy(d + 1, &k, 4);
  SilKit_CanFrame f;
  SilKit_Struct_Init(SilKit_CanFrame, f);
  f.id = 0x123; f.dlc = 5; f.data.data = d; f.data.size = 5;
  if (SilKit_CanController_SendFrame(can, &f, NULL) != SilKit_ReturnCode_SUCCESS)
    fprintf(stderr, "SendFrame failed: %s\n", SilKit_GetLastErrorString());
}

int main(int argc, char **argv) {
  if (argc != 5) { fprintf(stderr, "usage: %s URI NETWORK NAME STEPS\n", argv[0]); return 2; }
  const char *uri = argv[1], *network = argv[2], *name = argv[3];
  steps = strtoul(argv[4], NULL, 10);
  SilKit_ParticipantConfiguration *cfg; SilKit_Participant *p; SilKit_HandlerId h;
  SilKit_LifecycleService *life; SilKit_TimeSyncService *sync;
  SilKit_LifecycleConfiguration lc;
  SilKit_Struct_Init(SilKit_LifecycleConfiguration, lc);
  lc.operationMode = SilKit_OperationMode_Coordinated;
  if (SilKit_ParticipantConfiguration_FromString(&cfg, "Logging: {Sinks: [{Type: Stdout, Level: Warn}]}") ||
      SilKit_Participant_Create(&p, cfg, name, uri) || SilKit_CanController_Create(&can, p, network, network) ||
      SilKit_CanController_AddFrameHandler(can, NULL, on_frame, SilKit_Direction_Receive, &h) ||
      SilKit_LifecycleService_Create(&life, p, &lc) || SilKit_TimeSyncService_Create(&sync, life) ||
      SilKit_TimeSyncService_SetSimulationStepHandler(sync, NULL, on_step, STEP_NS) ||
      SilKit_CanController_Start(can) || SilKit_LifecycleService_StartLifecycle(life)) {
    fprintf(stderr, "%s: SIL Kit setup failed: %s\n", name, SilKit_GetLastErrorString());
    return 1;
  }
  while (atomic_load(&done_steps) < steps) usleep(1000);
  fprintf(stderr, "%s: %lu steps done\n", name, steps);
  SilKit_LifecycleService_Stop(life, "steps done");
  SilKit_ParticipantState state;
  SilKit_LifecycleService_WaitForLifecycleToComplete(life, &state);
  SilKit_Participant_Destroy(p);
  return 0;
}
