/*
 * canseq: a SocketCAN application for the VM tests. On one AF_CAN raw socket
 * (CAN_RAW_FD_FRAMES on) it sends COUNT sequence-numbered frames and, at the
 * same time, receives COUNT sequence-numbered frames from the other side,
 * checking order, kind and payload.
 *
 *   canseq [-e] [-w] IFACE COUNT TX_BASE RX_BASE
 *
 * Frame i (either direction, BASE = TX_BASE or RX_BASE) is, by i % 3:
 *   0: classic, standard id BASE, 8 bytes
 *   1: CAN FD with BRS, extended id 0x1F000000 | BASE, 64 bytes
 *   2: CAN FD, standard id BASE + 1, 12 bytes
 * data[0..4] = i big-endian, data[k] = (i + k) & 0xff for k >= 4.
 * Received frames of other ids are ignored.
 *
 * -w (wait): send the sequence only once the first expected frame has
 * arrived — the other side sends first, when it knows the path is up.
 * -e (error frames, then -w): before the sequences, write the controller
 * error frame GUEST_ERROR, wait for the hub to send HUB_ERROR (which must be
 * the first error frame to arrive, unchanged), and say so on stderr.
 *
 * Prints one summary line; exits 0 only if all COUNT frames were sent and
 * all COUNT expected frames arrived in order, unchanged, within 90 s.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/can.h>
#include <linux/can/error.h>
#include <linux/can/raw.h>
#include <net/if.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* -e: a controller state report (CAN_ERR_CRTL: rx and tx warning, error
 * counters tx 96 / rx 97) the guest writes, and a bus-off report (tx error
 * counter 248) the host side sends. */
static const struct can_frame GUEST_ERROR = {
    .can_id = CAN_ERR_FLAG | CAN_ERR_CRTL, .len = CAN_ERR_DLC,
    .data = { 0, CAN_ERR_CRTL_RX_WARNING | CAN_ERR_CRTL_TX_WARNING, 0, 0, 0, 0, 96, 97 } };
static const struct can_frame HUB_ERROR = {
    .can_id = CAN_ERR_FLAG | CAN_ERR_BUSOFF, .len = CAN_ERR_DLC, .data = { 0, 0, 0, 0, 0, 0, 248, 0 } };

/* Frame number i of the family BASE, as written to the socket. */
static size_t make_frame(struct canfd_frame *f, unsigned i, unsigned base) {
    memset(f, 0, sizeof *f);
    switch (i % 3) {
    case 0: f->can_id = base; f->len = 8; break;
    case 1: f->can_id = CAN_EFF_FLAG | 0x1F000000u | base; f->len = 64; f->flags = CANFD_BRS; break;
    default: f->can_id = base + 1; f->len = 12; break;
    }
    for (unsigned k = 0; k < f->len; k++)
        f->data[k] = k < 4 ? (unsigned char)(i >> (24 - 8 * k)) : (unsigned char)(i + k);
    return i % 3 == 0 ? CAN_MTU : CANFD_MTU;
}

/* Whether a frame belongs to the family BASE at all. */
static int in_family(const struct canfd_frame *f, unsigned base) {
    canid_t id = f->can_id & ~CAN_ERR_FLAG & ~CAN_RTR_FLAG;
    return id == base || id == base + 1 || id == (CAN_EFF_FLAG | 0x1F000000u | base);
}

