/*
 * Tests of the portable client: against a real hub (its URL is argv[2]) and
 * against a scripted hostile hub (an in-memory stream, no hub needed).
 *
 *     fhp_tests TEST [tcp://HOST:PORT] [UNIX_SOCKET_PATH]
 *
 * The hub the driver (hub_tests.sh) starts has can0 (CAN FD) and can1
 * (classic CAN).
 */
#include "fieldhub_portable.h"
#include "fieldhub_portable_io.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <unistd.h>

#define CHECK(cond, ...)                                                   \
    do {                                                                   \
        if (!(cond)) {                                                     \
            fprintf(stderr, "FAILED at %s:%d: ", __FILE__, __LINE__);      \
            fprintf(stderr, __VA_ARGS__);                                  \
            fputc('\n', stderr);                                           \
            exit(1);                                                       \
        }                                                                  \
    } while (0)

/* Polls until `call` is no longer FHP_ERR_AGAIN; at most 5000 rounds of 10 ms (a hang guard). */
#define SETTLE(c, rc, call)                                                \
    do {                                                                   \
        int round_;                                                        \
        for (round_ = 0; round_ < 5000; round_++) {                        \
            (rc) = (call);                                                 \
            if ((rc) != FHP_ERR_AGAIN) break;                              \
            wait_readable(c);                                              \
            if (fhp_poll(c) < 0 && (rc = (call)) == FHP_ERR_AGAIN) (rc) = fhp_poll(c); \
        }                                                                  \
    } while (0)

typedef struct peer {
    fhp_client c;
    fhp_socket sock;
    uint8_t rx[FHP_RX_BUFFER_MIN];
    uint8_t tx[4096];
} peer;

static void wait_readable(fhp_client *c) {
    fd_set readable;
    struct timeval tv;
    int fd = *(int *)c->io.ctx;
    FD_ZERO(&readable);
    FD_SET(fd, &readable);
    tv.tv_sec = 0, tv.tv_usec = 10000;
    select(fd + 1, &readable, NULL, NULL, &tv);
}

static void join(peer *p, const char *url, const char *name) {
    char host[128];
    const char *colon = strrchr(url + 6, ':');
    fhp_stream s;
    int rc;
    CHECK(strncmp(url, "tcp://", 6) == 0 && colon, "bad URL %s", url);
    memcpy(host, url + 6, (size_t)(colon - url - 6));
    host[colon - url - 6] = '\0';
    CHECK(fhp_tcp_connect(host, colon + 1, &p->sock, NULL, 0) == FHP_OK, "cannot connect to %s", url);
    s = fhp_socket_stream(&p->sock);
    CHECK(fhp_init(&p->c, &s, p->rx, sizeof p->rx, p->tx, sizeof p->tx) == FHP_OK, "init");
    CHECK(fhp_connect(&p->c, name, NULL) == FHP_OK, "connect: %s", fhp_last_error(&p->c));
    SETTLE(&p->c, rc, fhp_connected(&p->c));
    CHECK(rc == FHP_OK, "HELLO: %s", fhp_last_error(&p->c));
}

static int open_port(peer *p, const char *channel, const char *name, uint32_t flags, fhp_port *port) {
    uint32_t request;
    int rc = fhp_port_open(&p->c, channel, name, flags, &request);
    if (rc) return rc;
    SETTLE(&p->c, rc, fhp_port_result(&p->c, request, port));
    return rc;
}

/* Everything sent so far is on the bus (PING answered). */
static int flush(peer *p) {
    uint64_t nonce;
    int rc = fhp_flush_start(&p->c, &nonce);
    if (rc) return rc;
    SETTLE(&p->c, rc, fhp_flushed(&p->c, nonce));
    return rc;
}

static fhp_frame classic(uint32_t id, uint8_t len) {
    fhp_frame f;
    uint8_t i;
    memset(&f, 0, sizeof f);
    f.can_id = id;
    f.len = len;
    for (i = 0; i < len; i++) f.data[i] = (uint8_t)(id + i);
    return f;
}

