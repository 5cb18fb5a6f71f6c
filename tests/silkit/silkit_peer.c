/* A SIL Kit CAN participant for fieldhub's SIL Kit tests, written against SIL Kit's C API only.
 *
 *   silkit_peer send   URI NETWORK NAME COUNT   send COUNT numbered frames
 *   silkit_peer record URI NETWORK NAME COUNT   print the first COUNT frames with the hub's tag
 *
 * Both roles answer the test's START frame (id 0x7FF) with READY (id 0x7FE, one byte: 'S' from
 * the sender, 'R' from the recorder): once the test sees READY, the participant and the hub's
 * bridge have discovered each other both ways, and nothing sent after is lost to discovery. The
 * sender sends its frames when the test sends GO (id 0x7FC); both roles end when the test sends
 * DONE (id 0x7FD).
 *
 * Frame n (counter n) is of kind n % 4, so every flag crosses both ways:
 *   0: classic, 11-bit id 0x100 + n % 0x100, 5 bytes    1: classic, 29-bit id 0x1000000 + n, 5 bytes
 *   2: CAN FD with BRS, 11-bit id 0x200, 12 bytes      3: CAN FD with ESI, 29-bit id 0x2000 + n, 64 bytes
 * The payload starts with a tag (0x5C from this sender, 0xF1 from the test's fieldhub client) and
 * the counter (little endian); the rest is n's low byte. The recorder keeps the frames tagged
 * 0xF1 (the sender's reach it too, straight through SIL Kit) and prints one line per frame:
 * "ID FLAGS DLC HEXDATA" (hex, SIL Kit's flag bits). */
#include "silkit_capi.h"
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define START_ID 0x7FFu
#define READY_ID 0x7FEu
#define DONE_ID 0x7FDu
#define GO_ID 0x7FCu
#define TAG 0x5C
#define HUB_TAG 0xF1
#define PATIENCE_MS 120000

static SilKit_CanController *can;
static atomic_int started, go, done;
static atomic_ulong recorded;
static unsigned long want;
static char **lines;

static uint8_t role_byte;
static int send_frame(uint32_t id, uint32_t flags, const uint8_t *data, size_t len, uint16_t dlc) {
  SilKit_CanFrame f;
  SilKit_Struct_Init(SilKit_CanFrame, f);
  f.id = id; f.flags = flags; f.dlc = dlc; f.data.data = data; f.data.size = len;
  if (SilKit_CanController_SendFrame(can, &f, NULL) != SilKit_ReturnCode_SUCCESS) {
    fprintf(stderr, "SendFrame failed: %s\n", SilKit_GetLastErrorString());
    return -1;
  }
  return 0;
}

static const uint16_t fd_dlc_of[65] = {0, 1, 2, 3, 4, 5, 6, 7, 8, [12] = 9, [16] = 10, [20] = 11, [24] = 12, [32] = 13, [48] = 14, [64] = 15};

static int send_numbered(uint32_t n) {
  uint8_t d[64];
  memset(d, (int)(n & 0xFF), sizeof d);
  d[0] = TAG; memcpy(d + 1, &n, 4);
  switch (n % 4) {
  case 0: return send_frame(0x100 + n % 0x100, 0, d, 5, 5);
  case 1: return send_frame(0x1000000 + n, SilKit_CanFrameFlag_ide, d, 5, 5);
  case 2: return send_frame(0x200, SilKit_CanFrameFlag_fdf | SilKit_CanFrameFlag_brs, d, 12, fd_dlc_of[12]);
  default: return send_frame(0x2000 + n, SilKit_CanFrameFlag_fdf | SilKit_CanFrameFlag_esi | SilKit_CanFrameFlag_ide, d, 64, fd_dlc_of[64]);
  }
}

static void on_frame(void *ctx, SilKit_CanController *c, SilKit_CanFrameEvent *ev) {
  (void)ctx; (void)c;
  const SilKit_CanFrame *f = ev->frame;
  if (f->id == START_ID && !(f->flags & SilKit_CanFrameFlag_ide)) {
    atomic_store(&started, 1);
    send_frame(READY_ID, 0, &role_byte, 1, 1);
    return;
  }
  if (f->id == GO_ID && !(f->flags & SilKit_CanFrameFlag_ide)) { atomic_store(&go, 1); return; }
  if (f->id == DONE_ID && !(f->flags & SilKit_CanFrameFlag_ide)) { atomic_store(&done, 1); return; }
  if (!lines || f->data.size == 0 || f->data.data[0] != HUB_TAG) return;
  /* SIL Kit calls this handler on one thread: the count is published after the line. */
  unsigned long k = atomic_load(&recorded);
  if (k >= want) return;
  char *line = malloc(48 + 2 * f->data.size);
  if (!line) return;
  int at = sprintf(line, "%X %X %u ", f->id, f->flags, f->dlc);
  for (size_t i = 0; i < f->data.size; i++) at += sprintf(line + at, "%02X", f->data.data[i]);
  lines[k] = line;
  atomic_store(&recorded, k + 1);
}

static int wait_for(atomic_int *flag) {
  for (int t = 0; t < PATIENCE_MS / 10 && !atomic_load(flag); t++) usleep(10000);
  return atomic_load(flag);
}

int main(int argc, char **argv) {
  if (argc != 6 || (strcmp(argv[1], "send") && strcmp(argv[1], "record"))) {
    fprintf(stderr, "usage: %s send|record URI NETWORK NAME COUNT\n", argv[0]);
    return 2;
  }
  const char *role = argv[1], *uri = argv[2], *network = argv[3], *name = argv[4];
  want = strtoul(argv[5], NULL, 10);
  int recording = !strcmp(role, "record");
  role_byte = recording ? 'R' : 'S';
  if (recording && !(lines = calloc(want ? want : 1, sizeof *lines))) return 1;
  SilKit_ParticipantConfiguration *cfg; SilKit_Participant *p; SilKit_HandlerId h;
  if (SilKit_ParticipantConfiguration_FromString(&cfg, "Logging: {Sinks: [{Type: Stdout, Level: Warn}]}") ||
      SilKit_Participant_Create(&p, cfg, name, uri) || SilKit_CanController_Create(&can, p, network, network) ||
      SilKit_CanController_AddFrameHandler(can, NULL, on_frame, SilKit_Direction_Receive, &h) ||
      SilKit_CanController_Start(can)) {
    fprintf(stderr, "%s: SIL Kit setup failed: %s\n", name, SilKit_GetLastErrorString());
    return 1;
  }
  if (!wait_for(&started)) { fprintf(stderr, "%s: no START from the test\n", name); return 1; }
  if (!recording) {
    if (!wait_for(&go)) { fprintf(stderr, "%s: no GO from the test\n", name); return 1; }
    for (uint32_t n = 0; n < want; n++)
      if (send_numbered(n)) return 1;
    fprintf(stderr, "%s: sent %lu frames\n", name, want);
  } else {
    for (int t = 0; t < PATIENCE_MS / 10 && atomic_load(&recorded) < want; t++) usleep(10000);
    unsigned long got = atomic_load(&recorded);
    for (unsigned long i = 0; i < want && i < got; i++) printf("%s\n", lines[i]);
    fclose(stdout); /* the test reads to the end, then sends DONE */
    if (got < want) { fprintf(stderr, "%s: received %lu of %lu frames\n", name, got, want); return 1; }
  }
  int ended = wait_for(&done);
  SilKit_Participant_Destroy(p);
  return ended ? 0 : 1;
}
