/*
 * fieldhub_portable.c - the wire codec and the client of fieldhub_portable.h.
 *
 * Three layers, top to bottom in this file:
 *  - the codec: a streaming decoder that asks for exactly the bytes it needs
 *    (a length prefix, a body, one frame record) and checks every field in
 *    the order of spec/protocol.md 4.4, so its errors are the spec's; and
 *    encoders that write whole messages into caller buffers;
 *  - SHA-256 and HMAC (FIPS 180-4, RFC 2104), written for this file: the
 *    MAC of AUTH, with which the client proves its token without sending it;
 *  - the client: one session over an fhp_stream, driven by fhp_poll().
 *
 * Invariants: nothing is allocated; no field is read through a struct
 * overlay (bytes are assembled little-endian by shifts, so the byte order of
 * the target does not matter); every length from the wire is checked
 * against the bytes that exist before they are touched; a decoder that
 * reported an error stays in it (a hostile hub cannot lead it on).
 */
#include "fieldhub_portable.h"

#include <string.h>

#define MAX_STATS_LEN 262135ul
#define MAX_RECORD_DATA 2048u
#define RECORD_HEADER 32u
#define NO_BATCH ((size_t)-1)

/* ==== Codec: decoder ================================================== */

enum { ST_PREFIX, ST_TYPE, ST_BODY, ST_FRAMES_HEAD, ST_RECORD_HEAD, ST_RECORD_DATA, ST_FRAMES_END, ST_FAILED };

static uint32_t le(const uint8_t *p, unsigned n) {
    uint32_t v = 0;
    while (n--) v = (v << 8) | p[n];
    return v;
}

static uint64_t le64(const uint8_t *p) { return (uint64_t)le(p, 4) | ((uint64_t)le(p + 4, 4) << 32); }

/* Strict UTF-8: no overlong forms, no surrogates, nothing above U+10FFFF. */
static int utf8_valid(const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        size_t k, j;
        uint32_t cp, min;
        if (c < 0x80) {
            i++;
            continue;
        }
        if ((c & 0xE0) == 0xC0) {
            k = 1, cp = c & 0x1Fu, min = 0x80;
        } else if ((c & 0xF0) == 0xE0) {
            k = 2, cp = c & 0x0Fu, min = 0x800;
        } else if ((c & 0xF8) == 0xF0) {
            k = 3, cp = c & 0x07u, min = 0x10000;
        } else {
            return 0;
        }
        if (n - i <= k) return 0;
        for (j = 1; j <= k; j++) {
            if ((s[i + j] & 0xC0) != 0x80) return 0;
            cp = (cp << 6) | (s[i + j] & 0x3Fu);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
        i += k + 1;
    }
    return 1;
}

/* A reader over one buffered body; the first fault sticks, later reads yield 0. */
typedef struct reader {
    const uint8_t *p;
    size_t len, pos;
    int err;
} reader;

static const uint8_t *take(reader *r, size_t n) {
    const uint8_t *q;
    if (r->err) return NULL;
    if (r->len - r->pos < n) {
        r->err = FHP_DEC_TRUNCATED;
        return NULL;
    }
    q = r->p + r->pos;
    r->pos += n;
    return q;
}

static uint32_t take_le(reader *r, unsigned n) {
    const uint8_t *q = take(r, n);
    return q ? le(q, n) : 0;
}

static uint64_t take_u64(reader *r) {
    const uint8_t *q = take(r, 8);
    return q ? le64(q) : 0;
}

/* A string of `len` bytes: its length against `max` first, then its bytes (spec 4.4). */
static void take_str(reader *r, size_t len, size_t max, const uint8_t **s, size_t *s_len) {
    const uint8_t *q;
    if (r->err) return;
    if (len > max) {
        r->err = FHP_DEC_TOO_LONG;
        return;
    }
    q = take(r, len);
    if (!q) return;
    if (!utf8_valid(q, len)) {
        r->err = FHP_DEC_NOT_UTF8;
        return;
    }
    *s = q;
    *s_len = len;
}

static void take_report(reader *r, fhp_message *m) {
    m->code = (uint16_t)take_le(r, 2);
    m->request = take_le(r, 4);
    m->fatal = (uint8_t)take_le(r, 1);
    if (!r->err && m->fatal > 1) r->err = FHP_DEC_RESERVED_NOT_ZERO;
    take_str(r, take_le(r, 2), FHP_MAX_TEXT_LEN, &m->str_a, &m->str_a_len);
}

/* Decode a whole non-FRAMES body (type byte already in m->type). */
static int decode_body(const uint8_t *body, size_t len, fhp_message *m) {
    reader r;
    const uint8_t *magic;
    r.p = body, r.len = len, r.pos = 0, r.err = 0;
    switch (m->type) {
    case FHP_MSG_HELLO:
        magic = take(&r, 4);
        if (magic && memcmp(magic, "FHUB", 4) != 0) return FHP_DEC_BAD_MAGIC;
        m->version = (uint16_t)take_le(&r, 2);
        /* What follows the version is that version's layout: not read for another. */
        if (!r.err && m->version != FHP_PROTOCOL_VERSION) return FHP_DEC_UNSUPPORTED_VERSION;
        take_str(&r, take_le(&r, 1), FHP_MAX_NAME_LEN, &m->str_a, &m->str_a_len);
        /* Options are present only as a non-zero u32 (one encoding per HELLO). */
        if (!r.err && r.len - r.pos >= 4) {
            m->options = take_le(&r, 4);
            if (m->options == 0) return FHP_DEC_TRAILING_BYTES;
            if (m->options & ~1u) return FHP_DEC_RESERVED_OPTIONS;
        }
        break;
    case FHP_MSG_WELCOME:
        m->version = (uint16_t)take_le(&r, 2);
        m->value = take_le(&r, 4);
        take_str(&r, take_le(&r, 1), FHP_MAX_NAME_LEN, &m->str_a, &m->str_a_len);
        break;
    case FHP_MSG_CHALLENGE:
    case FHP_MSG_AUTH:
        m->str_b = take(&r, FHP_NONCE_LEN);
        m->str_b_len = FHP_NONCE_LEN;
        if (m->type == FHP_MSG_CHALLENGE)
            take_str(&r, take_le(&r, 1), FHP_MAX_NAME_LEN, &m->str_a, &m->str_a_len);
        break;
    case FHP_MSG_REFUSE:
    case FHP_MSG_ERROR:
    case FHP_MSG_GOODBYE:
        take_report(&r, m);
        break;
    case FHP_MSG_OPEN_PORT:
        m->request = take_le(&r, 4);
        m->options = take_le(&r, 4);
        if (!r.err && (m->options & ~0x1Fu)) return FHP_DEC_RESERVED_OPTIONS;
        take_str(&r, take_le(&r, 1), FHP_MAX_NAME_LEN, &m->str_a, &m->str_a_len);
        take_str(&r, take_le(&r, 1), FHP_MAX_NAME_LEN, &m->str_b, &m->str_b_len);
        break;
    case FHP_MSG_PORT_OPENED:
        m->request = take_le(&r, 4);
        m->port = (uint16_t)take_le(&r, 2);
        m->channel_id = (uint16_t)take_le(&r, 2);
        m->value = take_le(&r, 4);
        m->flags8 = (uint8_t)take_le(&r, 1);
        break;
    case FHP_MSG_CLOSE_PORT:
    case FHP_MSG_PORT_CLOSED:
        m->port = (uint16_t)take_le(&r, 2);
        break;
    case FHP_MSG_RX_OVERFLOW:
        m->port = (uint16_t)take_le(&r, 2);
        m->value = take_le(&r, 4);
        break;
    case FHP_MSG_TX_DROPPED:
        m->port = (uint16_t)take_le(&r, 2);
        m->code = (uint16_t)take_le(&r, 2);
        m->value = take_le(&r, 4);
        break;
    case FHP_MSG_CHANNEL_STATE:
        m->port = (uint16_t)take_le(&r, 2);
        m->flags8 = (uint8_t)take_le(&r, 1);
        m->value = take_le(&r, 4);
        take_str(&r, take_le(&r, 2), FHP_MAX_TEXT_LEN, &m->str_a, &m->str_a_len);
        break;
    case FHP_MSG_PING:
    case FHP_MSG_PONG:
    case FHP_MSG_STEP:
    case FHP_MSG_GRANT:
        m->u64 = take_u64(&r);
        break;
    case FHP_MSG_STATS_REQUEST:
        m->request = take_le(&r, 4);
        break;
    case FHP_MSG_STATS:
        m->request = take_le(&r, 4);
        take_str(&r, take_le(&r, 4), MAX_STATS_LEN, &m->str_a, &m->str_a_len);
        break;
    default:
        return FHP_DEC_UNKNOWN_TYPE;
    }
    if (r.err) return r.err;
    return r.pos == r.len ? FHP_DEC_OK : FHP_DEC_TRAILING_BYTES;
}

