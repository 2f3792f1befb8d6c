/* test_commit_storage.c — the committer over the real storage engine (in memory, dir NULL) as its
 * sink (commit-5.x): what commits is readable at the committer's read version, versionstamps
 * land in keys, and concurrent read-modify-write increments lose no update (serializability). */
#include "test.h"

#include <pthread.h>

#include "base/arena.h"
#include "commit/commit.h"

static int st_apply(void *ctx, rl__version v, const rl__mutation *m, size_t n) {
    return rl__storage_apply(ctx, v, m, n);
}

static int st_sync(void *ctx) { return rl__storage_sync(ctx); }

typedef struct {
    rl__storage *st;
    rl__committer *c;
} env;

static void env_open(env *e, uint64_t window) {
    rl__storage_options so = {0};
    so.window_versions = window;
    ASSERT_OK(rl__storage_open(&so, &e->st, NULL));
    rl__log_sink sink = {e->st, st_apply, st_sync};
    rl__committer_options co = {window, 0};
    ASSERT_OK(rl__committer_new(&co, sink, rl__storage_latest_version(e->st), &e->c));
}

static void env_close(env *e) {
    rl__committer_free(e->c);
    rl__storage_close(e->st);
}

static rl__mutation set_mut(const char *k, const char *v) {
    rl__mutation m = {RL_MUT_SET, (const uint8_t *)k, (uint32_t)strlen(k), (const uint8_t *)v, (uint32_t)strlen(v)};
    return m;
}

/* commit-5.1: committed sets are readable at the committer's read version (and not before);
 * the read version is the storage engine's latest version; a versionstamped key lands with the
 * commit version in it. */
TEST(commit_5_1_storage_sink_reads) {
    env e;
    env_open(&e, 0);
    rl_arena a;
    rl__arena_init(&a, 0);
    rl__version rv0 = rl__committer_read_version(e.c);
    rl__mutation m[2] = {set_mut("apple", "red"), {0}};
    uint8_t vsk[15] = {'p', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0};
    m[1] = (rl__mutation){RL_MUT_SET_VERSIONSTAMPED_KEY, vsk, 15, (const uint8_t *)"stamped", 7};
    rl__keyrange w = {(const uint8_t *)"a", 1, (const uint8_t *)"q", 1};
    rl__commit_request req = {.read_version = rv0, .writes = &w, .n_writes = 1, .muts = m, .n_muts = 2};
    ASSERT_OK(rl__committer_commit(e.c, &req));
    ASSERT_EQ(rl__committer_read_version(e.c), req.commit_version);
    ASSERT_EQ(rl__storage_latest_version(e.st), req.commit_version);
    int present;
    const uint8_t *val;
    uint32_t len;
    ASSERT_OK(rl__storage_get(e.st, req.commit_version, "apple", 5, &a, &present, &val, &len));
    ASSERT_TRUE(present);
    ASSERT_MEM_EQ(val, len, "red", 3);
    ASSERT_OK(rl__storage_get(e.st, rv0, "apple", 5, &a, &present, &val, &len));
    ASSERT_FALSE(present);
    uint8_t key[11] = {'p'};
    for (int i = 0; i < 8; i++) key[1 + i] = (uint8_t)(req.commit_version >> (56 - 8 * i));
    ASSERT_OK(rl__storage_get(e.st, req.commit_version, key, 11, &a, &present, &val, &len));
    ASSERT_TRUE(present);
    ASSERT_MEM_EQ(val, len, "stamped", 7);
    rl__arena_release(&a);
    env_close(&e);
}

#define NT 4
#define INCS 100

typedef struct {
    env *e;
    int retries;
    int failures;
} inc_arg;

/* Read the counter at the read version, write counter + 1 with a read conflict on it; retry on
 * not_committed. */
