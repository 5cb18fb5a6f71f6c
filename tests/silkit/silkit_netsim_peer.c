/* A SIL Kit CAN participant for the tests of fieldhub as SIL Kit's network simulator, written
 * against SIL Kit's C API only.
 *
 *   silkit_netsim_peer URI NETWORK NAME ROLE COUNT ID WINDOW [stopped]
 *
 * It answers the test's START frame (id 0x7FF) with READY (id 0x7FE, one byte: ROLE). The hub
 * is the network's only simulator and has no controller of its own, so a READY the test receives
 * went through the simulator: the controller is simulated from then on. On GO (id 0x7FC) it sends
 * COUNT frames at once, frame n with id ID + n % 16 (hex ID) and 8 bytes: 0x5E, ROLE, n (little
 * endian), 0, 0; its user context is n + 1. With a WINDOW above 0 it keeps at most WINDOW requests
 * unanswered, as an ECU waits for its transmit buffers; 0 floods. With "stopped" it stops its
 * controller on GO, waits for the simulator's state change event, sends the COUNT frames stopped
 * and starts the controller again once they are all answered. Once every one of them is answered by a transmit event
 * it sends FIN (id 0x7FB, one byte: ROLE). On DONE (id 0x7FD) it prints what it saw, in the order
 * SIL Kit called it, and ends:
 *   F R|T ID HEXDATA TIMESTAMP      a frame event (R another's frame, T its own)
 *   A STATUS CANID CONTEXT TIMESTAMP   a transmit event (1 transmitted, 2 canceled, 4 queue full)
 *   S STATE                          a controller state change (1 stopped, 2 started)
 * The test's control frames (ids 0x7F0 to 0x7FF) are not printed. */
#include "silkit_capi.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define START_ID 0x7FFu
#define READY_ID 0x7FEu
#define DONE_ID 0x7FDu
#define GO_ID 0x7FCu
#define FIN_ID 0x7FBu
#define TAG 0x5E
#define PATIENCE_MS 180000

static SilKit_CanController *can;
static atomic_int go, done, state;
static atomic_ulong answered;
static atomic_int all_answered;
static unsigned long count;
static uint32_t base_id;
static uint8_t role;
/* The event log: SIL Kit calls the handlers of one controller on one thread, but the frame and
 * the transmit handler may be different threads, so the log is locked. */
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static char **lines;
static size_t used, room;

static void note(char *line) {
  pthread_mutex_lock(&log_lock);
  if (used == room) {
    room = room ? 2 * room : 4096;
    lines = realloc(lines, room * sizeof *lines);
    if (!lines) abort();
  }
  lines[used++] = line;
  pthread_mutex_unlock(&log_lock);
}

static int send_frame(uint32_t id, const uint8_t *data, size_t len, void *context) {
  SilKit_CanFrame f;
  SilKit_Struct_Init(SilKit_CanFrame, f);
  f.id = id; f.dlc = (uint16_t)len; f.data.data = data; f.data.size = len;
  if (SilKit_CanController_SendFrame(can, &f, context) != SilKit_ReturnCode_SUCCESS) {
    fprintf(stderr, "SendFrame failed: %s\n", SilKit_GetLastErrorString());
    return -1;
  }
  return 0;
}

static void on_frame(void *ctx, SilKit_CanController *c, SilKit_CanFrameEvent *ev) {
  (void)ctx; (void)c;
  const SilKit_CanFrame *f = ev->frame;
  if (f->id >= 0x7F0 && f->id <= 0x7FF) {
    if (ev->direction != SilKit_Direction_Receive) return;
    if (f->id == START_ID) send_frame(READY_ID, &role, 1, NULL);
    if (f->id == GO_ID) atomic_store(&go, 1);
    if (f->id == DONE_ID) atomic_store(&done, 1);
    return;
  }
  char *line = malloc(64 + 2 * f->data.size);
  if (!line) abort();
  int at = sprintf(line, "F %c %X ", ev->direction == SilKit_Direction_Send ? 'T' : 'R', f->id);
  for (size_t i = 0; i < f->data.size; i++) at += sprintf(line + at, "%02X", f->data.data[i]);
  sprintf(line + at, " %llu", (unsigned long long)ev->timestamp);
  note(line);
}

