/* test_cluster_access.c — who may talk to a cluster, and what a peer can make a server hold
 * (docs/design.md §8.2 "Access", docs/protocol.md §2):
 *
 *   access-1.1  rl cluster up makes the directory 0700, the key file and the cluster file 0600,
 *               and a cluster ID of at least 32 letters and digits that no other file holds
 *   access-1.2  a cluster file naming another cluster (the right address, a wrong ID) is refused
 *               with invalid_cluster_id at once, through the C API and through rl
 *   access-1.3  without the cluster's secrets nothing is served (no GRV, no commit); with the
 *               cluster file only (the client key) a process can read and write but neither
 *               administer (SET_DELAY, SPLIT_SHARD, ASSIGN_SHARD), read or drop the log (PEEK,
 *               POP), nor register as a storage server: each is unauthorized_attempt, and the
 *               cluster's delay, shard map and health are unchanged afterwards
 *   access-1.4  12 connections that declare a 64 MiB frame before the handshake (and send 4 MiB
 *               of it) are each closed at the header: the coordinator's RSS grows < 16 MiB
 *   access-1.5  a connection that trickles a byte every 100 ms is closed by the handshake
 *               timeout; one handshake beyond the limit evicts the oldest; one connection beyond
 *               the limit is closed at once; a good client gets through meanwhile
 *   access-1.6  a client that does not read its replies: the server stops reading its requests
 *               once the replies queued for it pass the limit (STATUS net.reads_paused), its RSS
 *               stays bounded, another client is served meanwhile, and once the client reads
 *               every request gets its reply
 *
 * 1.1–1.3 run on a real cluster (rl cluster up); 1.4–1.6 on a coordinator process started here
 * with small limits (--handshake-timeout-ms, --max-handshakes, --max-connections,
 * --max-queued-bytes), stopped by its pid whatever happens (PDEATHSIG, atexit).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "base/buf.h"
#include "base/clock.h"
#include "cluster_fixture.h"
#include "kv/cluster/clusterfile.h"
#include "net/frame.h"
#include "net/proto.h"
#include "net_fixture.h"
#include "test.h"

static double now_s(void) { return (double)rl__clock_mono_ns() / 1e9; }

/* ---- A coordinator process with chosen limits ----------------------------------------------- */

static pid_t g_coord; /* for the exit hook */

static void kill_coord(void) {
    if (g_coord > 0) {
        kill(g_coord, SIGKILL);
        waitpid(g_coord, NULL, 0);
        g_coord = 0;
    }
}

typedef struct {
    char *base;
    char key_file[4200], port_file[4200], log[4200], dir[4200];
    uint16_t port;
    pid_t pid;
} coord;

