/* test_netem.c — netem_*: the policy of injected delay (src/net/netem.h): which peers a process
 * delays (another host label, never an admin tool, an unknown label counts as another host), the
 * range check, and the STATUS fields of the lateness summary. */
#include <string.h>

#include "net/netem.h"
#include "net/proto.h"
#include "test.h"

#define L(s) (const uint8_t *)(s), strlen(s)

/* netem-1.1: the rule. */
TEST(netem_1_1_applies) {
    ASSERT_FALSE(rl__netem_applies("host1", 5, L("host1"), RL_ROLE_STORAGE));
    ASSERT_TRUE(rl__netem_applies("host1", 5, L("host2"), RL_ROLE_STORAGE));
    ASSERT_TRUE(rl__netem_applies("host1", 5, L("host10"), RL_ROLE_COORDINATOR)); /* a prefix is not equal */
    ASSERT_TRUE(rl__netem_applies("host10", 6, L("host1"), RL_ROLE_CLIENT));
    ASSERT_TRUE(rl__netem_applies("host1", 5, L(""), RL_ROLE_CLIENT));
    ASSERT_TRUE(rl__netem_applies("client", 6, L("host1"), RL_ROLE_STORAGE));
    ASSERT_FALSE(rl__netem_applies("client", 6, L("client"), RL_ROLE_STORAGE));
    /* Admin tools are never delayed, whatever their label. */
    ASSERT_FALSE(rl__netem_applies("host1", 5, L("rl"), RL_ROLE_ADMIN));
    ASSERT_FALSE(rl__netem_applies("host1", 5, NULL, 0, RL_ROLE_ADMIN));
    /* A label not known yet counts as another host. */
    ASSERT_TRUE(rl__netem_applies("host1", 5, NULL, 0, RL_ROLE_STORAGE));
    /* Labels are bytes, not C strings. */
    ASSERT_TRUE(rl__netem_applies("a\0b", 3, (const uint8_t *)"a\0c", 3, RL_ROLE_STORAGE));
    ASSERT_FALSE(rl__netem_applies("a\0b", 3, (const uint8_t *)"a\0b", 3, RL_ROLE_STORAGE));
}

/* netem-1.2: the range and the STATUS fields. */
TEST(netem_1_2_check_and_status) {
    rl__errdetail why;
    rl__errdetail_init(&why, NULL);
    ASSERT_OK(rl__netem_check(0, 0, &why));
    ASSERT_OK(rl__netem_check(RL_NETEM_MAX_US, RL_NETEM_MAX_US, &why));
    ASSERT_RC(rl__netem_check(RL_NETEM_MAX_US + 1, 0, &why), RL_E_INVALID_ARGUMENT);
    ASSERT_NOT_NULL(strstr(rl__errdetail_get(&why), "10000001"));
    ASSERT_RC(rl__netem_check(0, UINT32_MAX, NULL), RL_E_INVALID_ARGUMENT);
    rl__lat_hist h;
    rl__lat_hist_reset(&h);
    for (int i = 1; i <= 100; i++) rl__lat_hist_add(&h, (uint64_t)i * 1000);
    rl_buf b;
    rl__buf_init(&b);
    rl__buf_append_str(&b, "{");
    rl__netem_status_json(&b, 250, 5, &h);
    rl__buf_append_str(&b, "}");
    ASSERT_NOT_NULL(strstr((const char *)b.data, "\"delay_us\":250,\"jitter_us\":5,\"delayed_frames\":100,"));
    ASSERT_NOT_NULL(strstr((const char *)b.data, "\"late_max_ns\":100000}"));
    rl__buf_reset(&b);
    rl__lat_hist_reset(&h);
    rl__netem_status_json(&b, 0, 0, &h);
    ASSERT_STR_EQ((const char *)b.data, "\"delay_us\":0,\"jitter_us\":0,\"delayed_frames\":0,\"late_p50_ns\":0,"
                                        "\"late_p99_ns\":0,\"late_max_ns\":0");
    rl__buf_release(&b);
}

RL_TEST_MAIN(T(netem_1_1_applies), T(netem_1_2_check_and_status))
