/*
 * C tests of libfieldhub, built against the INSTALLED header and library
 * and run against real `fieldhub hub` processes. One executable; the first
 * argument names the test (ctest registers each name).
 *
 * Order and integrity are checked with sequence-numbered traffic: every
 * frame is a pure function of its number, so a receiver compares each
 * frame byte for byte with the one it expects next.
 */
#define _GNU_SOURCE
#include <linux/can.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <unistd.h>

#include "harness.h"
#include "canxl.h"
#include "lin.h"
#include "raw.h"
#include "virtual_time.h"

/* ---- fh_frame is struct canfd_frame (and starts like struct can_frame) ---- */

_Static_assert(sizeof(fh_frame) == sizeof(struct canfd_frame), "fh_frame size differs from canfd_frame");
_Static_assert(_Alignof(fh_frame) == _Alignof(struct canfd_frame), "fh_frame alignment differs");
_Static_assert(offsetof(fh_frame, can_id) == offsetof(struct canfd_frame, can_id), "can_id offset");
_Static_assert(offsetof(fh_frame, len) == offsetof(struct canfd_frame, len), "len offset");
_Static_assert(offsetof(fh_frame, flags) == offsetof(struct canfd_frame, flags), "flags offset");
_Static_assert(offsetof(fh_frame, __res0) == offsetof(struct canfd_frame, __res0), "__res0 offset");
_Static_assert(offsetof(fh_frame, len8_dlc) == offsetof(struct canfd_frame, __res1), "len8_dlc offset (canfd)");
_Static_assert(offsetof(fh_frame, data) == offsetof(struct canfd_frame, data), "data offset");
_Static_assert(sizeof(((fh_frame *)0)->data) == sizeof(((struct canfd_frame *)0)->data), "data size");
_Static_assert(offsetof(fh_frame, len) == offsetof(struct can_frame, len), "len offset (can_frame)");
_Static_assert(offsetof(fh_frame, len8_dlc) == offsetof(struct can_frame, len8_dlc), "len8_dlc offset (can_frame)");
_Static_assert(offsetof(fh_frame, data) == offsetof(struct can_frame, data), "data offset (can_frame)");
_Static_assert(sizeof(fh_filter) == sizeof(struct can_filter), "fh_filter size");
_Static_assert(offsetof(fh_filter, can_mask) == offsetof(struct can_filter, can_mask), "can_mask offset");
_Static_assert(FH_CAN_EFF_FLAG == CAN_EFF_FLAG && FH_CAN_RTR_FLAG == CAN_RTR_FLAG && FH_CAN_ERR_FLAG == CAN_ERR_FLAG,
               "can_id flags");
_Static_assert(FH_CAN_SFF_MASK == CAN_SFF_MASK && FH_CAN_EFF_MASK == CAN_EFF_MASK, "id masks");
_Static_assert(FH_CANFD_BRS == CANFD_BRS && FH_CANFD_ESI == CANFD_ESI, "CAN FD flags");
#ifdef CANFD_FDF
_Static_assert(FH_CANFD_FDF == CANFD_FDF, "CANFD_FDF");
#endif
_Static_assert(FH_CAN_MAX_DLEN == CAN_MAX_DLEN && FH_CANFD_MAX_DLEN == CANFD_MAX_DLEN, "payload sizes");

static const char *FD_CONFIG =
    "[[channel]]\nname = \"can0\"\nprotocol = \"can\"\n"
    "[[channel]]\nname = \"fd0\"\nprotocol = \"canfd\"\n";

/* Frame number n: ids, formats and payloads vary with n (standard and
 * extended ids, lengths 0..8, remote frames, raw DLCs), and the payload
 * carries n itself where it fits. */
static fh_frame numbered(uint32_t n) {
    fh_frame f;
    memset(&f, 0, sizeof f);
    f.can_id = n % 3 == 0 ? FH_CAN_EFF_FLAG | (0x1000000u + n % 4096u) : 0x100u + n % 0x600u;
    if (n % 97 == 0) {
        f.can_id |= FH_CAN_RTR_FLAG;
        f.len = (uint8_t)(n % 9);
        return f;
    }
    f.len = (uint8_t)(4 + n % 5);
    memcpy(f.data, &n, 4);
    for (int i = 4; i < f.len; i++) f.data[i] = (uint8_t)(n * 7u + (uint32_t)i);
    if (f.len == 8 && n % 11 == 0) f.len8_dlc = (uint8_t)(9 + n % 7);
    return f;
}

static void check_numbered(const fh_frame *got, uint32_t n) {
    fh_frame want = numbered(n);
    CHECK(memcmp(got, &want, sizeof want) == 0,
          "frame %u differs: got id 0x%08X len %u flags 0x%02X dlc %u, want id 0x%08X len %u", n, got->can_id,
          got->len, got->flags, got->len8_dlc, want.can_id, want.len);
}

static fh_port_status port_status(fh_client *c, fh_port port) {
    fh_port_status st;
    memset(&st, 0, sizeof st);
    st.struct_size = sizeof st;
    OK(c, fh_port_get_status(c, port, &st));
    CHECK(st.struct_size == sizeof st, "struct_size %u after the call", st.struct_size);
    return st;
}

/* ---- order, integrity, metadata ---- */

#define ORDER_FRAMES 20000u

struct receiver {
    fh_client *client;
    uint32_t count;
    uint64_t *seqs;
    fh_meta first;
};

static void *receive_numbered(void *arg) {
    struct receiver *r = arg;
    uint64_t last_ts = 0;
    for (uint32_t n = 0; n < r->count; n++) {
        fh_frame f;
        fh_meta m;
        recv_one(r->client, &f, &m);
        check_numbered(&f, n);
        if (n == 0) r->first = m;
        CHECK(m.seq == r->first.seq + n, "frame %u has seq %llu after %llu", n, (unsigned long long)m.seq,
              (unsigned long long)r->first.seq);
        CHECK(m.timestamp_ns >= last_ts, "timestamp went backwards at frame %u", n);
        CHECK(m.sender == r->first.sender && m.port == r->first.port && m.channel_id == r->first.channel_id,
              "metadata changed at frame %u", n);
        CHECK(m.reserved == 0, "meta.reserved is %u", m.reserved);
        last_ts = m.timestamp_ns;
        if (r->seqs) r->seqs[n] = m.seq;
    }
    return NULL;
}

static void test_frames_arrive_in_channel_order_with_metadata(void) {
    hub h;
    hub_start(&h, NULL, 0, NULL);
    fh_client *tx = connect_client(h.url, "tx");
    fh_client *rx = connect_client(h.url, "rx");
    fh_port tx_port = open_port(tx, "can0", FH_PORT_RECEIVE_OWN | FH_PORT_BLOCK_ON_OVERFLOW);
    fh_port rx_port = open_port(rx, "can0", FH_PORT_BLOCK_ON_OVERFLOW);

    struct receiver r = {rx, ORDER_FRAMES, calloc(ORDER_FRAMES, sizeof(uint64_t)), {0}};
    CHECK(r.seqs, "out of memory");
    pthread_t thread;
    CHECK(pthread_create(&thread, NULL, receive_numbered, &r) == 0, "pthread_create");
    for (uint32_t n = 0; n < ORDER_FRAMES; n++) {
        fh_frame f = numbered(n);
        OK(tx, fh_send(tx, tx_port, &f, -1));
    }
    OK(tx, fh_flush(tx));
    pthread_join(thread, NULL);

    fh_port_status tx_st = port_status(tx, tx_port), rx_st = port_status(rx, rx_port);
    CHECK(r.first.sender == tx_st.port_id, "sender %u, tx port id %u", r.first.sender, tx_st.port_id);
    CHECK(r.first.port == rx_port && r.first.channel_id == rx_st.channel_id, "port/channel in metadata");
    CHECK(tx_st.channel_id == rx_st.channel_id, "both ports are on can0");
    CHECK(r.first.flags == 0, "a frame from another port is no echo");
    CHECK(rx_st.rx_dropped == 0 && tx_st.rx_dropped == 0, "nothing dropped");

    /* The sender's own frames come back as echoes, with the same sequence
     * numbers the receiver saw. */
    for (uint32_t n = 0; n < ORDER_FRAMES; n++) {
        fh_frame f;
        fh_meta m;
        recv_one(tx, &f, &m);
        check_numbered(&f, n);
        CHECK(m.flags & FH_META_ECHO, "echo %u lacks FH_META_ECHO", n);
        CHECK(m.seq == r.seqs[n], "echo %u has seq %llu, the receiver saw %llu", n, (unsigned long long)m.seq,
              (unsigned long long)r.seqs[n]);
    }
    fh_frame extra;
    EXPECT(tx, fh_recv(tx, &extra, NULL, 0), FH_ERR_TIMEOUT);
    free(r.seqs);
    fh_client_free(tx);
    fh_client_free(rx);
    CHECK(WIFEXITED(hub_stop(&h)), "hub exit");
}