/* Start `rlkvd coordinator` with the test cluster's key file and the given limits. */
static void coord_start(coord *c, const char *limits) {
    memset(c, 0, sizeof *c);
    c->base = rl_test_tmpdir("access");
    snprintf(c->key_file, sizeof c->key_file, "%s/cluster.key", c->base);
    snprintf(c->port_file, sizeof c->port_file, "%s/port", c->base);
    snprintf(c->log, sizeof c->log, "%s/coordinator.log", c->base);
    snprintf(c->dir, sizeof c->dir, "%s/coordinator", c->base);
    rl_test_write_keyfile(c->key_file);
    char cmd[16384];
    snprintf(cmd, sizeof cmd, "coordinator --dir %s --key-file %s --port-file %s --no-sync %s", c->dir, c->key_file,
             c->port_file, limits);
    const char *argv[40];
    int n = 0;
    char *copy = strdup(cmd), *save = NULL;
    argv[n++] = rl_test_bin("rlkvd");
    for (char *tok = strtok_r(copy, " ", &save); tok && n < 38; tok = strtok_r(NULL, " ", &save)) argv[n++] = tok;
    argv[n] = NULL;
    pid_t pid = fork();
    ASSERT_TRUE(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int fd = open(c->log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) dup2(fd, 2);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    free(copy);
    c->pid = g_coord = pid;
    atexit(kill_coord);
    double t0 = now_s();
    for (;;) {
        FILE *f = fopen(c->port_file, "r");
        unsigned port = 0;
        if (f) {
            int ok = fscanf(f, "%u", &port) == 1;
            fclose(f);
            if (ok && port) break;
        }
        if (waitpid(pid, NULL, WNOHANG) == pid) {
            g_coord = 0;
            fail_msg("the coordinator exited at once (see %s)", c->log);
        }
        if (now_s() - t0 > 10) fail_msg("the coordinator did not start (see %s)", c->log);
        usleep(5000);
        c->port = (uint16_t)port;
    }
    FILE *f = fopen(c->port_file, "r");
    unsigned port = 0;
    ASSERT_EQ(fscanf(f, "%u", &port), 1);
    fclose(f);
    c->port = (uint16_t)port;
}

static void coord_stop(coord *c) {
    kill(c->pid, SIGTERM);
    int st = 0;
    double t0 = now_s();
    while (waitpid(c->pid, &st, WNOHANG) != c->pid) {
        if (now_s() - t0 > 10) {
            kill(c->pid, SIGKILL);
            waitpid(c->pid, &st, 0);
            break;
        }
        usleep(5000);
    }
    g_coord = 0;
    ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    rl_test_rmtree(c->base);
    free(c->base);
}

/* The resident set of pid in KiB (/proc/PID/status VmRSS). */
static long rss_kib(pid_t pid) {
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    ASSERT_NOT_NULL(f);
    long kib = -1;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6)) kib = strtol(line + 6, NULL, 10);
    fclose(f);
    return kib;
}

/* ---- A blocking client over the raw protocol -------------------------------------------------- */

/* Send m with id on fd. */
static void send_msg(int fd, uint64_t id, const rl__msg *m) {
    rl_buf b;
    rl__buf_init(&b);
    ASSERT_OK(rl__msg_frame_encode(&b, id, m, NULL));
    (void)rl_test_raw_send(fd, b.data, b.len);
    rl__buf_release(&b);
}

static void send_hello(int fd, uint8_t role, uint32_t id) {
    rl__msg m;
    memset(&m, 0, sizeof m);
    m.type = RL_MSG_HELLO;
    m.u.hello_req = (rl__msg_hello_req){RL_PROTOCOL_MAGIC, RL_PROTOCOL_VERSION, role, id, (const uint8_t *)"t", 1};
    send_msg(fd, 1, &m);
}

/* Send req with id and return the reply's error code (0 for a reply); the reply is decoded into
 * *out from payload (caller's, 64 KiB). RL_E_CONNECTION_FAILED when the server closed. */
static int call(int fd, uint64_t id, const rl__msg *req, rl__msg *out, uint8_t *payload) {
    send_msg(fd, id, req);
    for (;;) {
        rl__frame_header h;
        int rc = rl_test_raw_recv_frame(fd, &h, payload, 65536, 5000);
        if (rc) return rc;
        if (h.id != id || !(h.flags & RL_FRAME_REPLY)) continue;
        ASSERT_OK(rl__msg_decode(h.type, h.flags, payload, h.payload_len, NULL, out, NULL));
        return (h.flags & RL_FRAME_ERROR) ? out->u.error.code : RL_OK;
    }
}

/* 1 if the server closes fd within ms (reading and dropping what arrives). */
static int closed_within(int fd, int ms) {
    double end = now_s() + ms / 1000.0;
    uint8_t b[4096];
    while (now_s() < end) {
        struct pollfd pf = {fd, POLLIN, 0};
        if (poll(&pf, 1, 20) <= 0) continue;
        ssize_t r = recv(fd, b, sizeof b, 0);
        if (r == 0 || (r < 0 && errno != EINTR && errno != EAGAIN)) return 1;
    }
    return 0;
}

