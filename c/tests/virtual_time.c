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

/* Stepping ahead (FH_CONNECT_AHEAD): a sender places ten numbered frames and
 * a request for later bus times with fh_send_at and ends 100 steps of 1 ms
 * at once; a responder ends its 100 steps at once too, woken only by the
 * request (its wake filter), which it answers; the sender is woken by the
 * answer. On an ideal channel every frame is on the bus at the time it was
 * placed for, and reaches the others with the step that ends after it, as
 * when every participant steps each millisecond: the request placed for
 * 33 ms wakes the responder at 34 ms, whose answer wakes the sender at 35. */
static const char AHEAD_CONFIG[] =
    "[hub]\n"
    "time = \"virtual\"\n"
    "time_participants = [\"sender\", \"responder\"]\n"
    "[[channel]]\n"
    "name = \"can0\"\n";

struct ahead_participant {
    fh_client *client;
    fh_port port;
    uint64_t woken_ns; /* when the first fh_step_ahead returned */
    uint64_t got[3 * 16]; /* (timestamp, id, first byte) per frame received */
    size_t count;
};

static void take_frames(struct ahead_participant *p) {
    fh_frame f;
    fh_meta m;
    while (fh_recv(p->client, &f, &m, 0) == FH_OK) {
        CHECK(p->count + 3 <= sizeof p->got / sizeof p->got[0], "more frames than sent");
        p->got[p->count++] = m.timestamp_ns;
        p->got[p->count++] = f.can_id;
        p->got[p->count++] = f.data[0];
    }
}

static fh_frame numbered(uint32_t id, uint8_t k) {
    fh_frame f;
    memset(&f, 0, sizeof f);
    f.can_id = id;
    f.len = 1;
    f.data[0] = k;
    return f;
}

static void *run_sender(void *arg) {
    struct ahead_participant *p = arg;
    for (uint8_t k = 1; k <= 10; k++) {
        fh_frame f = numbered(0x100, k);
        OK(p->client, fh_send_at(p->client, p->port, &f, (k * 10 - 5) * MS));
    }
    fh_frame request = numbered(0x7DF, 0x3E);
    OK(p->client, fh_send_at(p->client, p->port, &request, 33 * MS));
    fh_filter answers = {0x7E8, 0x7FF};
    OK(p->client, fh_step_ahead(p->client, 100 * MS, MS, &answers, 1, &p->woken_ns));
    take_frames(p);
    uint64_t now = 0;
    OK(p->client, fh_step_ahead(p->client, 100 * MS, MS, &answers, 1, &now));
    CHECK(now == 100 * MS, "the sender's second step ends at 100 ms, not %llu", (unsigned long long)now);
    take_frames(p);
    return NULL;
}

static void *run_responder(void *arg) {
    struct ahead_participant *p = arg;
    fh_filter requests = {0x7DF, 0x7FF};
    OK(p->client, fh_step_ahead(p->client, 100 * MS, MS, &requests, 1, &p->woken_ns));
    take_frames(p);
    fh_frame answer = numbered(0x7E8, 0x7E);
    OK(p->client, fh_send(p->client, p->port, &answer, -1));
    uint64_t now = 0;
    OK(p->client, fh_step_ahead(p->client, 100 * MS, MS, &requests, 1, &now));
    CHECK(now == 100 * MS, "the responder's second step ends at 100 ms, not %llu", (unsigned long long)now);
    take_frames(p);
    return NULL;
}