/* Frames from port `from` of one client reach port `to` of another through their filters. */
static void filters_select_frames_like_socketcan(const char *url) {
    static peer a, b;
    static const fhp_filter exact[] = {{0x123, FHP_CAN_SFF_MASK | FHP_CAN_EFF_FLAG | FHP_CAN_RTR_FLAG},
                                       {0x200, 0x700}};
    static const fhp_filter inverted[] = {{0x123 | FHP_CAN_INV_FILTER, FHP_CAN_SFF_MASK}};
    static const uint32_t ids[] = {0x123, 0x124, 0x200, 0x2FF, 0x300, 0x123 | FHP_CAN_EFF_FLAG};
    fhp_port from, to, other;
    fhp_frame f;
    fhp_meta meta;
    unsigned i;
    int rc;
    join(&a, url, "filter-sender");
    join(&b, url, "filter-receiver");
    CHECK(open_port(&a, "can0", NULL, 0, &from) == FHP_OK, "open: %s", fhp_last_error(&a.c));
    CHECK(open_port(&b, "can0", NULL, FHP_PORT_BLOCK_ON_OVERFLOW, &to) == FHP_OK, "open: %s", fhp_last_error(&b.c));
    CHECK(open_port(&b, "can0", NULL, FHP_PORT_BLOCK_ON_OVERFLOW, &other) == FHP_OK, "open: %s",
          fhp_last_error(&b.c));
    CHECK(fhp_set_filters(&b.c, to, exact, 2) == FHP_OK, "filters");
    CHECK(fhp_set_filters(&b.c, other, inverted, 1) == FHP_OK, "filters");
    CHECK(fhp_set_filters(&b.c, 31, exact, 2) == FHP_ERR_PORT_NOT_OPEN, "filters on a closed port");
    for (i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        f = classic(ids[i], 2);
        CHECK(fhp_send(&a.c, from, &f) == FHP_OK, "send: %s", fhp_last_error(&a.c));
    }
    CHECK(flush(&a) == FHP_OK, "flush: %s", fhp_last_error(&a.c));
    /* `to` passes 0x123 (standard only) and 0x200..0x2FF; `other` all but id 0x123 (either length). */
    {
        static const uint32_t want_to[] = {0x123, 0x200, 0x2FF};
        static const uint32_t want_other[] = {0x124, 0x200, 0x2FF, 0x300};
        unsigned got_to = 0, got_other = 0;
        while (got_to + got_other < 7) {
            SETTLE(&b.c, rc, fhp_recv(&b.c, &f, &meta));
            CHECK(rc == FHP_OK, "receive: %s (%d of 7 frames)", fhp_last_error(&b.c), got_to + got_other);
            if (meta.port == to) {
                CHECK(got_to < 3 && f.can_id == want_to[got_to], "port 'to' got %lX", (unsigned long)f.can_id);
                got_to++;
            } else {
                CHECK(meta.port == other && got_other < 4 && f.can_id == want_other[got_other],
                      "port 'other' got %lX", (unsigned long)f.can_id);
                got_other++;
            }
        }
    }
    /* Nothing else comes: a marker frame after the filtered ones arrives next on `other`. */
    f = classic(0x7AA, 1);
    CHECK(fhp_send(&a.c, from, &f) == FHP_OK && flush(&a) == FHP_OK, "marker");
    SETTLE(&b.c, rc, fhp_recv(&b.c, &f, &meta));
    CHECK(rc == FHP_OK && f.can_id == 0x7AA && meta.port == other, "next was %lX on %u", (unsigned long)f.can_id,
          meta.port);
    /* count 0: nothing passes; NULL: everything again. */
    CHECK(fhp_set_filters(&b.c, other, exact, 0) == FHP_OK && fhp_set_filters(&b.c, to, NULL, 0) == FHP_OK, "reset");
    f = classic(0x555, 3);
    CHECK(fhp_send(&a.c, from, &f) == FHP_OK && flush(&a) == FHP_OK, "send");
    SETTLE(&b.c, rc, fhp_recv(&b.c, &f, &meta));
    CHECK(rc == FHP_OK && f.can_id == 0x555 && meta.port == to, "unfiltered frame");
    printf("filters: ok\n");
}

