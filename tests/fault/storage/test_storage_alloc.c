/* test_storage_alloc.c — the Nth allocation fails (rl_alloc_fail_after) inside the storage engine:
 * recovery (rl__storage_open of a checkpoint plus a log), rl__storage_apply of a version with
 * every mutation type (file and mem engines), and rl__storage_checkpoint. N runs over every
 * allocation a clean call makes. Each call must return RL_OK or RL_E_OUT_OF_MEMORY, never crash
 * or leak (run under the sanitizer build), and leave the engine consistent: the database is
 * either the state before the call or the state after it (compared with an engine that ran the
 * same calls without failures), reads work, and a reopen recovers a whole version.
 */
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "storage/storage.h"
#include "test.h"

static int open_dir(const char *dir, uint64_t ckpt_bytes, rl__storage **st, rl__errdetail *err) {
    rl__storage_options o = {0};
    o.dir = dir;
    o.no_sync = 1; /* allocation paths, not power loss */
    o.checkpoint_log_bytes = ckpt_bytes;
    return rl__storage_open(&o, st, err);
}

/* The whole database at version v, serialized (v first). */
static void dump_at(rl__storage *st, rl__version v, rl_buf *out) {
    rl_arena a;
    rl__arena_init(&a, 0);
    rl_keyvalue *kvs;
    int n, more;
    rl__buf_reset(out);
    rl__buf_append_u64be(out, v);
    ASSERT_OK(rl__storage_get_range(st, v, "", 0, "\xff", 1, 0, 0, 0, &a, &kvs, &n, &more));
    for (int i = 0; i < n; i++) {
        rl__buf_append_u32be(out, kvs[i].key_len);
        rl__buf_append(out, kvs[i].key, kvs[i].key_len);
        rl__buf_append_u32be(out, kvs[i].value_len);
        rl__buf_append(out, kvs[i].value, kvs[i].value_len);
    }
    ASSERT_OK(rl__buf_error(out));
    rl__arena_release(&a);
}

static void dump(rl__storage *st, rl_buf *out) { dump_at(st, rl__storage_latest_version(st), out); }

static int same(const rl_buf *a, const rl_buf *b) { return a->len == b->len && memcmp(a->data, b->data, a->len) == 0; }

static int ok_or_oom(int rc, const char *what, long n) {
    if (rc != RL_OK && rc != RL_E_OUT_OF_MEMORY)
        fail_msg("%s (N=%ld): unexpected %s under allocation failure", what, n, rl_error_name(rc));
    return rc;
}

/* Base data: version v writes 20 keys (some long values) and clears a few. */
static void base_version(rl__storage *st, rl__version v) {
    rl__mutation m[24];
    char k[20][16], val[20][200];
    size_t n = 0;
    for (int i = 0; i < 20; i++) {
        snprintf(k[i], sizeof k[i], "k%03d", (int)((v * 37 + (rl__version)i * 11) % 300));
        int vl = snprintf(val[i], sizeof val[i], "v%llu-%d-", (unsigned long long)v, i);
        if (i % 7 == 0) {
            memset(val[i] + vl, 'z', 150);
            vl += 150;
        }
        m[n++] = (rl__mutation){RL_MUT_SET, (const uint8_t *)k[i], 4, (const uint8_t *)val[i], (uint32_t)vl};
    }
    m[n++] = (rl__mutation){RL_MUT_CLEAR, (const uint8_t *)k[3], 4, NULL, 0};
    ASSERT_OK(rl__storage_apply(st, v, m, n));
}

