/* test_resolver.c — the sequencer (commit-1.x) and the resolver (commit-2.x), each against
 * independent expectations: the clock, hand-worked edge cases and a brute-force model. */
#include "test.h"

#include <stdlib.h>

#include "base/clock.h"
#include "commit/commit.h"

static rl__keyrange kr(const char *b, size_t blen, const char *e, size_t elen) {
    rl__keyrange r = {(const uint8_t *)b, (uint32_t)blen, (const uint8_t *)e, (uint32_t)elen};
    return r;
}
#define R(b, e) kr((b), sizeof(b) - 1, (e), sizeof(e) - 1)

/* commit-1.1: versions strictly increase and advance about 1e6 per second of wall time. */
TEST(commit_1_1_sequencer_monotonic) {
    rl__sequencer s;
    rl__sequencer_init(&s, 1000);
    rl__version a = rl__sequencer_next(&s);
    ASSERT_TRUE(a > 1000);
    rl__clock_sleep_us(10000);
    rl__version b = rl__sequencer_next(&s);
    ASSERT_TRUE(b > a);
    ASSERT_TRUE(b - a >= 10000);
    /* Calls faster than one per microsecond still get distinct, increasing versions (the
     * sequence may then run ahead of the clock: last + 1 wins). */
    rl__version prev = b;
    for (int i = 0; i < 100000; i++) {
        rl__version v = rl__sequencer_next(&s);
        ASSERT_TRUE(v > prev);
        prev = v;
    }
}

/* A hand-advanced clock: ud is a uint64_t of nanoseconds. */
static uint64_t test_clock(void *ud) { return *(const uint64_t *)ud; }

/* commit-1.3: an injected clock (rl__sequencer_set_clock) drives the versions exactly, with no
 * sleeping: one version per microsecond it advances, last + 1 when it stands still, still
 * increasing across the switch to it and back to the real clock. */
TEST(commit_1_3_sequencer_injected_clock) {
    rl__sequencer s;
    rl__sequencer_init(&s, 1000);
    rl__version a = rl__sequencer_next(&s);
    uint64_t now = 77;
    rl__sequencer_set_clock(&s, test_clock, &now);
    rl__version b = rl__sequencer_next(&s);
    ASSERT_EQ(b, a + 1);  /* the clock stood still since the switch */
    now += 5000000000ull; /* 5 s */
    rl__version c = rl__sequencer_next(&s);
    ASSERT_EQ(c, a + 5000000);
    ASSERT_EQ(rl__sequencer_next(&s), c + 1);
    now += 999; /* less than a microsecond: no clock advance */
    ASSERT_EQ(rl__sequencer_next(&s), c + 2);
    now += 1001; /* 2 us after c: c + 2 is issued already, so last + 1 */
    ASSERT_EQ(rl__sequencer_next(&s), c + 3);
    now += 10000;
    ASSERT_EQ(rl__sequencer_next(&s), c + 12);
    rl__sequencer_set_clock(&s, NULL, NULL);
    ASSERT_TRUE(rl__sequencer_next(&s) > c + 12);
}

/* commit-1.2: a restarted sequencer (init from the last version issued) keeps increasing. */
TEST(commit_1_2_sequencer_restart) {
    rl__sequencer s;
    rl__sequencer_init(&s, 0);
    rl__version last = 0;
    for (int i = 0; i < 10; i++) last = rl__sequencer_next(&s);
    rl__sequencer_init(&s, last);
    ASSERT_TRUE(rl__sequencer_next(&s) > last);
    /* A recovered version far ahead of the clock is still respected. */
    rl__sequencer_init(&s, 1ull << 60);
    ASSERT_TRUE(rl__sequencer_next(&s) > (1ull << 60));
}

