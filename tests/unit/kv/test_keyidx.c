/* test_keyidx.c — the write map's ordered index (src/kv/keyidx.h) against a sorted-array model.
 *
 *   keyidx-1.1  random inserts, removals and seeks (keys of 0-20 bytes over a 3-letter alphabet, so
 *               many share more than the 8 bytes of their prefix and many are prefixes of others),
 *               growing to 6,000 keys (three levels of pages) and back to none: after every step
 *               the count, the list in both directions and seek of random keys equal the model's
 *   keyidx-1.2  keys inserted in ascending order fill their pages (20,000 keys in at most 630
 *               leaves' worth of depth: depth 2), then removed from the front: the index stays
 *               right and ends empty, and is usable again
 *
 * Randomized: the seed is printed; RL_SEED=N replays.
 */
#include <stdlib.h>
#include <string.h>

#include "kv/keyidx.h"
#include "test.h"

#define MAXN 8000

typedef struct {
    rl__kx_node kx;
    uint8_t key[24];
    uint32_t len;
    int live;
} tnode;

static tnode nodes[MAXN];
static int model[MAXN]; /* indexes into nodes, sorted by key */
static int n_model;

static int cmp_keys(const uint8_t *a, uint32_t al, const uint8_t *b, uint32_t bl) {
    uint32_t m = al < bl ? al : bl;
    int c = memcmp(a, b, m);
    return c ? c : al < bl ? -1 : al > bl ? 1 : 0;
}

/* The model's lower bound of k: the first position whose key is >= k. */
static int model_lower(const uint8_t *k, uint32_t kl) {
    int lo = 0, hi = n_model;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (cmp_keys(nodes[model[mid]].key, nodes[model[mid]].len, k, kl) < 0) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

static void random_key(uint64_t *rng, uint8_t *k, uint32_t *kl) {
    *kl = (uint32_t)rl_test_rand_below(rng, 21);
    for (uint32_t i = 0; i < *kl; i++) k[i] = (uint8_t)("abc"[rl_test_rand_below(rng, 3)]);
}

/* The whole index against the model. */
static void check_all(const rl__keyidx *x) {
    ASSERT_EQ(x->n, (size_t)n_model);
    const rl__kx_node *p = x->first;
    for (int i = 0; i < n_model; i++, p = p->next) {
        ASSERT_TRUE(p == &nodes[model[i]].kx);
        ASSERT_TRUE(p->prev == (i ? &nodes[model[i - 1]].kx : NULL));
    }
    ASSERT_NULL(p);
    ASSERT_TRUE(x->last == (n_model ? &nodes[model[n_model - 1]].kx : NULL));
}

static void check_seek(const rl__keyidx *x, const uint8_t *k, uint32_t kl) {
    int at = model_lower(k, kl);
    const rl__kx_node *want = at < n_model ? &nodes[model[at]].kx : NULL;
    if (rl__kx_seek(x, k, kl) != want) fail_msg("seek of a %u-byte key: wrong node (model position %d)", kl, at);
}

static void insert_node(rl__keyidx *x, int id, const uint8_t *k, uint32_t kl) {
    tnode *t = &nodes[id];
    memcpy(t->key, k, kl);
    t->len = kl;
    t->live = 1;
    rl__kx_set_key(&t->kx, t->key, t->len);
    ASSERT_OK(rl__kx_insert(x, &t->kx));
    int at = model_lower(k, kl);
    memmove(&model[at + 1], &model[at], (size_t)(n_model - at) * sizeof model[0]);
    model[at] = id;
    n_model++;
}

static void remove_at(rl__keyidx *x, int at) {
    tnode *t = &nodes[model[at]];
    rl__kx_remove(x, &t->kx);
    t->live = 0;
    memmove(&model[at], &model[at + 1], (size_t)(n_model - at - 1) * sizeof model[0]);
    n_model--;
}

TEST(keyidx_1_1_random) {
    uint64_t rng = rl_test_seed();
    rl_arena a;
    rl__arena_init(&a, 4096);
    rl__keyidx x;
    rl__kx_init(&x, &a);
    n_model = 0;
    int next_id = 0, max_depth = 0;
    uint8_t k[24];
    uint32_t kl;
    for (int step = 0; step < 40000; step++) {
        int phase_grow = step < 26000; /* grow, then shrink to nothing */
        uint64_t r = rl_test_rand_below(&rng, 10);
        if (phase_grow ? r < 6 : r < 1) {
            random_key(&rng, k, &kl);
            int at = model_lower(k, kl);
            int dup = at < n_model && cmp_keys(nodes[model[at]].key, nodes[model[at]].len, k, kl) == 0;
            if (!dup && next_id < MAXN) insert_node(&x, next_id++, k, kl);
        } else if (r < (phase_grow ? 8 : 9) && n_model > 0) {
            remove_at(&x, (int)rl_test_rand_below(&rng, (uint64_t)n_model));
        } else {
            random_key(&rng, k, &kl);
            check_seek(&x, k, kl);
        }
        if ((int)x.depth > max_depth) max_depth = (int)x.depth;
        if (step % 997 == 0) check_all(&x);
        if (!phase_grow && n_model == 0) break;
    }
    while (n_model > 0) remove_at(&x, n_model - 1);
    check_all(&x);
    ASSERT_NULL(rl__kx_seek(&x, (const uint8_t *)"a", 1));
    print_message("keyidx-1.1: %d keys inserted, deepest %d inner levels\n", next_id, max_depth);
    ASSERT_TRUE(max_depth >= 2);
    rl__arena_release(&a);
}

TEST(keyidx_1_2_ascending) {
    enum { N = 20000 };
    static tnode asc[N];
    rl_arena a;
    rl__arena_init(&a, 4096);
    rl__keyidx x;
    rl__kx_init(&x, &a);
    for (int i = 0; i < N; i++) {
        snprintf((char *)asc[i].key, sizeof asc[i].key, "key%08d", i);
        asc[i].len = 11;
        rl__kx_set_key(&asc[i].kx, asc[i].key, asc[i].len);
        ASSERT_OK(rl__kx_reserve(&x));
        ASSERT_OK(rl__kx_insert(&x, &asc[i].kx));
    }
    ASSERT_EQ(x.n, N);
    ASSERT_EQ(x.depth, 2); /* full pages: 20,000 / 32 = 625 leaves, 20 inner pages, one root */
    for (int i = 0; i < N; i += 97) ASSERT_TRUE(rl__kx_seek(&x, asc[i].key, asc[i].len) == &asc[i].kx);
    const rl__kx_node *p = x.first;
    for (int i = 0; i < N; i++, p = p->next) ASSERT_TRUE(p == &asc[i].kx);
    for (int i = 0; i < N; i++) {
        rl__kx_remove(&x, &asc[i].kx);
        if (i + 1 < N && i % 101 == 0) ASSERT_TRUE(rl__kx_seek(&x, asc[0].key, asc[0].len) == &asc[i + 1].kx);
    }
    ASSERT_EQ(x.n, 0);
    ASSERT_NULL(x.first);
    ASSERT_NULL(x.last);
    ASSERT_OK(rl__kx_insert(&x, &asc[5].kx)); /* usable again */
    ASSERT_TRUE(rl__kx_seek(&x, asc[0].key, asc[0].len) == &asc[5].kx);
    rl__arena_release(&a);
}

RL_TEST_MAIN(T(keyidx_1_1_random), T(keyidx_1_2_ascending))
