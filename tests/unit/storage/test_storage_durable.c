/* test_storage_durable.c — the `memory` engine with a directory: reopen equals, checkpoints,
 * torn tails at every byte, corruption of log and checkpoint (every byte), lock, missing dir.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "storage/storage.h"
#include "test.h"

static int open_dir(const char *dir, uint64_t ckpt_bytes, rl__storage **st, rl__errdetail *err) {
    rl__storage_options o = {0};
    o.dir = dir;
    o.no_sync = 1; /* these tests check formats, not power loss; the crash test syncs */
    o.checkpoint_log_bytes = ckpt_bytes;
    return rl__storage_open(&o, st, err);
}

/* Every key-value at the latest version, serialized, into out. */
static void dump(rl__storage *st, rl_buf *out) {
    rl_arena a;
    rl__arena_init(&a, 0);
    rl_keyvalue *kvs;
    int n, more;
    rl__buf_reset(out);
    rl__buf_append_u64be(out, rl__storage_latest_version(st));
    ASSERT_OK(rl__storage_get_range(st, rl__storage_latest_version(st), "", 0, "\xff\xff\xff", 3, 0, 0, 0, &a, &kvs, &n,
                                    &more));
    for (int i = 0; i < n; i++) {
        rl__buf_append_u32be(out, kvs[i].key_len);
        rl__buf_append(out, kvs[i].key, kvs[i].key_len);
        rl__buf_append_u32be(out, kvs[i].value_len);
        rl__buf_append(out, kvs[i].value, kvs[i].value_len);
    }
    rl__arena_release(&a);
}

/* Apply one pseudo-random version: a few sets, sometimes a clear_range and an ADD. */
static void write_version(rl__storage *st, rl__version v, uint64_t *rng) {
    rl__mutation m[5];
    char k[5][16], val[5][32];
    int n = 0;
    for (int i = 0; i < 3; i++) {
        snprintf(k[n], sizeof k[n], "k%03d", (int)rl_test_rand_below(rng, 200));
        int vl = snprintf(val[n], sizeof val[n], "v%llu-%d", (unsigned long long)v, i);
        m[n] = (rl__mutation){RL_MUT_SET, (const uint8_t *)k[n], 4, (const uint8_t *)val[n], (uint32_t)vl};
        n++;
    }
    if (rl_test_rand_below(rng, 4) == 0) {
        snprintf(k[n], sizeof k[n], "k%03d", (int)rl_test_rand_below(rng, 200));
        m[n] = (rl__mutation){RL_MUT_CLEAR_RANGE, (const uint8_t *)k[n], 4, (const uint8_t *)"k1", 2};
        if (memcmp(k[n], "k1", 2) > 0) m[n].p2 = (const uint8_t *)"k2";
        n++;
    }
    m[n++] = (rl__mutation){RL_MUT_ADD, (const uint8_t *)"counter", 7, (const uint8_t *)"\x01\x00\x00", 3};
    ASSERT_OK(rl__storage_apply(st, v, m, (size_t)n));
}

static char *log_path(const char *dir, uint64_t seq) {
    char *p = rl__malloc(strlen(dir) + 32);
    sprintf(p, "%s/log-%016llx", dir, (unsigned long long)seq);
    return p;
}
static char *ckpt_path(const char *dir, uint64_t seq) {
    char *p = rl__malloc(strlen(dir) + 32);
    sprintf(p, "%s/ckpt-%016llx", dir, (unsigned long long)seq);
    return p;
}

static uint8_t *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    ASSERT_NOT_NULL(f);
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *p = rl__malloc(*len + 1);
    ASSERT_EQ(fread(p, 1, *len, f), *len);
    fclose(f);
    return p;
}
static void spit(const char *path, const uint8_t *p, size_t len) {
    FILE *f = fopen(path, "wb");
    ASSERT_NOT_NULL(f);
    ASSERT_EQ(fwrite(p, 1, len, f), len);
    fclose(f);
}
static off_t file_size(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 ? sb.st_size : -1;
}

/* ---- durable-1: reopen ------------------------------------------------------------------- */