#define SENDER_THREADS 4
#define FRAMES_PER_THREAD 5000u

struct sender {
    fh_client *client;
    fh_port port;
    uint8_t tag;
};

static void *send_tagged(void *arg) {
    struct sender *s = arg;
    for (uint32_t n = 0; n < FRAMES_PER_THREAD; n++) {
        fh_frame f;
        memset(&f, 0, sizeof f);
        f.can_id = 0x200u + s->tag;
        f.len = 5;
        f.data[0] = s->tag;
        memcpy(f.data + 1, &n, 4);
        OK(s->client, fh_send(s->client, s->port, &f, -1));
    }
    return NULL;
}

static void test_senders_on_several_threads_keep_their_own_order(void) {
    hub h;
    hub_start(&h, NULL, 0, NULL);
    fh_client *tx = connect_client(h.url, "threads");
    fh_client *rx = connect_client(h.url, "rx");
    fh_port tx_port = open_port(tx, "can0", 0);
    open_port(rx, "can0", FH_PORT_BLOCK_ON_OVERFLOW);
    pthread_t threads[SENDER_THREADS];
    struct sender senders[SENDER_THREADS];
    for (int t = 0; t < SENDER_THREADS; t++) {
        senders[t] = (struct sender){tx, tx_port, (uint8_t)t};
        CHECK(pthread_create(&threads[t], NULL, send_tagged, &senders[t]) == 0, "pthread_create");
    }
    uint32_t next[SENDER_THREADS] = {0};
    uint64_t last_seq = 0;
    for (uint32_t i = 0; i < SENDER_THREADS * FRAMES_PER_THREAD; i++) {
        fh_frame f;
        fh_meta m;
        recv_one(rx, &f, &m);
        uint8_t tag = f.data[0];
        uint32_t n;
        memcpy(&n, f.data + 1, 4);
        CHECK(tag < SENDER_THREADS && f.can_id == 0x200u + tag, "unexpected frame 0x%X", f.can_id);
        CHECK(n == next[tag], "thread %u: frame %u arrived when %u was due", tag, n, next[tag]);
        CHECK(i == 0 || m.seq == last_seq + 1, "sequence gap at %u", i);
        next[tag]++;
        last_seq = m.seq;
    }
    for (int t = 0; t < SENDER_THREADS; t++) pthread_join(threads[t], NULL);
    fh_client_free(tx);
    fh_client_free(rx);
    hub_stop(&h);
}

/* ---- filters ---- */

struct filtered_case {
    uint32_t can_id;
    int passes; /* through the filter set below */
};

static const struct filtered_case FILTER_CASES[] = {
    {0x100, 1}, {0x10F, 1}, {0x110, 0}, {0x0FF, 0},
    {FH_CAN_EFF_FLAG | 0x100, 0},                   /* extended id with matching low bits */
    {FH_CAN_EFF_FLAG | 0x1234567, 1}, {FH_CAN_EFF_FLAG | 0x1234568, 0},
    {FH_CAN_RTR_FLAG | 0x300, 1},                   /* any remote frame */
    {FH_CAN_RTR_FLAG | 0x105, 1}, {0x300, 0}, {0x7FF, 0},
    {0x101, 1},                                     /* last: passes, ends the round */
};
#define FILTER_CASE_COUNT (sizeof FILTER_CASES / sizeof FILTER_CASES[0])

static void send_filter_cases(fh_client *tx, fh_port port) {
    for (size_t i = 0; i < FILTER_CASE_COUNT; i++) {
        fh_frame f;
        memset(&f, 0, sizeof f);
        f.can_id = FILTER_CASES[i].can_id;
        if (!(f.can_id & FH_CAN_RTR_FLAG)) {
            f.len = 1;
            f.data[0] = (uint8_t)i;
        }
        OK(tx, fh_send(tx, port, &f, -1));
    }
    OK(tx, fh_flush(tx));
}

/* Everything `rx` got since the last call, split by port: `fh_flush` on the
 * receiver is a barrier behind every frame the hub already fanned out to it. */
static size_t collect(fh_client *rx, fh_port filtered, uint32_t *ids, size_t *unfiltered) {
    OK(rx, fh_flush(rx));
    size_t n = 0;
    *unfiltered = 0;
    fh_frame f;
    fh_meta m;
    int rc;
    while ((rc = fh_recv(rx, &f, &m, 0)) == FH_OK) {
        if (m.port == filtered) {
            CHECK(n < 64, "too many frames");
            ids[n++] = f.can_id;
        } else {
            (*unfiltered)++;
        }
    }
    EXPECT(rx, rc, FH_ERR_TIMEOUT);
    return n;
}

static void test_filters_select_frames_like_socketcan(void) {
    hub h;
    hub_start(&h, NULL, 0, NULL);
    fh_client *tx = connect_client(h.url, "tx");
    fh_client *rx = connect_client(h.url, "rx");
    fh_port tx_port = open_port(tx, "can0", 0);
    fh_port filtered = open_port(rx, "can0", FH_PORT_BLOCK_ON_OVERFLOW);
    open_port(rx, "can0", FH_PORT_BLOCK_ON_OVERFLOW);
    const fh_filter filters[] = {
        {0x100, 0x7F0 | FH_CAN_EFF_FLAG | FH_CAN_RTR_FLAG}, /* standard data frames 0x100..0x10F */
        {FH_CAN_EFF_FLAG | 0x1234567, FH_CAN_EFF_MASK | FH_CAN_EFF_FLAG},
        {FH_CAN_RTR_FLAG, FH_CAN_RTR_FLAG},
    };
    OK(rx, fh_set_filters(rx, filtered, filters, 3));
    send_filter_cases(tx, tx_port);
    uint32_t ids[64];
    size_t unfiltered;
    size_t n = collect(rx, filtered, ids, &unfiltered);
    CHECK(unfiltered == FILTER_CASE_COUNT, "the unfiltered port got %zu of %zu", unfiltered, FILTER_CASE_COUNT);
    size_t k = 0;
    for (size_t i = 0; i < FILTER_CASE_COUNT; i++) {
        if (!FILTER_CASES[i].passes) continue;
        CHECK(k < n && ids[k] == FILTER_CASES[i].can_id, "filtered port: expected 0x%08X as frame %zu",
              FILTER_CASES[i].can_id, k);
        k++;
    }
    CHECK(k == n, "filtered port got %zu frames, expected %zu", n, k);

    /* No filters at all: nothing. */
    OK(rx, fh_set_filters(rx, filtered, NULL, 0));
    send_filter_cases(tx, tx_port);
    n = collect(rx, filtered, ids, &unfiltered);
    CHECK(n == 0 && unfiltered == FILTER_CASE_COUNT, "empty filter set let %zu frames through", n);

    /* The single filter {0, 0}: everything, as on a new port. */
    const fh_filter all = {0, 0};
    OK(rx, fh_set_filters(rx, filtered, &all, 1));
    send_filter_cases(tx, tx_port);
    n = collect(rx, filtered, ids, &unfiltered);
    CHECK(n == FILTER_CASE_COUNT, "filter {0,0} passed %zu of %zu", n, FILTER_CASE_COUNT);

    /* CAN_INV_FILTER: every frame whose 11 low id bits are not 0x100. */
    const fh_filter inverted = {0x100 | CAN_INV_FILTER, 0x7FF};
    OK(rx, fh_set_filters(rx, filtered, &inverted, 1));
    send_filter_cases(tx, tx_port);
    n = collect(rx, filtered, ids, &unfiltered);
    k = 0;
    for (size_t i = 0; i < FILTER_CASE_COUNT; i++) {
        if ((FILTER_CASES[i].can_id & 0x7FFu) == 0x100u) continue;
        CHECK(k < n && ids[k] == FILTER_CASES[i].can_id, "inverted filter: expected 0x%08X as frame %zu",
              FILTER_CASES[i].can_id, k);
        k++;
    }
    CHECK(k == n && n < FILTER_CASE_COUNT, "inverted filter passed %zu frames, expected %zu", n, k);

    EXPECT(rx, fh_set_filters(rx, filtered, NULL, 2), FH_ERR_INVALID_ARGUMENT);
    static fh_filter many[FH_MAX_FILTERS + 1];
    EXPECT(rx, fh_set_filters(rx, filtered, many, FH_MAX_FILTERS + 1), FH_ERR_INVALID_ARGUMENT);
    OK(rx, fh_set_filters(rx, filtered, many, FH_MAX_FILTERS));
    EXPECT(rx, fh_set_filters(rx, 31, filters, 1), FH_ERR_PORT_NOT_OPEN);
    fh_client_free(tx);
    fh_client_free(rx);
    hub_stop(&h);
}

