/* test_storage_server_proc.c — the real `rlkvd storage` process (RL_BIN_DIR/rlkvd), driven by a
 * fake coordinator in the test that speaks the real protocol over a real socket (ss_test.h):
 * its command line (usage errors exit 2), the port file, a clean stop on SIGTERM (exit 0), and
 * kill -9 rounds: the coordinator hands versions to the server (PEEK replies) and notes every POP;
 * the test kills the server with SIGKILL at a random moment (by its pid, which it started) and
 * restarts it on the same directory; the server must register again with a durable version no
 * older than anything it popped, catch up from there, and serve every version exactly as the
 * model says (no version lost, none applied twice: the writes are ADDs).
 *
 * Test ids: ssp-1.x. Seeded (the seed is printed; RL_SEED=N replays).
 */
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "base/bytes.h"
#include "unit/server/ss_test.h"

/* ---- the process ---- */

typedef struct {
    pid_t pid;
    char dir[512], port_file[600], log[600];
    uint16_t port;
} proc;

static void proc_start(proc *p, const char *dir, uint32_t id, uint16_t coord_port) {
    snprintf(p->dir, sizeof p->dir, "%s/data", dir);
    snprintf(p->port_file, sizeof p->port_file, "%s/port", dir);
    snprintf(p->log, sizeof p->log, "%s/storage.log", dir);
    unlink(p->port_file);
    char idbuf[16], coord[32], key_file[4200];
    snprintf(key_file, sizeof key_file, "%s/cluster.key", dir);
    if (access(key_file, F_OK) != 0) rl_test_write_keyfile(key_file);
    snprintf(idbuf, sizeof idbuf, "%u", id);
    snprintf(coord, sizeof coord, "127.0.0.1:%u", coord_port);
    pid_t pid = fork();
    ASSERT_TRUE(pid >= 0);
    if (pid == 0) {
        int fd = open(p->log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) dup2(fd, 2);
        int nul = open("/dev/null", O_RDWR);
        if (nul >= 0) dup2(nul, 0), dup2(nul, 1);
        execl(rl_test_bin("rlkvd"), "rlkvd", "storage", "--dir", p->dir, "--id", idbuf, "--coordinator", coord,
              "--port-file", p->port_file, "--key-file", key_file, (char *)NULL);
        _exit(127);
    }
    p->pid = pid;
    /* The port file appears once it listens. */
    uint64_t end = sst_now_ms() + SS_T_WAIT_MS;
    for (;;) {
        FILE *f = fopen(p->port_file, "r");
        unsigned port = 0;
        if (f) {
            int ok = fscanf(f, "%u", &port) == 1;
            fclose(f);
            if (ok && port) {
                p->port = (uint16_t)port;
                return;
            }
        }
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) fail_msg("rlkvd storage exited early (see %s)", p->log);
        if (sst_now_ms() > end) fail_msg("no port file from rlkvd storage (see %s)", p->log);
        rl__clock_sleep_us(5000);
    }
}

/* Wait for the process to end within timeout_ms; its exit status (-1: still running). */
static int proc_wait(proc *p, int timeout_ms) {
    uint64_t end = sst_now_ms() + (uint64_t)timeout_ms;
    for (;;) {
        int st;
        pid_t r = waitpid(p->pid, &st, WNOHANG);
        if (r == p->pid) {
            p->pid = 0;
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        }
        if (sst_now_ms() > end) return -1;
        rl__clock_sleep_us(2000);
    }
}

static void proc_kill9(proc *p) {
    if (p->pid <= 0) return;
    kill(p->pid, SIGKILL);
    ASSERT_EQ(proc_wait(p, SS_T_WAIT_MS), 128 + SIGKILL);
}

/* ---- the model: K counters, each version ADDs to a few of them ---- */

#define NKEYS 16
#define MAXV 400

typedef struct {
    rl__version v;
    int n;
    int key[3];
    uint8_t add[3];
} mver;

static mver g_vers[MAXV];
static int g_nvers;
static uint8_t g_keys[NKEYS][4];
static uint8_t g_one[3][1];

/* The value of key k at version v by the model (-1: absent). */
static int model_value(int k, rl__version v) {
    int sum = -1;
    for (int i = 0; i < g_nvers && g_vers[i].v <= v; i++)
        for (int j = 0; j < g_vers[i].n; j++)
            if (g_vers[i].key[j] == k) sum = (sum < 0 ? 0 : sum) + g_vers[i].add[j];
    return sum < 0 ? -1 : sum % 256;
}

/* Answer the PEEK in fc->m with the model's versions after its after_version (at most `max`),
 * end_version = the newest of them, or `end` when there are none left. */
