/* cluster_procs.h — real rlkvd processes for the cluster client's integration tests
 * (test_cluster_client*.c, slow_cluster_bench.c): a coordinator and N storage servers started
 * from RL_BIN_DIR "/rlkvd" with --init, port 0 and port files, in a fresh temporary directory,
 * and a cluster file for them. Header-only (static functions), like kvtest.h.
 *
 * No process is left behind, whatever happens to the test:
 *   1. cp_stop stops every process by its recorded pid (SIGTERM, then SIGKILL after 5 s);
 *   2. an atexit handler does the same for clusters still running (a failed cmocka assertion
 *      returns through the runner, and exit() runs it);
 *   3. SIGTERM/SIGINT/SIGABRT/SIGSEGV handlers SIGKILL the recorded pids and re-raise;
 *   4. every child asks the kernel to SIGKILL it when the test process dies
 *      (PR_SET_PDEATHSIG), so even a SIGKILLed test (ctest's timeout) leaves nothing.
 * Processes are only ever signalled by the pids recorded here. Start clusters from the main
 * thread (the death signal follows the thread that forked), and declare the cp_cluster static
 * (the exit hook reads it after a failed assertion has left the test function).
 */
#ifndef RL_TEST_CLUSTER_PROCS_H
#define RL_TEST_CLUSTER_PROCS_H

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/buf.h"
#include "net_fixture.h"
#include "reclayer/kv.h"
#include "test.h"
#include "tuple/tuple.h"

#define CP_MAX 8

typedef struct {
    char dir[512];      /* the cluster's directory */
    char file[600];     /* DIR/reclayer.cluster */
    char url[620];      /* cluster:FILE */
    char key_file[600]; /* DIR/cluster.key: the test cluster's (tests/net_fixture.h) */
    int n_storage;
    int no_sync;
    long long window_versions; /* the servers' --window-versions (0: their default) */
    pid_t pid[CP_MAX];         /* [0] coordinator, [1..n] storage servers; 0: not running */
    int port[CP_MAX];
} cp_cluster;

#define CP_LIVE 16
static volatile pid_t cp_all_pids[CP_LIVE * CP_MAX]; /* for the signal handler */
static cp_cluster *cp_live[CP_LIVE];                 /* clusters running (static storage: tests declare theirs
                                       * static, so a failed assertion leaves them valid) */
static int cp_hooks_set;

static inline void cp_refresh_pids(void) {
    for (int c = 0; c < CP_LIVE; c++)
        for (int i = 0; i < CP_MAX; i++) cp_all_pids[c * CP_MAX + i] = cp_live[c] ? cp_live[c]->pid[i] : 0;
}

static inline void cp_on_signal(int sig) {
    for (int i = 0; i < CP_LIVE * CP_MAX; i++)
        if (cp_all_pids[i] > 0) kill(cp_all_pids[i], SIGKILL);
    signal(sig, SIG_DFL);
    raise(sig);
}

static inline double cp_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Stop process i of c: SIGTERM (or sig), wait up to 5 s, then SIGKILL. */
static inline void cp_kill(cp_cluster *c, int i, int sig) {
    pid_t p = c->pid[i];
    if (p <= 0) return;
    kill(p, sig);
    double t0 = cp_now();
    for (;;) {
        int st;
        pid_t r = waitpid(p, &st, WNOHANG);
        if (r == p || (r < 0 && errno == ECHILD)) break;
        if (cp_now() - t0 > 5) {
            kill(p, SIGKILL);
            waitpid(p, &st, 0);
            break;
        }
        usleep(2000);
    }
    c->pid[i] = 0;
    cp_refresh_pids();
}

static inline void cp_stop(cp_cluster *c) {
    if (!c) return;
    for (int i = c->n_storage; i >= 0; i--) cp_kill(c, i, SIGTERM);
    for (int k = 0; k < CP_LIVE; k++)
        if (cp_live[k] == c) cp_live[k] = NULL;
    cp_refresh_pids();
    if (c->dir[0] && !getenv("RL_TEST_KEEP")) rl_test_rmtree(c->dir);
    c->dir[0] = 0;
}

static inline void cp_atexit(void) {
    for (int k = 0; k < CP_LIVE; k++)
        if (cp_live[k]) cp_stop(cp_live[k]);
}

static inline void cp_hooks(void) {
    if (cp_hooks_set) return;
    cp_hooks_set = 1;
    atexit(cp_atexit);
    int sigs[] = {SIGTERM, SIGINT, SIGABRT, SIGSEGV, SIGHUP};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) signal(sigs[i], cp_on_signal);
}