/* ---- timeouts ---- */

struct count_receiver {
    fh_client *client;
    uint32_t count;
};

static void *receive_count(void *arg) {
    struct count_receiver *r = arg;
    for (uint32_t n = 0; n < r->count; n++) {
        fh_frame f;
        recv_one(r->client, &f, NULL);
        check_numbered(&f, n);
    }
    return NULL;
}

static void test_receive_and_send_honour_timeouts(void) {
    hub h;
    hub_start(&h, NULL, 1, NULL);
    fh_client *rx = connect_client(h.url, "rx");
    fh_port rx_port = open_port(rx, "can0", FH_PORT_BLOCK_ON_OVERFLOW);
    fh_frame f;
    uint64_t start = now_ms();
    EXPECT(rx, fh_recv(rx, &f, NULL, 0), FH_ERR_TIMEOUT);
    start = now_ms();
    EXPECT(rx, fh_recv(rx, &f, NULL, 100), FH_ERR_TIMEOUT);
    CHECK(now_ms() - start >= 99, "fh_recv with 100 ms returned after %llu ms",
          (unsigned long long)(now_ms() - start));
    CHECK(strcmp(last_error(rx), fh_strerror(FH_ERR_TIMEOUT)) == 0, "last error after a timeout: %s",
          last_error(rx));

    /* Over the unix socket, whose buffers are small, a stopped hub soon
     * stops taking frames: the send queue fills and fh_send times out. */
    fh_client *tx = connect_client(h.unix_url, "tx");
    fh_port tx_port = open_port(tx, "can0", 0);
    CHECK(kill(h.pid, SIGSTOP) == 0, "SIGSTOP");
    uint32_t sent = 0;
    int rc;
    for (;;) {
        fh_frame next = numbered(sent);
        rc = fh_send(tx, tx_port, &next, 0);
        if (rc != FH_OK) break;
        sent++;
        CHECK(sent < 10000000u, "fh_send never reported a full queue");
    }
    EXPECT(tx, rc, FH_ERR_TIMEOUT);
    /* A full queue at timeout 0 may only mean the client's writer thread has
     * not run yet; it can still move frames into the socket's buffer. Keep
     * sending with a timeout until the socket, too, is full: then a send
     * must wait its whole timeout and fail. */
    fh_frame next;
    for (;;) {
        next = numbered(sent);
        start = now_ms();
        rc = fh_send(tx, tx_port, &next, 50);
        if (rc != FH_OK) break;
        sent++;
        CHECK(sent < 10000000u, "fh_send never reported a full queue");
    }
    EXPECT(tx, rc, FH_ERR_TIMEOUT);
    CHECK(now_ms() - start >= 49, "fh_send with 50 ms returned early");
    CHECK(kill(h.pid, SIGCONT) == 0, "SIGCONT");

    /* Nothing queued was lost: the receiver gets every frame in order. */
    struct count_receiver r = {rx, sent + 1};
    pthread_t thread;
    CHECK(pthread_create(&thread, NULL, receive_count, &r) == 0, "pthread_create");
    OK(tx, fh_send(tx, tx_port, &next, -1));
    pthread_join(thread, NULL);
    OK(tx, fh_flush(tx));
    /* A negative timeout waits until a frame comes. */
    fh_frame one = numbered(0);
    OK(tx, fh_send(tx, tx_port, &one, -1));
    OK(rx, fh_recv(rx, &f, NULL, -1));
    check_numbered(&f, 0);
    CHECK(port_status(rx, rx_port).rx_dropped == 0, "nothing dropped");
    fh_client_free(tx);
    fh_client_free(rx);
    hub_stop(&h);
}

/* ---- CAN FD ---- */

static void test_fd_frames_carry_every_length_and_flag(void) {
    static const uint8_t lengths[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 20, 24, 32, 48, 64};
    static const uint8_t flag_sets[] = {FH_CANFD_FDF, FH_CANFD_FDF | FH_CANFD_BRS, FH_CANFD_FDF | FH_CANFD_ESI,
                                        FH_CANFD_FDF | FH_CANFD_BRS | FH_CANFD_ESI, FH_CANFD_BRS};
    hub h;
    hub_start(&h, FD_CONFIG, 0, NULL);
    fh_client *tx = connect_client(h.url, "tx");
    fh_client *rx = connect_client(h.url, "rx");
    fh_port tx_port = open_port(tx, "fd0", FH_PORT_FD);
    open_port(rx, "fd0", FH_PORT_BLOCK_ON_OVERFLOW | FH_PORT_FD);
    fh_frame sent[2 * sizeof lengths * sizeof flag_sets + 1];
    size_t count = 0;
    for (int ext = 0; ext < 2; ext++) {
        for (size_t l = 0; l < sizeof lengths; l++) {
            for (size_t k = 0; k < sizeof flag_sets; k++) {
                fh_frame f;
                memset(&f, 0, sizeof f);
                f.can_id = ext ? FH_CAN_EFF_FLAG | (0x1ABCD00u + (uint32_t)count) : 0x700u + (uint32_t)count % 0x100u;
                f.len = lengths[l];
                f.flags = flag_sets[k];
                for (int i = 0; i < f.len; i++) f.data[i] = (uint8_t)(count + (size_t)i * 3u);
                OK(tx, fh_send(tx, tx_port, &f, -1));
                f.flags |= FH_CANFD_FDF; /* received FD frames always carry FDF */
                sent[count++] = f;
            }
        }
    }
    /* A classic frame travels on an FD channel too. */
    fh_frame classic = numbered(1);
    OK(tx, fh_send(tx, tx_port, &classic, -1));
    sent[count++] = classic;
    for (size_t i = 0; i < count; i++) {
        fh_frame got;
        recv_one(rx, &got, NULL);
        CHECK(memcmp(&got, &sent[i], sizeof got) == 0, "FD frame %zu: got id 0x%08X len %u flags 0x%02X", i,
              got.can_id, got.len, got.flags);
    }

    /* Oversize frames are refused before they leave, naming the problem. */
    fh_frame bad;
    memset(&bad, 0, sizeof bad);
    bad.can_id = 0x10;
    bad.len = 9;
    EXPECT(tx, fh_send(tx, tx_port, &bad, -1), FH_ERR_INVALID_FRAME);
    CHECK(strstr(last_error(tx), "at most 8 data bytes, got len 9"), "message: %s", last_error(tx));
    bad.len = 13;
    bad.flags = FH_CANFD_FDF;
    EXPECT(tx, fh_send(tx, tx_port, &bad, -1), FH_ERR_INVALID_FRAME);
    CHECK(strstr(last_error(tx), "13 is not a valid CAN FD length"), "message: %s", last_error(tx));
    bad.len = 65;
    EXPECT(tx, fh_send(tx, tx_port, &bad, -1), FH_ERR_INVALID_FRAME);
    bad.len = 8;
    bad.can_id = FH_CAN_RTR_FLAG | 0x10;
    EXPECT(tx, fh_send(tx, tx_port, &bad, -1), FH_ERR_INVALID_FRAME);
    bad.flags = 0;
    bad.can_id = 0x800; /* 12 bits without FH_CAN_EFF_FLAG */
    EXPECT(tx, fh_send(tx, tx_port, &bad, -1), FH_ERR_INVALID_FRAME);
    CHECK(strstr(last_error(tx), "FH_CAN_EFF_FLAG"), "message: %s", last_error(tx));

    /* An FD frame on a classic channel is refused when it is sent, as
     * write() refuses it on a classic SocketCAN interface, and the
     * connection carries on. */
    fh_port classic_port = open_port(tx, "can0", FH_PORT_FD);
    fh_frame fd = sent[20];
    EXPECT(tx, fh_send(tx, classic_port, &fd, -1), FH_ERR_INVALID_FRAME);
    CHECK(strstr(last_error(tx), "classic CAN"), "message: %s", last_error(tx));
    OK(tx, fh_send(tx, classic_port, &classic, -1));
    OK(tx, fh_flush(tx));
    fh_client_free(tx);
    fh_client_free(rx);
    hub_stop(&h);
}

