/* test_kv_io.c — injected I/O failures (storage/os.h) under the KV API on a `file:` database.
 *
 * Commit i (through rl_db_run) sets a and b to "val-i", sets k<i> and ADDs 1 to count; small
 * checkpoint_log_bytes make checkpoints happen inside commits. For each kind of failure (write,
 * torn write with ENOSPC, fsync, rename) and N = 0, 1, 2, ... until the workload completes
 * without the failure firing:
 *   - the commit that met the failure returns an error (RL_E_IO_ERROR), never RL_OK, and every
 *     later commit fails too (the database is poisoned); reads keep working;
 *   - after close and reopen without faults, every acknowledged commit is there, and the
 *     database is the state after some commit c >= the last acknowledged one: a == b ==
 *     "val-c", count == c, k1..kc present and nothing after (each commit whole or absent).
 */
#include <errno.h>
#include <stdlib.h>

#include "storage/os.h"
#include "../../unit/kv/kvtest.h"

#define COMMITS 16

typedef struct {
    int i;
} commit_ctx;

static int commit_fn(rl_txn *t, void *p) {
    const commit_ctx *c = p;
    char val[32], k[16];
    int vl = snprintf(val, sizeof val, "val-%d", c->i);
    int kl = snprintf(k, sizeof k, "k%02d", c->i);
    int rc = rl_txn_set(t, "a", 1, val, (size_t)vl);
    if (rc == RL_OK) rc = rl_txn_set(t, "b", 1, val, (size_t)vl);
    if (rc == RL_OK) rc = rl_txn_set(t, k, (size_t)kl, val, (size_t)vl);
    if (rc == RL_OK) rc = rl_txn_atomic_op(t, "count", 5, "\x01\0\0\0", 4, RL_ATOMIC_ADD);
    return rc;
}

static rl_db *open_db(const char *dir) {
    char url[4200];
    const char *fo = getenv("RL_TEST_FILE_OPTS"); /* e.g. "?engine=ssd" (ctest _ssd) */
    snprintf(url, sizeof url, "file:%s%s", dir, fo ? fo : "");
    rl_db_options o = {0};
    o.size = sizeof o;
    o.checkpoint_log_bytes = 600; /* a checkpoint every few commits */
    rl_db *db = NULL;
    ASSERT_OK(rl_db_open(url, &o, &db));
    return db;
}

/* The database equals the state after commit c, for some c >= acked; returns c. */
static int check_whole(rl_db *db, int acked, const char *what, long n) {
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(db, &t));
    int present, len;
    char buf[64], a[64], b[64];
    int alen = 0, blen = 0;
    ASSERT_OK(kvt_get(t, "count", 5, 0, &present, buf, sizeof buf, &len));
    int c = 0;
    if (present) {
        ASSERT_EQ(len, 4);
        c = (uint8_t)buf[0] | (uint8_t)buf[1] << 8;
    }
    if (c < acked) fail_msg("%s N=%ld: acknowledged commit %d lost (count %d)", what, n, acked, c);
    ASSERT_OK(kvt_get(t, "a", 1, 0, &present, a, sizeof a, &alen));
    ASSERT_EQ(present, c > 0);
    ASSERT_OK(kvt_get(t, "b", 1, 0, &present, b, sizeof b, &blen));
    ASSERT_EQ(present, c > 0);
    if (c > 0) {
        char want[32];
        int wl = snprintf(want, sizeof want, "val-%d", c);
        ASSERT_MEM_EQ(a, (size_t)alen, want, (size_t)wl);
        ASSERT_MEM_EQ(b, (size_t)blen, want, (size_t)wl);
    }
    for (int i = 1; i <= COMMITS + 1; i++) {
        char k[16];
        int kl = snprintf(k, sizeof k, "k%02d", i);
        ASSERT_OK(kvt_get(t, k, (size_t)kl, 0, &present, buf, sizeof buf, &len));
        if (present != (i <= c))
            fail_msg("%s N=%ld: k%02d %s but count is %d", what, n, i, present ? "present" : "absent", c);
    }
    rl_txn_free(t);
    return c;
}

static long sweep(const char *name, rl__os_kind kind, int err, int flags) {
    long fired_runs = 0;
    for (long n = 0;; n++) {
        char *dir = rl_test_tmpdir("kv-io");
        rl_db *db = open_db(dir);
        int acked = 0, failed_at = 0;
        rl__os_fault_arm(kind, n, err, flags);
        for (int i = 1; i <= COMMITS; i++) {
            commit_ctx c = {i};
            int rc = rl_db_run(db, commit_fn, &c);
            if (rc == RL_OK) {
                acked = i;
                continue;
            }
            if (rc != RL_E_IO_ERROR && rc != RL_E_NO_SPACE)
                fail_msg("%s N=%ld: commit %d returned %s", name, n, i, rl_error_name(rc));
            failed_at = i;
            break;
        }
        int fired = rl__os_fault_fired();
        rl__os_fault_disarm();
        if (fired != (failed_at != 0))
            fail_msg("%s N=%ld: fault fired %d but commit failed at %d", name, n, fired, failed_at);
        if (failed_at) {
            fired_runs++;
            /* Poisoned: the next commit fails as well; reads still work. */
            commit_ctx c = {failed_at + 1};
            int rc = rl_db_run(db, commit_fn, &c);
            if (rc == RL_OK) fail_msg("%s N=%ld: a commit succeeded after an I/O error", name, n);
            check_whole(db, acked, "poisoned", n);
        }
        rl_db_close(db);
        db = open_db(dir);
        int c = check_whole(db, acked, name, n);
        if (!failed_at) ASSERT_EQ(c, COMMITS);
        rl_db_close(db);
        rl_test_rmtree(dir);
        free(dir);
        if (!fired) break;
    }
    printf("%s: %ld failing runs\n", name, fired_runs);
    return fired_runs;
}

/* 1 when the run is on the ssd engine (RL_TEST_FILE_OPTS names it). */
static int on_ssd(void) {
    const char *fo = getenv("RL_TEST_FILE_OPTS");
    return fo && strstr(fo, "engine=ssd") != NULL;
}

/* The ssd engine writes fewer log bytes (a flush to LMDB drops the records not yet written, and
 * LMDB's own writes are outside storage/os.h), so fewer runs meet a write failure. */
TEST(kv_io_1_1_write) { ASSERT_TRUE(sweep("write EIO", RL_OS_WRITE, EIO, 0) >= (on_ssd() ? COMMITS / 2 : COMMITS)); }
TEST(kv_io_1_2_write_torn_enospc) {
    ASSERT_TRUE(sweep("write torn ENOSPC", RL_OS_WRITE, ENOSPC, RL_OS_FAULT_TORN) >=
                (on_ssd() ? COMMITS / 2 : COMMITS));
}
TEST(kv_io_1_3_fsync) { ASSERT_TRUE(sweep("fsync EIO", RL_OS_FSYNC, EIO, 0) >= COMMITS); }
/* The memory engine renames each checkpoint into place; the ssd engine renames nothing after it
 * has recorded ENGINE (its flushes are LMDB commits, outside storage/os.h): only the runs that
 * met the failure count, and they must behave as the others. */
TEST(kv_io_1_4_rename) {
    long want = on_ssd() ? 0 : 2;
    ASSERT_TRUE(sweep("rename EIO", RL_OS_RENAME, EIO, 0) >= want);
}

RL_TEST_MAIN(T(kv_io_1_1_write), T(kv_io_1_2_write_torn_enospc), T(kv_io_1_3_fsync), T(kv_io_1_4_rename))
