/*
 * fieldhub_portable.h - a portable C99 client of fieldhub for firmware.
 *
 * fieldhub is a virtual CAN / CAN FD bus: a hub process is the bus, clients
 * attach ports to its channels. This client speaks the hub's stream protocol
 * (spec/protocol.md, version 2) over any byte stream: a TCP socket, a UART,
 * a virtio-serial port. Copy this header and fieldhub_portable.c into a
 * project; write two callbacks (read and write some bytes) or take a ready
 * adapter from fieldhub_portable_io.c (BSD sockets, Winsock, a file
 * descriptor). Guide: c/portable/README.md.
 *
 * Rules it keeps, so that it fits an RTOS task or a bare-metal main loop:
 *  - no dynamic allocation: the caller gives the client struct and its two
 *    buffers; nothing is allocated or freed inside;
 *  - no threads, no blocking: fhp_poll() does the I/O the stream allows now
 *    and returns; every call that must wait for the hub returns
 *    FHP_ERR_AGAIN and is called again after the next fhp_poll();
 *  - no global state: everything lives in the fhp_client the caller owns;
 *  - byte order independent: wire bytes are assembled byte by byte, never
 *    read through a struct overlay, so big- and little-endian targets work.
 *
 * Frames are fhp_frame, laid out as Linux `struct canfd_frame` (and as
 * libfieldhub's fh_frame); metadata (seq, timestamp, sender) as fh_meta.
 * Functions return FHP_OK (0) or a negative status whose values equal
 * libfieldhub's fh_status where the meaning is the same.
 *
 *     fhp_client c;
 *     static uint8_t rx[FHP_RX_BUFFER_MIN], tx[2048];
 *     fhp_init(&c, &stream, rx, sizeof rx, tx, sizeof tx);
 *     fhp_connect(&c, "ecu", NULL);
 *     for (;;) {
 *         if (fhp_poll(&c) < 0) break;      // connection over: fhp_last_error
 *         ... fhp_port_open / fhp_send / fhp_recv, each FHP_ERR_AGAIN = later
 *     }
 */
#ifndef FIELDHUB_PORTABLE_H
#define FIELDHUB_PORTABLE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Status codes (values as libfieldhub's fh_status) ---------------- */

#define FHP_OK 0
/** A pointer was NULL, a string too long, a flag unknown, a buffer too small. */
#define FHP_ERR_INVALID_ARGUMENT (-1)
/** The stream's read or write callback reported an error. */
#define FHP_ERR_IO (-3)
/** The hub refused the connection (REFUSE: token, version, hub full), or the io adapters
 *  refused another user's hub before sending anything (fhp_check_hub). */
#define FHP_ERR_REFUSED (-4)
/** The connection has ended (GOODBYE, a fatal ERROR, end of stream). */
#define FHP_ERR_CLOSED (-5)
/** Nothing yet, or no room yet: call fhp_poll() and try again. */
#define FHP_ERR_AGAIN (-6)
/** Not connected (fhp_connect not called, or the WELCOME not yet here). */
#define FHP_ERR_NOT_CONNECTED (-7)
/** The hub has no channel of that name. */
#define FHP_ERR_UNKNOWN_CHANNEL (-8)
/** The client already has 32 ports open. */
#define FHP_ERR_TOO_MANY_PORTS (-9)
/** A port of that name is already open on the hub. */
#define FHP_ERR_PORT_NAME_TAKEN (-10)
/** The port handle is not open on this client. */
#define FHP_ERR_PORT_NOT_OPEN (-11)
/** The frame is not valid (identifier range, length, flags) or the port may not send it. */
#define FHP_ERR_INVALID_FRAME (-12)
/** The hub declined a request for another reason (see fhp_last_error). */
#define FHP_ERR_REJECTED (-13)
/** The hub sent bytes that break the protocol (see fhp_last_error). */
#define FHP_ERR_PROTOCOL (-14)
/** Frames this client sent were dropped by the hub (TX_DROPPED; see fhp_last_error). */
#define FHP_ERR_DROPPED (-16)
/** A message from the hub is larger than the receive buffer the caller gave. */
#define FHP_ERR_NO_ROOM (-17)

