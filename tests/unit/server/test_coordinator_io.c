/* test_coordinator_io.c — the coordinator in this process (so storage/os.h can fail its file
 * calls), spoken to over a real socket: coord-io-1.x.
 *
 *   1.1  a failed commit-log fdatasync: that batch is commit_unknown_result, every later commit
 *        fails with io_error, reads / GRV / STATUS keep working; after a restart everything
 *        acknowledged is there and new commits work again
 *   1.2  a torn write of the system keyspace (the log already has the batch): the batch is
 *        commit_unknown_result, the torn record is moved aside, and the restart replays the batch
 *        from the log into the system keyspace
 *   1.3  a failed (torn) log write: the same guarantees, and the torn tail is moved aside
 *   1.4  a failed fdatasync of the system keyspace (the log already has the batch): present after
 *        the restart, from the system keyspace's own log or replayed from the commit log
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <jansson.h>

#include "base/clock.h"
#include "net/proto.h"
#include "net_fixture.h"
#include "server/coordinator.h"
#include "storage/os.h"
#include "test.h"

/* ---- The coordinator in a thread ---------------------------------------------------------- */

typedef struct {
    rl__coordinator *co;
    pthread_t thread;
    char dir[4200];
} running;

static void *serve(void *p) {
    running *r = p;
    rl__coordinator_run(r->co);
    return NULL;
}

static void start(running *r, const char *dir) {
    snprintf(r->dir, sizeof r->dir, "%s", dir);
    rl__coordinator_options o;
    memset(&o, 0, sizeof o);
    o.dir = r->dir;
    rl__net_auth auth;
    rl_test_auth_member(&auth, 0);
    o.auth = &auth;
    rl__errdetail err;
    rl__errdetail_init(&err, NULL);
    int rc = rl__coordinator_open(&o, &r->co, &err);
    if (rc != RL_OK) fail_msg("open: %s", rl__errdetail_get(&err));
    ASSERT_EQ(pthread_create(&r->thread, NULL, serve, r), 0);
}

static void stop(running *r) {
    rl__coordinator_stop(r->co);
    pthread_join(r->thread, NULL);
    rl__coordinator_close(r->co);
    r->co = NULL;
}

/* ---- A blocking client ------------------------------------------------------------------- */

typedef struct {
    int fd;
    uint64_t id;
    rl_arena a;
    uint8_t *buf;
} cli;

static int read_n(int fd, void *p, size_t n) {
    uint8_t *b = p;
    uint64_t deadline = rl__clock_mono_ns() + 10000000000ull;
    while (n) {
        struct pollfd pf = {fd, POLLIN, 0};
        if (rl__clock_mono_ns() > deadline) return -1;
        if (poll(&pf, 1, 100) <= 0) continue;
        ssize_t got = recv(fd, b, n, 0);
        if (got <= 0) return -1;
        b += got;
        n -= (size_t)got;
    }
    return 0;
}

/* Send m, receive its reply into *out (the client's arena and buffer back it). */
static void call(cli *c, rl__msg *m, rl__frame_header *h, rl__msg *out) {
    rl_buf b;
    rl__buf_init(&b);
    rl__errdetail why;
    rl__errdetail_init(&why, NULL);
    m->flags = 0;
    ASSERT_OK(rl__msg_frame_encode(&b, ++c->id, m, &why));
    ASSERT_EQ(send(c->fd, b.data, b.len, MSG_NOSIGNAL), (ssize_t)b.len);
    rl__buf_release(&b);
    uint8_t hb[RL_FRAME_HEADER_LEN];
    ASSERT_EQ(read_n(c->fd, hb, sizeof hb), 0);
    ASSERT_EQ(rl__frame_header_decode(hb, h), 0);
    free(c->buf);
    c->buf = malloc(h->payload_len + 1);
    if (h->payload_len) ASSERT_EQ(read_n(c->fd, c->buf, h->payload_len), 0);
    rl__arena_reset(&c->a);
    ASSERT_OK(rl__msg_decode(h->type, h->flags, c->buf, h->payload_len, &c->a, out, &why));
    ASSERT_EQ(h->id, c->id);
}

static void cli_open(cli *c, uint16_t port) {
    memset(c, 0, sizeof *c);
    rl__arena_init(&c->a, 0);
    rl__net_auth auth;
    rl_test_auth_client(&auth, 0);
    c->fd = rl_test_raw_open("127.0.0.1", port, &auth);
    rl__msg m, r;
    rl__frame_header h;
    memset(&m, 0, sizeof m);
    m.type = RL_MSG_HELLO;
    m.u.hello_req =
        (rl__msg_hello_req){RL_PROTOCOL_MAGIC, RL_PROTOCOL_VERSION, RL_ROLE_CLIENT, 0, (const uint8_t *)"t", 1};
    call(c, &m, &h, &r);
    ASSERT_EQ(h.flags, RL_FRAME_REPLY);
}

static void cli_close(cli *c) {
    close(c->fd);
    rl__arena_release(&c->a);
    free(c->buf);
}

static rl__version grv(cli *c) {
    rl__msg m, r;
    rl__frame_header h;
    memset(&m, 0, sizeof m);
    m.type = RL_MSG_GET_READ_VERSION;
    call(c, &m, &h, &r);
    ASSERT_EQ(h.flags, RL_FRAME_REPLY);
    return r.u.get_read_version_reply.version;
}