static void serve_peek(sst_fc *fc, int max, rl__version end) {
    static rl__mutation muts[MAXV][3];
    static rl__msg_peek_version pv[MAXV];
    rl__version after = fc->m.u.peek_req.after_version;
    int n = 0;
    rl__version last = after;
    for (int i = 0; i < g_nvers && n < max; i++) {
        if (g_vers[i].v <= after) continue;
        for (int j = 0; j < g_vers[i].n; j++)
            muts[n][j] = (rl__mutation){RL_MUT_ADD, g_keys[g_vers[i].key[j]], 4, &g_vers[i].add[j], 1};
        pv[n] = (rl__msg_peek_version){g_vers[i].v, muts[n], (uint32_t)g_vers[i].n};
        last = g_vers[i].v;
        n++;
    }
    if (n == 0 && end > after) last = end;
    rl__msg rep;
    memset(&rep, 0, sizeof rep);
    rep.u.peek_reply.end_version = last;
    rep.u.peek_reply.versions = pv;
    rep.u.peek_reply.n_versions = (uint32_t)n;
    sst_fc_reply(fc, RL_MSG_PEEK, fc->h.id, &rep);
}

static const rl__keyrange ALL[] = {{(const uint8_t *)"", 0, (const uint8_t *)"\xff", 1}};

/* Every version's reads against the model. */
static void check_all(uint16_t port, rl__version known) {
    sst_client c;
    sst_client_open(&c, port, RL_ROLE_CLIENT, 0);
    rl_buf val;
    rl__buf_init(&val);
    for (int i = 0; i < g_nvers && g_vers[i].v <= known; i++)
        for (int k = 0; k < NKEYS; k++) {
            int present = 0;
            int rc = sst_get(&c, g_vers[i].v, (const char *)g_keys[k], 4, &present, &val);
            if (rc) fail_msg("GET k%d at %llu: %s", k, (unsigned long long)g_vers[i].v, rl_error_name(rc));
            int want = model_value(k, g_vers[i].v);
            int got = present ? (val.len == 1 ? val.data[0] : 1000 + (int)val.len) : -1;
            if (got != want)
                fail_msg("k%d at version %llu: got %d, the model says %d", k, (unsigned long long)g_vers[i].v, got,
                         want);
        }
    rl__buf_release(&val);
    sst_client_close(&c);
}

/* ssp-1.1: the command line: usage errors exit 2 without starting; --help exits 0. */
TEST(ssp_1_1_command_line) {
    char *out = NULL, *err = NULL;
    ASSERT_EQ(rl_test_run("rlkvd", &out, &err, "storage --help"), 0);
    ASSERT_NOT_NULL(strstr(out, "--coordinator"));
    free(out), free(err);
    const char *bad[] = {
        "storage",                                               /* nothing */
        "storage --dir /tmp/x --id 1",                           /* no coordinator */
        "storage --dir /tmp/x --id 0 --coordinator 127.0.0.1:1", /* id 0 */
        "storage --dir /tmp/x --id 1 --coordinator 127.0.0.1",   /* no port */
        "storage --dir /tmp/x --id 1 --coordinator 127.0.0.1:0", /* port 0 */
        "storage --dir /tmp/x --id 1 --coordinator localhost:5", /* not dotted IPv4 */
        "storage --dir /tmp/x --id 1 --coordinator 127.0.0.1:5 --listen 127.0.0.1:70000",
        "storage --dir /tmp/x --id 1 --coordinator 127.0.0.1:5 --window-versions 5",
        "storage --dir /tmp/x --id 1 --coordinator 127.0.0.1:5 --frob",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ASSERT_EQ(rl_test_run("rlkvd", &out, &err, "%s", bad[i]), 2);
        ASSERT_TRUE(strlen(err) > 0);
        free(out), free(err);
    }
    /* Listening outside 127.0.0.0/8 is refused (exit 1, reason logged). */
    char *dir = rl_test_tmpdir("ssp");
    char key_file[4200];
    snprintf(key_file, sizeof key_file, "%s/cluster.key", dir);
    rl_test_write_keyfile(key_file);
    ASSERT_EQ(rl_test_run("rlkvd", &out, &err,
                          "storage --dir %s/d --id 1 --coordinator 127.0.0.1:5 --key-file %s --listen 10.0.0.1:0", dir,
                          key_file),
              1);
    ASSERT_NOT_NULL(strstr(err, "listen"));
    free(out), free(err);
    /* The key file: required (usage), missing (1), open to others (1, the message says chmod). */
    ASSERT_EQ(rl_test_run("rlkvd", &out, &err, "storage --dir %s/d --id 1 --coordinator 127.0.0.1:5", dir), 2);
    ASSERT_NOT_NULL(strstr(err, "--key-file"));
    free(out), free(err);
    ASSERT_EQ(rl_test_run("rlkvd", &out, &err,
                          "storage --dir %s/d --id 1 --coordinator 127.0.0.1:5 --key-file %s/nonexistent", dir, dir),
              1);
    ASSERT_NOT_NULL(strstr(err, "file_not_found"));
    free(out), free(err);
    ASSERT_EQ(chmod(key_file, 0644), 0);
    ASSERT_EQ(rl_test_run("rlkvd", &out, &err, "storage --dir %s/d --id 1 --coordinator 127.0.0.1:5 --key-file %s", dir,
                          key_file),
              1);
    ASSERT_NOT_NULL(strstr(err, "chmod 600"));
    free(out), free(err);
    rl_test_rmtree(dir);
    free(dir);
}

