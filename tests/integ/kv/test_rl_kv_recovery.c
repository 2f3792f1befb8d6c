/* test_rl_kv_recovery.c — the exact reproductions with the
 * built `rl` (load, damage the directory, `rl kv status`, list the directory), and read-only
 * opening through the public API.
 *
 * `rl kv status` may open the database writable or read-only (the command-line parser decides),
 * so these tests assert what must hold either way: no data file is deleted, every byte of a
 * discarded log tail is still on disk (in the log, or in the side file the warning names), and
 * the errors and warnings name the files.
 *
 *   kv-13.1  a junk file named like a newer checkpoint: refused naming it, all files kept, and
 *            after removing it the database opens with all its keys
 *   kv-13.2  a missing checkpoint: refused naming it; log-1 kept
 *   kv-13.3  a flipped byte in the last, synced log record: opens, says "complete record with bad
 *            checksum", keeps the bytes, the status reports bad_checksum
 *   kv-13.4  a torn (short) last record: the same with "torn (short record)" and torn
 *   kv-13.5  rl_db_options.read_only: commits with writes fail with read_only_database, reads
 *            work, no file changes; an options struct too old to have the field is writable
 */
#include <dirent.h>
#include <stddef.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "reclayer/kv.h"
#include "test.h"

/* The loaded database all tests start from (made once, copied per test). */
static char *template_dir;

static const char *ckpt1 = "ckpt-0000000000000001";
static const char *log1 = "log-0000000000000001";

static off_t size_of(const char *dir, const char *name) {
    char p[4200];
    struct stat sb;
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return stat(p, &sb) == 0 ? sb.st_size : -1;
}

static uint8_t *slurp(const char *dir, const char *name, size_t *len) {
    char p[4200];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "rb");
    if (!f) fail_msg("cannot read %s", p);
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(*len + 1);
    ASSERT_NOT_NULL(b);
    ASSERT_EQ(fread(b, 1, *len, f), *len);
    fclose(f);
    return b;
}

static void spit(const char *dir, const char *name, const void *b, size_t len) {
    char p[4200];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    ASSERT_NOT_NULL(f);
    ASSERT_EQ(fwrite(b, 1, len, f), len);
    fclose(f);
}

/* A fresh copy of the loaded database (heap path, free()). The first call runs the issue's
 * `rl load --count 600 --padding 150000`, which leaves ckpt-1 and a non-empty log-1. */
static char *fresh_db(const char *tag) {
    char *out = NULL;
    if (!template_dir) {
        template_dir = rl_test_tmpdir("rlrec-template");
        int rc = rl_test_rl(&out, "load --db file:%s --count 600 --padding 150000", template_dir);
        if (rc != 0) fail_msg("rl load: exit %d: %s", rc, out);
        free(out);
        if (size_of(template_dir, ckpt1) <= 0 || size_of(template_dir, log1) <= 0)
            fail_msg("rl load did not leave %s and a non-empty %s", ckpt1, log1);
    }
    char *dir = rl_test_tmpdir(tag);
    char cmd[9000];
    snprintf(cmd, sizeof cmd, "cp -p '%s'/* '%s'/", template_dir, dir);
    ASSERT_EQ(system(cmd), 0);
    return dir;
}

/* `ls` of dir: sorted names, space-separated, into out (at most cap bytes). */
static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }
static void ls(const char *dir, char *out, size_t cap) {
    char *names[64];
    int n = 0;
    DIR *d = opendir(dir);
    ASSERT_NOT_NULL(d);
    struct dirent *de;
    while ((de = readdir(d)) != NULL && n < 64)
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) names[n++] = strdup(de->d_name);
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    out[0] = 0;
    for (int i = 0; i < n; i++) {
        strncat(out, names[i], cap - strlen(out) - 2);
        strncat(out, " ", cap - strlen(out) - 1);
        free(names[i]);
    }
}

/* The number after "\"name\": " in a status JSON, or -1. */
static long long json_num(const char *js, const char *name) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\": ", name);
    const char *p = strstr(js, pat);
    return p ? strtoll(p + strlen(pat), NULL, 10) : -1;
}

/* Byte offset where the last record of a log file starts (walking the length fields). */
static size_t last_record(const uint8_t *p, size_t n) {
    size_t off = 0, last = 0;
    while (off + 24 <= n) {
        last = off;
        uint32_t len = (uint32_t)p[off + 8] | (uint32_t)p[off + 9] << 8 | (uint32_t)p[off + 10] << 16 |
                       (uint32_t)p[off + 11] << 24;
        off += 24 + len;
    }
    ASSERT_EQ(off, n);
    return last;
}

