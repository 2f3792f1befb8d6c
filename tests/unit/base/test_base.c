/* test_base.c — the error table, rl_buf, rl_arena, the allocation hook, the clock and the
 * thread-exit functions. */
#include "test.h"

#include "base/alloc.h"
#include "base/arena.h"
#include "base/buf.h"
#include "base/bytes.h"
#include "base/clock.h"
#include "base/thread_exit.h"

#include <pthread.h>

/* base-1.1: every code has a distinct code and name, and a message. */
TEST(base_1_1_error_table_distinct) {
    int n = rl_error_count();
    ASSERT_TRUE(n > 50);
    for (int i = 0; i < n; i++) {
        int c = rl_error_at(i);
        ASSERT_TRUE(c > 0);
        ASSERT_TRUE(strlen(rl_error_name(c)) > 0);
        ASSERT_TRUE(strlen(rl_error_message(c)) > 0);
        ASSERT_TRUE(strcmp(rl_error_name(c), "unknown_error") != 0);
        for (int j = i + 1; j < n; j++) {
            ASSERT_NE(c, rl_error_at(j));
            ASSERT_TRUE(strcmp(rl_error_name(c), rl_error_name(rl_error_at(j))) != 0);
        }
    }
    ASSERT_STR_EQ(rl_error_name(RL_OK), "success");
    ASSERT_STR_EQ(rl_error_name(123456), "unknown_error");
    ASSERT_FALSE(rl_error_is_known(123456));
}

/* base-1.2: FoundationDB's numbers are the ones docs/design.md §2 names. */
TEST(base_1_2_fdb_numbers) {
    static const struct {
        int code;
        const char *name;
    } want[] = {
        {1001, "wrong_shard_server"},
        {1007, "transaction_too_old"},
        {1009, "future_version"},
        {1020, "not_committed"},
        {1021, "commit_unknown_result"},
        {1031, "transaction_timed_out"},
        {2000, "client_invalid_operation"},
        {2030, "mapper_bad_index"},
        {2031, "mapper_no_such_key"},
        {2032, "mapper_bad_range_decriptor"},
        {2033, "quick_get_key_values_has_more"},
        {2034, "quick_get_value_miss"},
        {2035, "quick_get_key_values_miss"},
        {2038, "get_mapped_key_values_has_more"},
        {2039, "get_mapped_range_reads_your_writes"},
        {2041, "key_not_tuple"},
        {2042, "value_not_tuple"},
        {2043, "mapper_not_tuple"},
        {2101, "transaction_too_large"},
        {2102, "key_too_large"},
        {2103, "value_too_large"},
        {2108, "unsupported_operation"},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        ASSERT_TRUE(rl_error_is_known(want[i].code));
        ASSERT_STR_EQ(rl_error_name(want[i].code), want[i].name);
    }
    ASSERT_EQ(RL_E_NOT_COMMITTED, 1020);
    ASSERT_TRUE(rl_error_retryable(RL_E_NOT_COMMITTED));
    ASSERT_TRUE(rl_error_retryable(RL_E_TRANSACTION_TOO_OLD));
    ASSERT_TRUE(rl_error_retryable(RL_E_FUTURE_VERSION));
    ASSERT_TRUE(rl_error_retryable(RL_E_COMMIT_UNKNOWN_RESULT));
    ASSERT_FALSE(rl_error_retryable(RL_E_KEY_TOO_LARGE));
    ASSERT_FALSE(rl_error_retryable(RL_E_TRANSACTION_TIMED_OUT));
    ASSERT_FALSE(rl_error_retryable(RL_OK));
}

/* base-2.1: rl_buf appends, stays NUL-terminated, detaches. */
TEST(base_2_1_buf) {
    rl_buf b;
    rl__buf_init(&b);
    ASSERT_NOT_NULL(b.data);
    ASSERT_EQ(b.data[0], 0);
    for (int i = 0; i < 1000; i++) rl__buf_printf(&b, "%d,", i);
    ASSERT_OK(rl__buf_error(&b));
    ASSERT_EQ(b.data[b.len], 0);
    ASSERT_TRUE(strncmp((char *)b.data, "0,1,2,", 6) == 0);
    rl__buf_reset(&b);
    rl__buf_append_u32be(&b, 0x01020304);
    rl__buf_append_hex(&b, "\xab\x01", 2);
    ASSERT_MEM_EQ(b.data, b.len,
                  "\x01\x02\x03\x04"
                  "ab01",
                  8);
    size_t n;
    uint8_t *p = rl__buf_detach(&b, &n);
    ASSERT_EQ(n, 8);
    ASSERT_EQ(b.len, 0);
    rl__free(p);
    rl__buf_release(&b);
}

