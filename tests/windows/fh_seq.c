/*
 * fh_seq - numbered frames both ways through a hub with libfieldhub (the
 * C API of include/fieldhub.h): the program the Windows test builds with
 * mingw against fieldhub.dll and runs under Wine.
 *
 *     fh_seq URL CHANNEL COUNT SEND_BASE RECV_BASE
 *
 * The contract of c/portable/tests/fhp_seq.c, so c/portable/tests/exchange.sh
 * drives it: it opens a CAN FD port that holds the channel rather than drop
 * (FH_PORT_BLOCK_ON_OVERFLOW), prints "ready", sends COUNT frames of the
 * family SEND_BASE, waits until the hub has them on the bus (fh_flush), and
 * checks that COUNT frames of the family RECV_BASE arrive complete,
 * unchanged and in order (tests/vm/seq/frames.awk's family: frame i is
 * classic id BASE with 8 bytes, CAN FD with BRS and extended id
 * 0x1F000000|BASE with 64 bytes, or CAN FD id BASE+1 with 12 bytes (i % 3);
 * data[0..4] = i big-endian, data[k] = (i + k) & 0xff). Exits 0 only if
 * all of that held.
 */
#include <fieldhub.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void family_frame(unsigned long i, unsigned long base, struct fh_frame *f) {
    unsigned k;
    memset(f, 0, sizeof *f);
    switch (i % 3) {
    case 0:
        f->can_id = (uint32_t)base;
        f->len = 8;
        break;
    case 1:
        f->can_id = (uint32_t)(0x1F000000UL | base) | FH_CAN_EFF_FLAG;
        f->len = 64;
        f->flags = FH_CANFD_FDF | FH_CANFD_BRS;
        break;
    default:
        f->can_id = (uint32_t)base + 1;
        f->len = 12;
        f->flags = FH_CANFD_FDF;
        break;
    }
    f->data[0] = (uint8_t)(i >> 24);
    f->data[1] = (uint8_t)(i >> 16);
    f->data[2] = (uint8_t)(i >> 8);
    f->data[3] = (uint8_t)i;
    for (k = 4; k < f->len; k++) f->data[k] = (uint8_t)((i + k) & 0xff);
}

static void die(struct fh_client *c, int rc, const char *what) {
    char detail[512];
    fh_last_error(c, detail, sizeof detail);
    fprintf(stderr, "fh_seq: %s: %s (%d): %s\n", what, fh_strerror(rc), rc, detail);
    exit(1);
}

int main(int argc, char **argv) {
    struct fh_client *c;
    struct fh_frame f, want;
    struct fh_meta meta;
    fh_port port;
    unsigned long count, send_base, recv_base, i;
    uint64_t last_seq = 0;
    int rc;
    if (argc != 6) {
        fprintf(stderr, "usage: fh_seq URL CHANNEL COUNT SEND_BASE RECV_BASE\n");
        return 2;
    }
    count = strtoul(argv[3], NULL, 0);
    send_base = strtoul(argv[4], NULL, 0);
    recv_base = strtoul(argv[5], NULL, 0);
    if (!(c = fh_client_new())) return fprintf(stderr, "fh_seq: out of memory\n"), 1;
    if ((rc = fh_connect(c, argv[1], "fh-seq", NULL)) != FH_OK) die(c, rc, "connect");
    if ((rc = fh_port_open(c, argv[2], NULL, FH_PORT_FD | FH_PORT_BLOCK_ON_OVERFLOW, &port)) != FH_OK)
        die(c, rc, "open port");
    printf("ready\n");
    fflush(stdout);
    for (i = 0; i < count; i++) {
        family_frame(i, send_base, &f);
        if ((rc = fh_send(c, port, &f, -1)) != FH_OK) die(c, rc, "send");
    }
    if ((rc = fh_flush(c)) != FH_OK) die(c, rc, "flush");
    for (i = 0; recv_base && i < count; i++) {
        if ((rc = fh_recv(c, &f, &meta, 60000)) != FH_OK) die(c, rc, "receive");
        family_frame(i, recv_base, &want);
        if (f.can_id != want.can_id || f.len != want.len || f.flags != want.flags ||
            memcmp(f.data, want.data, want.len) != 0 || meta.seq <= last_seq) {
            fprintf(stderr, "fh_seq: frame %lu: got id %08lX len %u flags %u seq %lu, want id %08lX len %u\n", i,
                    (unsigned long)f.can_id, f.len, f.flags, (unsigned long)meta.seq, (unsigned long)want.can_id,
                    want.len);
            return 1;
        }
        last_seq = meta.seq;
    }
    printf("fh_seq: sent %lu, received %lu in order\n", count, recv_base ? count : 0UL);
    fh_client_free(c);
    return 0;
}
