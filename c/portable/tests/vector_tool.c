/*
 * vector_tool - the portable client's codec as a filter for the vector check
 * (check_vectors.py). Each stdin line is "LIMIT HEX" (LIMIT: hello or
 * message); each stdout line is the JSON of what fieldhub_portable.c made
 * of the bytes: {"valid":true,"message":{...},"encoded":"HEX"} with the
 * decoded message in the shape of spec/README.md and the bytes its
 * encoders write for that message, or {"valid":false,"error":"KIND",
 * "code":"NAME"}. The decoder is fed one byte at a time, so every stage of
 * the streaming decoder meets a short read.
 *
 * A line "auth TOKEN_HEX CHALLENGE_HEX HELLO_HEX" (whole messages) asks for
 * the MAC fhp_auth_mac computes for them: {"mac":"HEX"}.
 */
#include "fieldhub_portable.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BUF_LEN (FHP_MAX_MESSAGE_LEN + 64)

/* One result line is built here and printed once it is known to be whole. */
static char out[4 * BUF_LEN];
static size_t out_len;

static void emit(const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    out_len += (size_t)vsnprintf(out + out_len, sizeof out - out_len, fmt, args);
    va_end(args);
}

static void emit_c(int c) { emit("%c", c); }

static void json_str(const uint8_t *s, size_t n) {
    size_t i;
    emit_c('"');
    for (i = 0; i < n; i++) {
        if (s[i] == '"' || s[i] == '\\') emit("\\%c", s[i]);
        else if (s[i] < 0x20) emit("\\u%04x", s[i]);
        else emit_c(s[i]);
    }
    emit_c('"');
}

static void hex(const uint8_t *s, size_t n) {
    size_t i;
    for (i = 0; i < n; i++) emit("%02x", s[i]);
}

static void name_or_null(const char *name) {
    if (name) emit("\"%s\"", name);
    else emit("null");
}

static void bit_names(uint32_t bits, const char *const *names, unsigned count) {
    unsigned i, first = 1;
    emit_c('[');
    for (i = 0; i < count; i++) {
        if (bits & (1u << i)) {
            emit("%s\"%s\"", first ? "" : ",", names[i]);
            first = 0;
        }
    }
    emit_c(']');
}

