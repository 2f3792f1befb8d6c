/* test_cli_bad_args.c — table-driven: every command and subcommand of `rl` and
 * `rlbench`, run with bad values for every numeric option (and numeric positional): junk,
 * trailing junk, empty, spaces, hex, fractions, overflow, negatives (where the range starts at
 * 0), NaN and infinities, as "--opt VALUE" and, for the empty, junk, overflowing and NaN values,
 * also as "--opt=VALUE". Each run must exit 2 with the option named on stderr and nothing on
 * stdout; nothing may be opened (the database directory stays empty). Then every command with an
 * unknown option, and every numeric option without its value.
 *
 * A run that wrongly parsed would fail fast and visibly: the rl commands point at an empty
 * directory, rlbench micro at a missing --dir, rlbench query at a JSON file it cannot create.
 *
 *   cli_4_1  bad values for every numeric argument
 *   cli_4_2  an unknown option for every command and subcommand
 *   cli_4_3  every numeric option given without a value
 */
#include <dirent.h>
#include <stdlib.h>

#include "test.h"

/* Kinds of numeric argument, deciding which bad values apply. */
enum {
    K_NONNEG,   /* integer with a range starting at 0 or above: "-1" is bad */
    K_SIGNED,   /* integer whose range takes negatives (--pk, OFFSET): "-1" is valid */
    K_UNSIGNED, /* uint64 */
    K_DOUBLE,   /* finite number in a positive range */
};

typedef struct {
    const char *prog; /* "rl" or "rlbench" */
    const char *base; /* the command with valid arguments; "@" stands for the database directory */
    const char *opt;  /* "--name", or a positional's metavar (appended last) */
    int kind;
} numarg;

static const numarg args[] = {
    {"rl", "load --db file:@", "--count", K_NONNEG},
    {"rl", "load --db file:@ --count 1", "--padding", K_NONNEG},
    {"rl", "load --db file:@ --count 1", "--seed", K_UNSIGNED},
    {"rl", "get --db file:@", "--pk", K_SIGNED},
    {"rl", "inject-defect --db file:@ --kind stray-suffix", "--pk", K_SIGNED},
    {"rl", "query --db file:@ --index price_idx", "--skip", K_NONNEG},
    {"rl", "query --db file:@ --index price_idx", "--limit", K_NONNEG},
    {"rl", "query --db file:@ --index price_idx", "--scan-limit", K_NONNEG},
    {"rl", "query --db file:@ --index price_idx", "--byte-limit", K_NONNEG},
    {"rl", "query --db file:@ --index price_idx", "--time-limit-ms", K_NONNEG},
    {"rl", "kv --db file:@ range a b", "--limit", K_NONNEG},
    {"rl", "kv --db file:@ getkey fge a", "OFFSET", K_SIGNED},
    {"rlbench", "micro --only point --dir /nonexistent/rl-bad-args", "--keys", K_NONNEG},
    {"rlbench", "micro --only point --dir /nonexistent/rl-bad-args", "--value-len", K_NONNEG},
    {"rlbench", "micro --only point --dir /nonexistent/rl-bad-args", "--seconds", K_DOUBLE},
    {"rlbench", "micro --only point --dir /nonexistent/rl-bad-args", "--repeats", K_NONNEG},
    {"rlbench", "micro --only point --dir /nonexistent/rl-bad-args", "--seed", K_UNSIGNED},
    {"rlbench", "query --only small/limit1 --json /nonexistent/rl-bad-args.json", "--records", K_NONNEG},
    {"rlbench", "query --only small/limit1 --json /nonexistent/rl-bad-args.json", "--padding", K_NONNEG},
    {"rlbench", "query --only small/limit1 --json /nonexistent/rl-bad-args.json", "--seconds", K_DOUBLE},
    {"rlbench", "query --only small/limit1 --json /nonexistent/rl-bad-args.json", "--repeats", K_NONNEG},
};