/* The integer at "net"."field" of the STATUS of the server at port (an admin connection). */
static long long net_stat(uint16_t port, const rl__net_auth *auth, const char *field) {
    rl__admin_conn *a = NULL;
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    ASSERT_OK(rl__admin_conn_open(port, auth, 3000, &a, &msg));
    rl__msg req, rep;
    memset(&req, 0, sizeof req);
    req.type = RL_MSG_STATUS;
    ASSERT_OK(rl__admin_conn_call(a, &req, &rep, 3000, &msg));
    json_t *j = json_loadb((const char *)rep.u.status_reply.json, rep.u.status_reply.json_len, 0, NULL);
    ASSERT_NOT_NULL(j);
    long long v = json_integer_value(json_object_get(json_object_get(j, "net"), field));
    json_decref(j);
    rl__admin_conn_close(a);
    return v;
}

/* Wait (10 s at most) until the "net" field of the server at port is at least want: 1, or 0. */
static int wait_net_stat(uint16_t port, const rl__net_auth *auth, const char *field, long long want) {
    for (double t0 = now_s(); now_s() - t0 < 10; usleep(2000))
        if (net_stat(port, auth, field) >= want) return 1;
    return net_stat(port, auth, field) >= want;
}

/* The same until it is at most want. */
static int wait_net_stat_at_most(uint16_t port, const rl__net_auth *auth, const char *field, long long want) {
    for (double t0 = now_s(); now_s() - t0 < 10; usleep(2000))
        if (net_stat(port, auth, field) <= want) return 1;
    return net_stat(port, auth, field) <= want;
}

/* ---- 1.1–1.3: a real cluster -------------------------------------------------------------------- */

static rl_test_cluster g_c; /* static: the fixture's exit hooks read it */

static void start_cluster(void) {
    rl__cluster_up_opts o;
    memset(&o, 0, sizeof o);
    o.n_storage = 1;
    o.no_sync = 1;
    ASSERT_OK(rl_test_cluster_start(&g_c, &o));
}

static int mode_of(const char *path) {
    struct stat st;
    ASSERT_EQ(stat(path, &st), 0);
    return (int)(st.st_mode & 0777);
}

/* access-1.1: the cluster's files are private; the ID is long and only in the two secret files. */
TEST(access_1_1_private_files) {
    start_cluster();
    ASSERT_EQ(mode_of(g_c.dir), 0700);
    ASSERT_EQ(mode_of(g_c.key_file), 0600);
    ASSERT_EQ(mode_of(g_c.file), 0600);
    const char *colon = strchr(g_c.key.name, ':');
    ASSERT_NOT_NULL(colon);
    ASSERT_TRUE(strlen(colon + 1) >= RL_AUTH_ID_MIN);
    /* pids.json and the logs never hold the ID (or the secret): only the 0600 files do. */
    char path[4400];
    const char *files[] = {"pids.json", "init.json", "logs/coordinator.log", "logs/storage-1.log"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", g_c.dir, files[i]);
        FILE *f = fopen(path, "r");
        ASSERT_NOT_NULL(f);
        char buf[65536];
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        buf[n] = 0;
        fclose(f);
        if (strstr(buf, colon + 1)) fail_msg("%s holds the cluster ID", path);
    }
    rl_test_cluster_stop(&g_c);
}

/* access-1.2: the right address and description, a wrong ID: invalid_cluster_id at once. */
TEST(access_1_2_wrong_cluster_id) {
    start_cluster();
    char wrong[4400], url[4500];
    snprintf(wrong, sizeof wrong, "%s/wrong.cluster", g_c.dir);
    rl__cluster_file cf;
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    ASSERT_OK(rl__cluster_file_read(g_c.file, &cf, &msg));
    cf.id[0] = cf.id[0] == 'A' ? 'B' : 'A'; /* one character off */
    rl_buf text;
    rl__buf_init(&text);
    rl__cluster_file_format(&cf, &text);
    FILE *f = fopen(wrong, "w");
    ASSERT_NOT_NULL(f);
    fwrite(text.data, 1, text.len, f);
    fclose(f);
    rl__buf_release(&text);
    snprintf(url, sizeof url, "cluster:%s", wrong);
    rl_db *db = NULL;
    double t0 = now_s();
    ASSERT_RC(rl_db_open(url, NULL, &db), RL_E_INVALID_CLUSTER_ID);
    ASSERT_TRUE(now_s() - t0 < 2.0);
    ASSERT_NOT_NULL(strstr(rl_last_error_detail(), "description:ID"));
    char *out = NULL;
    t0 = now_s();
    ASSERT_EQ(rl_test_rl(&out, "kv --db %s get k", url), 1);
    ASSERT_TRUE(now_s() - t0 < 5.0);
    ASSERT_NOT_NULL(strstr(out, "invalid_cluster_id"));
    free(out);
    /* The right file still works. */
    ASSERT_OK(rl_db_open(g_c.url, NULL, &db));
    rl_db_close(db);
    rl_test_cluster_stop(&g_c);
}

