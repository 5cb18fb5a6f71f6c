/*
 * Test support for the libfieldhub C tests: real `fieldhub hub` processes,
 * child processes (the examples), and checks that stop the test with a
 * message naming the failed condition and the client's last error.
 *
 * The hub binary comes from $FIELDHUB_BIN. Every child is started with
 * PR_SET_PDEATHSIG, so a test that dies leaves no hub behind.
 */
#ifndef FIELDHUB_TEST_HARNESS_H
#define FIELDHUB_TEST_HARNESS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "fieldhub.h"

/* Bound for any single wait; only a guard against hangs, never a measure. */
#define PATIENCE_MS 60000

typedef struct hub {
    pid_t pid;
    char url[256];      /* tcp://127.0.0.1:PORT */
    char unix_url[256]; /* unix:PATH, when started with a unix socket */
    char log[256];      /* the hub's stderr */
    char socket_path[200];
} hub;

/* Start a hub; `config` is TOML text or NULL for the built-in default;
 * `with_unix` adds a unix-socket listener; `extra` (NULL-terminated, may be
 * NULL) are more arguments, e.g. {"--token-file", path, NULL}. */
void hub_start(hub *h, const char *config, int with_unix, const char *const *extra);
/* SIGTERM, wait; returns the exit status as waitpid reports it. */
int hub_stop(hub *h);

/* Start `argv` with stdout and stderr into the named files (NULL: inherit). */
pid_t spawn(const char *const *argv, const char *out_path, const char *err_path);
/* Wait until the file contains `needle` (hang guard PATIENCE_MS). */
void wait_for_text(const char *path, const char *needle);
/* Read a whole file into a NUL-terminated malloc'd buffer. */
char *read_file(const char *path);
/* waitpid with the hang guard; returns the raw status. */
int wait_child(pid_t pid);

/* A connected client named `name`, or the test fails. */
fh_client *connect_client(const char *url, const char *name);
/* Open a port or fail the test. */
fh_port open_port(fh_client *c, const char *channel, uint32_t flags);
/* Receive one frame within PATIENCE_MS or fail the test. */
void recv_one(fh_client *c, fh_frame *frame, fh_meta *meta);

uint64_t now_ms(void);

void fail_at(const char *file, int line, const char *fmt, ...);
/* Fails with the client's last error when rc is not FH_OK. */
void ok_at(const char *file, int line, fh_client *c, int rc, const char *what);
/* Fails unless rc == expected, printing both codes' messages. */
void expect_at(const char *file, int line, fh_client *c, int rc, int expected, const char *what);

#define CHECK(cond, ...) do { if (!(cond)) fail_at(__FILE__, __LINE__, __VA_ARGS__); } while (0)
#define OK(c, call) ok_at(__FILE__, __LINE__, (c), (call), #call)
#define EXPECT(c, call, code) expect_at(__FILE__, __LINE__, (c), (call), (code), #call)

/* The client's last error (static buffer; for messages and strstr checks). */
const char *last_error(const fh_client *c);

#endif