/* Every command and subcommand with valid arguments ("@": the database directory). */
static const struct {
    const char *prog, *base;
} commands[] = {
    {"rl", "tuple decode 00"},
    {"rl", "tuple encode '[]'"},
    {"rl", "tuple print 00"},
    {"rl", "kv --db file:@ get a"},
    {"rl", "kv --db file:@ set a b"},
    {"rl", "kv --db file:@ clear a"},
    {"rl", "kv --db file:@ clearrange a b"},
    {"rl", "kv --db file:@ range a b"},
    {"rl", "kv --db file:@ getkey fge a"},
    {"rl", "kv --db file:@ status"},
    {"rl", "load --db file:@ --count 1"},
    {"rl", "get --db file:@ --pk 1"},
    {"rl", "check --db file:@"},
    {"rl", "inject-defect --db file:@ --pk 1 --kind stray-suffix"},
    {"rl", "query --db file:@ --index price_idx"},
    {"rlbench", "micro --only point --dir /nonexistent/rl-bad-args"},
    {"rlbench", "query --only small/limit1 --json /nonexistent/rl-bad-args.json"},
};

static const char *bad_common[] = {
    "abc", "12abc", "", " 7", "7 ", "0x10", "1.5", "1e3", "nan", "+-1", "99999999999999999999"};
static const char *bad_double[] = {"abc", "1.5x", "",    " 1",   "0x1p3", "1e999", "-1",
                                   "0",   "nan",  "NaN", "-nan", "inf",   "-inf",  "Infinity"};

static char dbdir[4096];
static int runs;

/* Replace each "@" of base by the database directory. */
static void expand(const char *base, char *out, size_t cap) {
    size_t n = 0;
    for (const char *p = base; *p && n + 1 < cap; p++) {
        if (*p == '@') n += (size_t)snprintf(out + n, cap - n, "%s", dbdir);
        else out[n++] = *p;
    }
    out[n < cap ? n : cap - 1] = 0;
}

/* Single-quote s for the shell into out. */
static void quote(const char *s, char *out, size_t cap) {
    size_t n = 0;
    out[n++] = '\'';
    for (; *s && n + 6 < cap; s++) {
        if (*s == '\'') memcpy(out + n, "'\\''", 4), n += 4;
        else out[n++] = *s;
    }
    out[n++] = '\'';
    out[n] = 0;
}

/* Run prog with the shell words; it must exit 2, name `name` on stderr and print nothing. */
static void expect_usage(const char *prog, const char *words, const char *name, const char *want) {
    char *out, *err;
    int rc = rl_test_run(prog, &out, &err, "%s", words);
    runs++;
    if (rc != 2) fail_msg("%s %s: exit %d, want 2\nstderr: %s", prog, words, rc, err);
    if (!strstr(err, name)) fail_msg("%s %s: stderr does not name %s: %s", prog, words, name, err);
    if (want && !strstr(err, want)) fail_msg("%s %s: stderr lacks '%s': %s", prog, words, want, err);
    if (*out) fail_msg("%s %s: printed on stdout: %s", prog, words, out);
    free(out);
    free(err);
}

