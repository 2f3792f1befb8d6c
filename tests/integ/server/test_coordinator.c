/* test_coordinator.c — the real `rlkvd coordinator` process over real sockets, spoken to with the
 * protocol codecs (src/net/proto.h), coord-1.x.
 *
 * Every test starts its own coordinator (port 0, a port file, a fresh directory, --init with two
 * storage servers: ["", "m") on 1, ["m", "\xff") on 2) and stops it by its pid; an atexit
 * handler kills (by recorded pid) whatever a failed test left running. A test plays the clients
 * and the storage servers itself, with blocking sockets and timeouts on every wait.
 *
 *   1.1  start, HELLO, GET_READ_VERSION, STATUS, GET_SHARD_MAP after --init, PING, exit 0 on SIGTERM;
 *        usage errors exit 2; a bad --init exits 1 naming the problem
 *   1.2  commits from several connections at once: a read-modify-write counter in the system
 *        keyspace (conflicts give not_committed; the final count equals the successes) and
 *        versionstamps (unique, increasing, equal to the commit's version and batch order)
 *   1.3  the system keyspace: reads and selectors (wrong_shard_server outside it, unresolved
 *        and read_through at "\xff"), refused writes to \xff/keyServers/ and \xff/serverList/,
 *        "\xff\xff" is outside, a clear range across "\xff" is split
 *   1.4  PEEK/POP as a storage server: registration, filtering by ranges with clear ranges
 *        clipped, the long poll woken by a commit, max_wait_ms honoured, health, the shard map
 *        with the registered server, truncation after POPs and the refused registration of a
 *        server whose data would have a hole
 *   1.5  restart: kill -9 after acknowledged commits, restart, every acknowledged commit is
 *        peekable, system keys readable, versions keep increasing
 *   1.6  bad input: random, truncated, oversized, out-of-order frames, a wrong handshake,
 *        replies, unknown and reserved types: each closes that connection only; the process
 *        stays up and keeps answering a good connection
 *   1.7  throughput: 100 connections, each a loop of GET_READ_VERSION + COMMIT of 10 keys
 *        (fsync on): every commit succeeds (disjoint keys: no conflict, no other error); prints
 *        commits/s and writes/s (RL_COORD_BENCH_SECONDS, default 0.5; the bench run 2)
 *   1.8  the same workload on the embedded file: backend (100 threads), for the figures beside
 *        1.7's: a benchmark, left out of the default run (ctest -L bench runs it, and 1.7 over 2 s)
 *   1.9  the version tick while idle: read versions advance, parked PEEKs are answered, the
 *        log is still truncated by POPs and stays bounded
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "base/arena.h"
#include "base/buf.h"
#include "base/bytes.h"
#include "base/clock.h"
#include "net/proto.h"
#include "net_fixture.h"
#include "reclayer/kv.h"
#include "test.h"

/* ---- Processes -------------------------------------------------------------------------------- */

#define MAX_PROCS 16
static pid_t g_pids[MAX_PROCS];

static void kill_leftovers(void) {
    for (int i = 0; i < MAX_PROCS; i++)
        if (g_pids[i] > 0) {
            kill(g_pids[i], SIGKILL);
            waitpid(g_pids[i], NULL, 0);
            g_pids[i] = 0;
        }
}

static void remember(pid_t pid) {
    static int registered;
    if (!registered) {
        atexit(kill_leftovers);
        registered = 1;
    }
    for (int i = 0; i < MAX_PROCS; i++)
        if (g_pids[i] == 0) {
            g_pids[i] = pid;
            return;
        }
}

static void forget(pid_t pid) {
    for (int i = 0; i < MAX_PROCS; i++)
        if (g_pids[i] == pid) g_pids[i] = 0;
}

typedef struct {
    char *base;     /* the test's directory */
    char dir[4200]; /* the coordinator's --dir */
    char port_file[4200];
    char log[4200];      /* its stderr */
    char key_file[4200]; /* the test cluster's key file (tests/net_fixture.h) */
    pid_t pid;
    uint16_t port;
} coord;

static const char *k_init = "{\"storage\": [1, 2], \"shards\": [{\"begin\": \"\", \"end\": \"6d\", \"team\": [1]}, "
                            "{\"begin\": \"6d\", \"end\": \"ff\", \"team\": [2]}]}";

/* Start `rlkvd coordinator` (extra: more arguments, NULL-terminated) and wait for its port
 * file (10 s). Returns its exit code instead when it exits first (*c->pid is then 0). */
static int coord_start_args(coord *c, const char *const *extra) {
    char init[4300];
    snprintf(init, sizeof init, "%s/init.json", c->base);
    FILE *f = fopen(init, "w");
    ASSERT_NOT_NULL(f);
    fputs(k_init, f);
    fclose(f);
    unlink(c->port_file);
    snprintf(c->key_file, sizeof c->key_file, "%s/cluster.key", c->base);
    if (access(c->key_file, F_OK) != 0) rl_test_write_keyfile(c->key_file);
    const char *argv[32];
    int n = 0;
    argv[n++] = rl_test_bin("rlkvd");
    argv[n++] = "coordinator";
    argv[n++] = "--dir";
    argv[n++] = c->dir;
    argv[n++] = "--port-file";
    argv[n++] = c->port_file;
    argv[n++] = "--init";
    argv[n++] = init;
    argv[n++] = "--host";
    argv[n++] = "hostA";
    argv[n++] = "--key-file";
    argv[n++] = c->key_file;
    for (int i = 0; extra && extra[i] && n < 30; i++) argv[n++] = extra[i];
    argv[n] = NULL;
    char *bin = strdup(argv[0]);
    argv[0] = bin;
    pid_t pid = fork();
    ASSERT_TRUE(pid >= 0);
    if (pid == 0) {
        int fd = open(c->log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) dup2(fd, 2);
        int nul = open("/dev/null", O_RDONLY);
        if (nul >= 0) dup2(nul, 0);
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    free(bin);
    remember(pid);
    c->pid = pid;
    uint64_t t0 = rl__clock_mono_ns();
    for (;;) {
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) {
            forget(pid);
            c->pid = 0;
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        }
        FILE *pf = fopen(c->port_file, "r");
        unsigned port = 0;
        if (pf) {
            int ok = fscanf(pf, "%u", &port) == 1;
            fclose(pf);
            if (ok && port) {
                c->port = (uint16_t)port;
                return 0;
            }
        }
        if (rl__clock_mono_ns() - t0 > 10000000000ull) fail_msg("coordinator did not start (see %s)", c->log);
        usleep(2000);
    }
}

static void coord_start(coord *c, const char *tag) {
    c->base = rl_test_tmpdir(tag);
    snprintf(c->dir, sizeof c->dir, "%s/coordinator", c->base);
    snprintf(c->port_file, sizeof c->port_file, "%s/coordinator.port", c->base);
    snprintf(c->log, sizeof c->log, "%s/coordinator.log", c->base);
    ASSERT_EQ(coord_start_args(c, NULL), 0);
}

/* Stop with sig and wait (10 s, then SIGKILL); returns the exit status word. */
static int coord_stop(coord *c, int sig) {
    int st = 0;
    kill(c->pid, sig);
    uint64_t t0 = rl__clock_mono_ns();
    while (waitpid(c->pid, &st, WNOHANG) != c->pid) {
        if (rl__clock_mono_ns() - t0 > 10000000000ull) {
            kill(c->pid, SIGKILL);
            waitpid(c->pid, &st, 0);
            forget(c->pid);
            fail_msg("coordinator %d did not stop on signal %d", (int)c->pid, sig);
        }
        usleep(2000);
    }
    forget(c->pid);
    c->pid = 0;
    return st;
}

static void coord_done(coord *c) {
    if (c->pid) {
        int st = coord_stop(c, SIGTERM);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) fail_msg("coordinator exit status %d (see %s)", st, c->log);
    }
    rl_test_rmtree(c->base);
    free(c->base);
    c->base = NULL;
}

/* ---- A blocking protocol connection ---------------------------------------------------------- */

typedef struct {
    int fd;
    uint64_t next_id;
    rl_arena arena; /* decoded replies; reset by every receive */
    uint8_t *buf;   /* the last frame's payload */
    size_t cap;
} tconn;

