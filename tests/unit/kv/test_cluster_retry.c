/* test_cluster_retry.c — cluster_retry_*: the cluster client's retry rules
 * (rl__cluster_retry_decide in src/kv/cluster/cluster.h) as a pure function: which failures are
 * retried, how long, with what backoff, and what the operation finally fails with.
 *
 * This test reads no RL_TEST_URL. */
#include "kv/cluster/cluster.h"
#include "test.h"

#define S 1000000000ull

/* cluster-retry-1.1: transport failures of reads, read versions and map fetches back off
 * (5 ms doubling to 250 ms) and give up with connection_failed 5 s after the first failure. */
TEST(cluster_retry_1_1_transport) {
    int kinds[] = {RL_CREQ_READ, RL_CREQ_GRV, RL_CREQ_MAP, RL_CREQ_STATUS};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        uint64_t since = 100 * S;
        uint64_t want = RL_CLUSTER_BACKOFF_MIN_NS;
        for (int a = 1; a <= 12; a++) {
            rl__cretry d = rl__cluster_retry_decide(kinds[k], RL_E_CONNECTION_FAILED, 0, 0, since,
                                                    since + (uint64_t)a * 1000, a, 0);
            ASSERT_EQ(d.action, RL_CRETRY_BACKOFF);
            ASSERT_EQ(d.delay_ns, want);
            want = want * 2 > RL_CLUSTER_BACKOFF_MAX_NS ? RL_CLUSTER_BACKOFF_MAX_NS : want * 2;
        }
        rl__cretry d = rl__cluster_retry_decide(kinds[k], RL_E_TIMED_OUT, 0, 0, since,
                                                since + RL_CLUSTER_RETRY_WINDOW_NS - 1, 30, 0);
        ASSERT_EQ(d.action, RL_CRETRY_BACKOFF);
        d = rl__cluster_retry_decide(kinds[k], RL_E_TIMED_OUT, 0, 0, since, since + RL_CLUSTER_RETRY_WINDOW_NS, 30, 0);
        ASSERT_EQ(d.action, RL_CRETRY_FAIL);
        ASSERT_EQ(d.err, RL_E_CONNECTION_FAILED);
    }
    /* A foreign protocol, memory and cancellation are not retried. */
    rl__cretry d = rl__cluster_retry_decide(RL_CREQ_READ, RL_E_INCOMPATIBLE_PROTOCOL_VERSION, 0, 0, S, S, 1, 0);
    ASSERT_EQ(d.action, RL_CRETRY_FAIL);
    ASSERT_EQ(d.err, RL_E_INCOMPATIBLE_PROTOCOL_VERSION);
    d = rl__cluster_retry_decide(RL_CREQ_GRV, RL_E_OUT_OF_MEMORY, 0, 0, S, S, 1, 0);
    ASSERT_EQ(d.err, RL_E_OUT_OF_MEMORY);
    d = rl__cluster_retry_decide(RL_CREQ_READ, RL_E_OPERATION_CANCELLED, 0, 0, S, S, 1, 0);
    ASSERT_EQ(d.err, RL_E_OPERATION_CANCELLED);
}

/* cluster-retry-1.2: a commit that may have reached the coordinator is commit_unknown_result
 * (1021) when its connection is lost or it times out; one that cannot have been sent is retried
 * like a read, then connection_failed. */
TEST(cluster_retry_1_2_commit) {
    rl__cretry d = rl__cluster_retry_decide(RL_CREQ_COMMIT, RL_E_CONNECTION_FAILED, 0, 1, S, S, 1, 0);
    ASSERT_EQ(d.action, RL_CRETRY_FAIL);
    ASSERT_EQ(d.err, RL_E_COMMIT_UNKNOWN_RESULT);
    d = rl__cluster_retry_decide(RL_CREQ_COMMIT, RL_E_TIMED_OUT, 0, 1, S, S, 1, 0);
    ASSERT_EQ(d.err, RL_E_COMMIT_UNKNOWN_RESULT);
    d = rl__cluster_retry_decide(RL_CREQ_COMMIT, RL_E_CONNECTION_FAILED, 0, 0, S, S + 1000, 1, 0);
    ASSERT_EQ(d.action, RL_CRETRY_BACKOFF);
    d = rl__cluster_retry_decide(RL_CREQ_COMMIT, RL_E_CONNECTION_FAILED, 0, 0, S, S + RL_CLUSTER_RETRY_WINDOW_NS, 9, 0);
    ASSERT_EQ(d.action, RL_CRETRY_FAIL);
    ASSERT_EQ(d.err, RL_E_CONNECTION_FAILED);
    /* The coordinator's error replies are the commit's outcome. */
    d = rl__cluster_retry_decide(RL_CREQ_COMMIT, RL_E_SYSTEM_KEY_WRITE, 1, 1, 0, 0, 0, 0);
    ASSERT_EQ(d.action, RL_CRETRY_FAIL);
    ASSERT_EQ(d.err, RL_E_SYSTEM_KEY_WRITE);
}

/* cluster-retry-1.3: wrong_shard_server refreshes the map and retries a read — at once the first
 * time, then with backoff — up to RL_CLUSTER_WRONG_SHARD_RETRIES times, then is the read's error;
 * other error replies (future_version, transaction_too_old, mapper errors) are the outcome at
 * once, and wrong_shard_server to anything but a read is too. */