TEST(durable_1_1_reopen_equals) {
    uint64_t rng = rl_test_seed();
    char *dir = rl_test_tmpdir("st-reopen");
    rl__storage *st;
    rl_buf before, after;
    rl__buf_init(&before);
    rl__buf_init(&after);
    ASSERT_OK(open_dir(dir, 0, &st, NULL));
    for (rl__version v = 1; v <= 300; v++) write_version(st, v * 10, &rng);
    ASSERT_OK(rl__storage_sync(st));
    dump(st, &before);
    rl__storage_close(st);
    ASSERT_OK(open_dir(dir, 0, &st, NULL));
    dump(st, &after);
    ASSERT_MEM_EQ(after.data, after.len, before.data, before.len);
    ASSERT_EQ(rl__storage_latest_version(st), 3000);
    /* Writing continues after the recovered tail. */
    write_version(st, 3001, &rng);
    ASSERT_OK(rl__storage_sync(st));
    dump(st, &before);
    rl__storage_close(st);
    ASSERT_OK(open_dir(dir, 0, &st, NULL));
    dump(st, &after);
    ASSERT_MEM_EQ(after.data, after.len, before.data, before.len);
    rl__storage_close(st);
    rl__buf_release(&before);
    rl__buf_release(&after);
    rl_test_rmtree(dir);
    free(dir);
}

TEST(durable_1_2_checkpoints) {
    uint64_t rng = rl_test_seed();
    char *dir = rl_test_tmpdir("st-ckpt");
    rl__storage *st;
    rl_buf before, after;
    rl__buf_init(&before);
    rl__buf_init(&after);
    ASSERT_OK(open_dir(dir, 4096, &st, NULL)); /* a checkpoint every 4 KiB of log */
    for (rl__version v = 1; v <= 500; v++) {
        write_version(st, v, &rng);
        if (v % 7 == 0) ASSERT_OK(rl__storage_sync(st));
        if (v == 250) ASSERT_OK(rl__storage_checkpoint(st));
    }
    ASSERT_OK(rl__storage_sync(st));
    rl__storage_status s;
    rl__storage_get_status(st, &s);
    ASSERT_TRUE(s.checkpoints >= 10);
    ASSERT_TRUE(s.checkpoint_version > 400);
    ASSERT_TRUE(s.log_bytes > 0); /* some log after the last checkpoint */
    dump(st, &before);
    rl__storage_close(st);
    ASSERT_OK(open_dir(dir, 4096, &st, NULL));
    dump(st, &after);
    ASSERT_MEM_EQ(after.data, after.len, before.data, before.len);
    rl__storage_status s2;
    rl__storage_get_status(st, &s2);
    ASSERT_EQ(s2.checkpoint_version, s.checkpoint_version);
    ASSERT_EQ(s2.keys, s.keys);
    ASSERT_EQ(s2.bytes, s.bytes);
    /* Only the newest pair of files remains. */
    int files = 0;
    for (uint64_t q = 0; q < 1000; q++) {
        char *p = ckpt_path(dir, q), *l = log_path(dir, q);
        files += (file_size(p) >= 0) + (file_size(l) >= 0);
        rl__free(p);
        rl__free(l);
    }
    ASSERT_EQ(files, 2);
    rl__storage_close(st);
    /* A checkpoint of an empty database reopens empty. */
    rl_test_rmtree(dir);
    free(dir);
    dir = rl_test_tmpdir("st-ckpt-empty");
    ASSERT_OK(open_dir(dir, 0, &st, NULL));
    ASSERT_OK(rl__storage_checkpoint(st));
    rl__storage_close(st);
    ASSERT_OK(open_dir(dir, 0, &st, NULL));
    rl__storage_get_status(st, &s);
    ASSERT_EQ(s.keys, 0);
    ASSERT_EQ(s.checkpoints, 0);
    rl__storage_close(st);
    rl__buf_release(&before);
    rl__buf_release(&after);
    rl_test_rmtree(dir);
    free(dir);
}

/* ---- durable-2: torn tails and corruption ------------------------------------------------- */

