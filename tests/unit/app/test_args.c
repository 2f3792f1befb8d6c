/* test_args.c — the shared command-line parser (src/app/args.h): every value kind at the edges
 * of its range and one past them, overflow, trailing junk, the empty string, NaN and infinities,
 * the "--opt=value" and "--opt value" forms, unknown options, missing values, repeated options,
 * required options, positionals (optional, counted, after "--", negative numbers), enums,
 * subcommands, the generated help (every range appears in it), and the escape and hex parsers'
 * messages. Every usage error must return exit code 2 and name the argument.
 *
 * Test IDs: args_1_*.
 */
#include "test.h"

#include <limits.h>
#include <stdlib.h>

#include "app/args.h"
#include "base/buf.h"

/* The outcome of one parse: whether it stopped, the exit code, what went to stdout and stderr. */
typedef struct {
    int stop, code;
    char *out, *err;
} result;

static void result_free(result *r) {
    free(r->out);
    free(r->err);
    memset(r, 0, sizeof *r);
}

static result vrun(const rl__args_cmd *cmd, va_list ap) {
    char *argv[64];
    int argc = 0;
    for (const char *w; (w = va_arg(ap, const char *)) != NULL && argc < 64;) argv[argc++] = (char *)w;
    result r = {0, -1, NULL, NULL};
    size_t ol, el;
    FILE *out = open_memstream(&r.out, &ol), *err = open_memstream(&r.err, &el);
    ASSERT_NOT_NULL(out);
    ASSERT_NOT_NULL(err);
    r.stop = rl__args_parse_to(cmd, argc, argv, out, err, &r.code);
    fclose(out);
    fclose(err);
    return r;
}

/* Parse the NULL-terminated words (the first is the command's own word) against cmd. */
static result run(const rl__args_cmd *cmd, ...) {
    va_list ap;
    va_start(ap, cmd);
    result r = vrun(cmd, ap);
    va_end(ap);
    return r;
}

/* The parse of r must have failed with exit 2, stderr containing want and the --help hint. */
static void check_usage(result *r, const char *want) {
    if (!r->stop || r->code != 2)
        fail_msg("expected a usage error, got stop=%d code=%d err=%s", r->stop, r->code, r->err);
    if (!strstr(r->err, want)) fail_msg("stderr '%s' lacks '%s'", r->err, want);
    if (!strstr(r->err, "--help' for usage")) fail_msg("no hint in '%s'", r->err);
    if (*r->out) fail_msg("stdout not empty after an error: %s", r->out);
}

/* The words must parse: go on, nothing printed. */
static void go_(const rl__args_cmd *cmd, ...) {
    va_list ap;
    va_start(ap, cmd);
    result r = vrun(cmd, ap);
    va_end(ap);
    if (r.stop) fail_msg("parse stopped (code %d): %s", r.code, r.err);
    ASSERT_STR_EQ(r.err, "");
    ASSERT_STR_EQ(r.out, "");
    result_free(&r);
}

/* The words must be a usage error whose message contains want. */
static void usage_(const char *want, const rl__args_cmd *cmd, ...) {
    va_list ap;
    va_start(ap, cmd);
    result r = vrun(cmd, ap);
    va_end(ap);
    check_usage(&r, want);
    result_free(&r);
}

#define GO(c, ...) go_((c), __VA_ARGS__, (const char *)NULL)
#define USAGE(want, c, ...) usage_((want), (c), __VA_ARGS__, (const char *)NULL)

/* One command with one option of every kind. */
static int64_t v_count, v_full64;
static int v_int, v_flag, v_kind;
static uint64_t v_seed, v_small;
static double v_sec;
static const char *v_name, *v_dir, *v_multi[3];
static int n_multi;

static const rl__arg_choice kinds[] = {{"alpha", 1}, {"beta", 2}, {"gamma-ray", 3}, {NULL, 0}};

