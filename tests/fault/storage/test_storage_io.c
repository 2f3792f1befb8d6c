/* test_storage_io.c — injected I/O failures in the durable `memory` engine (storage/os.h).
 *
 * A fixed workload (applies of every kind of mutation, a sync after every other version, an
 * explicit checkpoint halfway, small checkpoint_log_bytes so automatic checkpoints happen too)
 * runs on a `file` engine while the Nth call of one kind (write, write torn halfway, write with
 * ENOSPC, fsync, rename, open) fails, for N = 0, 1, 2, ... until the workload completes without
 * the failure firing. For every N:
 *   - the first failing engine call returns RL_E_IO_ERROR (RL_E_NO_SPACE for ENOSPC) and the
 *     failed file call is logged with its errno text (stderr is captured);
 *   - the engine is poisoned: the next apply, sync and checkpoint fail with the same code, and
 *     reads at the latest version still return exactly the model's state;
 *   - after close and reopen (no faults) the recovered version is at least the last version
 *     whose sync (or checkpoint) returned RL_OK, at most the last applied one, and the whole
 *     database equals the model at that version (each version whole or absent).
 * The model is independent of the engine: the state after version v is a closed formula of v.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "storage/os.h"
#include "storage/storage.h"
#include "test.h"

#define VERSIONS 24
#define XKEYS 7

static int open_dir(const char *dir, rl__storage **st) {
    rl__storage_options o = {0};
    o.dir = dir;
    o.checkpoint_log_bytes = 3000; /* an automatic checkpoint every ~10 versions */
    return rl__storage_open(&o, st, NULL);
}

/* The value written by version v (long for every fifth version, so records vary in size). */
static int value_of(rl__version v, char *out, size_t cap) {
    int n = snprintf(out, cap, "value-%llu", (unsigned long long)v);
    if (v % 5 == 0) {
        memset(out + n, 'a' + (int)(v % 26), 300);
        n += 300;
        out[n] = 0;
    }
    return n;
}

/* Version v: a,b,c,d := value(v); ADD 1 to count; x<v % XKEYS> set (or cleared when v % 3 == 0);
 * every fourth version also clears the range [y, z) after setting y<v> first. */
static int apply_version(rl__storage *st, rl__version v) {
    char val[400], x[8], y[8];
    int vl = value_of(v, val, sizeof val);
    snprintf(x, sizeof x, "x%d", (int)(v % XKEYS));
    snprintf(y, sizeof y, "y%02d", (int)(v % 100));
    rl__mutation m[9];
    size_t n = 0;
    const char *keys[] = {"a", "b", "c", "d"};
    for (int i = 0; i < 4; i++)
        m[n++] = (rl__mutation){RL_MUT_SET, (const uint8_t *)keys[i], 1, (const uint8_t *)val, (uint32_t)vl};
    m[n++] = (rl__mutation){RL_MUT_ADD, (const uint8_t *)"count", 5, (const uint8_t *)"\x01\0\0\0\0\0\0\0", 8};
    if (v % 3) m[n++] = (rl__mutation){RL_MUT_SET, (const uint8_t *)x, 2, (const uint8_t *)val, (uint32_t)vl};
    else m[n++] = (rl__mutation){RL_MUT_CLEAR, (const uint8_t *)x, 2, NULL, 0};
    m[n++] = (rl__mutation){RL_MUT_SET, (const uint8_t *)y, 3, (const uint8_t *)"tmp", 3};
    if (v % 4 == 0) m[n++] = (rl__mutation){RL_MUT_CLEAR_RANGE, (const uint8_t *)"y", 1, (const uint8_t *)"z", 1};
    return rl__storage_apply(st, v, m, n);
}