/* base-2.3: a JSON string literal: quotes, '"' and '\\' escaped, control bytes and DEL as \u00XX,
 * a NUL inside the length as \u0000, UTF-8 bytes as they are. */
TEST(base_2_3_buf_json_str) {
    rl_buf b;
    rl__buf_init(&b);
    static const char in[] = "a\"b\\c\n\x01\x7f\xc3\xa9\0z";
    rl__buf_append_json_str(&b, in, sizeof in - 1);
    ASSERT_OK(rl__buf_error(&b));
    ASSERT_STR_EQ((const char *)b.data, "\"a\\\"b\\\\c\\u000a\\u0001\\u007f\xc3\xa9\\u0000z\"");
    rl__buf_reset(&b);
    rl__buf_append_json_str(&b, "", 0);
    ASSERT_STR_EQ((const char *)b.data, "\"\"");
    rl__buf_release(&b);
}

/* base-2.2: an allocation failure is sticky in rl_buf and reported once. */
TEST(base_2_2_buf_oom_sticky) {
    rl_buf b;
    rl__buf_init(&b);
    rl_alloc_fail_after(0);
    rl__buf_append(&b, "abc", 3);
    rl__buf_append(&b, "def", 3);
    ASSERT_RC(rl__buf_error(&b), RL_E_OUT_OF_MEMORY);
    ASSERT_EQ(b.len, 0);
    rl__buf_release(&b);
    rl_alloc_fail_after(-1);
}

/* base-3.1: arena alignment, growth and reset. */
TEST(base_3_1_arena) {
    rl_arena a;
    rl__arena_init(&a, 256);
    for (int i = 1; i < 200; i++) {
        uint8_t *p = rl__arena_alloc(&a, (size_t)i);
        ASSERT_NOT_NULL(p);
        ASSERT_EQ((uintptr_t)p % 16, 0);
        memset(p, 0xaa, (size_t)i);
    }
    void *big = rl__arena_alloc(&a, 10000);
    ASSERT_NOT_NULL(big);
    rl__arena_reset(&a);
    ASSERT_EQ(a.used, 0);
    rl_alloc_stats s0, s1;
    rl_alloc_get_stats(&s0);
    ASSERT_NOT_NULL(rl__arena_alloc(&a, 16));
    rl_alloc_get_stats(&s1);
    ASSERT_EQ(s1.allocs, s0.allocs); /* the kept block serves it */
    rl__arena_release(&a);
}

/* base-3.2: memory for frames read outside an arena (rl__arena_block_alloc): adopted by an arena
 * it stays valid beside the arena's own allocations and is freed with it — into the block cache,
 * so the next block of a like size is the same memory and costs no allocation (a stream of large
 * frames reuses warm pages); a much smaller request is not served by a large cached block; a block
 * freed without an arena goes back the same way. */
TEST(base_3_2_arena_adopted_blocks) {
    rl_arena a;
    rl__arena_init(&a, 0);
    uint8_t *p = rl__arena_block_alloc(300000);
    ASSERT_NOT_NULL(p);
    ASSERT_EQ((uintptr_t)p % 16, 0);
    memset(p, 0x5a, 300000);
    uint8_t *q = rl__arena_alloc(&a, 100);
    ASSERT_NOT_NULL(q);
    rl__arena_adopt(&a, p);
    uint8_t *r = rl__arena_alloc(&a, 100); /* the current block still serves allocations */
    ASSERT_NOT_NULL(r);
    ASSERT_TRUE(r > q && r < q + 4096);
    ASSERT_EQ(p[299999], 0x5a);
    rl__arena_release(&a);
    rl_alloc_stats s0, s1;
    rl_alloc_get_stats(&s0);
    uint8_t *p2 = rl__arena_block_alloc(290000); /* alike: the cached block */
    rl_alloc_get_stats(&s1);
    ASSERT_TRUE(p2 == p);
    ASSERT_EQ(s1.allocs, s0.allocs);
    uint8_t *small = rl__arena_block_alloc(70000); /* under half its size: a new block */
    ASSERT_NOT_NULL(small);
    ASSERT_TRUE(small != p2);
    rl__arena_init(&a, 0);
    rl__arena_adopt(&a, small); /* an arena of adopted blocks only */
    rl__arena_block_free(p2);
    rl__arena_reset(&a);
    rl__arena_release(&a);
    ASSERT_TRUE(rl__arena_block_alloc(300000) == p2);
    rl__arena_block_free(p2);
}