static int dir_entries(const char *d) {
    DIR *dh = opendir(d);
    ASSERT_NOT_NULL(dh);
    int n = 0;
    for (struct dirent *e; (e = readdir(dh));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(dh);
    return n;
}

static void setup_dir(const char *tag) {
    char *d = rl_test_tmpdir(tag);
    snprintf(dbdir, sizeof dbdir, "%s", d);
    free(d);
    runs = 0;
}

TEST(cli_4_1_bad_numbers_everywhere) {
    setup_dir("cli41");
    for (size_t a = 0; a < sizeof args / sizeof args[0]; a++) {
        const numarg *x = &args[a];
        const char *vals[32];
        int nv = 0;
        if (x->kind == K_DOUBLE) {
            for (size_t i = 0; i < sizeof bad_double / sizeof bad_double[0]; i++) vals[nv++] = bad_double[i];
        } else {
            for (size_t i = 0; i < sizeof bad_common / sizeof bad_common[0]; i++) vals[nv++] = bad_common[i];
            vals[nv++] = "-99999999999999999999";
            if (x->kind != K_SIGNED) vals[nv++] = "-1";
        }
        char base[8192];
        expand(x->base, base, sizeof base);
        int positional = x->opt[0] != '-';
        for (int v = 0; v < nv; v++) {
            char q[256], words[9000];
            quote(vals[v], q, sizeof q);
            /* "--opt=VALUE" for the values whose form matters most (empty, junk, overflow, NaN). */
            int eq_too = !positional && (!vals[v][0] || !strcmp(vals[v], "12abc") || !strcmp(vals[v], "1.5x") ||
                                         !strcmp(vals[v], "nan") || strstr(vals[v], "9999999999") != NULL);
            for (int form = 0; form < (eq_too ? 2 : 1); form++) {
                if (positional) {
                    /* "--" keeps "-1"-like values positional, as a user would write them */
                    snprintf(words, sizeof words, "%s %s%s", base, vals[v][0] == '-' && vals[v][1] == '-' ? "-- " : "",
                             q);
                } else if (form == 0) {
                    /* "--opt VALUE" cannot take a value beginning with "--": that is a missing value */
                    if (vals[v][0] == '-' && vals[v][1] == '-') continue;
                    snprintf(words, sizeof words, "%s %s %s", base, x->opt, q);
                } else {
                    char eq[300];
                    snprintf(eq, sizeof eq, "%s=%s", x->opt, vals[v]);
                    quote(eq, q, sizeof q);
                    snprintf(words, sizeof words, "%s %s", base, q);
                }
                expect_usage(x->prog, words, x->opt, NULL);
            }
        }
    }
    ASSERT_EQ(dir_entries(dbdir), 0);
    printf("cli_4_1: %d runs\n", runs);
    rl_test_rmtree(dbdir);
}

TEST(cli_4_2_unknown_option_everywhere) {
    setup_dir("cli42");
    for (size_t c = 0; c < sizeof commands / sizeof commands[0]; c++) {
        char base[8192], words[9000];
        expand(commands[c].base, base, sizeof base);
        snprintf(words, sizeof words, "%s --bogus 1", base);
        expect_usage(commands[c].prog, words, "--bogus", "unknown option --bogus");
        snprintf(words, sizeof words, "%s --bogus=1", base);
        expect_usage(commands[c].prog, words, "--bogus", "unknown option --bogus");
    }
    /* The programs themselves. */
    expect_usage("rl", "--bogus", "--bogus", "unknown command");
    expect_usage("rlbench", "--bogus", "--bogus", "unknown command");
    expect_usage("rl", "", "usage", NULL);
    expect_usage("rlbench", "", "usage", NULL);
    ASSERT_EQ(dir_entries(dbdir), 0);
    rl_test_rmtree(dbdir);
}

TEST(cli_4_3_missing_values_everywhere) {
    setup_dir("cli43");
    for (size_t a = 0; a < sizeof args / sizeof args[0]; a++) {
        const numarg *x = &args[a];
        char base[8192], words[9000], want[128];
        expand(x->base, base, sizeof base);
        if (x->opt[0] != '-') {
            /* A missing optional positional is fine; a missing required one is named. */
            continue;
        }
        snprintf(want, sizeof want, "option %s needs a value", x->opt);
        snprintf(words, sizeof words, "%s %s", base, x->opt);
        expect_usage(x->prog, words, x->opt, want);
        /* Followed by another option: still missing, not swallowed. */
        snprintf(words, sizeof words, "%s %s --help", base, x->opt);
        expect_usage(x->prog, words, x->opt, want);
    }
    /* Required positionals are named when missing. */
    expect_usage("rl", "kv get", "KEY", "rl kv get: missing argument KEY");
    expect_usage("rl", "kv getkey fge", "KEY", "rl kv getkey: missing argument KEY");
    expect_usage("rl", "tuple decode", "HEX", "rl tuple decode: missing argument HEX");
    ASSERT_EQ(dir_entries(dbdir), 0);
    rl_test_rmtree(dbdir);
}

RL_TEST_MAIN(T(cli_4_1_bad_numbers_everywhere), T(cli_4_2_unknown_option_everywhere),
             T(cli_4_3_missing_values_everywhere))