static const rl__arg opts[] = {
    {.name = "count", .kind = RL_ARG_INT64, .dest = &v_count, .help = "records", .min = 0, .max = 100000000},
    {.name = "full", .kind = RL_ARG_INT64, .dest = &v_full64, .help = "any int64"},
    {.name = "int", .kind = RL_ARG_INT, .dest = &v_int, .help = "an int", .min = -5, .max = 7},
    {.name = "seed", .kind = RL_ARG_UINT64, .dest = &v_seed, .help = "the seed"},
    {.name = "small", .kind = RL_ARG_UINT64, .dest = &v_small, .help = "small", .umin = 2, .umax = 9},
    {.name = "seconds",
     .kind = RL_ARG_DOUBLE,
     .dest = &v_sec,
     .metavar = "S",
     .help = "time",
     .dmin = 0.001,
     .dmax = 3600},
    {.name = "flag", .kind = RL_ARG_FLAG, .dest = &v_flag, .help = "a flag"},
    {.name = "kind", .kind = RL_ARG_ENUM, .dest = &v_kind, .help = "the kind", .choices = kinds},
    {.name = "name", .kind = RL_ARG_STRING, .dest = &v_name, .metavar = "NAME", .help = "a name"},
    {.name = "dir", .kind = RL_ARG_STRING, .dest = &v_dir, .metavar = "DIR", .help = "a dir", .flags = RL_ARG_NONEMPTY},
    {.name = "eq",
     .kind = RL_ARG_STRING,
     .dest = v_multi,
     .metavar = "V",
     .help = "values",
     .flags = RL_ARG_MULTI,
     .max_count = 3,
     .count = &n_multi},
    {0}};

static const rl__args_cmd cmd = {.name = "t all", .summary = "Every kind.", .opts = opts};

static void reset(void) {
    v_count = 0, v_full64 = 0, v_int = 0, v_flag = 0, v_kind = 1, v_seed = 1, v_small = 2, v_sec = 0.5;
    v_name = v_dir = NULL;
    n_multi = 0;
}

/* args-1.1: int64 at the edges of its range and one past; the whole range; overflow. */
TEST(args_1_1_int64_edges) {
    reset();
    GO(&cmd, "t", "--count", "0");
    ASSERT_EQ(v_count, 0);
    GO(&cmd, "t", "--count", "100000000");
    ASSERT_EQ(v_count, 100000000);
    USAGE("t all: --count: 100000001 is out of range [0, 100000000]", &cmd, "t", "--count", "100000001");
    USAGE("--count: -1 is out of range [0, 100000000]", &cmd, "t", "--count", "-1");
    USAGE("--count: 99999999999999999999 is out of range [0, 100000000]", &cmd, "t", "--count", "99999999999999999999");
    ASSERT_EQ(v_count, 100000000); /* unchanged by the refused values */
    GO(&cmd, "t", "--full", "9223372036854775807");
    ASSERT_TRUE(v_full64 == INT64_MAX);
    GO(&cmd, "t", "--full", "-9223372036854775808");
    ASSERT_TRUE(v_full64 == INT64_MIN);
    USAGE("--full: 9223372036854775808 is out of range [-9223372036854775808, 9223372036854775807]", &cmd, "t",
          "--full", "9223372036854775808");
    USAGE("--full: -9223372036854775809 is out of range", &cmd, "t", "--full", "-9223372036854775809");
    USAGE("is out of range", &cmd, "t", "--full", "18446744073709551616");
    GO(&cmd, "t", "--full", "-007");
    ASSERT_TRUE(v_full64 == -7);
}