TEST(durable_2_1_torn_tail) {
    uint64_t rng = rl_test_seed();
    char *dir = rl_test_tmpdir("st-torn");
    rl__storage *st;
    rl_buf want, got;
    rl__buf_init(&want);
    rl__buf_init(&got);
    ASSERT_OK(open_dir(dir, 0, &st, NULL));
    for (rl__version v = 1; v <= 20; v++) write_version(st, v, &rng);
    ASSERT_OK(rl__storage_sync(st));
    dump(st, &want);
    rl__storage_status s;
    rl__storage_get_status(st, &s);
    size_t l1 = s.log_bytes;
    write_version(st, 21, &rng);
    ASSERT_OK(rl__storage_sync(st));
    rl__storage_close(st);
    char *lp = log_path(dir, 0);
    size_t full;
    uint8_t *bytes = slurp(lp, &full);
    ASSERT_TRUE(full > l1);
    for (size_t cut = l1; cut < full; cut++) {
        spit(lp, bytes, cut);
        rl__errdetail err;
        rl__errdetail_init(&err, NULL);
        int rc = open_dir(dir, 0, &st, &err);
        if (rc != RL_OK) fail_msg("cut %zu: %s (%s)", cut, rl_error_name(rc), rl__errdetail_get(&err));
        dump(st, &got);
        ASSERT_MEM_EQ(got.data, got.len, want.data, want.len);
        ASSERT_EQ(file_size(lp), (off_t)l1); /* the torn bytes were truncated away */
        rl__storage_close(st);
    }
    /* The complete log has version 21. */
    spit(lp, bytes, full);
    ASSERT_OK(open_dir(dir, 0, &st, NULL));
    ASSERT_EQ(rl__storage_latest_version(st), 21);
    rl__storage_close(st);
    rl__free(bytes);
    rl__free(lp);
    rl__buf_release(&want);
    rl__buf_release(&got);
    rl_test_rmtree(dir);
    free(dir);
}

TEST(durable_2_2_corrupt_middle_record) {
    uint64_t rng = rl_test_seed();
    char *dir = rl_test_tmpdir("st-corrupt");
    rl__storage *st;
    rl__storage_status s;
    ASSERT_OK(open_dir(dir, 0, &st, NULL));
    write_version(st, 1, &rng);
    ASSERT_OK(rl__storage_sync(st));
    rl__storage_get_status(st, &s);
    size_t b = s.log_bytes;
    write_version(st, 2, &rng);
    ASSERT_OK(rl__storage_sync(st));
    rl__storage_get_status(st, &s);
    size_t e = s.log_bytes;
    write_version(st, 3, &rng);
    ASSERT_OK(rl__storage_sync(st));
    rl__storage_close(st);
    char *lp = log_path(dir, 0);
    size_t full;
    uint8_t *bytes = slurp(lp, &full);
    char want[64];
    snprintf(want, sizeof want, "byte offset %zu", b);
    for (size_t i = b; i < e; i++) {
        bytes[i] ^= 0x40;
        spit(lp, bytes, full);
        bytes[i] ^= 0x40;
        rl__errdetail err;
        rl__errdetail_init(&err, NULL);
        st = NULL;
        int rc = open_dir(dir, 0, &st, &err);
        if (rc != RL_E_LOG_CORRUPT) fail_msg("flip at %zu: got %s", i, rl_error_name(rc));
        ASSERT_NULL(st);
        ASSERT_NOT_NULL(strstr(rl__errdetail_get(&err), "log-0000000000000000"));
        ASSERT_NOT_NULL(strstr(rl__errdetail_get(&err), want));
    }
    /* The file is untouched by the failed opens: restoring it opens fine. */
    spit(lp, bytes, full);
    ASSERT_OK(open_dir(dir, 0, &st, NULL));
    ASSERT_EQ(rl__storage_latest_version(st), 3);
    rl__storage_close(st);
    rl__free(bytes);
    rl__free(lp);
    rl_test_rmtree(dir);
    free(dir);
}