/* ---- kv-13: recovery through `rl` -------------------------------------------------------- */

TEST(kv_13_1_junk_newer_checkpoint) {
    char *dir = fresh_db("rlrec-junk"), *out = NULL, names[1024], before[1024];
    ASSERT_EQ(rl_test_rl(&out, "kv --db file:%s status", dir), 0);
    long long keys = json_num(out, "keys"), latest = json_num(out, "latest_version");
    ASSERT_TRUE(keys > 0);
    free(out);
    off_t c1 = size_of(dir, ckpt1), l1 = size_of(dir, log1);
    spit(dir, "ckpt-00000000000000ff", "junk\n", 5);
    ls(dir, before, sizeof before);
    int rc = rl_test_rl(&out, "kv --db file:%s status", dir);
    ls(dir, names, sizeof names);
    if (rc == 0) fail_msg("status of a directory with a junk checkpoint exited 0: %s", out);
    if (!strstr(out, "ckpt-00000000000000ff")) fail_msg("the error does not name the file: %s", out);
    free(out);
    ASSERT_STR_EQ(names, before);
    ASSERT_EQ(size_of(dir, ckpt1), c1);
    ASSERT_EQ(size_of(dir, log1), l1);
    ASSERT_EQ(size_of(dir, "ckpt-00000000000000ff"), 5);
    /* Without the junk, every key is back. */
    char p[4200];
    snprintf(p, sizeof p, "%s/ckpt-00000000000000ff", dir);
    ASSERT_EQ(unlink(p), 0);
    ASSERT_EQ(rl_test_rl(&out, "kv --db file:%s status", dir), 0);
    ASSERT_EQ(json_num(out, "keys"), keys);
    ASSERT_EQ(json_num(out, "latest_version"), latest);
    free(out);
    rl_test_rmtree(dir);
    free(dir);
}

TEST(kv_13_2_missing_checkpoint) {
    char *dir = fresh_db("rlrec-missing"), *out = NULL, names[1024], before[1024];
    char p[4200];
    snprintf(p, sizeof p, "%s/%s", dir, ckpt1);
    ASSERT_EQ(unlink(p), 0);
    off_t l1 = size_of(dir, log1);
    ls(dir, before, sizeof before);
    int rc = rl_test_rl(&out, "kv --db file:%s status", dir);
    ls(dir, names, sizeof names);
    if (rc == 0) fail_msg("status without %s exited 0: %s", ckpt1, out);
    if (!strstr(out, ckpt1) || !strstr(out, "missing"))
        fail_msg("the error does not name the missing checkpoint: %s", out);
    ASSERT_NULL(strstr(out, "\"keys\": 0"));
    free(out);
    ASSERT_STR_EQ(names, before);
    ASSERT_EQ(size_of(dir, log1), l1);
    rl_test_rmtree(dir);
    free(dir);
}

/* Damage the last record of log-1 (flip a byte in it, or cut `cut` bytes off its end), run
 * `rl kv status`, and check that it opens, that the output says `kind` and names the log, that
 * the status reports `tail`, and that every damaged byte is still on disk: in the log at its
 * offset, or in a side file named in the output. */
static void damaged_tail(const char *tag, int flip, size_t cut, const char *kind, const char *tail) {
    char *dir = fresh_db(tag), *out = NULL;
    size_t n;
    uint8_t *b = slurp(dir, log1, &n);
    size_t off = last_record(b, n);
    if (flip) b[off + 24 + (n - off - 24) / 2] ^= 0x01;
    n -= cut;
    spit(dir, log1, b, n);
    int rc = rl_test_rl(&out, "kv --db file:%s status", dir);
    if (rc != 0) fail_msg("status exited %d: %s", rc, out);
    if (!strstr(out, kind) || !strstr(out, log1)) fail_msg("no warning naming the log: %s", out);
    char want[64];
    snprintf(want, sizeof want, "\"log_tail\": \"%s\"", tail);
    if (!strstr(out, want)) fail_msg("the status does not report %s: %s", want, out);
    off_t now = size_of(dir, log1);
    if (now == (off_t)n) {
        /* Left in place (a read-only open): the log is unchanged. */
        size_t m;
        uint8_t *c = slurp(dir, log1, &m);
        ASSERT_MEM_EQ(c, m, b, n);
        free(c);
    } else {
        ASSERT_EQ(now, (off_t)off);
        char side[128];
        snprintf(side, sizeof side, "%s.discarded-%zu", log1, off);
        if (!strstr(out, side)) fail_msg("the warning does not name %s: %s", side, out);
        size_t m;
        uint8_t *c = slurp(dir, side, &m);
        ASSERT_MEM_EQ(c, m, b + off, n - off);
        free(c);
    }
    ASSERT_TRUE(size_of(dir, ckpt1) > 0);
    free(out);
    free(b);
    rl_test_rmtree(dir);
    free((void *)dir);
}

