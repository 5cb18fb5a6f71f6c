/*
 * CAN XL frames from C (spec/protocol.md 4.1.2): struct fh_canxl_frame is
 * SocketCAN's struct canxl_frame. A 2,048-byte frame goes from a Rust
 * client (`fieldhub send`) to a C client (fh_recv_xl) and from the C
 * client (fh_send_xl) to a Rust client (`fieldhub dump -L`), every header
 * field and data byte checked; a classic frame read with fh_recv_xl lands
 * in struct fh_frame's layout, without FH_CANXL_XLF, as in SocketCAN's
 * union.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "canxl.h"
#include "harness.h"

static const char XL_CONFIG[] = "[[channel]]\nname = \"xl0\"\nprotocol = \"canxl\"\n";

/* The test's payload byte i. */
static uint8_t payload(size_t i) { return (uint8_t)(i * 7u + 1u); }

/* `fieldhub send`'s text of an XL frame: VVPPP#FF:SS:AAAAAAAA#data. */
static char *xl_text(void) {
    size_t size = 32 + 2 * FH_CANXL_MAX_DLEN;
    char *text = malloc(size);
    CHECK(text, "malloc");
    int n = snprintf(text, size, "42123#81:03:12345678#");
    for (size_t i = 0; i < FH_CANXL_MAX_DLEN; i++) n += snprintf(text + n, size - (size_t)n, "%02X", payload(i));
    return text;
}

static void run(const char *const *argv, const char *out) {
    int status = wait_child(spawn(argv, out, NULL));
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s %s failed (0x%x)", argv[0], argv[1], status);
}

void test_a_2048_byte_can_xl_frame_crosses_between_c_and_rust_clients(void) {
    hub h;
    hub_start(&h, XL_CONFIG, 0, NULL);
    fh_client *c = connect_client(h.url, "c-xl");
    fh_port port = open_port(c, "xl0", FH_PORT_FD);
    const char *bin = getenv("FIELDHUB_BIN");

    /* Rust to C. */
    char *text = xl_text();
    const char *const send_argv[] = {bin, "send", "--hub", h.url, "xl0", text, NULL};
    run(send_argv, NULL);
    static fh_canxl_frame xl;
    fh_meta meta;
    OK(c, fh_recv_xl(c, &xl, &meta, PATIENCE_MS));
    CHECK(xl.flags == (FH_CANXL_XLF | FH_CANXL_SEC), "flags 0x%02X", xl.flags);
    CHECK((xl.prio & FH_CANXL_PRIO_MASK) == 0x123 && (xl.prio & FH_CANXL_VCID_MASK) >> FH_CANXL_VCID_OFFSET == 0x42,
          "prio 0x%X", xl.prio);
    CHECK(xl.sdt == 3 && xl.af == 0x12345678u && xl.len == FH_CANXL_MAX_DLEN, "sdt %u af 0x%X len %u", xl.sdt, xl.af,
          xl.len);
    for (size_t i = 0; i < FH_CANXL_MAX_DLEN; i++) CHECK(xl.data[i] == payload(i), "data[%zu] 0x%02X", i, xl.data[i]);
    CHECK(meta.seq == 1 && meta.port == port, "meta seq %llu port %u", (unsigned long long)meta.seq, meta.port);

    /* C to Rust: the dump's -L line is the frame's can-utils text. */
    const char *const dump_argv[] = {bin, "dump", "--hub", h.url, "-L", "-n", "2", "xl0", NULL};
    pid_t dump = spawn(dump_argv, "xl-dump.out", "xl-dump.err");
    wait_for_text(h.log, "port=dump.");
    OK(c, fh_send_xl(c, port, &xl, -1));
    /* A classic frame after it, read back through the XL receive call. */
    fh_frame classic;
    memset(&classic, 0, sizeof classic);
    classic.can_id = 0x7F0;
    classic.len = 2;
    classic.data[0] = 0xAB;
    classic.data[1] = 0xCD;
    OK(c, fh_send(c, port, &classic, -1));
    OK(c, fh_flush(c));
    int status = wait_child(dump);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "fieldhub dump failed (0x%x)", status);
    char *dumped = read_file("xl-dump.out");
    char *line = strstr(dumped, " xl0 ");
    CHECK(line && strncmp(line + 5, text, strlen(text)) == 0, "fieldhub dump -L printed:\n%.200s", dumped);
    CHECK(strstr(dumped, " xl0 7F0#ABCD"), "fieldhub dump -L printed:\n%.200s", dumped);
    free(dumped);

    /* The C port of another client reads both: the XL frame in its layout,
     * the classic one in fh_frame's, without FH_CANXL_XLF. */
    fh_client *reader = connect_client(h.url, "c-reader");
    open_port(reader, "xl0", FH_PORT_FD);
    OK(c, fh_send_xl(c, port, &xl, -1));
    OK(c, fh_send(c, port, &classic, -1));
    OK(c, fh_flush(c));
    static fh_canxl_frame got;
    OK(reader, fh_recv_xl(reader, &got, NULL, PATIENCE_MS));
    CHECK(got.flags & FH_CANXL_XLF && memcmp(&got, &xl, sizeof xl) == 0, "the XL frame came back changed");
    OK(reader, fh_recv_xl(reader, &got, NULL, PATIENCE_MS));
    fh_frame read_classic;
    memcpy(&read_classic, &got, sizeof read_classic);
    CHECK(!(got.flags & FH_CANXL_XLF) && read_classic.can_id == 0x7F0 && read_classic.len == 2 &&
              read_classic.data[0] == 0xAB && read_classic.data[1] == 0xCD,
          "classic frame read as id 0x%X len %u", read_classic.can_id, read_classic.len);

    free(text);
    fh_client_free(reader);
    fh_client_free(c);
    hub_stop(&h);
}
