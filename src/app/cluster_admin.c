/* cluster_admin.c — start, inspect, restart and stop a local cluster (see cluster_admin.h for the
 * directory layout, the invariants and the health rule).
 *
 * Life of a cluster directory:
 *
 *     (absent/empty) --up--> RUNNING --down--> STOPPED --down--> STOPPED (idempotent)
 *                             |   ^
 *                      restart|   |the processes named, the coordinator and every other
 *                             v   |process still running healthy again
 *                          the processes named stopped and started again on their recorded ports
 *
 *   transition              function               pids.json
 *   up                      rl__cluster_up         written after the processes start, every
 *                                                  entry "running": true
 *   up fails                stop_all               entries "running": false
 *   down                    rl__cluster_down       entries "running": false
 *   restart                 rl__cluster_restart_many  each named entry's pid and start times
 *                                                  replaced
 *
 * The admin connection is a plain blocking socket with poll() deadlines (one request at a time is
 * all a command needs; the event loop of src/net/loop.h is for servers and the client backend).
 */
#include "app/cluster_admin.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <arpa/inet.h>
#include <dirent.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"
#include "app/args.h"
#include "app/cluster_status.h"
#include "base/arena.h"
#include "base/bytes.h"
#include "base/clock.h"
#include "kv/cluster/clusterfile.h"
#include "server/keyfile.h"
#include "net/netem.h"
#include "server/fatal.h"
#include "storage/os.h"

#define PATH_CAP 4096
#define HEALTH_KEY "\xff/rlcluster/health"
#define REQ_TIMEOUT_CAP_MS 2000

/* ---------------------------------------------------------------------------------------------
 * Small helpers
 * ------------------------------------------------------------------------------------------ */

static int64_t now_ms(void) { return (int64_t)(rl__clock_mono_ns() / 1000000u); }

/* Milliseconds left until deadline (>= 0), capped at cap when cap > 0. */
static int left_ms(int64_t deadline, int cap) {
    int64_t l = deadline - now_ms();
    if (l < 0) l = 0;
    if (cap > 0 && l > cap) l = cap;
    return (int)l;
}

static void sleep_ms(int ms) { rl__clock_sleep_us((uint64_t)ms * 1000u); }

/* Append "what: strerror(e)" to err and return the rl code for e. */
static int os_error(rl__errdetail *err, int e, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int os_error(rl__errdetail *err, int e, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    rl__errdetail_vappend(err, fmt, ap);
    va_end(ap);
    rl__errdetail_append(err, ": %s", strerror(e));
    return rl__os_map_errno(e);
}

static int fail(rl__errdetail *err, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(rl__errdetail *err, int rc, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    rl__errdetail_vappend(err, fmt, ap);
    va_end(ap);
    return rc;
}

static void path_of(char *out, const char *dir, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void path_of(char *out, const char *dir, const char *fmt, ...) {
    char rel[PATH_CAP];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rel, sizeof rel, fmt, ap);
    va_end(ap);
    int n = snprintf(out, PATH_CAP, "%s/%s", dir, rel);
    if (n < 0 || n >= PATH_CAP) out[0] = 0; /* callers bound dir's length (rl__cluster_up) */
}

/* mkdir that accepts an existing directory. */
static int make_dir(const char *path, rl__errdetail *err) {
    if (mkdir(path, 0755) == 0) return RL_OK;
    if (errno == EEXIST) {
        struct stat st;
        if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) return RL_OK;
        return fail(err, RL_E_INVALID_ARGUMENT, "%s exists and is not a directory", path);
    }
    return os_error(err, errno, "cannot create directory %s", path);
}

/* ---------------------------------------------------------------------------------------------
 * Processes: /proc start times, liveness, signals
 * ------------------------------------------------------------------------------------------ */

/* Read /proc/PID/stat: the start time (field 22, clock ticks since boot) and the state letter.
 * Returns 0, or -1 if there is no such process. */
static int proc_stat(int pid, uint64_t *out_start, char *out_state) {
    char path[64], buf[4096];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return -1;
    buf[n] = 0;
    /* The command name (field 2) is in parentheses and may hold spaces: fields resume after the
     * last ')'. Field 3 is the state, field 22 the start time. */
    char *p = strrchr(buf, ')');
    if (!p) return -1;
    p++;
    int field = 2;
    char *save = NULL;
    for (char *tok = strtok_r(p, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
        field++;
        if (field == 3 && out_state) *out_state = tok[0];
        if (field == 22) {
            if (out_start) *out_start = strtoull(tok, NULL, 10);
            return 0;
        }
    }
    return -1;
}

/* One recorded process. */
typedef struct {
    int is_coordinator;  /* 1: the coordinator (id 0); 0: a storage server */
    uint32_t id;         /* 0 for the coordinator, 1..N */
    int pid;             /* 0: never started */
    uint16_t port;       /* its listening port (0 before the first start) */
    uint64_t proc_start; /* /proc/PID/stat start time of pid, clock ticks since boot */
    int64_t start_time;  /* wall clock when started, seconds since the epoch */
    int running;         /* 1 while recorded as running */
    char ip[16];         /* the address it listens on (127.0.0.<h> with host addresses) */
    char host[16];       /* its host label, "host<h>" */
} cl_proc;

/* What pids.json holds, and the cluster's key file (never in pids.json). */
typedef struct {
    rl__keyfile key;       /* DIR/cluster.key, read by state_load */
    int key_rc;            /* RL_OK when key was read, else why not (key_err) */
    rl__errdetail key_err; /* the key file's error */
    char rlkvd[PATH_CAP];
    int no_sync;
    int64_t window_versions;
    int n_hosts, storage_per_host, host_addresses, replication; /* as given to up (0: not given) */
    uint32_t delay_us, jitter_us;                               /* the injected delay now (up, then rl cluster delay) */
    char engine[16];                                            /* rl cluster up's --engine ("": what each dir holds) */
    int n;                                                      /* processes: p[0] the coordinator, p[i] storage i */
    cl_proc p[RL_CLUSTER_MAX_STORAGE + 1];
} cl_state;

/* 1 if p's recorded pid is alive and is still the process we started (start time equal, not a
 * zombie). Reaps it first when it is our child and has exited. */
static int proc_is_ours(const cl_proc *p) {
    if (p->pid <= 0) return 0;
    int st;
    (void)waitpid(p->pid, &st, WNOHANG); /* ECHILD when it is not our child: fine */
    uint64_t start = 0;
    char state = 0;
    if (proc_stat(p->pid, &start, &state) != 0) return 0;
    if (state == 'Z' || state == 'X') return 0;
    return start == p->proc_start;
}

/* The cluster's credentials for an admin connection: RL_OK, or the key file's error (its reason
 * in err). */
static int need_key(const cl_state *s, rl__errdetail *err) {
    if (s->key_rc == RL_OK) return RL_OK;
    return fail(err, s->key_rc, "%s", rl__errdetail_get(&s->key_err));
}

/* Signal p (after verifying it is ours) and wait up to timeout_ms for it to go. Returns 1 if it
 * was signalled, 0 if it was already gone. */
static int proc_signal_wait(const cl_proc *p, int sig, int timeout_ms) {
    if (!proc_is_ours(p)) return 0;
    if (kill(p->pid, sig) != 0) return 0;
    int64_t deadline = now_ms() + timeout_ms;
    while (proc_is_ours(p) && now_ms() < deadline) sleep_ms(5);
    return 1;
}

/* Stop p: SIGTERM (or SIGKILL when hard), wait, then SIGKILL if it is still there. Returns 1 if
 * it was signalled. */
static int proc_stop(const cl_proc *p, int hard) {
    int signalled = proc_signal_wait(p, hard ? SIGKILL : SIGTERM, RL_CLUSTER_STOP_TIMEOUT_MS);
    if (signalled && proc_is_ours(p)) proc_signal_wait(p, SIGKILL, RL_CLUSTER_STOP_TIMEOUT_MS);
    return signalled;
}

/* A new JSON object with what pids.json and the status say of every process: role, id, pid,
 * address, host, port. Under OOM jansson returns NULL and its setters ignore NULL. */
static json_t *proc_json(const cl_proc *p) {
    json_t *o = json_object();
    json_object_set_new(o, "role", json_string(p->is_coordinator ? "coordinator" : "storage"));
    json_object_set_new(o, "id", json_integer(p->id));
    json_object_set_new(o, "pid", json_integer(p->pid));
    json_object_set_new(o, "address", json_string(p->ip));
    json_object_set_new(o, "host", json_string(p->host));
    json_object_set_new(o, "port", json_integer(p->port));
    return o;
}

/* ---------------------------------------------------------------------------------------------
 * pids.json
 * ------------------------------------------------------------------------------------------ */

static void proc_name(const cl_proc *p, char *out, size_t cap) {
    if (p->is_coordinator) snprintf(out, cap, "coordinator");
    else snprintf(out, cap, "storage-%u", p->id);
}

static int state_save(const char *dir, const cl_state *s, rl__errdetail *err) {
    json_t *root = json_object(), *arr = json_array();
    if (!root || !arr) {
        json_decref(root);
        json_decref(arr);
        return RL_E_OUT_OF_MEMORY;
    }
    json_object_set_new(root, "format", json_integer(1));
    json_object_set_new(root, "rlkvd", json_string(s->rlkvd));
    json_object_set_new(root, "no_sync", json_boolean(s->no_sync));
    json_object_set_new(root, "window_versions", json_integer(s->window_versions));
    json_object_set_new(root, "hosts", json_integer(s->n_hosts));
    json_object_set_new(root, "storage_per_host", json_integer(s->storage_per_host));
    json_object_set_new(root, "host_addresses", json_boolean(s->host_addresses));
    json_object_set_new(root, "replication", json_integer(s->replication));
    json_object_set_new(root, "delay_us", json_integer(s->delay_us));
    json_object_set_new(root, "jitter_us", json_integer(s->jitter_us));
    for (int i = 0; i < s->n; i++) {
        const cl_proc *p = &s->p[i];
        json_t *o = proc_json(p);
        json_object_set_new(o, "start_time", json_integer(p->start_time));
        json_object_set_new(o, "proc_start_ticks", json_integer((json_int_t)p->proc_start));
        json_object_set_new(o, "running", json_boolean(p->running));
        json_array_append_new(arr, o);
    }
    json_object_set_new(root, "processes", arr);
    char *text = json_dumps(root, JSON_INDENT(2));
    json_decref(root);
    if (!text) return RL_E_OUT_OF_MEMORY;
    char path[PATH_CAP];
    path_of(path, dir, "pids.json");
    size_t len = strlen(text);
    int rc = RL_OK;
    rl_buf b;
    rl__buf_init(&b);
    rl__buf_append(&b, text, len);
    rl__buf_append_byte(&b, '\n');
    free(text);
    rc = rl__buf_error(&b) ? RL_E_OUT_OF_MEMORY : rl__os_write_file_atomic(path, b.data, b.len, 0, "rl cluster", err);
    rl__buf_release(&b);
    return rc;
}

static int state_load(const char *dir, cl_state *s, rl__errdetail *err) {
    char path[PATH_CAP];
    path_of(path, dir, "pids.json");
    memset(s, 0, sizeof *s);
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root) {
        struct stat st;
        if (stat(path, &st) != 0)
            return fail(err, RL_E_FILE_NOT_FOUND, "%s has no cluster (no %s; start one with rl cluster up)", dir, path);
        return fail(err, RL_E_CORRUPT_DATA, "%s: %s (line %d)", path, je.text, je.line);
    }
    int rc = RL_OK;
    const char *bin = json_string_value(json_object_get(root, "rlkvd"));
    json_t *arr = json_object_get(root, "processes");
    if (!bin || !json_is_array(arr) || json_array_size(arr) < 2 || json_array_size(arr) > RL_CLUSTER_MAX_STORAGE + 1) {
        rc = fail(err, RL_E_CORRUPT_DATA, "%s: not a pids file of rl cluster", path);
        goto done;
    }
    snprintf(s->rlkvd, sizeof s->rlkvd, "%s", bin);
    /* The secrets: needed to talk to the processes, not to stop them (need_key). */
    char kpath[PATH_CAP];
    rl__errdetail_init(&s->key_err, NULL);
    s->key_rc = rl__keyfile_in_dir(dir, kpath, sizeof kpath);
    if (s->key_rc == RL_OK) s->key_rc = rl__keyfile_read(kpath, &s->key, &s->key_err);
    if (!rl__errdetail_len(&s->key_err)) rl__errdetail_set(&s->key_err, "no key file");
    s->no_sync = json_is_true(json_object_get(root, "no_sync"));
    s->window_versions = json_integer_value(json_object_get(root, "window_versions"));
    s->n_hosts = (int)json_integer_value(json_object_get(root, "hosts"));
    s->storage_per_host = (int)json_integer_value(json_object_get(root, "storage_per_host"));
    s->host_addresses = json_is_true(json_object_get(root, "host_addresses"));
    s->replication = (int)json_integer_value(json_object_get(root, "replication"));
    json_int_t dl = json_integer_value(json_object_get(root, "delay_us"));
    json_int_t jt = json_integer_value(json_object_get(root, "jitter_us"));
    if (dl < 0 || jt < 0 || dl > RL_NETEM_MAX_US || jt > RL_NETEM_MAX_US) {
        rc = fail(err, RL_E_CORRUPT_DATA, "%s: delay_us %lld / jitter_us %lld out of range", path, (long long)dl,
                  (long long)jt);
        goto done;
    }
    s->delay_us = (uint32_t)dl;
    s->jitter_us = (uint32_t)jt;
    s->n = (int)json_array_size(arr);
    for (int i = 0; i < s->n; i++) {
        json_t *o = json_array_get(arr, (size_t)i);
        cl_proc *p = &s->p[i];
        const char *role = json_string_value(json_object_get(o, "role"));
        p->is_coordinator = role && !strcmp(role, "coordinator");
        p->id = (uint32_t)json_integer_value(json_object_get(o, "id"));
        p->pid = (int)json_integer_value(json_object_get(o, "pid"));
        p->port = (uint16_t)json_integer_value(json_object_get(o, "port"));
        p->start_time = json_integer_value(json_object_get(o, "start_time"));
        p->proc_start = (uint64_t)json_integer_value(json_object_get(o, "proc_start_ticks"));
        p->running = json_is_true(json_object_get(o, "running"));
        /* Older pids.json files (before hosts) have neither: 127.0.0.1 and host1. */
        const char *ip = json_string_value(json_object_get(o, "address"));
        const char *host = json_string_value(json_object_get(o, "host"));
        snprintf(p->ip, sizeof p->ip, "%s", ip && *ip ? ip : "127.0.0.1");
        snprintf(p->host, sizeof p->host, "%s", host && *host ? host : "host1");
        if (!role || (i == 0) != p->is_coordinator || p->id != (uint32_t)i) {
            rc = fail(err, RL_E_CORRUPT_DATA, "%s: process %d is not %s", path, i,
                      i == 0 ? "the coordinator" : "storage server i");
            goto done;
        }
    }
done:
    json_decref(root);
    return rc;
}

/* flock DIR/lock (blocking, but the holders only hold it for a command's duration). Returns the
 * fd (close to unlock) or -1 after appending why to err. */
static int lock_dir(const char *dir, rl__errdetail *err) {
    char path[PATH_CAP];
    path_of(path, dir, "lock");
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        os_error(err, errno, "cannot open %s", path);
        return -1;
    }
    int64_t deadline = now_ms() + 120000;
    while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        if (errno != EWOULDBLOCK && errno != EINTR) {
            os_error(err, errno, "cannot lock %s", path);
            close(fd);
            return -1;
        }
        if (now_ms() > deadline) {
            fail(err, 0, "%s is locked by another rl cluster command for 2 minutes", path);
            close(fd);
            return -1;
        }
        sleep_ms(20);
    }
    return fd;
}