static int known_type(uint8_t t) {
    static const uint8_t types[] = {0x01, 0x02, 0x03, 0x04, 0x05, 0x10, 0x11, 0x12, 0x13, 0x20, 0x21, 0x22,
                                    0x23, 0x30, 0x40, 0x41, 0x50, 0x60, 0x61, 0x70, 0x71};
    size_t i;
    for (i = 0; i < sizeof types; i++)
        if (types[i] == t) return 1;
    return 0;
}

static int id_fits(uint32_t id, int extended) { return id <= (extended ? FHP_CAN_EFF_MASK : FHP_CAN_SFF_MASK); }

static int fd_len_valid(unsigned len) {
    return len <= 8 || len == 12 || len == 16 || len == 20 || len == 24 || len == 32 || len == 48 || len == 64;
}

int fhp_record_check(const fhp_record *r) {
    int ext = (r->flags & FHP_REC_EXTENDED) != 0;
    switch (r->kind) {
    case FHP_KIND_CAN:
        if (r->flags & ~(FHP_REC_EXTENDED | FHP_REC_REMOTE | FHP_REC_ECHO)) return FHP_DEC_INVALID_FRAME;
        if (!id_fits(r->id, ext) || r->len > 8) return FHP_DEC_INVALID_FRAME;
        if (r->len8_dlc != 0 && !(r->len == 8 && r->len8_dlc >= 9 && r->len8_dlc <= 15)) return FHP_DEC_INVALID_FRAME;
        return FHP_DEC_OK;
    case FHP_KIND_CANFD:
        if (r->flags & ~(FHP_REC_EXTENDED | FHP_REC_BRS | FHP_REC_ESI | FHP_REC_ECHO)) return FHP_DEC_INVALID_FRAME;
        if (!id_fits(r->id, ext) || !fd_len_valid(r->len) || r->len8_dlc != 0) return FHP_DEC_INVALID_FRAME;
        return FHP_DEC_OK;
    case FHP_KIND_ERROR:
        if ((r->flags & ~FHP_REC_ECHO) || r->id > FHP_CAN_EFF_MASK || r->len != 8 || r->len8_dlc != 0)
            return FHP_DEC_INVALID_FRAME;
        return FHP_DEC_OK;
    default:
        return FHP_DEC_UNKNOWN_FRAME_KIND;
    }
}

void fhp_decoder_init(fhp_decoder *d, uint8_t *buf, size_t cap, uint32_t limit) {
    memset(d, 0, sizeof *d);
    d->buf = buf;
    d->cap = cap;
    d->limit = limit;
    d->stage = ST_PREFIX;
    d->want = 4;
    /* A record (header and 64 data bytes) must fit, or nothing is decoded. */
    if (!buf || cap < RECORD_HEADER + 64) {
        d->stage = ST_FAILED;
        d->error = FHP_DEC_NO_ROOM;
        d->want = 0;
    }
}

static fhp_event fail(fhp_decoder *d, int error) {
    d->stage = ST_FAILED;
    d->error = (uint8_t)error;
    d->want = d->have = 0;
    return FHP_EV_ERROR;
}

static void expect(fhp_decoder *d, uint8_t stage, uint32_t want) {
    d->stage = stage;
    d->want = want;
    d->have = 0;
}

/* The next record of a FRAMES message, or its end. */
static fhp_event next_record(fhp_decoder *d) {
    if (d->records_left == 0) {
        expect(d, ST_FRAMES_END, 0);
        return FHP_EV_NONE;
    }
    if (d->body_left < RECORD_HEADER) return fail(d, FHP_DEC_TRUNCATED);
    expect(d, ST_RECORD_HEAD, RECORD_HEADER);
    return FHP_EV_NONE;
}

/* A record header is complete in buf: check it in the spec's order (4.4). */
static fhp_event record_header(fhp_decoder *d) {
    const uint8_t *h = d->buf;
    fhp_record *r = &d->rec;
    uint32_t data_len;
    int err;
    r->port = (uint16_t)le(h, 2);
    r->kind = h[2];
    r->flags = h[3];
    r->id = le(h + 4, 4);
    r->seq = le64(h + 8);
    r->timestamp_ns = le64(h + 16);
    r->sender = le(h + 24, 4);
    r->len = (uint16_t)le(h + 28, 2);
    r->len8_dlc = h[30];
    r->data = d->buf + RECORD_HEADER;
    d->body_left -= RECORD_HEADER;
    if (r->len > MAX_RECORD_DATA) return fail(d, FHP_DEC_RECORD_TOO_LONG);
    if (r->kind > FHP_KIND_ERROR) return fail(d, FHP_DEC_UNKNOWN_FRAME_KIND);
    if (r->flags & 0xE0) return fail(d, FHP_DEC_RESERVED_FLAGS);
    if (h[31] != 0) return fail(d, FHP_DEC_RESERVED_NOT_ZERO);
    data_len = (r->flags & FHP_REC_REMOTE) ? 0u : r->len;
    if (data_len > d->body_left) return fail(d, FHP_DEC_TRUNCATED);
    /* Validity depends on the header alone, so a bad record is rejected
     * before its data is read: at most 64 data bytes are ever buffered. */
    err = fhp_record_check(r);
    if (err) return fail(d, err);
    expect(d, ST_RECORD_DATA, data_len);
    d->have = RECORD_HEADER; /* data goes after the header in buf */
    d->want = RECORD_HEADER + data_len;
    return FHP_EV_NONE;
}