/* args-1.2: int (with a narrow range) and uint64 (whole range and a narrow one). */
TEST(args_1_2_int_and_uint64_edges) {
    reset();
    const char *ok_int[] = {"-5", "7", "0"}, *bad_int[] = {"-6", "8", "2147483648", "-2147483649"};
    for (int i = 0; i < 3; i++) GO(&cmd, "t", "--int", ok_int[i]);
    ASSERT_EQ(v_int, 0);
    for (int i = 0; i < 4; i++) {
        USAGE("is out of range [-5, 7]", &cmd, "t", "--int", bad_int[i]);
    }
    GO(&cmd, "t", "--seed", "18446744073709551615");
    ASSERT_TRUE(v_seed == UINT64_MAX);
    GO(&cmd, "t", "--seed", "0");
    ASSERT_TRUE(v_seed == 0);
    USAGE("--seed: 18446744073709551616 is out of range [0, 18446744073709551615]", &cmd, "t", "--seed",
          "18446744073709551616");
    USAGE("--seed: -1 is out of range", &cmd, "t", "--seed", "-1");
    GO(&cmd, "t", "--small", "2");
    GO(&cmd, "t", "--small", "9");
    ASSERT_TRUE(v_small == 9);
    USAGE("--small: 1 is out of range [2, 9]", &cmd, "t", "--small", "1");
    USAGE("--small: 10 is out of range [2, 9]", &cmd, "t", "--small", "10");
}

/* args-1.3: what is not an integer: empty, trailing junk, spaces, signs, hex, exponents. */
TEST(args_1_3_integer_junk) {
    const char *junk[] = {"", "abc", "12abc", " 12", "12 ", "+5", "0x10", "1e3", "1.0", "-", "--5", "1,000", "٣"};
    const char *names[] = {"count", "full", "int", "seed", "small"};
    reset();
    for (size_t n = 0; n < sizeof names / sizeof names[0]; n++)
        for (size_t i = 0; i < sizeof junk / sizeof junk[0]; i++) {
            char opt[64], want[128];
            snprintf(opt, sizeof opt, "--%s=%s", names[n], junk[i]);
            snprintf(want, sizeof want, "--%s: '%s' is not an integer", names[n], junk[i]);
            USAGE(want, &cmd, "t", opt);
        }
    ASSERT_EQ(v_count, 0);
    ASSERT_TRUE(v_seed == 1);
}

/* args-1.4: doubles: edges of the range, NaN and infinities, overflow, junk. */
TEST(args_1_4_double) {
    reset();
    const char *ok[] = {"0.001", "3600", "1e-3", ".5", "5.", "3.6e3", "+2", "0.5"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) GO(&cmd, "t", "--seconds", ok[i]);
    ASSERT_TRUE(v_sec == 0.5);
    const char *range[] = {"0.0009", "3600.0001", "0", "-1", "1e999", "-1e999", "1e-999"};
    for (size_t i = 0; i < sizeof range / sizeof range[0]; i++) {
        char want[128];
        snprintf(want, sizeof want, "--seconds: %s is out of range [0.001, 3600]", range[i]);
        USAGE(want, &cmd, "t", "--seconds", range[i]);
    }
    const char *nonfinite[] = {"nan", "NaN", "-nan", "inf", "-inf", "+Inf", "infinity", "nan(1)"};
    for (size_t i = 0; i < sizeof nonfinite / sizeof nonfinite[0]; i++) {
        char want[128];
        snprintf(want, sizeof want, "--seconds: '%s' is not a finite number", nonfinite[i]);
        USAGE(want, &cmd, "t", "--seconds", nonfinite[i]);
    }
    const char *junk[] = {"", "abc", "1.5x", "0x1p3", " 1", "1 ", ".", "e5", "1e", "1e+", "--1"};
    for (size_t i = 0; i < sizeof junk / sizeof junk[0]; i++) {
        char opt[64], want[128];
        snprintf(opt, sizeof opt, "--seconds=%s", junk[i]);
        snprintf(want, sizeof want, "--seconds: '%s' is not a number", junk[i]);
        USAGE(want, &cmd, "t", opt);
    }
    ASSERT_TRUE(v_sec == 0.5);
}

