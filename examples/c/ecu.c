/*
 * A virtual ECU on a fieldhub bus: the shape of a firmware main loop built
 * for the PC.
 *
 *   fieldhub-ecu URL CHANNEL [PERIOD_MS]
 *
 * - Every PERIOD_MS (default 100) it sends a status frame 0x100:
 *   bytes 0..3 a counter (little-endian), 4 the vehicle speed in km/h,
 *   5..6 the engine speed in rpm (little-endian), 7 0.
 * - It answers OBD-II requests on 0x7E0 with responses on 0x7E8 (ISO-TP
 *   single frames padded with 0x55): mode 01 PID 0D (vehicle speed) and
 *   PID 0C (engine speed, rpm * 4); anything else gets the negative response
 *   7F <service> 11 (service not supported).
 * - It waits in poll() on the library's fd, so it sleeps between events,
 *   and exits cleanly on SIGINT or SIGTERM.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <fieldhub.h>

#define STATUS_ID 0x100
#define REQUEST_ID 0x7E0
#define RESPONSE_ID 0x7E8

static volatile sig_atomic_t stopping;

static void on_signal(int signal) {
    (void)signal;
    stopping = 1;
}

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int fail(fh_client *client, const char *what, int rc) {
    char detail[512];
    fh_last_error(client, detail, sizeof detail);
    fprintf(stderr, "fieldhub-ecu: %s: %s (%s)\n", what, fh_strerror(rc), detail);
    fh_client_free(client);
    return 1;
}

struct vehicle {
    uint8_t speed_kmh;
    uint16_t rpm;
};

/* Fill `response` for an OBD-II request; returns 0 when there is nothing to answer. */
static int answer(const fh_frame *request, const struct vehicle *v, fh_frame *response) {
    if (request->len < 2 || request->data[0] < 1 || request->data[0] > 7) return 0; /* not a single frame */
    memset(response, 0, sizeof *response);
    response->can_id = RESPONSE_ID;
    response->len = 8;
    memset(response->data, 0x55, 8);
    uint8_t service = request->data[1];
    uint8_t pid = request->data[2];
    if (service == 0x01 && pid == 0x0D) {
        const uint8_t r[] = {0x03, 0x41, 0x0D, v->speed_kmh};
        memcpy(response->data, r, sizeof r);
    } else if (service == 0x01 && pid == 0x0C) {
        uint16_t quarter_rpm = (uint16_t)(v->rpm * 4u);
        const uint8_t r[] = {0x04, 0x41, 0x0C, (uint8_t)(quarter_rpm >> 8), (uint8_t)quarter_rpm};
        memcpy(response->data, r, sizeof r);
    } else {
        const uint8_t r[] = {0x03, 0x7F, service, 0x11};
        memcpy(response->data, r, sizeof r);
    }
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 3 || argc > 4) {
        fprintf(stderr, "usage: %s URL CHANNEL [PERIOD_MS]\n", argv[0]);
        return 2;
    }
    int period = argc == 4 ? atoi(argv[3]) : 100;
    if (period <= 0) {
        fprintf(stderr, "fieldhub-ecu: PERIOD_MS must be a positive number, got '%s'\n", argv[3]);
        return 2;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    fh_client *client = fh_client_new();
    if (!client) return 1;
    fh_port port;
    int rc = fh_connect(client, argv[1], "ecu", NULL);
    if (rc != FH_OK) return fail(client, "cannot connect", rc);
    rc = fh_port_open(client, argv[2], NULL, 0, &port);
    if (rc != FH_OK) return fail(client, "cannot open a port", rc);
    /* Only requests reach the main loop. */
    const fh_filter requests = {REQUEST_ID, FH_CAN_SFF_MASK | FH_CAN_EFF_FLAG | FH_CAN_RTR_FLAG};
    rc = fh_set_filters(client, port, &requests, 1);
    if (rc != FH_OK) return fail(client, "cannot set filters", rc);
    int fd;
    rc = fh_fileno(client, &fd);
    if (rc != FH_OK) return fail(client, "no pollable fd", rc);
    fprintf(stderr, "fieldhub-ecu: on %s at %s\n", argv[2], argv[1]);

    struct vehicle v = {0, 800};
    uint32_t counter = 0;
    unsigned answered = 0;
    int64_t next_status = now_ms();
    while (!stopping) {
        int64_t now = now_ms();
        if (now >= next_status) {
            fh_frame status;
            memset(&status, 0, sizeof status);
            status.can_id = STATUS_ID;
            status.len = 8;
            memcpy(status.data, &counter, 4);
            status.data[4] = v.speed_kmh;
            status.data[5] = (uint8_t)v.rpm;
            status.data[6] = (uint8_t)(v.rpm >> 8);
            rc = fh_send(client, port, &status, 0);
            if (rc != FH_OK && rc != FH_ERR_TIMEOUT) return fail(client, "cannot send status", rc);
            counter++;
            v.speed_kmh = (uint8_t)((v.speed_kmh + 1) % 130);
            v.rpm = (uint16_t)(800 + (counter * 37) % 5000);
            next_status += period;
            continue;
        }
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, (int)(next_status - now)) < 0 && errno != EINTR) {
            perror("fieldhub-ecu: poll");
            break;
        }
        fh_frame request, response;
        while ((rc = fh_recv(client, &request, NULL, 0)) == FH_OK) {
            if (answer(&request, &v, &response)) {
                rc = fh_send(client, port, &response, -1);
                if (rc != FH_OK) return fail(client, "cannot send a response", rc);
                answered++;
            }
        }
        if (rc != FH_ERR_TIMEOUT) return fail(client, "cannot receive", rc);
    }
    fprintf(stderr, "fieldhub-ecu: stopping; sent %u status frames, answered %u requests\n", counter, answered);
    fh_client_free(client);
    return 0;
}