TEST(cluster_retry_1_3_error_replies) {
    for (int n = 1; n <= RL_CLUSTER_WRONG_SHARD_RETRIES; n++) {
        rl__cretry d = rl__cluster_retry_decide(RL_CREQ_READ, RL_E_WRONG_SHARD_SERVER, 1, 0, 0, 0, 0, n);
        ASSERT_EQ(d.action, RL_CRETRY_REFRESH);
        if (n == 1) ASSERT_EQ(d.delay_ns, 0);
        else ASSERT_TRUE(d.delay_ns >= RL_CLUSTER_BACKOFF_MIN_NS && d.delay_ns <= RL_CLUSTER_BACKOFF_MAX_NS);
    }
    rl__cretry d = rl__cluster_retry_decide(RL_CREQ_READ, RL_E_WRONG_SHARD_SERVER, 1, 0, 0, 0, 0,
                                            RL_CLUSTER_WRONG_SHARD_RETRIES + 1);
    ASSERT_EQ(d.action, RL_CRETRY_FAIL);
    ASSERT_EQ(d.err, RL_E_WRONG_SHARD_SERVER);
    int codes[] = {RL_E_FUTURE_VERSION, RL_E_TRANSACTION_TOO_OLD, RL_E_MAPPER_BAD_INDEX, RL_E_CONNECTION_FAILED};
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
        d = rl__cluster_retry_decide(RL_CREQ_READ, codes[i], 1, 0, 0, 0, 0, 0);
        ASSERT_EQ(d.action, RL_CRETRY_FAIL);
        ASSERT_EQ(d.err, codes[i]);
    }
    d = rl__cluster_retry_decide(RL_CREQ_GRV, RL_E_WRONG_SHARD_SERVER, 1, 0, 0, 0, 0, 1);
    ASSERT_EQ(d.action, RL_CRETRY_FAIL);
}

/* cluster-retry-1.5: replicated reads move to another member at once — after a transport
 * failure or a future_version reply, once per other member of the team; never for teams of one,
 * other kinds of request (commits, read versions, the map), or failures no member would cure. */
TEST(cluster_retry_1_5_failover) {
    for (int tries = 1; tries <= 3; tries++) {
        ASSERT_EQ(rl__cluster_failover_now(RL_CREQ_READ, RL_E_CONNECTION_FAILED, 0, 2, tries), tries < 2);
        ASSERT_EQ(rl__cluster_failover_now(RL_CREQ_READ, RL_E_TIMED_OUT, 0, 3, tries), tries < 3);
        ASSERT_EQ(rl__cluster_failover_now(RL_CREQ_READ, RL_E_FUTURE_VERSION, 1, 3, tries), tries < 3);
    }
    ASSERT_EQ(rl__cluster_failover_now(RL_CREQ_READ, RL_E_CONNECTION_FAILED, 0, 1, 1), 0);
    ASSERT_EQ(rl__cluster_failover_now(RL_CREQ_READ, RL_E_CONNECTION_FAILED, 0, 2, 0), 0);
    ASSERT_EQ(rl__cluster_failover_now(RL_CREQ_COMMIT, RL_E_CONNECTION_FAILED, 0, 2, 1), 0);
    ASSERT_EQ(rl__cluster_failover_now(RL_CREQ_GRV, RL_E_CONNECTION_FAILED, 0, 2, 1), 0);
    ASSERT_EQ(rl__cluster_failover_now(RL_CREQ_MAP, RL_E_CONNECTION_FAILED, 0, 2, 1), 0);
    ASSERT_EQ(rl__cluster_failover_now(RL_CREQ_READ, RL_E_OUT_OF_MEMORY, 0, 2, 1), 0);
    ASSERT_EQ(rl__cluster_failover_now(RL_CREQ_READ, RL_E_OPERATION_CANCELLED, 0, 2, 1), 0);
    ASSERT_EQ(rl__cluster_failover_now(RL_CREQ_READ, RL_E_INCOMPATIBLE_PROTOCOL_VERSION, 0, 2, 1), 0);
    ASSERT_EQ(rl__cluster_failover_now(RL_CREQ_READ, RL_E_WRONG_SHARD_SERVER, 1, 2, 1), 0);
    ASSERT_EQ(rl__cluster_failover_now(RL_CREQ_READ, RL_E_TRANSACTION_TOO_OLD, 1, 2, 1), 0);
}

/* cluster-retry-1.6: the hedge threshold: RL_CLUSTER_HEDGE_FACTOR x the median of the recent
 * round trips, never below RL_CLUSTER_HEDGE_MIN_NS; without samples the minimum; samples beyond
 * RL_CLUSTER_HEDGE_SAMPLES ignored and the input left unchanged. */
TEST(cluster_retry_1_6_hedge_threshold) {
    ASSERT_EQ(rl__cluster_hedge_threshold(NULL, 0), RL_CLUSTER_HEDGE_MIN_NS);
    uint64_t small[3] = {50000, 40000, 60000};
    ASSERT_EQ(rl__cluster_hedge_threshold(small, 3), RL_CLUSTER_HEDGE_MIN_NS); /* 4 x 50 us < 2 ms */
    uint64_t big[5] = {9000000, 1000000, 3000000, 2000000, 100};
    ASSERT_EQ(rl__cluster_hedge_threshold(big, 5), 4 * 2000000ull); /* median 2 ms */
    ASSERT_EQ(big[0], 9000000ull);                                  /* not sorted in place */
    uint64_t many[RL_CLUSTER_HEDGE_SAMPLES + 4];
    for (int i = 0; i < RL_CLUSTER_HEDGE_SAMPLES + 4; i++) many[i] = i < RL_CLUSTER_HEDGE_SAMPLES ? 1000000 : 1;
    ASSERT_EQ(rl__cluster_hedge_threshold(many, RL_CLUSTER_HEDGE_SAMPLES + 4), 4000000ull);
}

RL_TEST_MAIN(T(cluster_retry_1_6_hedge_threshold), T(cluster_retry_1_5_failover), T(cluster_retry_1_1_transport),
             T(cluster_retry_1_2_commit), T(cluster_retry_1_3_error_replies))
