/*
 * The LIN node API from C (docs/buses.md, spec/protocol.md 4.1.1): a C
 * slave keeps a standing response (fh_lin_stand) that answers every header
 * of its identifier the hub's schedule sends, replaces it and withdraws it
 * (fh_lin_withdraw), in virtual time; a C slave sends the go-to-sleep
 * command and wakes the sleeping bus with fh_lin_wake_up. `fieldhub dump`
 * reads the bus and the tests check every value and time.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "harness.h"
#include "lin.h"

#define MS 1000000ull

/* One slot of 0x10 every 10 ms at 19.2 kbit/s; the slave is the one
 * participant, so bus time moves only as it steps. */
static const char LIN_CONFIG[] =
    "[hub]\n"
    "time = \"virtual\"\n"
    "time_participants = [\"slave\"]\n"
    "[[channel]]\n"
    "name = \"body\"\n"
    "protocol = \"lin\"\n"
    "bitrate = 19200\n"
    "timing = \"timed\"\n"
    "[channel.lin]\n"
    "schedule = [{ id = 0x10, delay_ms = 10 }]\n";

/* `out`, a dump's output, is exactly the lines `expected` (each a line's
 * start), compared with runs of spaces made one, none at a line's start:
 * dump pads its columns. */
static void expect_lines(const char *out, const char *const expected[], size_t count) {
    char *squeezed = malloc(strlen(out) + 1);
    CHECK(squeezed != NULL, "out of memory");
    size_t n = 0;
    for (const char *p = out; *p; p++) {
        if (*p == ' ' && (n == 0 || squeezed[n - 1] == ' ' || squeezed[n - 1] == '\n')) continue;
        squeezed[n++] = *p;
    }
    squeezed[n] = '\0';
    const char *line = squeezed;
    for (size_t i = 0; i < count; i++) {
        CHECK(line != NULL && strncmp(line, expected[i], strlen(expected[i])) == 0,
              "line %zu is not '%s' in:\n%s", i, expected[i], out);
        line = strchr(line, '\n');
        if (line) line++;
    }
    CHECK(line == NULL || *line == '\0', "more than %zu lines:\n%s", count, out);
    free(squeezed);
}

/* A hub of LIN_CONFIG; `fieldhub dump` reading `frames` frames of the bus
 * into `out` (its port opens first, at bus time 0, which starts the
 * schedule: the first header goes out before the slave has published); and
 * the slave, the one participant, with its port on the channel. */
static fh_client *start_lin(hub *h, const char *frames, const char *out, const char *err, pid_t *dump,
                            fh_port *port) {
    hub_start(h, LIN_CONFIG, 0, NULL);
    const char *bin = getenv("FIELDHUB_BIN");
    CHECK(bin != NULL, "FIELDHUB_BIN is not set");
    const char *const dump_argv[] = {bin, "dump", "--hub", h->url, "--port", "reader", "-t", "a", "-n", frames, "body",
                                     NULL};
    *dump = spawn(dump_argv, out, err);
    wait_for_text(h->log, "port opened");
    fh_client *slave = fh_client_new();
    OK(slave, fh_connect_opts(slave, h->url, "slave", NULL, FH_CONNECT_SYNCHRONIZED));
    *port = open_port(slave, "body", 0);
    return slave;
}