TEST(durable_2_3_corrupt_checkpoint) {
    uint64_t rng = rl_test_seed();
    char *dir = rl_test_tmpdir("st-ckcorrupt");
    rl__storage *st;
    ASSERT_OK(open_dir(dir, 0, &st, NULL));
    for (rl__version v = 1; v <= 10; v++) write_version(st, v, &rng);
    ASSERT_OK(rl__storage_checkpoint(st));
    rl__storage_close(st);
    char *cp = ckpt_path(dir, 1);
    size_t full;
    uint8_t *bytes = slurp(cp, &full);
    for (size_t i = 0; i < full; i++) {
        bytes[i] ^= 0x01;
        spit(cp, bytes, full);
        bytes[i] ^= 0x01;
        rl__errdetail err;
        rl__errdetail_init(&err, NULL);
        int rc = open_dir(dir, 0, &st, &err);
        if (rc != RL_E_CHECKPOINT_CORRUPT) fail_msg("flip at %zu: got %s", i, rl_error_name(rc));
        ASSERT_NOT_NULL(strstr(rl__errdetail_get(&err), "ckpt-0000000000000001"));
        ASSERT_NOT_NULL(strstr(rl__errdetail_get(&err), "byte offset"));
    }
    for (size_t cut = 0; cut < full; cut += 7) {
        spit(cp, bytes, cut);
        ASSERT_RC(open_dir(dir, 0, &st, NULL), RL_E_CHECKPOINT_CORRUPT);
    }
    spit(cp, bytes, full);
    ASSERT_OK(open_dir(dir, 0, &st, NULL));
    ASSERT_EQ(rl__storage_latest_version(st), 10);
    rl__storage_close(st);
    rl__free(bytes);
    rl__free(cp);
    rl_test_rmtree(dir);
    free(dir);
}

/* ---- durable-3: lock, missing dir, poisoning ---------------------------------------------- */

TEST(durable_3_1_locked) {
    char *dir = rl_test_tmpdir("st-lock");
    rl__storage *st, *st2 = NULL;
    ASSERT_OK(open_dir(dir, 0, &st, NULL));
    ASSERT_RC(open_dir(dir, 0, &st2, NULL), RL_E_DATABASE_LOCKED_BY_PROCESS);
    ASSERT_NULL(st2);
    rl__storage_close(st);
    ASSERT_OK(open_dir(dir, 0, &st2, NULL));
    rl__storage_close(st2);
    rl_test_rmtree(dir);
    free(dir);
}

TEST(durable_3_2_missing_dir) {
    rl__storage *st = NULL;
    rl__errdetail err;
    rl__errdetail_init(&err, NULL);
    ASSERT_RC(open_dir("/nonexistent/reclayer/storage-test", 0, &st, &err), RL_E_FILE_NOT_FOUND);
    ASSERT_NULL(st);
    ASSERT_NOT_NULL(strstr(rl__errdetail_get(&err), "/nonexistent/reclayer/storage-test"));
}

/* A log that cannot be written poisons the engine: every later write fails. */
TEST(durable_3_3_poisoned) {
    char *dir = rl_test_tmpdir("st-poison");
    rl__storage *st;
    rl__storage_options o = {0};
    o.dir = dir;
    o.no_sync = 1;
    ASSERT_OK(rl__storage_open(&o, &st, NULL));
    uint64_t rng = 1;
    write_version(st, 1, &rng);
    /* Replace the log descriptor's file by a read-only one behind the engine's back. */
    char *lp = log_path(dir, 0);
    int ro = open(lp, O_RDONLY);
    ASSERT_TRUE(ro >= 0);
    int fd = -1;
    for (int i = 3; i < 1024 && fd < 0; i++) {
        char link[64], target[4096];
        snprintf(link, sizeof link, "/proc/self/fd/%d", i);
        ssize_t n = readlink(link, target, sizeof target - 1);
        if (n > 0 && i != ro) {
            target[n] = 0;
            if (strstr(target, "log-0000000000000000")) fd = i;
        }
    }
    ASSERT_TRUE(fd >= 0);
    ASSERT_TRUE(dup2(ro, fd) == fd);
    close(ro);
    ASSERT_RC(rl__storage_sync(st), RL_E_IO_ERROR);
    ASSERT_RC(rl__storage_apply(st, 2, NULL, 0), RL_E_IO_ERROR);
    ASSERT_RC(rl__storage_sync(st), RL_E_IO_ERROR);
    ASSERT_RC(rl__storage_checkpoint(st), RL_E_IO_ERROR);
    rl__storage_close(st);
    rl__free(lp);
    rl_test_rmtree(dir);
    free(dir);
}

RL_TEST_MAIN(T(durable_1_1_reopen_equals), T(durable_1_2_checkpoints), T(durable_2_1_torn_tail),
             T(durable_2_2_corrupt_middle_record), T(durable_2_3_corrupt_checkpoint), T(durable_3_1_locked),
             T(durable_3_2_missing_dir), T(durable_3_3_poisoned))
