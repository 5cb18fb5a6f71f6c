/*
 * fhp_seq - numbered frames both ways through a hub with the portable
 * client: the program the Linux, Wine and QEMU-guest tests run.
 *
 *     fhp_seq URL CHANNEL COUNT SEND_BASE RECV_BASE
 *
 * URL is tcp://HOST:PORT (BSD sockets or Winsock) or serial:PATH (a file
 * descriptor: a virtio-serial port, a UART). It opens a CAN FD port that
 * holds the channel rather than drop (BLOCK_ON_OVERFLOW), prints "ready",
 * then at once sends COUNT frames of the family SEND_BASE and checks that
 * COUNT frames of the family RECV_BASE arrive complete, unchanged and in
 * order (RECV_BASE 0: receive nothing). The family is that of
 * tests/vm/seq/frames.awk, so `fieldhub replay` and `check.awk` are the
 * peer: frame i is classic id BASE with 8 bytes, CAN FD with BRS and
 * extended id 0x1F000000|BASE with 64 bytes, or CAN FD id BASE+1 with 12
 * bytes (i % 3); data[0..4] = i big-endian, data[k] = (i + k) & 0xff.
 * Last it waits for the hub to confirm its frames on the bus (PING), and
 * exits 0 only if all of that held.
 */
#include "fieldhub_portable.h"
#include "fieldhub_portable_io.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef _WIN32
#include <winsock2.h>
#else
#include <fcntl.h>
#include <sys/select.h>
#include <time.h>
#include <unistd.h>
#endif

static void family_frame(unsigned long i, unsigned long base, fhp_frame *f) {
    unsigned k;
    memset(f, 0, sizeof *f);
    switch (i % 3) {
    case 0:
        f->can_id = (uint32_t)base;
        f->len = 8;
        break;
    case 1:
        f->can_id = (uint32_t)(0x1F000000UL | base) | FHP_CAN_EFF_FLAG;
        f->len = 64;
        f->flags = FHP_CANFD_FDF | FHP_CANFD_BRS;
        break;
    default:
        f->can_id = (uint32_t)base + 1;
        f->len = 12;
        f->flags = FHP_CANFD_FDF;
        break;
    }
    f->data[0] = (uint8_t)(i >> 24);
    f->data[1] = (uint8_t)(i >> 16);
    f->data[2] = (uint8_t)(i >> 8);
    f->data[3] = (uint8_t)i;
    for (k = 4; k < f->len; k++) f->data[k] = (uint8_t)((i + k) & 0xff);
}

static int die(const fhp_client *c, int rc, const char *what) {
    fprintf(stderr, "fhp_seq: %s: %s (%d): %s\n", what, fhp_strerror(rc), rc, fhp_last_error(c));
    exit(1);
}

