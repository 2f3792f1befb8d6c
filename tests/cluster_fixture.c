/* cluster_fixture.c — the test cluster fixture (see cluster_fixture.h for the guarantees). */
#include "cluster_fixture.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "reclayer/kv.h"
#include "test.h"

#define SLOTS 8
#define PIDS (RL_CLUSTER_MAX_STORAGE + 1)

/* The running clusters, for atexit and the signal handler: the fixture's own copies (a test that
 * fails an assertion leaves through a longjmp, and its rl_test_cluster on the stack is gone by
 * exit time). A copy owns the guardian's pipe and pid and a copy of the directory path. pids[] is
 * what the handler reads: plain ints written only by the main thread outside the handler. */
static rl_test_cluster *g_slots[SLOTS];
static volatile sig_atomic_t g_pids[SLOTS][PIDS];
static int g_hooks_installed;
static pid_t g_owner; /* the process that started the clusters: forked children never stop them */

static void refresh_pids(rl_test_cluster *c) {
    if (c->slot < 0) return;
    for (int i = 0; i < PIDS; i++) g_pids[c->slot][i] = 0;
    for (int i = 0; i <= c->n_storage && i < PIDS; i++) g_pids[c->slot][i] = rl_test_cluster_pid(c, (uint32_t)i);
}

static void on_signal(int sig) {
    for (int s = 0; getpid() == g_owner && s < SLOTS; s++)
        for (int i = PIDS - 1; i >= 0; i--)
            if (g_pids[s][i] > 0) kill((pid_t)g_pids[s][i], SIGKILL);
    signal(sig, SIG_DFL);
    raise(sig);
}

static void stop_slot(int slot);

static void at_exit(void) {
    if (getpid() != g_owner) return;
    for (int s = 0; s < SLOTS; s++)
        if (g_slots[s]) stop_slot(s);
}

static void install_hooks(void) {
    if (g_hooks_installed) return;
    g_hooks_installed = 1;
    g_owner = getpid();
    atexit(at_exit);
    int sigs[] = {SIGTERM, SIGINT, SIGHUP, SIGABRT};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        sigaction(sigs[i], &sa, NULL);
    }
}

/* The guardian: wait for EOF on fd (the test died or stopped the cluster), then stop the
 * cluster in dir by its recorded pids and remove remove_dir (unless keep). Never returns. */
static void guardian(int fd, const char *dir, const char *remove_dir, int keep) {
    signal(SIGINT, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    signal(SIGTERM, SIG_DFL);
    time_t until = time(NULL) + RL_TEST_CLUSTER_MAX_LIFE_S;
    for (;;) {
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        int r = poll(&pf, 1, 1000);
        if (r > 0) {
            char b[64];
            ssize_t n = read(fd, b, sizeof b);
            if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) break;
        }
        if (time(NULL) > until) break;
    }
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    (void)rl__cluster_down(dir, NULL, &msg);
    if (!keep) rl_test_rmtree(remove_dir);
    _exit(0);
}

/* Print the last lines of the logs in dir/logs/ (for a failed start). */
static void print_logs(const char *dir) {
    char cmd[4400];
    snprintf(cmd, sizeof cmd, "tail -n 15 '%s'/logs/*.log 2>/dev/null", dir);
    FILE *p = popen(cmd, "r");
    if (!p) return;
    char line[1024];
    while (fgets(line, sizeof line, p)) printf("  | %s", line);
    pclose(p);
}

int rl_test_cluster_start(rl_test_cluster *c, const rl__cluster_up_opts *o) {
    memset(c, 0, sizeof *c);
    c->slot = -1;
    c->guardian_fd = -1;
    install_hooks();
    int slot = -1;
    for (int s = 0; s < SLOTS; s++)
        if (!g_slots[s]) {
            slot = s;
            break;
        }
    if (slot < 0) {
        printf("rl_test_cluster_start: more than %d clusters at once\n", SLOTS);
        return RL_E_INVALID_ARGUMENT;
    }
    char *base = rl_test_tmpdir("cluster");
    /* rl__cluster_up wants a new or empty directory: use one inside the fresh temporary one, so the
     * guardian's removal covers both. */
    size_t bl = strlen(base);
    c->dir = malloc(bl + 3);
    memcpy(c->dir, base, bl);
    memcpy(c->dir + bl, "/c", 3);
    rl__cluster_up_opts uo = *o;
    uo.flags |= RL_CLUSTER_DIE_WITH_PARENT;
    if (!uo.rlkvd) uo.rlkvd = rl_test_bin("rlkvd");
    /* The guardian first, so a test killed during the start is cleaned up too. */
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) != 0) {
        printf("rl_test_cluster_start: pipe: %s\n", strerror(errno));
        free(c->dir);
        c->dir = NULL;
        free(base);
        return RL_E_IO_ERROR;
    }
    const char *keep_env = getenv("RL_TEST_KEEP");
    int keep = keep_env && *keep_env == '1';
    fflush(stdout);
    fflush(stderr);
    pid_t g = fork();
    if (g == 0) {
        /* The guardian: keep only the pipe's read end; stop the cluster in c->dir, remove base. */
        signal(SIGABRT, SIG_DFL);
        for (int fd = 3; fd < 1024; fd++)
            if (fd != pfd[0]) close(fd);
        guardian(pfd[0], c->dir, base, keep);
    }
    close(pfd[0]);
    c->guardian_pid = g > 0 ? g : 0;
    c->guardian_fd = pfd[1];
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    int rc = rl__cluster_up(c->dir, &uo, &msg);
    if (rc) {
        printf("cluster start failed: %s (%d): %s\n", rl_error_name(rc), rc, rl__errdetail_get(&msg));
        print_logs(c->dir);
        rl_test_cluster_stop(c);
        rl_test_rmtree(base);
        free(base);
        return rc;
    }
    free(base);
    c->n_storage = o->n_storage;
    { /* with --hosts the count is hosts x storage per host */
        rl__cluster_up_opts t;
        if (rl__cluster_topology(o, &t, NULL) == RL_OK) c->n_storage = t.n_storage;
    }
    snprintf(c->file, sizeof c->file, "%s/reclayer.cluster", c->dir);
    snprintf(c->url, sizeof c->url, "cluster:%s", c->file);
    snprintf(c->key_file, sizeof c->key_file, "%s/%s", c->dir, RL_KEYFILE_NAME);
    {
        rl__errdetail kmsg;
        rl__errdetail_init(&kmsg, NULL);
        if (rl__keyfile_read(c->key_file, &c->key, &kmsg) != RL_OK)
            printf("cannot read %s: %s\n", c->key_file, rl__errdetail_get(&kmsg));
    }
    rl_test_cluster *copy = malloc(sizeof *copy);
    memcpy(copy, c, sizeof *copy);
    copy->dir = strdup(c->dir);
    copy->slot = slot;
    g_slots[slot] = copy;
    c->slot = slot;
    c->guardian_pid = 0; /* owned by the copy */
    c->guardian_fd = -1;
    refresh_pids(c);
    return RL_OK;
}