/* base-4.1: the counters count, and the Nth allocation fails. */
TEST(base_4_1_alloc_counters_and_failure) {
    rl_alloc_reset_stats();
    void *p = rl__malloc(100);
    void *q = rl__calloc(10, 10);
    ASSERT_NOT_NULL(p);
    ASSERT_NOT_NULL(q);
    rl_alloc_stats s;
    rl_alloc_get_stats(&s);
    ASSERT_EQ(s.allocs, 2);
    ASSERT_EQ(s.bytes, 200);
    rl__free(p);
    rl__free(q);
    rl__free(NULL);
    rl_alloc_get_stats(&s);
    ASSERT_EQ(s.frees, 2);
    rl_alloc_fail_after(2);
    void *a = rl__malloc(1), *b = rl__malloc(1), *c = rl__malloc(1), *d = rl__malloc(1);
    ASSERT_NOT_NULL(a);
    ASSERT_NOT_NULL(b);
    ASSERT_NULL(c);
    ASSERT_NOT_NULL(d);
    rl__free(a);
    rl__free(b);
    rl__free(d);
}

/* base-4.2: rl__grow / RL_GROW: the minimum first, then doubling or the need if larger, nothing
 * when there is room; on an injected failure or a size overflow the array and capacity stay. */
TEST(base_4_2_grow) {
    int *a = NULL;
    size_t cap = 0;
    ASSERT_OK(RL_GROW(a, cap, 1, 16));
    ASSERT_NOT_NULL(a);
    ASSERT_EQ(cap, 16);
    for (int i = 0; i < 16; i++) a[i] = i;
    int *before = a;
    ASSERT_OK(RL_GROW(a, cap, 16, 16)); /* room already */
    ASSERT_TRUE(a == before);
    ASSERT_EQ(cap, 16);
    ASSERT_OK(RL_GROW(a, cap, 17, 16));
    ASSERT_EQ(cap, 32);
    ASSERT_OK(RL_GROW(a, cap, 100, 16));
    ASSERT_EQ(cap, 100);
    for (int i = 0; i < 16; i++) ASSERT_EQ(a[i], i);
    before = a;
    rl_alloc_fail_after(0);
    ASSERT_RC(RL_GROW(a, cap, 101, 16), RL_E_OUT_OF_MEMORY);
    rl_alloc_fail_after(-1);
    ASSERT_TRUE(a == before);
    ASSERT_EQ(cap, 100);
    ASSERT_RC(RL_GROW(a, cap, SIZE_MAX / 2, 16), RL_E_OUT_OF_MEMORY);
    ASSERT_TRUE(a == before);
    ASSERT_EQ(cap, 100);
    ASSERT_EQ(a[15], 15);
    rl__free(a);
}