/* One completed unit (d->have == d->want): act on it. */
static fhp_event complete(fhp_decoder *d) {
    fhp_message *m = &d->msg;
    int err;
    switch (d->stage) {
    case ST_PREFIX:
        d->body_len = le(d->buf, 4);
        if (d->body_len == 0) return fail(d, FHP_DEC_EMPTY);
        if (d->body_len > d->limit) return fail(d, FHP_DEC_OVERSIZE);
        d->body_left = d->body_len;
        expect(d, ST_TYPE, 1);
        return FHP_EV_NONE;
    case ST_TYPE:
        memset(m, 0, sizeof *m);
        m->type = d->buf[0];
        d->body_left--;
        if (!known_type(m->type)) return fail(d, FHP_DEC_UNKNOWN_TYPE);
        if (m->type == FHP_MSG_FRAMES) {
            if (d->body_left < 3) return fail(d, FHP_DEC_TRUNCATED);
            expect(d, ST_FRAMES_HEAD, 3);
        } else {
            if (d->body_left > d->cap) return fail(d, FHP_DEC_NO_ROOM);
            expect(d, ST_BODY, d->body_left);
        }
        return FHP_EV_NONE;
    case ST_BODY:
        err = decode_body(d->buf, d->body_left, m);
        if (err) return fail(d, err);
        expect(d, ST_PREFIX, 4);
        return FHP_EV_MESSAGE;
    case ST_FRAMES_HEAD:
        d->body_left -= 3;
        m->count = (uint16_t)le(d->buf, 2);
        if (d->buf[2] != 0) return fail(d, FHP_DEC_RESERVED_NOT_ZERO);
        if (m->count > FHP_MAX_FRAMES_PER_BATCH) return fail(d, FHP_DEC_TOO_MANY_FRAMES);
        d->records_left = m->count;
        d->record_index = 0;
        if (next_record(d) == FHP_EV_ERROR) return FHP_EV_ERROR;
        return FHP_EV_MESSAGE;
    case ST_RECORD_HEAD:
        return record_header(d);
    case ST_RECORD_DATA:
        d->body_left -= d->want - RECORD_HEADER;
        d->records_left--;
        d->record_index++;
        if (next_record(d) == FHP_EV_ERROR) return FHP_EV_ERROR;
        return FHP_EV_RECORD;
    case ST_FRAMES_END:
        if (d->body_left != 0) return fail(d, FHP_DEC_TRAILING_BYTES);
        expect(d, ST_PREFIX, 4);
        return FHP_EV_FRAMES_END;
    default:
        return FHP_EV_ERROR;
    }
}

size_t fhp_decoder_space(fhp_decoder *d, uint8_t **dst) {
    *dst = d->buf + d->have;
    return d->want - d->have;
}

fhp_event fhp_decoder_advance(fhp_decoder *d, size_t n) {
    fhp_event ev;
    if (d->stage == ST_FAILED) return FHP_EV_ERROR;
    if (n > d->want - d->have) return fail(d, FHP_DEC_TRUNCATED);
    d->have += (uint32_t)n;
    /* Steps that need no bytes (an empty body, a batch's end) run at once. */
    while (d->have == d->want) {
        ev = complete(d);
        if (ev != FHP_EV_NONE) return ev;
    }
    return FHP_EV_NONE;
}

fhp_event fhp_decoder_feed(fhp_decoder *d, const uint8_t *in, size_t len, size_t *used) {
    fhp_event ev = FHP_EV_NONE;
    uint8_t *dst;
    size_t n;
    *used = 0;
    for (;;) {
        n = fhp_decoder_space(d, &dst);
        if (n > len - *used) n = len - *used;
        if (n) memcpy(dst, in + *used, n);
        *used += n;
        ev = fhp_decoder_advance(d, n);
        if (ev != FHP_EV_NONE || *used == len) return ev;
    }
}

const char *fhp_decode_error_name(int error) {
    static const char *const names[] = {"ok", "empty", "oversize", "unknown_type", "truncated",
                                        "trailing_bytes", "bad_magic", "too_long", "not_utf8",
                                        "too_many_frames", "reserved_not_zero", "reserved_options",
                                        "unknown_frame_kind", "reserved_flags", "record_too_long",
                                        "invalid_frame", "unsupported_version", "no_room"};
    return error >= 0 && error <= FHP_DEC_NO_ROOM ? names[error] : "unknown";
}

uint16_t fhp_decode_error_code(int error) {
    switch (error) {
    case FHP_DEC_OVERSIZE:
        return 5;
    case FHP_DEC_BAD_MAGIC:
        return 2;
    case FHP_DEC_UNSUPPORTED_VERSION:
        return 3;
    case FHP_DEC_UNKNOWN_FRAME_KIND:
    case FHP_DEC_RESERVED_FLAGS:
    case FHP_DEC_RECORD_TOO_LONG:
    case FHP_DEC_INVALID_FRAME:
        return 9;
    default:
        return 1;
    }
}

const char *fhp_code_name(uint16_t code) {
    static const char *const names[] = {NULL, "malformed", "bad_magic", "unsupported_version",
                                        "unauthorized", "oversize", "unknown_channel", "port_not_open",
                                        "too_many_ports", "invalid_frame", "unexpected_message",
                                        "port_name_taken", "hub_full", "shutting_down", "internal",
                                        "time_mode", "step_timeout", "tx_queue_full"};
    return code < sizeof names / sizeof names[0] ? names[code] : NULL;
}

/* ==== Codec: encoders ================================================= */

typedef struct writer {
    uint8_t *p;
    size_t cap, pos;
    int ok;
} writer;

static void put(writer *w, uint32_t v, unsigned n) {
    unsigned i;
    if (!w->ok || w->cap - w->pos < n) {
        w->ok = 0;
        return;
    }
    for (i = 0; i < n; i++) w->p[w->pos++] = (uint8_t)(v >> (8 * i));
}

static void put64(writer *w, uint64_t v) {
    put(w, (uint32_t)v, 4);
    put(w, (uint32_t)(v >> 32), 4);
}

static void put_bytes(writer *w, const uint8_t *s, size_t n) {
    if (!w->ok || w->cap - w->pos < n) {
        w->ok = 0;
        return;
    }
    if (n) memcpy(w->p + w->pos, s, n);
    w->pos += n;
}

/* A string with its length prefix of `width` bytes; over `max` bytes fails. */
static void put_str(writer *w, const uint8_t *s, size_t n, unsigned width, size_t max) {
    if (n > max) w->ok = 0;
    put(w, (uint32_t)n, width);
    put_bytes(w, s, n);
}

static writer begin(uint8_t *out, size_t cap, uint8_t type) {
    writer w;
    w.p = out, w.cap = cap, w.pos = 0, w.ok = out != NULL;
    put(&w, 0, 4);
    put(&w, type, 1);
    return w;
}

static size_t finish(writer *w) {
    if (!w->ok) return 0;
    w->p[0] = (uint8_t)(w->pos - 4);
    w->p[1] = (uint8_t)((w->pos - 4) >> 8);
    w->p[2] = (uint8_t)((w->pos - 4) >> 16);
    w->p[3] = (uint8_t)((w->pos - 4) >> 24);
    return w->pos;
}