/* One version holding every storage mutation type, on keys that exist and keys that do not. */
static int mixed_version(rl__storage *st, rl__version v) {
    static const uint8_t one[8] = {1, 0, 0, 0, 0, 0, 0, 0};
    static const uint8_t big[8] = {0xff, 0xff, 0, 0, 0, 0, 0, 0x7f};
#define M(t, k, val, vl) \
    (rl__mutation){(t), (const uint8_t *)(k), (uint32_t)strlen(k), (const uint8_t *)(val), (uint32_t)(vl)}
    rl__mutation m[] = {
        M(RL_MUT_SET, "new-a", "fresh", 5),
        M(RL_MUT_SET, "k010", "overwritten", 11),
        M(RL_MUT_CLEAR, "k020", "", 0),
        M(RL_MUT_CLEAR_RANGE, "k100", "k150", 4),
        M(RL_MUT_ADD, "ctr", one, 8),
        M(RL_MUT_ADD, "k200", one, 8),
        M(RL_MUT_BIT_AND, "k201", big, 8),
        M(RL_MUT_BIT_OR, "k202", big, 8),
        M(RL_MUT_BIT_XOR, "new-x", big, 8),
        M(RL_MUT_APPEND_IF_FITS, "k203", "-tail", 5),
        M(RL_MUT_APPEND_IF_FITS, "new-app", "start", 5),
        M(RL_MUT_MAX, "k204", big, 8),
        M(RL_MUT_MIN, "new-min", one, 8),
        M(RL_MUT_BYTE_MIN, "k205", "a", 1),
        M(RL_MUT_BYTE_MAX, "k206", "zzzz", 4),
        M(RL_MUT_COMPARE_AND_CLEAR, "k207", "no-match", 8),
        M(RL_MUT_SET, "k207", "cac", 3),
        M(RL_MUT_COMPARE_AND_CLEAR, "k207", "cac", 3),
        M(RL_MUT_CLEAR_RANGE, "k250", "k260", 4),
        M(RL_MUT_SET, "k255", "inside a cleared range", 22),
    };
#undef M
    return rl__storage_apply(st, v, m, sizeof m / sizeof m[0]);
}

/* Build a directory: versions 1..8, a checkpoint, versions 9..14 in the log, synced. */
static char *make_dir(void) {
    char *dir = rl_test_tmpdir("st-alloc");
    rl__storage *st;
    ASSERT_OK(open_dir(dir, 1ull << 30, &st, NULL));
    for (rl__version v = 1; v <= 8; v++) base_version(st, v);
    ASSERT_OK(rl__storage_checkpoint(st));
    for (rl__version v = 9; v <= 14; v++) base_version(st, v);
    ASSERT_OK(rl__storage_sync(st));
    rl__storage_close(st);
    return dir;
}

static long allocs_of_thread(void) {
    rl_alloc_stats s;
    rl_alloc_get_stats(&s);
    return (long)s.allocs;
}

TEST(storage_alloc_1_1_recovery) {
    char *dir = make_dir();
    rl_buf want, got;
    rl__errdetail err;
    rl__buf_init(&want);
    rl__buf_init(&got);
    rl__errdetail_init(&err, NULL);
    rl__storage *st;
    long a0 = allocs_of_thread();
    ASSERT_OK(open_dir(dir, 1ull << 30, &st, NULL));
    long count = allocs_of_thread() - a0;
    dump(st, &want);
    rl__storage_close(st);
    ASSERT_TRUE(count > 10);
    long failed = 0;
    for (long n = 0; n <= count; n++) {
        st = NULL;
        rl__errdetail_clear(&err);
        rl_alloc_fail_after(n);
        int rc = ok_or_oom(open_dir(dir, 1ull << 30, &st, &err), "open", n);
        rl_alloc_fail_after(-1);
        if (rc != RL_OK) {
            failed++;
            ASSERT_NULL(st);
            /* The failed recovery changed nothing: a clean open recovers the same state. */
            ASSERT_OK(open_dir(dir, 1ull << 30, &st, NULL));
        }
        dump(st, &got);
        if (!same(&got, &want)) fail_msg("open N=%ld: recovered state differs", n);
        rl__storage_close(st);
    }
    printf("recovery: %ld allocations, %ld opens failed cleanly\n", count, failed);
    ASSERT_TRUE(failed > count / 2);
    rl__buf_release(&want);
    rl__buf_release(&got);
    rl_test_rmtree(dir);
    free(dir);
}