int main(int argc, char **argv) {
    int errors = 0, wait_first = 0;
    for (; argc > 1 && argv[1][0] == '-'; argc--, argv++) {
        if (strcmp(argv[1], "-e") == 0) errors = wait_first = 1;
        else if (strcmp(argv[1], "-w") == 0) wait_first = 1;
        else argc = 0;
    }
    if (argc != 5) {
        fprintf(stderr, "usage: canseq [-e] [-w] IFACE COUNT TX_BASE RX_BASE\n");
        return 2;
    }
    unsigned count = strtoul(argv[2], NULL, 0);
    unsigned tx_base = strtoul(argv[3], NULL, 0), rx_base = strtoul(argv[4], NULL, 0);
    int s = socket(PF_CAN, SOCK_RAW, CAN_RAW);
    if (s < 0) { perror("canseq: socket(AF_CAN)"); return 1; }
    int on = 1, rcvbuf = 8 << 20;
    if (setsockopt(s, SOL_CAN_RAW, CAN_RAW_FD_FRAMES, &on, sizeof on) < 0) { perror("canseq: CAN_RAW_FD_FRAMES"); return 1; }
    if (setsockopt(s, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof rcvbuf) < 0)
        setsockopt(s, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    struct sockaddr_can addr = { .can_family = AF_CAN, .can_ifindex = (int)if_nametoindex(argv[1]) };
    if (!addr.can_ifindex) { fprintf(stderr, "canseq: no interface %s\n", argv[1]); return 1; }
    if (bind(s, (struct sockaddr *)&addr, sizeof addr) < 0) { perror("canseq: bind"); return 1; }
    if (errors) {
        can_err_mask_t all = CAN_ERR_MASK;
        if (setsockopt(s, SOL_CAN_RAW, CAN_RAW_ERR_FILTER, &all, sizeof all) < 0) { perror("canseq: CAN_RAW_ERR_FILTER"); return 1; }
        if (send(s, &GUEST_ERROR, CAN_MTU, 0) != CAN_MTU) { perror("canseq: send error frame"); return 1; }
    }

    unsigned sent = 0, received = 0, ignored = 0;
    int hub_error_seen = !errors;
    double start = now_ms(), first_rx = 0, last_rx = 0, tx_done = 0;
    char error[200] = "";
    while ((sent < count || received < count || !hub_error_seen) && !error[0]) {
        if (now_ms() - start > 90e3) {
            snprintf(error, sizeof error, "timeout: sent %u, received %u of %u%s", sent, received, count,
                     hub_error_seen ? "" : ", no error frame from the hub");
            break;
        }
        int may_send = sent < count && (!wait_first || received > 0);
        struct pollfd p = { .fd = s, .events = POLLIN | (may_send ? POLLOUT : 0) };
        if (poll(&p, 1, 100) < 0 && errno != EINTR) { perror("canseq: poll"); return 1; }
        if (p.revents & POLLIN) {
            struct canfd_frame f;
            ssize_t n = recv(s, &f, sizeof f, MSG_DONTWAIT);
            if (n == CAN_MTU || n == CANFD_MTU) {
                struct canfd_frame want;
                size_t want_mtu = make_frame(&want, received, rx_base);
                if (f.can_id & CAN_ERR_FLAG) {
                    if (hub_error_seen) {
                        ignored++;
                    } else if (n != CAN_MTU || f.can_id != HUB_ERROR.can_id || f.len != HUB_ERROR.len
                               || memcmp(f.data, HUB_ERROR.data, CAN_ERR_DLC) != 0) {
                        snprintf(error, sizeof error, "error frame: got id %08x len %u data %02x%02x%02x%02x%02x%02x%02x%02x",
                                 f.can_id, f.len, f.data[0], f.data[1], f.data[2], f.data[3], f.data[4], f.data[5],
                                 f.data[6], f.data[7]);
                    } else {
                        hub_error_seen = 1;
                        fprintf(stderr, "canseq: the hub's error frame arrived\n");
                    }
                } else if (!in_family(&f, rx_base)) {
                    ignored++;
                } else if ((size_t)n != want_mtu || f.can_id != want.can_id || f.len != want.len
                           || memcmp(f.data, want.data, want.len) != 0
                           || (n == CANFD_MTU && (f.flags & CANFD_BRS) != (want.flags & CANFD_BRS))) {
                    unsigned seq = (unsigned)f.data[0] << 24 | f.data[1] << 16 | f.data[2] << 8 | f.data[3];
                    snprintf(error, sizeof error, "frame %u: got id %08x len %u seq %u, want id %08x len %u",
                             received, f.can_id, f.len, seq, want.can_id, want.len);
                } else {
                    if (received == 0) first_rx = now_ms();
                    last_rx = now_ms();
                    received++;
                }
            }
        }
        /* A burst per wakeup, then back to reading, so neither side's
         * receive buffer has to hold a whole run. */
        for (int burst = 0; burst < 16 && may_send && (p.revents & POLLOUT); burst++) {
            struct canfd_frame f;
            size_t mtu = make_frame(&f, sent, tx_base);
            ssize_t n = send(s, &f, mtu, MSG_DONTWAIT);
            if (n == (ssize_t)mtu) {
                if (++sent == count) tx_done = now_ms();
            } else if (n < 0 && (errno == EAGAIN || errno == ENOBUFS || errno == EINTR)) {
                break;
            } else {
                snprintf(error, sizeof error, "send frame %u: %s", sent, strerror(errno));
                break;
            }
        }
        if (sent < count && sent % 64 == 0) usleep(200);
    }
    double rx_ms = last_rx - first_rx;
    printf("canseq: %ssent %u in %.0f ms; received %u/%u in order in %.0f ms (%.0f frames/s); %u other frames%s%s\n",
           errors ? (hub_error_seen ? "error frames exchanged; " : "no error frame from the hub; ") : "",
           sent, tx_done - start, received, count, rx_ms, rx_ms > 0 ? received / rx_ms * 1e3 : 0.0, ignored,
           error[0] ? "; ERROR " : "", error);
    return error[0] || received < count || sent < count || !hub_error_seen;
}
