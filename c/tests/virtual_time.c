/*
 * Virtual time from C (see docs/virtual-time.md): synchronised participants
 * connected with FH_CONNECT_SYNCHRONIZED step bus time with fh_step, read it
 * with fh_now, and a run gives the same frames, stamps and order every time.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "harness.h"
#include "virtual_time.h"

#define MS 1000000ull
#define STEPS 200u

static const char VIRTUAL_CONFIG[] =
    "[hub]\n"
    "time = \"virtual\"\n"
    "time_participants = [\"ecu_a\", \"ecu_b\"]\n"
    "[[channel]]\n"
    "name = \"can0\"\n"
    "timing = \"timed\"\n"
    "bitrate = 500000\n";

struct participant {
    fh_client *client;
    uint32_t id;
    uint64_t step_ns;
    /* What this participant received: (timestamp, id, first byte) per frame. */
    uint64_t got[3 * 2 * STEPS];
    size_t count;
};

/* Every step: send one frame carrying the step number, then end the step
 * and record the frames of the window. Both participants send the same
 * identifier in the same bit time: the hub breaks the tie by port name. */
static void *run_participant(void *arg) {
    struct participant *p = arg;
    fh_port port = open_port(p->client, "can0", 0);
    uint64_t now = 0;
    OK(p->client, fh_now(p->client, &now));
    CHECK(now == 0, "bus time starts at 0, not %llu", (unsigned long long)now);
    for (uint32_t k = 0; now < STEPS * MS; k++) {
        fh_frame f;
        memset(&f, 0, sizeof f);
        f.can_id = p->id;
        f.len = 1;
        f.data[0] = (uint8_t)k;
        OK(p->client, fh_send(p->client, port, &f, -1));
        uint64_t until = now + p->step_ns;
        OK(p->client, fh_step(p->client, until, &now));
        CHECK(now == until, "stepped to %llu, asked for %llu", (unsigned long long)now, (unsigned long long)until);
        fh_meta m;
        while (fh_recv(p->client, &f, &m, 0) == FH_OK) {
            CHECK(m.timestamp_ns <= now, "a frame from the future");
            CHECK(p->count + 3 <= sizeof p->got / sizeof p->got[0], "more frames than sent");
            p->got[p->count++] = m.timestamp_ns;
            p->got[p->count++] = f.can_id;
            p->got[p->count++] = f.data[0];
        }
    }
    return NULL;
}

/* One run: two participants stepping 1 ms and 2 ms; returns what ecu_a got. */
static struct participant *one_run(void) {
    hub h;
    hub_start(&h, VIRTUAL_CONFIG, 0, NULL);
    struct participant *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
    CHECK(a && b, "out of memory");
    const char *names[] = {"ecu_a", "ecu_b"};
    struct participant *ps[] = {a, b};
    pthread_t threads[2];
    for (int i = 0; i < 2; i++) {
        ps[i]->client = fh_client_new();
        OK(ps[i]->client, fh_connect_opts(ps[i]->client, h.url, names[i], NULL, FH_CONNECT_SYNCHRONIZED));
        ps[i]->id = 0x123;
        ps[i]->step_ns = (uint64_t)(i + 1) * MS;
        CHECK(pthread_create(&threads[i], NULL, run_participant, ps[i]) == 0, "pthread_create");
    }
    for (int i = 0; i < 2; i++) pthread_join(threads[i], NULL);
    fh_client_free(a->client);
    fh_client_free(b->client);
    free(b);
    CHECK(WIFEXITED(hub_stop(&h)), "hub exit");
    return a;
}

void test_virtual_time_runs_step_by_step_and_repeat_exactly(void) {
    struct participant *first = one_run(), *second = one_run();
    /* ecu_b sends every 2 ms for 200 ms: 100 frames reach ecu_a. */
    CHECK(first->count == 3 * 100, "ecu_a got %zu frames", first->count / 3);
    CHECK(second->count == first->count, "the second run got %zu frames", second->count / 3);
    CHECK(memcmp(first->got, second->got, first->count * sizeof first->got[0]) == 0,
          "the same frames, stamps and order on both runs");
    free(first);
    free(second);
}

void test_virtual_time_needs_a_hub_in_virtual_time_and_a_participant(void) {
    hub h;
    hub_start(&h, NULL, 0, NULL);
    fh_client *c = fh_client_new();
    EXPECT(c, fh_connect_opts(c, h.url, "ecu", NULL, FH_CONNECT_SYNCHRONIZED), FH_ERR_REFUSED);
    CHECK(strstr(last_error(c), "real time") != NULL, "the refusal says why: %s", last_error(c));
    fh_client_free(c);
    fh_client *observer = connect_client(h.url, "observer");
    uint64_t now = 0;
    EXPECT(observer, fh_now(observer, &now), FH_ERR_INVALID_ARGUMENT);
    EXPECT(observer, fh_step(observer, MS, NULL), FH_ERR_INVALID_ARGUMENT);
    fh_client_free(observer);
    CHECK(WIFEXITED(hub_stop(&h)), "hub exit");
}