/* The model: the database after version v, serialized as (klen key vlen value)* in key order. */
static void model_at(rl__version v, rl_buf *out) {
    rl__buf_reset(out);
    if (v == 0) return;
    char val[400], key[8];
    const char *keys[] = {"a", "b", "c", "d"};
    int vl = value_of(v, val, sizeof val);
    for (int i = 0; i < 4; i++) {
        if (i == 3) { /* "count" sorts between "c" and "d" */
            uint8_t cnt[8];
            for (int j = 0; j < 8; j++) cnt[j] = (uint8_t)(v >> (8 * j));
            rl__buf_append_u32be(out, 5);
            rl__buf_append(out, "count", 5);
            rl__buf_append_u32be(out, 8);
            rl__buf_append(out, cnt, 8);
        }
        rl__buf_append_u32be(out, 1);
        rl__buf_append(out, keys[i], 1);
        rl__buf_append_u32be(out, (uint32_t)vl);
        rl__buf_append(out, val, (size_t)vl);
    }
    for (int i = 0; i < XKEYS; i++) {
        /* The last version w <= v with w % XKEYS == i decides x<i>. */
        if ((rl__version)i > v) continue;
        rl__version w = v - (v + XKEYS - (rl__version)i) % XKEYS;
        if (w == 0 || w % 3 == 0) continue;
        char wv[400];
        int wl = value_of(w, wv, sizeof wv);
        snprintf(key, sizeof key, "x%d", i);
        rl__buf_append_u32be(out, 2);
        rl__buf_append(out, key, 2);
        rl__buf_append_u32be(out, (uint32_t)wl);
        rl__buf_append(out, wv, (size_t)wl);
    }
    /* y<v> survives unless v % 4 == 0; older ones were cleared by a multiple of 4 <= v. */
    for (rl__version w = v - v % 4 + 1; w <= v; w++) {
        if (w == 0) continue;
        snprintf(key, sizeof key, "y%02d", (int)(w % 100));
        rl__buf_append_u32be(out, 3);
        rl__buf_append(out, key, 3);
        rl__buf_append_u32be(out, 3);
        rl__buf_append(out, "tmp", 3);
    }
}

/* The engine's whole database at its latest version, serialized like model_at. */
static void dump(rl__storage *st, rl_buf *out) {
    rl_arena a;
    rl__arena_init(&a, 0);
    rl_keyvalue *kvs;
    int n, more;
    rl__buf_reset(out);
    ASSERT_OK(
        rl__storage_get_range(st, rl__storage_latest_version(st), "", 0, "\xff", 1, 0, 0, 0, &a, &kvs, &n, &more));
    for (int i = 0; i < n; i++) {
        rl__buf_append_u32be(out, kvs[i].key_len);
        rl__buf_append(out, kvs[i].key, kvs[i].key_len);
        rl__buf_append_u32be(out, kvs[i].value_len);
        rl__buf_append(out, kvs[i].value, kvs[i].value_len);
    }
    rl__arena_release(&a);
}

static void check_state(rl__storage *st, const char *what, long n) {
    rl_buf got, want;
    rl__buf_init(&got);
    rl__buf_init(&want);
    rl__version v = rl__storage_latest_version(st);
    dump(st, &got);
    model_at(v, &want);
    if (got.len != want.len || memcmp(got.data, want.data, got.len) != 0)
        fail_msg("%s (N=%ld): state at version %llu differs from the model", what, n, (unsigned long long)v);
    rl__buf_release(&got);
    rl__buf_release(&want);
}

/* Capture stderr into a file while the workload runs (the engine logs failed file calls). */
typedef struct {
    int saved;
    char path[4200];
} capture;

