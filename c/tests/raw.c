/*
 * Raw frames from C (spec/protocol.md 4.1.3): a protocol = "raw" channel
 * carries a 32-bit id and up to 2,048 opaque bytes in struct fh_raw_frame.
 * A 2,048-byte frame goes from a Rust client (`fieldhub send`) to a C
 * client (fh_recv_raw) and from the C client (fh_send_raw) to a Rust client
 * (`fieldhub dump -L`), every byte checked; a CAN frame sent on the raw
 * channel is refused through fh_flush, and a raw frame read with fh_recv
 * is an error naming fh_recv_raw.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "harness.h"
#include "raw.h"

static const char RAW_CONFIG[] = "[[channel]]\nname = \"field\"\nprotocol = \"raw\"\n";

/* The test's payload byte i. */
static uint8_t payload(size_t i) { return (uint8_t)(i * 5u + 3u); }

/* `fieldhub send`'s text of a raw frame: RIIIIIIII#data. */
static char *raw_text(void) {
    size_t size = 16 + 2 * FH_RAW_MAX_DLEN;
    char *text = malloc(size);
    CHECK(text, "malloc");
    int n = snprintf(text, size, "RDEADBEEF#");
    for (size_t i = 0; i < FH_RAW_MAX_DLEN; i++) n += snprintf(text + n, size - (size_t)n, "%02X", payload(i));
    return text;
}

void test_a_2048_byte_raw_frame_crosses_between_c_and_rust_clients(void) {
    hub h;
    hub_start(&h, RAW_CONFIG, 0, NULL);
    fh_client *c = connect_client(h.url, "c-raw");
    fh_port port = open_port(c, "field", 0);
    const char *bin = getenv("FIELDHUB_BIN");

    /* Rust to C. */
    char *text = raw_text();
    const char *const send_argv[] = {bin, "send", "--hub", h.url, "field", text, NULL};
    int status = wait_child(spawn(send_argv, NULL, NULL));
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "fieldhub send failed (0x%x)", status);
    static fh_raw_frame raw;
    fh_meta meta;
    OK(c, fh_recv_raw(c, &raw, &meta, PATIENCE_MS));
    CHECK(raw.id == 0xDEADBEEFu && raw.len == FH_RAW_MAX_DLEN && raw.__res0 == 0, "id 0x%X len %u", raw.id, raw.len);
    for (size_t i = 0; i < FH_RAW_MAX_DLEN; i++) CHECK(raw.data[i] == payload(i), "data[%zu] 0x%02X", i, raw.data[i]);
    CHECK(meta.seq == 1 && meta.port == port, "meta seq %llu port %u", (unsigned long long)meta.seq, meta.port);

    /* C to Rust: the dump's -L line is the frame's text. */
    const char *const dump_argv[] = {bin, "dump", "--hub", h.url, "-L", "-n", "1", "field", NULL};
    pid_t dump = spawn(dump_argv, "raw-dump.out", "raw-dump.err");
    wait_for_text(h.log, "port=dump.");
    OK(c, fh_send_raw(c, port, &raw, -1));
    OK(c, fh_flush(c));
    status = wait_child(dump);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "fieldhub dump failed (0x%x)", status);
    char *dumped = read_file("raw-dump.out");
    char *line = strstr(dumped, " field ");
    CHECK(line && strncmp(line + 7, text, strlen(text)) == 0, "fieldhub dump -L printed:\n%.200s", dumped);
    free(dumped);

    /* A frame of another kind: refused on the raw channel, told by fh_flush. */
    fh_frame classic;
    memset(&classic, 0, sizeof classic);
    classic.can_id = 0x123;
    classic.len = 1;
    OK(c, fh_send(c, port, &classic, -1));
    char why[256];
    int flushed = fh_flush(c);
    fh_last_error(c, why, sizeof why);
    CHECK(flushed == FH_ERR_INVALID_FRAME, "a CAN frame on a raw channel: %s (%s)", fh_strerror(flushed), why);

    /* Another C client reads the raw frame with fh_recv: the error names fh_recv_raw. */
    fh_client *reader = connect_client(h.url, "c-reader");
    open_port(reader, "field", 0);
    raw.len = 0;
    OK(c, fh_send_raw(c, port, &raw, -1));
    OK(c, fh_flush(c));
    fh_frame wrong;
    int received = fh_recv(reader, &wrong, NULL, PATIENCE_MS);
    fh_last_error(reader, why, sizeof why);
    CHECK(received == FH_ERR_INVALID_ARGUMENT && strstr(why, "fh_recv_raw"), "fh_recv of a raw frame: %s (%s)",
          fh_strerror(received), why);

    free(text);
    fh_client_free(reader);
    fh_client_free(c);
    hub_stop(&h);
}