/* args-1.5: "--opt=value" and "--opt value"; empty values; NONEMPTY strings. */
TEST(args_1_5_forms_and_empty) {
    reset();
    GO(&cmd, "t", "--count=12", "--name", "x=y");
    ASSERT_EQ(v_count, 12);
    ASSERT_STR_EQ(v_name, "x=y");
    GO(&cmd, "t", "--name=");
    ASSERT_STR_EQ(v_name, "");
    GO(&cmd, "t", "--name", "");
    GO(&cmd, "t", "--name=--x");
    ASSERT_STR_EQ(v_name, "--x");
    GO(&cmd, "t", "--name", "-x");
    ASSERT_STR_EQ(v_name, "-x");
    USAGE("--count: '' is not an integer", &cmd, "t", "--count", "");
    USAGE("t all: --dir must not be empty", &cmd, "t", "--dir", "");
    USAGE("--dir must not be empty", &cmd, "t", "--dir=");
    ASSERT_NULL(v_dir);
    GO(&cmd, "t", "--dir", "/tmp");
    ASSERT_STR_EQ(v_dir, "/tmp");
}

/* args-1.6: unknown options, missing values, flags with values, repeated options, MULTI. */
TEST(args_1_6_unknown_missing_repeated) {
    result r;
    reset();
    USAGE("t all: unknown option --frob", &cmd, "t", "--frob");
    USAGE("unknown option --frob", &cmd, "t", "--frob=1");
    USAGE("unknown option --coun", &cmd, "t", "--coun", "1");
    USAGE("t all: option --count needs a value", &cmd, "t", "--count");
    USAGE("option --name needs a value", &cmd, "t", "--name", "--flag");
    USAGE("option --flag takes no value", &cmd, "t", "--flag=1");
    USAGE("option --count given twice", &cmd, "t", "--count", "1", "--count", "2");
    USAGE("option --flag given twice", &cmd, "t", "--flag", "--flag");
    USAGE("given twice", &cmd, "t", "--count=1", "--count", "1");
    GO(&cmd, "t", "--flag", "--eq", "a", "--eq=b", "--eq", "c");
    ASSERT_EQ(v_flag, 1);
    ASSERT_EQ(n_multi, 3);
    ASSERT_STR_EQ(v_multi[0], "a");
    ASSERT_STR_EQ(v_multi[2], "c");
    USAGE("--eq given more than 3 times", &cmd, "t", "--eq", "a", "--eq", "b", "--eq", "c", "--eq", "d");
    USAGE("unexpected argument 'stray'", &cmd, "t", "stray");
    /* A long or binary value is shortened and made printable in the message. */
    r = run(&cmd, "t", "--count", "1\n2\x01xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", NULL);
    check_usage(&r, "'1?2?xxxx");
    ASSERT_TRUE(strstr(r.err, "...'") != NULL);
    ASSERT_TRUE(strchr(r.err, '\x01') == NULL);
    result_free(&r);
}

/* args-1.7: enums: each name, and a wrong one lists the names. */
TEST(args_1_7_enum) {
    reset();
    GO(&cmd, "t", "--kind", "gamma-ray");
    ASSERT_EQ(v_kind, 3);
    GO(&cmd, "t", "--kind=beta");
    ASSERT_EQ(v_kind, 2);
    USAGE("--kind: 'Beta' is not one of alpha, beta, gamma-ray", &cmd, "t", "--kind", "Beta");
    USAGE("--kind: '' is not one of", &cmd, "t", "--kind", "");
    ASSERT_EQ(v_kind, 2);
}

