/* test_rl_tuple.c — end-to-end tests of `rl tuple` (the built rl program, run with popen):
 * decode/encode/print outputs and exit codes, and every encode vector through the CLI both ways
 * (tuple-8.x). */
#include "test.h"

#include <stdlib.h>
#include <sys/wait.h>

#include <jansson.h>

/* Run `rl ARGS` (shell words already quoted), capturing stdout (and stderr when want_stderr)
 * into out (at most cap-1 bytes, NUL-terminated, trailing newline kept). Returns the exit code. */
static int run_rl(const char *args, int want_stderr, char *out, size_t cap) {
    char cmd[16384];
    snprintf(cmd, sizeof cmd, "'%s' %s %s", rl_test_bin("rl"), args, want_stderr ? "2>&1" : "2>/dev/null");
    FILE *p = popen(cmd, "r");
    if (!p) fail_msg("popen failed: %s", cmd);
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = 0;
    int st = pclose(p);
    if (!WIFEXITED(st)) fail_msg("%s did not exit normally", cmd);
    return WEXITSTATUS(st);
}

/* Single-quote s for the shell. */
static void shell_quote(const char *s, char *out, size_t cap) {
    size_t n = 0;
    out[n++] = '\'';
    for (; *s && n + 5 < cap; s++) {
        if (*s == '\'') {
            memcpy(out + n, "'\\''", 4);
            n += 4;
        } else {
            out[n++] = *s;
        }
    }
    out[n++] = '\'';
    out[n] = 0;
}

/* tuple-8.1: the documented examples, errors and exit codes. */
TEST(tuple_8_1_cli_basics) {
    char out[4096];
    ASSERT_EQ(run_rl("tuple encode '[{\"int\":\"1\"},{\"string\":\"a\"}]'", 0, out, sizeof out), 0);
    ASSERT_STR_EQ(out, "1501026100\n");
    ASSERT_EQ(run_rl("tuple decode 1501026100", 0, out, sizeof out), 0);
    ASSERT_STR_EQ(out, "[{\"int\":\"1\"},{\"string\":\"a\"}]\n");
    ASSERT_EQ(run_rl("tuple print 15010261000100ff0000", 0, out, sizeof out), 0);
    ASSERT_STR_EQ(out, "(1, \"a\", b\"\\x00\", None)\n");
    ASSERT_EQ(run_rl("tuple decode ''", 0, out, sizeof out), 0);
    ASSERT_STR_EQ(out, "[]\n");
    ASSERT_EQ(run_rl("tuple decode 1500", 1, out, sizeof out), 1);
    ASSERT_TRUE(strstr(out, "tuple_malformed") != NULL);
    ASSERT_EQ(run_rl("tuple print 0161", 1, out, sizeof out), 1);
    ASSERT_TRUE(strstr(out, "tuple_truncated") != NULL);
    ASSERT_EQ(run_rl("tuple decode 4600", 1, out, sizeof out), 1);
    ASSERT_TRUE(strstr(out, "tuple_unsupported_type") != NULL);
    ASSERT_EQ(run_rl("tuple decode xyz", 1, out, sizeof out), 1);
    ASSERT_TRUE(strstr(out, "invalid_argument") != NULL);
    ASSERT_EQ(run_rl("tuple encode '[1]'", 1, out, sizeof out), 1);
    ASSERT_TRUE(strstr(out, "invalid_argument") != NULL);
    ASSERT_EQ(run_rl("tuple encode '[{\"int\":\"1e3\"}]'", 1, out, sizeof out), 1);
    ASSERT_EQ(run_rl("tuple --help", 0, out, sizeof out), 0);
    ASSERT_TRUE(strstr(out, "decode") && strstr(out, "encode") && strstr(out, "print"));
    ASSERT_EQ(run_rl("tuple", 0, out, sizeof out), 2);
    ASSERT_EQ(run_rl("tuple frob 00", 0, out, sizeof out), 2);
    ASSERT_EQ(run_rl("--help", 0, out, sizeof out), 0);
    ASSERT_TRUE(strstr(out, "tuple") != NULL);
}

/* tuple-8.2: every encode vector through the CLI: encode gives `packed`, decode gives `tuple`. */
TEST(tuple_8_2_cli_vectors) {
    const char *path = rl_test_data_path("tuple/encode.jsonl");
    FILE *f = fopen(path, "r");
    if (!f) fail_msg("missing test vectors %s", path);
    char *line = NULL, out[8192], arg[4096], want[8192];
    size_t cap = 0, n = 0;
    while (getline(&line, &cap, f) > 0) {
        json_t *o = json_loads(line, JSON_ALLOW_NUL, NULL);
        ASSERT_NOT_NULL(o);
        json_t *t = json_object_get(o, "tuple");
        const char *packed = json_string_value(json_object_get(o, "packed"));
        char *tj = json_dumps(t, JSON_COMPACT);
        /* encode */
        shell_quote(tj, arg, sizeof arg);
        snprintf(want, sizeof want, "tuple encode %s", arg);
        ASSERT_EQ(run_rl(want, 0, out, sizeof out), 0);
        snprintf(want, sizeof want, "%s\n", packed);
        if (strcmp(out, want)) fail_msg("line %zu: encode gave %s, want %s", n + 1, out, want);
        /* decode: compare as JSON */
        snprintf(want, sizeof want, "tuple decode '%s'", packed);
        ASSERT_EQ(run_rl(want, 0, out, sizeof out), 0);
        json_t *got = json_loads(out, JSON_ALLOW_NUL, NULL);
        if (!got || !json_equal(got, t)) fail_msg("line %zu: decode gave %s", n + 1, out);
        json_decref(got);
        free(tj);
        json_decref(o);
        n++;
    }
    free(line);
    fclose(f);
    ASSERT_EQ(n, 400);
}

RL_TEST_MAIN(T(tuple_8_1_cli_basics), T(tuple_8_2_cli_vectors))