void test_virtual_time_a_participant_stepping_ahead_is_woken_only_by_what_its_filters_match(void) {
    hub h;
    hub_start(&h, AHEAD_CONFIG, 0, NULL);
    struct ahead_participant sender = {0}, responder = {0};
    struct ahead_participant *ps[] = {&sender, &responder};
    const char *names[] = {"sender", "responder"};
    void *(*runs[])(void *) = {run_sender, run_responder};
    pthread_t threads[2];
    for (int i = 0; i < 2; i++) {
        ps[i]->client = fh_client_new();
        OK(ps[i]->client,
           fh_connect_opts(ps[i]->client, h.url, names[i], NULL, FH_CONNECT_SYNCHRONIZED | FH_CONNECT_AHEAD));
        ps[i]->port = open_port(ps[i]->client, "can0", 0);
    }
    for (int i = 0; i < 2; i++) CHECK(pthread_create(&threads[i], NULL, runs[i], ps[i]) == 0, "pthread_create");
    for (int i = 0; i < 2; i++) pthread_join(threads[i], NULL);

    CHECK(responder.woken_ns == 34 * MS, "the request woke the responder at 34 ms, not %llu",
          (unsigned long long)responder.woken_ns);
    CHECK(sender.woken_ns == 35 * MS, "the answer woke the sender at 35 ms, not %llu",
          (unsigned long long)sender.woken_ns);
    /* The responder read 0x100 #1..#3, the request, then #4..#10, each at its time (k·10 − 5 ms). */
    CHECK(responder.count == 3 * 11, "the responder got %zu frames, not 11", responder.count / 3);
    uint8_t next = 1;
    for (size_t i = 0; i < responder.count; i += 3) {
        if (responder.got[i + 1] == 0x7DF) {
            CHECK(responder.got[i] == 33 * MS && next == 4, "the request at 33 ms, between #3 and #4");
            continue;
        }
        CHECK(responder.got[i + 1] == 0x100 && responder.got[i + 2] == next, "frame #%u in order", next);
        CHECK(responder.got[i] == (next * 10 - 5) * MS, "frame #%u at %u ms, not %llu ns", next, next * 10 - 5,
              (unsigned long long)responder.got[i]);
        next++;
    }
    CHECK(next == 11, "all ten numbered frames reached the responder");
    CHECK(sender.count == 3 && sender.got[0] == 34 * MS && sender.got[1] == 0x7E8,
          "the sender got the answer, placed at 34 ms (%zu frames)", sender.count / 3);
    fh_client_free(sender.client);
    fh_client_free(responder.client);
    CHECK(WIFEXITED(hub_stop(&h)), "hub exit");
}

void test_virtual_time_stepping_ahead_refuses_what_it_cannot_do(void) {
    hub h;
    hub_start(&h, AHEAD_CONFIG, 0, NULL);
    fh_client *alone = fh_client_new();
    EXPECT(alone, fh_connect_opts(alone, h.url, "sender", NULL, FH_CONNECT_AHEAD), FH_ERR_INVALID_ARGUMENT);
    CHECK(strstr(last_error(alone), "FH_CONNECT_SYNCHRONIZED") != NULL, "the refusal says why: %s",
          last_error(alone));
    fh_client_free(alone);

    fh_client *plain = fh_client_new();
    OK(plain, fh_connect_opts(plain, h.url, "sender", NULL, FH_CONNECT_SYNCHRONIZED));
    fh_port port = open_port(plain, "can0", 0);
    fh_frame f = numbered(0x100, 1);
    EXPECT(plain, fh_send_at(plain, port, &f, 5 * MS), FH_ERR_INVALID_ARGUMENT);
    EXPECT(plain, fh_step_ahead(plain, 10 * MS, MS, NULL, 0, NULL), FH_ERR_INVALID_ARGUMENT);
    CHECK(strstr(last_error(plain), "ahead") != NULL, "the refusal says why: %s", last_error(plain));
    fh_client_free(plain);

    fh_client *ahead = fh_client_new();
    OK(ahead, fh_connect_opts(ahead, h.url, "responder", NULL, FH_CONNECT_SYNCHRONIZED | FH_CONNECT_AHEAD));
    fh_filter many[FH_MAX_WAKE_FILTERS + 1];
    memset(many, 0, sizeof many);
    EXPECT(ahead, fh_step_ahead(ahead, 10 * MS, MS, many, FH_MAX_WAKE_FILTERS + 1, NULL), FH_ERR_INVALID_ARGUMENT);
    CHECK(strstr(last_error(ahead), "at most 32") != NULL, "the refusal names the limit: %s", last_error(ahead));
    fh_filter inverted = {0x20000000u | 0x100u, 0x7FF};
    EXPECT(ahead, fh_step_ahead(ahead, 10 * MS, MS, &inverted, 1, NULL), FH_ERR_INVALID_ARGUMENT);
    EXPECT(ahead, fh_step_ahead(ahead, 10 * MS, MS, NULL, 1, NULL), FH_ERR_INVALID_ARGUMENT);
    fh_client_free(ahead);
    CHECK(WIFEXITED(hub_stop(&h)), "hub exit");
}