static int tconn_try_open(tconn *t, uint16_t port) {
    memset(t, 0, sizeof *t);
    rl__arena_init(&t->arena, 0);
    t->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (t->fd < 0) return -1;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(t->fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(t->fd);
        t->fd = -1;
        return -1;
    }
    int one = 1;
    setsockopt(t->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    t->next_id = 1;
    /* The handshake, as a member of the test cluster (the coordinator's key file). */
    rl__net_auth auth;
    rl_test_auth_member(&auth, 0);
    if (rl_test_raw_handshake(t->fd, &auth, RL_AUTH_MEMBER, 0, 5000) != RL_OK) {
        close(t->fd);
        t->fd = -1;
        return -1;
    }
    return 0;
}

static void tconn_open(tconn *t, uint16_t port) {
    if (tconn_try_open(t, port) != 0) fail_msg("connect to 127.0.0.1:%u: %s", port, strerror(errno));
}

static void tconn_close(tconn *t) {
    if (t->fd >= 0) close(t->fd);
    t->fd = -1;
    rl__arena_release(&t->arena);
    free(t->buf);
    t->buf = NULL;
}

static int send_all(int fd, const void *p, size_t n) {
    const uint8_t *b = p;
    while (n) {
        ssize_t w = send(fd, b, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Read exactly n bytes within timeout_ms: 0, or -1 on EOF/error/timeout (errno ETIMEDOUT). */
static int recv_all(int fd, void *p, size_t n, int timeout_ms) {
    uint8_t *b = p;
    uint64_t deadline = rl__clock_mono_ns() + (uint64_t)timeout_ms * 1000000ull;
    while (n) {
        uint64_t now = rl__clock_mono_ns();
        if (now >= deadline) {
            errno = ETIMEDOUT;
            return -1;
        }
        struct pollfd pf = {fd, POLLIN, 0};
        int r = poll(&pf, 1, (int)((deadline - now) / 1000000ull) + 1);
        if (r < 0 && errno == EINTR) continue;
        if (r == 0) continue;
        ssize_t got = recv(fd, b, n, 0);
        if (got < 0 && errno == EINTR) continue;
        if (got == 0) errno = ECONNRESET;
        if (got <= 0) return -1;
        b += got;
        n -= (size_t)got;
    }
    return 0;
}

static void tconn_send_raw(tconn *t, uint16_t type, uint16_t flags, uint64_t id, const void *p, size_t n) {
    rl__frame_header h = {(uint32_t)n, type, flags, id};
    uint8_t hb[RL_FRAME_HEADER_LEN];
    rl__frame_header_encode(&h, hb);
    ASSERT_EQ(send_all(t->fd, hb, sizeof hb), 0);
    if (n) ASSERT_EQ(send_all(t->fd, p, n), 0);
}

/* Send request m (type in m->type) with a fresh id; returns the id. */
static uint64_t tconn_send(tconn *t, rl__msg *m) {
    rl_buf b;
    rl__buf_init(&b);
    rl__errdetail why;
    rl__errdetail_init(&why, NULL);
    m->flags = 0;
    uint64_t id = t->next_id++;
    int rc = rl__msg_frame_encode(&b, id, m, &why);
    if (rc != RL_OK) fail_msg("encode %s: %s", rl__msg_type_name(m->type), rl__errdetail_get(&why));
    ASSERT_EQ(send_all(t->fd, b.data, b.len), 0);
    rl__buf_release(&b);
    return id;
}

/* Receive one frame within timeout_ms and decode it into *out (the arena is reset first).
 * Returns 0, or -1 if the connection closed or timed out (errno says which). */
static int tconn_recv(tconn *t, rl__frame_header *h, rl__msg *out, int timeout_ms) {
    uint8_t hb[RL_FRAME_HEADER_LEN];
    if (recv_all(t->fd, hb, sizeof hb, timeout_ms) != 0) return -1;
    ASSERT_EQ(rl__frame_header_decode(hb, h), 0);
    if (t->cap < h->payload_len + 1) {
        t->cap = h->payload_len + 1;
        t->buf = realloc(t->buf, t->cap);
    }
    if (h->payload_len && recv_all(t->fd, t->buf, h->payload_len, timeout_ms) != 0) return -1;
    rl__arena_reset(&t->arena);
    rl__errdetail why;
    rl__errdetail_init(&why, NULL);
    int rc = rl__msg_decode(h->type, h->flags, t->buf, h->payload_len, &t->arena, out, &why);
    if (rc != RL_OK) fail_msg("reply %s does not decode: %s", rl__msg_type_name(h->type), rl__errdetail_get(&why));
    return 0;
}

/* Send m and receive its reply (10 s); a reply to another id fails the test. *h is the reply's
 * header (flags say whether it is an error reply). */
static void tconn_call(tconn *t, rl__msg *m, rl__frame_header *h, rl__msg *out) {
    uint64_t id = tconn_send(t, m);
    if (tconn_recv(t, h, out, 10000) != 0) fail_msg("no reply to %s: %s", rl__msg_type_name(m->type), strerror(errno));
    ASSERT_EQ(h->id, id);
    ASSERT_EQ(h->type, m->type);
}

/* 1 if the server closed the connection within timeout_ms (anything it sent first is read). */
static int tconn_closed_by_peer(tconn *t, int timeout_ms) {
    uint64_t deadline = rl__clock_mono_ns() + (uint64_t)timeout_ms * 1000000ull;
    uint8_t b[4096];
    while (rl__clock_mono_ns() < deadline) {
        struct pollfd pf = {t->fd, POLLIN, 0};
        if (poll(&pf, 1, 50) <= 0) continue;
        ssize_t n = recv(t->fd, b, sizeof b, 0);
        if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) return 1;
    }
    return 0;
}

static void tconn_hello(tconn *t, uint8_t role, uint32_t id) {
    rl__msg m, r;
    rl__frame_header h;
    memset(&m, 0, sizeof m);
    m.type = RL_MSG_HELLO;
    m.u.hello_req = (rl__msg_hello_req){RL_PROTOCOL_MAGIC, RL_PROTOCOL_VERSION, role, id, (const uint8_t *)"hostT", 5};
    tconn_call(t, &m, &h, &r);
    ASSERT_EQ(h.flags, RL_FRAME_REPLY);
    ASSERT_EQ(r.u.hello_reply.role, RL_ROLE_COORDINATOR);
    ASSERT_EQ(r.u.hello_reply.id, 0);
    ASSERT_MEM_EQ(r.u.hello_reply.host, r.u.hello_reply.host_len, "hostA", 5);
}

static void tconn_client(tconn *t, uint16_t port) {
    tconn_open(t, port);
    tconn_hello(t, RL_ROLE_CLIENT, 0);
}

static rl__version grv(tconn *t) {
    rl__msg m, r;
    rl__frame_header h;
    memset(&m, 0, sizeof m);
    m.type = RL_MSG_GET_READ_VERSION;
    tconn_call(t, &m, &h, &r);
    ASSERT_EQ(h.flags, RL_FRAME_REPLY);
    return r.u.get_read_version_reply.version;
}

/* A transaction being built: mutations and conflict ranges whose bytes live in an arena. */
typedef struct {
    rl_arena a;
    rl__mutation muts[64];
    uint32_t n_muts;
    rl__keyrange reads[16], writes[64];
    uint32_t n_reads, n_writes;
    rl__version rv;
} txn;

static void txn_init(txn *x, rl__version rv) {
    memset(x, 0, sizeof *x);
    rl__arena_init(&x->a, 0);
    x->rv = rv;
}

static const uint8_t *dupb(txn *x, const void *p, size_t n) { return rl__arena_memdup(&x->a, p, n); }

static rl__keyrange single(txn *x, const char *k, size_t kl) {
    uint8_t *e = rl__arena_alloc(&x->a, kl + 1);
    memcpy(e, k, kl);
    e[kl] = 0;
    return (rl__keyrange){dupb(x, k, kl), (uint32_t)kl, e, (uint32_t)kl + 1};
}

static void txn_set(txn *x, const char *k, size_t kl, const char *v, size_t vl) {
    x->muts[x->n_muts++] = (rl__mutation){RL_MUT_SET, dupb(x, k, kl), (uint32_t)kl, dupb(x, v, vl), (uint32_t)vl};
    x->writes[x->n_writes++] = single(x, k, kl);
}

static void txn_mut(txn *x, uint8_t type, const void *p1, size_t l1, const void *p2, size_t l2) {
    x->muts[x->n_muts++] = (rl__mutation){type, dupb(x, p1, l1), (uint32_t)l1, dupb(x, p2, l2), (uint32_t)l2};
}

static void txn_read(txn *x, const char *k, size_t kl) { x->reads[x->n_reads++] = single(x, k, kl); }

/* Commit x; returns the reply (result, version, order). */
static rl__msg_commit_reply txn_commit(tconn *t, txn *x) {
    rl__msg m, r;
    rl__frame_header h;
    memset(&m, 0, sizeof m);
    m.type = RL_MSG_COMMIT;
    m.u.commit_req = (rl__msg_commit_req){x->rv, x->reads, x->n_reads, x->writes, x->n_writes, x->muts, x->n_muts};
    tconn_call(t, &m, &h, &r);
    if (h.flags != RL_FRAME_REPLY)
        fail_msg("COMMIT got an error reply %d: %.*s", r.u.error.code, (int)r.u.error.message_len, r.u.error.message);
    rl__arena_release(&x->a);
    return r.u.commit_reply;
}

/* GET key at version v: returns 1 and the value (copied, NUL-terminated, free()) if present. */
static int get_at(tconn *t, rl__version v, const char *k, size_t kl, char **out, uint32_t *out_len, int *out_err) {
    rl__msg m, r;
    rl__frame_header h;
    memset(&m, 0, sizeof m);
    m.type = RL_MSG_GET;
    m.u.get_req = (rl__msg_get_req){v, (const uint8_t *)k, (uint32_t)kl};
    tconn_call(t, &m, &h, &r);
    if (out_err) *out_err = h.flags & RL_FRAME_ERROR ? r.u.error.code : 0;
    if (h.flags & RL_FRAME_ERROR) return 0;
    if (!r.u.get_reply.present) return 0;
    if (out) {
        *out = malloc(r.u.get_reply.value_len + 1);
        memcpy(*out, r.u.get_reply.value, r.u.get_reply.value_len);
        (*out)[r.u.get_reply.value_len] = 0;
    }
    if (out_len) *out_len = r.u.get_reply.value_len;
    return 1;
}

/* STATUS as parsed JSON (json_decref). */
static json_t *status(tconn *t) {
    rl__msg m, r;
    rl__frame_header h;
    memset(&m, 0, sizeof m);
    m.type = RL_MSG_STATUS;
    tconn_call(t, &m, &h, &r);
    ASSERT_EQ(h.flags, RL_FRAME_REPLY);
    json_error_t je;
    json_t *j = json_loadb((const char *)r.u.status_reply.json, r.u.status_reply.json_len, 0, &je);
    if (!j) fail_msg("STATUS is not JSON: %s: %.*s", je.text, (int)r.u.status_reply.json_len, r.u.status_reply.json);
    return j;
}

static json_t *status_server(json_t *st, int id) {
    json_t *a = json_object_get(st, "servers");
    for (size_t i = 0; i < json_array_size(a); i++)
        if (json_integer_value(json_object_get(json_array_get(a, i), "id")) == id) return json_array_get(a, i);
    return NULL;
}

/* ---- coord-1.1 -------------------------------------------------------------------------------- */

TEST(coord_1_1_start_status_shard_map) {
    coord c;
    coord_start(&c, "co11");
    tconn t;
    tconn_client(&t, c.port);
    rl__version v0 = grv(&t);
    ASSERT_TRUE(v0 > 0); /* the layout and the coordinator's own entry were committed */

    json_t *st = status(&t);
    ASSERT_STR_EQ(json_string_value(json_object_get(st, "role")), "coordinator");
    ASSERT_EQ(json_integer_value(json_object_get(st, "id")), 0);
    ASSERT_STR_EQ(json_string_value(json_object_get(st, "host")), "hostA");
    ASSERT_EQ(json_integer_value(json_object_get(st, "pid")), c.pid);
    ASSERT_EQ(json_integer_value(json_object_get(st, "durable_version")), (json_int_t)v0);
    ASSERT_TRUE(json_integer_value(json_object_get(st, "committed_version")) >= (json_int_t)v0);
    ASSERT_TRUE(json_integer_value(json_object_get(st, "log_bytes")) > 0);
    ASSERT_EQ(json_array_size(json_object_get(st, "servers")), 2);
    for (int id = 1; id <= 2; id++) {
        json_t *s = status_server(st, id);
        ASSERT_NOT_NULL(s);
        ASSERT_TRUE(json_is_false(json_object_get(s, "registered")));
        ASSERT_TRUE(json_is_false(json_object_get(s, "healthy")));
        ASSERT_EQ(json_integer_value(json_object_get(s, "popped_version")), 0);
    }
    json_t *sh = json_object_get(st, "shards");
    ASSERT_EQ(json_array_size(sh), 3);
    const char *want[3][3] = {{"", "6d", "1"}, {"6d", "ff", "2"}, {"ff", "ffff", "0"}};
    for (int i = 0; i < 3; i++) {
        json_t *s = json_array_get(sh, (size_t)i);
        ASSERT_STR_EQ(json_string_value(json_object_get(s, "begin")), want[i][0]);
        ASSERT_STR_EQ(json_string_value(json_object_get(s, "end")), want[i][1]);
        ASSERT_EQ(json_integer_value(json_array_get(json_object_get(s, "team"), 0)), atoi(want[i][2]));
    }
    json_decref(st);

    rl__msg m, r;
    rl__frame_header h;
    memset(&m, 0, sizeof m);
    m.type = RL_MSG_GET_SHARD_MAP;
    tconn_call(&t, &m, &h, &r);
    ASSERT_EQ(h.flags, RL_FRAME_REPLY);
    const rl__msg_get_shard_map_reply *sm = &r.u.get_shard_map_reply;
    ASSERT_TRUE(sm->version >= v0);
    ASSERT_EQ(sm->n_servers, 1); /* only the coordinator: no storage server registered yet */
    ASSERT_EQ(sm->servers[0].id, 0);
    ASSERT_EQ(sm->servers[0].role, RL_ROLE_COORDINATOR);
    ASSERT_EQ(sm->servers[0].port, c.port);
    ASSERT_MEM_EQ(sm->servers[0].address, sm->servers[0].address_len, "127.0.0.1", 9);
    ASSERT_MEM_EQ(sm->servers[0].host, sm->servers[0].host_len, "hostA", 5);
    ASSERT_EQ(sm->n_shards, 3);
    ASSERT_MEM_EQ(sm->shards[0].begin, sm->shards[0].begin_len, "", 0);
    ASSERT_MEM_EQ(sm->shards[0].end, sm->shards[0].end_len, "m", 1);
    ASSERT_EQ(sm->shards[0].team[0], 1);
    ASSERT_MEM_EQ(sm->shards[1].end, sm->shards[1].end_len, "\xff", 1);
    ASSERT_EQ(sm->shards[1].team[0], 2);
    ASSERT_MEM_EQ(sm->shards[2].begin, sm->shards[2].begin_len, "\xff", 1);
    ASSERT_MEM_EQ(sm->shards[2].end, sm->shards[2].end_len, "\xff\xff", 2);
    ASSERT_EQ(sm->shards[2].n_team, 1);
    ASSERT_EQ(sm->shards[2].team[0], 0);

    /* The shard map is readable as system keys too. */
    char *val;
    uint32_t vl;
    ASSERT_TRUE(get_at(&t, grv(&t), "\xff/keyServers/m", 14, &val, &vl, NULL));
    ASSERT_MEM_EQ(val, vl, "\x15\x02", 2); /* tuple (2) */
    free(val);

    memset(&m, 0, sizeof m);
    m.type = RL_MSG_PING;
    m.u.ping_req = (rl__msg_ping_req){(const uint8_t *)"hello", 5};
    uint64_t before = rl__clock_mono_ns();
    tconn_call(&t, &m, &h, &r);
    ASSERT_MEM_EQ(r.u.ping_reply.payload, r.u.ping_reply.payload_len, "hello", 5);
    ASSERT_TRUE(r.u.ping_reply.server_mono_ns >= before); /* one machine, one monotonic clock */
    tconn_close(&t);

    /* SIGTERM: a clean stop, exit 0, even with a connection open. */
    tconn_client(&t, c.port);
    int stw = coord_stop(&c, SIGTERM);
    ASSERT_TRUE(WIFEXITED(stw));
    ASSERT_EQ(WEXITSTATUS(stw), 0);
    tconn_close(&t);

    /* Usage errors exit 2; a bad --init exits 1 and says why; a second coordinator on the same
     * directory exits 1. */
    char *out = NULL, *err = NULL;
    ASSERT_EQ(rl_test_run("rlkvd", &out, &err, "coordinator"), 2);
    ASSERT_NOT_NULL(strstr(err, "--dir"));
    free(out), free(err);
    ASSERT_EQ(
        rl_test_run("rlkvd", &out, &err, "coordinator --dir %s --key-file %s --window-versions abc", c.dir, c.key_file),
        2);
    free(out), free(err);
    ASSERT_EQ(rl_test_run("rlkvd", &out, &err, "coordinator --dir %s", c.dir), 2); /* no --key-file */
    ASSERT_NOT_NULL(strstr(err, "--key-file"));
    free(out), free(err);
    ASSERT_EQ(
        rl_test_run("rlkvd", &out, &err, "coordinator --dir %s --key-file %s --listen 10.0.0.1:0", c.dir, c.key_file),
        1);
    free(out), free(err);
    char bad[4300], fresh[4300];
    snprintf(bad, sizeof bad, "%s/bad.json", c.base);
    snprintf(fresh, sizeof fresh, "%s/fresh", c.base);
    FILE *f = fopen(bad, "w");
    fputs("{\"storage\": [1], \"shards\": [{\"begin\": \"\", \"end\": \"80\", \"team\": [1]}]}", f);
    fclose(f);
    ASSERT_EQ(rl_test_run("rlkvd", &out, &err, "coordinator --dir %s --key-file %s --init %s", fresh, c.key_file, bad),
              1);
    printf("bad --init: %s", err);
    ASSERT_NOT_NULL(strstr(err, "last shard must end"));
    free(out), free(err);
    coord_start_args(&c, NULL);
    ASSERT_TRUE(c.pid > 0);
    ASSERT_EQ(rl_test_run("rlkvd", &out, &err, "coordinator --dir %s --key-file %s", c.dir, c.key_file), 1);
    ASSERT_NOT_NULL(strstr(err, "locked"));
    free(out), free(err);
    coord_done(&c);
}

/* ---- coord-1.2 -------------------------------------------------------------------------------- */

enum { C12_THREADS = 6, C12_TXNS = 40 };

typedef struct {
    uint16_t port;
    int idx;
    int committed, conflicts;
    rl__version versions[C12_TXNS];
    uint16_t orders[C12_TXNS];
    int ok[C12_TXNS];
    char fail[256];
} c12_arg;

/* One connection: read-modify-write of \xff/t/counter, plus a versionstamped value per commit. */
static void *c12_thread(void *p) {
    c12_arg *a = p;
    tconn t;
    tconn_client(&t, a->port);
    for (int i = 0; i < C12_TXNS; i++) {
        rl__version rv = grv(&t);
        char *val = NULL;
        uint32_t vl = 0;
        long n = 0;
        if (get_at(&t, rv, "\xff/t/counter", 12, &val, &vl, NULL)) n = atol(val);
        free(val);
        txn x;
        txn_init(&x, rv);
        txn_read(&x, "\xff/t/counter", 12);
        char buf[32];
        int bl = snprintf(buf, sizeof buf, "%ld", n + 1);
        txn_set(&x, "\xff/t/counter", 12, buf, (size_t)bl);
        char vk[32];
        int vkl = snprintf(vk, sizeof vk, "\xff/t/vs/%d/%03d", a->idx, i);
        uint8_t param[14] = {0};
        /* 10 placeholder bytes then the little-endian offset 0 */
        txn_mut(&x, RL_MUT_SET_VERSIONSTAMPED_VALUE, vk, (size_t)vkl, param, sizeof param);
        rl__msg_commit_reply cr = txn_commit(&t, &x);
        if (cr.result == RL_OK) {
            a->committed++;
            a->ok[i] = 1;
            a->versions[i] = cr.commit_version;
            a->orders[i] = cr.batch_order;
            if (cr.commit_version <= rv)
                snprintf(a->fail, sizeof a->fail, "version %llu <= read version",
                         (unsigned long long)cr.commit_version);
        } else if (cr.result == RL_E_NOT_COMMITTED) {
            a->conflicts++;
        } else {
            snprintf(a->fail, sizeof a->fail, "commit result %d", cr.result);
        }
    }
    tconn_close(&t);
    return NULL;
}

static uint64_t be64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = v << 8 | p[i];
    return v;
}

TEST(coord_1_2_concurrent_commits) {
    coord c;
    coord_start(&c, "co12");
    pthread_t th[C12_THREADS];
    c12_arg args[C12_THREADS];
    for (int i = 0; i < C12_THREADS; i++) {
        memset(&args[i], 0, sizeof args[i]);
        args[i].port = c.port;
        args[i].idx = i;
        ASSERT_EQ(pthread_create(&th[i], NULL, c12_thread, &args[i]), 0);
    }
    int committed = 0, conflicts = 0;
    for (int i = 0; i < C12_THREADS; i++) {
        pthread_join(th[i], NULL);
        if (args[i].fail[0]) fail_msg("thread %d: %s", i, args[i].fail);
        committed += args[i].committed;
        conflicts += args[i].conflicts;
    }
    printf("committed %d, not_committed %d\n", committed, conflicts);
    ASSERT_EQ(committed + conflicts, C12_THREADS * C12_TXNS);
    ASSERT_TRUE(committed > 0);
    tconn t;
    tconn_client(&t, c.port);
    rl__version rv = grv(&t);
    char *val = NULL;
    uint32_t vl;
    ASSERT_TRUE(get_at(&t, rv, "\xff/t/counter", 12, &val, &vl, NULL));
    ASSERT_EQ(atol(val), committed); /* serializable: every success incremented once */
    free(val);
    /* Versionstamps: each committed transaction's value is its (version, order); all unique. */
    uint64_t *seen = calloc((size_t)committed + 1, sizeof *seen);
    int ns = 0;
    for (int i = 0; i < C12_THREADS; i++)
        for (int j = 0; j < C12_TXNS; j++) {
            char vk[32];
            int vkl = snprintf(vk, sizeof vk, "\xff/t/vs/%d/%03d", i, j);
            int present = get_at(&t, rv, vk, (size_t)vkl, &val, &vl, NULL);
            ASSERT_EQ(present, args[i].ok[j]);
            if (!present) continue;
            ASSERT_EQ(vl, 10);
            ASSERT_EQ(be64((uint8_t *)val), args[i].versions[j]);
            ASSERT_EQ(((uint8_t)val[8] << 8) | (uint8_t)val[9], args[i].orders[j]);
            if (j > 0 && args[i].ok[j - 1]) ASSERT_TRUE(args[i].versions[j] > args[i].versions[j - 1]);
            uint64_t key = args[i].versions[j] << 16 | args[i].orders[j];
            for (int k = 0; k < ns; k++) ASSERT_TRUE(seen[k] != key);
            seen[ns++] = key;
            free(val);
        }
    free(seen);
    json_t *st = status(&t);
    ASSERT_TRUE(json_integer_value(json_object_get(st, "commits")) >= committed);
    ASSERT_EQ(json_integer_value(json_object_get(st, "conflicts")), conflicts);
    printf("batches %lld for %d commit requests\n", (long long)json_integer_value(json_object_get(st, "batches")),
           C12_THREADS * C12_TXNS);
    json_decref(st);
    tconn_close(&t);
    coord_done(&c);
}

/* ---- Playing a storage server ---------------------------------------------------------------- */

/* Play storage server id: HELLO as storage, REGISTER_STORAGE with its durable version. Returns
 * the reply's start version; *out_err the error code of an error reply (else 0). */
static rl__version register_storage(tconn *t, uint16_t port, uint32_t id, rl__version durable, int *out_err, char *msg,
                                    size_t cap) {
    tconn_open(t, port);
    tconn_hello(t, RL_ROLE_STORAGE, id);
    rl__msg m, r;
    rl__frame_header h;
    memset(&m, 0, sizeof m);
    m.type = RL_MSG_REGISTER_STORAGE;
    m.u.register_storage_req = (rl__msg_register_storage_req){
        id, (const uint8_t *)"127.0.0.1", 9, (uint16_t)(40000 + id), (const uint8_t *)"hostS", 5, durable};
    tconn_call(t, &m, &h, &r);
    *out_err = h.flags & RL_FRAME_ERROR ? r.u.error.code : 0;
    if (*out_err) {
        if (msg) snprintf(msg, cap, "%.*s", (int)r.u.error.message_len, r.u.error.message);
        return 0;
    }
    const rl__msg_register_storage_reply *rr = &r.u.register_storage_reply;
    ASSERT_EQ(rr->n_ranges, 1);
    if (id == 1) {
        ASSERT_MEM_EQ(rr->ranges[0].begin, rr->ranges[0].begin_len, "", 0);
        ASSERT_MEM_EQ(rr->ranges[0].end, rr->ranges[0].end_len, "m", 1);
    } else {
        ASSERT_MEM_EQ(rr->ranges[0].begin, rr->ranges[0].begin_len, "m", 1);
        ASSERT_MEM_EQ(rr->ranges[0].end, rr->ranges[0].end_len, "\xff", 1);
    }
    return rr->start_version;
}

/* A PEEK reply, copied out of the connection's buffers. */
typedef struct {
    rl__version end;
    int n;
    rl__version v[256];
    int nm[256];
    uint8_t type[256][8];
    char p1[256][8][32];
    char p2[256][8][32];
    int err;
} peeked;

static void peek_send(tconn *t, uint32_t id, rl__version after, uint32_t wait_ms, uint64_t *out_id) {
    rl__msg m;
    memset(&m, 0, sizeof m);
    m.type = RL_MSG_PEEK;
    m.u.peek_req = (rl__msg_peek_req){id, after, 0, wait_ms};
    *out_id = tconn_send(t, &m);
}

static void peek_recv(tconn *t, uint64_t id, rl__version after, peeked *out) {
    rl__msg r;
    rl__frame_header h;
    memset(out, 0, sizeof *out);
    if (tconn_recv(t, &h, &r, 15000) != 0) fail_msg("no PEEK reply: %s", strerror(errno));
    ASSERT_EQ(h.id, id);
    ASSERT_EQ(h.type, RL_MSG_PEEK);
    if (h.flags & RL_FRAME_ERROR) {
        out->err = r.u.error.code;
        return;
    }
    rl__errdetail why;
    rl__errdetail_init(&why, NULL);
    ASSERT_OK(rl__msg_peek_reply_check(&r.u.peek_reply, after, &why));
    out->end = r.u.peek_reply.end_version;
    for (uint32_t i = 0; i < r.u.peek_reply.n_versions && i < 256; i++) {
        const rl__msg_peek_version *pv = &r.u.peek_reply.versions[i];
        out->v[i] = pv->version;
        out->nm[i] = (int)pv->n_muts;
        for (uint32_t j = 0; j < pv->n_muts && j < 8; j++) {
            out->type[i][j] = pv->muts[j].type;
            snprintf(out->p1[i][j], 32, "%.*s", (int)pv->muts[j].len1, pv->muts[j].p1);
            snprintf(out->p2[i][j], 32, "%.*s", (int)pv->muts[j].len2, pv->muts[j].p2);
        }
        out->n++;
    }
}

static void peek(tconn *t, uint32_t id, rl__version after, uint32_t wait_ms, peeked *out) {
    uint64_t rid;
    peek_send(t, id, after, wait_ms, &rid);
    peek_recv(t, rid, after, out);
}

/* Wait (10 s at most) until the coordinator reports a PEEK of storage server id parked (STATUS
 * servers[].parked, asked on cl) — the PEEK sent on s is then known to be held, not merely on its
 * way: 1. 0 when a reply to it arrived on s first (a version tick answered it; left unread). */
static int wait_parked(tconn *cl, tconn *s, int id) {
    uint64_t t0 = rl__clock_mono_ns();
    for (;;) {
        json_t *st = status(cl);
        json_int_t parked = json_integer_value(json_object_get(status_server(st, id), "parked"));
        json_decref(st);
        if (parked > 0) return 1;
        struct pollfd pf = {.fd = s->fd, .events = POLLIN};
        if (poll(&pf, 1, 0) == 1) return 0;
        if (rl__clock_mono_ns() - t0 > 10000000000ull) fail_msg("storage server %d: its PEEK never parked", id);
        usleep(500);
    }
}

static void pop(tconn *t, uint32_t id, rl__version v) {
    rl__msg m, r;
    rl__frame_header h;
    memset(&m, 0, sizeof m);
    m.type = RL_MSG_POP;
    m.u.pop_req = (rl__msg_pop_req){id, v};
    tconn_call(t, &m, &h, &r);
    ASSERT_EQ(h.flags, RL_FRAME_REPLY);
}

/* ---- coord-1.3 -------------------------------------------------------------------------------- */

static rl__msg_get_range_reply get_range(tconn *t, rl__version v, rl_key_selector b, rl_key_selector e, int limit,
                                         int reverse, int *out_err) {
    rl__msg m, r;
    rl__frame_header h;
    memset(&m, 0, sizeof m);
    m.type = RL_MSG_GET_RANGE;
    m.u.get_range_req = (rl__msg_get_range_req){v, b, e, limit, 0, (uint8_t)reverse};
    tconn_call(t, &m, &h, &r);
    *out_err = h.flags & RL_FRAME_ERROR ? r.u.error.code : 0;
    if (*out_err) memset(&r, 0, sizeof r);
    return r.u.get_range_reply;
}

#define SEL(k, oe, off) ((rl_key_selector){(const uint8_t *)(k), (uint32_t)(sizeof(k) - 1), (oe), (off)})

TEST(coord_1_3_system_keyspace) {
    coord c;
    coord_start(&c, "co13");
    tconn t;
    tconn_client(&t, c.port);
    txn x;
    txn_init(&x, grv(&t));
    txn_set(&x, "\xff/t/a", 5, "1", 1);
    txn_set(&x, "\xff/t/b", 5, "2", 1);
    txn_set(&x, "\xff/t/c", 5, "3", 1);
    txn_set(&x, "\xff/t/z", 5, "26", 2);
    txn_set(&x, "\xff/0", 3, "zero", 4);
    rl__msg_commit_reply cr = txn_commit(&t, &x);
    ASSERT_OK(cr.result);
    rl__version v = grv(&t);
    ASSERT_TRUE(v >= cr.commit_version);

    /* Refused writes: the coordinator's own prefixes, and the special-key space. */
    struct {
        uint8_t type;
        const char *p1;
        size_t l1;
        const char *p2;
        size_t l2;
        int want;
    } refused[] = {
        {RL_MUT_SET, "\xff/keyServers/x", 15, "v", 1, RL_E_SYSTEM_KEY_WRITE},
        {RL_MUT_SET, "\xff/serverList/\0\0\0\1", 18, "v", 1, RL_E_SYSTEM_KEY_WRITE},
        {RL_MUT_CLEAR, "\xff/keyServers/", 13, "", 0, RL_E_SYSTEM_KEY_WRITE},
        {RL_MUT_ADD, "\xff/serverList/", 13, "\1", 1, RL_E_SYSTEM_KEY_WRITE},
        {RL_MUT_CLEAR_RANGE, "a", 1, "\xff/l", 3, RL_E_SYSTEM_KEY_WRITE},
        {RL_MUT_CLEAR_RANGE, "\xff/m", 3, "\xff/t", 3, RL_E_SYSTEM_KEY_WRITE},
        {RL_MUT_SET_VERSIONSTAMPED_KEY, "\xff/serverList/0123456789\x0e\0\0\0", 27, "v", 1, RL_E_SYSTEM_KEY_WRITE},
        {RL_MUT_SET, "\xff\xff/x", 4, "v", 1, RL_E_KEY_OUTSIDE_LEGAL_RANGE},
        {RL_MUT_CLEAR_RANGE, "\xff/y", 3, "\xff\xff\x01", 3, RL_E_KEY_OUTSIDE_LEGAL_RANGE},
        {RL_MUT_SET_VERSIONSTAMPED_KEY, "\xff\xff/0123456789\x03\0\0\0", 17, "v", 1, RL_E_KEY_OUTSIDE_LEGAL_RANGE},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        txn_init(&x, v);
        txn_set(&x, "\xff/ok", 4, "x", 1); /* the whole transaction is refused */
        txn_mut(&x, refused[i].type, refused[i].p1, refused[i].l1, refused[i].p2, refused[i].l2);
        cr = txn_commit(&t, &x);
        if (cr.result != refused[i].want)
            fail_msg("refused[%zu]: result %d, expected %d", i, cr.result, refused[i].want);
        ASSERT_EQ(cr.commit_version, 0);
    }
    ASSERT_FALSE(get_at(&t, grv(&t), "\xff/ok", 4, NULL, NULL, NULL));
    /* A versionstamp right after "\xff" is a legal system key: the version's first byte is 0. */
    txn_init(&x, v);
    txn_mut(&x, RL_MUT_SET_VERSIONSTAMPED_KEY,
            "\xff"
            "0123456789\x01\0\0\0",
            15, "stamped", 7);
    cr = txn_commit(&t, &x);
    ASSERT_OK(cr.result);
    {
        char sk[11];
        sk[0] = (char)0xff;
        for (int i = 0; i < 8; i++) sk[1 + i] = (char)(cr.commit_version >> (56 - 8 * i));
        sk[9] = (char)(cr.batch_order >> 8);
        sk[10] = (char)cr.batch_order;
        char *sv = NULL;
        uint32_t svl;
        ASSERT_TRUE(get_at(&t, grv(&t), sk, 11, &sv, &svl, NULL));
        ASSERT_MEM_EQ(sv, svl, "stamped", 7);
        free(sv);
    }
    int err = 0;
    ASSERT_FALSE(get_at(&t, grv(&t), "a", 1, NULL, NULL, &err));
    ASSERT_EQ(err, RL_E_WRONG_SHARD_SERVER);
    ASSERT_FALSE(get_at(&t, grv(&t) + 1000000, "\xff/t/a", 5, NULL, NULL, &err));
    ASSERT_EQ(err, RL_E_FUTURE_VERSION);

    /* Ranges and selectors within ["\xff", "\xff\xff"). */
    v = grv(&t);
    rl__msg_get_range_reply rr = get_range(&t, v, SEL("\xff/t/", 0, 1), SEL("\xff/t/z", 0, 1), 0, 0, &err);
    ASSERT_EQ(err, 0);
    ASSERT_EQ(rr.status, RL_RANGE_OK);
    ASSERT_EQ(rr.n_kvs, 3);
    ASSERT_MEM_EQ(rr.kvs[0].key, rr.kvs[0].key_len, "\xff/t/a", 5);
    ASSERT_MEM_EQ(rr.kvs[2].value, rr.kvs[2].value_len, "3", 1);
    ASSERT_EQ(rr.more, 0);
    ASSERT_EQ(rr.read_through_len, 0);
    rr = get_range(&t, v, SEL("\xff/t/", 0, 1), SEL("\xff/t/z", 0, 1), 2, 1, &err); /* reverse, limit 2 */
    ASSERT_EQ(rr.n_kvs, 2);
    ASSERT_MEM_EQ(rr.kvs[0].key, rr.kvs[0].key_len, "\xff/t/c", 5);
    ASSERT_EQ(rr.more, 1);
    /* A selector with an offset is resolved here: firstGreaterOrEqual(\xff/t/a) + 1 = \xff/t/b. */
    rr = get_range(&t, v, SEL("\xff/t/a", 0, 2), SEL("\xff/t/z", 1, 1), 0, 0, &err);
    ASSERT_EQ(rr.n_kvs, 3);
    ASSERT_MEM_EQ(rr.kvs[0].key, rr.kvs[0].key_len, "\xff/t/b", 5);
    ASSERT_MEM_EQ(rr.resolved_begin, rr.resolved_begin_len, "\xff/t/b", 5);
    ASSERT_MEM_EQ(rr.kvs[2].key, rr.kvs[2].key_len, "\xff/t/z", 5);
    /* Reverse from the user keyspace into the system shard: rows down to \xff, then the range
     * continues below it (read_through = \xff). */
    rr = get_range(&t, v, SEL("a", 0, 1), SEL("\xff/1", 0, 1), 0, 1, &err);
    ASSERT_EQ(err, 0);
    ASSERT_EQ(rr.n_kvs, 2); /* \xff/0 and the versionstamped \xff\x00... */
    ASSERT_MEM_EQ(rr.kvs[0].key, rr.kvs[0].key_len, "\xff/0", 3);
    ASSERT_EQ(rr.kvs[1].key_len, 11);
    ASSERT_MEM_EQ(rr.read_through, rr.read_through_len, "\xff", 1);
    /* A begin selector that walks back out of the shard cannot be resolved here. */
    rr = get_range(&t, v, SEL("\xff/t/a", 0, -100), SEL("\xff/t/z", 0, 1), 0, 0, &err);
    ASSERT_EQ(err, 0);
    ASSERT_EQ(rr.status, RL_RANGE_SELECTOR_UNRESOLVED);
    ASSERT_EQ(rr.n_kvs, 0);
    /* A forward read that begins in the user keyspace belongs to a storage server. */
    rr = get_range(&t, v, SEL("a", 0, 1), SEL("\xff/t/z", 0, 1), 0, 0, &err);
    ASSERT_EQ(err, RL_E_WRONG_SHARD_SERVER);

    rl__msg m, r;
    rl__frame_header h;
    struct {
        rl_key_selector sel;
        int resolved;
        const char *key;
        size_t kl;
        int offset;
    } gk[] = {
        {SEL("\xff/t/a", 0, 1), 1, "\xff/t/a", 5, 1}, {SEL("\xff/t/a", 1, 1), 1, "\xff/t/b", 5, 1},
        {SEL("\xff/t/c", 0, 0), 1, "\xff/t/b", 5, 1}, /* lastLessThan(\xff/t/c) */
        {SEL("\xff", 0, 0), 0, "\xff", 1, 0},         /* runs off the shard's front */
        {SEL("\xff/t/z", 0, 5), 1, "\xff\xff", 2, 1}, /* runs off the keyspace: clamped */
    };
    for (size_t i = 0; i < sizeof gk / sizeof gk[0]; i++) {
        memset(&m, 0, sizeof m);
        m.type = RL_MSG_GET_KEY;
        m.u.get_key_req = (rl__msg_get_key_req){v, gk[i].sel};
        tconn_call(&t, &m, &h, &r);
        ASSERT_EQ(h.flags, RL_FRAME_REPLY);
        ASSERT_EQ(r.u.get_key_reply.resolved, gk[i].resolved);
        if (rl__bytes_cmp(r.u.get_key_reply.sel.key, r.u.get_key_reply.sel.key_len, gk[i].key, gk[i].kl))
            fail_msg("get_key[%zu]: wrong key", i);
        ASSERT_EQ(r.u.get_key_reply.sel.offset, gk[i].offset);
    }
    memset(&m, 0, sizeof m);
    m.type = RL_MSG_GET_KEY;
    m.u.get_key_req = (rl__msg_get_key_req){v, SEL("b", 0, 1)};
    tconn_call(&t, &m, &h, &r);
    ASSERT_EQ(h.flags, RL_FRAME_REPLY | RL_FRAME_ERROR);
    ASSERT_EQ(r.u.error.code, RL_E_WRONG_SHARD_SERVER);

    /* A clear range across "\xff" clears the system half here (the user half goes to the log). */
    txn_init(&x, grv(&t));
    txn_mut(&x, RL_MUT_CLEAR_RANGE, "a", 1, "\xff/1", 3);
    cr = txn_commit(&t, &x);
    ASSERT_OK(cr.result);
    v = grv(&t);
    ASSERT_FALSE(get_at(&t, v, "\xff/0", 3, NULL, NULL, NULL));
    ASSERT_TRUE(get_at(&t, v, "\xff/t/a", 5, NULL, NULL, NULL));
    /* ... and reading at the older version still sees the old row (MVCC). */
    ASSERT_TRUE(get_at(&t, cr.commit_version - 1, "\xff/0", 3, NULL, NULL, NULL));
    tconn s1;
    register_storage(&s1, c.port, 1, 0, &err, NULL, 0);
    ASSERT_EQ(err, 0);
    peeked pk;
    peek(&s1, 1, 0, 0, &pk);
    ASSERT_EQ(pk.n, 1);
    ASSERT_EQ(pk.v[0], cr.commit_version);
    ASSERT_EQ(pk.type[0][0], RL_MUT_CLEAR_RANGE);
    ASSERT_STR_EQ(pk.p1[0][0], "a");
    ASSERT_STR_EQ(pk.p2[0][0], "m");
    tconn_close(&s1);
    memset(&m, 0, sizeof m);
    m.type = RL_MSG_GET_MAPPED_RANGE;
    m.u.get_mapped_range_req.version = v;
    m.u.get_mapped_range_req.begin = SEL("\xff", 0, 1);
    m.u.get_mapped_range_req.end = SEL("\xff\xff", 0, 1);
    m.u.get_mapped_range_req.mapper = (const uint8_t *)"\x02{K[1]}\x00";
    m.u.get_mapped_range_req.mapper_len = 8;
    tconn_call(&t, &m, &h, &r);
    ASSERT_EQ(h.flags, RL_FRAME_REPLY | RL_FRAME_ERROR);
    json_t *st = status(&t);
    ASSERT_EQ(json_integer_value(json_object_get(st, "refused_system_writes")), 7);
    json_decref(st);
    tconn_close(&t);
    coord_done(&c);
}

/* ---- coord-1.4 -------------------------------------------------------------------------------- */

TEST(coord_1_4_peek_pop_health) {
    coord c;
    c.base = rl_test_tmpdir("co14");
    snprintf(c.dir, sizeof c.dir, "%s/coordinator", c.base);
    snprintf(c.port_file, sizeof c.port_file, "%s/coordinator.port", c.base);
    snprintf(c.log, sizeof c.log, "%s/coordinator.log", c.base);
    const char *extra[] = {"--log-segment-bytes", "4096", NULL};
    ASSERT_EQ(coord_start_args(&c, extra), 0);
    tconn cl, s1, s2;
    tconn_client(&cl, c.port);
    /* PEEK before registering, and from a client connection, are refused. */
    tconn_open(&s1, c.port);
    tconn_hello(&s1, RL_ROLE_STORAGE, 1);
    peeked pk;
    peek(&s1, 1, 0, 0, &pk);
    ASSERT_EQ(pk.err, RL_E_CLIENT_INVALID_OPERATION);
    peek(&cl, 1, 0, 0, &pk);
    ASSERT_EQ(pk.err, RL_E_CLIENT_INVALID_OPERATION);
    tconn_close(&s1);
    int err;
    ASSERT_EQ(register_storage(&s1, c.port, 1, 0, &err, NULL, 0), 0);
    ASSERT_EQ(err, 0);
    ASSERT_EQ(register_storage(&s2, c.port, 2, 0, &err, NULL, 0), 0);
    ASSERT_EQ(err, 0);
    tconn bogus;
    register_storage(&bogus, c.port, 9, 0, &err, NULL, 0);
    ASSERT_EQ(err, RL_E_INVALID_ARGUMENT);
    tconn_close(&bogus);

    /* Everything so far (layout, registrations) is system keyspace: nothing for them. */
    peek(&s1, 1, 0, 0, &pk);
    ASSERT_EQ(pk.err, 0);
    ASSERT_EQ(pk.n, 0);
    rl__version d0 = grv(&cl);
    ASSERT_TRUE(pk.end > 0 && pk.end <= d0);

    /* A commit touching both servers' ranges, with a clear range across the boundary. */
    txn x;
    txn_init(&x, grv(&cl));
    txn_set(&x, "apple", 5, "1", 1);
    txn_set(&x, "zebra", 5, "2", 1);
    txn_mut(&x, RL_MUT_CLEAR_RANGE, "b", 1, "zz", 2);
    txn_set(&x, "\xff/sys", 5, "3", 1);
    rl__msg_commit_reply cr = txn_commit(&cl, &x);
    ASSERT_OK(cr.result);
    peek(&s1, 1, pk.end, 0, &pk);
    ASSERT_EQ(pk.n, 1);
    ASSERT_EQ(pk.v[0], cr.commit_version);
    ASSERT_EQ(pk.nm[0], 2);
    ASSERT_EQ(pk.type[0][0], RL_MUT_SET);
    ASSERT_STR_EQ(pk.p1[0][0], "apple");
    ASSERT_EQ(pk.type[0][1], RL_MUT_CLEAR_RANGE);
    ASSERT_STR_EQ(pk.p1[0][1], "b");
    ASSERT_STR_EQ(pk.p2[0][1], "m"); /* clipped to its range */
    ASSERT_TRUE(pk.end >= cr.commit_version);
    peeked p2;
    peek(&s2, 2, 0, 0, &p2);
    ASSERT_EQ(p2.n, 1);
    ASSERT_EQ(p2.nm[0], 2);
    ASSERT_STR_EQ(p2.p1[0][0], "zebra");
    ASSERT_STR_EQ(p2.p1[0][1], "m");
    ASSERT_STR_EQ(p2.p2[0][1], "zz");

    /* Long poll: a PEEK with nothing new is parked (STATUS says so) until a commit is durable, and
     * the commit wakes it well before its max_wait (8 s): the reply carries the commit. A version
     * tick (an empty batch 500 ms after the last one) answers a parked PEEK too, with no versions;
     * when one came first (a stalled machine), the attempt is repeated. */
    uint64_t rid;
    rl__version after = pk.end;
    int woken = 0;
    for (int attempt = 1; attempt <= 5 && !woken; attempt++) {
        peek_send(&s1, 1, after, 8000, &rid);
        int parked = wait_parked(&cl, &s1, 1);
        char key[16];
        snprintf(key, sizeof key, "cherry%d", attempt);
        txn_init(&x, grv(&cl));
        txn_set(&x, key, strlen(key), "3", 1);
        uint64_t t0 = rl__clock_mono_ns();
        cr = txn_commit(&cl, &x);
        ASSERT_OK(cr.result);
        peek_recv(&s1, rid, after, &pk);
        double woke_ms = (double)(rl__clock_mono_ns() - t0) / 1e6;
        if (parked && pk.n == 1) {
            printf("parked PEEK answered %.2f ms after the commit was sent\n", woke_ms);
            ASSERT_TRUE(woke_ms < 4000); /* half its max_wait: woken by the commit, not timed out */
            ASSERT_STR_EQ(pk.p1[0][0], key);
            woken = 1;
        } else {
            /* A tick answered it before it was seen parked or before the commit: no versions, the
             * commit not reached; the commit comes with the next PEEK. */
            printf("attempt %d: a version tick answered the PEEK first; again\n", attempt);
            ASSERT_EQ(pk.n, 0);
            ASSERT_TRUE(pk.end < cr.commit_version);
            peek(&s1, 1, pk.end, 8000, &pk);
            ASSERT_EQ(pk.n, 1);
            ASSERT_STR_EQ(pk.p1[0][0], key);
        }
        after = pk.end;
    }
    ASSERT_TRUE(woken);
    /* A commit outside its ranges still ends the poll (end_version advances, no versions); a tick
     * that came first ends it too, and the next PEEK then reaches the commit. */
    peek_send(&s1, 1, after, 8000, &rid);
    (void)wait_parked(&cl, &s1, 1);
    txn_init(&x, grv(&cl));
    txn_set(&x, "xylophone", 9, "4", 1);
    cr = txn_commit(&cl, &x);
    uint64_t t_commit = rl__clock_mono_ns();
    peek_recv(&s1, rid, after, &pk);
    for (int i = 0; i < 5 && pk.end < cr.commit_version; i++) {
        ASSERT_EQ(pk.n, 0);
        peek(&s1, 1, pk.end, 8000, &pk);
    }
    ASSERT_EQ(pk.n, 0);
    ASSERT_TRUE(pk.end >= cr.commit_version);
    /* max_wait_ms honoured when nothing comes. The version tick (an empty batch 500 ms after the
     * last one) comes later than the 300 ms wait unless this machine stalled: then it ends the
     * poll instead, with no versions. */
    after = pk.end;
    uint64_t t0 = rl__clock_mono_ns();
    peek(&s1, 1, after, 300, &pk);
    double waited = (double)(rl__clock_mono_ns() - t0) / 1e6;
    printf("idle PEEK (max_wait_ms 300) answered after %.1f ms\n", waited);
    ASSERT_EQ(pk.n, 0);
    if (pk.end == after) ASSERT_TRUE(waited >= 290 && waited < 2000);
    else ASSERT_TRUE(rl__clock_mono_ns() - t_commit >= 400000000ull); /* a tick's */

    /* Health and the shard map with registered servers. */
    json_t *st = status(&cl);
    ASSERT_TRUE(json_is_true(json_object_get(status_server(st, 1), "healthy")));
    ASSERT_TRUE(json_is_true(json_object_get(status_server(st, 1), "registered")));
    ASSERT_TRUE(json_is_true(json_object_get(status_server(st, 2), "healthy")));
    json_decref(st);
    rl__msg m, r;
    rl__frame_header h;
    memset(&m, 0, sizeof m);
    m.type = RL_MSG_GET_SHARD_MAP;
    tconn_call(&cl, &m, &h, &r);
    ASSERT_EQ(r.u.get_shard_map_reply.n_servers, 3);
    ASSERT_EQ(r.u.get_shard_map_reply.servers[1].id, 1);
    ASSERT_EQ(r.u.get_shard_map_reply.servers[1].port, 40001);
    ASSERT_EQ(r.u.get_shard_map_reply.servers[1].healthy, 1);
    ASSERT_MEM_EQ(r.u.get_shard_map_reply.servers[2].host, r.u.get_shard_map_reply.servers[2].host_len, "hostS", 5);
    /* Its peek connection closed, server 2 is unhealthy (as soon as the coordinator sees the close). */
    tconn_close(&s2);
    int healthy = 1;
    for (uint64_t t1 = rl__clock_mono_ns(); healthy && rl__clock_mono_ns() - t1 < 10000000000ull;) {
        st = status(&cl);
        healthy = !json_is_false(json_object_get(status_server(st, 2), "healthy"));
        json_decref(st);
        if (healthy) usleep(2000);
    }
    ASSERT_FALSE(healthy);

    /* Truncation: commits fill several small segments; once both servers popped past them the
     * log deletes them, and a server registering with an older durable version is refused. */
    for (int i = 0; i < 60; i++) {
        txn_init(&x, grv(&cl));
        char k[32], val[200];
        int kl = snprintf(k, sizeof k, "%ckey%03d", i % 2 ? 'a' : 'q', i);
        memset(val, 'v', sizeof val);
        txn_set(&x, k, (size_t)kl, val, sizeof val);
        ASSERT_OK(txn_commit(&cl, &x).result);
    }
    rl__version dv = grv(&cl);
    st = status(&cl);
    json_int_t segs = json_integer_value(json_object_get(st, "log_segments"));
    json_decref(st);
    printf("log segments before POP: %lld\n", (long long)segs);
    ASSERT_TRUE(segs >= 3);
    pop(&s1, 1, dv);
    st = status(&cl);
    ASSERT_EQ(json_integer_value(json_object_get(status_server(st, 1), "popped_version")), (json_int_t)dv);
    ASSERT_EQ(json_integer_value(json_object_get(st, "log_segments")), segs); /* 2 has not popped */
    json_decref(st);
    ASSERT_EQ(register_storage(&s2, c.port, 2, dv, &err, NULL, 0), dv);
    pop(&s2, 2, dv);
    st = status(&cl);
    json_int_t segs2 = json_integer_value(json_object_get(st, "log_segments"));
    json_int_t base = json_integer_value(json_object_get(st, "log_base_version"));
    json_decref(st);
    printf("log segments after POP: %lld (base %lld)\n", (long long)segs2, (long long)base);
    ASSERT_TRUE(segs2 < segs);
    ASSERT_TRUE(base > 0);
    tconn s3;
    char msg[512];
    register_storage(&s3, c.port, 1, 0, &err, msg, sizeof msg);
    ASSERT_EQ(err, RL_E_PROCESS_BEHIND);
    printf("refused: %s\n", msg);
    ASSERT_NOT_NULL(strstr(msg, "hole"));
    tconn_close(&s3);
    peek(&s1, 1, 0, 0, &pk); /* versions after 0 are gone */
    ASSERT_EQ(pk.err, RL_E_PROCESS_BEHIND);
    tconn_close(&s1);
    tconn_close(&s2);
    tconn_close(&cl);
    coord_done(&c);
}

/* ---- coord-1.5 -------------------------------------------------------------------------------- */

TEST(coord_1_5_restart_after_kill9) {
    coord c;
    coord_start(&c, "co15");
    uint64_t rng = rl_test_seed();
    rl__version acked[200];
    int n_acked = 0;
    rl__version max_acked = 0;
    for (int round = 0; round < 3; round++) {
        tconn cl;
        tconn_client(&cl, c.port);
        int n = 20 + (int)rl_test_rand_below(&rng, 30);
        for (int i = 0; i < n && n_acked < 200; i++) {
            txn x;
            txn_init(&x, grv(&cl));
            char k[32], sk[32];
            int kl = snprintf(k, sizeof k, "k%03d", n_acked);
            int skl = snprintf(sk, sizeof sk, "\xff/r/%03d", n_acked);
            txn_set(&x, k, (size_t)kl, k, (size_t)kl);
            txn_set(&x, sk, (size_t)skl, k, (size_t)kl);
            rl__msg_commit_reply cr = txn_commit(&cl, &x);
            ASSERT_OK(cr.result);
            ASSERT_TRUE(cr.commit_version > max_acked);
            max_acked = cr.commit_version;
            acked[n_acked++] = cr.commit_version;
        }
        tconn_close(&cl);
        int st = coord_stop(&c, SIGKILL);
        ASSERT_TRUE(WIFSIGNALED(st));
        ASSERT_EQ(coord_start_args(&c, NULL), 0);
        tconn_client(&cl, c.port);
        rl__version rv = grv(&cl);
        ASSERT_TRUE(rv >= max_acked);
        /* Every acknowledged system write is there. */
        for (int i = 0; i < n_acked; i++) {
            char sk[32], *val = NULL;
            uint32_t vl;
            int skl = snprintf(sk, sizeof sk, "\xff/r/%03d", i);
            ASSERT_TRUE(get_at(&cl, rv, sk, (size_t)skl, &val, &vl, NULL));
            free(val);
        }
        /* Every acknowledged user write is peekable, at its version. */
        tconn s1;
        int err;
        register_storage(&s1, c.port, 1, 0, &err, NULL, 0);
        ASSERT_EQ(err, 0);
        peeked pk;
        peek(&s1, 1, 0, 0, &pk);
        ASSERT_EQ(pk.n, n_acked);
        for (int i = 0; i < n_acked; i++) {
            char k[32];
            snprintf(k, sizeof k, "k%03d", i);
            ASSERT_EQ(pk.v[i], acked[i]);
            ASSERT_STR_EQ(pk.p1[i][0], k);
        }
        tconn_close(&s1);
        /* New commits get newer versions. */
        txn x;
        txn_init(&x, rv);
        txn_set(&x, "\xff/after", 7, "1", 1);
        rl__msg_commit_reply cr = txn_commit(&cl, &x);
        ASSERT_OK(cr.result);
        ASSERT_TRUE(cr.commit_version > max_acked);
        max_acked = cr.commit_version;
        tconn_close(&cl);
    }
    coord_done(&c);
}

/* ---- coord-1.6 -------------------------------------------------------------------------------- */

/* The coordinator still answers a good connection: PING, a commit, GRV. */
static void still_good(coord *c) {
    ASSERT_EQ(kill(c->pid, 0), 0);
    tconn t;
    tconn_client(&t, c->port);
    txn x;
    txn_init(&x, grv(&t));
    txn_set(&x, "\xff/alive", 7, "1", 1);
    ASSERT_OK(txn_commit(&t, &x).result);
    tconn_close(&t);
}

TEST(coord_1_6_bad_input) {
    coord c;
    coord_start(&c, "co16");
    uint64_t rng = rl_test_seed();
    tconn t;
    int closes = 0;
    /* Random bytes, some starting with a plausible header. */
    for (int i = 0; i < 30; i++) {
        tconn_open(&t, c.port);
        uint8_t junk[512];
        size_t n = 1 + rl_test_rand_below(&rng, sizeof junk);
        for (size_t j = 0; j < n; j++) junk[j] = (uint8_t)rl_test_rand(&rng);
        if (i % 3 == 0) { /* a HELLO header with a random payload */
            rl__frame_header hh = {(uint32_t)(n > 16 ? n - 16 : 0), RL_MSG_HELLO, 0, 1};
            rl__frame_header_encode(&hh, junk);
        }
        send_all(t.fd, junk, n);
        shutdown(t.fd, SHUT_WR); /* a frame cut short by the end of the stream, if incomplete */
        closes += tconn_closed_by_peer(&t, 5000);
        tconn_close(&t);
    }
    ASSERT_EQ(closes, 30);
    still_good(&c);

    /* Frames that must close the connection (the server may first answer what came before). */
    struct {
        const char *what;
        int hello_first;
        uint16_t type, flags;
        uint32_t len; /* payload length claimed */
        const char *payload;
        size_t plen; /* payload bytes actually sent */
    } cases[] = {
        {"request before HELLO", 0, RL_MSG_GET_READ_VERSION, 0, 4, "\0\0\0\0", 4},
        {"unknown flags", 0, RL_MSG_HELLO, 0x10, 0, "", 0},
        {"oversized length", 0, RL_MSG_HELLO, 0, RL_NET_MAX_PAYLOAD + 1, "", 0},
        {"a reply after HELLO", 1, RL_MSG_PING, RL_FRAME_REPLY, 12, "\0\0\0\0\0\0\0\0\0\0\0\0", 12},
        {"error flag without reply", 1, RL_MSG_PING, RL_FRAME_ERROR, 0, "", 0},
        {"unknown type", 1, 99, 0, 0, "", 0},
        {"reserved type", 1, RL_MSG_RESERVED_ADMIN_FIRST + 3, 0, 0, "", 0},
        {"truncated COMMIT", 1, RL_MSG_COMMIT, 0, 10, "\1\0\0\0\0\0\0\0\5\0", 10},
        {"COMMIT with a bad mutation type", 1, RL_MSG_COMMIT, 0, 41,
         "\x10\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\1\0\0\0\x63\1\0\0\0k\1\0\0\0v\0\0\0\0\0\0\0\0\0\0", 41},
        {"GRV with trailing bytes", 1, RL_MSG_GET_READ_VERSION, 0, 5, "\0\0\0\0\0", 5},
        {"a second HELLO", 1, RL_MSG_HELLO, 0, 0, NULL, 0},
        {"a frame cut short", 1, RL_MSG_PING, 0, 100, "\4\0\0\0ab", 6},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tconn_open(&t, c.port);
        if (cases[i].hello_first) tconn_hello(&t, RL_ROLE_CLIENT, 0);
        if (!cases[i].payload) { /* a valid second HELLO */
            rl__msg m;
            memset(&m, 0, sizeof m);
            m.type = RL_MSG_HELLO;
            m.u.hello_req = (rl__msg_hello_req){RL_PROTOCOL_MAGIC, RL_PROTOCOL_VERSION, 0, 0, (const uint8_t *)"h", 1};
            tconn_send(&t, &m);
        } else {
            rl__frame_header hh = {cases[i].len, cases[i].type, cases[i].flags, 7};
            uint8_t hb[RL_FRAME_HEADER_LEN];
            rl__frame_header_encode(&hh, hb);
            send_all(t.fd, hb, sizeof hb);
            if (cases[i].plen) send_all(t.fd, cases[i].payload, cases[i].plen);
        }
        if (i + 1 == sizeof cases / sizeof cases[0]) shutdown(t.fd, SHUT_WR);
        if (!tconn_closed_by_peer(&t, 5000)) fail_msg("%s: the connection stayed open", cases[i].what);
        tconn_close(&t);
    }
    still_good(&c);

    /* A wrong handshake gets an error reply incompatible_protocol_version, then the close. */
    uint32_t magics[2][2] = {{0x12345678u, RL_PROTOCOL_VERSION}, {RL_PROTOCOL_MAGIC, 99}};
    for (int i = 0; i < 2; i++) {
        tconn_open(&t, c.port);
        rl__msg m, r;
        rl__frame_header h;
        memset(&m, 0, sizeof m);
        m.type = RL_MSG_HELLO;
        m.u.hello_req = (rl__msg_hello_req){magics[i][0], magics[i][1], 0, 0, (const uint8_t *)"h", 1};
        tconn_call(&t, &m, &h, &r);
        ASSERT_EQ(h.flags, RL_FRAME_REPLY | RL_FRAME_ERROR);
        ASSERT_EQ(r.u.error.code, RL_E_INCOMPATIBLE_PROTOCOL_VERSION);
        ASSERT_TRUE(tconn_closed_by_peer(&t, 5000));
        tconn_close(&t);
    }
    /* A bad frame on one connection does not disturb another one mid-conversation. */
    tconn good, badc;
    tconn_client(&good, c.port);
    tconn_client(&badc, c.port);
    rl__version v1 = grv(&good);
    tconn_send_raw(&badc, 99, 0, 1, "", 0);
    ASSERT_TRUE(tconn_closed_by_peer(&badc, 5000));
    ASSERT_TRUE(grv(&good) >= v1);
    tconn_close(&badc);
    json_t *st = status(&good);
    printf("protocol errors counted: %lld\n", (long long)json_integer_value(json_object_get(st, "protocol_errors")));
    ASSERT_TRUE(json_integer_value(json_object_get(st, "protocol_errors")) >= 12);
    json_decref(st);
    tconn_close(&good);
    still_good(&c);
    coord_done(&c);
}

/* ---- coord-1.7 -------------------------------------------------------------------------------- */

enum { BENCH_CONNS = 100, BENCH_THREADS = 4, BENCH_KEYS = 10 };

typedef struct {
    uint16_t port;
    int first; /* connection index of the thread's first connection */
    int n;     /* connections it drives */
    double seconds;
    uint64_t commits, conflicts, other;
    char fail[256];
} bench_arg;

/* Drive n connections, each a loop of GRV then COMMIT of 10 new keys (one request outstanding
 * per connection: 100 concurrent transactions over all threads). */
static void *bench_thread(void *p) {
    bench_arg *a = p;
    tconn *t = calloc((size_t)a->n, sizeof *t);
    int *phase = calloc((size_t)a->n, sizeof *phase); /* 0: waiting for GRV, 1: for COMMIT */
    uint64_t *seq = calloc((size_t)a->n, sizeof *seq);
    for (int i = 0; i < a->n; i++) tconn_client(&t[i], a->port);
    uint64_t end = rl__clock_mono_ns() + (uint64_t)(a->seconds * 1e9);
    rl__msg m;
    for (int i = 0; i < a->n; i++) {
        memset(&m, 0, sizeof m);
        m.type = RL_MSG_GET_READ_VERSION;
        tconn_send(&t[i], &m);
    }
    struct pollfd *pf = calloc(a->n > 0 ? (size_t)a->n : 1, sizeof *pf);
    int active = a->n;
    while (active > 0) {
        for (int i = 0; i < a->n; i++) pf[i] = (struct pollfd){t[i].fd, t[i].fd >= 0 ? POLLIN : 0, 0};
        int r = poll(pf, (nfds_t)a->n, 10000);
        if (r <= 0) {
            snprintf(a->fail, sizeof a->fail, "no reply for 10 s");
            break;
        }
        for (int i = 0; i < a->n; i++) {
            if (!(pf[i].revents & POLLIN)) continue;
            rl__frame_header h;
            rl__msg rep;
            if (tconn_recv(&t[i], &h, &rep, 10000) != 0) {
                snprintf(a->fail, sizeof a->fail, "connection %d: %s", a->first + i, strerror(errno));
                active = 0;
                break;
            }
            if (phase[i] == 0) {
                rl__version rv = rep.u.get_read_version_reply.version;
                rl__mutation mu[BENCH_KEYS];
                rl__keyrange w[BENCH_KEYS];
                char keys[BENCH_KEYS][32], ends[BENCH_KEYS][33];
                for (int k = 0; k < BENCH_KEYS; k++) {
                    int kl = snprintf(keys[k], 32, "bench/%03d/%08llu/%d", a->first + i, (unsigned long long)seq[i], k);
                    memcpy(ends[k], keys[k], (size_t)kl + 1);
                    ends[k][kl] = 0;
                    mu[k] = (rl__mutation){RL_MUT_SET, (const uint8_t *)keys[k], (uint32_t)kl,
                                           (const uint8_t *)"value-0123456789", 16};
                    w[k] = (rl__keyrange){(const uint8_t *)keys[k], (uint32_t)kl, (const uint8_t *)ends[k],
                                          (uint32_t)kl + 1};
                }
                seq[i]++;
                memset(&m, 0, sizeof m);
                m.type = RL_MSG_COMMIT;
                m.u.commit_req = (rl__msg_commit_req){rv, NULL, 0, w, BENCH_KEYS, mu, BENCH_KEYS};
                tconn_send(&t[i], &m);
                phase[i] = 1;
            } else {
                int res = rep.u.commit_reply.result;
                if (h.flags & RL_FRAME_ERROR) res = rep.u.error.code;
                if (res == RL_OK) a->commits++;
                else if (res == RL_E_NOT_COMMITTED) a->conflicts++;
                else a->other++;
                if (rl__clock_mono_ns() >= end) {
                    close(t[i].fd);
                    t[i].fd = -1;
                    active--;
                    continue;
                }
                memset(&m, 0, sizeof m);
                m.type = RL_MSG_GET_READ_VERSION;
                tconn_send(&t[i], &m);
                phase[i] = 0;
            }
        }
    }
    for (int i = 0; i < a->n; i++) tconn_close(&t[i]);
    free(t), free(phase), free(seq), free(pf);
    return NULL;
}

TEST(coord_1_7_commit_throughput) {
    coord c;
    c.base = rl_test_tmpdir("co17");
    snprintf(c.dir, sizeof c.dir, "%s/coordinator", c.base);
    snprintf(c.port_file, sizeof c.port_file, "%s/coordinator.port", c.base);
    snprintf(c.log, sizeof c.log, "%s/coordinator.log", c.base);
    const char *nosync = getenv("RL_COORD_BENCH_NO_SYNC");
    int no_sync = nosync && *nosync && strcmp(nosync, "0") != 0;
    const char *extra[] = {no_sync ? "--no-sync" : NULL, NULL};
    ASSERT_EQ(coord_start_args(&c, extra), 0);
    const char *env = getenv("RL_COORD_BENCH_SECONDS");
    double seconds = env ? atof(env) : 0.5;
    if (seconds <= 0) seconds = 0.5;
    pthread_t th[BENCH_THREADS];
    bench_arg args[BENCH_THREADS];
    uint64_t t0 = rl__clock_mono_ns();
    for (int i = 0; i < BENCH_THREADS; i++) {
        memset(&args[i], 0, sizeof args[i]);
        args[i].port = c.port;
        args[i].first = i * (BENCH_CONNS / BENCH_THREADS);
        args[i].n = BENCH_CONNS / BENCH_THREADS;
        args[i].seconds = seconds;
        ASSERT_EQ(pthread_create(&th[i], NULL, bench_thread, &args[i]), 0);
    }
    uint64_t commits = 0, conflicts = 0, other = 0;
    for (int i = 0; i < BENCH_THREADS; i++) {
        pthread_join(th[i], NULL);
        if (args[i].fail[0]) fail_msg("bench thread %d: %s", i, args[i].fail);
        commits += args[i].commits;
        conflicts += args[i].conflicts;
        other += args[i].other;
    }
    double el = (double)(rl__clock_mono_ns() - t0) / 1e9;
    tconn t;
    tconn_client(&t, c.port);
    json_t *st = status(&t);
    json_int_t batches = json_integer_value(json_object_get(st, "batches"));
    json_decref(st);
    tconn_close(&t);
    printf("commit throughput (%s, %d connections, GRV + COMMIT of %d keys each): %.0f "
           "commits/s, %.0f writes/s over %.2f s; %llu commits in %lld batches (%.1f per batch); "
           "conflicts %llu, other errors %llu\n",
           no_sync ? "--no-sync" : "fsync on", BENCH_CONNS, BENCH_KEYS, (double)commits / el,
           (double)commits * BENCH_KEYS / el, el, (unsigned long long)commits, (long long)batches,
           batches ? (double)commits / (double)batches : 0.0, (unsigned long long)conflicts, (unsigned long long)other);
    ASSERT_EQ(conflicts, 0);
    ASSERT_EQ(other, 0);
    ASSERT_TRUE(commits > 0);
    coord_done(&c);
}

/* ---- coord-1.8 -------------------------------------------------------------------------------- */

typedef struct {
    rl_db *db;
    int idx;
    double seconds;
    uint64_t commits;
    int fail;
} emb_arg;

static void *emb_thread(void *p) {
    emb_arg *a = p;
    uint64_t end = rl__clock_mono_ns() + (uint64_t)(a->seconds * 1e9);
    for (uint64_t seq = 0; rl__clock_mono_ns() < end; seq++) {
        rl_txn *t;
        if (rl_txn_begin(a->db, &t) != RL_OK) {
            a->fail = 1;
            return NULL;
        }
        for (int k = 0; k < BENCH_KEYS; k++) {
            char key[40];
            int kl = snprintf(key, sizeof key, "bench/%03d/%08llu/%d", a->idx, (unsigned long long)seq, k);
            rl_txn_set(t, key, (size_t)kl, "value-0123456789", 16);
        }
        rl_future *f = rl_txn_commit(t);
        if (rl_future_wait(f) == RL_OK) a->commits++;
        else a->fail = 1;
        rl_future_free(f);
        rl_txn_free(t);
    }
    return NULL;
}

/* coord-1.8: the same workload on the embedded file: backend (100 threads, group commit in the
 * process), for the figures beside coord-1.7's. */
TEST(coord_1_8_embedded_file_baseline) {
    char *dir = rl_test_tmpdir("co18");
    char url[4200];
    snprintf(url, sizeof url, "file:%s", dir);
    rl_db *db;
    ASSERT_OK(rl_db_open(url, NULL, &db));
    const char *env = getenv("RL_COORD_BENCH_SECONDS");
    double seconds = env ? atof(env) : 2.0;
    if (seconds <= 0) seconds = 2.0;
    pthread_t th[BENCH_CONNS];
    emb_arg args[BENCH_CONNS];
    uint64_t t0 = rl__clock_mono_ns();
    for (int i = 0; i < BENCH_CONNS; i++) {
        args[i] = (emb_arg){db, i, seconds, 0, 0};
        ASSERT_EQ(pthread_create(&th[i], NULL, emb_thread, &args[i]), 0);
    }
    uint64_t commits = 0;
    for (int i = 0; i < BENCH_CONNS; i++) {
        pthread_join(th[i], NULL);
        ASSERT_FALSE(args[i].fail);
        commits += args[i].commits;
    }
    double el = (double)(rl__clock_mono_ns() - t0) / 1e9;
    printf("embedded file: (fsync on, %d threads, a transaction of %d keys each): %.0f commits/s, "
           "%.0f writes/s over %.2f s\n",
           BENCH_CONNS, BENCH_KEYS, (double)commits / el, (double)commits * BENCH_KEYS / el, el);
    rl_db_close(db);
    rl_test_rmtree(dir);
    free(dir);
}

/* ---- coord-1.9 -------------------------------------------------------------------------------- */

/* coord-1.9: the version tick keeps an idle cluster's versions moving . With a 20 ms
 * window the tick interval is a quarter of it (5 ms, STATUS tick_interval_us). While nothing
 * commits: GET_READ_VERSION advances with time, a parked PEEK is answered by a tick (no versions,
 * end_version past after_version), and two storage servers that keep peeking and popping let the
 * log truncate its small segments, so the log's segments and records held stay bounded however
 * many ticks pass. */
TEST(coord_1_9_idle_ticks) {
    coord c;
    c.base = rl_test_tmpdir("co19");
    snprintf(c.dir, sizeof c.dir, "%s/coordinator", c.base);
    snprintf(c.port_file, sizeof c.port_file, "%s/coordinator.port", c.base);
    snprintf(c.log, sizeof c.log, "%s/coordinator.log", c.base);
    const char *extra[] = {"--log-segment-bytes", "4096", "--window-versions", "20000", NULL};
    ASSERT_EQ(coord_start_args(&c, extra), 0);
    tconn cl, s[2];
    tconn_client(&cl, c.port);
    int err;
    rl__version known[2];
    for (int i = 0; i < 2; i++) {
        known[i] = register_storage(&s[i], c.port, (uint32_t)i + 1, 0, &err, NULL, 0);
        ASSERT_EQ(err, 0);
    }
    /* GET_READ_VERSION advances while nothing commits. */
    rl__version v0 = grv(&cl);
    rl__clock_sleep_us(200000);
    rl__version v1 = grv(&cl);
    printf("200 ms idle: the read version moved %lld versions\n", (long long)(v1 - v0));
    ASSERT_TRUE(v1 - v0 >= 100000); /* half: each read version may be a tick and an fdatasync old */
    json_t *st = status(&cl);
    ASSERT_EQ(json_integer_value(json_object_get(st, "tick_interval_us")), 5000);
    json_decref(st);
    /* Both servers peek (each PEEK is parked until a tick) and pop, for 700 ticks. */
    uint64_t t0 = rl__clock_mono_ns();
    json_int_t ticks = 0, max_segments = 0, max_records = 0;
    for (int round = 0; ticks < 700; round++) {
        for (int i = 0; i < 2; i++) {
            peeked pk;
            peek(&s[i], (uint32_t)i + 1, known[i], 5000, &pk);
            ASSERT_EQ(pk.err, 0);
            ASSERT_EQ(pk.n, 0); /* ticks carry no mutation */
            ASSERT_TRUE(pk.end > known[i]);
            known[i] = pk.end;
            pop(&s[i], (uint32_t)i + 1, known[i]);
        }
        st = status(&cl);
        ticks = json_integer_value(json_object_get(st, "ticks"));
        json_int_t segs = json_integer_value(json_object_get(st, "log_segments"));
        json_int_t recs = json_integer_value(json_object_get(st, "log_records"));
        if (segs > max_segments) max_segments = segs;
        if (recs > max_records) max_records = recs;
        json_decref(st);
        if (rl__clock_mono_ns() - t0 > 60000000000ull) fail_msg("only %lld ticks in 60 s", (long long)ticks);
    }
    st = status(&cl);
    json_int_t base = json_integer_value(json_object_get(st, "log_base_version"));
    printf("%lld ticks in %.2f s: at most %lld segments and %lld records held; log base %lld\n", (long long)ticks,
           (double)(rl__clock_mono_ns() - t0) / 1e9, (long long)max_segments, (long long)max_records, (long long)base);
    json_decref(st);
    /* A 24-byte empty record per tick: 171 fill a 4,096-byte segment, and popped segments go. */
    ASSERT_TRUE(base > 0);
    ASSERT_TRUE(max_segments <= 4);
    ASSERT_TRUE(max_records <= 4 * 171);
    tconn_close(&s[0]);
    tconn_close(&s[1]);
    tconn_close(&cl);
    coord_done(&c);
}

RL_TEST_MAIN(T(coord_1_1_start_status_shard_map), T(coord_1_2_concurrent_commits), T(coord_1_3_system_keyspace),
             T(coord_1_4_peek_pop_health), T(coord_1_5_restart_after_kill9), T(coord_1_6_bad_input),
             T(coord_1_7_commit_throughput), T(coord_1_8_embedded_file_baseline), T(coord_1_9_idle_ticks))
