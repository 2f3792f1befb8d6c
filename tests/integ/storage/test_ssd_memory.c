/* test_ssd_memory.c — the ssd engine's memory stays bounded by the window and the flush
 * threshold, not by the data: a store of RL_SSD_MEM_MB (default 96) MiB of 2 KiB
 * values is loaded through rl__storage_apply with a 4 MiB flush threshold and a short window;
 * RssAnon (/proc/self/status) after the first eighth and at the end may differ by at most
 * 32 MiB (an in-memory store would grow by the whole data), and every row is read back in full
 * (ranges of 1,000 rows) with its value checked. LMDB's pages are file-backed (RssFile), so they
 * do not count. Under AddressSanitizer (its quarantine and shadow are anonymous memory) the RSS
 * bound is not checked, only printed. ssd-3.1.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "reclayer/error.h"
#include "storage/storage.h"
#include "test.h"

#if defined(__SANITIZE_ADDRESS__)
#define RL_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RL_ASAN 1
#endif
#endif
#ifndef RL_ASAN
#define RL_ASAN 0
#endif

/* RssAnon in KiB, or -1. */
static long rss_anon_kib(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    if (!f) return -1;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "RssAnon:", 8)) v = strtol(line + 8, NULL, 10);
    fclose(f);
    return v;
}

#define VAL 2048
#define BATCH 100

static void fill_value(uint8_t *v, uint64_t i) {
    for (int j = 0; j < VAL; j += 8) memcpy(v + j, &i, 8);
    v[0] = (uint8_t)(i * 31);
}

TEST(ssd_3_1_rss_bounded_and_read_back) {
    const char *e = getenv("RL_SSD_MEM_MB");
    uint64_t mb = e && *e ? strtoull(e, NULL, 10) : 96;
    uint64_t rows = mb * 1024 * 1024 / VAL;
    char *dir = rl_test_tmpdir("ssd-mem");
    rl__storage_options o = {0};
    o.engine = RL_ENGINE_SSD;
    o.dir = dir;
    o.no_sync = 1;
    o.window_versions = 4;
    o.checkpoint_log_bytes = 4u << 20;
    rl__storage *st = NULL;
    ASSERT_OK(rl__storage_open(&o, &st, NULL));
    uint8_t *vals = malloc((size_t)BATCH * VAL);
    char(*keys)[24] = malloc(2 * BATCH * sizeof *keys);
    rl__mutation mu[2 * BATCH];
    long rss_early = -1;
    rl__version v = 0;
    for (uint64_t i = 0; i < rows; i += BATCH) {
        int n = 0;
        for (uint64_t j = i; j < i + BATCH && j < rows; j++, n++) {
            int kl = snprintf(keys[n], sizeof keys[n], "row/%012llu", (unsigned long long)j);
            fill_value(vals + (size_t)n * VAL, j);
            mu[n] = (rl__mutation){.type = RL_MUT_SET,
                                   .p1 = (const uint8_t *)keys[n],
                                   .len1 = (uint32_t)kl,
                                   .p2 = vals + (size_t)n * VAL,
                                   .len2 = VAL};
        }
        /* An index entry per row at a pseudo-random place (like a price index): flushes touch
         * index pages all over LMDB's tree, not only its right edge. */
        for (int j = 0; j < n; j++) {
            uint64_t id = i + (uint64_t)j;
            int kl = snprintf(keys[BATCH + j], sizeof keys[0], "idx/%03llu/%012llu",
                              (unsigned long long)(id * 7919 % 1000), (unsigned long long)id);
            mu[n + j] = (rl__mutation){.type = RL_MUT_SET,
                                       .p1 = (const uint8_t *)keys[BATCH + j],
                                       .len1 = (uint32_t)kl,
                                       .p2 = (const uint8_t *)"",
                                       .len2 = 0};
        }
        ASSERT_OK(rl__storage_apply(st, ++v, mu, (size_t)(2 * n)));
        if (i / BATCH % 16 == 0) ASSERT_OK(rl__storage_sync(st));
        if (rss_early < 0 && i >= rows / 8) rss_early = rss_anon_kib();
    }
    ASSERT_OK(rl__storage_sync(st));
    long rss_end = rss_anon_kib();
    rl__storage_status s;
    rl__storage_get_status(st, &s);
    printf("%llu rows (%llu MiB): RssAnon %ld KiB after 1/8, %ld KiB at the end (growth %ld KiB); "
           "%llu flushes, %llu rows in the window\n",
           (unsigned long long)rows, (unsigned long long)mb, rss_early, rss_end, rss_end - rss_early,
           (unsigned long long)s.checkpoints, (unsigned long long)s.window_rows);
    ASSERT_EQ(s.keys, 2 * rows);
    ASSERT_TRUE(s.window_rows < rows / 4);
    if (!RL_ASAN && rss_early > 0) ASSERT_TRUE(rss_end - rss_early < 32 * 1024);
    /* Read everything back, 1,000 rows at a time. */
    rl_arena a;
    rl__arena_init(&a, 0);
    uint64_t seen = 0;
    uint8_t want[VAL];
    char from[24] = "row/";
    size_t fl = 4;
    for (;;) {
        rl_keyvalue *kv;
        int n, more;
        ASSERT_OK(rl__storage_get_range(st, v, from, fl, "row0", 4, 1000, 0, 0, &a, &kv, &n, &more));
        for (int i = 0; i < n; i++) {
            char k[24];
            int kl = snprintf(k, sizeof k, "row/%012llu", (unsigned long long)seen);
            ASSERT_MEM_EQ(kv[i].key, kv[i].key_len, k, (size_t)kl);
            fill_value(want, seen);
            ASSERT_MEM_EQ(kv[i].value, kv[i].value_len, want, VAL);
            seen++;
        }
        if (!more) break;
        memcpy(from, kv[n - 1].key, kv[n - 1].key_len);
        from[kv[n - 1].key_len] = 0; /* the next range starts after the last key */
        fl = kv[n - 1].key_len + 1;
        rl__arena_reset(&a);
    }
    ASSERT_EQ(seen, rows);
    rl__arena_release(&a);
    rl__storage_close(st);
    free(vals);
    free(keys);
    rl_test_rmtree(dir);
    free(dir);
}

RL_TEST_MAIN(T(ssd_3_1_rss_bounded_and_read_back))