/* ---------------------------------------------------------------------------------------------
 * The initial layout
 * ------------------------------------------------------------------------------------------ */

/* The number of storage servers of o: n_storage, or n_hosts * storage_per_host when only the
 * hosts are given. -1 when both are given and disagree, or a count is negative. */
static int layout_n_storage(const rl__cluster_up_opts *o) {
    if (o->n_hosts < 0 || o->storage_per_host < 0 || o->n_storage < 0) return -1;
    if (o->n_hosts > 0 && o->storage_per_host > 0) {
        long hs = (long)o->n_hosts * o->storage_per_host;
        if (o->n_storage && o->n_storage != hs) return -1;
        return hs > RL_CLUSTER_MAX_STORAGE + 1 ? RL_CLUSTER_MAX_STORAGE + 1 : (int)hs;
    }
    return o->n_storage;
}

/* The host number (1-based) of storage server id of o (common rules: h = (id - 1) / S + 1 with
 * hosts; every server on host 1 without). */
static int layout_host(const rl__cluster_up_opts *o, int id) {
    if (o->n_hosts > 0 && o->storage_per_host > 0) return (id - 1) / o->storage_per_host + 1;
    return 1;
}

/* layout_team — the team of shard k (0-based) among n storage servers, r members, into
 * team[0..r): the primary is server k % n + 1 (the round-robin of single replication, so a
 * layout of teams of one is what it always was); then one member on each following host in
 * turn — host (h0 + m) mod H at the same position within its host as the primary — while hosts
 * are left; then, when there are fewer hosts than members, the servers after the primary in id
 * order that are not in the team yet. So members sit on distinct hosts whenever there are at
 * least r hosts, every server is primary of about 1/n of the shards and second member of as
 * many, and the result is a pure function of (o's hosts, n, r, k). Requires 1 <= r <= n. */
static void layout_team(const rl__cluster_up_opts *o, int n, int r, int k, int *team) {
    int p = k % n + 1, got = 0;
    team[got++] = p;
    int hosts = o->n_hosts > 0 && o->storage_per_host > 0 ? o->n_hosts : 1;
    int per = hosts > 1 ? o->storage_per_host : n;
    int h0 = layout_host(o, p) - 1, pos = (p - 1) % per;
    for (int m = 1; m < hosts && got < r; m++) {
        int id = ((h0 + m) % hosts) * per + pos + 1;
        if (id <= n) team[got++] = id;
    }
    for (int d = 1; d < n && got < r; d++) {
        int id = (p - 1 + d) % n + 1, dup = 0;
        for (int j = 0; j < got; j++) dup |= team[j] == id;
        if (!dup) team[got++] = id;
    }
}