static void print_message(const fhp_message *m) {
    static const char *const port_opts[] = {"receive_own", "block_on_overflow", "fd", "listen_only", "transmit_only"};
    static const char *const session_opts[] = {"synchronized"};
    static const char *const channel_flags[] = {"canfd"};
    static const char *const reasons[] = {NULL, "bus_off", "fault_rule", "owner_lost", "unplugged", "queue_full"};
    static const char *const conditions[] = {NULL, "waiting", "live", "gap", "asleep", "awake"};
    switch (m->type) {
    case FHP_MSG_HELLO:
        emit("{\"type\":\"hello\",\"version\":%u,\"name\":", m->version);
        json_str(m->str_a, m->str_a_len);
        if (m->options) {
            emit(",\"options\":");
            bit_names(m->options, session_opts, 1);
        }
        break;
    case FHP_MSG_CHALLENGE:
        emit("{\"type\":\"challenge\",\"nonce\":\"");
        hex(m->str_b, m->str_b_len);
        emit("\",\"hub_name\":");
        json_str(m->str_a, m->str_a_len);
        break;
    case FHP_MSG_AUTH:
        emit("{\"type\":\"auth\",\"mac\":\"");
        hex(m->str_b, m->str_b_len);
        emit_c('"');
        break;
    case FHP_MSG_WELCOME:
        emit("{\"type\":\"welcome\",\"version\":%u,\"client_id\":%lu,\"hub_name\":", m->version,
               (unsigned long)m->value);
        json_str(m->str_a, m->str_a_len);
        break;
    case FHP_MSG_REFUSE:
    case FHP_MSG_ERROR:
    case FHP_MSG_GOODBYE:
        emit("{\"type\":\"%s\",\"code\":%u,\"code_name\":",
               m->type == FHP_MSG_REFUSE ? "refuse" : m->type == FHP_MSG_ERROR ? "error" : "goodbye", m->code);
        name_or_null(fhp_code_name(m->code));
        emit(",\"request\":%lu,\"fatal\":%s,\"text\":", (unsigned long)m->request, m->fatal ? "true" : "false");
        json_str(m->str_a, m->str_a_len);
        break;
    case FHP_MSG_OPEN_PORT:
        emit("{\"type\":\"open_port\",\"request\":%lu,\"options\":", (unsigned long)m->request);
        bit_names(m->options, port_opts, 5);
        emit(",\"channel\":");
        json_str(m->str_a, m->str_a_len);
        emit(",\"port_name\":");
        json_str(m->str_b, m->str_b_len);
        break;
    case FHP_MSG_PORT_OPENED:
        emit("{\"type\":\"port_opened\",\"request\":%lu,\"port\":%u,\"channel_id\":%u,\"port_id\":%lu,"
               "\"channel_flags\":",
               (unsigned long)m->request, m->port, m->channel_id, (unsigned long)m->value);
        bit_names(m->flags8, channel_flags, 1);
        break;
    case FHP_MSG_CLOSE_PORT:
    case FHP_MSG_PORT_CLOSED:
        emit("{\"type\":\"%s\",\"port\":%u", m->type == FHP_MSG_CLOSE_PORT ? "close_port" : "port_closed", m->port);
        break;
    case FHP_MSG_RX_OVERFLOW:
        emit("{\"type\":\"rx_overflow\",\"port\":%u,\"dropped\":%lu", m->port, (unsigned long)m->value);
        break;
    case FHP_MSG_TX_DROPPED:
        emit("{\"type\":\"tx_dropped\",\"port\":%u,\"reason\":%u,\"reason_name\":", m->port, m->code);
        name_or_null(m->code < 6 ? reasons[m->code] : NULL);
        emit(",\"dropped\":%lu", (unsigned long)m->value);
        break;
    case FHP_MSG_CHANNEL_STATE:
        emit("{\"type\":\"channel_state\",\"port\":%u,\"condition\":%u,\"condition_name\":", m->port, m->flags8);
        name_or_null(m->flags8 < 6 ? conditions[m->flags8] : NULL);
        emit(",\"missed\":%lu,\"text\":", (unsigned long)m->value);
        json_str(m->str_a, m->str_a_len);
        break;
    case FHP_MSG_PING:
    case FHP_MSG_PONG:
        emit("{\"type\":\"%s\",\"nonce\":%llu", m->type == FHP_MSG_PING ? "ping" : "pong", (unsigned long long)m->u64);
        break;
    case FHP_MSG_STEP:
        emit("{\"type\":\"step\",\"until_ns\":%llu", (unsigned long long)m->u64);
        break;
    case FHP_MSG_GRANT:
        emit("{\"type\":\"grant\",\"now_ns\":%llu", (unsigned long long)m->u64);
        break;
    case FHP_MSG_STATS_REQUEST:
        emit("{\"type\":\"stats_request\",\"request\":%lu", (unsigned long)m->request);
        break;
    case FHP_MSG_STATS:
        emit("{\"type\":\"stats\",\"request\":%lu,\"json\":", (unsigned long)m->request);
        json_str(m->str_a, m->str_a_len);
        break;
    }
    emit_c('}');
}

static void print_record(const fhp_record *r, int first) {
    static const char *const kinds[] = {"can", "canfd", "error"};
    static const char *const flags[] = {"extended", "remote", "brs", "esi", "echo"};
    emit("%s{\"port\":%u,\"kind\":\"%s\",\"flags\":", first ? "" : ",", r->port, kinds[r->kind]);
    bit_names(r->flags, flags, 5);
    emit(",\"id\":%lu,\"seq\":%llu,\"timestamp_ns\":%llu,\"sender\":%lu,\"len\":%u,\"len8_dlc\":%u,\"data\":\"",
           (unsigned long)r->id, (unsigned long long)r->seq, (unsigned long long)r->timestamp_ns,
           (unsigned long)r->sender, r->len, r->len8_dlc);
    hex(r->data, (r->flags & FHP_REC_REMOTE) ? 0 : r->len);
    emit("\"}");
}

static int unhex(const char *s, uint8_t *out, size_t cap, size_t *len) {
    size_t n = strlen(s), i;
    if (n % 2 || n / 2 > cap) return 0;
    for (i = 0; i < n / 2; i++) {
        unsigned v;
        if (sscanf(s + 2 * i, "%2x", &v) != 1) return 0;
        out[i] = (uint8_t)v;
    }
    *len = n / 2;
    return 1;
}

/* Decode one whole message of `bytes` into `m` (strings point into `buf`); 0 if it does not decode. */
static int decode_one(const uint8_t *bytes, size_t len, uint8_t *buf, size_t cap, fhp_decoder *d) {
    size_t used;
    fhp_decoder_init(d, buf, cap, FHP_MAX_HELLO_LEN);
    return fhp_decoder_feed(d, bytes, len, &used) == FHP_EV_MESSAGE;
}