/* commit-2.1: a point write [b, b\0): edges are exclusive at the end. */
TEST(commit_2_1_resolver_point_edges) {
    rl__resolver *r;
    ASSERT_OK(rl__resolver_new(0, &r));
    rl__keyrange w = kr("b", 1, "b\0", 2);
    ASSERT_OK(rl__resolver_add(r, 10, &w, 1));
    rl__keyrange same = kr("b", 1, "b\0", 2);
    ASSERT_RC(rl__resolver_check(r, 9, &same, 1), RL_E_NOT_COMMITTED);
    ASSERT_OK(rl__resolver_check(r, 10, &same, 1)); /* read at the write's version saw it */
    ASSERT_OK(rl__resolver_check(r, 11, &same, 1));
    rl__keyrange before = R("a", "b"); /* ends exactly where the write begins */
    ASSERT_OK(rl__resolver_check(r, 0, &before, 1));
    rl__keyrange after = kr("b\0", 2, "c", 1); /* begins exactly where the write ends */
    ASSERT_OK(rl__resolver_check(r, 0, &after, 1));
    rl__keyrange cover = kr("a", 1, "b\0", 2);
    ASSERT_RC(rl__resolver_check(r, 0, &cover, 1), RL_E_NOT_COMMITTED);
    rl__keyrange all = R("", "\xff\xff");
    ASSERT_RC(rl__resolver_check(r, 0, &all, 1), RL_E_NOT_COMMITTED);
    rl__keyrange empty = R("b", "b");
    ASSERT_OK(rl__resolver_check(r, 0, &empty, 1));
    rl__keyrange inverted = R("c", "a");
    ASSERT_OK(rl__resolver_check(r, 0, &inverted, 1));
    /* One conflicting range among several is enough. */
    rl__keyrange several[3] = {R("a", "b"), R("c", "d"), kr("a", 1, "b\0", 2)};
    ASSERT_OK(rl__resolver_check(r, 0, several, 2));
    ASSERT_RC(rl__resolver_check(r, 0, several, 3), RL_E_NOT_COMMITTED);
    /* An empty write range is not remembered. */
    rl__keyrange ew = R("x", "x");
    ASSERT_OK(rl__resolver_add(r, 20, &ew, 1));
    rl__keyrange rx = R("w", "y");
    ASSERT_OK(rl__resolver_check(r, 0, &rx, 1));
    rl__resolver_free(r);
}

/* commit-2.2: range writes, overlapping overwrites and the key "" (the smallest key). */
TEST(commit_2_2_resolver_range_edges) {
    rl__resolver *r;
    ASSERT_OK(rl__resolver_new(0, &r));
    rl__keyrange w1 = R("c", "f");
    ASSERT_OK(rl__resolver_add(r, 20, &w1, 1));
    rl__keyrange a_c = R("a", "c"), f_g = R("f", "g"), e_e0 = kr("e", 1, "e\0", 2), a_z = R("a", "z");
    rl__keyrange ee = kr("ezzz", 4, "f", 1);
    ASSERT_OK(rl__resolver_check(r, 5, &a_c, 1));
    ASSERT_OK(rl__resolver_check(r, 5, &f_g, 1));
    ASSERT_RC(rl__resolver_check(r, 5, &e_e0, 1), RL_E_NOT_COMMITTED);
    ASSERT_RC(rl__resolver_check(r, 5, &ee, 1), RL_E_NOT_COMMITTED);
    ASSERT_RC(rl__resolver_check(r, 19, &a_z, 1), RL_E_NOT_COMMITTED);
    ASSERT_OK(rl__resolver_check(r, 20, &a_z, 1));
    /* A later write over part of it: [d, h) at 30. [c, d) keeps 20. */
    rl__keyrange w2 = R("d", "h");
    ASSERT_OK(rl__resolver_add(r, 30, &w2, 1));
    rl__keyrange c_d = R("c", "d"), g_h = R("g", "h"), h_i = R("h", "i");
    ASSERT_OK(rl__resolver_check(r, 20, &c_d, 1));
    ASSERT_RC(rl__resolver_check(r, 19, &c_d, 1), RL_E_NOT_COMMITTED);
    ASSERT_RC(rl__resolver_check(r, 29, &g_h, 1), RL_E_NOT_COMMITTED);
    ASSERT_OK(rl__resolver_check(r, 29, &h_i, 1));
    /* A write that starts at "" and a read of the first key. */
    rl__keyrange w3 = R("", "a");
    ASSERT_OK(rl__resolver_add(r, 40, &w3, 1));
    rl__keyrange first = kr("", 0, "\0", 1);
    ASSERT_RC(rl__resolver_check(r, 39, &first, 1), RL_E_NOT_COMMITTED);
    ASSERT_OK(rl__resolver_check(r, 40, &first, 1));
    rl__keyrange a_b = R("a", "b");
    ASSERT_OK(rl__resolver_check(r, 0, &a_b, 1));
    /* A write swallowing everything. */
    rl__keyrange w4 = R("", "\xff\xff\xff");
    ASSERT_OK(rl__resolver_add(r, 50, &w4, 1));
    ASSERT_RC(rl__resolver_check(r, 49, &a_b, 1), RL_E_NOT_COMMITTED);
    rl__keyrange top = R("\xff\xff\xff", "\xff\xff\xff\xff");
    ASSERT_OK(rl__resolver_check(r, 0, &top, 1));
    rl__resolver_free(r);
}