int rl_test_pid_gone(int pid) {
    int s;
    (void)waitpid(pid, &s, WNOHANG);
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return 1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    return !p || p[2] == 'Z' || p[2] == 'X';
}

int rl_test_cluster_pid(rl_test_cluster *c, uint32_t id) {
    int pid = 0;
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    (void)rl__cluster_pid(c->dir, id, &pid, NULL, &msg);
    return pid;
}

int rl_test_cluster_restart(rl_test_cluster *c, uint32_t id, int hard) {
    char *out = NULL;
    char which[32];
    if (id == 0) snprintf(which, sizeof which, "--coordinator");
    else snprintf(which, sizeof which, "--storage %u", id);
    int rc = rl_test_rl(&out, "cluster restart --dir '%s' %s%s", c->dir, which, hard ? " --kill" : "");
    if (rc != 0) printf("rl cluster restart %s failed (exit %d):\n%s\n", which, rc, out ? out : "");
    free(out);
    refresh_pids(c);
    return rc;
}

int rl_test_cluster_restart_args(rl_test_cluster *c, const char *args, char **out) {
    char *o = NULL;
    int rc = rl_test_rl(&o, "cluster restart --dir '%s' %s", c->dir, args);
    refresh_pids(c);
    if (out) *out = o;
    else free(o);
    return rc;
}

/* Stop the cluster of slot (its copy) and free the copy. */
static void stop_slot(int slot) {
    rl_test_cluster *copy = g_slots[slot];
    for (int i = 0; i < PIDS; i++) g_pids[slot][i] = 0;
    g_slots[slot] = NULL;
    copy->slot = -1;
    rl_test_cluster_stop(copy);
    free(copy);
}

void rl_test_cluster_stop(rl_test_cluster *c) {
    if (!c || !c->dir) return;
    if (c->slot >= 0 && g_slots[c->slot]) {
        stop_slot(c->slot);
        c->slot = -1;
        free(c->dir);
        c->dir = NULL;
        return;
    }
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    (void)rl__cluster_down(c->dir, NULL, &msg);
    if (c->guardian_fd >= 0) close(c->guardian_fd);
    c->guardian_fd = -1;
    if (c->guardian_pid > 0) {
        /* The guardian sees EOF within its poll interval, finds nothing left to stop, exits. */
        for (int i = 0; i < 500; i++) {
            int st;
            pid_t r = waitpid(c->guardian_pid, &st, WNOHANG);
            if (r == c->guardian_pid || r < 0) break;
            usleep(10000);
        }
        c->guardian_pid = 0;
    }
    const char *keep_env = getenv("RL_TEST_KEEP");
    /* c->dir is BASE/c: remove BASE. */
    char *slash = strrchr(c->dir, '/');
    if (slash) *slash = 0;
    if (keep_env && *keep_env == '1') printf("cluster directory kept: %s/c\n", c->dir);
    else rl_test_rmtree(c->dir);
    free(c->dir);
    c->dir = NULL;
}

long long rl_test_status_num(const rl_test_cluster *c, uint16_t port, const char *field) {
    rl__admin_conn *a = NULL;
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    long long v = -1;
    if (rl__admin_conn_open(port, &c->key.auth, 2000, &a, &msg) == RL_OK) {
        rl__msg req, rep;
        memset(&req, 0, sizeof req);
        req.type = RL_MSG_STATUS;
        if (rl__admin_conn_call(a, &req, &rep, 2000, &msg) == RL_OK) {
            json_error_t je;
            json_t *j = json_loadb((const char *)rep.u.status_reply.json, rep.u.status_reply.json_len, 0, &je);
            if (j) v = (long long)json_integer_value(json_object_get(j, field));
            json_decref(j);
        }
    }
    rl__admin_conn_close(a);
    return v;
}
