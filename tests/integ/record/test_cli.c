/* test_cli.c — the record commands of the built `rl` end to end on file:DIR: load, get (JSON
 * with the version), check, and the three `rl inject-defect` kinds, each found by `rl check`
 * with its key and message; inject refused without --allow-defects unless --force.
 *
 * Test IDs: record_5_*.
 */
#include <stdlib.h>
#include <sys/wait.h>

#include <jansson.h>

#include "test.h"

TEST(record_5_1_load_get_check) {
    char *dir = rl_test_tmpdir("reccli1"), *out;
    ASSERT_EQ(rl_test_rl(&out, "load --db file:%s --count 30 --padding 120000 --seed 5", dir), 0);
    ASSERT_TRUE(strstr(out, "loaded 30 records") != NULL);
    free(out);
    ASSERT_EQ(rl_test_rl(&out, "get --db file:%s --pk 7", dir), 0);
    json_error_t err;
    json_t *j = json_loads(out, 0, &err);
    if (!j) fail_msg("rl get printed no JSON: %.200s", out);
    ASSERT_STR_EQ(json_string_value(json_object_get(j, "type")), "reclayer.Order");
    ASSERT_EQ(json_integer_value(json_object_get(json_object_get(j, "record"), "order_id")), 7);
    ASSERT_EQ(json_integer_value(json_object_get(j, "chunks")), 2);
    ASSERT_EQ(strlen(json_string_value(json_object_get(j, "version"))), 24);
    ASSERT_EQ(strlen(json_string_value(json_object_get(json_object_get(j, "record"), "padding"))), 240000);
    json_decref(j);
    free(out);
    ASSERT_EQ(rl_test_rl(&out, "get --db file:%s --pk 31", dir), 1);
    free(out);
    ASSERT_EQ(rl_test_rl(&out, "check --db file:%s", dir), 0);
    ASSERT_TRUE(strstr(out, "records = 30\nindex_entries = 30\nintegrity_ok = true\n") != NULL);
    free(out);
    /* Another store prefix is another store. */
    ASSERT_EQ(rl_test_rl(&out, "check --db file:%s --store '[\"other\",1]'", dir), 1);
    free(out);
    ASSERT_EQ(rl_test_rl(&out, "load --db file:%s --store '[\"other\",1]' --count 3", dir), 0);
    free(out);
    ASSERT_EQ(rl_test_rl(&out, "check --db file:%s --store '[\"other\",1]'", dir), 0);
    ASSERT_TRUE(strstr(out, "records = 3\n") != NULL);
    free(out);
    rl_test_rmtree(dir);
    free(dir);
}

TEST(record_5_2_inject_each_kind) {
    char *dir = rl_test_tmpdir("reccli2"), *out;
    ASSERT_EQ(rl_test_rl(&out, "load --db file:%s --count 10 --padding 150000 --allow-defects", dir), 0);
    free(out);
    struct {
        const char *kind;
        int pk;
    } cases[] = {{"delete-chunk", 2}, {"stray-suffix", 4}, {"version-key", 6}};
    /* Keys print after the store prefix; each defect stays reported after the next injection. */
    const char *lines[] = {"defect delete-chunk key=(1, 2, 2) Found split record without start",
                           "defect stray-suffix key=(1, 4, \"stray\") (not a number) Invalid record split number",
                           "defect version-key key=(1, 6, -1) Found record version without record"};
    for (int i = 0; i < 3; i++) {
        ASSERT_EQ(rl_test_rl(&out, "inject-defect --db file:%s --pk %d --kind %s", dir, cases[i].pk, cases[i].kind), 0);
        free(out);
        ASSERT_EQ(rl_test_rl(&out, "check --db file:%s", dir), 1);
        for (int k = 0; k <= i; k++)
            if (!strstr(out, lines[k])) fail_msg("missing '%s' in:\n%s", lines[k], out);
        ASSERT_TRUE(strstr(out, "integrity_ok = false\n") != NULL);
        free(out);
    }
    ASSERT_EQ(rl_test_rl(&out, "inject-defect --db file:%s --pk 1 --kind nonsense", dir), 2);
    free(out);
    rl_test_rmtree(dir);
    free(dir);
}

TEST(record_5_3_inject_refused_without_allow_defects) {
    char *dir = rl_test_tmpdir("reccli3"), *out;
    ASSERT_EQ(rl_test_rl(&out, "load --db file:%s --count 5", dir), 0);
    free(out);
    ASSERT_EQ(rl_test_rl(&out, "inject-defect --db file:%s --pk 2 --kind stray-suffix", dir), 1);
    ASSERT_TRUE(strstr(out, "refused") != NULL);
    free(out);
    ASSERT_EQ(rl_test_rl(&out, "check --db file:%s", dir), 0);
    free(out);
    ASSERT_EQ(rl_test_rl(&out, "inject-defect --db file:%s --pk 2 --kind stray-suffix --force", dir), 0);
    free(out);
    ASSERT_EQ(rl_test_rl(&out, "check --db file:%s", dir), 1);
    ASSERT_TRUE(strstr(out, "defect stray-suffix key=(1, 2, \"stray\")") != NULL);
    free(out);
    ASSERT_EQ(rl_test_rl(&out, "load --db file:%s", dir), 2);
    free(out);
    ASSERT_EQ(rl_test_rl(&out, "check --db file:%s --store '{}'", dir), 1);
    free(out);
    rl_test_rmtree(dir);
    free(dir);
}

RL_TEST_MAIN(T(record_5_1_load_get_check), T(record_5_2_inject_each_kind),
             T(record_5_3_inject_refused_without_allow_defects))