static void *inc_main(void *p) {
    inc_arg *x = p;
    rl_arena a;
    rl__arena_init(&a, 0);
    static const char key[] = "counter";
    rl__keyrange kr = {(const uint8_t *)key, 7, (const uint8_t *)"counter\0", 8};
    for (int i = 0; i < INCS; i++) {
        for (;;) {
            rl__arena_reset(&a);
            rl__version rv = rl__committer_read_version(x->e->c);
            int present;
            const uint8_t *val;
            uint32_t len;
            if (rl__storage_get(x->e->st, rv, key, 7, &a, &present, &val, &len) != RL_OK) {
                x->failures++;
                break;
            }
            unsigned n = 0;
            char buf[32];
            if (present) {
                memcpy(buf, val, len < 31 ? len : 31);
                buf[len < 31 ? len : 31] = 0;
                sscanf(buf, "%u", &n);
            }
            snprintf(buf, sizeof buf, "%u", n + 1);
            rl__mutation m = {RL_MUT_SET, (const uint8_t *)key, 7, (const uint8_t *)buf, (uint32_t)strlen(buf)};
            rl__commit_request req = {
                .read_version = rv, .reads = &kr, .n_reads = 1, .writes = &kr, .n_writes = 1, .muts = &m, .n_muts = 1};
            int rc = rl__committer_commit(x->e->c, &req);
            if (rc == RL_OK) break;
            if (rc != RL_E_NOT_COMMITTED) {
                x->failures++;
                break;
            }
            x->retries++;
        }
    }
    rl__arena_release(&a);
    return NULL;
}

/* commit-5.2: NT threads each increment one counter INCS times by read-modify-write: with
 * serializable commits the final value is exactly NT * INCS (a lost update would show). */
TEST(commit_5_2_no_lost_updates) {
    env e;
    env_open(&e, 0);
    inc_arg args[NT];
    pthread_t th[NT];
    for (int i = 0; i < NT; i++) {
        args[i] = (inc_arg){&e, 0, 0};
        ASSERT_EQ(pthread_create(&th[i], NULL, inc_main, &args[i]), 0);
    }
    int retries = 0;
    for (int i = 0; i < NT; i++) {
        pthread_join(th[i], NULL);
        ASSERT_EQ(args[i].failures, 0);
        retries += args[i].retries;
    }
    print_message("retries after conflicts: %d\n", retries);
    rl_arena a;
    rl__arena_init(&a, 0);
    int present;
    const uint8_t *val;
    uint32_t len;
    ASSERT_OK(rl__storage_get(e.st, rl__committer_read_version(e.c), "counter", 7, &a, &present, &val, &len));
    ASSERT_TRUE(present);
    char buf[32];
    snprintf(buf, sizeof buf, "%d", NT * INCS);
    ASSERT_MEM_EQ(val, len, buf, strlen(buf));
    rl__arena_release(&a);
    env_close(&e);
}

/* commit-5.3: atomic ADDs from threads without reads never conflict and all count. */
static void *add_main(void *p) {
    env *e = p;
    uint8_t one[8] = {1};
    rl__mutation m = {RL_MUT_ADD, (const uint8_t *)"sum", 3, one, 8};
    rl__keyrange kr = {(const uint8_t *)"sum", 3, (const uint8_t *)"sum\0", 4};
    for (int i = 0; i < INCS; i++) {
        rl__commit_request req = {
            .read_version = rl__committer_read_version(e->c), .writes = &kr, .n_writes = 1, .muts = &m, .n_muts = 1};
        if (rl__committer_commit(e->c, &req) != RL_OK) return (void *)1;
    }
    return NULL;
}

TEST(commit_5_3_atomic_adds) {
    env e;
    env_open(&e, 0);
    pthread_t th[NT];
    for (int i = 0; i < NT; i++) ASSERT_EQ(pthread_create(&th[i], NULL, add_main, &e), 0);
    for (int i = 0; i < NT; i++) {
        void *r;
        pthread_join(th[i], &r);
        ASSERT_NULL(r);
    }
    rl_arena a;
    rl__arena_init(&a, 0);
    int present;
    const uint8_t *val;
    uint32_t len;
    ASSERT_OK(rl__storage_get(e.st, rl__committer_read_version(e.c), "sum", 3, &a, &present, &val, &len));
    ASSERT_TRUE(present);
    ASSERT_EQ(len, 8);
    uint64_t sum = 0;
    for (int i = 7; i >= 0; i--) sum = sum << 8 | val[i];
    ASSERT_EQ(sum, NT * INCS);
    rl__arena_release(&a);
    env_close(&e);
}

RL_TEST_MAIN(T(commit_5_1_storage_sink_reads), T(commit_5_2_no_lost_updates), T(commit_5_3_atomic_adds))