/* commit-2.3: reads older than the window (or the floor) are too old; blind writes never are. */
TEST(commit_2_3_resolver_window_too_old) {
    rl__resolver *r;
    ASSERT_OK(rl__resolver_new(100, &r));
    ASSERT_EQ(rl__resolver_oldest(r), 0);
    rl__keyrange w = R("k", "l");
    ASSERT_OK(rl__resolver_add(r, 1000, &w, 1));
    ASSERT_EQ(rl__resolver_oldest(r), 900);
    rl__keyrange other = R("a", "b");
    ASSERT_RC(rl__resolver_check(r, 899, &other, 1), RL_E_TRANSACTION_TOO_OLD);
    ASSERT_OK(rl__resolver_check(r, 899, NULL, 0));
    ASSERT_OK(rl__resolver_check(r, 900, &other, 1));
    ASSERT_RC(rl__resolver_check(r, 900, &w, 1), RL_E_NOT_COMMITTED);
    /* The floor. */
    rl__resolver_set_floor(r, 950);
    ASSERT_EQ(rl__resolver_oldest(r), 950);
    ASSERT_RC(rl__resolver_check(r, 949, &other, 1), RL_E_TRANSACTION_TOO_OLD);
    rl__resolver_set_floor(r, 10); /* never lowers */
    ASSERT_EQ(rl__resolver_oldest(r), 950);
    /* Advancing with no writes moves the window. */
    ASSERT_OK(rl__resolver_add(r, 2000, NULL, 0));
    ASSERT_EQ(rl__resolver_oldest(r), 1900);
    ASSERT_OK(rl__resolver_check(r, 1900, &w, 1));
    rl__resolver_free(r);
}

/* ---- commit-2.4: randomized against a brute-force model --------------------------------- */

typedef struct {
    char b[6], e[6];
    size_t blen, elen;
    rl__version v;
} model_write;

static size_t rand_key(uint64_t *st, char *k) {
    static const char alpha[] = {'\0', 'a', 'b', 'c', 'd', 'e', '\xfe', '\xff'};
    size_t len = (size_t)rl_test_rand_below(st, 5);
    for (size_t i = 0; i < len; i++) k[i] = alpha[rl_test_rand_below(st, sizeof alpha)];
    return len;
}

static int kcmp(const char *a, size_t alen, const char *b, size_t blen) {
    size_t n = alen < blen ? alen : blen;
    int c = n ? memcmp(a, b, n) : 0;
    if (c) return c;
    return alen < blen ? -1 : alen > blen;
}