size_t fhp_encode_message(uint8_t *out, size_t cap, const fhp_message *m) {
    writer w = begin(out, cap, m->type);
    switch (m->type) {
    case FHP_MSG_HELLO:
        put_bytes(&w, (const uint8_t *)"FHUB", 4);
        put(&w, m->version, 2);
        put_str(&w, m->str_a, m->str_a_len, 1, FHP_MAX_NAME_LEN);
        if (m->options) put(&w, m->options, 4);
        break;
    case FHP_MSG_CHALLENGE:
    case FHP_MSG_AUTH:
        if (m->str_b_len != FHP_NONCE_LEN) w.ok = 0;
        put_bytes(&w, m->str_b, FHP_NONCE_LEN);
        if (m->type == FHP_MSG_CHALLENGE) put_str(&w, m->str_a, m->str_a_len, 1, FHP_MAX_NAME_LEN);
        break;
    case FHP_MSG_WELCOME:
        put(&w, m->version, 2);
        put(&w, m->value, 4);
        put_str(&w, m->str_a, m->str_a_len, 1, FHP_MAX_NAME_LEN);
        break;
    case FHP_MSG_REFUSE:
    case FHP_MSG_ERROR:
    case FHP_MSG_GOODBYE:
        put(&w, m->code, 2);
        put(&w, m->request, 4);
        put(&w, m->fatal, 1);
        put_str(&w, m->str_a, m->str_a_len, 2, FHP_MAX_TEXT_LEN);
        break;
    case FHP_MSG_OPEN_PORT:
        put(&w, m->request, 4);
        put(&w, m->options, 4);
        put_str(&w, m->str_a, m->str_a_len, 1, FHP_MAX_NAME_LEN);
        put_str(&w, m->str_b, m->str_b_len, 1, FHP_MAX_NAME_LEN);
        break;
    case FHP_MSG_PORT_OPENED:
        put(&w, m->request, 4);
        put(&w, m->port, 2);
        put(&w, m->channel_id, 2);
        put(&w, m->value, 4);
        put(&w, m->flags8, 1);
        break;
    case FHP_MSG_CLOSE_PORT:
    case FHP_MSG_PORT_CLOSED:
        put(&w, m->port, 2);
        break;
    case FHP_MSG_RX_OVERFLOW:
        put(&w, m->port, 2);
        put(&w, m->value, 4);
        break;
    case FHP_MSG_TX_DROPPED:
        put(&w, m->port, 2);
        put(&w, m->code, 2);
        put(&w, m->value, 4);
        break;
    case FHP_MSG_CHANNEL_STATE:
        put(&w, m->port, 2);
        put(&w, m->flags8, 1);
        put(&w, m->value, 4);
        put_str(&w, m->str_a, m->str_a_len, 2, FHP_MAX_TEXT_LEN);
        break;
    case FHP_MSG_PING:
    case FHP_MSG_PONG:
    case FHP_MSG_STEP:
    case FHP_MSG_GRANT:
        put64(&w, m->u64);
        break;
    case FHP_MSG_STATS_REQUEST:
        put(&w, m->request, 4);
        break;
    case FHP_MSG_STATS:
        put(&w, m->request, 4);
        put_str(&w, m->str_a, m->str_a_len, 4, MAX_STATS_LEN);
        break;
    default:
        return 0;
    }
    return finish(&w);
}

/* HELLO, the session's first message (spec/protocol.md 3.1): no token in it (5.1). */
size_t fhp_encode_hello(uint8_t *out, size_t cap, const char *name, uint32_t options) {
    fhp_message m;
    memset(&m, 0, sizeof m);
    m.type = FHP_MSG_HELLO;
    m.version = FHP_PROTOCOL_VERSION;
    m.str_a = (const uint8_t *)name;
    m.str_a_len = name ? strlen(name) : 0;
    m.options = options;
    if (!utf8_valid(m.str_a, m.str_a_len)) return 0;
    return fhp_encode_message(out, cap, &m);
}

size_t fhp_encode_frames_header(uint8_t *out, size_t cap) {
    writer w = begin(out, cap, FHP_MSG_FRAMES);
    put(&w, 0, 3);
    return finish(&w);
}

size_t fhp_encode_record(uint8_t *out, size_t cap, const fhp_record *r) {
    writer w;
    size_t data_len = (r->flags & FHP_REC_REMOTE) ? 0 : r->len;
    w.p = out, w.cap = cap, w.pos = 0, w.ok = out != NULL;
    put(&w, r->port, 2);
    put(&w, r->kind, 1);
    put(&w, r->flags, 1);
    put(&w, r->id, 4);
    put64(&w, r->seq);
    put64(&w, r->timestamp_ns);
    put(&w, r->sender, 4);
    put(&w, r->len, 2);
    put(&w, r->len8_dlc, 1);
    put(&w, 0, 1);
    put_bytes(&w, r->data, data_len);
    return w.ok ? w.pos : 0;
}

void fhp_encode_frames_finish(uint8_t *batch, size_t batch_len, uint16_t count) {
    uint32_t body = (uint32_t)(batch_len - 4);
    unsigned i;
    for (i = 0; i < 4; i++) batch[i] = (uint8_t)(body >> (8 * i));
    batch[5] = (uint8_t)count;
    batch[6] = (uint8_t)(count >> 8);
}

/* ==== SHA-256 and HMAC-SHA256 (FIPS 180-4, RFC 2104) ================== */

/*
 * Small rather than fast: the client hashes a few hundred bytes once per
 * session. The message schedule is a rolling window of 16 words (64 bytes
 * of stack, not 256). Inputs are far below 512 MiB, so a length is a u32.
 */
typedef struct sha256 {
    uint32_t h[8];
    uint32_t len; /* bytes hashed */
    uint8_t buf[64];
} sha256;

static const uint32_t sha_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};
static const uint32_t sha_iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
static uint32_t ror(uint32_t x, unsigned n) { return (x >> n) | (x << (32 - n)); }
/* One block of c->buf into c->h. w[i & 15] holds W[i-16] until it becomes W[i]. */
static void sha_block(sha256 *c) {
    uint32_t w[16], s[8], t1, t2, a, b;
    unsigned i;
    memcpy(s, c->h, sizeof s);
    for (i = 0; i < 64; i++) {
        if (i < 16) {
            const uint8_t *p = c->buf + 4 * i;
            w[i] = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
        } else {
            a = w[(i + 1) & 15], b = w[(i + 14) & 15];
            w[i & 15] += (ror(a, 7) ^ ror(a, 18) ^ (a >> 3)) + (ror(b, 17) ^ ror(b, 19) ^ (b >> 10)) + w[(i + 9) & 15];
        }
        t1 = s[7] + (ror(s[4], 6) ^ ror(s[4], 11) ^ ror(s[4], 25)) + ((s[4] & s[5]) ^ (~s[4] & s[6])) + sha_k[i] + w[i & 15];
        t2 = (ror(s[0], 2) ^ ror(s[0], 13) ^ ror(s[0], 22)) + ((s[0] & s[1]) ^ (s[0] & s[2]) ^ (s[1] & s[2]));
        memmove(s + 1, s, 7 * sizeof s[0]);
        s[4] += t1;
        s[0] = t1 + t2;
    }
    for (i = 0; i < 8; i++) c->h[i] += s[i];
}
static void sha_update(sha256 *c, const uint8_t *p, size_t n) {
    while (n--) {
        c->buf[c->len++ & 63] = *p++;
        if ((c->len & 63) == 0) sha_block(c);
    }
}
/* Begin at state `h` after `len` bytes: SHA-256's start, or a key's (HMAC). */
static void sha_start(sha256 *c, const uint32_t *h, uint32_t len) {
    memcpy(c->h, h, sizeof c->h);
    c->len = len;
}
/* Pad (the length's high word is 0) and write the digest, big-endian. */
static void sha_final(sha256 *c, uint8_t out[32]) {
    uint32_t bits = c->len << 3;
    unsigned i;
    uint8_t pad = 0x80;
    do { sha_update(c, &pad, 1); pad = 0; } while ((c->len & 63) != 60);
    for (i = 0; i < 4; i++) { pad = (uint8_t)(bits >> (24 - 8 * i)); sha_update(c, &pad, 1); }
    for (i = 0; i < 32; i++) out[i] = (uint8_t)(c->h[i / 4] >> (24 - 8 * (i % 4)));
}
/* HMAC's inner and outer states after the padded key (RFC 2104): all a MAC needs of the key. */
static void hmac_key(const uint8_t *key, size_t n, uint32_t st[16]) {
    uint8_t k[64];
    sha256 c;
    unsigned i, pass;
    memset(k, 0, sizeof k);
    if (n > sizeof k) { sha_start(&c, sha_iv, 0); sha_update(&c, key, n); sha_final(&c, k); }
    else if (n) memcpy(k, key, n);
    for (pass = 0; pass < 2; pass++) {
        for (i = 0; i < 64; i++) k[i] ^= pass ? 0x36 ^ 0x5c : 0x36;
        sha_start(&c, sha_iv, 0);
        sha_update(&c, k, 64);
        memcpy(st + 8 * pass, c.h, 32);
    }
}
/*
 * AUTH's MAC (spec/protocol.md 5.1): HMAC under the key's states of the
 * transcript — the context, the CHALLENGE's nonce and str8 hub name (as the
 * decoder left them, back to back after the nonce), the HELLO's bytes from its
 * version to the end of its name, and its options as a u32.
 */