/* Read DIR/NAME.port (written atomically by the server once it listens); 0 until it exists. */
static inline int cp_read_port(const cp_cluster *c, const char *name) {
    char path[700], buf[32];
    snprintf(path, sizeof path, "%s/%s.port", c->dir, name);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    int port = 0;
    if (fgets(buf, sizeof buf, f)) port = atoi(buf);
    fclose(f);
    return port;
}

/* Start process i (0 coordinator, else storage i) listening on port (0: any); waits for its port
 * file (10 s). */
static inline void cp_spawn(cp_cluster *c, int i, int port) {
    char name[32], sub[700], portfile[700], logf[700], listen[64], idbuf[16], coord[64], init[700];
    snprintf(name, sizeof name, i == 0 ? "coordinator" : "storage-%d", i);
    snprintf(sub, sizeof sub, "%s/%s", c->dir, name);
    snprintf(portfile, sizeof portfile, "%s/%s.port", c->dir, name);
    snprintf(logf, sizeof logf, "%s/%s.log", c->dir, name);
    snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
    snprintf(idbuf, sizeof idbuf, "%d", i);
    snprintf(coord, sizeof coord, "127.0.0.1:%d", c->port[0]);
    snprintf(init, sizeof init, "%s/init.json", c->dir);
    mkdir(sub, 0755);
    unlink(portfile);
    char bin[600];
    /* RL_TEST_RLKVD: another rlkvd to start (a wrapper running it under a profiler, say). */
    const char *alt = getenv("RL_TEST_RLKVD");
    if (alt && *alt) snprintf(bin, sizeof bin, "%s", alt);
    else snprintf(bin, sizeof bin, "%s/rlkvd", RL_BIN_DIR);
    const char *argv[24];
    int n = 0;
    argv[n++] = bin;
    argv[n++] = i == 0 ? "coordinator" : "storage";
    argv[n++] = "--dir";
    argv[n++] = sub;
    if (i == 0) {
        argv[n++] = "--init";
        argv[n++] = init;
    } else {
        argv[n++] = "--id";
        argv[n++] = idbuf;
        argv[n++] = "--coordinator";
        argv[n++] = coord;
    }
    argv[n++] = "--listen";
    argv[n++] = listen;
    argv[n++] = "--port-file";
    argv[n++] = portfile;
    argv[n++] = "--key-file";
    argv[n++] = c->key_file;
    if (c->no_sync) argv[n++] = "--no-sync";
    char window[32];
    if (c->window_versions) {
        snprintf(window, sizeof window, "%lld", c->window_versions);
        argv[n++] = "--window-versions";
        argv[n++] = window;
    }
    argv[n] = NULL;
    fflush(stdout);
    fflush(stderr);
    pid_t p = fork();
    if (p == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int in = open("/dev/null", O_RDONLY), out = open(logf, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (in >= 0) dup2(in, 0);
        if (out >= 0) dup2(out, 1), dup2(out, 2);
        setpgid(0, 0);
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    ASSERT_TRUE(p > 0);
    c->pid[i] = p;
    cp_refresh_pids();
    double t0 = cp_now();
    int got = 0;
    while (!(got = cp_read_port(c, name)) && cp_now() - t0 < 10) {
        int st;
        if (waitpid(p, &st, WNOHANG) == p) {
            c->pid[i] = 0;
            fail_msg("%s exited before listening (see %s)", name, logf);
        }
        usleep(5000);
    }
    if (!got) fail_msg("%s did not write its port file in 10 s (see %s)", name, logf);
    c->port[i] = got;
}

/* Start a cluster: n_storage servers; the user keyspace split at the n_split one-byte-or-more
 * keys of split (sorted), shard k on storage server (k % n_storage) + 1; the servers' MVCC window
 * window_versions (0: their default). Waits until a read of every shard's first key works
 * through the client (15 s). */
static inline void cp_start_window(cp_cluster *c, int n_storage, const char *const *split, int n_split, int no_sync,
                                   long long window_versions) {
    cp_hooks();
    memset(c, 0, sizeof *c);
    c->n_storage = n_storage;
    c->no_sync = no_sync;
    c->window_versions = window_versions;
    char *d = rl_test_tmpdir("clclient");
    snprintf(c->dir, sizeof c->dir, "%s", d);
    free(d);
    int slot = -1;
    for (int k = 0; k < CP_LIVE && slot < 0; k++)
        if (!cp_live[k] || cp_live[k] == c) slot = k;
    if (slot < 0) fail_msg("more than %d test clusters at once", CP_LIVE);
    cp_live[slot] = c;
    snprintf(c->key_file, sizeof c->key_file, "%s/cluster.key", c->dir);
    rl_test_write_keyfile(c->key_file);
    char path[700];
    snprintf(path, sizeof path, "%s/init.json", c->dir);
    FILE *f = fopen(path, "w");
    ASSERT_NOT_NULL(f);
    fprintf(f, "{\"storage\": [");
    for (int i = 1; i <= n_storage; i++) fprintf(f, "%s%d", i > 1 ? ", " : "", i);
    fprintf(f, "], \"shards\": [");
    for (int k = 0; k <= n_split; k++) {
        fprintf(f, "%s{\"begin\": \"", k ? ", " : "");
        if (k > 0)
            for (const char *p = split[k - 1]; *p; p++) fprintf(f, "%02x", (unsigned char)*p);
        fprintf(f, "\", \"end\": \"");
        if (k < n_split)
            for (const char *p = split[k]; *p; p++) fprintf(f, "%02x", (unsigned char)*p);
        else fprintf(f, "ff");
        fprintf(f, "\", \"team\": [%d]}", k % n_storage + 1);
    }
    fprintf(f, "]}\n");
    fclose(f);
    cp_spawn(c, 0, 0);
    for (int i = 1; i <= n_storage; i++) cp_spawn(c, i, 0);
    snprintf(c->file, sizeof c->file, "%s/reclayer.cluster", c->dir);
    snprintf(c->url, sizeof c->url, "cluster:%s", c->file);
    f = fopen(c->file, "w");
    ASSERT_NOT_NULL(f);
    fprintf(f, "# test cluster\n%s@127.0.0.1:%d\n", rl_test_cluster_name(0), c->port[0]);
    fclose(f);
    /* Ready when every shard answers a read. */
    double t0 = cp_now();
    rl_db *db = NULL;
    int rc;
    while ((rc = rl_db_open(c->url, NULL, &db)) != RL_OK && cp_now() - t0 < 15) usleep(20000);
    if (rc) fail_msg("open %s: %s %s", c->url, rl_error_name(rc), rl_last_error_detail());
    for (int k = 0; k <= n_split; k++) {
        const char *key = k ? split[k - 1] : "";
        for (;;) {
            rl_txn *t;
            ASSERT_OK(rl_txn_begin(db, &t));
            rl_future *fu = rl_txn_get(t, key, strlen(key), 0);
            rc = rl_future_wait(fu);
            rl_future_free(fu);
            rl_txn_free(t);
            if (rc == RL_OK) break;
            if (cp_now() - t0 > 15) fail_msg("shard %d never answered: %s", k, rl_error_name(rc));
            usleep(20000);
        }
    }
    rl_db_close(db);
}

/* cp_start_window at the servers' default window. */
static inline void cp_start(cp_cluster *c, int n_storage, const char *const *split, int n_split, int no_sync) {
    cp_start_window(c, n_storage, split, n_split, no_sync, 0);
}

/* Restart process i on the port it had (so the cluster file and the map stay valid). */
static inline void cp_restart(cp_cluster *c, int i) {
    if (c->pid[i]) cp_kill(c, i, SIGTERM);
    cp_spawn(c, i, c->port[i]);
}

/* cp_mapped_setup — the mapped read of the Orders-like data the cluster client tests load: index
 * entries (prefix..., idx, ...) whose records are (prefix..., rec, id, ...), the id the key_pos-th
 * element of the entry (0-based). Initialises and fills mapper = pack(prefix..., rec,
 * "{K[key_pos]}", "{...}") and the range b = pack(prefix..., idx) .. e = b + 0xff. prefix: one
 * tuple element put first, or NULL. The caller releases the three buffers. */
static inline void cp_mapped_setup(const char *prefix, const char *rec, const char *idx, int key_pos, rl_buf *mapper,
                                   rl_buf *b, rl_buf *e) {
    char k[16];
    snprintf(k, sizeof k, "{K[%d]}", key_pos);
    rl__buf_init(mapper);
    rl__buf_init(b);
    rl__buf_init(e);
    rl__tuple_packer pk;
    rl__tuple_packer_init(&pk, mapper);
    if (prefix) rl__tuple_pack_string(&pk, prefix, strlen(prefix));
    rl__tuple_pack_string(&pk, rec, strlen(rec));
    rl__tuple_pack_string(&pk, k, strlen(k));
    rl__tuple_pack_string(&pk, "{...}", 5);
    rl__tuple_packer_init(&pk, b);
    if (prefix) rl__tuple_pack_string(&pk, prefix, strlen(prefix));
    rl__tuple_pack_string(&pk, idx, strlen(idx));
    rl__buf_append(e, b->data, b->len);
    rl__buf_append_byte(e, 0xff);
    ASSERT_OK(rl__buf_error(mapper));
    ASSERT_OK(rl__buf_error(b));
    ASSERT_OK(rl__buf_error(e));
}

#endif