int rl__cluster_layout(const rl__cluster_up_opts *o, rl_buf *out, rl__errdetail *err) {
    int n_storage = layout_n_storage(o);
    if (n_storage < 0)
        return fail(err, RL_E_INVALID_ARGUMENT, "--storage %d does not match --hosts %d x --storage-per-host %d",
                    o->n_storage, o->n_hosts, o->storage_per_host);
    if (n_storage < 1 || n_storage > RL_CLUSTER_MAX_STORAGE)
        return fail(err, RL_E_INVALID_ARGUMENT, "--storage %d is out of range [1, %d]", n_storage,
                    RL_CLUSTER_MAX_STORAGE);
    int team_size = o->replication <= 0 ? 1 : o->replication;
    if (team_size > n_storage || team_size > RL_PROTO_MAX_TEAM)
        return fail(err, RL_E_INVALID_ARGUMENT, "replication %d needs at least %d storage servers (there are %d)",
                    team_size, team_size, n_storage);
    if (o->n_split > 0 && o->n_shards > 0)
        return fail(err, RL_E_INVALID_ARGUMENT, "--shards and --split exclude each other");
    if (o->n_split < 0 || o->n_split >= RL_CLUSTER_MAX_SHARDS)
        return fail(err, RL_E_INVALID_ARGUMENT, "at most %d split keys", RL_CLUSTER_MAX_SHARDS - 1);
    int k = o->n_split > 0 ? o->n_split + 1 : (o->n_shards > 0 ? o->n_shards : n_storage);
    /* At most 255: with 256 the last boundary would be \xff itself, the end of the user keyspace. */
    if (o->n_split == 0 && (k < 1 || k > 255))
        return fail(err, RL_E_INVALID_ARGUMENT, "--shards %d is out of range [1, 255]", k);
    /* Boundaries: k - 1 keys, strictly increasing, each non-empty and below \xff. */
    rl_buf keys[RL_CLUSTER_MAX_SHARDS];
    int nk = k - 1, rc = RL_OK;
    for (int i = 0; i < nk; i++) rl__buf_init(&keys[i]);
    for (int i = 0; i < nk; i++) {
        if (o->n_split > 0) {
            rl__errdetail why;
            rl__errdetail_init(&why, NULL);
            int r = rl__args_unescape(o->split[i], &keys[i], &why);
            if (r == RL_E_INVALID_ARGUMENT) {
                rc = fail(err, r, "split key %d '%s': %s", i + 1, o->split[i], rl__errdetail_get(&why));
                goto done;
            }
            if (r) {
                rc = r;
                goto done;
            }
            if (keys[i].len == 0) {
                rc = fail(err, RL_E_INVALID_ARGUMENT, "split key %d is empty (the first shard begins at \"\")", i + 1);
                goto done;
            }
            if ((uint8_t)keys[i].data[0] == 0xff) {
                rc = fail(err, RL_E_INVALID_ARGUMENT,
                          "split key %d '%s' is in the system keyspace (\\xff...: the coordinator's)", i + 1,
                          o->split[i]);
                goto done;
            }
            if (i > 0 && rl__bytes_cmp(keys[i - 1].data, keys[i - 1].len, keys[i].data, keys[i].len) >= 0) {
                rc = fail(err, RL_E_INVALID_ARGUMENT, "split keys must be strictly increasing: '%s' then '%s'",
                          o->split[i - 1], o->split[i]);
                goto done;
            }
        } else {
            rl__buf_append_byte(&keys[i], (uint8_t)(256 * (i + 1) / k));
        }
    }
    rl__buf_printf(out, "{\"storage\": [");
    for (int i = 1; i <= n_storage; i++) rl__buf_printf(out, "%s%d", i > 1 ? ", " : "", i);
    rl__buf_printf(out, "], \"shards\": [");
    for (int i = 0; i < k; i++) {
        rl__buf_printf(out, "%s{\"begin\": \"", i ? ", " : "");
        if (i > 0) rl__buf_append_hex(out, keys[i - 1].data, keys[i - 1].len);
        rl__buf_printf(out, "\", \"end\": \"");
        if (i < nk) rl__buf_append_hex(out, keys[i].data, keys[i].len);
        else rl__buf_printf(out, "ff");
        int team[RL_PROTO_MAX_TEAM];
        layout_team(o, n_storage, team_size, i, team);
        rl__buf_printf(out, "\", \"team\": [");
        for (int j = 0; j < team_size; j++) rl__buf_printf(out, "%s%d", j ? ", " : "", team[j]);
        rl__buf_printf(out, "]}");
    }
    rl__buf_printf(out, "]}\n");
    if (rl__buf_error(out)) rc = RL_E_OUT_OF_MEMORY;
done:
    for (int i = 0; i < nk; i++) rl__buf_release(&keys[i]);
    return rc;
}

/* ---------------------------------------------------------------------------------------------
 * The admin connection
 * ------------------------------------------------------------------------------------------ */

struct rl__admin_conn {
    int fd;
    uint32_t max_payload; /* frames the server may send: small until the handshake is done */
    uint64_t next_id;
    rl_buf rx;      /* the last reply's payload */
    rl_arena arena; /* the last reply's arrays */
};

/* Wait until fd is readable (events POLLIN) or writable, up to ms. 1 ready, 0 timeout, -1 error. */
static int wait_fd(int fd, short events, int ms) {
    struct pollfd pf = {.fd = fd, .events = events};
    for (;;) {
        int r = poll(&pf, 1, ms);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return -1;
        return r > 0 ? 1 : 0;
    }
}

static int send_all(int fd, const uint8_t *p, size_t n, int64_t deadline, rl__errdetail *err) {
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                int r = wait_fd(fd, POLLOUT, left_ms(deadline, 0));
                if (r == 0) return fail(err, RL_E_TIMED_OUT, "timed out sending");
                if (r < 0) return fail(err, RL_E_CONNECTION_FAILED, "poll failed: %s", strerror(errno));
                continue;
            }
            return fail(err, RL_E_CONNECTION_FAILED, "send failed: %s", strerror(errno));
        }
        p += w;
        n -= (size_t)w;
    }
    return RL_OK;
}

static int recv_all(int fd, uint8_t *p, size_t n, int64_t deadline, rl__errdetail *err) {
    while (n > 0) {
        int r = wait_fd(fd, POLLIN, left_ms(deadline, 0));
        if (r == 0) return fail(err, RL_E_TIMED_OUT, "timed out waiting for a reply");
        if (r < 0) return fail(err, RL_E_CONNECTION_FAILED, "poll failed: %s", strerror(errno));
        ssize_t got = recv(fd, p, n, MSG_DONTWAIT);
        if (got < 0) {
            if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
            return fail(err, RL_E_CONNECTION_FAILED, "receive failed: %s", strerror(errno));
        }
        if (got == 0) return fail(err, RL_E_CONNECTION_FAILED, "the server closed the connection");
        p += got;
        n -= (size_t)got;
    }
    return RL_OK;
}

/* Send one frame of m with id. */
static int send_msg(rl__admin_conn *c, const rl__msg *m, uint64_t id, int64_t deadline, rl__errdetail *err) {
    rl_buf f;
    rl__buf_init(&f);
    rl__errdetail why;
    rl__errdetail_init(&why, NULL);
    int rc = rl__msg_frame_encode(&f, id, m, &why);
    if (rc) rc = fail(err, rc, "cannot encode %s: %s", rl__msg_type_name(m->type), rl__errdetail_get(&why));
    else rc = send_all(c->fd, (const uint8_t *)f.data, f.len, deadline, err);
    rl__buf_release(&f);
    return rc;
}

/* Receive one frame into c->rx and decode it into *out. */
static int recv_msg(rl__admin_conn *c, rl__frame_header *h, rl__msg *out, int64_t deadline, rl__errdetail *err) {
    uint8_t hb[RL_FRAME_HEADER_LEN];
    int rc = recv_all(c->fd, hb, sizeof hb, deadline, err);
    if (rc) return rc;
    if (rl__frame_header_decode(hb, h) != 0) return fail(err, RL_E_MALFORMED_FRAME, "bad frame header from the server");
    if (h->payload_len > c->max_payload)
        return fail(err, RL_E_MALFORMED_FRAME, "a frame of %u bytes from the server during the handshake",
                    (unsigned)h->payload_len);
    rl__buf_reset(&c->rx);
    if (rl__buf_reserve(&c->rx, h->payload_len + 1)) return RL_E_OUT_OF_MEMORY;
    rc = recv_all(c->fd, (uint8_t *)c->rx.data, h->payload_len, deadline, err);
    if (rc) return rc;
    c->rx.len = h->payload_len;
    rl__arena_reset(&c->arena);
    rl__errdetail why;
    rl__errdetail_init(&why, NULL);
    rc = rl__msg_decode(h->type, h->flags, (const uint8_t *)c->rx.data, h->payload_len, &c->arena, out, &why);
    if (rc)
        return fail(err, rc, "undecodable %s from the server: %s", rl__msg_type_name(h->type), rl__errdetail_get(&why));
    return RL_OK;
}

int rl__admin_conn_open(uint16_t port, const rl__net_auth *auth, int timeout_ms, rl__admin_conn **out,
                        rl__errdetail *err) {
    return rl__admin_conn_open_at("127.0.0.1", port, auth, timeout_ms, out, err);
}

/* The handshake on a blocking connection (docs/protocol.md §2), as a member when auth has the
 * member key, else as a client: the server's AUTH_CHALLENGE, our AUTH, the server's proof. */
static int admin_handshake(rl__admin_conn *c, const rl__net_auth *auth, int64_t deadline, rl__errdetail *err) {
    rl__frame_header h;
    rl__msg m;
    int rc = recv_msg(c, &h, &m, deadline, err);
    if (rc) return rc;
    if (h.type != RL_MSG_AUTH_CHALLENGE || h.flags != 0)
        return fail(err, RL_E_PROTOCOL_UNEXPECTED_MESSAGE, "the server's first frame is %s, not AUTH_CHALLENGE",
                    rl__msg_type_name(h.type));
    uint8_t snonce[RL_AUTH_NONCE_LEN];
    memcpy(snonce, m.u.auth_challenge.nonce, sizeof snonce);
    rl__msg req;
    memset(&req, 0, sizeof req);
    req.type = RL_MSG_AUTH;
    rl__msg_auth_req *a = &req.u.auth_req;
    if ((rc = rl__msg_auth_req_make(auth, snonce, a))) return fail(err, rc, "cannot compute the handshake's proof");
    uint8_t cnonce[RL_AUTH_NONCE_LEN];
    memcpy(cnonce, a->nonce, sizeof cnonce);
    rl__msg reply;
    if ((rc = rl__admin_conn_call(c, &req, &reply, left_ms(deadline, 0), err))) return rc;
    rc = rl__auth_verify(auth, a->auth_class, 'S', snonce, cnonce, reply.u.auth_reply.proof);
    if (rc)
        return fail(err, rc, "the server did not prove it knows this cluster's %s: another cluster on this address?",
                    a->auth_class == RL_AUTH_MEMBER ? "key file" : "name");
    c->max_payload = RL_NET_MAX_PAYLOAD;
    return RL_OK;
}