/* args-1.8: positionals: typed, optional, counted (MULTI), negative numbers, "--". */
TEST(args_1_8_positionals) {
    const char *key = NULL, *rest[4];
    int off = 0, n_rest = 0;
    const rl__arg pos[] = {
        {.name = "KEY", .kind = RL_ARG_STRING, .dest = &key, .help = "the key"},
        {.name = "OFFSET", .kind = RL_ARG_INT, .dest = &off, .help = "moves", .min = -100, .max = 100},
        {.name = "REST",
         .kind = RL_ARG_STRING,
         .dest = rest,
         .help = "more",
         .flags = RL_ARG_MULTI | RL_ARG_OPTIONAL,
         .max_count = 4,
         .count = &n_rest},
        {0}};
    const rl__arg o[] = {{.name = "flag", .kind = RL_ARG_FLAG, .dest = &v_flag, .help = "f"}, {0}};
    const rl__args_cmd c = {.name = "t pos", .opts = o, .pos = pos};
    reset();
    GO(&c, "t", "k", "-5");
    ASSERT_STR_EQ(key, "k");
    ASSERT_EQ(off, -5);
    ASSERT_EQ(n_rest, 0);
    GO(&c, "t", "--flag", "k2", "100", "a", "b");
    ASSERT_EQ(n_rest, 2);
    ASSERT_STR_EQ(rest[1], "b");
    USAGE("REST given more than 4 times", &c, "t", "k", "1", "a", "b", "c", "d", "e");
    USAGE("t pos: missing argument OFFSET", &c, "t", "k");
    USAGE("missing argument KEY", &c, "t");
    USAGE("OFFSET: 101 is out of range [-100, 100]", &c, "t", "k", "101");
    USAGE("OFFSET: '1x' is not an integer", &c, "t", "k", "1x");
    /* After "--", option-like words are positionals. */
    GO(&c, "t", "--", "--flag", "-1", "--help");
    ASSERT_STR_EQ(key, "--flag");
    ASSERT_EQ(n_rest, 1);
    ASSERT_STR_EQ(rest[0], "--help");
    /* Without a MULTI tail, an extra word is unexpected. */
    const rl__arg pos1[] = {{.name = "KEY", .kind = RL_ARG_STRING, .dest = &key, .help = "k"}, {0}};
    const rl__args_cmd c1 = {.name = "t one", .pos = pos1};
    USAGE("t one: unexpected argument 'b'", &c1, "t", "a", "b");
}

/* args-1.9: required options; help text with every range, choice, default and "required". */
TEST(args_1_9_required_and_help) {
    const char *db = NULL;
    const rl__arg o[] = {{.name = "db",
                          .kind = RL_ARG_STRING,
                          .dest = &db,
                          .metavar = "URL",
                          .help = "the database",
                          .flags = RL_ARG_REQUIRED},
                         {0}};
    const rl__args_cmd c = {.name = "t req", .opts = o};
    USAGE("t req: option --db is required", &c, "t");
    result r;
    GO(&c, "t", "--db", "mem:");
    ASSERT_STR_EQ(db, "mem:");
    r = run(&c, "t", "--help", NULL);
    ASSERT_TRUE(r.stop);
    ASSERT_EQ(r.code, 0);
    ASSERT_TRUE(strstr(r.out, "usage: t req --db URL") != NULL);
    ASSERT_TRUE(strstr(r.out, "--db URL") && strstr(r.out, "required"));
    ASSERT_STR_EQ(r.err, "");
    result_free(&r);
    reset();
    v_count = 10;
    USAGE("'abc' is not an integer", &cmd, "t", "--count", "abc", "-h"); /* an error before -h wins */
    r = run(&cmd, "t", "-h", NULL);
    ASSERT_TRUE(r.stop);
    ASSERT_EQ(r.code, 0);
    const char *want[] = {"usage: t all",
                          "Every kind.",
                          "--count N",
                          "integer in [0, 100000000], default 10",
                          "[-9223372036854775808, 9223372036854775807]",
                          "integer in [-5, 7], default 0",
                          "[0, 18446744073709551615], default 1",
                          "integer in [2, 9]",
                          "--seconds S",
                          "number in [0.001, 3600], default 0.5",
                          "--flag",
                          "one of alpha, beta, gamma-ray; default alpha",
                          "--name NAME",
                          "--dir DIR",
                          "not empty",
                          "may be given up to 3 times",
                          "--help, -h"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!strstr(r.out, want[i])) fail_msg("help lacks '%s':\n%s", want[i], r.out);
    /* Every line fits the width. */
    for (char *line = r.out, *nl; *line; line = nl + 1) {
        nl = strchr(line, '\n');
        ASSERT_NOT_NULL(nl);
        if (nl - line > 100) fail_msg("help line longer than 100 columns: %.*s", (int)(nl - line), line);
    }
    result_free(&r);
}

