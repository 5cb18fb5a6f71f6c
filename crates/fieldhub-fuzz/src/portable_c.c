/*
 * The C side of the portable_c fuzz target (portable_c.rs): drives the
 * portable client's streaming decoder and its client over one input.
 * Buffers come from the caller (the Rust side), as they would in firmware.
 */
#include "fieldhub_portable.h"

#include <string.h>

/*
 * Decode the first message of `data`, fed in chunks of 1 to 13 bytes (the
 * decoder's partial reads), with the length limit `limit`. Returns the
 * decode error (0: a whole message decoded), -1 when the input ends first,
 * -2 when a decoded message does not re-encode to exactly its bytes.
 * `*consumed` gets the bytes the decoder took.
 */
int fhp_fuzz_first_message(const uint8_t *data, size_t len, uint32_t limit, uint8_t *buf, size_t cap, uint8_t *enc,
                           size_t enc_cap, size_t *consumed) {
    fhp_decoder d;
    size_t pos = 0, enc_len = 0, used;
    unsigned records = 0, chunk = 0;
    fhp_event ev;
    fhp_decoder_init(&d, buf, cap, limit);
    for (;;) {
        size_t n = 1 + (chunk++ * 7) % 13;
        if (n > len - pos) n = len - pos;
        ev = fhp_decoder_feed(&d, data + pos, n, &used);
        pos += used;
        for (;;) {
            if (ev == FHP_EV_ERROR) {
                *consumed = pos;
                return d.error;
            }
            if (ev == FHP_EV_MESSAGE && d.msg.type == FHP_MSG_FRAMES) {
                enc_len = fhp_encode_frames_header(enc, enc_cap);
            } else if (ev == FHP_EV_MESSAGE) {
                *consumed = pos;
                enc_len = fhp_encode_message(enc, enc_cap, &d.msg);
                return enc_len == pos && memcmp(enc, data, pos) == 0 ? 0 : -2;
            } else if (ev == FHP_EV_RECORD) {
                records++;
                if (d.rec.len > 64) return -2;
                enc_len += fhp_encode_record(enc + enc_len, enc_cap - enc_len, &d.rec);
            } else if (ev == FHP_EV_FRAMES_END) {
                *consumed = pos;
                if (records != d.msg.count) return -2;
                fhp_encode_frames_finish(enc, enc_len, (uint16_t)records);
                return enc_len == pos && memcmp(enc, data, pos) == 0 ? 0 : -2;
            }
            if (ev == FHP_EV_NONE) break;
            ev = fhp_decoder_feed(&d, data, 0, &used);
        }
        if (pos == len && used == 0) {
            *consumed = pos;
            return -1;
        }
    }
}

typedef struct script {
    const uint8_t *data;
    size_t len, pos;
} script;

static const uint8_t WELCOME[] = {0x0a, 0, 0, 0, 0x02, 1, 0, 7, 0, 0, 0, 2, 'h', 'h'};

/* The hub's bytes: a WELCOME, then the input; reads of at most 5 bytes. */
static long script_read(void *ctx, uint8_t *buf, size_t len) {
    script *s = ctx;
    size_t i, total = sizeof WELCOME + s->len;
    if (s->pos == total) return FHP_ERR_CLOSED;
    if (len > 5) len = 5;
    if (len > total - s->pos) len = total - s->pos;
    for (i = 0; i < len; i++, s->pos++)
        buf[i] = s->pos < sizeof WELCOME ? WELCOME[s->pos] : s->data[s->pos - sizeof WELCOME];
    return (long)len;
}

/* Takes everything, in pieces of at most 7 bytes. */
static long script_write(void *ctx, const uint8_t *buf, size_t len) {
    (void)ctx, (void)buf;
    return (long)(len > 7 ? 7 : len);
}

/*
 * Run the client with the input as what a hub sends after WELCOME: it opens
 * a port, sends a frame and a PING, receives what passes. Returns the status
 * it ends with: FHP_OK when the input ran out cleanly is impossible (the
 * end of the stream is FHP_ERR_CLOSED), so anything >= 0 is a failure.
 */
int fhp_fuzz_client(const uint8_t *data, size_t len) {
    fhp_client c;
    uint8_t rx[FHP_RX_BUFFER_MIN], tx[FHP_TX_BUFFER_MIN + 200];
    static const fhp_filter filters[] = {{0x100, 0x700}};
    fhp_stream stream;
    script s;
    fhp_frame f;
    fhp_meta meta;
    fhp_port port;
    uint32_t request = 0;
    uint64_t nonce;
    int rc = FHP_OK, rounds;
    s.data = data, s.len = len, s.pos = 0;
    stream.ctx = &s, stream.read = script_read, stream.write = script_write;
    if (fhp_init(&c, &stream, rx, sizeof rx, tx, sizeof tx) != FHP_OK || fhp_connect(&c, "fuzz", "token") != FHP_OK)
        return 1;
    /* Every poll reads at least one byte or ends: the input bounds the rounds. */
    for (rounds = 0; rounds < 4 * (int)(len + sizeof WELCOME) + 16; rounds++) {
        rc = fhp_poll(&c);
        if (rc < 0) return rc;
        if (request == 0 && fhp_connected(&c) == FHP_OK) {
            fhp_port_open(&c, "can0", "p", FHP_PORT_FD | FHP_PORT_RECEIVE_OWN, &request);
            fhp_flush_start(&c, &nonce);
        }
        if (request && fhp_port_result(&c, request, &port) == FHP_OK) {
            memset(&f, 0, sizeof f);
            f.can_id = 0x123, f.len = 2;
            fhp_send(&c, port, &f);
            fhp_set_filters(&c, port, filters, 1);
        }
        while (fhp_recv(&c, &f, &meta) == FHP_OK)
            if (f.len > 64 || meta.port >= FHP_MAX_PORTS) return 2;
    }
    return rc >= 0 ? 3 : rc;
}