/* ---- Frames (as <linux/can.h> and fieldhub.h) ------------------------ */

#define FHP_CAN_EFF_FLAG 0x80000000UL
#define FHP_CAN_RTR_FLAG 0x40000000UL
#define FHP_CAN_ERR_FLAG 0x20000000UL
#define FHP_CAN_SFF_MASK 0x000007FFUL
#define FHP_CAN_EFF_MASK 0x1FFFFFFFUL
/** A filter with this bit in can_id passes the frames it does not match (CAN_INV_FILTER). */
#define FHP_CAN_INV_FILTER 0x20000000UL
#define FHP_CANFD_BRS 0x01
#define FHP_CANFD_ESI 0x02
#define FHP_CANFD_FDF 0x04

/** A CAN or CAN FD frame with the layout of Linux `struct canfd_frame`. */
typedef struct fhp_frame {
    uint32_t can_id;  /* identifier | FHP_CAN_EFF_FLAG / _RTR_FLAG / _ERR_FLAG */
    uint8_t len;      /* payload length; a remote frame's requested length */
    uint8_t flags;    /* FHP_CANFD_*; FDF (or BRS/ESI) makes it a CAN FD frame */
    uint8_t res0;     /* ignored on send, 0 on receive */
    uint8_t len8_dlc; /* raw DLC 9..15 of a classic frame of 8 bytes, else 0 */
    uint8_t data[64];
} fhp_frame;

/** fhp_meta.flags: the frame is this port's own, confirmed on the bus (echo). */
#define FHP_META_ECHO 1u

/** What the hub attached to a received frame (as libfieldhub's fh_meta). */
typedef struct fhp_meta {
    uint64_t timestamp_ns; /* when the hub sequenced it (ns since the epoch, or bus time) */
    uint64_t seq;          /* position in the channel's order: 1, 2, 3... */
    uint32_t sender;       /* hub-wide port id of the sender; 0 for hub-made frames */
    uint32_t flags;        /* FHP_META_* */
    uint16_t channel_id;   /* hub-wide id of the receiving port's channel */
    uint16_t port;         /* the receiving port's handle */
    uint32_t reserved;
} fhp_meta;

/** An acceptance filter, as SocketCAN's `struct can_filter`. */
typedef struct fhp_filter {
    uint32_t can_id;
    uint32_t can_mask;
} fhp_filter;

/* fhp_port_open flags (the wire's OPEN_PORT options, as FH_PORT_*). */
#define FHP_PORT_RECEIVE_OWN 0x01u
#define FHP_PORT_BLOCK_ON_OVERFLOW 0x02u
#define FHP_PORT_FD 0x04u
#define FHP_PORT_LISTEN_ONLY 0x08u
#define FHP_PORT_TRANSMIT_ONLY 0x10u

/* ---- The byte stream ------------------------------------------------- */

/**
 * The two callbacks a port of this client to a new platform writes.
 * `read` stores up to `len` bytes in `buf` and returns how many (> 0), 0 when
 * none is available now, or a negative value when the stream has ended or
 * failed (FHP_ERR_CLOSED for an orderly end). `write` sends up to `len` bytes
 * and returns how many it took (0 when it can take none now) or a negative
 * value. Both must not block for long; a blocking stream works too, at the
 * cost of fhp_poll() waiting inside it.
 */
typedef struct fhp_stream {
    void *ctx;
    long (*read)(void *ctx, uint8_t *buf, size_t len);
    long (*write)(void *ctx, const uint8_t *buf, size_t len);
} fhp_stream;

/* ---- Wire codec (no I/O; used by the client, the tests and the fuzzer) - */