void test_lin_standing_response_answers_the_schedule_until_replaced_and_withdrawn(void) {
    hub h;
    pid_t dump;
    fh_port port;
    fh_client *slave = start_lin(&h, "7", "lin_dump.out", "lin_dump.err", &dump, &port);
    const uint8_t first[] = {0x01, 0x02}, second[] = {0x03, 0x04};
    /* Bad calls: checked here, or refused by the hub with the reason. */
    EXPECT(slave, fh_lin_stand(slave, port, 0x40, first, sizeof first, 0, -1), FH_ERR_INVALID_FRAME);
    EXPECT(slave, fh_lin_stand(slave, port, 0x10, first, 9, 0, -1), FH_ERR_INVALID_FRAME);
    EXPECT(slave, fh_lin_stand(slave, port, 0x10, NULL, 2, 0, -1), FH_ERR_INVALID_ARGUMENT);
    EXPECT(slave, fh_lin_stand(slave, port, 0x10, first, sizeof first, 0x2, -1), FH_ERR_INVALID_ARGUMENT);
    OK(slave, fh_lin_withdraw(slave, port, 0x10, -1));

    OK(slave, fh_lin_stand(slave, port, 0x10, first, sizeof first, 0, -1));
    OK(slave, fh_step(slave, 25 * MS, NULL));
    CHECK(fh_flush(slave) != FH_OK && strstr(last_error(slave), "which it does not have") != NULL,
          "the hub refuses to withdraw what the port lacks: %s", last_error(slave));
    /* Replaced at 25 ms: the header at 30 ms carries the new bytes. */
    OK(slave, fh_lin_stand(slave, port, 0x10, second, sizeof second, 0, -1));
    OK(slave, fh_lin_stand(slave, port, 0x22, first, sizeof first, 0, -1));
    OK(slave, fh_step(slave, 45 * MS, NULL));
    CHECK(fh_flush(slave) != FH_OK && strstr(last_error(slave), "no unconditional slot") != NULL,
          "the hub refuses an identifier its schedule never sends: %s", last_error(slave));
    /* Withdrawn at 45 ms: the headers at 50 and 60 ms go unanswered. */
    OK(slave, fh_lin_withdraw(slave, port, 0x10, -1));
    OK(slave, fh_step(slave, 65 * MS, NULL));
    OK(slave, fh_flush(slave));

    int status = wait_child(dump);
    char *out = read_file("lin_dump.out");
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "dump failed: %s", out);
    /* Slots at 0, 10, ... 60 ms; each frame ends its nominal time after its
     * slot's start: 64 bits (3.333 ms) with 2 bytes, 34 for a header alone. */
    const char *expected[] = {
        "(0000000000.001770) body 10 [0] LIN no response",
        "(0000000000.013333) body 10 [2] 01 02 LIN enhanced checksum",
        "(0000000000.023333) body 10 [2] 01 02 LIN enhanced checksum",
        "(0000000000.033333) body 10 [2] 03 04 LIN enhanced checksum",
        "(0000000000.043333) body 10 [2] 03 04 LIN enhanced checksum",
        "(0000000000.051770) body 10 [0] LIN no response",
        "(0000000000.061770) body 10 [0] LIN no response",
    };
    expect_lines(out, expected, sizeof expected / sizeof expected[0]);
    free(out);
    fh_client_free(slave);
    CHECK(WIFEXITED(hub_stop(&h)), "hub exit");
}

void test_lin_wake_up_wakes_the_sleeping_bus_and_the_schedule_resumes_after_the_wake_up_delay(void) {
    hub h;
    pid_t dump;
    fh_port port;
    fh_client *slave = start_lin(&h, "5", "lin_sleep_dump.out", "lin_sleep_dump.err", &dump, &port);
    /* The go-to-sleep command (the master request 0x3C, NAD 0): it takes
     * the next slot boundary, 10 ms, and the bus sleeps from its end. */
    const uint8_t sleep[] = {0x00, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}, data[] = {0x01, 0x02};
    OK(slave, fh_lin_publish(slave, port, 0x3C, sleep, sizeof sleep, FH_LIN_CLASSIC, -1));
    OK(slave, fh_step(slave, 500 * MS, NULL));
    OK(slave, fh_lin_publish(slave, port, 0x10, data, sizeof data, 0, -1));
    CHECK(fh_flush(slave) != FH_OK && strstr(last_error(slave), "while the channel is asleep") != NULL,
          "a response to the sleeping bus is refused: %s", last_error(slave));
    /* At 500 ms: the pulse; the master's first header 100 ms after its end. */
    OK(slave, fh_lin_wake_up(slave, port, -1));
    OK(slave, fh_lin_stand(slave, port, 0x10, data, sizeof data, 0, -1));
    OK(slave, fh_step(slave, 620 * MS, NULL));
    OK(slave, fh_flush(slave));

    int status = wait_child(dump);
    char *out = read_file("lin_sleep_dump.out");
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "dump failed: %s", out);
    /* 19.2 kbit/s: the command 124 bits (6.458 ms), the pulse 5 (260.4 us),
     * a 2-byte frame 64 (3.333 ms), a header 34 (1.771 ms). */
    const char *const expected[] = {
        "(0000000000.001770) body 10 [0] LIN no response",
        "(0000000000.016458) body 3C [8] 00 FF FF FF FF FF FF FF LIN GO-TO-SLEEP, classic checksum 00",
        "(0000000000.500260) body 00 [0] LIN WAKE-UP",
        "(0000000000.603593) body 10 [2] 01 02 LIN enhanced checksum",
        "(0000000000.613593) body 10 [2] 01 02 LIN enhanced checksum",
    };
    expect_lines(out, expected, sizeof expected / sizeof expected[0]);
    free(out);
    fh_client_free(slave);
    CHECK(WIFEXITED(hub_stop(&h)), "hub exit");
}