/* args-1.10: subcommands: parent options before and after the word, the subcommand's own
 * options only after it, unknown and missing commands, help of the parent and of a subcommand. */
TEST(args_1_10_subcommands) {
    const char *db = "mem:", *key = NULL, *b = NULL, *e = NULL;
    int sys = 0, limit = 0, which = -1;
    const rl__arg popts[] = {{.name = "db", .kind = RL_ARG_STRING, .dest = &db, .metavar = "URL", .help = "database"},
                             {.name = "system", .kind = RL_ARG_FLAG, .dest = &sys, .help = "system keys"},
                             {0}};
    const rl__arg get_pos[] = {{.name = "KEY", .kind = RL_ARG_STRING, .dest = &key, .help = "key"}, {0}};
    const rl__arg range_pos[] = {{.name = "BEGIN", .kind = RL_ARG_STRING, .dest = &b, .help = "b"},
                                 {.name = "END", .kind = RL_ARG_STRING, .dest = &e, .help = "e"},
                                 {0}};
    const rl__arg range_opts[] = {
        {.name = "limit", .kind = RL_ARG_INT, .dest = &limit, .help = "rows", .min = 0, .max = 1000}, {0}};
    const rl__args_cmd get = {.name = "t kv get", .brief = "print a value", .pos = get_pos};
    const rl__args_cmd range = {.name = "t kv range", .brief = "print a range", .opts = range_opts, .pos = range_pos};
    const rl__args_cmd *subs[] = {&get, &range, NULL};
    const rl__args_cmd kv = {.name = "t kv", .opts = popts, .subs = subs, .sub_dest = &which};
    GO(&kv, "kv", "--db", "file:/x", "get", "k", "--system");
    ASSERT_EQ(which, 0);
    ASSERT_STR_EQ(db, "file:/x");
    ASSERT_STR_EQ(key, "k");
    ASSERT_EQ(sys, 1);
    GO(&kv, "kv", "range", "a", "b", "--limit", "1000", "--db=mem:");
    ASSERT_EQ(which, 1);
    ASSERT_EQ(limit, 1000);
    USAGE("t kv range: --limit: 1001 is out of range [0, 1000]", &kv, "kv", "range", "a", "b", "--limit", "1001");
    USAGE("option --limit belongs after the command word", &kv, "kv", "--limit", "5", "range", "a", "b");
    USAGE("t kv get: unknown option --limit", &kv, "kv", "get", "k", "--limit", "5");
    USAGE("option --db given twice", &kv, "kv", "--db", "x", "get", "k", "--db", "y");
    USAGE("t kv: unknown command 'frob' (one of get, range)", &kv, "kv", "frob");
    USAGE("t kv: missing command (one of get, range)", &kv, "kv", "--db", "x");
    USAGE("t kv get: missing argument KEY", &kv, "kv", "get");
    USAGE("t kv get: unexpected argument 'b'", &kv, "kv", "get", "a", "b");
    USAGE("t kv: option --db needs a value", &kv, "kv", "--db");
    result r = run(&kv, "kv", "--help", NULL);
    ASSERT_TRUE(r.stop && r.code == 0);
    ASSERT_TRUE(strstr(r.out, "usage: t kv [--db URL] [--system] COMMAND [ARGS...]") != NULL);
    ASSERT_TRUE(strstr(r.out, "get KEY") && strstr(r.out, "print a value"));
    ASSERT_TRUE(strstr(r.out, "range BEGIN END") && strstr(r.out, "print a range"));
    result_free(&r);
    r = run(&kv, "kv", "range", "--help", NULL);
    ASSERT_TRUE(r.stop && r.code == 0);
    ASSERT_TRUE(strstr(r.out, "usage: t kv range [--limit N] [--db URL] [--system] BEGIN END") != NULL);
    ASSERT_TRUE(strstr(r.out, "integer in [0, 1000]") && strstr(r.out, "options of t kv:"));
    result_free(&r);
}