/* Commit SET key = "v" (a system key, so it can be read back here); returns the result. */
static int commit_set(cli *c, const char *key) {
    size_t kl = strlen(key);
    char end[64];
    memcpy(end, key, kl);
    end[kl] = 0;
    rl__mutation mu = {RL_MUT_SET, (const uint8_t *)key, (uint32_t)kl, (const uint8_t *)"v", 1};
    rl__keyrange w = {(const uint8_t *)key, (uint32_t)kl, (const uint8_t *)end, (uint32_t)kl + 1};
    rl__msg m, r;
    rl__frame_header h;
    memset(&m, 0, sizeof m);
    m.type = RL_MSG_COMMIT;
    m.u.commit_req = (rl__msg_commit_req){grv(c), NULL, 0, &w, 1, &mu, 1};
    call(c, &m, &h, &r);
    ASSERT_EQ(h.flags, RL_FRAME_REPLY);
    return r.u.commit_reply.result;
}

static int present(cli *c, const char *key) {
    rl__msg m, r;
    rl__frame_header h;
    memset(&m, 0, sizeof m);
    m.type = RL_MSG_GET;
    m.u.get_req = (rl__msg_get_req){grv(c), (const uint8_t *)key, (uint32_t)strlen(key)};
    call(c, &m, &h, &r);
    ASSERT_EQ(h.flags, RL_FRAME_REPLY);
    return r.u.get_reply.present;
}

static json_t *status(cli *c) {
    rl__msg m, r;
    rl__frame_header h;
    memset(&m, 0, sizeof m);
    m.type = RL_MSG_STATUS;
    call(c, &m, &h, &r);
    json_error_t je;
    json_t *j = json_loadb((const char *)r.u.status_reply.json, r.u.status_reply.json_len, 0, &je);
    ASSERT_NOT_NULL(j);
    return j;
}

/* One scenario: commit a, arm the fault, commit b (expect 1021), commit c (expect the log's
 * error), check reads and STATUS, restart, and check a (and b as `b_after`: 1 present, 0 absent,
 * -1 either) and that new commits work. */
static void scenario(const char *tag, rl__os_kind kind, long n, int flags, int b_after) {
    char *dir = rl_test_tmpdir(tag);
    running r;
    start(&r, dir);
    cli c;
    cli_open(&c, rl__coordinator_port(r.co));
    ASSERT_OK(commit_set(&c, "\xff/a"));
    rl__os_fault_arm(kind, n, EIO, flags);
    ASSERT_RC(commit_set(&c, "\xff/b"), RL_E_COMMIT_UNKNOWN_RESULT);
    ASSERT_TRUE(rl__os_fault_fired());
    rl__os_fault_disarm();
    ASSERT_RC(commit_set(&c, "\xff/c"), RL_E_IO_ERROR);
    ASSERT_RC(commit_set(&c, "\xff/d"), RL_E_IO_ERROR);
    ASSERT_TRUE(present(&c, "\xff/a")); /* reads keep working */
    ASSERT_FALSE(present(&c, "\xff/c"));
    json_t *st = status(&c);
    ASSERT_TRUE(json_is_true(json_object_get(st, "committer_poisoned")));
    json_decref(st);
    cli_close(&c);
    stop(&r);

    start(&r, dir);
    cli_open(&c, rl__coordinator_port(r.co));
    ASSERT_TRUE(present(&c, "\xff/a"));
    int b = present(&c, "\xff/b");
    printf("%s: the batch whose sync failed is %s after the restart\n", tag, b ? "present" : "absent");
    if (b_after >= 0) ASSERT_EQ(b, b_after);
    ASSERT_FALSE(present(&c, "\xff/c"));
    ASSERT_OK(commit_set(&c, "\xff/e"));
    ASSERT_TRUE(present(&c, "\xff/e"));
    st = status(&c);
    char *js = json_dumps(json_object_get(st, "recovery"), JSON_COMPACT);
    printf("%s: recovery %s\n", tag, js);
    free(js);
    json_decref(st);
    cli_close(&c);
    stop(&r);
    rl_test_rmtree(dir);
    free(dir);
}

/* coord-io-1.1: the commit log's fdatasync fails (the first fsync of the batch). */
TEST(coord_io_1_1_log_fsync_fails) { scenario("coio11", RL_OS_FSYNC, 0, 0, -1); }

/* coord-io-1.2: the system keyspace's write is torn after the log's fdatasync succeeded: DIR/sys
 * lacks the batch (its torn record is moved aside there), the log has it, so the restart replays
 * it into the system keyspace. */
TEST(coord_io_1_2_system_write_torn) { scenario("coio12", RL_OS_WRITE, 1, RL_OS_FAULT_TORN, 1); }

/* coord-io-1.4: the system keyspace's fdatasync fails after the log's succeeded: present after
 * the restart, from DIR/sys's own log or replayed from the commit log. */
TEST(coord_io_1_4_system_fsync_fails) { scenario("coio14", RL_OS_FSYNC, 1, 0, 1); }

/* coord-io-1.3: the commit log's write is torn halfway: the batch is absent after the restart
 * (its torn record is moved aside). */
TEST(coord_io_1_3_log_write_torn) { scenario("coio13", RL_OS_WRITE, 0, RL_OS_FAULT_TORN, 0); }

RL_TEST_MAIN(T(coord_io_1_1_log_fsync_fails), T(coord_io_1_2_system_write_torn), T(coord_io_1_3_log_write_torn),
             T(coord_io_1_4_system_fsync_fails))