/* Protocol constants (spec/protocol.md section 9). */
#define FHP_PROTOCOL_VERSION 2u
#define FHP_MAX_MESSAGE_LEN 262144ul
#define FHP_MAX_HELLO_LEN 512ul
#define FHP_MAX_FRAMES_PER_BATCH 1024u
#define FHP_MAX_PORTS 32u
#define FHP_MAX_NAME_LEN 64u
#define FHP_MAX_TOKEN_LEN 128u
#define FHP_NONCE_LEN 32u
#define FHP_MAC_LEN 32u
#define FHP_MAX_TEXT_LEN 1024u

/* Message types (spec/protocol.md section 3). */
enum {
    FHP_MSG_HELLO = 0x01, FHP_MSG_WELCOME = 0x02, FHP_MSG_REFUSE = 0x03, FHP_MSG_CHALLENGE = 0x04,
    FHP_MSG_AUTH = 0x05,
    FHP_MSG_OPEN_PORT = 0x10, FHP_MSG_PORT_OPENED = 0x11, FHP_MSG_CLOSE_PORT = 0x12,
    FHP_MSG_PORT_CLOSED = 0x13, FHP_MSG_FRAMES = 0x20, FHP_MSG_RX_OVERFLOW = 0x21,
    FHP_MSG_TX_DROPPED = 0x22, FHP_MSG_CHANNEL_STATE = 0x23, FHP_MSG_ERROR = 0x30,
    FHP_MSG_PING = 0x40, FHP_MSG_PONG = 0x41, FHP_MSG_GOODBYE = 0x50,
    FHP_MSG_STATS_REQUEST = 0x60, FHP_MSG_STATS = 0x61, FHP_MSG_STEP = 0x70, FHP_MSG_GRANT = 0x71
};

/* Record kinds and flags (spec/protocol.md 4.1, 4.2). */
enum { FHP_KIND_CAN = 0, FHP_KIND_CANFD = 1, FHP_KIND_ERROR = 2 };
enum {
    FHP_REC_EXTENDED = 0x01, FHP_REC_REMOTE = 0x02, FHP_REC_BRS = 0x04,
    FHP_REC_ESI = 0x08, FHP_REC_ECHO = 0x10
};

/** Decode errors, named as in spec/protocol.md section 10 (fhp_decode_error_name). */
typedef enum fhp_decode_error {
    FHP_DEC_OK = 0, FHP_DEC_EMPTY, FHP_DEC_OVERSIZE, FHP_DEC_UNKNOWN_TYPE, FHP_DEC_TRUNCATED,
    FHP_DEC_TRAILING_BYTES, FHP_DEC_BAD_MAGIC, FHP_DEC_TOO_LONG, FHP_DEC_NOT_UTF8,
    FHP_DEC_TOO_MANY_FRAMES, FHP_DEC_RESERVED_NOT_ZERO, FHP_DEC_RESERVED_OPTIONS,
    FHP_DEC_UNKNOWN_FRAME_KIND, FHP_DEC_RESERVED_FLAGS, FHP_DEC_RECORD_TOO_LONG,
    FHP_DEC_INVALID_FRAME, FHP_DEC_UNSUPPORTED_VERSION,
    /** Not a protocol fault: a legal message longer than the decoder's buffer. */
    FHP_DEC_NO_ROOM
} fhp_decode_error;

/**
 * One decoded message other than a frame record. Which fields are set
 * depends on `type` (spec/protocol.md section 3); strings point into the
 * decoder's buffer and stay valid until the next decoder call. str_a is
 * name / hub_name / channel / text / json; str_b is port_name, or the 32
 * raw bytes of a CHALLENGE nonce or an AUTH mac.
 * `u64` is a PING/PONG nonce or a STEP/GRANT time.
 */