/* "auth TOKEN CHALLENGE HELLO" (hex): the MAC of AUTH for them. */
static int auth_line(char *args) {
    static uint8_t token[256], challenge[256], hello[256], challenge_buf[512], hello_buf[512];
    char *t = strtok(args, " \r\n"), *c = strtok(NULL, " \r\n"), *h = strtok(NULL, " \r\n");
    size_t token_len, challenge_len, hello_len;
    uint8_t mac[FHP_MAC_LEN];
    fhp_decoder cd, hd;
    if (!t || !c || !h || !unhex(t, token, sizeof token, &token_len) ||
        !unhex(c, challenge, sizeof challenge, &challenge_len) || !unhex(h, hello, sizeof hello, &hello_len))
        return 0;
    if (!decode_one(challenge, challenge_len, challenge_buf, sizeof challenge_buf, &cd) ||
        cd.msg.type != FHP_MSG_CHALLENGE || !decode_one(hello, hello_len, hello_buf, sizeof hello_buf, &hd) ||
        hd.msg.type != FHP_MSG_HELLO)
        return 0;
    fhp_auth_mac(token, token_len, &cd.msg, &hd.msg, mac);
    emit("{\"mac\":\"");
    hex(mac, sizeof mac);
    emit("\"}\n");
    fputs(out, stdout);
    out_len = 0;
    out[0] = '\0';
    fflush(stdout);
    return 1;
}

int main(void) {
    static char line[2 * BUF_LEN + 64];
    static uint8_t in[BUF_LEN], dec_buf[BUF_LEN], enc[BUF_LEN];
    while (fgets(line, sizeof line, stdin)) {
        char *space = strchr(line, ' ');
        size_t len = 0, i, enc_len = 0, consumed = 0;
        unsigned records = 0;
        fhp_decoder d;
        fhp_event ev = FHP_EV_NONE;
        int done = 0;
        if (!space) return 2;
        *space = '\0';
        if (strcmp(line, "auth") == 0) {
            if (!auth_line(space + 1)) return 2;
            continue;
        }
        space[strcspn(space + 1, "\r\n") + 1] = '\0';
        if (!unhex(space + 1, in, sizeof in, &len)) return 2;
        fhp_decoder_init(&d, dec_buf, sizeof dec_buf,
                         strcmp(line, "hello") == 0 ? FHP_MAX_HELLO_LEN : FHP_MAX_MESSAGE_LEN);
        /* One byte at a time; afterwards the steps that need no bytes. */
        for (i = 0; i <= len && !done; i++) {
            size_t used;
            ev = fhp_decoder_feed(&d, in + i, i < len ? 1 : 0, &used);
            consumed += used;
            while (!done) {
                if (ev == FHP_EV_ERROR) {
                    out_len = 0;
                    emit("{\"valid\":false,\"error\":\"%s\",\"code\":", fhp_decode_error_name(d.error));
                    name_or_null(fhp_code_name(fhp_decode_error_code(d.error)));
                    emit("}\n");
                    done = 1;
                } else if (ev == FHP_EV_MESSAGE && d.msg.type == FHP_MSG_FRAMES) {
                    emit("{\"valid\":true,\"message\":{\"type\":\"frames\",\"records\":[");
                    enc_len = fhp_encode_frames_header(enc, sizeof enc);
                } else if (ev == FHP_EV_MESSAGE) {
                    emit("{\"valid\":true,\"message\":");
                    print_message(&d.msg);
                    emit(",\"encoded\":\"");
                    hex(enc, fhp_encode_message(enc, sizeof enc, &d.msg));
                    emit("\",\"rest\":%lu}\n", (unsigned long)(len - consumed));
                    done = 1;
                } else if (ev == FHP_EV_RECORD) {
                    print_record(&d.rec, records++ == 0);
                    enc_len += fhp_encode_record(enc + enc_len, sizeof enc - enc_len, &d.rec);
                } else if (ev == FHP_EV_FRAMES_END) {
                    fhp_encode_frames_finish(enc, enc_len, (uint16_t)records);
                    emit("]},\"encoded\":\"");
                    hex(enc, enc_len);
                    emit("\",\"rest\":%lu}\n", (unsigned long)(len - consumed));
                    done = 1;
                }
                if (done || ev == FHP_EV_NONE) break;
                /* Events that need no input (a batch's end) come from an empty feed. */
                ev = fhp_decoder_feed(&d, in, 0, &used);
            }
        }
        if (!done) {
            out_len = 0;
            emit("{\"valid\":false,\"error\":\"incomplete\",\"code\":null}\n");
        }
        fputs(out, stdout);
        out_len = 0;
        out[0] = '\0';
        fflush(stdout);
    }
    return 0;
}