int main(int argc, char **argv) {
    static uint8_t rx[FHP_RX_BUFFER_MIN], tx[8192];
    static fhp_client c;
    fhp_stream stream;
    fhp_socket sock;
#ifndef _WIN32
    int fd = -1;
    const char *serial = NULL;
    const struct timespec half_second = {0, 500000000L};
#endif
    char why[320] = "";
    int rc, attempt;
    unsigned long count, send_base, recv_base, sent = 0, got = 0;
    uint32_t request;
    uint64_t nonce = 0;
    fhp_port port;
    fhp_frame f, want;
    fhp_meta meta;
    uint64_t last_seq = 0;
    if (argc != 6) {
        fprintf(stderr, "usage: fhp_seq URL CHANNEL COUNT SEND_BASE RECV_BASE\n");
        return 2;
    }
    count = strtoul(argv[3], NULL, 0);
    send_base = strtoul(argv[4], NULL, 0);
    recv_base = strtoul(argv[5], NULL, 0);
    if (strncmp(argv[1], "tcp://", 6) == 0) {
        char host[256];
        const char *colon = strrchr(argv[1] + 6, ':');
        size_t n = colon ? (size_t)(colon - (argv[1] + 6)) : 0;
        if (!colon || n >= sizeof host) return fprintf(stderr, "fhp_seq: bad URL %s\n", argv[1]), 2;
        memcpy(host, argv[1] + 6, n);
        host[n] = '\0';
        rc = fhp_tcp_connect(host, colon + 1, &sock, why, sizeof why);
        if (rc) return fprintf(stderr, "fhp_seq: cannot connect to %s: %s\n", argv[1], *why ? why : fhp_strerror(rc)), 1;
        stream = fhp_socket_stream(&sock);
#ifndef _WIN32
        fd = sock;
    } else if (strncmp(argv[1], "serial:", 7) == 0) {
        serial = argv[1] + 7;
        fd = open(serial, O_RDWR | O_NONBLOCK | O_NOCTTY);
        if (fd < 0) return perror(serial), 1;
        stream = fhp_fd_stream(&fd);
#endif
    } else {
        fprintf(stderr, "fhp_seq: URL must be tcp://HOST:PORT or serial:PATH, not %s\n", argv[1]);
        return 2;
    }
    for (attempt = 1;; attempt++) {
        fhp_init(&c, &stream, rx, sizeof rx, tx, sizeof tx);
        if ((rc = fhp_connect(&c, "fhp-seq", getenv("FIELDHUB_TOKEN"))) != FHP_OK) die(&c, rc, "connect");
        while ((rc = fhp_connected(&c)) == FHP_ERR_AGAIN)
            if ((rc = fhp_poll(&c)) < 0) break;
#ifndef _WIN32
        /* A virtio-serial port reads as ended while QEMU has no connection
         * to the hub: QEMU connects when it starts, the hub closes a
         * connection that says nothing for 5 s (a guest still booting),
         * and QEMU's reconnect=1 connects again a second later. So over a
         * port an end before WELCOME means "try again", as the Rust
         * bridge does; a REFUSE is an answer and is not retried. */
        if (rc == FHP_ERR_CLOSED && serial && attempt < 30) {
            fprintf(stderr, "fhp_seq: %s: %s; saying HELLO again in 0.5 s\n", serial, fhp_last_error(&c));
            close(fd);
            nanosleep(&half_second, NULL);
            fd = open(serial, O_RDWR | O_NONBLOCK | O_NOCTTY);
            if (fd < 0) return perror(serial), 1;
            continue;
        }
#endif
        break;
    }
    if (rc) die(&c, rc, "HELLO");
    if ((rc = fhp_port_open(&c, argv[2], NULL, FHP_PORT_FD | FHP_PORT_BLOCK_ON_OVERFLOW, &request)) != FHP_OK)
        die(&c, rc, "open port");
    while ((rc = fhp_port_result(&c, request, &port)) == FHP_ERR_AGAIN)
        if ((rc = fhp_poll(&c)) < 0) die(&c, rc, "open port");
    if (rc) die(&c, rc, "open port");
    printf("ready\n");
    fflush(stdout);
    for (;;) {
        int idle = 1;
        while (sent < count) {
            family_frame(sent, send_base, &f);
            rc = fhp_send(&c, port, &f);
            if (rc == FHP_ERR_AGAIN) break;
            if (rc) die(&c, rc, "send");
            sent++;
            idle = 0;
        }
        if (sent == count && nonce == 0 && (rc = fhp_flush_start(&c, &nonce)) < 0) die(&c, rc, "PING");
        while (recv_base && got < count && (rc = fhp_recv(&c, &f, &meta)) == FHP_OK) {
            idle = 0;
            family_frame(got, recv_base, &want);
            if (f.can_id != want.can_id || f.len != want.len || f.flags != want.flags ||
                memcmp(f.data, want.data, want.len) != 0 || meta.seq <= last_seq) {
                fprintf(stderr, "fhp_seq: frame %lu: got id %08lX len %u flags %u seq %lu, want id %08lX len %u\n", got,
                        (unsigned long)f.can_id, f.len, f.flags, (unsigned long)meta.seq, (unsigned long)want.can_id,
                        want.len);
                return 1;
            }
            last_seq = meta.seq;
            got++;
        }
        if (rc < 0 && rc != FHP_ERR_AGAIN) die(&c, rc, "receive");
        if ((rc = fhp_poll(&c)) < 0) die(&c, rc, "poll");
        if (nonce && (!recv_base || got == count)) {
            rc = fhp_flushed(&c, nonce);
            if (rc == FHP_OK) break;
            if (rc != FHP_ERR_AGAIN) die(&c, rc, "confirm");
        }
        if (idle) {
            /* Nothing moved: wait for the stream rather than spin. */
            fd_set readable, writable;
            struct timeval tv;
            FD_ZERO(&readable);
            FD_ZERO(&writable);
#ifdef _WIN32
            FD_SET(sock, &readable);
            if (fhp_tx_pending(&c)) FD_SET(sock, &writable);
            tv.tv_sec = 0, tv.tv_usec = 20000;
            select(0, &readable, &writable, NULL, &tv);
#else
            FD_SET(fd, &readable);
            if (fhp_tx_pending(&c)) FD_SET(fd, &writable);
            tv.tv_sec = 0, tv.tv_usec = 20000;
            select(fd + 1, &readable, &writable, NULL, &tv);
#endif
        }
    }
    printf("sent %lu frames, all on the bus; received %lu frames in order\n", sent, got);
    fhp_close(&c);
    fhp_poll(&c);
    return 0;
}