typedef struct fhp_message {
    uint8_t type;
    uint8_t fatal;         /* REFUSE/ERROR/GOODBYE */
    uint8_t flags8;        /* PORT_OPENED channel_flags; CHANNEL_STATE condition */
    uint16_t version;      /* HELLO (always FHP_PROTOCOL_VERSION once decoded), WELCOME */
    uint16_t code;         /* REFUSE/ERROR/GOODBYE code; TX_DROPPED reason */
    uint16_t port;         /* port handle of port and frame messages */
    uint16_t channel_id;   /* PORT_OPENED */
    uint16_t count;        /* FRAMES: records that follow */
    uint32_t request;      /* OPEN_PORT, PORT_OPENED, REFUSE/ERROR/GOODBYE, STATS* */
    uint32_t options;      /* HELLO session options, OPEN_PORT port options */
    uint32_t value;        /* WELCOME client_id, PORT_OPENED port_id, dropped, missed */
    uint64_t u64;
    const uint8_t *str_a;
    size_t str_a_len;
    const uint8_t *str_b;
    size_t str_b_len;
} fhp_message;

/** One frame record of a FRAMES message (spec/protocol.md section 4). */
typedef struct fhp_record {
    uint16_t port;
    uint8_t kind;
    uint8_t flags;         /* FHP_REC_* */
    uint32_t id;
    uint64_t seq;
    uint64_t timestamp_ns;
    uint32_t sender;
    uint16_t len;
    uint8_t len8_dlc;
    const uint8_t *data;   /* `len` bytes, none for a remote frame */
} fhp_record;

/** What one decoder step produced. */
typedef enum fhp_event {
    FHP_EV_NONE = 0,      /* needs more bytes */
    FHP_EV_MESSAGE,       /* a whole message (FRAMES too: its header, `count` records follow) */
    FHP_EV_RECORD,        /* one valid record of the current FRAMES message */
    FHP_EV_FRAMES_END,    /* the current FRAMES message ended exactly after its records */
    FHP_EV_ERROR          /* the bytes are invalid: fhp_decoder.error says why; stop */
} fhp_event;

/**
 * A streaming decoder: it asks for exactly the bytes it needs next
 * (fhp_decoder_space), so a caller reads from its stream straight into the
 * decoder's buffer. A FRAMES message is handed over record by record, so
 * the buffer needs room for the largest non-FRAMES message only
 * (FHP_RX_BUFFER_MIN for everything a hub sends to a client).
 */
typedef struct fhp_decoder {
    uint8_t *buf;
    size_t cap;
    uint32_t limit;       /* largest body accepted: FHP_MAX_MESSAGE_LEN, or FHP_MAX_HELLO_LEN */
    uint32_t body_len;    /* of the current message */
    uint32_t body_left;   /* bytes of the body not yet taken */
    uint32_t want;        /* bytes the current step needs in buf */
    uint32_t have;        /* bytes of them in buf */
    uint16_t records_left;
    uint16_t record_index;
    uint8_t stage;
    uint8_t error;        /* fhp_decode_error once FHP_EV_ERROR was returned */
    fhp_message msg;
    fhp_record rec;
} fhp_decoder;

/** Room for every message a hub sends a client except STATS (ERROR: 4 + 1034). */
#define FHP_RX_BUFFER_MIN 1040u
/** Room for the largest HELLO, AUTH or OPEN_PORT this client sends. */
#define FHP_TX_BUFFER_MIN 216u

/**
 * `buf` of `cap` bytes (at least 96: a record's header and 64 data bytes;
 * less leaves the decoder failed with FHP_DEC_NO_ROOM); `limit` the largest
 * body it accepts.
 */
void fhp_decoder_init(fhp_decoder *d, uint8_t *buf, size_t cap, uint32_t limit);
/** Where the next bytes go and how many are wanted (0 after an error). */
size_t fhp_decoder_space(fhp_decoder *d, uint8_t **dst);
/** Tell the decoder `n` bytes were stored at fhp_decoder_space's place; returns an event. */
fhp_event fhp_decoder_advance(fhp_decoder *d, size_t n);
/** Convenience: copy from `in` into the decoder until an event; `*used` gets the bytes taken. */
fhp_event fhp_decoder_feed(fhp_decoder *d, const uint8_t *in, size_t len, size_t *used);
const char *fhp_decode_error_name(int error);
/** The wire code a hub reports for a decode error (spec section 10), e.g. 1 = malformed. */
uint16_t fhp_decode_error_code(int error);
/** The name of a wire error code ("unknown_channel"), or NULL for codes without one. */
const char *fhp_code_name(uint16_t code);