int rl__admin_conn_open_at(const char *ip, uint16_t port, const rl__net_auth *auth, int timeout_ms,
                           rl__admin_conn **out, rl__errdetail *err) {
    *out = NULL;
    if (!auth) return fail(err, RL_E_INVALID_ARGUMENT, "an admin connection needs the cluster's key file");
    struct in_addr ia;
    if (!ip || inet_pton(AF_INET, ip, &ia) != 1 || (ntohl(ia.s_addr) >> 24) != 127)
        return fail(err, RL_E_INVALID_ARGUMENT, "address '%s' is not dotted IPv4 inside 127.0.0.0/8", ip ? ip : "");
    int64_t deadline = now_ms() + timeout_ms;
    rl__admin_conn *c = calloc(1, sizeof *c);
    if (!c) return RL_E_OUT_OF_MEMORY;
    rl__buf_init(&c->rx);
    rl__arena_init(&c->arena, 4096);
    c->next_id = 1;
    c->max_payload = RL_NET_HANDSHAKE_MAX_PAYLOAD;
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int rc = RL_OK;
    if (c->fd < 0) {
        rc = fail(err, RL_E_CONNECTION_FAILED, "socket: %s", strerror(errno));
        goto fail;
    }
    int one = 1;
    (void)setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    sa.sin_addr = ia;
    if (connect(c->fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        if (errno != EINPROGRESS) {
            rc = fail(err, RL_E_CONNECTION_FAILED, "connect to %s:%u: %s", ip, port, strerror(errno));
            goto fail;
        }
        int r = wait_fd(c->fd, POLLOUT, left_ms(deadline, 0));
        if (r <= 0) {
            rc = fail(err, r == 0 ? RL_E_TIMED_OUT : RL_E_CONNECTION_FAILED, "connect to %s:%u timed out", ip, port);
            goto fail;
        }
        int so_error = 0;
        socklen_t el = sizeof so_error;
        (void)getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &so_error, &el);
        if (so_error) {
            rc = fail(err, RL_E_CONNECTION_FAILED, "connect to %s:%u: %s", ip, port, strerror(so_error));
            goto fail;
        }
    }
    if ((rc = admin_handshake(c, auth, deadline, err))) goto fail;
    rl__msg hello;
    memset(&hello, 0, sizeof hello);
    hello.type = RL_MSG_HELLO;
    hello.u.hello_req.magic = RL_PROTOCOL_MAGIC;
    hello.u.hello_req.protocol_version = RL_PROTOCOL_VERSION;
    hello.u.hello_req.role = RL_ROLE_ADMIN;
    hello.u.hello_req.host = (const uint8_t *)"rl";
    hello.u.hello_req.host_len = 2;
    rl__msg reply;
    rc = rl__admin_conn_call(c, &hello, &reply, left_ms(deadline, 0), err);
    if (rc) goto fail;
    *out = c;
    return RL_OK;
fail:
    rl__admin_conn_close(c);
    return rc;
}

int rl__admin_conn_call(rl__admin_conn *c, const rl__msg *req, rl__msg *reply, int timeout_ms, rl__errdetail *err) {
    int64_t deadline = now_ms() + timeout_ms;
    uint64_t id = c->next_id++;
    int rc = send_msg(c, req, id, deadline, err);
    if (rc) return rc;
    for (;;) {
        rl__frame_header h;
        rc = recv_msg(c, &h, reply, deadline, err);
        if (rc) return rc;
        if (!(h.flags & RL_FRAME_REPLY)) continue; /* a request from the server: not for an admin */
        if (h.id != id) continue;                  /* a late reply to an earlier, timed-out call */
        if (h.type != req->type)
            return fail(err, RL_E_PROTOCOL_UNEXPECTED_MESSAGE, "reply of type %s to a %s", rl__msg_type_name(h.type),
                        rl__msg_type_name(req->type));
        if (h.flags & RL_FRAME_ERROR) {
            rl__errdetail_append(err, "%s: %s (%d)%s%.*s", rl__msg_type_name(req->type),
                                 rl_error_name(reply->u.error.code), reply->u.error.code,
                                 reply->u.error.message_len ? ": " : "", (int)reply->u.error.message_len,
                                 (const char *)reply->u.error.message);
            return reply->u.error.code;
        }
        return RL_OK;
    }
}

void rl__admin_conn_close(rl__admin_conn *c) {
    if (!c) return;
    if (c->fd >= 0) close(c->fd);
    rl__buf_release(&c->rx);
    rl__arena_release(&c->arena);
    free(c);
}