/* CAN FD frames of every length with BRS/ESI arrive as sent, with echoes; classic channels refuse them. */
static void fd_frames_carry_every_length_and_flag(const char *url) {
    static peer a, b;
    static const uint8_t lens[] = {0, 1, 7, 8, 12, 16, 20, 24, 32, 48, 64};
    fhp_port tx, rx, classic_port;
    fhp_frame f, got;
    fhp_meta meta;
    uint32_t port_id;
    unsigned i, k;
    int rc;
    join(&a, url, "fd-sender");
    join(&b, url, "fd-receiver");
    CHECK(open_port(&a, "can0", NULL, FHP_PORT_FD | FHP_PORT_RECEIVE_OWN, &tx) == FHP_OK, "open");
    CHECK(open_port(&b, "can0", NULL, FHP_PORT_FD | FHP_PORT_BLOCK_ON_OVERFLOW, &rx) == FHP_OK, "open");
    CHECK(fhp_port_info(&a.c, tx, NULL, &port_id, NULL, NULL) == FHP_OK, "info");
    for (i = 0; i < sizeof lens; i++) {
        memset(&f, 0, sizeof f);
        f.can_id = i % 2 ? (0x1ABCDE00u + i) | FHP_CAN_EFF_FLAG : 0x100 + i;
        f.len = lens[i];
        f.flags = (uint8_t)(FHP_CANFD_FDF | (i % 2 ? FHP_CANFD_BRS : 0) | (i % 3 ? 0 : FHP_CANFD_ESI));
        for (k = 0; k < f.len; k++) f.data[k] = (uint8_t)(i * 7 + k);
        CHECK(fhp_send(&a.c, tx, &f) == FHP_OK, "send len %u: %s", f.len, fhp_last_error(&a.c));
        CHECK(fhp_poll(&a.c) == FHP_OK, "poll: %s", fhp_last_error(&a.c)); /* writes the frame */
        SETTLE(&b.c, rc, fhp_recv(&b.c, &got, &meta));
        CHECK(rc == FHP_OK && memcmp(&got, &f, sizeof f) == 0 && meta.sender == port_id && !meta.flags,
              "frame of %u bytes changed (rc %d)", f.len, rc);
        SETTLE(&a.c, rc, fhp_recv(&a.c, &got, &meta));
        CHECK(rc == FHP_OK && (meta.flags & FHP_META_ECHO) && memcmp(&got, &f, sizeof f) == 0, "echo of %u bytes",
              f.len);
    }
    /* A classic port and a classic channel refuse CAN FD before anything is sent. */
    CHECK(open_port(&a, "can1", NULL, FHP_PORT_FD, &classic_port) == FHP_OK, "open can1");
    CHECK(fhp_send(&a.c, classic_port, &f) == FHP_ERR_INVALID_FRAME, "FD on a classic channel");
    CHECK(strstr(fhp_last_error(&a.c), "classic") != NULL, "error says why: %s", fhp_last_error(&a.c));
    CHECK(fhp_port_close(&a.c, classic_port) == FHP_OK, "close");
    CHECK(open_port(&a, "can0", NULL, 0, &classic_port) == FHP_OK, "open without FD");
    CHECK(fhp_send(&a.c, classic_port, &f) == FHP_ERR_INVALID_FRAME, "FD on a port without FHP_PORT_FD");
    f = classic(0x800, 1); /* 12 bits without EFF */
    CHECK(fhp_send(&a.c, classic_port, &f) == FHP_ERR_INVALID_FRAME, "id over 11 bits");
    f = classic(0x100, 9);
    CHECK(fhp_send(&a.c, classic_port, &f) == FHP_ERR_INVALID_FRAME, "9 bytes classic");
    printf("fd frames: ok\n");
}