/* args-1.11: the value parsers used outside tables, and their messages. */
TEST(args_1_11_value_parsers) {
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    int64_t i = 5;
    uint64_t u = 5;
    double d = 5;
    ASSERT_RC(rl__args_int64("12abc", 0, 100, &i, &msg), RL_E_INVALID_ARGUMENT);
    ASSERT_STR_EQ(rl__errdetail_get(&msg), "'12abc' is not an integer");
    ASSERT_EQ(i, 5);
    ASSERT_RC(rl__args_int64("101", 0, 100, &i, &msg), RL_E_INVALID_ARGUMENT);
    ASSERT_STR_EQ(rl__errdetail_get(&msg), "101 is out of range [0, 100]");
    ASSERT_OK(rl__args_int64("100", 0, 100, &i, &msg));
    ASSERT_EQ(i, 100);
    ASSERT_RC(rl__args_uint64("", 0, 100, &u, &msg), RL_E_INVALID_ARGUMENT);
    ASSERT_STR_EQ(rl__errdetail_get(&msg), "'' is not an integer");
    ASSERT_RC(rl__args_double("inf", 0, 1, &d, &msg), RL_E_INVALID_ARGUMENT);
    ASSERT_STR_EQ(rl__errdetail_get(&msg), "'inf' is not a finite number");
    ASSERT_TRUE(d == 5);
    /* A caller that does not want the message passes NULL. */
    ASSERT_RC(rl__args_int64("x", 0, 1, &i, NULL), RL_E_INVALID_ARGUMENT);
    ASSERT_RC(rl__args_ip_port("127.0.0.1:x", 0, NULL, NULL, NULL), RL_E_INVALID_ARGUMENT);
}

/* args-1.12: escapes and hex: the bytes, and messages naming the escape and the offset. */
TEST(args_1_12_unescape_unhex) {
    rl_buf b;
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    rl__buf_init(&b);
    ASSERT_OK(rl__args_unescape("a\\x00b\\\\\\xFf", &b, &msg));
    ASSERT_MEM_EQ(b.data, b.len, "a\0b\\\xff", 5);
    rl__buf_reset(&b);
    ASSERT_RC(rl__args_unescape("abc\\xZZ", &b, &msg), RL_E_INVALID_ARGUMENT);
    ASSERT_STR_EQ(rl__errdetail_get(&msg),
                  "'abc\\xZZ': bad escape '\\xZZ' at offset 3 (use \\\\ or \\xNN with two hex digits)");
    rl__buf_reset(&b);
    ASSERT_RC(rl__args_unescape("\\n", &b, &msg), RL_E_INVALID_ARGUMENT);
    ASSERT_TRUE(strstr(rl__errdetail_get(&msg), "bad escape '\\n' at offset 0") != NULL);
    rl__buf_reset(&b);
    ASSERT_RC(rl__args_unescape("ab\\x1", &b, &msg), RL_E_INVALID_ARGUMENT);
    ASSERT_TRUE(strstr(rl__errdetail_get(&msg), "bad escape '\\x1' at offset 2") != NULL);
    rl__buf_reset(&b);
    ASSERT_RC(rl__args_unescape("ab\\", &b, &msg), RL_E_INVALID_ARGUMENT);
    ASSERT_TRUE(strstr(rl__errdetail_get(&msg), "lone backslash at offset 2") != NULL);
    rl__buf_reset(&b);
    ASSERT_OK(rl__args_unhex("00fFa0", &b, &msg));
    ASSERT_MEM_EQ(b.data, b.len, "\x00\xff\xa0", 3);
    rl__buf_reset(&b);
    ASSERT_RC(rl__args_unhex("zz", &b, &msg), RL_E_INVALID_ARGUMENT);
    ASSERT_STR_EQ(rl__errdetail_get(&msg), "'zz' is not hex: 'z' at offset 0");
    ASSERT_RC(rl__args_unhex("00a-", &b, &msg), RL_E_INVALID_ARGUMENT);
    ASSERT_STR_EQ(rl__errdetail_get(&msg), "'00a-' is not hex: '-' at offset 3");
    ASSERT_RC(rl__args_unhex("abc", &b, &msg), RL_E_INVALID_ARGUMENT);
    ASSERT_STR_EQ(rl__errdetail_get(&msg), "'abc' has an odd number of hex digits (3)");
    ASSERT_OK(rl__args_unhex("", &b, &msg));
    ASSERT_EQ(b.len, 0);
    rl__buf_release(&b);
}