static void capture_begin(capture *c, const char *dir) {
    snprintf(c->path, sizeof c->path, "%s/../stderr-%d.txt", dir, (int)getpid());
    fflush(stderr);
    c->saved = dup(2);
    int fd = open(c->path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ASSERT_TRUE(fd >= 0 && c->saved >= 0);
    dup2(fd, 2);
    close(fd);
}

/* Restore stderr; returns 1 if the captured text contains needle. */
static int capture_end(capture *c, const char *needle) {
    fflush(stderr);
    dup2(c->saved, 2);
    close(c->saved);
    char buf[8192];
    FILE *f = fopen(c->path, "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f) fclose(f);
    unlink(c->path);
    buf[n] = 0;
    return strstr(buf, needle) != NULL;
}

typedef struct {
    rl__version applied; /* last version apply returned RL_OK for (or that is in memory) */
    rl__version acked;   /* last version a sync or checkpoint returned RL_OK after */
    int first_rc;        /* first failing call's result */
    int fired;           /* the injected failure happened */
    int logged;          /* stderr held the failed call's errno text */
} run_result;

/* The workload under the armed fault (stderr captured); stops at the first failure, disarms,
 * restores stderr and then checks the poisoning. */
static void workload(rl__storage *st, run_result *r, long n, capture *cap, int err) {
    r->applied = r->acked = 0;
    r->first_rc = RL_OK;
    rl__version v;
    for (v = 1; v <= VERSIONS; v++) {
        int rc = apply_version(st, v);
        if (rc == RL_OK) r->applied = v;
        if (rc == RL_OK && v == VERSIONS / 2) {
            rc = rl__storage_checkpoint(st);
            if (rc == RL_OK) r->acked = v;
        }
        if (rc == RL_OK && v % 2 == 0) {
            rc = rl__storage_sync(st);
            if (rc == RL_OK) r->acked = v;
        }
        if (rc != RL_OK) {
            r->first_rc = rc;
            break;
        }
    }
    r->fired = rl__os_fault_fired();
    rl__os_fault_disarm();
    r->logged = capture_end(cap, strerror(err));
    if (r->first_rc == RL_OK) {
        ASSERT_EQ(r->acked, VERSIONS);
        return;
    }
    /* Poisoned: writes fail with the same code, reads still work. */
    rl__version latest = rl__storage_latest_version(st);
    if (latest != r->applied && latest != v)
        fail_msg("N=%ld: latest %llu is neither the last applied nor the failed version", n,
                 (unsigned long long)latest);
    r->applied = latest;
    ASSERT_RC(apply_version(st, latest + 1), r->first_rc);
    ASSERT_RC(rl__storage_sync(st), r->first_rc);
    ASSERT_RC(rl__storage_checkpoint(st), r->first_rc);
    ASSERT_EQ(rl__storage_latest_version(st), latest);
    check_state(st, "poisoned engine", n);
}

typedef struct {
    const char *name;
    rl__os_kind kind;
    int err;
    int flags;
    int want; /* error code the failing engine call returns */
} fault_kind;

/* Sweep N over every call of one kind the workload makes. Returns how many N fired. */
static long sweep(const fault_kind *fk) {
    long fired_runs = 0;
    for (long n = 0;; n++) {
        char *dir = rl_test_tmpdir("st-io");
        rl__storage *st;
        ASSERT_OK(open_dir(dir, &st));
        capture cap;
        capture_begin(&cap, dir);
        rl__os_fault_arm(fk->kind, n, fk->err, fk->flags);
        run_result r;
        workload(st, &r, n, &cap, fk->err);
        int fired = r.fired, logged = r.logged;
        rl__storage_close(st);
        if (fired) {
            fired_runs++;
            if (r.first_rc != fk->want)
                fail_msg("%s N=%ld: first failure %s, expected %s", fk->name, n, rl_error_name(r.first_rc),
                         rl_error_name(fk->want));
            if (!logged) fail_msg("%s N=%ld: the failed call was not logged", fk->name, n);
        } else {
            ASSERT_OK(r.first_rc);
        }
        /* Recover without faults. */
        ASSERT_OK(open_dir(dir, &st));
        rl__version rec = rl__storage_latest_version(st);
        if (rec < r.acked || rec > r.applied)
            fail_msg("%s N=%ld: recovered version %llu, acknowledged %llu, applied %llu", fk->name, n,
                     (unsigned long long)rec, (unsigned long long)r.acked, (unsigned long long)r.applied);
        check_state(st, "recovered", n);
        /* The recovered engine takes writes again. */
        ASSERT_OK(apply_version(st, rec + 1));
        ASSERT_OK(rl__storage_sync(st));
        check_state(st, "after recovery", n);
        rl__storage_close(st);
        rl_test_rmtree(dir);
        free(dir);
        if (!fired) break;
    }
    printf("%s: %ld failing runs\n", fk->name, fired_runs);
    return fired_runs;
}

TEST(storage_io_1_1_model_self_check) {
    /* The model agrees with a clean run (no faults), version by version. */
    char *dir = rl_test_tmpdir("st-io");
    rl__storage *st;
    ASSERT_OK(open_dir(dir, &st));
    for (rl__version v = 1; v <= VERSIONS; v++) {
        ASSERT_OK(apply_version(st, v));
        check_state(st, "clean run", (long)v);
    }
    rl__storage_close(st);
    rl_test_rmtree(dir);
    free(dir);
}

TEST(storage_io_1_2_write_fails) {
    fault_kind fk = {"write EIO", RL_OS_WRITE, EIO, 0, RL_E_IO_ERROR};
    ASSERT_TRUE(sweep(&fk) >= 10);
}

TEST(storage_io_1_3_write_torn) {
    fault_kind fk = {"write torn EIO", RL_OS_WRITE, EIO, RL_OS_FAULT_TORN, RL_E_IO_ERROR};
    ASSERT_TRUE(sweep(&fk) >= 10);
}

TEST(storage_io_1_4_write_enospc) {
    fault_kind fk = {"write torn ENOSPC", RL_OS_WRITE, ENOSPC, RL_OS_FAULT_TORN, RL_E_NO_SPACE};
    ASSERT_TRUE(sweep(&fk) >= 10);
}

TEST(storage_io_1_5_fsync_fails) {
    fault_kind fk = {"fsync EIO", RL_OS_FSYNC, EIO, 0, RL_E_IO_ERROR};
    ASSERT_TRUE(sweep(&fk) >= 10);
}

TEST(storage_io_1_6_rename_fails) {
    fault_kind fk = {"rename EIO", RL_OS_RENAME, EIO, 0, RL_E_IO_ERROR};
    ASSERT_TRUE(sweep(&fk) >= 2); /* one explicit checkpoint and at least one automatic one */
}

TEST(storage_io_1_7_open_fails) {
    fault_kind fk = {"open EIO", RL_OS_OPEN, EIO, 0, RL_E_IO_ERROR};
    ASSERT_TRUE(sweep(&fk) >= 4);
}

/* Recovery itself meets a failure: a torn log tail must be truncated, and the ftruncate (or the
 * open before it) fails. Open must fail with RL_E_IO_ERROR and a message, and a later open
 * without faults must recover the same state. */
TEST(storage_io_2_1_recovery_truncate_fails) {
    rl__os_kind kinds[] = {RL_OS_FTRUNCATE, RL_OS_FSYNC};
    for (int k = 0; k < 2; k++) {
        char *dir = rl_test_tmpdir("st-io");
        rl__storage *st;
        ASSERT_OK(open_dir(dir, &st));
        for (rl__version v = 1; v <= 3; v++) ASSERT_OK(apply_version(st, v));
        ASSERT_OK(rl__storage_sync(st));
        /* A torn fourth record: the write fails halfway. */
        ASSERT_OK(apply_version(st, 4));
        capture cap;
        capture_begin(&cap, dir);
        rl__os_fault_arm(RL_OS_WRITE, 0, EIO, RL_OS_FAULT_TORN);
        ASSERT_RC(rl__storage_sync(st), RL_E_IO_ERROR);
        rl__os_fault_disarm();
        capture_end(&cap, "");
        rl__storage_close(st);

        rl__errdetail err;
        rl__errdetail_init(&err, NULL);
        rl__storage_options o = {0};
        o.dir = dir;
        capture_begin(&cap, dir);
        rl__os_fault_arm(kinds[k], 0, EIO, 0);
        int rc = rl__storage_open(&o, &st, &err);
        int fired = rl__os_fault_fired();
        rl__os_fault_disarm();
        capture_end(&cap, "");
        ASSERT_TRUE(fired);
        ASSERT_RC(rc, RL_E_IO_ERROR);
        if (!strstr(rl__errdetail_get(&err), "cannot truncate log")) fail_msg("message: %s", rl__errdetail_get(&err));
        ASSERT_OK(open_dir(dir, &st));
        ASSERT_EQ(rl__storage_latest_version(st), 3);
        check_state(st, "recovered after a failed recovery", 0);
        rl__storage_close(st);
        rl_test_rmtree(dir);
        free(dir);
    }
}

/* Recovery cannot read its files: each read() open makes (counted on a read-only probe) fails
 * in turn. Open must fail with RL_E_IO_ERROR and a "cannot read" message naming the file, and
 * leave the files as they were: a later open without faults recovers every version. */
TEST(storage_io_2_2_recovery_read_fails) {
    char *dir = rl_test_tmpdir("st-io");
    rl__storage *st;
    ASSERT_OK(open_dir(dir, &st));
    for (rl__version v = 1; v <= 12; v++) ASSERT_OK(apply_version(st, v));
    ASSERT_OK(rl__storage_sync(st));
    rl__storage_close(st);

    rl__storage_options o = {0};
    o.dir = dir;
    o.read_only = 1;
    rl__os_fault_arm(RL_OS_READ, -1, 0, 0); /* count only */
    ASSERT_OK(rl__storage_open(&o, &st, NULL));
    long reads = rl__os_fault_count(RL_OS_READ);
    ASSERT_FALSE(rl__os_fault_fired());
    rl__os_fault_disarm();
    rl__storage_close(st);
    ASSERT_TRUE(reads >= 1);

    o.read_only = 0;
    for (long i = 0; i < reads; i++) {
        rl__errdetail err;
        rl__errdetail_init(&err, NULL);
        rl__os_fault_arm(RL_OS_READ, i, EIO, 0);
        int rc = rl__storage_open(&o, &st, &err);
        int fired = rl__os_fault_fired();
        rl__os_fault_disarm();
        ASSERT_TRUE(fired);
        ASSERT_RC(rc, RL_E_IO_ERROR);
        if (!rl__errdetail_get(&err) || !strstr(rl__errdetail_get(&err), "cannot read"))
            fail_msg("read %ld: message: %s", i, rl__errdetail_get(&err) ? rl__errdetail_get(&err) : "(none)");
    }
    ASSERT_OK(open_dir(dir, &st));
    ASSERT_EQ(rl__storage_latest_version(st), 12);
    check_state(st, "recovered after failed reads", 12);
    rl__storage_close(st);
    rl_test_rmtree(dir);
    free(dir);
}

/* rl__os_write_file_atomic (port files, ENGINE, moved-in, rl cluster's files): every call it
 * makes fails in turn (open, write, fdatasync, rename, the directory's open and fsync). Each
 * failure returns the mapped code with "cannot write PATH" in the message and leaves the old
 * contents whole and no PATH.tmp behind, except a failed directory fsync, which comes after the
 * rename (the new contents are then in place, not yet durable). Without faults it replaces the
 * contents, an empty file included; a path too long is refused before any call. */
TEST(storage_io_3_1_write_file_atomic) {
    char *dir = rl_test_tmpdir("st-atomic");
    char path[4200], tmp[4300];
    snprintf(path, sizeof path, "%s/f", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    ASSERT_OK(rl__os_write_file_atomic(path, "old\n", 4, 0, "test", NULL));
    static const struct {
        rl__os_kind kind;
        long n;
        int err, rc, after_rename;
    } faults[] = {
        {RL_OS_OPEN, 0, EACCES, RL_E_IO_ERROR, 0}, {RL_OS_WRITE, 0, ENOSPC, RL_E_NO_SPACE, 0},
        {RL_OS_FSYNC, 0, EIO, RL_E_IO_ERROR, 0},   {RL_OS_RENAME, 0, EIO, RL_E_IO_ERROR, 0},
        {RL_OS_OPEN, 1, EIO, RL_E_IO_ERROR, 1},    {RL_OS_FSYNC, 1, EIO, RL_E_IO_ERROR, 1},
    };
    for (size_t i = 0; i < sizeof faults / sizeof faults[0]; i++) {
        ASSERT_OK(rl__os_write_file_atomic(path, "old\n", 4, 0, "test", NULL));
        rl__errdetail msg;
        rl__errdetail_init(&msg, NULL);
        rl__os_fault_arm(faults[i].kind, faults[i].n, faults[i].err, 0);
        int rc = rl__os_write_file_atomic(path, "new contents\n", 13, 0, "test", &msg);
        int fired = rl__os_fault_fired();
        rl__os_fault_disarm();
        if (!fired || rc != faults[i].rc) fail_msg("fault %zu: fired %d rc %s", i, fired, rl_error_name(rc));
        ASSERT_NOT_NULL(strstr(rl__errdetail_get(&msg), "cannot write "));
        ASSERT_NOT_NULL(strstr(rl__errdetail_get(&msg), path));
        ASSERT_TRUE(access(tmp, F_OK) != 0);
        uint8_t *got = NULL;
        size_t len = 0;
        ASSERT_OK(rl__os_read_file(path, &got, &len));
        if (faults[i].after_rename) ASSERT_MEM_EQ(got, len, "new contents\n", 13);
        else ASSERT_MEM_EQ(got, len, "old\n", 4);
        rl__free(got);
    }
    /* no_sync makes no fsync call at all. */
    rl__os_fault_arm(RL_OS_FSYNC, 0, EIO, 0);
    ASSERT_OK(rl__os_write_file_atomic(path, "", 0, 1, "test", NULL));
    ASSERT_FALSE(rl__os_fault_fired());
    rl__os_fault_disarm();
    uint8_t *got = NULL;
    size_t len = 1;
    ASSERT_OK(rl__os_read_file(path, &got, &len));
    ASSERT_EQ(len, 0);
    rl__free(got);
    char *long_path = rl__malloc(5000);
    memset(long_path, 'a', 4999);
    long_path[4999] = 0;
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    rl__os_fault_arm(RL_OS_OPEN, -1, 0, 0);
    ASSERT_RC(rl__os_write_file_atomic(long_path, "x", 1, 0, "test", &msg), RL_E_INVALID_ARGUMENT);
    ASSERT_EQ(rl__os_fault_count(RL_OS_OPEN), 0);
    rl__os_fault_disarm();
    ASSERT_NOT_NULL(strstr(rl__errdetail_get(&msg), "longer than"));
    rl__free(long_path);
    rl_test_rmtree(dir);
    free(dir);
}

RL_TEST_MAIN(T(storage_io_1_1_model_self_check), T(storage_io_1_2_write_fails), T(storage_io_1_3_write_torn),
             T(storage_io_1_4_write_enospc), T(storage_io_1_5_fsync_fails), T(storage_io_1_6_rename_fails),
             T(storage_io_1_7_open_fails), T(storage_io_2_1_recovery_truncate_fails),
             T(storage_io_2_2_recovery_read_fails), T(storage_io_3_1_write_file_atomic))