/* Apply the mixed version with the Nth allocation failing, on a file engine (dir) or mem. */
static void apply_sweep(int durable) {
    rl_buf before, after, got;
    rl__buf_init(&before);
    rl__buf_init(&after);
    rl__buf_init(&got);
    char *dir = make_dir();
    /* Reference: the states before and after the mixed version, without failures. */
    rl__storage *st;
    rl__storage_options mo = {0};
    ASSERT_OK(rl__storage_open(&mo, &st, NULL));
    for (rl__version v = 1; v <= 14; v++) base_version(st, v);
    dump(st, &before);
    long a0 = allocs_of_thread();
    ASSERT_OK(mixed_version(st, 15));
    long count = allocs_of_thread() - a0;
    dump(st, &after);
    rl__storage_close(st);
    ASSERT_FALSE(same(&before, &after));
    long failed = 0, poisoned = 0;
    for (long n = 0; n <= count + 2; n++) {
        char *copy = NULL;
        if (durable) {
            copy = rl_test_tmpdir("st-alloc-copy");
            char cmd[9000];
            snprintf(cmd, sizeof cmd, "cp -a %s/. %s/", dir, copy);
            ASSERT_EQ(system(cmd), 0);
            ASSERT_OK(open_dir(copy, 1ull << 30, &st, NULL));
        } else {
            ASSERT_OK(rl__storage_open(&mo, &st, NULL));
            for (rl__version v = 1; v <= 14; v++) base_version(st, v);
        }
        rl_alloc_fail_after(n);
        int rc = ok_or_oom(mixed_version(st, 15), "apply", n);
        rl_alloc_fail_after(-1);
        int is_poisoned = 0;
        dump(st, &got);
        if (rc == RL_OK) {
            if (!same(&got, &after)) fail_msg("apply N=%ld: RL_OK but the state is wrong", n);
        } else {
            failed++;
            /* The version before is intact. */
            dump_at(st, 14, &got);
            if (!same(&got, &before)) fail_msg("apply N=%ld: version 14 changed", n);
            /* The failed version is absent in memory: a version is published whole or not at
             * all (the entries a failed apply wrote stay newer than latest, so invisible). */
            dump(st, &got);
            if (!same(&got, &before)) fail_msg("apply N=%ld: failed apply left a partial version", n);
            if (rl__storage_latest_version(st) != 14)
                fail_msg("apply N=%ld: failed apply published version %llu", n,
                         (unsigned long long)rl__storage_latest_version(st));
            /* Usable: either it takes the version again, or it is poisoned for good (reads
             * still work: checked by dump above). */
            int rc2 = mixed_version(st, rl__storage_latest_version(st) + 1);
            if (rc2 == RL_OK) {
                if (same(&got, &before)) {
                    dump(st, &got);
                    /* Same mutations one version later: equal to the reference but the version. */
                    ASSERT_EQ(got.len, after.len);
                    ASSERT_TRUE(memcmp(got.data + 8, after.data + 8, got.len - 8) == 0);
                }
            } else {
                ASSERT_RC(rc2, RL_E_OUT_OF_MEMORY); /* the poison code */
                if (durable) ASSERT_RC(rl__storage_sync(st), RL_E_OUT_OF_MEMORY);
                poisoned++;
                is_poisoned = 1;
            }
        }
        /* What a reopen must find: everything if it syncs, else the state before. */
        rl_buf final;
        rl__buf_init(&final);
        if (!is_poisoned) {
            ASSERT_OK(rl__storage_sync(st));
            dump(st, &final);
        } else {
            rl__buf_append(&final, before.data, before.len);
        }
        rl__storage_close(st);
        if (durable) {
            /* Reopen: a whole version, nothing partial. */
            ASSERT_OK(open_dir(copy, 1ull << 30, &st, NULL));
            dump(st, &got);
            if (!same(&got, &final))
                fail_msg("apply N=%ld: reopen recovered version %llu, not the synced state", n,
                         (unsigned long long)rl__storage_latest_version(st));
            rl__storage_close(st);
            rl_test_rmtree(copy);
            free(copy);
        }
        rl__buf_release(&final);
    }
    printf("apply (%s): %ld allocations, %ld applies failed (none published), %ld poisoned the "
           "engine\n",
           durable ? "file" : "mem", count, failed, poisoned);
    ASSERT_TRUE(failed > 0);
    rl__buf_release(&before);
    rl__buf_release(&after);
    rl__buf_release(&got);
    rl_test_rmtree(dir);
    free(dir);
}

TEST(storage_alloc_2_1_apply_file) { apply_sweep(1); }
TEST(storage_alloc_2_2_apply_mem) { apply_sweep(0); }