/**
 * Encoders append one whole message (length prefix included) at `out` and
 * return its size, or 0 when it does not fit in `cap` or a field is out of
 * its limits. fhp_encode_message takes any non-FRAMES message;
 * FRAMES are a header (fhp_encode_frames_header) and records
 * (fhp_encode_record), the header's count and length fixed by
 * fhp_encode_frames_finish.
 */
size_t fhp_encode_message(uint8_t *out, size_t cap, const fhp_message *m);
size_t fhp_encode_hello(uint8_t *out, size_t cap, const char *name, uint32_t options);
/**
 * The MAC of AUTH (spec/protocol.md 5.1): HMAC-SHA256 under `token`'s
 * `token_len` bytes of the transcript of `challenge` and `hello`, both as
 * the decoder gave them (their strings point into the decoded bodies).
 */
void fhp_auth_mac(const uint8_t *token, size_t token_len, const fhp_message *challenge, const fhp_message *hello,
                  uint8_t mac[FHP_MAC_LEN]);
size_t fhp_encode_frames_header(uint8_t *out, size_t cap);
size_t fhp_encode_record(uint8_t *out, size_t cap, const fhp_record *r);
void fhp_encode_frames_finish(uint8_t *batch, size_t batch_len, uint16_t count);
/** 0 when the record is a valid frame (spec 4.3), else an FHP_DEC_* error. */
int fhp_record_check(const fhp_record *r);

/* ---- The client ------------------------------------------------------ */

typedef uint16_t fhp_port;

/** One port slot (internal; in the header so the caller can allocate the client). */
typedef struct fhp_port_slot {
    uint32_t request;     /* the OPEN_PORT that opened it */
    uint32_t port_id;
    uint32_t rx_dropped;
    const fhp_filter *filters; /* the caller's array; NULL = receive everything */
    uint16_t filter_count;
    uint16_t channel_id;
    uint8_t open;
    uint8_t options;
    uint8_t channel_flags;
} fhp_port_slot;

/** A client; the caller allocates it (static, stack, anywhere) and never touches its fields. */
typedef struct fhp_client {
    fhp_stream io;
    fhp_decoder dec;
    uint8_t *tx;
    size_t tx_cap, tx_len, tx_sent;
    size_t batch_at;          /* offset of the open FRAMES message in tx, or SIZE_MAX */
    uint16_t batch_count;
    uint8_t state;
    uint8_t frame_ready;
    uint8_t keyed;            /* a token was given: key holds what HMAC needs of it */
    uint8_t hello_len;
    uint8_t hello[3 + FHP_MAX_NAME_LEN]; /* the HELLO's version and str8 name, for the AUTH transcript */
    uint32_t key[16];         /* HMAC-SHA256's inner and outer states after the padded token, not the token */
    uint32_t client_id;
    uint32_t next_request;
    uint32_t failed_request;  /* the last OPEN_PORT the hub declined */
    int failed_status;
    uint64_t next_nonce;
    uint64_t pong_nonce;      /* the highest PONG received */
    uint32_t tx_dropped;      /* frames the hub reported dropped, not yet returned */
    fhp_frame frame;          /* the received frame fhp_recv returns next */
    fhp_meta meta;
    fhp_port_slot ports[FHP_MAX_PORTS];
    int last_status;
    char last_error[160];
} fhp_client;

/**
 * Prepare `c` to speak over `stream`. `rx` (at least FHP_RX_BUFFER_MIN
 * bytes) holds one incoming message; `tx` (at least FHP_TX_BUFFER_MIN) holds
 * outgoing bytes until the stream takes them: 2 KiB holds 20 classic frames.
 */