/* The hub's answers to bad requests come back as the library's error codes, the session goes on. */
static void errors_name_the_problem(const char *url) {
    static peer a, b;
    fhp_port port, second;
    unsigned i;
    int rc;
    join(&a, url, "errors");
    rc = open_port(&a, "can9", NULL, 0, &port);
    CHECK(rc == FHP_ERR_UNKNOWN_CHANNEL && strstr(fhp_last_error(&a.c), "can9"), "unknown channel: %d %s", rc,
          fhp_last_error(&a.c));
    CHECK(open_port(&a, "can0", "fixed-name", 0, &port) == FHP_OK, "open");
    join(&b, url, "errors-2");
    rc = open_port(&b, "can0", "fixed-name", 0, &second);
    CHECK(rc == FHP_ERR_PORT_NAME_TAKEN, "name taken: %d %s", rc, fhp_last_error(&b.c));
    for (i = 1; i < FHP_MAX_PORTS; i++) CHECK(open_port(&a, "can1", NULL, 0, &second) == FHP_OK, "port %u", i);
    rc = open_port(&a, "can1", NULL, 0, &second);
    CHECK(rc == FHP_ERR_TOO_MANY_PORTS, "33rd port: %d %s", rc, fhp_last_error(&a.c));
    CHECK(fhp_port_open(&a.c, "can0", NULL, FHP_PORT_LISTEN_ONLY | FHP_PORT_TRANSMIT_ONLY, &i) ==
              FHP_ERR_INVALID_ARGUMENT,
          "listen-only with transmit-only");
    CHECK(flush(&a) == FHP_OK && flush(&b) == FHP_OK, "both sessions go on");
    printf("errors: ok\n");
}

/* A hub with a token refuses a client without it: FHP_ERR_REFUSED with the hub's reason. */
/* Connect to the hub at `url` as `name` with `token`; the status the handshake ends with. */
static int handshake_with(peer *a, const char *url, const char *name, const char *token) {
    char host[128];
    const char *colon = strrchr(url + 6, ':');
    fhp_stream s;
    int rc;
    memcpy(host, url + 6, (size_t)(colon - url - 6));
    host[colon - url - 6] = '\0';
    CHECK(fhp_tcp_connect(host, colon + 1, &a->sock, NULL, 0) == FHP_OK, "connect");
    s = fhp_socket_stream(&a->sock);
    fhp_init(&a->c, &s, a->rx, sizeof a->rx, a->tx, sizeof a->tx);
    CHECK(fhp_connect(&a->c, name, token) == FHP_OK, "HELLO");
    SETTLE(&a->c, rc, fhp_connected(&a->c));
    return rc;
}