/* ---- errors ---- */

static void test_errors_name_the_problem(void) {
    /* Every code has its own message; unknown codes get one too. */
    for (int code = FH_ERR_INTERNAL; code <= FH_OK; code++) {
        const char *text = fh_strerror(code);
        CHECK(text && *text, "no message for %d", code);
        for (int other = code + 1; other <= FH_OK; other++) {
            CHECK(strcmp(text, fh_strerror(other)) != 0, "codes %d and %d share a message", code, other);
        }
    }
    CHECK(strstr(fh_strerror(12345), "unknown"), "unknown code message");

    /* A missing hub: a port nobody listens on. */
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t addr_len = sizeof addr;
    CHECK(bind(s, (struct sockaddr *)&addr, sizeof addr) == 0 && getsockname(s, (struct sockaddr *)&addr, &addr_len) == 0,
          "bind");
    close(s);
    char url[64];
    snprintf(url, sizeof url, "tcp://127.0.0.1:%u", ntohs(addr.sin_port));
    fh_client *c = fh_client_new();
    EXPECT(c, fh_connect(c, url, "nobody", NULL), FH_ERR_CONNECT);
    CHECK(strstr(last_error(c), url), "the message names the URL: %s", last_error(c));
    /* fh_last_error works like snprintf. */
    char small[8];
    size_t full = fh_last_error(c, small, sizeof small);
    CHECK(full == strlen(last_error(c)) && strlen(small) == sizeof small - 1, "truncation");
    CHECK(fh_last_error(c, NULL, 0) == full, "length query");
    fh_client_free(c);

    c = fh_client_new();
    EXPECT(c, fh_connect(c, "unix:/nonexistent/fieldhub.sock", NULL, NULL), FH_ERR_CONNECT);
    fh_client_free(c);
    c = fh_client_new();
    EXPECT(c, fh_connect(c, "http://127.0.0.1:1", NULL, NULL), FH_ERR_INVALID_URL);
    /* A NULL URL is the default hub, here $FIELDHUB_HUB. */
    CHECK(setenv("FIELDHUB_HUB", "http://127.0.0.1:1", 1) == 0, "setenv");
    EXPECT(c, fh_connect(c, NULL, NULL, NULL), FH_ERR_INVALID_URL);
    CHECK(unsetenv("FIELDHUB_HUB") == 0, "unsetenv");
    fh_port port = 0;
    fh_frame f = numbered(1);
    EXPECT(c, fh_port_open(c, "can0", NULL, 0, &port), FH_ERR_NOT_CONNECTED);
    EXPECT(c, fh_send(c, 0, &f, 0), FH_ERR_NOT_CONNECTED);
    EXPECT(c, fh_recv(c, &f, NULL, 0), FH_ERR_NOT_CONNECTED);
    fh_client_free(c);
    EXPECT(NULL, fh_send(NULL, 0, &f, 0), FH_ERR_INVALID_ARGUMENT);
    EXPECT(NULL, fh_flush(NULL), FH_ERR_INVALID_ARGUMENT);
    CHECK(fh_last_error(NULL, small, sizeof small) == 0, "NULL client has no last error");
    fh_client_free(NULL);

    hub h;
    hub_start(&h, NULL, 0, NULL);
    c = connect_client(h.url, "errors");
    EXPECT(c, fh_connect(c, h.url, NULL, NULL), FH_ERR_INVALID_ARGUMENT);
    EXPECT(c, fh_port_open(c, "nosuch", NULL, 0, &port), FH_ERR_UNKNOWN_CHANNEL);
    CHECK(strstr(last_error(c), "nosuch"), "the message names the channel: %s", last_error(c));
    EXPECT(c, fh_port_open(c, "can0", NULL, 0x80, &port), FH_ERR_INVALID_ARGUMENT);
    EXPECT(c, fh_port_open(c, "can0", NULL, 0, NULL), FH_ERR_INVALID_ARGUMENT);
    EXPECT(c, fh_port_open(c, NULL, NULL, 0, &port), FH_ERR_INVALID_ARGUMENT);
    EXPECT(c, fh_port_open(c, "\xff", NULL, 0, &port), FH_ERR_INVALID_ARGUMENT);
    OK(c, fh_port_open(c, "can0", "ecu-a", 0, &port));
    fh_client *other = connect_client(h.url, "other");
    fh_port taken;
    EXPECT(other, fh_port_open(other, "can1", "ecu-a", 0, &taken), FH_ERR_PORT_NAME_TAKEN);
    EXPECT(c, fh_send(c, (fh_port)(port + 1), &f, 0), FH_ERR_PORT_NOT_OPEN);
    EXPECT(c, fh_send(c, 999, &f, 0), FH_ERR_PORT_NOT_OPEN);
    EXPECT(c, fh_send(c, port, NULL, 0), FH_ERR_INVALID_ARGUMENT);
    OK(c, fh_port_close(c, port));
    EXPECT(c, fh_send(c, port, &f, 0), FH_ERR_PORT_NOT_OPEN);
    EXPECT(c, fh_port_close(c, port), FH_ERR_PORT_NOT_OPEN);
    /* 32 ports per client. */
    for (int i = 0; i < 32; i++) OK(c, fh_port_open(c, "can0", NULL, 0, &port));
    EXPECT(c, fh_port_open(c, "can0", NULL, 0, &port), FH_ERR_TOO_MANY_PORTS);
    fh_client_free(other);

    /* The connection ends when the hub goes away. */
    hub_stop(&h);
    fh_frame got;
    EXPECT(c, fh_recv(c, &got, NULL, PATIENCE_MS), FH_ERR_CLOSED);
    CHECK(strstr(last_error(c), "shutting down"), "the message says why: %s", last_error(c));
    EXPECT(c, fh_flush(c), FH_ERR_CLOSED);
    EXPECT(c, fh_port_open(c, "can0", NULL, 0, &port), FH_ERR_CLOSED);
    fh_client_free(c);

    /* A hub with a token (from a private file) refuses clients without it;
     * a NULL token is the one $FIELDHUB_TOKEN_FILE's file holds. */
    char token_path[] = "/tmp/fieldhub-c-token-XXXXXX";
    int token_fd = mkstemp(token_path); /* mode 0600 */
    CHECK(token_fd >= 0 && write(token_fd, "sesame\n", 7) == 7, "write the token file");
    close(token_fd);
    const char *const token_args[] = {"--token-file", token_path, NULL};
    hub_start(&h, NULL, 0, token_args);
    c = fh_client_new();
    EXPECT(c, fh_connect(c, h.url, "guest", "wrong"), FH_ERR_REFUSED);
    fh_client_free(c);
    c = fh_client_new();
    OK(c, fh_connect(c, h.url, "guest", "sesame"));
    fh_client_free(c);
    setenv("FIELDHUB_TOKEN_FILE", token_path, 1);
    c = fh_client_new();
    OK(c, fh_connect(c, h.url, "guest", NULL));
    fh_client_free(c);
    unsetenv("FIELDHUB_TOKEN_FILE");
    hub_stop(&h);
    unlink(token_path);
}