static void on_transmit(void *ctx, SilKit_CanController *c, SilKit_CanFrameTransmitEvent *ev) {
  (void)ctx; (void)c;
  uintptr_t context = (uintptr_t)ev->userContext;
  if (context == 0) return; /* READY and FIN carry none */
  char *line = malloc(96);
  if (!line) abort();
  sprintf(line, "A %d %X %lu %llu", ev->status, ev->canId, (unsigned long)context, (unsigned long long)ev->timestamp);
  note(line);
  if (atomic_fetch_add(&answered, 1) + 1 == count) atomic_store(&all_answered, 1);
}

static void on_state(void *ctx, SilKit_CanController *c, SilKit_CanStateChangeEvent *ev) {
  (void)ctx; (void)c;
  char *line = malloc(32);
  if (!line) abort();
  sprintf(line, "S %d", ev->state);
  note(line);
  atomic_store(&state, ev->state);
}

static int wait_for(atomic_int *flag) {
  for (int t = 0; t < PATIENCE_MS / 10 && !atomic_load(flag); t++) usleep(10000);
  return atomic_load(flag);
}

int main(int argc, char **argv) {
  if (argc < 8 || argc > 9 || strlen(argv[4]) != 1 || (argc == 9 && strcmp(argv[8], "stopped"))) {
    fprintf(stderr, "usage: %s URI NETWORK NAME ROLE COUNT ID WINDOW [stopped]\n", argv[0]);
    return 2;
  }
  const char *uri = argv[1], *network = argv[2], *name = argv[3];
  role = (uint8_t)argv[4][0];
  count = strtoul(argv[5], NULL, 10);
  base_id = (uint32_t)strtoul(argv[6], NULL, 16);
  unsigned long window = strtoul(argv[7], NULL, 10);
  int stopped = argc == 9;
  SilKit_ParticipantConfiguration *cfg; SilKit_Participant *p; SilKit_HandlerId h;
  if (SilKit_ParticipantConfiguration_FromString(&cfg, "Logging: {Sinks: [{Type: Stdout, Level: Warn}]}") ||
      SilKit_Participant_Create(&p, cfg, name, uri) || SilKit_CanController_Create(&can, p, network, network) ||
      SilKit_CanController_AddFrameHandler(can, NULL, on_frame, SilKit_Direction_SendReceive, &h) ||
      SilKit_CanController_AddFrameTransmitHandler(can, NULL, on_transmit, SilKit_CanTransmitStatus_DefaultMask, &h) ||
      SilKit_CanController_AddStateChangeHandler(can, NULL, on_state, &h) ||
      SilKit_CanController_Start(can)) {
    fprintf(stderr, "%s: SIL Kit setup failed: %s\n", name, SilKit_GetLastErrorString());
    return 1;
  }
  if (!wait_for(&go)) { fprintf(stderr, "%s: no GO from the test\n", name); return 1; }
  if (stopped) {
    SilKit_CanController_Stop(can);
    for (int t = 0; t < PATIENCE_MS / 10 && atomic_load(&state) != 1; t++) usleep(10000);
    if (atomic_load(&state) != 1) { fprintf(stderr, "%s: the controller never stopped\n", name); return 1; }
  }
  for (uint32_t n = 0; n < count; n++) {
    for (int t = 0; window && n - atomic_load(&answered) >= window; t++) {
      if (t == PATIENCE_MS * 10) { fprintf(stderr, "%s: requests never answered\n", name); return 1; }
      usleep(100);
    }
    uint8_t d[8] = {TAG, role, 0, 0, 0, 0, 0, 0};
    memcpy(d + 2, &n, 4);
    if (send_frame(base_id + n % 16, d, sizeof d, (void *)(uintptr_t)(n + 1))) return 1;
  }
  if (!wait_for(&all_answered)) { fprintf(stderr, "%s: requests never answered\n", name); return 1; }
  if (stopped) {
    SilKit_CanController_Start(can);
    for (int t = 0; t < PATIENCE_MS / 10 && atomic_load(&state) != 2; t++) usleep(10000);
  }
  send_frame(FIN_ID, &role, 1, NULL);
  int ended = wait_for(&done);
  pthread_mutex_lock(&log_lock);
  for (size_t i = 0; i < used; i++) printf("%s\n", lines[i]);
  pthread_mutex_unlock(&log_lock);
  fclose(stdout);
  fprintf(stderr, "%s: %lu of %lu requests answered, %zu events\n", name, atomic_load(&answered), count, used);
  SilKit_Participant_Destroy(p);
  return ended ? 0 : 1;
}
