/* test_rl_kv.c — `rl kv` end to end: the real program on a file: database, each command in its
 * own process, output and exit codes checked. */
#include <stdlib.h>
#include <sys/wait.h>

#include "reclayer/kv.h"
#include "test.h"

static char dir_url[4200];

/* Run `rl kv --db URL ARGS` (args already shell-quoted); capture stdout into out (NUL-terminated)
 * and return the exit code. */
static int rl_kv(char *out, size_t cap, const char *args) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' kv --db '%s' %s 2>/dev/null", rl_test_bin("rl"), dir_url, args);
    FILE *p = popen(cmd, "r");
    ASSERT_NOT_NULL(p);
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = 0;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

TEST(kv_10_1_rl_kv_commands) {
    char *dir = rl_test_tmpdir("rlkv");
    snprintf(dir_url, sizeof dir_url, "file:%s", dir);
    char out[4096];
    ASSERT_EQ(rl_kv(out, sizeof out, "set 'a\\x00b' 'v\\xff1'"), 0);
    ASSERT_TRUE(strstr(out, "committed at version") != NULL);
    ASSERT_EQ(rl_kv(out, sizeof out, "set b 2"), 0);
    ASSERT_EQ(rl_kv(out, sizeof out, "set c 3"), 0);
    ASSERT_EQ(rl_kv(out, sizeof out, "get 'a\\x00b'"), 0);
    ASSERT_STR_EQ(out, "v\\xff1\n");
    ASSERT_EQ(rl_kv(out, sizeof out, "range '' '\\xff'"), 0);
    ASSERT_STR_EQ(out, "a\\x00b\tv\\xff1\nb\t2\nc\t3\n");
    ASSERT_EQ(rl_kv(out, sizeof out, "range '' '\\xff' --limit 2 --reverse"), 0);
    ASSERT_STR_EQ(out, "c\t3\nb\t2\n");
    ASSERT_EQ(rl_kv(out, sizeof out, "getkey fgt b"), 0);
    ASSERT_STR_EQ(out, "c\n");
    ASSERT_EQ(rl_kv(out, sizeof out, "getkey last_less_than b"), 0);
    ASSERT_STR_EQ(out, "a\\x00b\n");
    ASSERT_EQ(rl_kv(out, sizeof out, "getkey fge a 2"), 0);
    ASSERT_STR_EQ(out, "c\n");
    ASSERT_EQ(rl_kv(out, sizeof out, "clearrange b c"), 0);
    ASSERT_EQ(rl_kv(out, sizeof out, "get b"), 1);
    ASSERT_EQ(rl_kv(out, sizeof out, "clear c"), 0);
    ASSERT_EQ(rl_kv(out, sizeof out, "range '' '\\xff'"), 0);
    ASSERT_STR_EQ(out, "a\\x00b\tv\\xff1\n");
    ASSERT_EQ(rl_kv(out, sizeof out, "--tuple set '[{\"string\":\"t\"},{\"int\":\"7\"}]' x"), 0);
    ASSERT_EQ(rl_kv(out, sizeof out, "--tuple range '[{\"string\":\"t\"}]' '[{\"string\":\"u\"}]'"), 0);
    ASSERT_STR_EQ(out, "[{\"string\":\"t\"},{\"int\":\"7\"}]\tx\n");
    ASSERT_EQ(rl_kv(out, sizeof out, "status"), 0);
    ASSERT_TRUE(strstr(out, "\"durable\": true") != NULL);
    /* Errors and usage. */
    ASSERT_EQ(rl_kv(out, sizeof out, "set '\\xff' x"), 1);
    ASSERT_EQ(rl_kv(out, sizeof out, "get"), 2);
    ASSERT_EQ(rl_kv(out, sizeof out, "frobnicate"), 2);
    ASSERT_EQ(rl_kv(out, sizeof out, "get '\\xZZ'"), 2);
    ASSERT_EQ(rl_kv(out, sizeof out, "getkey sideways a"), 2);
    ASSERT_EQ(rl_kv(out, sizeof out, "--help"), 0);
    ASSERT_TRUE(strstr(out, "clearrange") != NULL);
    rl_test_rmtree(dir);
    snprintf(dir_url, sizeof dir_url, "file:%s", dir); /* now missing */
    ASSERT_EQ(rl_kv(out, sizeof out, "get a"), 1);
    free(dir);
}

/* kv-10.2: `rl kv size` and `rl kv split` (docs/design.md §4, "Size estimates"): 40 pairs of
 * 30,003 bytes, each above the sampling threshold 250 * (3 + 100), so the byte sample holds each
 * with its exact size and the answers are exact; after a restart of the process too. */
TEST(kv_10_2_rl_kv_size_split) {
    char *dir = rl_test_tmpdir("rlkvsz");
    snprintf(dir_url, sizeof dir_url, "file:%s", dir);
    rl_db *db;
    ASSERT_OK(rl_db_open(dir_url, NULL, &db));
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(db, &t));
    static char val[30000];
    memset(val, 'v', sizeof val);
    for (int i = 0; i < 40; i++) {
        char k[8];
        snprintf(k, sizeof k, "p%02d", i);
        ASSERT_OK(rl_txn_set(t, k, 3, val, sizeof val));
    }
    rl_future *f = rl_txn_commit(t);
    ASSERT_OK(rl_future_wait(f));
    rl_future_free(f);
    rl_txn_free(t);
    rl_db_close(db);
    char out[4096];
    ASSERT_EQ(rl_kv(out, sizeof out, "size '' '\\xff'"), 0);
    ASSERT_STR_EQ(out, "1200120\n");
    ASSERT_EQ(rl_kv(out, sizeof out, "size p10 p20"), 0);
    ASSERT_STR_EQ(out, "300030\n");
    ASSERT_EQ(rl_kv(out, sizeof out, "split p q 100000"), 0);
    ASSERT_STR_EQ(out, "p\np03\np06\np09\np12\np15\np18\np21\np24\np27\np30\np33\np36\np39\nq\n");
    ASSERT_EQ(rl_kv(out, sizeof out, "split q p 100000"), 1); /* inverted_range */
    ASSERT_EQ(rl_kv(out, sizeof out, "split p q 0"), 2);
    rl_test_rmtree(dir);
    free(dir);
}

RL_TEST_MAIN(T(kv_10_1_rl_kv_commands), T(kv_10_2_rl_kv_size_split))
