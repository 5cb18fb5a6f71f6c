/* Test support; see harness.h. */
#define _GNU_SOURCE
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

uint64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void fail_at(const char *file, int line, const char *fmt, ...) {
    va_list args;
    fprintf(stderr, "FAILED at %s:%d: ", file, line);
    va_start(args, fmt);
    vfprintf(stderr, fmt, args);
    va_end(args);
    fputc('\n', stderr);
    exit(1);
}

const char *last_error(const fh_client *c) {
    static char text[1024];
    text[0] = '\0';
    fh_last_error(c, text, sizeof text);
    return text;
}

void ok_at(const char *file, int line, fh_client *c, int rc, const char *what) {
    if (rc != FH_OK) {
        fail_at(file, line, "%s returned %d (%s): %s", what, rc, fh_strerror(rc), last_error(c));
    }
}

void expect_at(const char *file, int line, fh_client *c, int rc, int expected, const char *what) {
    if (rc != expected) {
        fail_at(file, line, "%s returned %d (%s), expected %d (%s); last error: %s", what, rc, fh_strerror(rc),
                expected, fh_strerror(expected), last_error(c));
    }
}

char *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        char *empty = calloc(1, 1);
        CHECK(empty, "out of memory");
        return empty;
    }
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    CHECK(buf, "out of memory");
    for (;;) {
        size_t n = fread(buf + len, 1, cap - len - 1, f);
        len += n;
        if (n == 0) break;
        if (cap - len - 1 == 0) {
            cap *= 2;
            buf = realloc(buf, cap);
            CHECK(buf, "out of memory");
        }
    }
    fclose(f);
    buf[len] = '\0';
    return buf;
}

void wait_for_text(const char *path, const char *needle) {
    uint64_t deadline = now_ms() + PATIENCE_MS;
    for (;;) {
        char *text = read_file(path);
        int found = strstr(text, needle) != NULL;
        free(text);
        if (found) return;
        if (now_ms() > deadline) {
            char *all = read_file(path);
            fail_at(__FILE__, __LINE__, "'%s' never appeared in %s; it holds:\n%s", needle, path, all);
        }
        usleep(10 * 1000);
    }
}

static void redirect(const char *path, int fd) {
    if (!path) return;
    int file = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (file < 0 || dup2(file, fd) < 0) _exit(126);
    close(file);
}

pid_t spawn(const char *const *argv, const char *out_path, const char *err_path) {
    /* A file left by an earlier run must not be read as this child's output. */
    if (out_path) unlink(out_path);
    if (err_path) unlink(err_path);
    pid_t parent = getpid();
    pid_t pid = fork();
    CHECK(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        /* Die with the test: a failed test must not leave processes behind. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(125);
        redirect(out_path, STDOUT_FILENO);
        redirect(err_path, STDERR_FILENO);
        execv(argv[0], (char *const *)argv);
        fprintf(stderr, "cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    return pid;
}

int wait_child(pid_t pid) {
    uint64_t deadline = now_ms() + PATIENCE_MS;
    int status = 0;
    for (;;) {
        pid_t done = waitpid(pid, &status, WNOHANG);
        CHECK(done >= 0, "waitpid: %s", strerror(errno));
        if (done == pid) return status;
        CHECK(now_ms() < deadline, "process %d did not exit", (int)pid);
        usleep(5 * 1000);
    }
}

static int hub_count;

void hub_start(hub *h, const char *config, int with_unix, const char *const *extra) {
    const char *bin = getenv("FIELDHUB_BIN");
    CHECK(bin && *bin, "FIELDHUB_BIN is not set (path of the `fieldhub` binary)");
    memset(h, 0, sizeof *h);
    int n = hub_count++;
    char config_path[256] = "";
    if (config) {
        snprintf(config_path, sizeof config_path, "hub-%d-%d.toml", (int)getpid(), n);
        FILE *f = fopen(config_path, "w");
        CHECK(f && fputs(config, f) >= 0 && fclose(f) == 0, "cannot write %s", config_path);
    }
    snprintf(h->log, sizeof h->log, "hub-%d-%d.log", (int)getpid(), n);
    const char *argv[32];
    int a = 0;
    argv[a++] = bin;
    argv[a++] = "hub";
    argv[a++] = "--listen";
    argv[a++] = "127.0.0.1:0";
    /* Hubs of parallel tests must not compete for shm://default. */
    argv[a++] = "--no-shm";
    char unix_listen[256];
    if (with_unix) {
        snprintf(h->socket_path, sizeof h->socket_path, "/tmp/fieldhub-ctest-%d-%d.sock", (int)getpid(), n);
        unlink(h->socket_path);
        snprintf(unix_listen, sizeof unix_listen, "unix:%s", h->socket_path);
        argv[a++] = "--listen";
        argv[a++] = unix_listen;
    }
    if (config) {
        argv[a++] = "--config";
        argv[a++] = config_path;
    }
    for (; extra && *extra && a < 30; extra++) argv[a++] = *extra;
    argv[a] = NULL;
    h->pid = spawn(argv, NULL, h->log);
    wait_for_text(h->log, "listening on tcp://");
    if (with_unix) wait_for_text(h->log, "listening on unix:");
    char *text = read_file(h->log);
    const char *at = strstr(text, "listening on tcp://") + strlen("listening on ");
    size_t len = strcspn(at, " \r\n");
    CHECK(len < sizeof h->url, "hub URL too long");
    memcpy(h->url, at, len);
    free(text);
    if (with_unix) snprintf(h->unix_url, sizeof h->unix_url, "unix:%s", h->socket_path);
}

int hub_stop(hub *h) {
    kill(h->pid, SIGTERM);
    int status = wait_child(h->pid);
    if (h->socket_path[0]) unlink(h->socket_path);
    return status;
}

fh_client *connect_client(const char *url, const char *name) {
    fh_client *c = fh_client_new();
    CHECK(c, "fh_client_new returned NULL");
    OK(c, fh_connect(c, url, name, NULL));
    return c;
}

fh_port open_port(fh_client *c, const char *channel, uint32_t flags) {
    fh_port port = 0;
    OK(c, fh_port_open(c, channel, NULL, flags, &port));
    return port;
}

void recv_one(fh_client *c, fh_frame *frame, fh_meta *meta) {
    OK(c, fh_recv(c, frame, meta, PATIENCE_MS));
}