/* The hub's token (hub_tests.sh) proved by challenge-response; a wrong one and none refused. */
static void a_token_is_proved_and_a_wrong_one_refused(const char *url) {
    static peer a, b, holder;
    static char token[] = "the-real-token";
    uint32_t request;
    fhp_port port;
    int rc = handshake_with(&a, url, "intruder", "not-the-token");
    CHECK(rc == FHP_ERR_REFUSED && strstr(fhp_last_error(&a.c), "unauthorized") &&
              strstr(fhp_last_error(&a.c), "wrong token"),
          "wrong token: %d %s", rc, fhp_last_error(&a.c));
    rc = handshake_with(&b, url, "tokenless", NULL);
    CHECK(rc == FHP_ERR_REFUSED && strstr(fhp_last_error(&b.c), "requires a token"), "no token: %d %s", rc,
          fhp_last_error(&b.c));
    /* The client keeps no copy of the token: its memory may change at once. */
    CHECK(fhp_tcp_connect("127.0.0.1", strrchr(url + 6, ':') + 1, &holder.sock, NULL, 0) == FHP_OK, "connect");
    {
        fhp_stream s = fhp_socket_stream(&holder.sock);
        fhp_init(&holder.c, &s, holder.rx, sizeof holder.rx, holder.tx, sizeof holder.tx);
    }
    CHECK(fhp_connect(&holder.c, "holder", token) == FHP_OK, "HELLO");
    memset(token, 'x', sizeof token - 1);
    SETTLE(&holder.c, rc, fhp_connected(&holder.c));
    CHECK(rc == FHP_OK, "the right token: %d %s", rc, fhp_last_error(&holder.c));
    CHECK(fhp_port_open(&holder.c, "can0", NULL, 0, &request) == FHP_OK, "OPEN_PORT");
    SETTLE(&holder.c, rc, fhp_port_result(&holder.c, request, &port));
    CHECK(rc == FHP_OK, "a port after the handshake: %d %s", rc, fhp_last_error(&holder.c));
    printf("token: ok\n");
}

/* ---- A hostile hub: the client reads scripted bytes ------------------ */

typedef struct script {
    const uint8_t *bytes;
    size_t len, pos;
} script;

static long script_read(void *ctx, uint8_t *buf, size_t len) {
    script *s = ctx;
    if (s->pos == s->len) return FHP_ERR_CLOSED;
    if (len > s->len - s->pos) len = s->len - s->pos;
    memcpy(buf, s->bytes + s->pos, len);
    s->pos += len;
    return (long)len;
}

static long script_write(void *ctx, const uint8_t *buf, size_t len) {
    (void)ctx, (void)buf;
    return (long)len;
}

/* The status the client ends with when the hub sends `bytes` after HELLO. */
static int against(const uint8_t *bytes, size_t len, fhp_client *c) {
    static uint8_t rx[FHP_RX_BUFFER_MIN], tx[512];
    script s;
    fhp_stream stream;
    fhp_frame f;
    int rc, i;
    uint32_t request;
    s.bytes = bytes, s.len = len, s.pos = 0;
    stream.ctx = &s, stream.read = script_read, stream.write = script_write;
    fhp_init(c, &stream, rx, sizeof rx, tx, sizeof tx);
    fhp_connect(c, "victim", NULL);
    for (i = 0; i < 10000; i++) {
        rc = fhp_poll(c);
        if (rc < 0) return rc;
        if (fhp_connected(c) == FHP_OK && c->next_request == 0) fhp_port_open(c, "can0", NULL, FHP_PORT_FD, &request);
        while (fhp_recv(c, &f, NULL) == FHP_OK) continue;
    }
    return FHP_OK;
}

static const uint8_t WELCOME[] = {0x0a, 0, 0, 0, 0x02, 2, 0, 7, 0, 0, 0, 2, 'h', 'h'};