/* The two halves of fh_step_ahead: the begin returns at once; an await with a
 * timeout returns FH_ERR_TIMEOUT while the step runs (here: the sender holds
 * bus time at 0), and no other step is taken meanwhile; the await returns the
 * grant once it comes, and the participant steps on from there. */
void test_virtual_time_a_step_ahead_in_halves_is_awaited_in_slices_and_the_bus_goes_on(void) {
    hub h;
    hub_start(&h, AHEAD_CONFIG, 0, NULL);
    fh_client *sender = fh_client_new(), *responder = fh_client_new();
    OK(sender, fh_connect_opts(sender, h.url, "sender", NULL, FH_CONNECT_SYNCHRONIZED | FH_CONNECT_AHEAD));
    OK(responder, fh_connect_opts(responder, h.url, "responder", NULL, FH_CONNECT_SYNCHRONIZED | FH_CONNECT_AHEAD));
    fh_port sender_port = open_port(sender, "can0", 0);
    open_port(responder, "can0", 0);

    EXPECT(responder, fh_step_ahead_await(responder, 0, NULL), FH_ERR_INVALID_ARGUMENT);
    CHECK(strstr(last_error(responder), "no step ahead") != NULL, "an await without a begin says so: %s",
          last_error(responder));
    OK(responder, fh_step_ahead_begin(responder, 100 * MS, MS, NULL, 0));
    uint64_t now = 0;
    EXPECT(responder, fh_step_ahead_await(responder, 0, &now), FH_ERR_TIMEOUT);
    EXPECT(responder, fh_step_ahead_await(responder, 20, &now), FH_ERR_TIMEOUT);
    CHECK(now == 0, "no grant stored while the step runs");
    EXPECT(responder, fh_step_ahead_begin(responder, 200 * MS, MS, NULL, 0), FH_ERR_INVALID_ARGUMENT);
    CHECK(strstr(last_error(responder), "still running") != NULL, "a second begin is refused for the first: %s",
          last_error(responder));
    EXPECT(responder, fh_step(responder, 200 * MS, NULL), FH_ERR_INVALID_ARGUMENT);

    /* The sender's step lets bus time reach the responder's end. */
    OK(sender, fh_step(sender, 100 * MS, &now));
    CHECK(now == 100 * MS, "the sender stands at 100 ms, not %llu", (unsigned long long)now);
    OK(responder, fh_step_ahead_await(responder, PATIENCE_MS, &now));
    CHECK(now == 100 * MS, "the responder's step ahead is granted at 100 ms, not %llu", (unsigned long long)now);
    EXPECT(responder, fh_step_ahead_await(responder, 0, NULL), FH_ERR_INVALID_ARGUMENT);

    /* The bus goes on: a frame at 100 ms wakes the next step ahead at 101 ms. */
    OK(responder, fh_step_ahead_begin(responder, 200 * MS, MS, NULL, 0));
    fh_frame f = numbered(0x123, 7);
    OK(sender, fh_send(sender, sender_port, &f, -1));
    OK(sender, fh_step(sender, 101 * MS, NULL));
    OK(responder, fh_step_ahead_await(responder, -1, &now));
    CHECK(now == 101 * MS, "the frame woke the responder at 101 ms, not %llu", (unsigned long long)now);
    fh_frame got;
    fh_meta meta;
    OK(responder, fh_recv(responder, &got, &meta, 0));
    CHECK(got.can_id == 0x123 && got.data[0] == 7 && meta.timestamp_ns == 100 * MS,
          "the responder got the sender's frame of 100 ms (id 0x%x at %llu ns)", got.can_id,
          (unsigned long long)meta.timestamp_ns);
    fh_client_free(sender);
    fh_client_free(responder);
    CHECK(WIFEXITED(hub_stop(&h)), "hub exit");
}
