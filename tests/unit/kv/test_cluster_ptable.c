/* test_cluster_ptable.c — cluster_ptable_*: the cluster client's table of outstanding requests
 * (src/kv/cluster/ptable.h) against a model: random inserts and takes of sequential and random
 * ids, growth, runs that wrap around the end, and the timeout sweep's pattern (removing entries
 * while scanning the slots upwards must visit every entry). Reads no RL_TEST_URL. */
#include <stdlib.h>

#include "kv/cluster/ptable.h"
#include "test.h"

enum { MAXN = 5000 };

/* cluster-ptable-1.1: 200,000 random operations (ids mostly in sequence, as the client takes
 * them, some taken out of order) agree with a model; every lookup after a shift still finds its
 * entry; the table stays at most half full. */
TEST(cluster_ptable_1_1_model) {
    uint64_t seed = rl_test_seed();
    ptable t = {0};
    static uint64_t live[MAXN];
    int n = 0;
    uint64_t next = 1;
    for (int op = 0; op < 200000; op++) {
        int put = n == 0 || (n < MAXN && rl_test_rand_below(&seed, 100) < 52);
        if (put) {
            uint64_t id = next; /* in sequence, with a gap now and then */
            next += 1 + (rl_test_rand_below(&seed, 10) ? 0 : rl_test_rand_below(&seed, 1000));
            ASSERT_OK(pt_put(&t, id, (void *)(uintptr_t)(id * 3)));
            live[n++] = id;
        } else {
            /* Oldest first most of the time (replies come back in order), else any. */
            int k = rl_test_rand_below(&seed, 4) ? 0 : (int)rl_test_rand_below(&seed, (uint64_t)n);
            uint64_t id = live[k];
            void *q = pt_take(&t, id);
            ASSERT_TRUE(q == (void *)(uintptr_t)(id * 3));
            live[k] = live[--n];
            ASSERT_NULL(pt_take(&t, id)); /* gone */
        }
        ASSERT_EQ(t.n, (uint32_t)n);
        ASSERT_TRUE(t.n * 2 <= t.cap);
        if (op % 5000 == 0)
            for (int i = 0; i < n; i++) { /* everything still reachable */
                void *q = pt_take(&t, live[i]);
                ASSERT_TRUE(q == (void *)(uintptr_t)(live[i] * 3));
                ASSERT_OK(pt_put(&t, live[i], q));
            }
    }
    ASSERT_NULL(pt_take(&t, next + 12345));
    pt_release(&t);
    ASSERT_EQ(t.cap, 0);
}

/* cluster-ptable-1.2: the sweep pattern — scan slots upwards, remove the matching entries in
 * place (pt_remove_at, then look at the same slot again) — removes exactly the matching ones and
 * leaves the rest findable, for tables whose runs wrap around the end. */
TEST(cluster_ptable_1_2_sweep) {
    uint64_t seed = rl_test_seed();
    for (int round = 0; round < 300; round++) {
        ptable t = {0};
        int n = 1 + (int)rl_test_rand_below(&seed, 600);
        static uint64_t ids[MAXN];
        uint64_t base = 1 + rl_test_rand_below(&seed, 1u << 30);
        for (int i = 0; i < n; i++) {
            ids[i] = base + (uint64_t)i * (1 + rl_test_rand_below(&seed, 3));
            ASSERT_OK(pt_put(&t, ids[i], (void *)(uintptr_t)ids[i]));
        }
        uint64_t mod = 2 + rl_test_rand_below(&seed, 5); /* remove ids % mod == 0 */
        int removed = 0;
        for (uint32_t j = 0; j < t.cap;) {
            if (t.v[j].id && t.v[j].id % mod == 0) {
                pt_remove_at(&t, j);
                removed++;
                continue;
            }
            j++;
        }
        int want = 0;
        for (int i = 0; i < n; i++) want += ids[i] % mod == 0;
        ASSERT_EQ(removed, want);
        for (int i = 0; i < n; i++) {
            void *q = pt_take(&t, ids[i]);
            if (ids[i] % mod == 0) ASSERT_NULL(q);
            else ASSERT_TRUE(q == (void *)(uintptr_t)ids[i]);
        }
        ASSERT_EQ(t.n, 0);
        pt_release(&t);
    }
}

RL_TEST_MAIN(T(cluster_ptable_1_1_model), T(cluster_ptable_1_2_sweep))