static void hostile_hub_input_is_an_error_code(void) {
    static fhp_client c;
    static uint8_t bytes[8192];
    size_t n;
    int rc;
    struct {
        const char *what;
        const uint8_t *bytes;
        size_t len;
        int status;
        const char *says;
    } cases[] = {
        {"a truncated WELCOME", (const uint8_t *)"\x0a\x00\x00\x00\x02\x01\x00", 7, FHP_ERR_CLOSED, "closed"},
        {"a WELCOME whose name runs past its body", (const uint8_t *)"\x08\x00\x00\x00\x02\x01\x00\x07\x00\x00\x00\x05",
         12, FHP_ERR_PROTOCOL, "truncated"},
        {"an oversize length prefix", (const uint8_t *)"\x01\x00\x04\x00\x02", 5, FHP_ERR_PROTOCOL, "oversize"},
        {"a length prefix of 0", (const uint8_t *)"\x00\x00\x00\x00", 4, FHP_ERR_PROTOCOL, "empty"},
        {"protocol version 3", (const uint8_t *)"\x0a\x00\x00\x00\x02\x03\x00\x07\x00\x00\x00\x02hh", 14,
         FHP_ERR_PROTOCOL, "version 3"},
        {"a CHALLENGE answered, then another",
         (const uint8_t *)"\x22\x00\x00\x00\x04" "0123456789abcdef0123456789abcdef\x00"
                          "\x22\x00\x00\x00\x04" "0123456789abcdef0123456789abcdef\x00",
         76, FHP_ERR_PROTOCOL, "other than WELCOME or REFUSE"},
        {"an unknown type", (const uint8_t *)"\x01\x00\x00\x00\x99", 5, FHP_ERR_PROTOCOL, "unknown_type"},
        {"frames before WELCOME", (const uint8_t *)"\x04\x00\x00\x00\x20\x00\x00\x00", 8, FHP_ERR_PROTOCOL,
         "other than WELCOME or REFUSE"},
        {"a STATS larger than the buffer", (const uint8_t *)"\x00\x10\x00\x00\x61", 5, FHP_ERR_NO_ROOM, "fit"},
    };
    unsigned i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const uint8_t *b = cases[i].bytes;
        size_t len = cases[i].len;
        /* Cases after the handshake get a WELCOME first. */
        if (i >= 6) {
            memcpy(bytes, WELCOME, sizeof WELCOME);
            memcpy(bytes + sizeof WELCOME, b, len);
            b = bytes, len += sizeof WELCOME;
            if (i == 7) b = cases[i].bytes, len = cases[i].len;
        }
        rc = against(b, len, &c);
        CHECK(rc == cases[i].status && strstr(fhp_last_error(&c), cases[i].says), "%s: %d (%s), want %d: %s",
              cases[i].what, rc, fhp_strerror(rc), cases[i].status, fhp_last_error(&c));
    }
    /* A record with a bad kind after good frames: the good ones are delivered, then the error. */
    memcpy(bytes, WELCOME, sizeof WELCOME);
    n = sizeof WELCOME;
    {
        static const uint8_t opened[] = {0x0e, 0, 0, 0, 0x11, 0x21, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 1};
        fhp_record r;
        memcpy(bytes + n, opened, sizeof opened);
        n += sizeof opened;
        memset(&r, 0, sizeof r);
        r.len = 1;
        r.id = 0x10;
        r.data = (const uint8_t *)"\x42";
        {
            size_t at = n;
            n += fhp_encode_frames_header(bytes + n, sizeof bytes - n);
            n += fhp_encode_record(bytes + n, sizeof bytes - n, &r);
            r.kind = 7;
            n += fhp_encode_record(bytes + n, sizeof bytes - n, &r);
            fhp_encode_frames_finish(bytes + at, n - at, 2);
        }
    }
    rc = against(bytes, n, &c);
    CHECK(rc == FHP_ERR_PROTOCOL && strstr(fhp_last_error(&c), "unknown_frame_kind"), "bad kind: %d %s", rc,
          fhp_last_error(&c));
    /* Random garbage after WELCOME never crashes and always ends in an error code. */
    {
        unsigned seed = 12345, round;
        for (round = 0; round < 2000; round++) {
            size_t k;
            memcpy(bytes, WELCOME, sizeof WELCOME);
            n = sizeof WELCOME + (seed % 300);
            for (k = sizeof WELCOME; k < n; k++) {
                seed = seed * 1103515245u + 12345u;
                bytes[k] = (uint8_t)(seed >> 16);
            }
            rc = against(bytes, n, &c);
            CHECK(rc < 0, "garbage round %u accepted", round);
        }
    }
    printf("hostile hub: ok\n");
}

/* `url` (tcp://127.0.0.1:PORT) and `unix_path` are served by the user nobody
 * (hub_owner.sh): both are refused before a byte is sent, naming nobody and
 * what to set; FIELDHUB_HUB_USER naming nobody (by name or uid) lets them in. */