/* ---- the pollable fd ---- */

static int readable(int fd, int timeout_ms) {
    struct pollfd p = {fd, POLLIN, 0};
    int n = poll(&p, 1, timeout_ms);
    CHECK(n >= 0, "poll failed");
    return n == 1 && (p.revents & POLLIN);
}

#define POLL_FRAMES 5000u

static void test_fd_is_readable_exactly_while_frames_wait(void) {
    hub h;
    hub_start(&h, NULL, 0, NULL);
    fh_client *tx = connect_client(h.url, "tx");
    fh_client *rx = connect_client(h.url, "rx");
    fh_port tx_port = open_port(tx, "can0", 0);
    open_port(rx, "can0", FH_PORT_BLOCK_ON_OVERFLOW);
    int fd = -1, again = -1;
    OK(rx, fh_fileno(rx, &fd));
    OK(rx, fh_fileno(rx, &again));
    CHECK(fd >= 0 && fd == again, "one fd per client");
    CHECK(!readable(fd, 0), "readable with nothing to receive");

    fh_frame f = numbered(0);
    OK(tx, fh_send(tx, tx_port, &f, -1));
    CHECK(readable(fd, PATIENCE_MS), "not readable with a frame waiting");
    OK(rx, fh_recv(rx, &f, NULL, 0));
    check_numbered(&f, 0);
    CHECK(!readable(fd, 0), "still readable after the only frame was taken");

    /* A firmware-style main loop: poll, then drain without waiting. */
    for (uint32_t n = 1; n <= POLL_FRAMES; n++) {
        fh_frame next = numbered(n);
        OK(tx, fh_send(tx, tx_port, &next, -1));
    }
    uint32_t n = 1;
    while (n <= POLL_FRAMES) {
        CHECK(readable(fd, PATIENCE_MS), "stalled at frame %u", n);
        int rc;
        while ((rc = fh_recv(rx, &f, NULL, 0)) == FH_OK) check_numbered(&f, n++);
        EXPECT(rx, rc, FH_ERR_TIMEOUT);
    }
    CHECK(!readable(fd, 0), "readable after draining");

    /* The end of the connection makes it readable too. */
    hub_stop(&h);
    CHECK(readable(fd, PATIENCE_MS), "not readable after the hub went away");
    EXPECT(rx, fh_recv(rx, &f, NULL, 0), FH_ERR_CLOSED);
    fh_client_free(tx);
    fh_client_free(rx);
}

/* ---- panics ---- */

static void test_panic_inside_the_library_becomes_an_error_code(void) {
#ifdef FH_TEST_HOOKS
    hub h;
    hub_start(&h, NULL, 0, NULL);
    fh_client *c = connect_client(h.url, "panicky");
    fh_port port;
    OK(c, fh_test_inject_panic(c));
    EXPECT(c, fh_port_open(c, "can0", NULL, FH_PORT_RECEIVE_OWN, &port), FH_ERR_INTERNAL);
    CHECK(strstr(last_error(c), "panic injected by fh_test_inject_panic"), "message: %s", last_error(c));
    port = open_port(c, "can0", FH_PORT_RECEIVE_OWN);
    fh_frame f = numbered(5);
    OK(c, fh_test_inject_panic(c));
    EXPECT(c, fh_send(c, port, &f, -1), FH_ERR_INTERNAL);
    OK(c, fh_test_inject_panic(c));
    EXPECT(c, fh_recv(c, &f, NULL, 0), FH_ERR_INTERNAL);
    /* The client is still whole. */
    OK(c, fh_send(c, port, &f, -1));
    fh_frame echo;
    recv_one(c, &echo, NULL);
    check_numbered(&echo, 5);
    fh_client_free(c);
    hub_stop(&h);
#else
    fail_at(__FILE__, __LINE__, "libfieldhub was installed without FH_TEST_HOOKS (configure with -DFIELDHUB_TEST_HOOKS=ON)");
#endif
}

/* ---- port status ---- */

struct flusher {
    fh_client *client;
    volatile int done;
};