TEST(kv_13_3_bad_checksum_last_record) {
    damaged_tail("rlrec-badsum", 1, 0, "complete record with bad checksum", "bad_checksum");
}

TEST(kv_13_4_torn_last_record) { damaged_tail("rlrec-torn", 0, 5, "torn (short record)", "torn"); }

/* ---- kv-13.5: read-only through the public API ------------------------------------------- */

static int commit_set(rl_db *db, const char *key, int conflict_only) {
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(db, &t));
    if (conflict_only) ASSERT_OK(rl_txn_add_conflict_range(t, key, strlen(key), "z", 1, RL_CONFLICT_WRITE));
    else ASSERT_OK(rl_txn_set(t, key, strlen(key), "v", 1));
    rl_future *f = rl_txn_commit(t);
    int rc = rl_future_wait(f);
    if (rc == RL_OK) rc = rl_future_get_error(f);
    rl_future_free(f);
    rl_txn_free(t);
    return rc;
}

TEST(kv_13_5_read_only_database) {
    char *dir = rl_test_tmpdir("rlrec-ro"), url[4200], before[1024], after[1024];
    snprintf(url, sizeof url, "file:%s", dir);
    rl_db *db;
    ASSERT_OK(rl_db_open(url, NULL, &db));
    ASSERT_OK(commit_set(db, "a", 0));
    rl_db_close(db);
    ls(dir, before, sizeof before);
    off_t l0 = size_of(dir, "log-0000000000000000");

    rl_db_options o;
    memset(&o, 0, sizeof o);
    o.size = sizeof o;
    o.read_only = 1;
    ASSERT_OK(rl_db_open(url, &o, &db));
    ASSERT_RC(commit_set(db, "b", 0), RL_E_READ_ONLY_DATABASE);
    ASSERT_RC(commit_set(db, "b", 1), RL_E_READ_ONLY_DATABASE);
    /* Reads and a read-only commit work. */
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(db, &t));
    rl_future *f = rl_txn_get(t, "a", 1, 0);
    ASSERT_OK(rl_future_wait(f));
    int present, len;
    const uint8_t *v;
    ASSERT_OK(rl_future_get_value(f, &present, &v, &len));
    ASSERT_TRUE(present);
    ASSERT_MEM_EQ(v, (size_t)len, "v", 1);
    rl_future_free(f);
    f = rl_txn_commit(t);
    ASSERT_OK(rl_future_wait(f));
    ASSERT_OK(rl_future_get_error(f));
    rl_future_free(f);
    rl_txn_free(t);
    char *js;
    ASSERT_OK(rl_db_status_json(db, &js));
    if (!strstr(js, "\"read_only\": true")) fail_msg("status: %s", js);
    rl_free(js);
    /* Readers take no lock: another reader and a writer open beside them. */
    rl_db *db2, *w = NULL;
    ASSERT_OK(rl_db_open(url, &o, &db2));
    ASSERT_OK(rl_db_open(url, NULL, &w));
    rl_db_close(w);
    rl_db_close(db2);
    rl_db_close(db);
    ls(dir, after, sizeof after);
    ASSERT_STR_EQ(after, before);
    ASSERT_EQ(size_of(dir, "log-0000000000000000"), l0);

    /* A caller built before read_only existed (size ends before it) gets a writable database,
     * whatever the bytes where the field would be. */
    o.size = (uint32_t)offsetof(rl_db_options, read_only);
    ASSERT_OK(rl_db_open(url, &o, &db));
    ASSERT_OK(commit_set(db, "c", 0));
    rl_db_close(db);
    rl_test_rmtree(dir);
    free(dir);
}

static int cleanup(void **state) {
    (void)state;
    if (template_dir) rl_test_rmtree(template_dir);
    free(template_dir);
    template_dir = NULL;
    return 0;
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {T(kv_13_1_junk_newer_checkpoint), T(kv_13_2_missing_checkpoint),
                                       T(kv_13_3_bad_checksum_last_record), T(kv_13_4_torn_last_record),
                                       T(kv_13_5_read_only_database)};
    rl_test_init(argc, argv);
    return cmocka_run_group_tests_name(rl_test_group_name(argv[0]), tests, NULL, cleanup);
}