int fhp_init(fhp_client *c, const fhp_stream *stream, uint8_t *rx, size_t rx_cap, uint8_t *tx, size_t tx_cap);
/**
 * Queue HELLO with the client's `name` (<= 64 bytes of UTF-8, may be empty).
 * `token` (NULL or "" = none) never travels: when the hub answers with a
 * CHALLENGE, fhp_poll() answers it with AUTH, the token's MAC over the
 * hub's nonce (spec/protocol.md 5.1). The token is not kept (only HMAC
 * states derived from it), so its memory may be reused at once.
 * fhp_poll() sends it; fhp_connected() tells when the hub welcomed the client.
 */
int fhp_connect(fhp_client *c, const char *name, const char *token);
/** FHP_OK once WELCOME came, FHP_ERR_AGAIN before, or the error that ended the connection. */
int fhp_connected(const fhp_client *c);
/**
 * The client's step: write what the stream takes, read what it has, act on
 * the hub's messages. Stops early when a received frame waits for
 * fhp_recv. Returns FHP_OK, or the error that ended the connection.
 */
int fhp_poll(fhp_client *c);
/**
 * Queue OPEN_PORT of a port on `channel` named `port_name` (NULL or "" =
 * the hub names it) with FHP_PORT_* flags; `*request` identifies it for
 * fhp_port_result.
 */
int fhp_port_open(fhp_client *c, const char *channel, const char *port_name, uint32_t flags, uint32_t *request);
/** The answer to an fhp_port_open: FHP_OK with `*port`, FHP_ERR_AGAIN, or why the hub declined. */
int fhp_port_result(fhp_client *c, uint32_t request, fhp_port *port);
/** Queue CLOSE_PORT; the handle is free at once (frames still coming for it are dropped). */
int fhp_port_close(fhp_client *c, fhp_port port);
/**
 * Queue one frame for `port`; the next fhp_poll() writes it (frames queued
 * between two polls travel in one FRAMES message). FHP_ERR_INVALID_FRAME
 * for a frame the spec or the port does not allow (nothing queued),
 * FHP_ERR_AGAIN while the transmit buffer is full (call fhp_poll first).
 */
int fhp_send(fhp_client *c, fhp_port port, const fhp_frame *frame);
/** The next received frame passing its port's filters, or FHP_ERR_AGAIN. `meta` may be NULL. */
int fhp_recv(fhp_client *c, fhp_frame *frame, fhp_meta *meta);
/**
 * SocketCAN CAN_RAW_FILTER semantics: a frame passes when any filter
 * matches, comparing `can_id & can_mask` with the EFF and RTR flag bits; a
 * filter with FHP_CAN_INV_FILTER passes what it does not match; error
 * frames always pass; `count` 0 passes only error frames. `filters` is kept
 * by pointer, not copied, and must stay valid while set. NULL (with `count`
 * 0) passes everything again, as on a new port.
 */
int fhp_set_filters(fhp_client *c, fhp_port port, const fhp_filter *filters, uint16_t count);
/**
 * A barrier: queue PING; fhp_flushed(c, nonce) is FHP_OK once every frame
 * sent before it is on the bus (sequenced), FHP_ERR_DROPPED when the hub
 * reported frames off the bus in the meantime, else FHP_ERR_AGAIN.
 */
int fhp_flush_start(fhp_client *c, uint64_t *nonce);
int fhp_flushed(fhp_client *c, uint64_t nonce);
/** Channel id, port id, channel flags (1 = CAN FD) and receive drops of an open port. */
int fhp_port_info(const fhp_client *c, fhp_port port, uint16_t *channel_id, uint32_t *port_id,
                  uint8_t *channel_flags, uint32_t *rx_dropped);
/** Queue GOODBYE and end the session; fhp_poll() then writes it out. */
int fhp_close(fhp_client *c);
/** Bytes queued for the stream and not yet taken by it. */
size_t fhp_tx_pending(const fhp_client *c);
/** The most recent failure in words: what was wrong and, where known, what to do. */
const char *fhp_last_error(const fhp_client *c);
/** A static message for any status code. */
const char *fhp_strerror(int status);

#ifdef __cplusplus
}
#endif

#endif /* FIELDHUB_PORTABLE_H */