static void *flush_in_background(void *arg) {
    struct flusher *f = arg;
    OK(f->client, fh_flush(f->client));
    __atomic_store_n(&f->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

#define OVERRUN_FRAMES 400000u

static void test_port_status_counts_overruns_and_respects_struct_size(void) {
    hub h;
    hub_start(&h, NULL, 0, NULL);
    fh_client *tx = connect_client(h.url, "tx");
    fh_client *sleeper = connect_client(h.url, "sleeper");
    fh_port tx_port = open_port(tx, "can0", 0);
    fh_port sleepy = open_port(sleeper, "can0", 0);

    /* Enough frames to overrun every buffer between the hub and the sleeper. */
    for (uint32_t n = 0; n < OVERRUN_FRAMES; n++) {
        fh_frame f;
        memset(&f, 0, sizeof f);
        f.can_id = 0x10;
        f.len = 4;
        memcpy(f.data, &n, 4);
        OK(tx, fh_send(tx, tx_port, &f, -1));
    }
    OK(tx, fh_flush(tx));

    /* The sleeper wakes up: its flush's answer queues behind every frame
     * still buffered for it, so once it returns everything is here. */
    struct flusher fl = {sleeper, 0};
    pthread_t thread;
    CHECK(pthread_create(&thread, NULL, flush_in_background, &fl) == 0, "pthread_create");
    uint64_t got = 0;
    int64_t last = -1;
    for (;;) {
        int finished = __atomic_load_n(&fl.done, __ATOMIC_ACQUIRE);
        fh_frame f;
        int rc;
        while ((rc = fh_recv(sleeper, &f, NULL, finished ? 0 : 50)) == FH_OK) {
            uint32_t n;
            memcpy(&n, f.data, 4);
            CHECK((int64_t)n > last, "frame %u after %lld: out of order or repeated", n, (long long)last);
            last = n;
            got++;
        }
        EXPECT(sleeper, rc, FH_ERR_TIMEOUT);
        if (finished) break;
    }
    pthread_join(thread, NULL);
    fh_port_status st = port_status(sleeper, sleepy);
    CHECK(st.rx_dropped > 0, "the sleeper should have overrun");
    CHECK(got + st.rx_dropped == OVERRUN_FRAMES, "got %llu + dropped %llu != sent %u", (unsigned long long)got,
          (unsigned long long)st.rx_dropped, OVERRUN_FRAMES);
    CHECK(st.port == sleepy && st.port_id != 0 && st.flags == 0, "identity fields (can0 is classic)");

    /* A caller built against an older, shorter struct gets only its part. */
    fh_port_status old;
    memset(&old, 0xEE, sizeof old);
    old.struct_size = (uint32_t)offsetof(fh_port_status, rx_dropped);
    OK(sleeper, fh_port_get_status(sleeper, sleepy, &old));
    CHECK(old.struct_size == offsetof(fh_port_status, rx_dropped), "struct_size %u", old.struct_size);
    CHECK(old.port_id == st.port_id, "short struct filled");
    CHECK(old.rx_dropped == 0xEEEEEEEEEEEEEEEEull, "wrote past the caller's struct_size");
    /* A caller with a newer, longer struct learns how much was filled. */
    union {
        fh_port_status st;
        unsigned char bytes[64];
    } newer;
    memset(&newer, 0, sizeof newer);
    newer.st.struct_size = sizeof newer;
    OK(sleeper, fh_port_get_status(sleeper, sleepy, &newer.st));
    CHECK(newer.st.struct_size == sizeof(fh_port_status), "filled %u bytes", newer.st.struct_size);
    fh_port_status unset;
    memset(&unset, 0, sizeof unset);
    EXPECT(sleeper, fh_port_get_status(sleeper, sleepy, &unset), FH_ERR_INVALID_ARGUMENT);
    fh_client_free(tx);
    fh_client_free(sleeper);
    hub_stop(&h);
}

/* ---- fh_close from another thread ---- */

struct blocked_call {
    fh_client *client;
    fh_port port;
    int rc;
    uint64_t returned_ms;
};

static void *receive_forever(void *arg) {
    struct blocked_call *call = arg;
    fh_frame f;
    call->rc = fh_recv(call->client, &f, NULL, -1);
    call->returned_ms = now_ms();
    return NULL;
}

static void test_close_from_another_thread_wakes_a_blocked_receive(void) {
    hub h;
    hub_start(&h, NULL, 0, NULL);
    fh_client *c = connect_client(h.url, "closer");
    fh_port port = open_port(c, "can0", 0);
    struct blocked_call call = {c, port, 1, 0};
    pthread_t thread;
    CHECK(pthread_create(&thread, NULL, receive_forever, &call) == 0, "pthread_create");
    struct timespec pause = {0, 100 * 1000 * 1000};
    nanosleep(&pause, NULL);
    CHECK(call.rc == 1, "fh_recv returned %d before the close", call.rc);
    uint64_t closed_at = now_ms();
    OK(c, fh_close(c));
    pthread_join(thread, NULL);
    CHECK(call.rc == FH_ERR_CLOSED, "the blocked fh_recv returned %d, not FH_ERR_CLOSED", call.rc);
    CHECK(call.returned_ms >= closed_at, "fh_recv returned before the close");
    /* Every later call says closed; closing again is harmless. */
    fh_frame f = numbered(1);
    EXPECT(c, fh_send(c, port, &f, -1), FH_ERR_CLOSED);
    EXPECT(c, fh_recv(c, &f, NULL, 0), FH_ERR_CLOSED);
    OK(c, fh_close(c));
    EXPECT(NULL, fh_close(NULL), FH_ERR_INVALID_ARGUMENT);
    fh_client_free(c);
    /* A handle never connected closes too. */
    fh_client *idle = fh_client_new();
    OK(idle, fh_close(idle));
    fh_client_free(idle);
    hub_stop(&h);
}

/* ---- CAN FD and listen-only ports, as SocketCAN sockets ---- */

static void test_fd_and_listen_only_ports_follow_socketcan(void) {
    hub h;
    hub_start(&h, FD_CONFIG, 0, NULL);
    fh_client *tx = connect_client(h.url, "tx");
    fh_client *rx = connect_client(h.url, "rx");
    fh_port fd_tx = open_port(tx, "fd0", FH_PORT_FD);
    fh_port classic_tx = open_port(tx, "fd0", 0);
    fh_client *listener = connect_client(h.url, "listener");
    fh_port quiet = open_port(listener, "fd0", FH_PORT_LISTEN_ONLY | FH_PORT_FD | FH_PORT_BLOCK_ON_OVERFLOW);
    fh_port fd_on_can0 = open_port(tx, "can0", FH_PORT_FD);
    fh_port fd_rx = open_port(rx, "fd0", FH_PORT_FD | FH_PORT_BLOCK_ON_OVERFLOW);
    fh_port classic_rx = open_port(rx, "fd0", FH_PORT_BLOCK_ON_OVERFLOW);

    CHECK(port_status(tx, fd_tx).flags == FH_STATUS_CHANNEL_FD, "fd0 carries CAN FD");
    CHECK(port_status(tx, fd_on_can0).flags == 0, "can0 is classic");

    /* Refused at once, nothing sent: as write() on a can_raw socket. */
    fh_frame fd;
    memset(&fd, 0, sizeof fd);
    fd.can_id = 0x321;
    fd.len = 12;
    fd.flags = FH_CANFD_FDF;
    EXPECT(tx, fh_send(tx, classic_tx, &fd, -1), FH_ERR_INVALID_FRAME);
    CHECK(strstr(last_error(tx), "opened without FD"), "message: %s", last_error(tx));
    EXPECT(tx, fh_send(tx, fd_on_can0, &fd, -1), FH_ERR_INVALID_FRAME);
    CHECK(strstr(last_error(tx), "classic CAN"), "message: %s", last_error(tx));
    fh_frame classic = numbered(0);
    EXPECT(listener, fh_send(listener, quiet, &classic, -1), FH_ERR_INVALID_FRAME);
    CHECK(strstr(last_error(listener), "listen-only"), "message: %s", last_error(listener));

    /* Sequence-numbered traffic, every other frame FD: the FD port gets all
     * of it in order, the classic port only the classic half, and the
     * listen-only port hears it all. */
    enum { FRAMES = 2000 };
    for (uint32_t n = 0; n < FRAMES; n++) {
        fh_frame f = numbered(n);
        if (n % 2 == 0) {
            memset(&f, 0, sizeof f);
            f.can_id = 0x400;
            f.len = 16;
            f.flags = FH_CANFD_FDF;
            memcpy(f.data, &n, sizeof n);
        }
        OK(tx, fh_send(tx, fd_tx, &f, -1));
    }
    OK(tx, fh_flush(tx));
    uint32_t on_fd = 0, on_classic = 0, heard = 0;
    fh_frame f;
    fh_meta m;
    while (on_fd + on_classic < FRAMES + FRAMES / 2) {
        recv_one(rx, &f, &m);
        int is_fd = (f.flags & FH_CANFD_FDF) != 0;
        if (m.port == fd_rx) {
            CHECK(is_fd == (on_fd % 2 == 0), "FD port: frame %u has the wrong kind", on_fd);
            if (is_fd) {
                CHECK(memcmp(f.data, &on_fd, sizeof on_fd) == 0, "FD port: CAN FD frame %u out of order", on_fd);
            } else {
                check_numbered(&f, on_fd);
            }
            on_fd++;
        } else {
            CHECK(m.port == classic_rx && !is_fd, "a CAN FD frame reached the classic port");
            check_numbered(&f, 2 * on_classic + 1);
            on_classic++;
        }
    }
    while (heard < FRAMES) {
        recv_one(listener, &f, &m);
        CHECK(m.port == quiet, "listener: a frame for port %u", m.port);
        heard++;
    }
    CHECK(on_fd == FRAMES && on_classic == FRAMES / 2, "fd %u classic %u", on_fd, on_classic);
    CHECK(port_status(rx, classic_rx).rx_dropped == 0, "skipped frames are not drops");
    CHECK(port_status(listener, quiet).rx_dropped == 0, "the listen-only port lost nothing");
    fh_client_free(listener);
    fh_client_free(tx);
    fh_client_free(rx);
    hub_stop(&h);
}

/* ---- SocketCAN code keeps its frames ---- */

static void test_socketcan_frames_pass_unchanged(void) {
    hub h;
    hub_start(&h, FD_CONFIG, 0, NULL);
    fh_client *c = connect_client(h.url, "socketcan");
    fh_port port = open_port(c, "fd0", FH_PORT_RECEIVE_OWN | FH_PORT_FD);

    /* struct can_frame as SocketCAN code fills it, copied into an fh_frame
     * (a can_frame is shorter, so it is copied, not cast). */
    struct can_frame cf;
    memset(&cf, 0, sizeof cf);
    cf.can_id = CAN_EFF_FLAG | 0x18DAF110;
    cf.len = 8;
    cf.len8_dlc = 12;
    for (int i = 0; i < 8; i++) cf.data[i] = (uint8_t)(0xA0 + i);
    fh_frame f;
    memset(&f, 0, sizeof f);
    memcpy(&f, &cf, sizeof cf);
    OK(c, fh_send(c, port, &f, -1));

    /* struct canfd_frame is passed as it is, both ways. */
    struct canfd_frame fd;
    memset(&fd, 0, sizeof fd);
    fd.can_id = 0x123;
    fd.len = 48;
    fd.flags = CANFD_BRS | CANFD_FDF;
    for (int i = 0; i < 48; i++) fd.data[i] = (uint8_t)i;
    OK(c, fh_send(c, port, (const fh_frame *)(const void *)&fd, -1));

    fh_frame got;
    recv_one(c, &got, NULL);
    struct can_frame cf_back;
    memcpy(&cf_back, &got, sizeof cf_back);
    CHECK(memcmp(&cf_back, &cf, sizeof cf) == 0, "can_frame changed on the way");
    struct canfd_frame fd_back;
    recv_one(c, (fh_frame *)(void *)&fd_back, NULL);
    CHECK(memcmp(&fd_back, &fd, sizeof fd) == 0, "canfd_frame changed on the way");
    fh_client_free(c);
    hub_stop(&h);
}

/* ---- the example ECU and the candump-like reader ---- */

static const char *example(const char *var) {
    const char *path = getenv(var);
    CHECK(path && *path, "%s is not set (path of the example binary)", var);
    return path;
}

static void test_example_ecu_answers_c_and_rust_peers_through_the_hub(void) {
    hub h;
    hub_start(&h, NULL, 0, NULL);
    const char *const ecu_argv[] = {example("FIELDHUB_ECU"), h.url, "can0", "10", NULL};
    pid_t ecu = spawn(ecu_argv, NULL, "ecu.log");
    fh_client *tester = connect_client(h.url, "tester");
    fh_port port = open_port(tester, "can0", 0);
    const fh_filter only_ecu[] = {{0x100, FH_CAN_SFF_MASK | FH_CAN_EFF_FLAG | FH_CAN_RTR_FLAG},
                                  {0x7E8, FH_CAN_SFF_MASK | FH_CAN_EFF_FLAG | FH_CAN_RTR_FLAG}};
    OK(tester, fh_set_filters(tester, port, only_ecu, 2));

    /* Status frames come periodically, their counter counting up. */
    fh_frame f;
    uint32_t first = 0, counter = 0;
    for (int i = 0; i < 3; i++) {
        recv_one(tester, &f, NULL);
        CHECK(f.can_id == 0x100 && f.len == 8, "status frame: id 0x%X len %u", f.can_id, f.len);
        memcpy(&counter, f.data, 4);
        if (i == 0) first = counter;
        CHECK(counter == first + (uint32_t)i, "status counter %u after %u", counter, first);
    }

    /* Requests to 0x7E0 get answers from 0x7E8 (OBD-II style, ISO-TP
     * single frames). */
    struct exchange {
        uint8_t request[3];
        uint8_t answer[4]; /* length byte, then the expected head */
    } exchanges[] = {
        {{0x02, 0x01, 0x0D}, {0x03, 0x41, 0x0D, 0x00}}, /* vehicle speed */
        {{0x02, 0x01, 0x0C}, {0x04, 0x41, 0x0C, 0x00}}, /* engine speed */
        {{0x02, 0x09, 0x02}, {0x03, 0x7F, 0x09, 0x11}}, /* not supported */
    };
    for (size_t i = 0; i < sizeof exchanges / sizeof exchanges[0]; i++) {
        for (int round = 0; round < 50; round++) {
            fh_frame request;
            memset(&request, 0, sizeof request);
            request.can_id = 0x7E0;
            request.len = 8;
            memset(request.data, 0x55, 8);
            memcpy(request.data, exchanges[i].request, 3);
            OK(tester, fh_send(tester, port, &request, -1));
            for (;;) {
                recv_one(tester, &f, NULL);
                if (f.can_id == 0x7E8) break;
            }
            CHECK(f.len == 8 && f.data[0] == exchanges[i].answer[0] && f.data[1] == exchanges[i].answer[1] &&
                      f.data[2] == exchanges[i].answer[2],
                  "answer to request %zu: %02X %02X %02X", i, f.data[0], f.data[1], f.data[2]);
            if (exchanges[i].answer[1] == 0x7F) CHECK(f.data[3] == 0x11, "negative response code %02X", f.data[3]);
        }
    }

    /* A Rust peer: `fieldhub send` asks, the ECU answers (seen here), and
     * `fieldhub dump` reads the ECU's status frames. */
    const char *bin = getenv("FIELDHUB_BIN");
    const char *const send_argv[] = {bin, "send", "--hub", h.url, "can0", "7E0#02010D5555555555", NULL};
    int status = wait_child(spawn(send_argv, NULL, NULL));
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "fieldhub send failed (0x%x)", status);
    do {
        recv_one(tester, &f, NULL);
    } while (f.can_id != 0x7E8);
    CHECK(f.data[0] == 0x03 && f.data[1] == 0x41 && f.data[2] == 0x0D, "answer to the Rust peer");
    const char *const dump_argv[] = {bin, "dump", "--hub", h.url, "-n", "2", "can0,100:7FF", NULL};
    status = wait_child(spawn(dump_argv, "rust-dump.out", NULL));
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "fieldhub dump failed (0x%x)", status);
    char *dumped = read_file("rust-dump.out");
    const char *second = strstr(dumped, "  can0  100   [8]  ");
    CHECK(second && strstr(second + 1, "  can0  100   [8]  "), "fieldhub dump printed:\n%s", dumped);
    free(dumped);

    OK(tester, fh_flush(tester));
    kill(ecu, SIGTERM);
    status = wait_child(ecu);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the ECU did not exit cleanly (status 0x%x)", status);
    char *log = read_file("ecu.log");
    CHECK(strstr(log, "answered 151 requests"), "ECU log:\n%s", log);
    free(log);
    fh_client_free(tester);
    hub_stop(&h);
}