TEST(commit_2_4_resolver_random_model) {
    uint64_t st = rl_test_seed();
    const uint64_t window = 400;
    rl__resolver *r;
    ASSERT_OK(rl__resolver_new(window, &r));
    size_t cap = 80000, n = 0;
    model_write *ws = calloc(cap, sizeof *ws);
    ASSERT_NOT_NULL(ws);
    rl__version now = 1;
    int seen[3] = {0, 0, 0}; /* ok, not_committed, too_old */
    for (int step = 0; step < 40000; step++) {
        if (rl_test_rand_below(&st, 2) == 0 && n + 3 <= cap) {
            now += 1 + rl_test_rand_below(&st, 20);
            int k = 1 + (int)rl_test_rand_below(&st, 3);
            rl__keyrange wr[3];
            for (int i = 0; i < k; i++) {
                model_write *m = &ws[n++];
                m->blen = rand_key(&st, m->b);
                /* Narrow writes, so the map grows enough to be collected: points [k, k\0),
                 * prefix ranges [k, k\xff), and now and then a random (often wide) range. */
                uint64_t kind = rl_test_rand_below(&st, 100);
                if (kind < 97) {
                    memcpy(m->e, m->b, m->blen);
                    m->e[m->blen] = kind < 75 || m->blen < 2 ? '\0' : '\xff';
                    m->elen = m->blen + 1;
                } else {
                    m->elen = rand_key(&st, m->e);
                }
                m->v = now;
                wr[i] = kr(m->b, m->blen, m->e, m->elen);
            }
            ASSERT_OK(rl__resolver_add(r, now, wr, (size_t)k));
        } else {
            rl__version oldest = now > window ? now - window : 0;
            ASSERT_EQ(rl__resolver_oldest(r), oldest);
            rl__version rv = now > 500 ? now - rl_test_rand_below(&st, 500) : rl_test_rand_below(&st, now + 1);
            char kb[2][5], ke[2][5];
            rl__keyrange rd[2];
            int k = 1 + (int)rl_test_rand_below(&st, 2);
            int want = RL_OK;
            for (int i = 0; i < k; i++) {
                size_t bl = rand_key(&st, kb[i]), el = rand_key(&st, ke[i]);
                rd[i] = kr(kb[i], bl, ke[i], el);
                if (kcmp(kb[i], bl, ke[i], el) >= 0) continue;
                /* Writes are in version order: only the newest can be newer than rv. */
                for (size_t j = n; j-- > 0 && ws[j].v > rv;) {
                    const model_write *m = &ws[j];
                    if (kcmp(m->b, m->blen, m->e, m->elen) >= 0) continue;
                    /* [b1,e1) and [b2,e2) intersect iff b1 < e2 and b2 < e1. */
                    if (kcmp(kb[i], bl, m->e, m->elen) < 0 && kcmp(m->b, m->blen, ke[i], el) < 0)
                        want = RL_E_NOT_COMMITTED;
                }
            }
            if (rv < oldest) want = RL_E_TRANSACTION_TOO_OLD;
            int got = rl__resolver_check(r, rv, rd, (size_t)k);
            seen[got == RL_OK ? 0 : got == RL_E_NOT_COMMITTED ? 1 : 2]++;
            if (got != want)
                fail_msg("step %d rv %llu now %llu: got %s want %s", step, (unsigned long long)rv,
                         (unsigned long long)now, rl_error_name(got), rl_error_name(want));
        }
    }
    /* Every outcome was exercised, and collection kept the map small (the key space allows thousands of boundaries
     * but the window keeps far fewer). */
    ASSERT_TRUE(seen[0] > 1000 && seen[1] > 1000 && seen[2] > 1000);
    ASSERT_TRUE(rl__resolver_size(r) < 1100);
    free(ws);
    rl__resolver_free(r);
}

/* commit-2.5: thousands of commits per second with a 5-second window stay small: old writes are
 * forgotten (the boundary count stays bounded by the writes inside the window). */
TEST(commit_2_5_resolver_forgets_old_writes) {
    uint64_t st = rl_test_seed();
    rl__resolver *r;
    ASSERT_OK(rl__resolver_new(0, &r)); /* 5,000,000 */
    rl__version v = 1;
    size_t max_size = 0;
    for (int i = 0; i < 200000; i++) {
        v += 500; /* 2,000 commits per second of versions: 10,000 inside the window */
        char k[16];
        int len = snprintf(k, sizeof k, "k%08llu", (unsigned long long)rl_test_rand_below(&st, 100000000));
        rl__keyrange w = kr(k, (size_t)len, k, (size_t)len + 1); /* includes the NUL: key + \0 */
        ASSERT_OK(rl__resolver_add(r, v, &w, 1));
        if (rl__resolver_size(r) > max_size) max_size = rl__resolver_size(r);
        if (i % 1000 == 0) {
            rl__keyrange rd = kr(k, (size_t)len, k, (size_t)len + 1);
            ASSERT_RC(rl__resolver_check(r, v - 1, &rd, 1), RL_E_NOT_COMMITTED);
            ASSERT_OK(rl__resolver_check(r, v, &rd, 1));
        }
    }
    /* 10,000 live writes give at most 20,001 boundaries; collection lets it double. */
    ASSERT_TRUE(max_size <= 4 * 10000 + 2048);
    rl__resolver_free(r);
}

RL_TEST_MAIN(T(commit_1_1_sequencer_monotonic), T(commit_1_3_sequencer_injected_clock), T(commit_1_2_sequencer_restart),
             T(commit_2_1_resolver_point_edges), T(commit_2_2_resolver_range_edges),
             T(commit_2_3_resolver_window_too_old), T(commit_2_4_resolver_random_model),
             T(commit_2_5_resolver_forgets_old_writes))
