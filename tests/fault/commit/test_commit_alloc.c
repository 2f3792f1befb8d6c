/* test_commit_alloc.c — the Nth allocation fails while the committer runs a batch.
 *
 * K threads each commit one request (a SET, a SET_VERSIONSTAMPED_KEY, a SET_VERSIONSTAMPED_VALUE,
 * a CLEAR_RANGE and an ADD to a shared counter) into a fresh committer over a `mem` storage
 * engine. A first "blocker" request holds the sink until all K are queued, so that the K form one
 * batch whose leader is any of the threads; allocation failure is therefore injected through a
 * process-wide allocation hook (rl_alloc_set_hook) that fails the Nth allocation after the
 * blocker, for every N the batch makes. Expected for each N:
 *   - every request returns RL_OK, RL_E_OUT_OF_MEMORY or (its batch's sink call failed)
 *     RL_E_COMMIT_UNKNOWN_RESULT, and the latter happens only with the committer poisoned;
 *   - when not poisoned: the storage holds exactly the requests that returned RL_OK (their keys,
 *     one versionstamped key each, the counter equals their number) and nothing of the others,
 *     and a new commit afterwards succeeds (the committer is usable);
 *   - no leak or crash (run under the sanitizer build).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/alloc.h"
#include "commit/commit.h"
#include "test.h"

#define K 4

static atomic_long countdown = -1; /* allocations to let through; -1: off */
static atomic_int fired;

static void *hook(void *ud, void *ptr, size_t old_size, size_t new_size) {
    (void)ud;
    if (new_size == 0) {
        free(ptr);
        return NULL;
    }
    if (new_size > old_size || ptr == NULL) {
        long c = atomic_load(&countdown);
        while (c >= 0) {
            if (atomic_compare_exchange_weak(&countdown, &c, c - 1)) {
                if (c == 0) {
                    atomic_store(&fired, 1);
                    return NULL;
                }
                break;
            }
        }
    }
    return realloc(ptr, new_size);
}

typedef struct {
    rl__storage *st;
    rl__committer *cm;
    long arm_n;       /* the N to arm after the blocker's apply */
    atomic_int calls; /* sink applies so far */
} env;

static int sink_apply(void *ctx, rl__version v, const rl__mutation *muts, size_t n) {
    env *e = ctx;
    int rc = rl__storage_apply(e->st, v, muts, n);
    if (atomic_fetch_add(&e->calls, 1) == 0) {
        /* The blocker: wait until every worker is queued, then arm. */
        for (;;) {
            rl__committer_stats s;
            rl__committer_get_stats(e->cm, &s);
            if (s.queued == K) break;
            usleep(200);
        }
        atomic_store(&fired, 0);
        atomic_store(&countdown, e->arm_n);
    }
    return rc;
}

static int sink_sync(void *ctx) { return rl__storage_sync(((env *)ctx)->st); }

typedef struct {
    env *e;
    int i;
    rl__commit_request req;
    uint8_t vskey[32], vsval[16], key[16], ckey[16];
    rl__mutation m[5];
    rl__keyrange w;
} worker;

static void *run_worker(void *p) {
    worker *w = p;
    rl__committer_commit(w->e->cm, &w->req);
    return NULL;
}

static void make_request(worker *w, env *e, int i) {
    memset(w, 0, sizeof *w);
    w->e = e;
    w->i = i;
    int kl = snprintf((char *)w->key, sizeof w->key, "r%d-a", i);
    /* Versionstamped key "vs<i>" + 10 stamp bytes, offset 3 (little-endian u32 at the end). */
    memcpy(w->vskey, "vs", 2);
    w->vskey[2] = (uint8_t)('0' + i);
    memset(w->vskey + 3, 0, 10);
    memcpy(w->vskey + 13, "\x03\0\0\0", 4);
    memset(w->vsval, 0, 10);
    memcpy(w->vsval + 10, "\0\0\0\0", 4);
    int cl = snprintf((char *)w->ckey, sizeof w->ckey, "r%d-", i);
    w->m[0] = (rl__mutation){RL_MUT_SET, w->key, (uint32_t)kl, (const uint8_t *)"value", 5};
    w->m[1] = (rl__mutation){RL_MUT_SET_VERSIONSTAMPED_KEY, w->vskey, 17, (const uint8_t *)"x", 1};
    w->m[2] = (rl__mutation){RL_MUT_SET_VERSIONSTAMPED_VALUE, w->ckey, (uint32_t)cl, w->vsval, 14};
    w->m[3] = (rl__mutation){RL_MUT_CLEAR_RANGE, (const uint8_t *)"zz", 2, (const uint8_t *)"zzz", 3};
    w->m[4] = (rl__mutation){RL_MUT_ADD, (const uint8_t *)"ctr", 3, (const uint8_t *)"\x01\0\0\0\0\0\0\0", 8};
    w->w = (rl__keyrange){w->key, (uint32_t)kl, (const uint8_t *)"\xff", 1};
    w->req.read_version = rl__committer_read_version(e->cm);
    w->req.writes = &w->w;
    w->req.n_writes = 1;
    w->req.muts = w->m;
    w->req.n_muts = 5;
}