/* ssp-1.2: SIGTERM stops the server cleanly (exit 0), also while it is connected and serving. */
TEST(ssp_1_2_sigterm) {
    char *dir = rl_test_tmpdir("ssp");
    sst_fc fc;
    sst_fc_init(&fc);
    proc p;
    proc_start(&p, dir, 1, fc.port);
    sst_fc_accept_register(&fc, 0, ALL, 1);
    g_nvers = 0;
    serve_peek(&fc, 10, 5);
    ASSERT_EQ(sst_fc_wait(&fc, RL_MSG_PEEK, SS_T_WAIT_MS), 1);
    sst_client c;
    sst_client_open(&c, p.port, RL_ROLE_CLIENT, 0);
    kill(p.pid, SIGTERM);
    ASSERT_EQ(proc_wait(&p, SS_T_WAIT_MS), 0);
    sst_client_close(&c);
    sst_fc_release(&fc);
    rl_test_rmtree(dir);
    free(dir);
}

/* ssp-1.3: kill -9 rounds (see the file header). */
TEST(ssp_1_3_kill9_rounds) {
    uint64_t seed = rl_test_seed();
    char *dir = rl_test_tmpdir("ssp");
    for (int k = 0; k < NKEYS; k++) {
        g_keys[k][0] = 'k', g_keys[k][1] = (uint8_t)('a' + k), g_keys[k][2] = '/', g_keys[k][3] = 'x';
    }
    (void)g_one;
    g_nvers = 0;
    rl__version v = 0, popped = 0;
    sst_fc fc;
    sst_fc_init(&fc);
    proc p;
    proc_start(&p, dir, 1, fc.port);
    sst_fc_accept_register(&fc, 0, ALL, 1);
    const int rounds = 6;
    for (int round = 0; round < rounds; round++) {
        /* New versions (with gaps: some versions carry nothing for this server). */
        int add = 20 + (int)rl_test_rand_below(&seed, 30);
        for (int i = 0; i < add && g_nvers < MAXV; i++) {
            v += 1 + rl_test_rand_below(&seed, 1000);
            mver *mv = &g_vers[g_nvers++];
            mv->v = v;
            mv->n = 1 + (int)rl_test_rand_below(&seed, 3);
            for (int j = 0; j < mv->n; j++) {
                mv->key[j] = (int)rl_test_rand_below(&seed, NKEYS);
                mv->add[j] = (uint8_t)(1 + rl_test_rand_below(&seed, 200));
            }
        }
        rl__version end = v + rl_test_rand_below(&seed, 500); /* trailing empty versions */
        /* Serve them in a few PEEK replies; POPs are noted as they come. */
        int kill_after = (int)rl_test_rand_below(&seed, 4); /* replies before the kill */
        int replies = 0;
        for (;;) {
            if (replies == kill_after) break;
            serve_peek(&fc, 1 + (int)rl_test_rand_below(&seed, 20), end);
            replies++;
            int r = sst_fc_wait(&fc, RL_MSG_PEEK, SS_T_WAIT_MS);
            ASSERT_EQ(r, 1);
            if (fc.m.u.peek_req.after_version >= end) break;
        }
        if (fc.last_pop > popped) popped = fc.last_pop;
        /* Sometimes let a sync happen first, sometimes kill right away. */
        if (rl_test_rand_below(&seed, 2)) rl__clock_sleep_us(rl_test_rand_below(&seed, 30000));
        proc_kill9(&p);
        sst_fc_drop(&fc);
        proc_start(&p, dir, 1, fc.port);
        sst_fc_accept_register(&fc, 0, ALL, 1);
        /* Everything it popped must have survived the kill. */
        if (fc.reg_durable < popped)
            fail_msg("round %d: registered with durable %llu after popping %llu", round,
                     (unsigned long long)fc.reg_durable, (unsigned long long)popped);
        ASSERT_EQ(fc.m.u.peek_req.after_version, fc.reg_durable);
        /* Catch up to the end, then every version must read as the model says. */
        while (fc.m.u.peek_req.after_version < end) {
            serve_peek(&fc, 50, end);
            ASSERT_EQ(sst_fc_wait(&fc, RL_MSG_PEEK, SS_T_WAIT_MS), 1);
        }
        ASSERT_EQ(fc.m.u.peek_req.after_version, end);
        check_all(p.port, end);
        if (fc.last_pop > popped) popped = fc.last_pop;
        v = end;
    }
    kill(p.pid, SIGTERM);
    ASSERT_EQ(proc_wait(&p, SS_T_WAIT_MS), 0);
    sst_fc_release(&fc);
    rl_test_rmtree(dir);
    free(dir);
}

RL_TEST_MAIN(T(ssp_1_1_command_line), T(ssp_1_2_sigterm), T(ssp_1_3_kill9_rounds))