TEST(storage_alloc_3_1_checkpoint) {
    char *dir = make_dir();
    rl_buf want, got;
    rl__buf_init(&want);
    rl__buf_init(&got);
    rl__storage *st;
    ASSERT_OK(open_dir(dir, 1ull << 30, &st, NULL));
    dump(st, &want);
    long a0 = allocs_of_thread();
    ASSERT_OK(rl__storage_checkpoint(st));
    long count = allocs_of_thread() - a0;
    rl__storage_close(st);
    long failed = 0;
    for (long n = 0; n <= count + 2; n++) {
        ASSERT_OK(open_dir(dir, 1ull << 30, &st, NULL));
        rl_alloc_fail_after(n);
        int rc = ok_or_oom(rl__storage_checkpoint(st), "checkpoint", n);
        rl_alloc_fail_after(-1);
        failed += rc != RL_OK;
        dump(st, &got);
        if (!same(&got, &want)) fail_msg("checkpoint N=%ld: state changed", n);
        /* Not poisoned: the engine takes, syncs and checkpoints new versions. */
        rl__version v = rl__storage_latest_version(st) + 1;
        base_version(st, v);
        ASSERT_OK(rl__storage_sync(st));
        ASSERT_OK(rl__storage_checkpoint(st));
        dump(st, &want);
        rl__storage_close(st);
        ASSERT_OK(open_dir(dir, 1ull << 30, &st, NULL));
        dump(st, &got);
        if (!same(&got, &want)) fail_msg("checkpoint N=%ld: reopen differs", n);
        rl__storage_close(st);
    }
    printf("checkpoint: %ld allocations, %ld checkpoints failed cleanly\n", count, failed);
    ASSERT_TRUE(failed > 0);
    rl__buf_release(&want);
    rl__buf_release(&got);
    rl_test_rmtree(dir);
    free(dir);
}

/* An automatic checkpoint (checkpoint_log_bytes reached inside apply) that runs out of memory
 * does not fail the apply: the version is applied and the checkpoint happens later. */
TEST(storage_alloc_3_2_automatic_checkpoint) {
    long failed_ckpt = 0;
    for (long n = 0; n < 40; n++) {
        char *dir = rl_test_tmpdir("st-alloc");
        rl__storage *st;
        ASSERT_OK(open_dir(dir, 4096, &st, NULL));
        rl__storage_status s0, s1;
        rl__version v = 1;
        for (;; v++) { /* stop just before the apply that checkpoints */
            rl__storage_get_status(st, &s0);
            if (s0.log_bytes > 3000) break;
            base_version(st, v);
        }
        rl_alloc_fail_after(n);
        int rc = ok_or_oom(mixed_version(st, v), "apply with checkpoint", n);
        rl_alloc_fail_after(-1);
        rl__storage_get_status(st, &s1);
        if (rc == RL_OK) {
            ASSERT_EQ(s1.latest_version, v);
            if (s1.checkpoints == s0.checkpoints) {
                failed_ckpt++;
                /* Retried by the next apply. */
                base_version(st, v + 1);
                rl__storage_get_status(st, &s1);
                ASSERT_EQ(s1.checkpoints, s0.checkpoints + 1);
            }
        }
        rl_buf want, got;
        rl__buf_init(&want);
        rl__buf_init(&got);
        dump(st, &want);
        rl__storage_close(st);
        if (rc == RL_OK) {
            ASSERT_OK(open_dir(dir, 4096, &st, NULL));
            dump(st, &got);
            if (!same(&got, &want)) fail_msg("auto checkpoint N=%ld: reopen differs", n);
            rl__storage_close(st);
        }
        rl__buf_release(&want);
        rl__buf_release(&got);
        rl_test_rmtree(dir);
        free(dir);
    }
    printf("automatic checkpoints that ran out of memory and were retried: %ld\n", failed_ckpt);
    ASSERT_TRUE(failed_ckpt > 0);
}

RL_TEST_MAIN(T(storage_alloc_1_1_recovery), T(storage_alloc_2_1_apply_file), T(storage_alloc_2_2_apply_mem),
             T(storage_alloc_3_1_checkpoint), T(storage_alloc_3_2_automatic_checkpoint))