static void another_users_listener_is_refused_naming_it(const char *url, const char *unix_path) {
    char host[64], why[512], expected[128];
    const char *colon = strrchr(url + 6, ':');
    fhp_socket sock;
    int fd;
    CHECK(strncmp(url, "tcp://", 6) == 0 && colon && (size_t)(colon - url - 6) < sizeof host, "bad URL %s", url);
    memcpy(host, url + 6, (size_t)(colon - url - 6));
    host[colon - url - 6] = '\0';
    CHECK(unsetenv("FIELDHUB_HUB_USER") == 0, "unsetenv");

    CHECK(fhp_tcp_connect(host, colon + 1, &sock, why, sizeof why) == FHP_ERR_REFUSED, "TCP admitted: %s", why);
    snprintf(expected, sizeof expected, "the socket listening at %s runs as user nobody (uid 65534), not as you", url + 6);
    CHECK(strstr(why, expected) && strstr(why, "nothing was sent") && strstr(why, "set FIELDHUB_HUB_USER=nobody"),
          "the refusal names the listener and the fix: %s", why);
    CHECK(fhp_unix_connect(unix_path, &fd, why, sizeof why) == FHP_ERR_REFUSED, "unix admitted: %s", why);
    CHECK(strstr(why, "the process listening on this socket runs as user nobody (uid 65534)") &&
              strstr(why, "set FIELDHUB_HUB_USER=nobody"),
          "the refusal names the listener and the fix: %s", why);
    CHECK(setenv("FIELDHUB_HUB_USER", "no-such-user-here", 1) == 0, "setenv");
    CHECK(fhp_tcp_connect(host, colon + 1, &sock, why, sizeof why) == FHP_ERR_REFUSED &&
              strstr(why, "FIELDHUB_HUB_USER=no-such-user-here names no user of this machine"),
          "an unknown user in FIELDHUB_HUB_USER: %s", why);

    /* Named on purpose, the other user's hub is talked to. */
    CHECK(setenv("FIELDHUB_HUB_USER", "nobody", 1) == 0, "setenv");
    CHECK(fhp_tcp_connect(host, colon + 1, &sock, why, sizeof why) == FHP_OK, "trusted by name: %s", why);
    fhp_tcp_close(&sock);
    CHECK(setenv("FIELDHUB_HUB_USER", "65534", 1) == 0, "setenv");
    CHECK(fhp_unix_connect(unix_path, &fd, why, sizeof why) == FHP_OK, "trusted by uid: %s", why);
    close(fd);
    printf("another user's listeners: refused, then trusted on request\n");
}

int main(int argc, char **argv) {
    if (argc >= 2 && strcmp(argv[1], "hostile_hub_input_is_an_error_code") == 0) {
        hostile_hub_input_is_an_error_code();
        return 0;
    }
    if (argc == 4 && strcmp(argv[1], "another_users_listener_is_refused_naming_it") == 0) {
        another_users_listener_is_refused_naming_it(argv[2], argv[3]);
        return 0;
    }
    CHECK(argc == 3, "usage: fhp_tests TEST tcp://HOST:PORT");
    if (strcmp(argv[1], "filters_select_frames_like_socketcan") == 0) filters_select_frames_like_socketcan(argv[2]);
    else if (strcmp(argv[1], "fd_frames_carry_every_length_and_flag") == 0) fd_frames_carry_every_length_and_flag(argv[2]);
    else if (strcmp(argv[1], "errors_name_the_problem") == 0) errors_name_the_problem(argv[2]);
    else if (strcmp(argv[1], "a_token_is_proved_and_a_wrong_one_refused") == 0)
        a_token_is_proved_and_a_wrong_one_refused(argv[2]);
    else CHECK(0, "unknown test %s", argv[1]);
    return 0;
}