/* args-1.13: IP:PORT, the one parser of rlkvd's --listen and --coordinator: the address and port
 * on success, nothing written and a message naming the fault otherwise. */
TEST(args_1_13_ip_port) {
    char ip[16] = "unchanged";
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    uint16_t port = 7;
    ASSERT_OK(rl__args_ip_port("127.0.0.2:0", 0, ip, &port, &msg));
    ASSERT_STR_EQ(ip, "127.0.0.2");
    ASSERT_EQ(port, 0);
    ASSERT_OK(rl__args_ip_port("255.255.255.255:65535", 1, ip, &port, &msg));
    ASSERT_STR_EQ(ip, "255.255.255.255");
    ASSERT_EQ(port, 65535);
    snprintf(ip, sizeof ip, "unchanged");
    port = 7;
    static const struct {
        const char *in;
        int min_port;
        const char *why;
    } bad[] = {
        {"127.0.0.1", 0, "'127.0.0.1' is not IP:PORT (e.g. 127.0.0.1:0)"},
        {":5", 0, "':5' is not IP:PORT (e.g. 127.0.0.1:0)"},
        {"", 0, "'' is not IP:PORT (e.g. 127.0.0.1:0)"},
        {"localhost:5", 0, "'localhost:5': the address is not dotted IPv4"},
        {"127.0.0.1.5:5", 0, "'127.0.0.1.5:5': the address is not dotted IPv4"},
        {"1234567890123456:5", 0, "'1234567890123456:5': the address is not dotted IPv4"},
        {"127.0.0:5", 0, "'127.0.0:5': the address is not dotted IPv4"},
        {"127.0.0.1:70000", 0, "'127.0.0.1:70000': port 70000 is out of range [0, 65535]"},
        {"127.0.0.1:0", 1, "'127.0.0.1:0': port 0 is out of range [1, 65535]"},
        {"127.0.0.1:x", 0, "'127.0.0.1:x': port 'x' is not an integer"},
        {"127.0.0.1:", 0, "'127.0.0.1:': port '' is not an integer"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ASSERT_RC(rl__args_ip_port(bad[i].in, bad[i].min_port, ip, &port, &msg), RL_E_INVALID_ARGUMENT);
        ASSERT_STR_EQ(rl__errdetail_get(&msg), bad[i].why);
        ASSERT_STR_EQ(ip, "unchanged");
        ASSERT_EQ(port, 7);
    }
}

RL_TEST_MAIN(T(args_1_1_int64_edges), T(args_1_2_int_and_uint64_edges), T(args_1_3_integer_junk), T(args_1_4_double),
             T(args_1_5_forms_and_empty), T(args_1_6_unknown_missing_repeated), T(args_1_7_enum),
             T(args_1_8_positionals), T(args_1_9_required_and_help), T(args_1_10_subcommands),
             T(args_1_11_value_parsers), T(args_1_12_unescape_unhex), T(args_1_13_ip_port))