static void auth_mac(const uint32_t key[16], const fhp_message *challenge, const uint8_t *hello, size_t hello_len,
                     uint32_t options, uint8_t mac[FHP_MAC_LEN]) {
    uint8_t o[4];
    sha256 c;
    o[0] = (uint8_t)options, o[1] = (uint8_t)(options >> 8), o[2] = (uint8_t)(options >> 16);
    o[3] = (uint8_t)(options >> 24);
    sha_start(&c, key, 64);
    sha_update(&c, (const uint8_t *)"fieldhub-auth-v2", 16);
    sha_update(&c, challenge->str_b, FHP_NONCE_LEN + 1 + challenge->str_a_len);
    sha_update(&c, hello, hello_len);
    sha_update(&c, o, 4);
    sha_final(&c, mac);
    sha_start(&c, key + 8, 64);
    sha_update(&c, mac, FHP_MAC_LEN);
    sha_final(&c, mac);
}

void fhp_auth_mac(const uint8_t *token, size_t token_len, const fhp_message *challenge, const fhp_message *hello,
                  uint8_t mac[FHP_MAC_LEN]) {
    uint32_t key[16];
    hmac_key(token, token_len, key);
    /* The decoded HELLO's version and name length sit right before its name. */
    auth_mac(key, challenge, hello->str_a - 3, 3 + hello->str_a_len, hello->options, mac);
}

/* ==== Client ========================================================== */

/* CS_AUTH: HELLO sent, CHALLENGE answered, WELCOME or REFUSE awaited. */
enum { CS_IDLE, CS_HELLO, CS_AUTH, CS_READY, CS_CLOSED };

/* last_error is built by appending pieces: no snprintf on small targets. */
static void err_add(fhp_client *c, const char *s, size_t n) {
    size_t at = strlen(c->last_error);
    size_t room = sizeof c->last_error - 1 - at;
    if (n > room) n = room;
    memcpy(c->last_error + at, s, n);
    c->last_error[at + n] = '\0';
}

static void err_str(fhp_client *c, const char *s) { err_add(c, s, strlen(s)); }

