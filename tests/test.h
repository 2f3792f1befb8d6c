/* test.h — the small test layer over cmocka shared by every test program.
 *
 *   TEST(name) { ... }                 defines a cmocka test function
 *   ASSERT_OK(expr)                     expr must return RL_OK; otherwise prints the error's name
 *   ASSERT_RC(expr, code)               expr must return exactly code
 *   ASSERT_EQ/NE/TRUE/FALSE/NULL/NOT_NULL, ASSERT_MEM_EQ(a, alen, b, blen)
 *   RL_TEST_MAIN(T(name), ...)         main(): runs the listed tests; argv[1] is a name filter
 *
 * Randomized tests take their seed from rl_test_seed(), which prints it ("seed = N") and honours
 * RL_SEED=N so a failure can be replayed. Backend-parameterized tests take their URL from
 * rl_test_url() (RL_TEST_URL, default "mem:").
 * Test IDs are hierarchical (tuple-1.2) and appear in the test names.
 */
#ifndef RL_TEST_H
#define RL_TEST_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "reclayer/error.h"
#include "reclayer/kv.h"

#define TEST(name) static void name(void **state_unused_##name __attribute__((unused)))

#define ASSERT_OK(expr)                                                                                         \
    do {                                                                                                        \
        int rc_ = (expr);                                                                                       \
        if (rc_ != 0) fail_msg("%s returned %d %s: %s", #expr, rc_, rl_error_name(rc_), rl_error_message(rc_)); \
    } while (0)

#define ASSERT_RC(expr, code)                                                                    \
    do {                                                                                         \
        int rc_ = (expr), want_ = (code);                                                        \
        if (rc_ != want_)                                                                        \
            fail_msg("%s returned %d %s, expected %d %s", #expr, rc_, rl_error_name(rc_), want_, \
                     rl_error_name(want_));                                                      \
    } while (0)

#define ASSERT_EQ(a, b) assert_int_equal((a), (b))
#define ASSERT_NE(a, b) assert_int_not_equal((a), (b))
#define ASSERT_TRUE(x) assert_true(x)
#define ASSERT_FALSE(x) assert_false(x)
#define ASSERT_NULL(x) assert_null(x)
#define ASSERT_NOT_NULL(x) assert_non_null(x)
#define ASSERT_STR_EQ(a, b) assert_string_equal((a), (b))
#define ASSERT_MEM_EQ(a, alen, b, blen)                          \
    do {                                                         \
        size_t al_ = (alen), bl_ = (blen);                       \
        if (al_ != bl_) fail_msg("length %zu != %zu", al_, bl_); \
        if (al_) assert_memory_equal((a), (b), al_);             \
    } while (0)

#define T(name) cmocka_unit_test(name)
#define RL_TEST_MAIN(...)                                                                    \
    int main(int argc, char **argv) {                                                        \
        const struct CMUnitTest tests_[] = {__VA_ARGS__};                                    \
        rl_test_init(argc, argv);                                                            \
        return cmocka_run_group_tests_name(rl_test_group_name(argv[0]), tests_, NULL, NULL); \
    }

/* Parse argv (argv[1]: a cmocka name filter, e.g. "tuple-1*"), take RL_TEST_SKIP (a cmocka
 * pattern of tests to leave out: ctest uses it to keep a benchmark of a test program out of the
 * default run, see CMakeLists.txt) and set up logging. */
void rl_test_init(int argc, char **argv);
/* The group name printed by cmocka: the program's base name. Static storage. */
const char *rl_test_group_name(const char *argv0);
/* The seed for randomized tests: RL_SEED if set, else from the clock. Printed on every call as
 * "seed = N (replay with RL_SEED=N)". */
uint64_t rl_test_seed(void);

/* rl_test_machine_busy — 1 when the 1-minute load average is above the number of CPUs (then it
 * prints both): tests that check a latency figure use a loose bound on a busy machine, since a
 * thread preempted for milliseconds makes any tight bound fail without a defect. */
int rl_test_machine_busy(void);
/* A small fast PRNG (splitmix64) for tests. */
uint64_t rl_test_rand(uint64_t *state);
/* Uniform in [0, n). */
uint64_t rl_test_rand_below(uint64_t *state, uint64_t n);
/* The backend URL under test: RL_TEST_URL, default "mem:". Static storage. */
const char *rl_test_url(void);
/* A file: URL without a directory ("file:" or "file:?engine=ssd") made concrete: a fresh
 * temporary directory (removed at exit) with the query kept, e.g. "file:/tmp/rltest-db-X?engine=
 * ssd". Any other URL is returned as it is. The result lives until exit. */
const char *rl_test_fresh_url(const char *url);
/* Absolute path of a file under tests/data (static buffer, overwritten by the next call). */
const char *rl_test_data_path(const char *rel);
/* Make a fresh empty directory under $TMPDIR (or /tmp); returns a heap string (free()). */
char *rl_test_tmpdir(const char *tag);
/* Remove a directory tree (best effort). */
void rl_test_rmtree(const char *path);
/* Path of a built program (rl, rlkvd, rlbench) in static storage. */
const char *rl_test_bin(const char *prog);
/* Run the built `rl` with the printf-formatted arguments, stderr merged into stdout. Returns its
 * exit code (-1 if it did not exit); *out (if out is not NULL) gets the output, NUL-terminated,
 * to free(). */
int rl_test_rl(char **out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The same for the built `rlbench`. */
int rl_test_rlbench(char **out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Run the built program prog (rl, rlbench, rlkvd) with the printf-formatted arguments (shell
 * words, already quoted), its stdout and stderr captured apart: *out and *err (each may be NULL
 * when not wanted) get them NUL-terminated, to free(). Returns the exit code (-1 if it did not
 * exit). */
int rl_test_run(const char *prog, char **out, char **err, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* rl_test_run_in — rl_test_run in directory dir (NULL: the test's), with the environment variable
 * RL_DB set to db_env (NULL: unset; the commands' default database, app/tool.h) and stdin read
 * from in_path (NULL: /dev/null). dir, db_env and in_path must not hold a single quote. */
int rl_test_run_in(const char *dir, const char *db_env, const char *in_path, const char *prog, char **out, char **err,
                   const char *fmt, ...) __attribute__((format(printf, 7, 8)));

/* rl_test_is_cluster — 1 if url is a cluster: URL (the servers outlive each test). */
static inline int rl_test_is_cluster(const char *url) { return url && !strncmp(url, "cluster:", 8); }

/* rl_test_clear_cluster — on a cluster: database, clear the user keyspace ["", "\xff") and the
 * system keys tests write (everything in ["\xff\x00", "\xff\xff") except the coordinator's
 * \xff/keyServers/, \xff/moveKeys/ and \xff/serverList/), retrying as rl_db_run does: a cluster
 * serves every test of a program (and the embedded backends start empty), so each test starts from an empty
 * keyspace. Returns RL_OK or the error. Header-only so that test programs that never open a
 * database do not link the KV layer. */
static inline int rl_test_clear_cluster_fn_(rl_txn *t, void *ctx) {
    (void)ctx;
    int rc = rl_txn_set_option(t, RL_TXN_OPT_ACCESS_SYSTEM_KEYS, 0);
#define RL_TEST_CLEAR_(b, e) rl_txn_clear_range(t, b, sizeof b - 1, e, sizeof e - 1)
    if (!rc) rc = RL_TEST_CLEAR_("", "\xff");
    if (!rc) rc = RL_TEST_CLEAR_("\xff\x00", "\xff/keyServers/");
    if (!rc) rc = RL_TEST_CLEAR_("\xff/keyServers0", "\xff/moveKeys/");
    if (!rc) rc = RL_TEST_CLEAR_("\xff/moveKeys0", "\xff/serverList/");
    if (!rc) rc = RL_TEST_CLEAR_("\xff/serverList0", "\xff\xff");
#undef RL_TEST_CLEAR_
    return rc;
}
static inline int rl_test_clear_cluster(rl_db *db) { return rl_db_run(db, rl_test_clear_cluster_fn_, NULL); }

/* rl_test_is_fdb — 1 if url is an fdb: URL: a FoundationDB cluster (RL_TEST_FDB_CLUSTER) or
 * reclayer behind its libfdb_c.so (RL_FDBC_URL); the MVCC window is the server's. */
static inline int rl_test_is_fdb(const char *url) { return url && !strncmp(url, "fdb:", 4); }

/* rl_test_clear_fdb — clear the user keyspace ["", "\xff") of an fdb: database (never
 * FoundationDB's system keyspace), retrying as rl_db_run does. */
static inline int rl_test_clear_fdb_fn_(rl_txn *t, void *ctx) {
    (void)ctx;
    return rl_txn_clear_range(t, "", 0, "\xff", 1);
}

/* rl_test_db_open — rl_db_open(rl_test_fresh_url(url), opts, out), then, when url is cluster:, rl_test_clear_cluster
 * (fdb:, rl_test_clear_fdb: a FoundationDB cluster outlives the tests too). Returns rl_db_open's
 * error, or the clear's (the database is then closed and *out NULL). */
static inline int rl_test_db_open(const char *url, const rl_db_options *opts, rl_db **out) {
    url = rl_test_fresh_url(url);
    int rc = rl_db_open(url, opts, out);
    if (rc || (!rl_test_is_cluster(url) && !rl_test_is_fdb(url))) return rc;
    rc = rl_test_is_fdb(url) ? rl_db_run(*out, rl_test_clear_fdb_fn_, NULL) : rl_test_clear_cluster(*out);
    if (rc) {
        fprintf(stderr, "rl_test_db_open: clearing the cluster's keyspace failed: %s\n", rl_error_name(rc));
        rl_db_close(*out);
        *out = NULL;
    }
    return rc;
}

#endif