/* access-1.3: what each key allows. */
TEST(access_1_3_roles_need_the_member_key) {
    start_cluster();
    uint16_t cport = 0, sport = 0;
    int cpid = 0;
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    ASSERT_OK(rl__cluster_pid(g_c.dir, 0, &cpid, &cport, &msg));
    int spid = 0;
    ASSERT_OK(rl__cluster_pid(g_c.dir, 1, &spid, &sport, &msg));
    uint8_t *pl = malloc(65536);
    rl__msg req, rep;
    /* No secret at all: the first frame that is not AUTH closes the connection; a GRV or a COMMIT
     * is never answered. */
    {
        int fd = rl_test_raw_connect("127.0.0.1", cport);
        memset(&req, 0, sizeof req);
        req.type = RL_MSG_GET_READ_VERSION;
        send_msg(fd, 7, &req);
        rl__frame_header h;
        ASSERT_OK(rl_test_raw_recv_frame(fd, &h, pl, 65536, 3000)); /* the challenge, nothing else */
        ASSERT_EQ(h.type, RL_MSG_AUTH_CHALLENGE);
        ASSERT_TRUE(closed_within(fd, 3000));
        close(fd);
        fd = rl_test_raw_connect("127.0.0.1", cport);
        rl__net_auth none;
        rl_test_auth_client(&none, 1); /* a guess: another cluster's name */
        ASSERT_RC(rl_test_raw_handshake(fd, &none, RL_AUTH_CLIENT, 0, 3000), RL_E_INVALID_CLUSTER_ID);
        ASSERT_TRUE(closed_within(fd, 3000));
        close(fd);
    }
    /* The cluster file only: a client may commit, but no member's role and no admin request. */
    rl__net_auth client;
    ASSERT_OK(rl__auth_init(&client, g_c.key.name, strlen(g_c.key.name), NULL, 0));
    struct {
        uint16_t port;
        uint8_t role;
        uint32_t id;
        const char *what;
    } roles[] = {
        {0, RL_ROLE_STORAGE, 1, "the coordinator: HELLO as storage server 1 (REGISTER_STORAGE, PEEK, POP)"},
        {0, RL_ROLE_ADMIN, 0, "the coordinator: HELLO as an admin tool"},
        {1, RL_ROLE_STORAGE, 1, "storage 1: HELLO as storage server 1"},
        {1, RL_ROLE_ADMIN, 0, "storage 1: HELLO as an admin tool"},
    };
    for (size_t i = 0; i < sizeof roles / sizeof roles[0]; i++) {
        int fd = rl_test_raw_open("127.0.0.1", roles[i].port ? sport : cport, &client);
        send_hello(fd, roles[i].role, roles[i].id);
        rl__frame_header h;
        ASSERT_OK(rl_test_raw_recv_frame(fd, &h, pl, 65536, 3000));
        ASSERT_EQ(h.flags, RL_FRAME_REPLY | RL_FRAME_ERROR);
        ASSERT_OK(rl__msg_decode(h.type, h.flags, pl, h.payload_len, NULL, &rep, NULL));
        if (rep.u.error.code != RL_E_UNAUTHORIZED_ATTEMPT)
            fail_msg("%s: %s, expected unauthorized_attempt", roles[i].what, rl_error_name(rep.u.error.code));
        ASSERT_TRUE(closed_within(fd, 3000));
        close(fd);
        /* PEEK, POP, REGISTER_STORAGE after the refused HELLO are never served: the connection
         * is gone. A client HELLO, then the member requests: */
        fd = rl_test_raw_open("127.0.0.1", roles[i].port ? sport : cport, &client);
        send_hello(fd, RL_ROLE_CLIENT, 0);
        ASSERT_OK(rl_test_raw_recv_frame(fd, &h, pl, 65536, 3000));
        ASSERT_EQ(h.flags, RL_FRAME_REPLY);
        memset(&req, 0, sizeof req);
        req.type = RL_MSG_SET_DELAY;
        req.u.set_delay_req.delay_us = 2000000;
        ASSERT_RC(call(fd, 10, &req, &rep, pl), RL_E_UNAUTHORIZED_ATTEMPT);
        if (!roles[i].port) {
            memset(&req, 0, sizeof req);
            req.type = RL_MSG_SPLIT_SHARD;
            req.u.split_shard_req.key = (const uint8_t *)"m";
            req.u.split_shard_req.key_len = 1;
            ASSERT_RC(call(fd, 11, &req, &rep, pl), RL_E_UNAUTHORIZED_ATTEMPT);
            uint32_t team[] = {1};
            memset(&req, 0, sizeof req);
            req.type = RL_MSG_ASSIGN_SHARD;
            req.u.assign_shard_req.range = (rl__keyrange){(const uint8_t *)"a", 1, (const uint8_t *)"b", 1};
            req.u.assign_shard_req.team = team;
            req.u.assign_shard_req.n_team = 1;
            ASSERT_RC(call(fd, 12, &req, &rep, pl), RL_E_UNAUTHORIZED_ATTEMPT);
            memset(&req, 0, sizeof req);
            req.type = RL_MSG_PEEK;
            req.u.peek_req.storage_id = 1;
            ASSERT_NE(call(fd, 13, &req, &rep, pl), RL_OK); /* not a storage connection */
            memset(&req, 0, sizeof req);
            req.type = RL_MSG_POP;
            req.u.pop_req.storage_id = 1;
            req.u.pop_req.durable_version = UINT64_MAX / 2;
            ASSERT_NE(call(fd, 14, &req, &rep, pl), RL_OK);
        }
        close(fd);
    }
    /* Nothing changed: no delay, one shard on server 1, the cluster healthy; a client commits. */
    json_t *st = NULL;
    ASSERT_OK(rl__cluster_status(g_c.dir, 0, &st, &msg));
    ASSERT_TRUE(json_is_true(json_object_get(st, "ok")));
    ASSERT_EQ(json_integer_value(json_object_get(st, "delay_us")), 0);
    json_decref(st);
    rl_db *db = NULL;
    ASSERT_OK(rl_db_open(g_c.url, NULL, &db));
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(db, &t));
    ASSERT_OK(rl_txn_set(t, "k", 1, "v", 1));
    rl_future *f = rl_txn_commit(t);
    ASSERT_OK(rl_future_wait(f));
    rl_future_free(f);
    rl_txn_free(t);
    rl_db_close(db);
    ASSERT_TRUE(net_stat(cport, &g_c.key.auth, "handshakes_failed") >= 1);
    free(pl);
    rl_test_cluster_stop(&g_c);
}

