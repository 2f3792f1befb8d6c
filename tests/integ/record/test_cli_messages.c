/* test_cli_messages.c — the messages say what is wrong.
 *
 *   cli_3_1  a regular file given as the database directory "is not a directory" (was: "does not
 *            exist"); a missing one "does not exist"; mem:xyz is refused (was: accepted)
 *   cli_3_2  --db without a value says "option --db needs a value" in every command that has
 *            --db (was: "unknown option")
 *   cli_3_3  `rl tuple decode zz` says it is not hex and at which offset (was: "not an
 *            even-length hex string"); an odd count of digits says so
 *   cli_3_4  a tuple nested 1,001 deep names the limit of 1,000, decoding and encoding (was:
 *            "malformed"); 1,000 deep works both ways
 *   cli_3_5  a bad escape in an `rl kv` key or value names the escape and its offset (was:
 *            "Invalid argument")
 *   cli_3_6  corruption messages show source paths relative to the source tree (RL_CORRUPT's
 *            __FILE__), not the build machine's
 */
#include <stdlib.h>

#include "test.h"

/* Run `rl ARGS`; the exit code must be code and stderr must contain want. */
static void expect(int code, const char *want, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void expect(int code, const char *want, const char *fmt, ...) {
    char args[60000], *out, *err;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    int rc = rl_test_run("rl", &out, &err, "%s", args);
    if (rc != code) fail_msg("rl %.200s: exit %d, want %d (stderr: %s)", args, rc, code, err);
    if (want && !strstr(err, want)) fail_msg("rl %.200s: stderr '%s' lacks '%s'", args, err, want);
    free(out);
    free(err);
}

TEST(cli_3_1_database_urls) {
    char *dir = rl_test_tmpdir("cli31"), path[4200];
    snprintf(path, sizeof path, "%s/regular", dir);
    FILE *f = fopen(path, "w");
    ASSERT_NOT_NULL(f);
    fclose(f);
    expect(1, "is not a directory", "kv --db file:%s status", path);
    expect(1, "is not a directory", "check --db file:%s", path);
    expect(1, "is not a directory", "load --db file:%s --count 1", path);
    expect(1, "does not exist", "kv --db file:%s/missing status", dir);
    expect(1, "a component of the path is not a directory", "kv --db file:%s/below status", path);
    expect(1, "mem: takes nothing after the colon", "kv --db mem:xyz status");
    expect(1, "bad_url", "load --db mem:/tmp --count 1");
    expect(0, NULL, "kv --db mem: status");
    rl_test_rmtree(dir);
    free(dir);
}

TEST(cli_3_2_db_without_value) {
    const char *cmds[] = {"load --count 1 --db",
                          "get --pk 1 --db",
                          "check --db",
                          "inject-defect --pk 1 --kind stray-suffix --db",
                          "query --index price_idx --db",
                          "kv --db",
                          "kv status --db",
                          "kv --db --tuple status"};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) expect(2, "option --db needs a value", "%s", cmds[i]);
    expect(2, "rl load: option --db needs a value", "load --db --count 5");
}

TEST(cli_3_3_tuple_hex_messages) {
    expect(1, "'zz' is not hex: 'z' at offset 0", "tuple decode zz");
    expect(1, "'15g1' is not hex: 'g' at offset 2", "tuple print 15g1");
    expect(1, "'150' has an odd number of hex digits (3)", "tuple decode 150");
    expect(2, "rl query: --continuation: 'xyz' is not hex: 'x' at offset 0",
           "query --db mem: --index price_idx --continuation xyz");
}

TEST(cli_3_4_nesting_limit_named) {
    static char hex[4 * 1001 + 8], json[20 * 1001 + 16];
    for (int depth = 1000; depth <= 1001; depth++) {
        size_t n = 0;
        for (int i = 0; i < depth; i++) hex[n++] = '0', hex[n++] = '5';
        for (int i = 0; i < depth; i++) hex[n++] = '0', hex[n++] = '0';
        hex[n] = 0;
        n = 0;
        json[n++] = '[';
        for (int i = 0; i < depth; i++) n += (size_t)sprintf(json + n, "{\"tuple\":[");
        for (int i = 0; i < depth; i++) n += (size_t)sprintf(json + n, "]}");
        json[n++] = ']';
        json[n] = 0;
        if (depth == 1000) {
            expect(0, NULL, "tuple decode %s", hex);
            expect(0, NULL, "tuple print %s", hex);
            expect(0, NULL, "tuple encode '%s'", json);
        } else {
            expect(1, "tuple_malformed: Encoded tuple is malformed: tuples nest at most 1000 levels deep",
                   "tuple decode %s", hex);
            expect(1, "tuples nest at most 1000 levels deep", "tuple print %s", hex);
            expect(1, "invalid_argument: Invalid argument: tuples nest at most 1000 levels deep", "tuple encode '%s'",
                   json);
        }
    }
    /* Other encode errors say what is wrong too. */
    expect(1, "an element must be an object with one key", "tuple encode '[1]'");
    expect(1, "unknown element kind \"integer\"", "tuple encode '[{\"integer\":\"1\"}]'");
}

TEST(cli_3_5_kv_escape_messages) {
    expect(2, "rl kv get: KEY: 'ab\\xZZ': bad escape '\\xZZ' at offset 2", "kv get 'ab\\xZZ'");
    expect(2, "rl kv set: VALUE: 'v\\q': bad escape '\\q' at offset 1", "kv set k 'v\\q'");
    expect(2, "rl kv clearrange: END: 'b\\x1': bad escape '\\x1' at offset 1", "kv clearrange a 'b\\x1'");
    expect(2, "rl kv range: BEGIN: 'a\\': a lone backslash at offset 1", "kv range 'a\\' b");
    expect(2, "rl kv getkey: KEY: 'k\\xg0': bad escape '\\xg0' at offset 1", "kv getkey fge 'k\\xg0'");
    expect(2, "rl kv get: KEY: not a JSON tuple array (see `rl tuple --help`): invalid_argument: bad JSON",
           "kv --tuple get '[{'");
    expect(2, "rl kv get: KEY: not a JSON tuple array", "kv --tuple get '[1]'");
}

TEST(cli_3_6_source_paths_relative) {
    char *dir = rl_test_tmpdir("cli36"), *out, *err, src[4096];
    snprintf(src, sizeof src, "%s", RL_TEST_DATA_DIR);
    char *cut = strstr(src, "/tests/data");
    ASSERT_NOT_NULL(cut);
    *cut = 0; /* the source tree */
    ASSERT_EQ(rl_test_rl(&out, "load --db file:%s --count 2", dir), 0);
    free(out);
    /* Overwrite the store header ("bench", "orders", 0) with junk: the open reports corruption. */
    ASSERT_EQ(rl_test_rl(&out, "kv --db file:%s set '\\x02bench\\x00\\x02orders\\x00\\x14' junk", dir), 0);
    free(out);
    ASSERT_EQ(rl_test_run("rl", &out, &err, "check --db file:%s", dir), 1);
    if (!strstr(err, "corrupt_data detected at src/record/store.c:")) fail_msg("stderr: %s", err);
    if (strstr(err, src)) fail_msg("stderr shows the source directory %s: %s", src, err);
    free(out);
    free(err);
    rl_test_rmtree(dir);
    free(dir);
}

RL_TEST_MAIN(T(cli_3_1_database_urls), T(cli_3_2_db_without_value), T(cli_3_3_tuple_hex_messages),
             T(cli_3_4_nesting_limit_named), T(cli_3_5_kv_escape_messages), T(cli_3_6_source_paths_relative))