static void test_example_candump_prints_frames_like_candump(void) {
    hub h;
    hub_start(&h, FD_CONFIG, 0, NULL);
    const char *const dump_argv[] = {example("FIELDHUB_CANDUMP"), "-n", "5", h.url, "fd0,100:700", NULL};
    pid_t dump = spawn(dump_argv, "candump.out", "candump.err");
    wait_for_text("candump.err", "listening on fd0");
    fh_client *tx = connect_client(h.url, "tx");
    fh_port port = open_port(tx, "fd0", FH_PORT_FD);
    fh_frame frames[6];
    memset(frames, 0, sizeof frames);
    frames[0].can_id = 0x123;
    frames[0].len = 4;
    memcpy(frames[0].data, "\xDE\xAD\xBE\xEF", 4);
    frames[1].can_id = 0x223; /* filtered out */
    frames[2].can_id = FH_CAN_EFF_FLAG | 0x00000100;
    frames[2].len = 1;
    frames[2].data[0] = 0x01;
    frames[3].can_id = FH_CAN_RTR_FLAG | 0x1FF;
    frames[3].len = 2;
    frames[4].can_id = 0x100;
    frames[4].len = 12;
    frames[4].flags = FH_CANFD_FDF | FH_CANFD_BRS;
    for (int i = 0; i < 12; i++) frames[4].data[i] = (uint8_t)(0x11 * (i + 1));
    frames[5].can_id = 0x1AB;
    for (int i = 0; i < 6; i++) OK(tx, fh_send(tx, port, &frames[i], -1));
    int status = wait_child(dump);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "candump exited with 0x%x", status);
    char *out = read_file("candump.out");
    const char *expected =
        "  fd0  123   [4]  DE AD BE EF\n"
        "  fd0  00000100   [1]  01\n"
        "  fd0  1FF   [2]  remote request\n"
        "  fd0  100  [12]  11 22 33 44 55 66 77 88 99 AA BB CC\n"
        "  fd0  1AB   [0] \n";
    CHECK(strcmp(out, expected) == 0, "candump printed:\n%s\nexpected:\n%s", out, expected);
    free(out);
    fh_client_free(tx);
    hub_stop(&h);
}