/* ---- 1.4–1.6: a coordinator with small limits --------------------------------------------------- */

/* access-1.4: 12 connections declare a 64 MiB frame before the handshake and send 4 MiB of it. */
TEST(access_1_4_no_buffering_before_the_handshake) {
    coord c;
    coord_start(&c, "");
    rl__net_auth auth;
    rl_test_auth_member(&auth, 0);
    (void)net_stat(c.port, &auth, "accepted_now"); /* it serves: started, not starting */
    long before = rss_kib(c.pid);
    int fds[12];
    uint8_t *junk = calloc(1, 1 << 20);
    for (int i = 0; i < 12; i++) {
        fds[i] = rl_test_raw_connect("127.0.0.1", c.port);
        uint8_t h[RL_FRAME_HEADER_LEN];
        rl__frame_header fh = {.payload_len = 64u << 20, .type = RL_MSG_HELLO, .flags = 0, .id = 1};
        rl__frame_header_encode(&fh, h);
        (void)rl_test_raw_send(fds[i], h, sizeof h);
        for (int k = 0; k < 4; k++) (void)rl_test_raw_send(fds[i], junk, 1 << 20);
    }
    for (int i = 0; i < 12; i++) {
        if (!closed_within(fds[i], 3000)) fail_msg("connection %d declaring 64 MiB is still open", i);
        close(fds[i]);
    }
    long after = rss_kib(c.pid);
    printf("coordinator RSS %ld KiB before, %ld KiB after 12 connections declaring 64 MiB\n", before, after);
    ASSERT_TRUE(after - before < 16 * 1024);
    ASSERT_TRUE(net_stat(c.port, &auth, "handshakes_failed") >= 12);
    free(junk);
    coord_stop(&c);
}

