/*
 * A minimal candump for a fieldhub bus: prints every frame of one channel
 * in candump's default format, waiting in poll() on the library's fd.
 *
 *   fieldhub-candump [-n COUNT] URL CHANNEL[,ID:MASK]...
 *
 * ID:MASK are hexadecimal acceptance filters with SocketCAN semantics
 * (for example can0,7E8:7FF); without any, every frame is printed. With
 * -n it exits after COUNT frames.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <fieldhub.h>

static int fail(fh_client *client, const char *what, int rc) {
    char detail[512];
    fh_last_error(client, detail, sizeof detail);
    fprintf(stderr, "fieldhub-candump: %s: %s (%s)\n", what, fh_strerror(rc), detail);
    fh_client_free(client);
    return 1;
}

static void print_frame(const char *channel, const fh_frame *f) {
    if (f->can_id & FH_CAN_ERR_FLAG) {
        printf("  %s  %08X", channel, f->can_id & (FH_CAN_EFF_MASK | FH_CAN_ERR_FLAG));
    } else if (f->can_id & FH_CAN_EFF_FLAG) {
        printf("  %s  %08X", channel, f->can_id & FH_CAN_EFF_MASK);
    } else {
        printf("  %s  %03X", channel, f->can_id & FH_CAN_SFF_MASK);
    }
    if (f->flags & FH_CANFD_FDF) {
        printf("  [%02u] ", f->len);
    } else {
        printf("   [%u] ", f->len);
    }
    if (f->can_id & FH_CAN_RTR_FLAG) {
        printf(" remote request");
    } else {
        for (unsigned i = 0; i < f->len; i++) printf(" %02X", f->data[i]);
    }
    if (f->can_id & FH_CAN_ERR_FLAG) printf("   ERRORFRAME");
    putchar('\n');
}

int main(int argc, char **argv) {
    long count = -1;
    int arg = 1;
    if (arg + 1 < argc && strcmp(argv[arg], "-n") == 0) {
        count = strtol(argv[arg + 1], NULL, 10);
        arg += 2;
    }
    if (argc - arg != 2 || count == 0) {
        fprintf(stderr, "usage: %s [-n COUNT] URL CHANNEL[,ID:MASK]...\n", argv[0]);
        return 2;
    }
    const char *url = argv[arg];
    char channel[128];
    const char *spec = argv[arg + 1];
    size_t name_len = strcspn(spec, ",");
    if (name_len == 0 || name_len >= sizeof channel) {
        fprintf(stderr, "fieldhub-candump: '%s' does not start with a channel name\n", spec);
        return 2;
    }
    memcpy(channel, spec, name_len);
    channel[name_len] = '\0';
    fh_filter filters[FH_MAX_FILTERS];
    size_t filter_count = 0;
    for (const char *p = spec + name_len; *p == ','; ) {
        char *end;
        unsigned long id = strtoul(p + 1, &end, 16);
        if (*end != ':' || filter_count == FH_MAX_FILTERS) {
            fprintf(stderr, "fieldhub-candump: filter '%s' is not ID:MASK (hex)\n", p + 1);
            return 2;
        }
        unsigned long mask = strtoul(end + 1, &end, 16);
        if (*end != ',' && *end != '\0') {
            fprintf(stderr, "fieldhub-candump: filter '%s' is not ID:MASK (hex)\n", p + 1);
            return 2;
        }
        filters[filter_count].can_id = (uint32_t)id;
        filters[filter_count].can_mask = (uint32_t)mask;
        filter_count++;
        p = end;
    }

    fh_client *client = fh_client_new();
    if (!client) return 1;
    fh_port port;
    int rc = fh_connect(client, url, "candump", NULL);
    if (rc != FH_OK) return fail(client, "cannot connect", rc);
    /* As candump: CAN FD frames too (CAN_RAW_FD_FRAMES). */
    rc = fh_port_open(client, channel, NULL, FH_PORT_FD, &port);
    if (rc != FH_OK) return fail(client, "cannot listen", rc);
    if (filter_count > 0) {
        rc = fh_set_filters(client, port, filters, filter_count);
        if (rc != FH_OK) return fail(client, "cannot set filters", rc);
    }
    int fd;
    rc = fh_fileno(client, &fd);
    if (rc != FH_OK) return fail(client, "no pollable fd", rc);
    fprintf(stderr, "fieldhub-candump: listening on %s\n", channel);

    for (;;) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, -1) < 0) {
            if (errno == EINTR) continue;
            perror("fieldhub-candump: poll");
            break;
        }
        fh_frame f;
        while ((rc = fh_recv(client, &f, NULL, 0)) == FH_OK) {
            print_frame(channel, &f);
            if (count > 0 && --count == 0) {
                fflush(stdout);
                fh_client_free(client);
                return 0;
            }
        }
        fflush(stdout);
        if (rc != FH_ERR_TIMEOUT) return fail(client, "cannot receive", rc);
    }
    fh_client_free(client);
    return 1;
}