/* ---- fh_connect(NULL): the tools' default hub, TCP when shm cannot serve ---- */

/* A hub serving shm://default in a private runtime directory whose session
 * socket no longer leads to it (a killed hub's, or a squatter's): a NULL URL
 * falls back to the TCP listener the hub publishes next to it, says why in
 * one line on stderr, and the frame arrives. */
static void test_a_null_url_falls_back_to_tcp_with_one_line_when_shm_default_cannot_be_used(void) {
    char runtime[] = "/tmp/fh-ctest-runtime-XXXXXX";
    CHECK(mkdtemp(runtime), "mkdtemp");
    CHECK(setenv("XDG_RUNTIME_DIR", runtime, 1) == 0 && unsetenv("FIELDHUB_HUB") == 0, "environment");
    hub h;
    memset(&h, 0, sizeof h);
    snprintf(h.log, sizeof h.log, "hub-%d-fallback.log", (int)getpid());
    const char *argv[] = {getenv("FIELDHUB_BIN"), "hub", "--listen", "127.0.0.1:0", "--shm", "default", NULL};
    CHECK(argv[0], "FIELDHUB_BIN is not set");
    h.pid = spawn(argv, NULL, h.log);
    wait_for_text(h.log, "listening on tcp://");
    char *text = read_file(h.log);
    const char *at = strstr(text, "listening on tcp://") + strlen("listening on ");
    snprintf(h.url, sizeof h.url, "%.*s", (int)strcspn(at, " \r\n"), at);
    free(text);
    fh_client *watcher = connect_client(h.url, "watcher");
    open_port(watcher, "can0", 0);
    OK(watcher, fh_flush(watcher));

    char path[100]; /* fits sun_path */
    CHECK(snprintf(path, sizeof path, "%s/fieldhub/default.sock", runtime) < (int)sizeof path, "path length");
    CHECK(unlink(path) == 0, "the hub's session socket %s", path);
    int dead = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path);
    CHECK(dead >= 0 && bind(dead, (struct sockaddr *)&addr, sizeof addr) == 0, "bind %s", path);
    close(dead); /* the socket file stays; nothing listens on it */

    char err_path[64];
    snprintf(err_path, sizeof err_path, "fallback-%d.err", (int)getpid());
    fflush(stderr);
    int saved = dup(2), err = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    CHECK(saved >= 0 && err >= 0 && dup2(err, 2) == 2, "redirect stderr");
    fh_client *c = fh_client_new();
    int rc = fh_connect(c, NULL, "defaulted", NULL);
    fflush(stderr);
    CHECK(dup2(saved, 2) == 2, "restore stderr");
    close(saved);
    close(err);
    OK(c, rc);
    char *said = read_file(err_path);
    unlink(err_path);
    char expected[300];
    snprintf(expected, sizeof expected, "; using %s instead\n", h.url);
    CHECK(strncmp(said, "fieldhub: shm://default cannot be used (", 40) == 0 && strstr(said, expected) &&
              strchr(said, '\n') == said + strlen(said) - 1,
          "one line saying why, naming %s: %s", h.url, said);
    free(said);

    fh_port port = open_port(c, "can0", 0);
    fh_frame f = numbered(7);
    OK(c, fh_send(c, port, &f, PATIENCE_MS));
    OK(c, fh_flush(c));
    fh_frame got;
    recv_one(watcher, &got, NULL);
    check_numbered(&got, 7);
    fh_client_free(c);
    fh_client_free(watcher);
    hub_stop(&h);
    unlink(h.log);
    char command[512];
    snprintf(command, sizeof command, "rm -rf '%s'", runtime);
    CHECK(system(command) == 0, "%s", command);
}

/* ---- runner ---- */

struct test {
    const char *name;
    void (*run)(void);
};

static const struct test TESTS[] = {
    {"frames_arrive_in_channel_order_with_metadata", test_frames_arrive_in_channel_order_with_metadata},
    {"senders_on_several_threads_keep_their_own_order", test_senders_on_several_threads_keep_their_own_order},
    {"filters_select_frames_like_socketcan", test_filters_select_frames_like_socketcan},
    {"receive_and_send_honour_timeouts", test_receive_and_send_honour_timeouts},
    {"fd_frames_carry_every_length_and_flag", test_fd_frames_carry_every_length_and_flag},
    {"errors_name_the_problem", test_errors_name_the_problem},
    {"fd_is_readable_exactly_while_frames_wait", test_fd_is_readable_exactly_while_frames_wait},
    {"panic_inside_the_library_becomes_an_error_code", test_panic_inside_the_library_becomes_an_error_code},
    {"port_status_counts_overruns_and_respects_struct_size", test_port_status_counts_overruns_and_respects_struct_size},
    {"socketcan_frames_pass_unchanged", test_socketcan_frames_pass_unchanged},
    {"fd_and_listen_only_ports_follow_socketcan", test_fd_and_listen_only_ports_follow_socketcan},
    {"close_from_another_thread_wakes_a_blocked_receive", test_close_from_another_thread_wakes_a_blocked_receive},
    {"example_ecu_answers_c_and_rust_peers_through_the_hub", test_example_ecu_answers_c_and_rust_peers_through_the_hub},
    {"example_candump_prints_frames_like_candump", test_example_candump_prints_frames_like_candump},
    {"a_2048_byte_can_xl_frame_crosses_between_c_and_rust_clients",
     test_a_2048_byte_can_xl_frame_crosses_between_c_and_rust_clients},
    {"a_2048_byte_raw_frame_crosses_between_c_and_rust_clients",
     test_a_2048_byte_raw_frame_crosses_between_c_and_rust_clients},
    {"lin_standing_response_answers_the_schedule_until_replaced_and_withdrawn",
     test_lin_standing_response_answers_the_schedule_until_replaced_and_withdrawn},
    {"lin_wake_up_wakes_the_sleeping_bus_and_the_schedule_resumes_after_the_wake_up_delay",
     test_lin_wake_up_wakes_the_sleeping_bus_and_the_schedule_resumes_after_the_wake_up_delay},
    {"virtual_time_runs_step_by_step_and_repeat_exactly", test_virtual_time_runs_step_by_step_and_repeat_exactly},
    {"virtual_time_needs_a_hub_in_virtual_time_and_a_participant",
     test_virtual_time_needs_a_hub_in_virtual_time_and_a_participant},
    {"virtual_time_a_participant_stepping_ahead_is_woken_only_by_what_its_filters_match",
     test_virtual_time_a_participant_stepping_ahead_is_woken_only_by_what_its_filters_match},
    {"virtual_time_stepping_ahead_refuses_what_it_cannot_do", test_virtual_time_stepping_ahead_refuses_what_it_cannot_do},
    {"virtual_time_a_step_ahead_in_halves_is_awaited_in_slices_and_the_bus_goes_on",
     test_virtual_time_a_step_ahead_in_halves_is_awaited_in_slices_and_the_bus_goes_on},
    {"a_null_url_falls_back_to_tcp_with_one_line_when_shm_default_cannot_be_used",
     test_a_null_url_falls_back_to_tcp_with_one_line_when_shm_default_cannot_be_used},
};

int main(int argc, char **argv) {
    size_t count = sizeof TESTS / sizeof TESTS[0];
    if (argc == 2 && strcmp(argv[1], "--list") == 0) {
        for (size_t i = 0; i < count; i++) puts(TESTS[i].name);
        return 0;
    }
    if (argc != 2) {
        fprintf(stderr, "usage: %s TEST | --list\n", argv[0]);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    for (size_t i = 0; i < count; i++) {
        if (strcmp(argv[1], TESTS[i].name) == 0) {
            TESTS[i].run();
            printf("%s: passed\n", TESTS[i].name);
            return 0;
        }
    }
    fprintf(stderr, "no test named '%s' (see --list)\n", argv[1]);
    return 2;
}