/* access-1.5: the handshake timeout, the handshake limit (the oldest goes), the connection
 * limit (the newest is refused); a good client is served throughout. */
TEST(access_1_5_handshake_limits) {
    coord c;
    coord_start(&c, "--handshake-timeout-ms 600 --max-handshakes 4 --max-connections 12");
    rl__net_auth auth;
    rl_test_auth_member(&auth, 0);
    /* One byte every 100 ms (a HELLO-sized AUTH that never ends): closed by the timeout. */
    int fd = rl_test_raw_connect("127.0.0.1", c.port);
    double t0 = now_s();
    uint8_t h[RL_FRAME_HEADER_LEN];
    rl__frame_header fh = {.payload_len = 57, .type = RL_MSG_AUTH, .flags = 0, .id = 0};
    rl__frame_header_encode(&fh, h);
    int closed = 0;
    for (int i = 0; i < 40 && !closed; i++) {
        (void)rl_test_raw_send(fd, i < (int)sizeof h ? h + i : (const uint8_t *)"x", 1);
        closed = closed_within(fd, 100);
    }
    double took = now_s() - t0;
    printf("a trickling handshake was closed after %.2f s\n", took);
    ASSERT_TRUE(closed);
    ASSERT_TRUE(took >= 0.5 && took < 3.0);
    close(fd);
    ASSERT_TRUE(net_stat(c.port, &auth, "handshakes_timed_out") >= 1);
    /* Five silent connections with a limit of four: the oldest is evicted (not timed out). The
     * listener's accept queue is FIFO and connect() returns once a connection is in it, so they are
     * accepted in this order. */
    long long evicted0 = net_stat(c.port, &auth, "handshakes_evicted");
    int silent[5];
    for (int i = 0; i < 5; i++) silent[i] = rl_test_raw_connect("127.0.0.1", c.port);
    ASSERT_TRUE(wait_net_stat(c.port, &auth, "handshakes_evicted", evicted0 + 1));
    ASSERT_TRUE(closed_within(silent[0], 3000));
    /* A good client still gets through (it evicts another silent one). */
    int good = rl_test_raw_open("127.0.0.1", c.port, &auth);
    for (int i = 0; i < 5; i++) close(silent[i]);
    ASSERT_TRUE(net_stat(c.port, &auth, "handshakes_evicted") >= 2);
    /* Twelve connections at most: 11 more authenticated ones fill it, the 13th is closed at once
     * (before any challenge), and the first good one still works. First the closes above reach the
     * server: the good one and net_stat's own are open. */
    ASSERT_TRUE(wait_net_stat_at_most(c.port, &auth, "accepted_now", 2));
    int held[11];
    for (int i = 0; i < 11; i++) held[i] = rl_test_raw_open("127.0.0.1", c.port, &auth);
    int over = rl_test_raw_connect("127.0.0.1", c.port);
    rl__frame_header rh;
    uint8_t pl[256];
    ASSERT_RC(rl_test_raw_recv_frame(over, &rh, pl, sizeof pl, 2000), RL_E_CONNECTION_FAILED);
    close(over);
    send_hello(good, RL_ROLE_CLIENT, 0);
    ASSERT_OK(rl_test_raw_recv_frame(good, &rh, pl, sizeof pl, 3000));
    ASSERT_EQ(rh.type, RL_MSG_HELLO);
    for (int i = 0; i < 11; i++) close(held[i]);
    close(good);
    ASSERT_TRUE(wait_net_stat(c.port, &auth, "conns_refused", 1));
    coord_stop(&c);
}

