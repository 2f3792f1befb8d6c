/* test_clusterfile.c — cluster_file_*: the cluster file's form (src/kv/cluster/clusterfile.h):
 * good files with comments and blank lines, every malformation named, loopback addresses only,
 * and format/parse round trips. */
#include <string.h>

#include "kv/cluster/clusterfile.h"
#include "test.h"

static int parse(const char *s, rl__cluster_file *cf, rl__errdetail *msg) {
    rl__errdetail_clear(msg);
    return rl__cluster_file_parse(s, strlen(s), cf, msg);
}

TEST(cluster_file_1_1_good) {
    rl__cluster_file cf;
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    ASSERT_OK(parse("reclayer:ab12_Z@127.0.0.1:4500\n", &cf, &msg));
    ASSERT_STR_EQ(cf.description, "reclayer");
    ASSERT_STR_EQ(cf.id, "ab12_Z");
    ASSERT_STR_EQ(cf.ip, "127.0.0.1");
    ASSERT_EQ(cf.port, 4500);
    ASSERT_OK(parse("# a comment\n\n  d:i@127.255.0.9:65535  \r\n# another\n", &cf, &msg));
    ASSERT_STR_EQ(cf.ip, "127.255.0.9");
    ASSERT_EQ(cf.port, 65535);
    rl_buf out;
    rl__buf_init(&out);
    rl__cluster_file_format(&cf, &out);
    ASSERT_STR_EQ((const char *)out.data, "d:i@127.255.0.9:65535\n");
    rl__cluster_file back;
    ASSERT_OK(rl__cluster_file_parse((const char *)out.data, out.len, &back, &msg));
    ASSERT_EQ(memcmp(&back, &cf, sizeof cf), 0);
    rl__buf_release(&out);
}

TEST(cluster_file_1_2_bad) {
    static const struct {
        const char *text, *why;
    } cases[] = {
        {"", "no connection string"},
        {"# only\n", "no connection string"},
        {"a:b@127.0.0.1:1\nc:d@127.0.0.1:2\n", "more than one"},
        {"ab@127.0.0.1:1", "missing ':' or '@'"},
        {"a:b127.0.0.1:1", "missing ':' or '@'"},
        {":b@127.0.0.1:1", "1 to 64"},
        {"a-x:b@127.0.0.1:1", "description may hold"},
        {"a:b.c@127.0.0.1:1", "id may hold"},
        {"a:b@10.0.0.1:1", "127.0.0.0/8"},
        {"a:b@0.0.0.0:1", "127.0.0.0/8"},
        {"a:b@127.0.0.01:1", "127.0.0.0/8"},
        {"a:b@127.0.0:1", "127.0.0.0/8"},
        {"a:b@127.0.0.1.1:1", "127.0.0.0/8"},
        {"a:b@localhost:1", "127.0.0.0/8"},
        {"a:b@127.0.0.1:", "port is missing"},
        {"a:b@127.0.0.1:0", "out of range"},
        {"a:b@127.0.0.1:65536", "out of range"},
        {"a:b@127.0.0.1:12x", "not a number"},
        {"a:b@127.0.0.1", "IP:PORT"},
    };
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rl__cluster_file cf;
        int rc = parse(cases[i].text, &cf, &msg);
        if (rc != RL_E_CONNECTION_STRING_INVALID || !strstr(rl__errdetail_get(&msg), cases[i].why))
            fail_msg("'%s': %s '%s' (want '%s')", cases[i].text, rl_error_name(rc), rl__errdetail_get(&msg),
                     cases[i].why);
    }
    rl__cluster_file cf;
    rl__errdetail_clear(&msg);
    ASSERT_RC(rl__cluster_file_read("/nonexistent/reclayer.cluster", &cf, &msg), RL_E_FILE_NOT_FOUND);
    ASSERT_TRUE(strstr(rl__errdetail_get(&msg), "/nonexistent/reclayer.cluster") != NULL);
}

RL_TEST_MAIN(T(cluster_file_1_1_good), T(cluster_file_1_2_bad))