/* STATUS of the server on port as parsed JSON (*out, json_decref). */
static int status_of(rl__admin_conn *c, int timeout_ms, json_t **out, rl__errdetail *err) {
    rl__msg req, reply;
    memset(&req, 0, sizeof req);
    req.type = RL_MSG_STATUS;
    int rc = rl__admin_conn_call(c, &req, &reply, timeout_ms, err);
    if (rc) return rc;
    json_error_t je;
    *out = json_loadb((const char *)reply.u.status_reply.json, reply.u.status_reply.json_len, 0, &je);
    if (!*out) return fail(err, RL_E_MALFORMED_FRAME, "STATUS reply is not JSON: %s", je.text);
    return RL_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Starting processes
 * ------------------------------------------------------------------------------------------ */

/* Find the rlkvd binary into out. */
static int find_rlkvd(const char *given, char *out, rl__errdetail *err) {
    const char *env = getenv("RL_RLKVD");
    if (given && *given) snprintf(out, PATH_CAP, "%s", given);
    else if (env && *env) snprintf(out, PATH_CAP, "%s", env);
    else {
        char self[PATH_CAP];
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        if (n <= 0) return os_error(err, errno, "cannot read /proc/self/exe to find rlkvd");
        self[n] = 0;
        char *slash = strrchr(self, '/');
        if (slash) *slash = 0;
        int w = snprintf(out, PATH_CAP, "%s/rlkvd", self);
        if (w < 0 || w >= PATH_CAP) return fail(err, RL_E_INVALID_ARGUMENT, "the program's path is too long");
    }
    if (access(out, X_OK) != 0)
        return fail(err, RL_E_FILE_NOT_FOUND, "rlkvd not found at %s (build it, or set RL_RLKVD)", out);
    if (out[0] != '/') {
        char cwd[PATH_CAP], abs[PATH_CAP];
        if (getcwd(cwd, sizeof cwd)) {
            int n = snprintf(abs, sizeof abs, "%s/%s", cwd, out);
            if (n > 0 && n < (int)sizeof abs) memcpy(out, abs, (size_t)n + 1);
        }
    }
    return RL_OK;
}

/* Start process p of cluster s in dir, listening on listen_port (0: any), as a child in its own
 * process group. Fills p->pid, p->proc_start, p->start_time; the port comes later from the port
 * file (wait_port). */
static int spawn(const char *dir, const cl_state *s, cl_proc *p, uint16_t listen_port, unsigned flags,
                 rl__errdetail *err) {
    char name[32], data[PATH_CAP], portf[PATH_CAP], logf[PATH_CAP], init[PATH_CAP];
    char listen[64], coord[64], idbuf[16], wv[32], dl[16], jt[16], keyf[PATH_CAP];
    proc_name(p, name, sizeof name);
    path_of(keyf, dir, RL_KEYFILE_NAME);
    path_of(data, dir, "%s", name);
    path_of(portf, dir, "run/%s.port", name);
    path_of(logf, dir, "logs/%s.log", name);
    path_of(init, dir, "init.json");
    snprintf(listen, sizeof listen, "%s:%u", p->ip, listen_port);
    snprintf(coord, sizeof coord, "%s:%u", s->p[0].ip, s->p[0].port);
    snprintf(dl, sizeof dl, "%u", s->delay_us);
    snprintf(jt, sizeof jt, "%u", s->jitter_us);
    snprintf(idbuf, sizeof idbuf, "%u", p->id);
    snprintf(wv, sizeof wv, "%lld", (long long)s->window_versions);
    const char *argv[32];
    int n = 0;
    argv[n++] = s->rlkvd;
    argv[n++] = p->is_coordinator ? "coordinator" : "storage";
    argv[n++] = "--dir";
    argv[n++] = data;
    argv[n++] = "--key-file"; /* a path: the secrets never appear in a command line (/proc/PID/cmdline) */
    argv[n++] = keyf;
    if (p->is_coordinator) {
        argv[n++] = "--init";
        argv[n++] = init;
    } else {
        argv[n++] = "--id";
        argv[n++] = idbuf;
        argv[n++] = "--coordinator";
        argv[n++] = coord;
        argv[n++] = "--coordinator-host";
        argv[n++] = s->p[0].host;
    }
    argv[n++] = "--listen";
    argv[n++] = listen;
    argv[n++] = "--port-file";
    argv[n++] = portf;
    argv[n++] = "--host";
    argv[n++] = p->host;
    if (s->delay_us || s->jitter_us) { /* the recorded delay: a restart keeps the current one */
        argv[n++] = "--delay-us";
        argv[n++] = dl;
        argv[n++] = "--jitter-us";
        argv[n++] = jt;
    }
    if (s->no_sync) argv[n++] = "--no-sync";
    if (s->window_versions > 0) {
        argv[n++] = "--window-versions";
        argv[n++] = wv;
    }
    if (!p->is_coordinator && s->engine[0]) {
        argv[n++] = "--engine";
        argv[n++] = s->engine;
    }
    argv[n] = NULL;
    (void)unlink(portf);
    int logfd = open(logf, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (logfd < 0) return os_error(err, errno, "cannot open the log %s", logf);
    int nullfd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (nullfd < 0) {
        int e = errno;
        close(logfd);
        return os_error(err, e, "cannot open /dev/null");
    }
    {
        /* A line in the log marks each start, so restarts can be told apart. */
        char line[256];
        time_t t = time(NULL);
        struct tm tm;
        gmtime_r(&t, &tm);
        int l =
            snprintf(line, sizeof line, "---- rl cluster: starting %s (listen %s) at %04d-%02d-%02dT%02d:%02d:%02dZ\n",
                     name, listen, tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
        if (l > 0) (void)!write(logfd, line, (size_t)l);
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(logfd);
        close(nullfd);
        return os_error(err, e, "cannot fork to start %s", name);
    }
    if (pid == 0) {
        /* Child: only async-signal-safe calls until exec. */
        setpgid(0, 0);
        if (flags & RL_CLUSTER_DIE_WITH_PARENT) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() != parent) _exit(127);
        }
        dup2(nullfd, 0);
        dup2(logfd, 1);
        dup2(logfd, 2);
        /* Every other descriptor is closed, whether or not it was marked close-on-exec. */
        for (int fd = 3; fd < 1024; fd++) close(fd);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        signal(SIGPIPE, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        signal(SIGINT, SIG_DFL);
        execv(argv[0], (char *const *)argv);
        static const char m[] = "rl cluster: exec of rlkvd failed\n";
        (void)!write(2, m, sizeof m - 1);
        _exit(127);
    }
    setpgid(pid, pid); /* also here, so the group exists whichever runs first */
    close(logfd);
    close(nullfd);
    p->pid = pid;
    p->start_time = (int64_t)time(NULL);
    p->proc_start = 0;
    p->running = 1;
    /* The start time the kernel recorded (the child exists now, zombie or not). */
    for (int i = 0; i < 100 && proc_stat(pid, &p->proc_start, NULL) != 0; i++) sleep_ms(1);
    return RL_OK;
}

/* Wait for p's port file (until deadline) and set p->port. Fails if p exits first. */
static int wait_port(const char *dir, cl_proc *p, int64_t deadline, rl__errdetail *err) {
    char name[32], portf[PATH_CAP], logf[PATH_CAP];
    proc_name(p, name, sizeof name);
    path_of(portf, dir, "run/%s.port", name);
    path_of(logf, dir, "logs/%s.log", name);
    for (;;) {
        uint8_t *text = NULL;
        size_t len = 0;
        int rc = rl__os_read_file(portf, &text, &len);
        unsigned long port = 0;
        int ok = 0;
        if (rc == RL_OK && len >= 2 && len < 16 && text[len - 1] == '\n') {
            char digits[16], *end = NULL;
            memcpy(digits, text, len);
            digits[len] = 0;
            port = strtoul(digits, &end, 10);
            ok = end && *end == '\n' && port > 0 && port < 65536;
        }
        rl__free(text);
        if (ok) {
            p->port = (uint16_t)port;
            return RL_OK;
        }
        if (!proc_is_ours(p)) {
            /* Why, when it recorded it (fatal.h): e.g. its port is taken, its directory unusable. */
            char data[PATH_CAP];
            json_t *fatal = NULL;
            path_of(data, dir, "%s", name);
            (void)rl__fatal_read(data, &fatal, NULL);
            const char *summary = json_string_value(json_object_get(fatal, "summary"));
            int same = fatal && json_integer_value(json_object_get(fatal, "pid")) == p->pid;
            rc = fail(err, RL_E_SERVER_UNAVAILABLE, "%s (pid %d) exited before listening%s%s; see %s", name, p->pid,
                      same && summary ? ": stopped on " : "", same && summary ? summary : "", logf);
            json_decref(fatal);
            return rc;
        }
        if (now_ms() > deadline)
            return fail(err, RL_E_TIMED_OUT, "%s (pid %d) wrote no port file %s in time; see %s", name, p->pid, portf,
                        logf);
        sleep_ms(5);
    }
}

/* Start p on listen_port and wait for its port file. A restart on a recorded port retries for a
 * while when the process exits at once (the port may still be held by the old socket). */
static int start_proc(const char *dir, cl_state *s, cl_proc *p, uint16_t listen_port, unsigned flags, int64_t deadline,
                      rl__errdetail *err) {
    for (int attempt = 0;; attempt++) {
        size_t mark = rl__errdetail_len(err);
        int rc = spawn(dir, s, p, listen_port, flags, err);
        if (rc) return rc;
        rc = wait_port(dir, p, deadline, err);
        if (rc != RL_E_SERVER_UNAVAILABLE || listen_port == 0 || now_ms() > deadline || attempt >= 20) return rc;
        rl__errdetail_truncate(err, mark);
        sleep_ms(100);
    }
}

/* Stop every running process of s (storage first, coordinator last). Returns how many were
 * signalled. */
static int stop_all(cl_state *s) {
    int n = 0;
    for (int i = s->n - 1; i >= 0; i--) {
        n += proc_stop(&s->p[i], 0);
        s->p[i].running = 0;
    }
    return n;
}

/* ---------------------------------------------------------------------------------------------
 * Health
 * ------------------------------------------------------------------------------------------ */

/* The first shard begin key (raw bytes into out) owned by storage id per the coordinator's STATUS;
 * 0 if it owns none. */
static int first_owned_key(json_t *st, uint32_t id, rl_buf *out) {
    json_t *shards = json_object_get(st, "shards");
    size_t i;
    json_t *sh;
    json_array_foreach(shards, i, sh) {
        json_t *team = json_object_get(sh, "team");
        size_t j;
        json_t *m;
        json_array_foreach(team, j, m) {
            if ((uint32_t)json_integer_value(m) != id) continue;
            const char *hex = json_string_value(json_object_get(sh, "begin"));
            rl__buf_reset(out);
            if (hex && rl__bytes_from_hex(out, hex, strlen(hex)) == RL_OK) return 1;
            return 0;
        }
    }
    return 0;
}

/* Commit mutation (SET k=v or CLEAR k) at a fresh read version; *out_version gets the commit
 * version. */
static int commit_one(rl__admin_conn *c, int is_set, const char *k, size_t kl, const char *v, size_t vl, int timeout_ms,
                      rl__version *out_version, rl__errdetail *err) {
    rl__msg req, reply;
    memset(&req, 0, sizeof req);
    req.type = RL_MSG_GET_READ_VERSION;
    int rc = rl__admin_conn_call(c, &req, &reply, timeout_ms, err);
    if (rc) return rc;
    rl__version rv = reply.u.get_read_version_reply.version;
    char kend[64];
    memcpy(kend, k, kl);
    kend[kl] = 0;
    rl__keyrange w = {(const uint8_t *)k, (uint32_t)kl, (const uint8_t *)kend, (uint32_t)kl + 1};
    rl__mutation m = {.type = is_set ? RL_MUT_SET : RL_MUT_CLEAR,
                      .p1 = (const uint8_t *)k,
                      .len1 = (uint32_t)kl,
                      .p2 = (const uint8_t *)v,
                      .len2 = (uint32_t)vl};
    memset(&req, 0, sizeof req);
    req.type = RL_MSG_COMMIT;
    req.u.commit_req.read_version = rv;
    req.u.commit_req.writes = &w;
    req.u.commit_req.n_writes = 1;
    req.u.commit_req.muts = &m;
    req.u.commit_req.n_muts = 1;
    rc = rl__admin_conn_call(c, &req, &reply, timeout_ms, err);
    if (rc) return rc;
    if (reply.u.commit_reply.result)
        return fail(err, reply.u.commit_reply.result, "test commit: %s", rl_error_name(reply.u.commit_reply.result));
    *out_version = reply.u.commit_reply.commit_version;
    return RL_OK;
}

/* GET key at version v; *present and the value into val (may be NULL). */
static int get_one(rl__admin_conn *c, rl__version v, const void *k, size_t kl, int *present, rl_buf *val,
                   int timeout_ms, rl__errdetail *err) {
    rl__msg req, reply;
    memset(&req, 0, sizeof req);
    req.type = RL_MSG_GET;
    req.u.get_req.version = v;
    req.u.get_req.key = (const uint8_t *)k;
    req.u.get_req.key_len = (uint32_t)kl;
    int rc = rl__admin_conn_call(c, &req, &reply, timeout_ms, err);
    if (rc) return rc;
    *present = reply.u.get_reply.present;
    if (val) {
        rl__buf_reset(val);
        rl__buf_append(val, reply.u.get_reply.value, reply.u.get_reply.value_len);
    }
    return RL_OK;
}

/* One health probe of the processes i with want[i] (want NULL: every process; the coordinator is
 * always probed, since nothing is healthy without it). RL_OK when they are healthy; otherwise
 * err says what is missing (the caller retries while time is left) and *culprit the index of the
 * process it concerns (0: the coordinator). conns[i] caches a connection to process i (reopened
 * when broken). */
static int probe(const char *dir, cl_state *s, const int *want, rl__admin_conn **conns, int64_t deadline, int *culprit,
                 rl__errdetail *err) {
    int rc = RL_OK;
    *culprit = 0;
    json_t *cst = NULL;
    for (int i = 0; i < s->n; i++) {
        if (i > 0 && want && !want[i]) continue;
        if (!proc_is_ours(&s->p[i])) {
            char name[32], logf[PATH_CAP];
            proc_name(&s->p[i], name, sizeof name);
            path_of(logf, dir, "logs/%s.log", name);
            return fail(err, RL_E_SERVER_UNAVAILABLE, "%s (pid %d) has exited; see %s", name, s->p[i].pid, logf);
        }
        if (!conns[i]) {
            *culprit = i;
            rc = need_key(s, err);
            if (rc == RL_OK)
                rc = rl__admin_conn_open_at(s->p[i].ip, s->p[i].port, &s->key.auth,
                                            left_ms(deadline, REQ_TIMEOUT_CAP_MS), &conns[i], err);
            if (rc) {
                char name[32];
                proc_name(&s->p[i], name, sizeof name);
                rl__errdetail_append(err, " (%s on %s:%u)", name, s->p[i].ip, s->p[i].port);
                return rc;
            }
        }
    }
    *culprit = 0;
    rc = status_of(conns[0], left_ms(deadline, REQ_TIMEOUT_CAP_MS), &cst, err);
    if (rc) goto broken0;
    for (int i = 1; i < s->n; i++) {
        if (want && !want[i]) continue;
        if (!rl__cluster_coord_lists_healthy(cst, s->p[i].id)) {
            *culprit = i;
            rc = fail(err, RL_E_SERVER_UNAVAILABLE,
                      "the coordinator does not list storage server %u as registered and "
                      "healthy yet",
                      s->p[i].id);
            goto done;
        }
    }
    /* A test commit through the coordinator, read back at its version, then cleared. */
    *culprit = 0;
    char nonce[RL_CLUSTER_FIELD_MAX + 32];
    int nl = snprintf(nonce, sizeof nonce, "health-%ld-%lld", (long)getpid(), (long long)now_ms());
    if (nl < 0 || nl >= (int)sizeof nonce) nonce[0] = 0;
    rl__version v = 0, v2 = 0;
    rc = commit_one(conns[0], 1, HEALTH_KEY, sizeof HEALTH_KEY - 1, nonce, strlen(nonce),
                    left_ms(deadline, REQ_TIMEOUT_CAP_MS), &v, err);
    if (rc) goto broken0;
    int present = 0;
    rl_buf val;
    rl__buf_init(&val);
    rc = get_one(conns[0], v, HEALTH_KEY, sizeof HEALTH_KEY - 1, &present, &val, left_ms(deadline, REQ_TIMEOUT_CAP_MS),
                 err);
    if (rc == RL_OK && (!present || val.len != strlen(nonce) || memcmp(val.data, nonce, val.len)))
        rc = fail(err, RL_E_SERVER_UNAVAILABLE, "the coordinator did not read back the test commit at version %llu",
                  (unsigned long long)v);
    rl__buf_release(&val);
    if (rc) goto broken0;
    rc = commit_one(conns[0], 0, HEALTH_KEY, sizeof HEALTH_KEY - 1, "", 0, left_ms(deadline, REQ_TIMEOUT_CAP_MS), &v2,
                    err);
    if (rc) goto broken0;
    /* Every storage server has caught up to the commit and serves a read at its version. */
    for (int i = 1; i < s->n; i++) {
        if (want && !want[i]) continue;
        json_t *sst = NULL;
        *culprit = i;
        rc = status_of(conns[i], left_ms(deadline, REQ_TIMEOUT_CAP_MS), &sst, err);
        if (rc) {
            rl__admin_conn_close(conns[i]);
            conns[i] = NULL;
            goto done;
        }
        json_int_t known = json_integer_value(json_object_get(sst, "known_version"));
        json_decref(sst);
        if ((rl__version)known < v) {
            rc = fail(err, RL_E_SERVER_UNAVAILABLE, "storage server %u knows version %lld, not yet %llu", s->p[i].id,
                      (long long)known, (unsigned long long)v);
            goto done;
        }
        rl_buf key;
        rl__buf_init(&key);
        if (first_owned_key(cst, s->p[i].id, &key)) {
            rc = get_one(conns[i], v, key.data, key.len, &present, NULL, left_ms(deadline, REQ_TIMEOUT_CAP_MS), err);
            if (rc)
                rl__errdetail_append(err, " (storage server %u, GET at version %llu)", s->p[i].id,
                                     (unsigned long long)v);
        }
        rl__buf_release(&key);
        if (rc) {
            if (rc != RL_E_FUTURE_VERSION) {
                rl__admin_conn_close(conns[i]);
                conns[i] = NULL;
            }
            goto done;
        }
    }
    goto done;
broken0:
    rl__admin_conn_close(conns[0]);
    conns[0] = NULL;
done:
    json_decref(cst);
    return rc;
}

/* Wait until the processes of s with want[i] (NULL: all; the coordinator always) are healthy,
 * or deadline. */
static int wait_healthy(const char *dir, cl_state *s, const int *want, int64_t deadline, rl__errdetail *err) {
    rl__admin_conn *conns[RL_CLUSTER_MAX_STORAGE + 1] = {0};
    rl__errdetail last; /* what the last probe found missing */
    int rc, culprit = 0;
    for (;;) {
        rl__errdetail_init(&last, NULL);
        rc = probe(dir, s, want, conns, deadline, &culprit, &last);
        if (rc == RL_OK || (rc == RL_E_SERVER_UNAVAILABLE && strstr(rl__errdetail_get(&last), "has exited"))) {
            rl__errdetail_append(err, "%s", rl__errdetail_get(&last));
            break;
        }
        if (now_ms() >= deadline) {
            char name[32];
            proc_name(&s->p[culprit], name, sizeof name);
            rl__errdetail_append(err, "the cluster in %s was not healthy in time (last: %s); see %s/logs/%s.log", dir,
                                 rl__errdetail_get(&last), dir, name);
            rc = RL_E_TIMED_OUT;
            break;
        }
        sleep_ms(20);
    }
    for (int i = 0; i < s->n; i++) rl__admin_conn_close(conns[i]);
    return rc;
}

int rl__cluster_wait_healthy(const char *dir, int timeout_ms, rl__errdetail *err) {
    cl_state *s = malloc(sizeof *s);
    if (!s) return RL_E_OUT_OF_MEMORY;
    int rc = state_load(dir, s, err);
    if (rc == RL_OK)
        rc = wait_healthy(dir, s, NULL, now_ms() + (timeout_ms > 0 ? timeout_ms : RL_CLUSTER_DEFAULT_TIMEOUT_MS), err);
    free(s);
    return rc;
}

/* ---------------------------------------------------------------------------------------------
 * up, down, restart, status
 * ------------------------------------------------------------------------------------------ */

/* 0 if dir is absent or an empty directory; 1 if it holds entries; -1 on error (err). */
static int dir_has_entries(const char *dir, rl__errdetail *err) {
    DIR *d = opendir(dir);
    if (!d) {
        if (errno == ENOENT) return 0;
        if (errno == ENOTDIR) {
            fail(err, 0, "%s is not a directory", dir);
            return -1;
        }
        os_error(err, errno, "cannot open %s", dir);
        return -1;
    }
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n > 0;
}

int rl__cluster_topology(const rl__cluster_up_opts *o, rl__cluster_up_opts *out, rl__errdetail *err) {
    *out = *o;
    rl__errdetail why;
    rl__errdetail_init(&why, NULL);
    if (rl__netem_check(o->delay_us, o->jitter_us, &why) != RL_OK)
        return fail(err, RL_E_INVALID_ARGUMENT, "--delay-us / --jitter-us: %s", rl__errdetail_get(&why));
    if (o->replication < 0 || o->replication > 3)
        return fail(err, RL_E_INVALID_ARGUMENT, "replication %d is not single (1), double (2) or triple (3)",
                    o->replication);
    if (o->n_hosts < 0 || o->n_hosts > RL_CLUSTER_MAX_STORAGE)
        return fail(err, RL_E_INVALID_ARGUMENT, "--hosts %d is out of range [1, %d]", o->n_hosts,
                    RL_CLUSTER_MAX_STORAGE);
    if (o->n_hosts == 0) {
        if (o->storage_per_host) return fail(err, RL_E_INVALID_ARGUMENT, "--storage-per-host needs --hosts");
        if (o->host_addresses) return fail(err, RL_E_INVALID_ARGUMENT, "--host-addresses needs --hosts");
    } else {
        int per = o->storage_per_host ? o->storage_per_host : 1;
        if (per < 1 || per > RL_CLUSTER_MAX_STORAGE || (int64_t)per * o->n_hosts > RL_CLUSTER_MAX_STORAGE)
            return fail(err, RL_E_INVALID_ARGUMENT,
                        "--hosts %d x --storage-per-host %d storage servers: out of range [1, %d]", o->n_hosts, per,
                        RL_CLUSTER_MAX_STORAGE);
        if (o->n_storage && o->n_storage != per * o->n_hosts)
            return fail(err, RL_E_INVALID_ARGUMENT, "--storage %d differs from --hosts %d x --storage-per-host %d",
                        o->n_storage, o->n_hosts, per);
        out->storage_per_host = per;
        out->n_storage = per * o->n_hosts;
    }
    if (out->n_storage < 1 || out->n_storage > RL_CLUSTER_MAX_STORAGE)
        return fail(err, RL_E_INVALID_ARGUMENT, "--storage %d is out of range [1, %d]", out->n_storage,
                    RL_CLUSTER_MAX_STORAGE);
    if (o->replication > out->n_storage)
        return fail(err, RL_E_INVALID_ARGUMENT, "replication %d needs at least %d storage servers (there are %d)",
                    o->replication, o->replication, out->n_storage);
    return RL_OK;
}

/* The host label and listening address of process i (0: the coordinator, on host1) of a cluster
 * with topology t (rl__cluster_topology's output). */
static void place_proc(const rl__cluster_up_opts *t, cl_proc *p) {
    unsigned h = 1;
    if (p->id > 0 && t->n_hosts > 0 && t->storage_per_host > 0) h = (p->id - 1) / (unsigned)t->storage_per_host + 1;
    h &= 0xff; /* at most RL_CLUSTER_MAX_STORAGE hosts */
    snprintf(p->host, sizeof p->host, "host%u", h);
    snprintf(p->ip, sizeof p->ip, "127.0.0.%u", t->host_addresses ? h : 1u);
}

const rl__arg_choice rl__cluster_replication_choices[] = {{"single", 1}, {"double", 2}, {"triple", 3}, {NULL, 0}};
const rl__arg_choice rl__cluster_engine_choices[] = {{"memory", 1}, {"ssd", 2}, {NULL, 0}};

int rl__cluster_up_args_apply(const rl__cluster_up_args *a, const char **keys, int cap, char **out_copy,
                              rl__cluster_up_opts *o, rl__errdetail *err) {
    memset(o, 0, sizeof *o);
    *out_copy = NULL;
    int nk = 0;
    if (a->split) {
        if (a->shards) return fail(err, RL_E_INVALID_ARGUMENT, "--shards and --split exclude each other");
        char *copy = strdup(a->split);
        if (!copy) return RL_E_OUT_OF_MEMORY;
        *out_copy = copy;
        for (char *p = copy;;) {
            char *comma = strchr(p, ',');
            if (comma) *comma = 0;
            if (nk == cap) return fail(err, RL_E_INVALID_ARGUMENT, "--split: at most %d keys", cap);
            keys[nk++] = p;
            if (!comma) break;
            p = comma + 1;
        }
    }
    if (!a->n_storage && !a->n_hosts)
        return fail(err, RL_E_INVALID_ARGUMENT, "give --storage N or --hosts H [--storage-per-host S]");
    o->n_storage = a->n_storage;
    o->n_hosts = a->n_hosts;
    o->storage_per_host = a->storage_per_host;
    o->host_addresses = a->host_addresses;
    o->replication = a->replication;
    o->delay_us = (uint32_t)a->delay_us;
    o->jitter_us = (uint32_t)a->jitter_us;
    o->n_shards = a->shards;
    o->split = nk ? keys : NULL;
    o->n_split = nk;
    o->no_sync = a->no_sync;
    o->engine = a->engine == 2 ? "ssd" : NULL;
    o->window_versions = a->window;
    /* The layout now: a bad split key is a usage error, before anything is created. */
    rl_buf layout;
    rl__buf_init(&layout);
    rl__cluster_up_opts topo;
    int rc = rl__cluster_topology(o, &topo, err);
    if (rc == RL_OK) rc = rl__cluster_layout(&topo, &layout, err);
    rl__buf_release(&layout);
    return rc;
}

int rl__cluster_up(const char *dir, const rl__cluster_up_opts *o_given, rl__errdetail *err) {
    if (!dir || !*dir) return fail(err, RL_E_INVALID_ARGUMENT, "--dir is empty");
    if (strlen(dir) > PATH_CAP - 256) return fail(err, RL_E_INVALID_ARGUMENT, "--dir is too long");
    rl_buf layout;
    rl__buf_init(&layout);
    rl__cluster_up_opts topo;
    const rl__cluster_up_opts *o = &topo;
    int rc = rl__cluster_topology(o_given, &topo, err), lockfd = -1;
    cl_state *s = NULL;
    if (rc) goto out;
    if (o->init_json) rl__buf_append_str(&layout, o->init_json);
    else rc = rl__cluster_layout(o, &layout, err);
    if (rc == RL_OK && rl__buf_error(&layout)) rc = RL_E_OUT_OF_MEMORY;
    if (rc) goto out;
    int has = dir_has_entries(dir, err);
    if (has < 0) {
        rc = RL_E_INVALID_ARGUMENT;
        goto out;
    }
    if (has) {
        cl_state *old = malloc(sizeof *old);
        int running = 0;
        if (old && state_load(dir, old, NULL) == RL_OK)
            for (int i = 0; i < old->n; i++) running += proc_is_ours(&old->p[i]);
        free(old);
        if (running)
            rc = fail(err, RL_E_ALREADY_EXISTS,
                      "%s holds a running cluster (%d processes; rl cluster down --dir %s first)", dir, running, dir);
        else
            rc =
                fail(err, RL_E_INVALID_ARGUMENT, "%s is not empty (rl cluster up needs a new or empty directory)", dir);
        goto out;
    }
    s = calloc(1, sizeof *s);
    if (!s) {
        rc = RL_E_OUT_OF_MEMORY;
        goto out;
    }
    if ((rc = find_rlkvd(o->rlkvd, s->rlkvd, err))) goto out;
    if ((rc = make_dir(dir, err))) goto out;
    /* The directory holds the cluster's secrets (the key file, the cluster file): owner only. */
    if (chmod(dir, 0700) != 0) {
        rc = os_error(err, errno, "cannot make %s private (chmod 700)", dir);
        goto out;
    }
    char path[PATH_CAP];
    path_of(path, dir, RL_KEYFILE_NAME);
    if ((rc = rl__keyfile_create(path, "reclayer", &s->key, err))) goto out;
    path_of(path, dir, "logs");
    if ((rc = make_dir(path, err))) goto out;
    path_of(path, dir, "run");
    if ((rc = make_dir(path, err))) goto out;
    if ((lockfd = lock_dir(dir, err)) < 0) {
        rc = RL_E_IO_ERROR;
        goto out;
    }
    path_of(path, dir, "init.json");
    if ((rc = rl__os_write_file_atomic(path, layout.data, layout.len, 0, "rl cluster", err))) goto out;
    s->no_sync = o->no_sync;
    s->window_versions = o->window_versions;
    s->n_hosts = o->n_hosts;
    s->storage_per_host = o->storage_per_host;
    s->host_addresses = o->host_addresses;
    s->replication = o->replication;
    s->delay_us = o->delay_us;
    s->jitter_us = o->jitter_us;
    if (o->engine) snprintf(s->engine, sizeof s->engine, "%s", o->engine);
    s->n = o->n_storage + 1;
    for (int i = 0; i < s->n; i++) {
        s->p[i].is_coordinator = i == 0;
        s->p[i].id = (uint32_t)i;
        place_proc(o, &s->p[i]);
    }
    int64_t deadline = now_ms() + (o->timeout_ms > 0 ? o->timeout_ms : RL_CLUSTER_DEFAULT_TIMEOUT_MS);
    rc = start_proc(dir, s, &s->p[0], 0, o->flags, deadline, err);
    for (int i = 1; rc == RL_OK && i < s->n; i++) rc = spawn(dir, s, &s->p[i], 0, o->flags, err);
    /* Record the pids at once, so a crash of this command still leaves them findable. */
    if (rc == RL_OK) rc = state_save(dir, s, err);
    for (int i = 1; rc == RL_OK && i < s->n; i++) rc = wait_port(dir, &s->p[i], deadline, err);
    if (rc == RL_OK) rc = state_save(dir, s, err);
    if (rc == RL_OK) rc = wait_healthy(dir, s, NULL, deadline, err);
    if (rc == RL_OK) {
        rl__cluster_file cf;
        memset(&cf, 0, sizeof cf);
        const char *colon = strchr(s->key.name, ':'); /* rl__keyfile_create wrote "reclayer:ID" */
        snprintf(cf.description, sizeof cf.description, "%.*s", (int)(colon - s->key.name), s->key.name);
        snprintf(cf.id, sizeof cf.id, "%s", colon + 1);
        snprintf(cf.ip, sizeof cf.ip, "%s", s->p[0].ip);
        cf.port = s->p[0].port;
        rl_buf text;
        rl__buf_init(&text);
        rl__cluster_file_format(&cf, &text);
        path_of(path, dir, "reclayer.cluster");
        rc = rl__buf_error(&text) ? RL_E_OUT_OF_MEMORY
                                  : rl__os_write_file_private(path, text.data, text.len, "rl cluster", err);
        rl__buf_release(&text);
    }
    if (rc) {
        stop_all(s);
        (void)state_save(dir, s, NULL);
    }
out:
    if (lockfd >= 0) close(lockfd);
    free(s);
    rl__buf_release(&layout);
    return rc;
}

int rl__cluster_down(const char *dir, int *out_stopped, rl__errdetail *err) {
    if (out_stopped) *out_stopped = 0;
    cl_state *s = malloc(sizeof *s);
    if (!s) return RL_E_OUT_OF_MEMORY;
    int rc = state_load(dir, s, err), lockfd = -1;
    if (rc) goto out;
    if ((lockfd = lock_dir(dir, err)) < 0) {
        rc = RL_E_IO_ERROR;
        goto out;
    }
    if ((rc = state_load(dir, s, err))) goto out; /* again, under the lock */
    int n = stop_all(s);
    if (out_stopped) *out_stopped = n;
    rc = state_save(dir, s, err);
out:
    if (lockfd >= 0) close(lockfd);
    free(s);
    return rc;
}

int rl__cluster_restart(const char *dir, uint32_t id, unsigned flags, int timeout_ms, rl__errdetail *err) {
    return rl__cluster_restart_many(dir, &id, 1, flags, timeout_ms, err);
}

/* The restart of several processes together (cluster_admin.h). The processes named are stopped
 * (storage servers first, the coordinator last, as down does; one already gone is just started)
 * and started again (the coordinator first: the storage servers connect to its recorded
 * address), then the health wait covers the processes named, the coordinator and every other
 * process that is still running. A process that is down and not named is not waited for (it
 * would fail the wait at once: restarting one of several processes
 * killed together always failed on another one); a note in err names it. */
int rl__cluster_restart_many(const char *dir, const uint32_t *ids, int n_ids, unsigned flags, int timeout_ms,
                             rl__errdetail *err) {
    if (!ids || n_ids < 1 || n_ids > RL_CLUSTER_MAX_STORAGE + 1)
        return fail(err, RL_E_INVALID_ARGUMENT, "restart needs 1 to %d processes", RL_CLUSTER_MAX_STORAGE + 1);
    cl_state *s = malloc(sizeof *s);
    if (!s) return RL_E_OUT_OF_MEMORY;
    int named[RL_CLUSTER_MAX_STORAGE + 1] = {0}, want[RL_CLUSTER_MAX_STORAGE + 1] = {0};
    int lockfd = -1, rc = state_load(dir, s, err); /* first without the lock: is there a cluster? */
    if (rc) goto out;
    if ((lockfd = lock_dir(dir, err)) < 0) {
        rc = RL_E_IO_ERROR;
        goto out;
    }
    if ((rc = state_load(dir, s, err))) goto out; /* again, under the lock */
    for (int k = 0; k < n_ids; k++) {
        uint32_t id = ids[k];
        if (id >= (uint32_t)s->n) {
            rc = fail(err, RL_E_INVALID_ARGUMENT, "the cluster in %s has no storage server %u (it has 1..%d)", dir, id,
                      s->n - 1);
            goto out;
        }
        if (named[id]) {
            rc = fail(err, RL_E_INVALID_ARGUMENT, "process %u is named twice", id);
            goto out;
        }
        if (!s->p[id].port) {
            rc = fail(err, RL_E_INVALID_ARGUMENT, "process %u of %s has no recorded port", id, dir);
            goto out;
        }
        named[id] = 1;
    }
    for (int i = s->n - 1; i >= 0; i--)
        if (named[i]) proc_stop(&s->p[i], (flags & RL_CLUSTER_KILL) != 0);
    int64_t deadline = now_ms() + (timeout_ms > 0 ? timeout_ms : RL_CLUSTER_DEFAULT_TIMEOUT_MS);
    for (int i = 0; rc == RL_OK && i < s->n; i++) {
        if (!named[i]) continue;
        cl_proc *p = &s->p[i];
        uint16_t port = p->port;
        rc = start_proc(dir, s, p, port, 0, deadline, err);
        if (rc == RL_OK && p->port != port)
            rc = fail(err, RL_E_INTERNAL_ERROR, "process %d came back on port %u instead of %u", i, p->port, port);
        if (rc) { /* not left running unrecorded: one still starting at the deadline is stopped */
            proc_stop(p, 0);
            p->running = 0;
        }
    }
    int src = state_save(dir, s, rc ? NULL : err);
    if (rc == RL_OK) rc = src;
    if (rc) goto out;
    /* Who must be healthy: the processes named and every other one still running. */
    int n_down = 0;
    for (int i = 0; i < s->n; i++) {
        want[i] = named[i] || proc_is_ours(&s->p[i]);
        n_down += !want[i];
    }
    if ((rc = wait_healthy(dir, s, want, deadline, err))) goto out;
    for (int i = 0; i < s->n; i++) {
        if (want[i]) continue;
        char name[32];
        proc_name(&s->p[i], name, sizeof name);
        rl__errdetail_append(err, "%s%s", rl__errdetail_len(err) ? ", " : "note: not restarted and still down: ", name);
    }
    if (n_down) rl__errdetail_append(err, " (rl cluster status shows why; restart them too)");
out:
    if (lockfd >= 0) close(lockfd);
    free(s);
    return rc;
}

int rl__cluster_pid(const char *dir, uint32_t id, int *out_pid, uint16_t *out_port, rl__errdetail *err) {
    *out_pid = 0;
    cl_state *s = malloc(sizeof *s);
    if (!s) return RL_E_OUT_OF_MEMORY;
    int rc = state_load(dir, s, err);
    if (rc == RL_OK && id >= (uint32_t)s->n) rc = fail(err, RL_E_INVALID_ARGUMENT, "no process %u in %s", id, dir);
    if (rc == RL_OK) {
        if (proc_is_ours(&s->p[id])) *out_pid = s->p[id].pid;
        if (out_port) *out_port = s->p[id].port;
    }
    free(s);
    return rc;
}

int rl__cluster_storage_count(const char *dir, int *out_n, rl__errdetail *err) {
    *out_n = 0;
    cl_state *s = malloc(sizeof *s);
    if (!s) return RL_E_OUT_OF_MEMORY;
    int rc = state_load(dir, s, err);
    if (rc == RL_OK) *out_n = s->n - 1;
    free(s);
    return rc;
}

int rl__cluster_status(const char *dir, int timeout_ms, json_t **out, rl__errdetail *err) {
    *out = NULL;
    if (timeout_ms <= 0) timeout_ms = REQ_TIMEOUT_CAP_MS;
    cl_state *s = malloc(sizeof *s);
    if (!s) return RL_E_OUT_OF_MEMORY;
    int rc = state_load(dir, s, err);
    if (rc) {
        free(s);
        return rc;
    }
    json_t *root = json_object(), *arr = json_array();
    char path[PATH_CAP];
    json_object_set_new(root, "dir", json_string(dir));
    path_of(path, dir, "reclayer.cluster");
    json_object_set_new(root, "cluster_file", json_string(path));
    path_of(path, dir, RL_KEYFILE_NAME);
    json_object_set_new(root, "key_file", json_string(path));
    json_object_set_new(root, "delay_us", json_integer(s->delay_us));
    json_object_set_new(root, "jitter_us", json_integer(s->jitter_us));
    json_t *coord_status = NULL;
    int all_ok = 1;
    for (int i = 0; i < s->n; i++) {
        cl_proc *p = &s->p[i];
        char name[32];
        proc_name(p, name, sizeof name);
        json_t *o = proc_json(p);
        path_of(path, dir, "logs/%s.log", name);
        json_object_set_new(o, "log", json_string(path));
        int alive = proc_is_ours(p);
        json_object_set_new(o, "alive", json_boolean(alive));
        json_t *st = NULL;
        rl__errdetail why;
        rl__errdetail_init(&why, NULL);
        int healthy = 0;
        if (alive && p->port) {
            rl__admin_conn *c = NULL;
            int r = need_key(s, &why);
            if (r == RL_OK) r = rl__admin_conn_open_at(p->ip, p->port, &s->key.auth, timeout_ms, &c, &why);
            if (r == RL_OK) r = status_of(c, timeout_ms, &st, &why);
            rl__admin_conn_close(c);
            if (r == RL_OK) {
                if (p->is_coordinator) {
                    healthy = 1;
                    coord_status = json_incref(st);
                } else {
                    healthy = coord_status ? rl__cluster_coord_lists_healthy(coord_status, p->id) : 0;
                    if (!healthy)
                        rl__errdetail_append(&why, "%s",
                                             coord_status ? "the coordinator does not list it as "
                                                            "registered and healthy"
                                                          : "the coordinator is down");
                }
            }
        } else {
            rl__errdetail_append(&why, "%s", p->running ? "not running (the recorded pid is gone)" : "stopped");
            /* Why it stopped, when it recorded a fatal error (fatal.h): a full disk, a failed
             * start, ... A process that was killed (or stopped cleanly) has none. */
            json_t *fatal = NULL;
            rl__errdetail fmsg;
            rl__errdetail_init(&fmsg, NULL);
            path_of(path, dir, "%s", name);
            int fr = rl__fatal_read(path, &fatal, &fmsg);
            if (fatal) {
                rl__errdetail_clear(&why);
                rl__errdetail_append(&why, "stopped on %s", json_string_value(json_object_get(fatal, "summary")));
                json_object_set_new(o, "stopped_on", fatal);
            } else if (fr) {
                rl__errdetail_append(&why, "; %s/%s unreadable: %s", name, RL_FATAL_FILE,
                                     rl__errdetail_len(&fmsg) ? rl__errdetail_get(&fmsg) : rl_error_name(fr));
            }
        }
        json_object_set_new(o, "healthy", json_boolean(healthy));
        /* The process's own view of its delay when it answered, else what is recorded. */
        json_t *d = st ? json_object_get(st, "delay_us") : NULL, *j = st ? json_object_get(st, "jitter_us") : NULL;
        json_object_set_new(o, "delay_us", json_is_integer(d) ? json_incref(d) : json_integer(s->delay_us));
        json_object_set_new(o, "jitter_us", json_is_integer(j) ? json_incref(j) : json_integer(s->jitter_us));
        json_object_set_new(o, "status", st ? st : json_null());
        if (rl__errdetail_len(&why)) json_object_set_new(o, "error", json_string(rl__errdetail_get(&why)));
        if (!alive || !healthy) all_ok = 0;
        json_array_append_new(arr, o);
    }
    json_decref(coord_status);
    json_object_set_new(root, "ok", json_boolean(all_ok));
    json_object_set_new(root, "processes", arr);
    free(s);
    *out = root;
    return all_ok ? RL_OK : RL_E_SERVER_UNAVAILABLE;
}

int rl__cluster_addr(const char *dir, uint32_t id, char out_ip[16], uint16_t *out_port, char out_host[16],
                     rl__errdetail *err) {
    cl_state *s = malloc(sizeof *s);
    if (!s) return RL_E_OUT_OF_MEMORY;
    int rc = state_load(dir, s, err);
    if (rc == RL_OK && id >= (uint32_t)s->n) rc = fail(err, RL_E_INVALID_ARGUMENT, "no process %u in %s", id, dir);
    if (rc == RL_OK) {
        if (out_ip) memcpy(out_ip, s->p[id].ip, 16);
        if (out_port) *out_port = s->p[id].port;
        if (out_host) memcpy(out_host, s->p[id].host, 16);
    }
    free(s);
    return rc;
}

/* SET_DELAY to one process over an admin connection. */
static int set_delay_one(const cl_state *s, const cl_proc *p, uint32_t delay_us, uint32_t jitter_us,
                         rl__errdetail *err) {
    rl__admin_conn *c = NULL;
    int rc = need_key(s, err);
    if (rc == RL_OK) rc = rl__admin_conn_open_at(p->ip, p->port, &s->key.auth, REQ_TIMEOUT_CAP_MS, &c, err);
    if (rc == RL_OK) {
        rl__msg req, reply;
        memset(&req, 0, sizeof req);
        req.type = RL_MSG_SET_DELAY;
        req.u.set_delay_req.delay_us = delay_us;
        req.u.set_delay_req.jitter_us = jitter_us;
        rc = rl__admin_conn_call(c, &req, &reply, REQ_TIMEOUT_CAP_MS, err);
    }
    rl__admin_conn_close(c);
    return rc;
}

int rl__cluster_delay(const char *dir, uint32_t delay_us, uint32_t jitter_us, int *out_set, rl__errdetail *err) {
    if (out_set) *out_set = 0;
    rl__errdetail why;
    rl__errdetail_init(&why, NULL);
    if (rl__netem_check(delay_us, jitter_us, &why) != RL_OK)
        return fail(err, RL_E_INVALID_ARGUMENT, "--delay-us / --jitter-us: %s", rl__errdetail_get(&why));
    cl_state *s = malloc(sizeof *s);
    if (!s) return RL_E_OUT_OF_MEMORY;
    int lockfd = -1, rc = state_load(dir, s, err);
    if (rc) goto out;
    if ((lockfd = lock_dir(dir, err)) < 0) {
        rc = RL_E_IO_ERROR;
        goto out;
    }
    if ((rc = state_load(dir, s, err))) goto out; /* again, under the lock */
    /* Recorded first: a process started from now on (restart) takes the new delay even if the
     * running ones below cannot all be reached. */
    s->delay_us = delay_us;
    s->jitter_us = jitter_us;
    if ((rc = state_save(dir, s, err))) goto out;
    /* Storage servers first, the coordinator last: clients learn the delay from the
     * coordinator's shard map, so once a client applies the new setting every server has it. */
    int first_err = RL_OK, set = 0;
    for (int k = 1; k <= s->n; k++) {
        int i = k % s->n;
        cl_proc *p = &s->p[i];
        char name[32];
        proc_name(p, name, sizeof name);
        if (!proc_is_ours(p) || !p->port) {
            if (!first_err) first_err = RL_E_SERVER_UNAVAILABLE;
            rl__errdetail_append(err, "%s%s is not running (it takes the delay when restarted)",
                                 rl__errdetail_len(err) ? "; " : "", name);
            continue;
        }
        size_t mark = rl__errdetail_len(err);
        if (mark) rl__errdetail_append(err, "; ");
        rl__errdetail_append(err, "%s: ", name);
        int r = set_delay_one(s, p, delay_us, jitter_us, err);
        if (r == RL_OK) {
            rl__errdetail_truncate(err, mark);
            set++;
        } else if (!first_err) {
            first_err = r;
        }
    }
    if (out_set) *out_set = set;
    rc = first_err;
out:
    if (lockfd >= 0) close(lockfd);
    free(s);
    return rc;
}