static int count_prefix(rl__storage *st, const char *b, const char *e) {
    rl_arena a;
    rl__arena_init(&a, 0);
    rl_keyvalue *kvs;
    int n, more;
    ASSERT_OK(rl__storage_get_range(st, rl__storage_latest_version(st), b, strlen(b), e, strlen(e), 0, 0, 0, &a, &kvs,
                                    &n, &more));
    rl__arena_release(&a);
    return n;
}

static uint64_t counter(rl__storage *st) {
    rl_arena a;
    rl__arena_init(&a, 0);
    int present;
    const uint8_t *v;
    uint32_t len;
    ASSERT_OK(rl__storage_get(st, rl__storage_latest_version(st), "ctr", 3, &a, &present, &v, &len));
    uint64_t c = 0;
    if (present)
        for (int i = (int)len - 1; i >= 0; i--) c = c << 8 | v[i];
    rl__arena_release(&a);
    return c;
}

/* One run with the Nth allocation after the blocker failing; returns 1 if the failure fired. */
static int one_run(long n, long *oom, long *io) {
    env e;
    memset(&e, 0, sizeof e);
    e.arm_n = n;
    rl__storage_options so = {0};
    ASSERT_OK(rl__storage_open(&so, &e.st, NULL));
    rl__log_sink sink = {&e, sink_apply, sink_sync};
    ASSERT_OK(rl__committer_new(NULL, sink, 0, &e.cm));
    worker blocker, w[K];
    pthread_t tb, tw[K];
    make_request(&blocker, &e, 9);
    ASSERT_EQ(pthread_create(&tb, NULL, run_worker, &blocker), 0);
    while (atomic_load(&e.calls) == 0) usleep(100); /* the blocker leads and holds the sink */
    for (int i = 0; i < K; i++) {
        make_request(&w[i], &e, i);
        ASSERT_EQ(pthread_create(&tw[i], NULL, run_worker, &w[i]), 0);
    }
    ASSERT_EQ(pthread_join(tb, NULL), 0);
    for (int i = 0; i < K; i++) ASSERT_EQ(pthread_join(tw[i], NULL), 0);
    atomic_store(&countdown, -1);
    int did_fire = atomic_load(&fired);
    ASSERT_OK(blocker.req.result);
    rl__committer_stats s;
    rl__committer_get_stats(e.cm, &s);
    int ok = 0;
    for (int i = 0; i < K; i++) {
        int r = w[i].req.result;
        if (r != RL_OK && r != RL_E_OUT_OF_MEMORY && r != RL_E_COMMIT_UNKNOWN_RESULT)
            fail_msg("N=%ld: request %d returned %s", n, i, rl_error_name(r));
        if (r == RL_E_COMMIT_UNKNOWN_RESULT && !s.poisoned) fail_msg("N=%ld: commit_unknown_result without poison", n);
        if (r == RL_E_OUT_OF_MEMORY) (*oom)++;
        if (r == RL_E_COMMIT_UNKNOWN_RESULT) (*io)++;
        ok += r == RL_OK;
    }
    if (!did_fire && ok != K) fail_msg("N=%ld: no failure injected but %d of %d committed", n, ok, K);
    if (!s.poisoned) {
        for (int i = 0; i < K; i++) {
            int want = w[i].req.result == RL_OK;
            char b[8], en[8];
            snprintf(b, sizeof b, "r%d-", i);
            snprintf(en, sizeof en, "r%d.", i);
            if (count_prefix(e.st, b, en) != 2 * want)
                fail_msg("N=%ld: request %d (%s) has %d keys", n, i, rl_error_name(w[i].req.result),
                         count_prefix(e.st, b, en));
            snprintf(b, sizeof b, "vs%d", i);
            snprintf(en, sizeof en, "vs%d\xff", i);
            if (count_prefix(e.st, b, en) != want) fail_msg("N=%ld: request %d versionstamped key count wrong", n, i);
        }
        ASSERT_EQ(counter(e.st), (uint64_t)(ok + 1)); /* + the blocker */
        /* Usable: a new commit goes through. */
        worker again;
        make_request(&again, &e, 7);
        ASSERT_OK(rl__committer_commit(e.cm, &again.req));
        ASSERT_EQ(counter(e.st), (uint64_t)(ok + 2));
    }
    rl__committer_free(e.cm);
    rl__storage_close(e.st);
    return did_fire;
}

TEST(commit_alloc_1_1_batch) {
    long oom = 0, io = 0, runs = 0;
    for (long n = 0; n < 400; n++) {
        runs++;
        if (!one_run(n, &oom, &io)) break;
    }
    printf("%ld runs: %ld requests failed with out_of_memory, %ld with commit_unknown_result "
           "(sink failed, committer poisoned)\n",
           runs, oom, io);
    ASSERT_TRUE(runs > 5 && runs < 400);
    ASSERT_TRUE(oom > 0);
}

int main(int argc, char **argv) {
    rl_alloc_set_hook(hook, NULL); /* before any other library call */
    const struct CMUnitTest tests_[] = {T(commit_alloc_1_1_batch)};
    rl_test_init(argc, argv);
    return cmocka_run_group_tests_name(rl_test_group_name(argv[0]), tests_, NULL, NULL);
}
