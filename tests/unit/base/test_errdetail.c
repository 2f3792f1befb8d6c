/* test_errdetail.c — rl__errdetail, the one internal error-detail type (base/errdetail.h). */
#include "test.h"

#include <pthread.h>

#include "base/alloc.h"
#include "base/errdetail.h"

/* errdetail-1.1: set replaces, append adds, len measures, truncate and clear cut back. */
TEST(errdetail_1_1_set_append_truncate) {
    rl__errdetail d;
    rl__errdetail_init(&d, NULL);
    ASSERT_STR_EQ(rl__errdetail_get(&d), "");
    ASSERT_EQ(rl__errdetail_len(&d), 0);
    rl__errdetail_append(&d, "cannot open %s", "x");
    ASSERT_STR_EQ(rl__errdetail_get(&d), "cannot open x");
    size_t mark = rl__errdetail_len(&d);
    ASSERT_EQ(mark, 13);
    rl__errdetail_append(&d, ": %d", 42);
    ASSERT_STR_EQ(rl__errdetail_get(&d), "cannot open x: 42");
    rl__errdetail_truncate(&d, mark);
    ASSERT_STR_EQ(rl__errdetail_get(&d), "cannot open x");
    rl__errdetail_truncate(&d, 1000);
    ASSERT_STR_EQ(rl__errdetail_get(&d), "cannot open x");
    rl__errdetail_set(&d, "%s", "other");
    ASSERT_STR_EQ(rl__errdetail_get(&d), "other");
    rl__errdetail_copy(&d, NULL);
    ASSERT_STR_EQ(rl__errdetail_get(&d), "");
    rl__errdetail_copy(&d, "copied");
    ASSERT_STR_EQ(rl__errdetail_get(&d), "copied");
    rl__errdetail_clear(&d);
    ASSERT_STR_EQ(rl__errdetail_get(&d), "");
}

/* errdetail-1.2: a NULL detail is a no-op everywhere; reads give "" and 0. */
TEST(errdetail_1_2_null) {
    rl__errdetail_set(NULL, "x %d", 1);
    rl__errdetail_append(NULL, "x %d", 1);
    rl__errdetail_copy(NULL, "x");
    rl__errdetail_truncate(NULL, 0);
    rl__errdetail_clear(NULL);
    ASSERT_STR_EQ(rl__errdetail_get(NULL), "");
    ASSERT_EQ(rl__errdetail_len(NULL), 0);
    ASSERT_EQ(rl__errdetail_mark(NULL), 0);
    ASSERT_EQ(rl__errdetail_finish(NULL, 0, RL_E_INVALID_ARGUMENT, "call"), RL_E_INVALID_ARGUMENT);
}

/* errdetail-1.3: text is cut at RL__ERRDETAIL_CAP - 1 bytes, by set and by append; an append to a
 * full message leaves it as it is; nothing allocates. */
TEST(errdetail_1_3_cut_to_fit) {
    char big[3000];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = 0;
    rl_alloc_reset_stats();
    rl__errdetail d;
    rl__errdetail_init(&d, NULL);
    rl__errdetail_set(&d, "%s", big);
    ASSERT_EQ(rl__errdetail_len(&d), RL__ERRDETAIL_CAP - 1);
    rl__errdetail_append(&d, "more");
    ASSERT_EQ(rl__errdetail_len(&d), RL__ERRDETAIL_CAP - 1);
    rl__errdetail_truncate(&d, 1000);
    rl__errdetail_append(&d, "bcdefghijklmnopqrstuvwxyz");
    ASSERT_EQ(rl__errdetail_len(&d), RL__ERRDETAIL_CAP - 1);
    ASSERT_STR_EQ(rl__errdetail_get(&d) + 1000, "bcdefghijklmnopqrstuvwx");
    rl_alloc_stats s;
    rl_alloc_get_stats(&s);
    ASSERT_EQ(s.allocs, 0);
}

/* errdetail-1.4: the arguments may point into the detail's own message (a caller that prefixes
 * what a callee left). */
TEST(errdetail_1_4_aliasing) {
    rl__errdetail d;
    rl__errdetail_init(&d, NULL);
    rl__errdetail_set(&d, "inner");
    rl__errdetail_set(&d, "outer: %s", rl__errdetail_get(&d));
    ASSERT_STR_EQ(rl__errdetail_get(&d), "outer: inner");
    rl__errdetail_append(&d, " (%s)", rl__errdetail_get(&d));
    ASSERT_STR_EQ(rl__errdetail_get(&d), "outer: inner (outer: inner)");
}

/* errdetail-1.5: rl__errdetail_finish sets "<what>: <message>" only for a failure of a call that
 * set nothing; append counts as a set, truncate and clear do not; with a mutex as without. */
TEST(errdetail_1_5_finish) {
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    rl__errdetail d;
    rl__errdetail_init(&d, &mu);
    unsigned m = rl__errdetail_mark(&d);
    ASSERT_EQ(rl__errdetail_finish(&d, m, RL_OK, "call"), RL_OK);
    ASSERT_EQ(rl__errdetail_finish(&d, m, RL_E_NOT_FOUND, "call"), RL_E_NOT_FOUND);
    ASSERT_STR_EQ(rl__errdetail_get(&d), "");
    ASSERT_EQ(rl__errdetail_finish(&d, m, RL_E_INVALID_ARGUMENT, "call"), RL_E_INVALID_ARGUMENT);
    ASSERT_STR_EQ(rl__errdetail_get(&d), "call: Invalid argument");
    m = rl__errdetail_mark(&d);
    rl__errdetail_append(&d, "; more");
    rl__errdetail_finish(&d, m, RL_E_INVALID_ARGUMENT, "call");
    ASSERT_STR_EQ(rl__errdetail_get(&d), "call: Invalid argument; more");
    m = rl__errdetail_mark(&d);
    rl__errdetail_clear(&d);
    rl__errdetail_finish(&d, m, RL_E_INVALID_ARGUMENT, "other");
    ASSERT_STR_EQ(rl__errdetail_get(&d), "other: Invalid argument");
}

RL_TEST_MAIN(T(errdetail_1_1_set_append_truncate), T(errdetail_1_2_null), T(errdetail_1_3_cut_to_fit),
             T(errdetail_1_4_aliasing), T(errdetail_1_5_finish))