/* base-5.1: printable escapes round-trip (a bad escape's offset reported); hex parsing refuses junk. */
TEST(base_5_1_bytes) {
    rl_buf b, c;
    rl__buf_init(&b);
    rl__buf_init(&c);
    rl__bytes_printable(&b,
                        "a\\\x00\xff"
                        "z",
                        5);
    ASSERT_STR_EQ((char *)b.data, "a\\\\\\x00\\xffz");
    ASSERT_OK(rl__bytes_unprintable(&c, (char *)b.data));
    ASSERT_MEM_EQ(c.data, c.len,
                  "a\\\x00\xff"
                  "z",
                  5);
    rl__buf_reset(&c);
    ASSERT_RC(rl__bytes_unprintable(&c, "\\x0"), RL_E_INVALID_ARGUMENT);
    rl__buf_reset(&c);
    size_t at = 99; /* the offset of the bad escape's backslash; the bytes before it kept */
    ASSERT_RC(rl__bytes_unprintable_at(&c, "ab\\\\c\\q", &at), RL_E_INVALID_ARGUMENT);
    ASSERT_EQ(at, 5);
    ASSERT_MEM_EQ(c.data, c.len, "ab\\c", 4);
    ASSERT_EQ(rl__hex_digit('F'), 15);
    ASSERT_EQ(rl__hex_digit('g'), -1);
    rl__buf_reset(&c);
    ASSERT_RC(rl__bytes_from_hex(&c, "abc", 3), RL_E_INVALID_ARGUMENT);
    rl__buf_reset(&c);
    ASSERT_RC(rl__bytes_from_hex(&c, "zz", 2), RL_E_INVALID_ARGUMENT);
    rl__buf_reset(&c);
    ASSERT_OK(rl__bytes_from_hex(&c, "00Ff", 4));
    ASSERT_MEM_EQ(c.data, c.len, "\x00\xff", 2);
    ASSERT_TRUE(rl__bytes_cmp("a", 1, "ab", 2) < 0);
    ASSERT_TRUE(rl__bytes_cmp("b", 1, "ab", 2) > 0);
    ASSERT_EQ(rl__bytes_cmp("ab", 2, "ab", 2), 0);
    rl__buf_release(&b);
    rl__buf_release(&c);
}

/* base-6.1: the monotonic clock does not go backwards and sleeps advance it. */
TEST(base_6_1_clock) {
    uint64_t a = rl__clock_mono_ns();
    rl__clock_sleep_us(1000);
    uint64_t b = rl__clock_mono_ns();
    ASSERT_TRUE(b >= a + 1000000);
    ASSERT_TRUE(rl__clock_wall_us() > 1600000000ull * 1000000ull);
}

/* base-7.1: functions registered with rl__thread_at_exit run once each when their thread exits,
 * newest first, a second registration of one changes nothing, a ninth is refused, and another
 * thread's registrations are its own. */
static char te_log[16];
static int te_n;
static void te_a(void) { te_log[te_n++] = 'a'; }
static void te_b(void) { te_log[te_n++] = 'b'; }
static void te_f0(void) {}
static void te_f1(void) {}
static void te_f2(void) {}
static void te_f3(void) {}
static void te_f4(void) {}
static void te_f5(void) {}
static void te_f6(void) {}

static void *te_thread(void *full) {
    int ok = rl__thread_at_exit(te_a) && rl__thread_at_exit(te_b) && rl__thread_at_exit(te_a);
    if (ok && full) {
        void (*more[])(void) = {te_f0, te_f1, te_f2, te_f3, te_f4, te_f5};
        for (int i = 0; i < 6; i++) ok &= rl__thread_at_exit(more[i]);
        ok &= rl__thread_at_exit(te_a);   /* registered already: still 1 */
        ok &= !rl__thread_at_exit(te_f6); /* a ninth: refused */
    }
    return (void *)(intptr_t)ok;
}

TEST(base_7_1_thread_at_exit) {
    for (int full = 0; full < 2; full++) {
        te_n = 0;
        pthread_t th;
        void *ok = NULL;
        ASSERT_EQ(pthread_create(&th, NULL, te_thread, (void *)(intptr_t)full), 0);
        ASSERT_EQ(pthread_join(th, &ok), 0);
        ASSERT_TRUE(ok != NULL);
        ASSERT_EQ(te_n, 2);
        ASSERT_EQ(te_log[0], 'b'); /* newest first */
        ASSERT_EQ(te_log[1], 'a');
    }
}

RL_TEST_MAIN(T(base_1_1_error_table_distinct), T(base_1_2_fdb_numbers), T(base_2_1_buf), T(base_2_2_buf_oom_sticky),
             T(base_2_3_buf_json_str), T(base_3_1_arena), T(base_3_2_arena_adopted_blocks),
             T(base_4_1_alloc_counters_and_failure), T(base_4_2_grow), T(base_5_1_bytes), T(base_6_1_clock),
             T(base_7_1_thread_at_exit))