static void err_num(fhp_client *c, uint32_t v) {
    char digits[10];
    size_t n = 0;
    do {
        digits[sizeof digits - 1 - n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    err_add(c, digits + sizeof digits - n, n);
}

/* Start a new last error with status `status`; returns the status. */
static int err_set(fhp_client *c, int status, const char *text) {
    c->last_status = status;
    c->last_error[0] = '\0';
    err_str(c, text);
    return status;
}

/* "CODE_NAME (N): TEXT" of a hub report. */
static void err_report(fhp_client *c, const fhp_message *m) {
    const char *name = fhp_code_name(m->code);
    err_str(c, name ? name : "unknown code");
    err_str(c, " (");
    err_num(c, m->code);
    err_str(c, "): ");
    err_add(c, (const char *)m->str_a, m->str_a_len);
}

/* The session is over: nothing more is sent (spec 5.4) and every call returns `status`. */
static int end_session(fhp_client *c, int status) {
    c->state = CS_CLOSED;
    c->last_status = status;
    c->tx_len = c->tx_sent = 0;
    c->batch_at = NO_BATCH;
    c->frame_ready = 0;
    return status;
}

static int status_of_code(uint16_t code) {
    switch (code) {
    case 6:
        return FHP_ERR_UNKNOWN_CHANNEL;
    case 7:
        return FHP_ERR_PORT_NOT_OPEN;
    case 8:
        return FHP_ERR_TOO_MANY_PORTS;
    case 9:
        return FHP_ERR_INVALID_FRAME;
    case 11:
        return FHP_ERR_PORT_NAME_TAKEN;
    default:
        return FHP_ERR_REJECTED;
    }
}

int fhp_init(fhp_client *c, const fhp_stream *stream, uint8_t *rx, size_t rx_cap, uint8_t *tx, size_t tx_cap) {
    if (!c) return FHP_ERR_INVALID_ARGUMENT;
    memset(c, 0, sizeof *c);
    c->state = CS_CLOSED;
    c->batch_at = NO_BATCH;
    if (!stream || !stream->read || !stream->write || !rx || !tx || rx_cap < FHP_RX_BUFFER_MIN ||
        tx_cap < FHP_TX_BUFFER_MIN) {
        return end_session(c, err_set(c, FHP_ERR_INVALID_ARGUMENT,
                                      "fhp_init needs a stream with read and write, an rx buffer of "
                                      "FHP_RX_BUFFER_MIN and a tx buffer of FHP_TX_BUFFER_MIN bytes"));
    }
    c->io = *stream;
    fhp_decoder_init(&c->dec, rx, rx_cap, FHP_MAX_MESSAGE_LEN);
    c->tx = tx;
    c->tx_cap = tx_cap;
    c->state = CS_IDLE;
    return FHP_OK;
}

/* Write what the stream takes now. */
static int flush_tx(fhp_client *c) {
    while (c->tx_sent < c->tx_len) {
        long n = c->io.write(c->io.ctx, c->tx + c->tx_sent, c->tx_len - c->tx_sent);
        if (n < 0 || (size_t)n > c->tx_len - c->tx_sent) {
            err_set(c, n == FHP_ERR_CLOSED ? FHP_ERR_CLOSED : FHP_ERR_IO,
                    "writing to the hub failed: the stream's write callback returned an error");
            return end_session(c, c->last_status);
        }
        if (n == 0) break;
        c->tx_sent += (size_t)n;
    }
    /* A batch whose first bytes are on the stream can take no more records. */
    if (c->batch_at != NO_BATCH && c->tx_sent > c->batch_at) c->batch_at = NO_BATCH;
    if (c->tx_sent == c->tx_len) c->tx_len = c->tx_sent = 0;
    return FHP_OK;
}

/* Room for `n` more bytes at the end of tx: move unsent bytes to the front, write. */
static int tx_room(fhp_client *c, size_t n) {
    if (c->tx_cap - c->tx_len >= n) return FHP_OK;
    if (flush_tx(c) < 0) return c->last_status;
    if (c->tx_sent > 0) {
        memmove(c->tx, c->tx + c->tx_sent, c->tx_len - c->tx_sent);
        if (c->batch_at != NO_BATCH) c->batch_at -= c->tx_sent;
        c->tx_len -= c->tx_sent;
        c->tx_sent = 0;
    }
    return c->tx_cap - c->tx_len >= n ? FHP_OK : FHP_ERR_AGAIN;
}

static int queue_message(fhp_client *c, const fhp_message *m, size_t size) {
    int rc = tx_room(c, size);
    if (rc < 0) return rc;
    if (fhp_encode_message(c->tx + c->tx_len, c->tx_cap - c->tx_len, m) != size)
        return err_set(c, FHP_ERR_INVALID_ARGUMENT, "a name or text is longer than the protocol allows");
    c->tx_len += size;
    c->batch_at = NO_BATCH;
    return FHP_OK;
}

static int need_ready(const fhp_client *c) {
    if (c->state == CS_READY) return FHP_OK;
    if (c->state == CS_CLOSED) return c->last_status ? c->last_status : FHP_ERR_CLOSED;
    return FHP_ERR_NOT_CONNECTED;
}

int fhp_connect(fhp_client *c, const char *name, const char *token) {
    size_t n;
    if (!c) return FHP_ERR_INVALID_ARGUMENT;
    if (c->state != CS_IDLE) return err_set(c, FHP_ERR_INVALID_ARGUMENT, "fhp_connect: call it once, after fhp_init");
    n = fhp_encode_hello(c->tx, c->tx_cap, name ? name : "", 0);
    if (n == 0)
        return err_set(c, FHP_ERR_INVALID_ARGUMENT, "fhp_connect: the name is over 64 bytes or not UTF-8");
    /* The HELLO from its version on, for the AUTH transcript: prefix, type and magic are 9 bytes. */
    c->hello_len = (uint8_t)(n - 9);
    memcpy(c->hello, c->tx + 9, c->hello_len);
    c->keyed = token && *token;
    if (c->keyed) hmac_key((const uint8_t *)token, strlen(token), c->key);
    c->tx_len = n;
    c->state = CS_HELLO;
    return FHP_OK;
}

/* Answer the hub's CHALLENGE with AUTH: the token's MAC, or zeros without one. */
static int answer_challenge(fhp_client *c, const fhp_message *challenge) {
    uint8_t *auth;
    int rc = tx_room(c, 5 + FHP_MAC_LEN);
    if (rc < 0) return rc;
    auth = c->tx + c->tx_len;
    memcpy(auth, "\x21\0\0\0\x05", 5); /* length 33, AUTH */
    memset(auth + 5, 0, FHP_MAC_LEN);
    if (c->keyed) auth_mac(c->key, challenge, c->hello, c->hello_len, 0, auth + 5);
    c->tx_len += 5 + FHP_MAC_LEN;
    c->state = CS_AUTH;
    return FHP_OK;
}

int fhp_connected(const fhp_client *c) {
    if (!c) return FHP_ERR_INVALID_ARGUMENT;
    if (c->state == CS_HELLO || c->state == CS_AUTH) return FHP_ERR_AGAIN;
    return need_ready(c);
}

static int protocol_error(fhp_client *c, const char *what) {
    err_set(c, FHP_ERR_PROTOCOL, "the hub broke the protocol: ");
    err_str(c, what);
    return end_session(c, FHP_ERR_PROTOCOL);
}

static int on_message(fhp_client *c, const fhp_message *m) {
    fhp_port_slot *slot;
    int greeting = c->state == CS_HELLO || c->state == CS_AUTH;
    if (c->state == CS_HELLO && m->type == FHP_MSG_CHALLENGE) return answer_challenge(c, m);
    if (greeting && m->type != FHP_MSG_WELCOME && m->type != FHP_MSG_REFUSE)
        return protocol_error(c, "a message other than WELCOME or REFUSE (or a first CHALLENGE) in the handshake");
    switch (m->type) {
    case FHP_MSG_WELCOME:
        if (!greeting) return protocol_error(c, "a second WELCOME");
        if (m->version != FHP_PROTOCOL_VERSION) {
            protocol_error(c, "WELCOME names protocol version ");
            err_num(c, m->version);
            err_str(c, "; this client speaks 2");
            return FHP_ERR_PROTOCOL;
        }
        c->client_id = m->value;
        c->state = CS_READY;
        return FHP_OK;
    case FHP_MSG_REFUSE:
    case FHP_MSG_GOODBYE:
    case FHP_MSG_ERROR:
        if (m->type == FHP_MSG_ERROR && !m->fatal) {
            err_set(c, status_of_code(m->code), "the hub declined: ");
            err_report(c, m);
            if (m->request != 0) {
                c->failed_request = m->request;
                c->failed_status = status_of_code(m->code);
            } else if (m->code == 9 || m->code == 4) {
                c->tx_dropped++; /* a frame refused as it arrived is off the bus (spec 6.9) */
            }
            return FHP_OK;
        }
        err_set(c, m->type == FHP_MSG_REFUSE ? FHP_ERR_REFUSED : FHP_ERR_CLOSED,
                m->type == FHP_MSG_REFUSE ? "the hub refused the connection: "
                                          : "the hub closed the connection: ");
        err_report(c, m);
        return end_session(c, c->last_status);
    case FHP_MSG_PORT_OPENED:
        if (m->port >= FHP_MAX_PORTS) return protocol_error(c, "PORT_OPENED with a handle over 31");
        slot = &c->ports[m->port];
        if (m->request == 0) {
            /* Moved to another channel by the control API: handle, options and filters stay. */
            slot->channel_id = m->channel_id;
            slot->channel_flags = m->flags8;
            return FHP_OK;
        }
        memset(slot, 0, sizeof *slot);
        slot->open = 1;
        slot->request = m->request;
        slot->options = (uint8_t)(m->request & 0x1Fu); /* fhp_port_open put them there */
        slot->port_id = m->value;
        slot->channel_id = m->channel_id;
        slot->channel_flags = m->flags8;
        return FHP_OK;
    case FHP_MSG_PORT_CLOSED:
        if (m->port < FHP_MAX_PORTS) c->ports[m->port].open = 0;
        return FHP_OK;
    case FHP_MSG_FRAMES:
        return FHP_OK; /* its records follow one by one */
    case FHP_MSG_RX_OVERFLOW:
        if (m->port < FHP_MAX_PORTS) c->ports[m->port].rx_dropped += m->value;
        return FHP_OK;
    case FHP_MSG_TX_DROPPED:
        c->tx_dropped += m->value;
        err_set(c, FHP_ERR_DROPPED, "the hub dropped ");
        err_num(c, m->value);
        err_str(c, " frame(s) of port ");
        err_num(c, m->port);
        err_str(c, m->code == 1   ? ": the controller is bus-off"
                   : m->code == 2 ? ": a fault rule dropped them"
                   : m->code == 3 ? ": the federation owner lost them"
                   : m->code == 4 ? ": the port is unplugged"
                   : m->code == 5 ? ": 16384 frames already waited in the hub (virtual time)"
                                  : ": unknown reason");
        return FHP_OK;
    case FHP_MSG_CHANNEL_STATE:
        return FHP_OK;
    case FHP_MSG_PONG:
        if (m->u64 > c->pong_nonce) c->pong_nonce = m->u64;
        return FHP_OK;
    default:
        return protocol_error(c, "a message a hub never sends to a client");
    }
}

static int filters_pass(const fhp_port_slot *slot, uint32_t can_id) {
    uint16_t i;
    if (!slot->filters) return 1;
    if (can_id & FHP_CAN_ERR_FLAG) return 1;
    for (i = 0; i < slot->filter_count; i++) {
        const fhp_filter *f = &slot->filters[i];
        int inverted = (f->can_id & FHP_CAN_INV_FILTER) != 0;
        int match = (can_id & f->can_mask) == (f->can_id & ~FHP_CAN_INV_FILTER & f->can_mask);
        if (match != inverted) return 1;
    }
    return 0;
}

static void on_record(fhp_client *c, const fhp_record *r) {
    fhp_port_slot *slot;
    fhp_frame *f = &c->frame;
    if (r->port >= FHP_MAX_PORTS || !c->ports[r->port].open) return; /* a port closed meanwhile */
    slot = &c->ports[r->port];
    memset(f, 0, sizeof *f);
    f->can_id = r->id;
    if (r->kind == FHP_KIND_ERROR) f->can_id |= FHP_CAN_ERR_FLAG;
    if (r->flags & FHP_REC_EXTENDED) f->can_id |= FHP_CAN_EFF_FLAG;
    if (r->flags & FHP_REC_REMOTE) f->can_id |= FHP_CAN_RTR_FLAG;
    f->len = (uint8_t)r->len;
    if (r->kind == FHP_KIND_CANFD) {
        f->flags = FHP_CANFD_FDF;
        if (r->flags & FHP_REC_BRS) f->flags |= FHP_CANFD_BRS;
        if (r->flags & FHP_REC_ESI) f->flags |= FHP_CANFD_ESI;
    }
    f->len8_dlc = r->len8_dlc;
    if (!(r->flags & FHP_REC_REMOTE)) memcpy(f->data, r->data, r->len);
    if (!filters_pass(slot, f->can_id)) return;
    c->meta.timestamp_ns = r->timestamp_ns;
    c->meta.seq = r->seq;
    c->meta.sender = r->sender;
    c->meta.flags = (r->flags & FHP_REC_ECHO) ? FHP_META_ECHO : 0;
    c->meta.channel_id = slot->channel_id;
    c->meta.port = r->port;
    c->meta.reserved = 0;
    c->frame_ready = 1;
}

/* Bound on decoder steps per fhp_poll, so a flood of filtered frames cannot hold the caller. */
#define POLL_STEPS 256

int fhp_poll(fhp_client *c) {
    int steps, rc;
    if (!c) return FHP_ERR_INVALID_ARGUMENT;
    if (c->state == CS_IDLE) return FHP_ERR_NOT_CONNECTED;
    if (c->state == CS_CLOSED) {
        /* A GOODBYE fhp_close queued still goes out. */
        if (c->tx_len) flush_tx(c);
        return c->last_status;
    }
    if (flush_tx(c) < 0) return c->last_status;
    for (steps = 0; steps < POLL_STEPS && !c->frame_ready; steps++) {
        uint8_t *dst;
        size_t want = fhp_decoder_space(&c->dec, &dst);
        long n = 0;
        fhp_event ev;
        if (want) {
            n = c->io.read(c->io.ctx, dst, want);
            if (n == 0) break;
            if (n < 0 || (size_t)n > want) {
                err_set(c, n == FHP_ERR_CLOSED ? FHP_ERR_CLOSED : FHP_ERR_IO,
                        n == FHP_ERR_CLOSED ? "the hub closed the connection without a word"
                                            : "reading from the hub failed: the stream's read callback returned an error");
                return end_session(c, c->last_status);
            }
        }
        ev = fhp_decoder_advance(&c->dec, (size_t)n);
        if (ev == FHP_EV_ERROR) {
            if (c->dec.error == FHP_DEC_NO_ROOM) {
                err_set(c, FHP_ERR_NO_ROOM, "a message of ");
                err_num(c, c->dec.body_len);
                err_str(c, " bytes from the hub does not fit the receive buffer");
                return end_session(c, FHP_ERR_NO_ROOM);
            }
            protocol_error(c, "its bytes do not decode: ");
            err_str(c, fhp_decode_error_name(c->dec.error));
            return FHP_ERR_PROTOCOL;
        }
        if (ev == FHP_EV_MESSAGE) {
            rc = on_message(c, &c->dec.msg);
            if (rc < 0) return rc;
        } else if (ev == FHP_EV_RECORD) {
            if (c->state != CS_READY) return protocol_error(c, "frames before WELCOME");
            on_record(c, &c->dec.rec);
        }
    }
    return flush_tx(c);
}

int fhp_port_open(fhp_client *c, const char *channel, const char *port_name, uint32_t flags, uint32_t *request) {
    fhp_message m;
    int rc;
    if (!c || !channel || !request) return FHP_ERR_INVALID_ARGUMENT;
    rc = need_ready(c);
    if (rc < 0) return rc;
    if ((flags & ~0x1Fu) || ((flags & FHP_PORT_LISTEN_ONLY) && (flags & FHP_PORT_TRANSMIT_ONLY)))
        return err_set(c, FHP_ERR_INVALID_ARGUMENT,
                       "fhp_port_open: unknown flags, or LISTEN_ONLY together with TRANSMIT_ONLY");
    memset(&m, 0, sizeof m);
    m.type = FHP_MSG_OPEN_PORT;
    /* The request id carries the options, so PORT_OPENED brings them back
     * without a table of pending requests. */
    c->next_request = (c->next_request + 1) & 0x07FFFFFFu;
    if (c->next_request == 0) c->next_request = 1;
    m.request = (c->next_request << 5) | flags;
    m.options = flags;
    m.str_a = (const uint8_t *)channel;
    m.str_a_len = strlen(channel);
    m.str_b = (const uint8_t *)port_name;
    m.str_b_len = port_name ? strlen(port_name) : 0;
    if (m.str_a_len > FHP_MAX_NAME_LEN || m.str_b_len > FHP_MAX_NAME_LEN || !utf8_valid(m.str_a, m.str_a_len) ||
        !utf8_valid(m.str_b, m.str_b_len))
        return err_set(c, FHP_ERR_INVALID_ARGUMENT, "fhp_port_open: a name is over 64 bytes or not UTF-8");
    rc = queue_message(c, &m, 4 + 11 + m.str_a_len + m.str_b_len);
    if (rc < 0) return rc;
    *request = m.request;
    return FHP_OK;
}

int fhp_port_result(fhp_client *c, uint32_t request, fhp_port *port) {
    unsigned i;
    if (!c || !port || request == 0) return FHP_ERR_INVALID_ARGUMENT;
    for (i = 0; i < FHP_MAX_PORTS; i++) {
        if (c->ports[i].open && c->ports[i].request == request) {
            *port = (fhp_port)i;
            return FHP_OK;
        }
    }
    if (c->failed_request == request) return c->failed_status;
    if (c->state == CS_CLOSED) return c->last_status;
    return FHP_ERR_AGAIN;
}

static fhp_port_slot *open_slot(fhp_client *c, fhp_port port) {
    return port < FHP_MAX_PORTS && c->ports[port].open ? &c->ports[port] : NULL;
}

int fhp_port_close(fhp_client *c, fhp_port port) {
    fhp_message m;
    int rc;
    if (!c) return FHP_ERR_INVALID_ARGUMENT;
    rc = need_ready(c);
    if (rc < 0) return rc;
    if (!open_slot(c, port)) return err_set(c, FHP_ERR_PORT_NOT_OPEN, "fhp_port_close: the port is not open");
    memset(&m, 0, sizeof m);
    m.type = FHP_MSG_CLOSE_PORT;
    m.port = port;
    rc = queue_message(c, &m, 7);
    if (rc < 0) return rc;
    c->ports[port].open = 0;
    return FHP_OK;
}

/* The record of a frame as the spec has it, or FHP_ERR_INVALID_FRAME naming why not. */
static int frame_record(fhp_client *c, const fhp_port_slot *slot, const fhp_frame *f, fhp_record *r) {
    int fd = (f->flags & (FHP_CANFD_FDF | FHP_CANFD_BRS | FHP_CANFD_ESI)) != 0;
    memset(r, 0, sizeof *r);
    if (slot->options & FHP_PORT_LISTEN_ONLY)
        return err_set(c, FHP_ERR_INVALID_FRAME, "fhp_send: the port is listen-only");
    if (fd && !(slot->options & FHP_PORT_FD))
        return err_set(c, FHP_ERR_INVALID_FRAME, "fhp_send: a CAN FD frame on a port opened without FHP_PORT_FD");
    if (fd && !(slot->channel_flags & 1))
        return err_set(c, FHP_ERR_INVALID_FRAME, "fhp_send: a CAN FD frame on a channel for classic CAN");
    r->kind = (f->can_id & FHP_CAN_ERR_FLAG) ? FHP_KIND_ERROR : fd ? FHP_KIND_CANFD : FHP_KIND_CAN;
    r->id = f->can_id & FHP_CAN_EFF_MASK;
    if (r->kind != FHP_KIND_ERROR && (f->can_id & FHP_CAN_EFF_FLAG)) r->flags |= FHP_REC_EXTENDED;
    if (r->kind != FHP_KIND_ERROR && (f->can_id & FHP_CAN_RTR_FLAG)) r->flags |= FHP_REC_REMOTE;
    if (r->kind == FHP_KIND_CANFD && (f->flags & FHP_CANFD_BRS)) r->flags |= FHP_REC_BRS;
    if (r->kind == FHP_KIND_CANFD && (f->flags & FHP_CANFD_ESI)) r->flags |= FHP_REC_ESI;
    r->len = f->len;
    if (r->kind == FHP_KIND_CAN && f->len == 8 && f->len8_dlc >= 9 && f->len8_dlc <= 15) r->len8_dlc = f->len8_dlc;
    r->data = f->data;
    if ((r->kind == FHP_KIND_CANFD && (f->can_id & FHP_CAN_RTR_FLAG)) || fhp_record_check(r) != FHP_DEC_OK) {
        err_set(c, FHP_ERR_INVALID_FRAME, "fhp_send: not a valid frame (can_id ");
        err_num(c, f->can_id);
        err_str(c, " in decimal, len ");
        err_num(c, f->len);
        err_str(c, "): check the id range, the length and the flags");
        return FHP_ERR_INVALID_FRAME;
    }
    return FHP_OK;
}

int fhp_send(fhp_client *c, fhp_port port, const fhp_frame *frame) {
    fhp_record r;
    fhp_port_slot *slot;
    size_t size;
    int rc;
    if (!c || !frame) return FHP_ERR_INVALID_ARGUMENT;
    rc = need_ready(c);
    if (rc < 0) return rc;
    slot = open_slot(c, port);
    if (!slot) return err_set(c, FHP_ERR_PORT_NOT_OPEN, "fhp_send: the port is not open");
    rc = frame_record(c, slot, frame, &r);
    if (rc < 0) return rc;
    r.port = port;
    size = RECORD_HEADER + ((r.flags & FHP_REC_REMOTE) ? 0u : r.len);
    /* Records join the batch at the end of tx while nothing of it was sent. */
    if (c->batch_at == NO_BATCH || c->batch_count == FHP_MAX_FRAMES_PER_BATCH || c->tx_cap - c->tx_len < size) {
        rc = tx_room(c, 8 + size);
        if (rc < 0) return rc;
        c->batch_at = c->tx_len;
        c->batch_count = 0;
        c->tx_len += fhp_encode_frames_header(c->tx + c->tx_len, c->tx_cap - c->tx_len);
    }
    c->tx_len += fhp_encode_record(c->tx + c->tx_len, c->tx_cap - c->tx_len, &r);
    c->batch_count++;
    fhp_encode_frames_finish(c->tx + c->batch_at, c->tx_len - c->batch_at, c->batch_count);
    return FHP_OK;
}

int fhp_recv(fhp_client *c, fhp_frame *frame, fhp_meta *meta) {
    int rc;
    if (!c || !frame) return FHP_ERR_INVALID_ARGUMENT;
    if (!c->frame_ready) {
        rc = fhp_poll(c);
        if (rc < 0) return rc;
        if (!c->frame_ready) return FHP_ERR_AGAIN;
    }
    *frame = c->frame;
    if (meta) *meta = c->meta;
    c->frame_ready = 0;
    return FHP_OK;
}

int fhp_set_filters(fhp_client *c, fhp_port port, const fhp_filter *filters, uint16_t count) {
    fhp_port_slot *slot;
    if (!c || (!filters && count)) return FHP_ERR_INVALID_ARGUMENT;
    slot = open_slot(c, port);
    if (!slot) return err_set(c, FHP_ERR_PORT_NOT_OPEN, "fhp_set_filters: the port is not open");
    slot->filters = filters;
    slot->filter_count = count;
    return FHP_OK;
}

int fhp_flush_start(fhp_client *c, uint64_t *nonce) {
    fhp_message m;
    int rc;
    if (!c || !nonce) return FHP_ERR_INVALID_ARGUMENT;
    rc = need_ready(c);
    if (rc < 0) return rc;
    memset(&m, 0, sizeof m);
    m.type = FHP_MSG_PING;
    m.u64 = c->next_nonce + 1;
    rc = queue_message(c, &m, 13);
    if (rc < 0) return rc;
    *nonce = ++c->next_nonce;
    return FHP_OK;
}

int fhp_flushed(fhp_client *c, uint64_t nonce) {
    int rc;
    if (!c) return FHP_ERR_INVALID_ARGUMENT;
    rc = need_ready(c);
    if (rc < 0) return rc;
    if (c->pong_nonce < nonce) return FHP_ERR_AGAIN;
    if (c->tx_dropped) {
        c->tx_dropped = 0;
        return FHP_ERR_DROPPED;
    }
    return FHP_OK;
}

int fhp_port_info(const fhp_client *c, fhp_port port, uint16_t *channel_id, uint32_t *port_id,
                  uint8_t *channel_flags, uint32_t *rx_dropped) {
    const fhp_port_slot *slot;
    if (!c) return FHP_ERR_INVALID_ARGUMENT;
    if (port >= FHP_MAX_PORTS || !c->ports[port].open) return FHP_ERR_PORT_NOT_OPEN;
    slot = &c->ports[port];
    if (channel_id) *channel_id = slot->channel_id;
    if (port_id) *port_id = slot->port_id;
    if (channel_flags) *channel_flags = slot->channel_flags;
    if (rx_dropped) *rx_dropped = slot->rx_dropped;
    return FHP_OK;
}

int fhp_close(fhp_client *c) {
    fhp_message m;
    if (!c) return FHP_ERR_INVALID_ARGUMENT;
    if (c->state == CS_READY) {
        memset(&m, 0, sizeof m);
        m.type = FHP_MSG_GOODBYE;
        m.fatal = 1;
        if (queue_message(c, &m, 14) < 0) c->tx_len = c->tx_sent = 0;
        c->state = CS_CLOSED;
        c->last_status = FHP_ERR_CLOSED;
        err_set(c, FHP_ERR_CLOSED, "the client was closed");
        return FHP_OK;
    }
    end_session(c, FHP_ERR_CLOSED);
    err_set(c, FHP_ERR_CLOSED, "the client was closed");
    return FHP_OK;
}

size_t fhp_tx_pending(const fhp_client *c) { return c ? c->tx_len - c->tx_sent : 0; }

const char *fhp_last_error(const fhp_client *c) { return c ? c->last_error : "no client"; }

const char *fhp_strerror(int status) {
    switch (status) {
    case FHP_OK:
        return "success";
    case FHP_ERR_INVALID_ARGUMENT:
        return "invalid argument";
    case FHP_ERR_IO:
        return "the stream to the hub failed";
    case FHP_ERR_REFUSED:
        return "the hub refused the connection";
    case FHP_ERR_CLOSED:
        return "the connection has ended";
    case FHP_ERR_AGAIN:
        return "not yet: call fhp_poll and try again";
    case FHP_ERR_NOT_CONNECTED:
        return "not connected";
    case FHP_ERR_UNKNOWN_CHANNEL:
        return "the hub has no channel of that name";
    case FHP_ERR_TOO_MANY_PORTS:
        return "the client already has 32 ports open";
    case FHP_ERR_PORT_NAME_TAKEN:
        return "a port of that name is already open on the hub";
    case FHP_ERR_PORT_NOT_OPEN:
        return "the port is not open";
    case FHP_ERR_INVALID_FRAME:
        return "the frame is not valid for the port";
    case FHP_ERR_REJECTED:
        return "the hub declined the request";
    case FHP_ERR_PROTOCOL:
        return "the hub broke the protocol";
    case FHP_ERR_DROPPED:
        return "the hub dropped frames of this client";
    case FHP_ERR_NO_ROOM:
        return "a message from the hub does not fit the receive buffer";
    default:
        return "unknown status";
    }
}