/* access-1.6: a client that does not read. */
TEST(access_1_6_reader_that_does_not_read) {
    coord c;
    coord_start(&c, "--max-queued-bytes 1048576");
    rl__net_auth auth;
    rl_test_auth_member(&auth, 0);
    int fd = rl_test_raw_open("127.0.0.1", c.port, &auth);
    int fl = fcntl(fd, F_GETFL);
    ASSERT_EQ(fcntl(fd, F_SETFL, fl | O_NONBLOCK), 0);
    /* 8,000 PINGs of 4,000 bytes: 32 MB of replies, 32 times the limit. */
    enum { N = 8000, PL = 4000 };
    rl_buf all;
    rl__buf_init(&all);
    send_hello(fd, RL_ROLE_CLIENT, 0);
    char *payload = malloc(PL);
    memset(payload, 'p', PL);
    for (int i = 0; i < N; i++) {
        rl__msg m;
        memset(&m, 0, sizeof m);
        m.type = RL_MSG_PING;
        m.u.ping_req.payload = (const uint8_t *)payload;
        m.u.ping_req.payload_len = PL;
        ASSERT_OK(rl__msg_frame_encode(&all, 100 + (uint64_t)i, &m, NULL));
    }
    long before = rss_kib(c.pid);
    size_t off = 0;
    long long paused = 0;
    double t0 = now_s();
    while (off < all.len) { /* write without reading until the server stops taking requests */
        ssize_t w = send(fd, all.data + off, all.len - off, MSG_NOSIGNAL);
        if (w > 0) {
            off += (size_t)w;
            continue;
        }
        ASSERT_TRUE(w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
        /* The socket is full: done once the server says it paused reading this connection
         * (another client is served meanwhile), 30 s at most. */
        if ((paused = net_stat(c.port, &auth, "reads_paused")) >= 1) break;
        if (now_s() - t0 > 30) break;
        usleep(10000);
    }
    long during = rss_kib(c.pid);
    printf("sent %zu of %zu request bytes before the server stopped reading; RSS %ld -> %ld KiB; reads_paused %lld\n",
           off, all.len, before, during, paused);
    ASSERT_TRUE(off < all.len);
    ASSERT_TRUE(paused >= 1);
    ASSERT_TRUE(during - before < 16 * 1024);
    /* Now read: every request gets its reply, in any order (the rest is sent as we go). */
    uint8_t *buf = malloc(1 << 20);
    size_t have = 0;
    int replies = 0;
    t0 = now_s();
    while (replies < N + 1 && now_s() - t0 < 30) {
        if (off < all.len) {
            ssize_t w = send(fd, all.data + off, all.len - off, MSG_NOSIGNAL);
            if (w > 0) off += (size_t)w;
        }
        struct pollfd pf = {fd, POLLIN, 0};
        if (poll(&pf, 1, 10) <= 0) continue;
        ssize_t r = recv(fd, buf + have, (1 << 20) - have, 0);
        if (r <= 0) continue;
        have += (size_t)r;
        size_t used = 0;
        while (have - used >= RL_FRAME_HEADER_LEN) {
            rl__frame_header h;
            ASSERT_EQ(rl__frame_header_decode(buf + used, &h), 0);
            if (have - used < RL_FRAME_HEADER_LEN + h.payload_len) break;
            ASSERT_EQ(h.flags, RL_FRAME_REPLY);
            replies++;
            used += RL_FRAME_HEADER_LEN + h.payload_len;
        }
        memmove(buf, buf + used, have - used);
        have -= used;
    }
    printf("%d replies (the HELLO's and %d PINGs') in %.2f s\n", replies, N, now_s() - t0);
    ASSERT_EQ(replies, N + 1);
    free(buf);
    free(payload);
    rl__buf_release(&all);
    close(fd);
    coord_stop(&c);
}

RL_TEST_MAIN(T(access_1_1_private_files), T(access_1_2_wrong_cluster_id), T(access_1_3_roles_need_the_member_key),
             T(access_1_4_no_buffering_before_the_handshake), T(access_1_5_handshake_limits),
             T(access_1_6_reader_that_does_not_read))
