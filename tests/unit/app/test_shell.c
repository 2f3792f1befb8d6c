/* test_shell.c — rl shell's splitter and executor (src/app/shell.h) on a real mem: database:
 *
 *   shell-1.1  splitting: words, spaces and tabs, ';' and newlines, empty commands, quotes (an
 *              empty word, quoted spaces and semicolons, a quoted part inside a word), every escape
 *   shell-1.2  lines that do not split: an unclosed quote, a bad escape, \x without two hex digits,
 *              a lone backslash at the end, a line over the limit — each invalid_argument with
 *              the offset, and nothing of the line runs
 *   shell-1.3  rl__shell_quote round trip: random byte strings quoted and split back (seeded)
 *   shell-1.4  commands used wrongly: an unknown command, a wrong argument count (every
 *              command), writemode off, a bad limit, bad option names, states and values, no
 *              active transaction, already in one — each "ERROR: NAME (CODE): ..." with usage
 *              (3800), invalid_option (2007) or invalid_option_value (2006), the transaction kept
 *   shell-1.5  autocommit and transactions: reads see the transaction's own writes and others do
 *              not until commit ("Committed (V)"), rollback discards, reset keeps the transaction
 *              but drops its writes, a read-only commit is "Nothing to commit", getversion
 *   shell-1.6  a line of several commands echoes each (">>> ...") and stops at the first that
 *              fails, with the warning; exit and quit stop the line
 *   shell-1.7  getrange / getrangekeys: fdbcli's output, the default END (a prefix, "" and
 *              "\xff"), LIMIT, keys and values with bytes that print as \xNN
 *   shell-1.8  database errors: a conflict at commit (not_committed, 1020) and a system key
 *              written without ACCESS_SYSTEM_KEYS roll the open transaction back; with `option on
 *              ACCESS_SYSTEM_KEYS` the write works; options on the current transaction only
 *   shell-1.9  status and status json on mem:, help for every command and topic
 */
#include <stdlib.h>

#include <jansson.h>

#include "app/shell.h"
#include "base/buf.h"
#include "test.h"

/* ---- Splitting ------------------------------------------------------------------------------- */

/* The words of command j of l joined as "w1|w2|..." (bytes as \xNN when not printable). */
static char *cmd_str(const rl__shell_line *l, size_t j) {
    rl_buf b;
    rl__buf_init(&b);
    for (size_t k = 0; k < l->cmds[j].n_words; k++) {
        const rl_slice *w = &l->cmds[j].words[k];
        if (k) rl__buf_append_byte(&b, '|');
        for (size_t i = 0; i < w->len; i++) {
            if (w->data[i] >= 32 && w->data[i] < 127) rl__buf_append_byte(&b, w->data[i]);
            else rl__buf_printf(&b, "\\x%02x", w->data[i]);
        }
        ASSERT_EQ(w->data[w->len], 0); /* every word is followed by a NUL */
    }
    char *s = strdup((const char *)b.data);
    rl__buf_release(&b);
    return s;
}

/* Split line; expect the commands want[0..n) (each "w1|w2"). */
static void expect_split(const char *line, size_t n, const char *const *want) {
    rl__shell_line l;
    rl_buf msg;
    rl__shell_line_init(&l);
    rl__buf_init(&msg);
    int rc = rl__shell_split(line, strlen(line), &l, &msg);
    if (rc) fail_msg("split of [%s]: %s: %s", line, rl_error_name(rc), msg.data);
    if (l.n_cmds != n) fail_msg("split of [%s]: %zu commands, expected %zu", line, l.n_cmds, n);
    for (size_t j = 0; j < n; j++) {
        char *got = cmd_str(&l, j);
        if (strcmp(got, want[j])) fail_msg("split of [%s]: command %zu is [%s], expected [%s]", line, j, got, want[j]);
        free(got);
    }
    rl__shell_line_release(&l);
    rl__buf_release(&msg);
}

#define SPLIT(line, ...)                                           \
    do {                                                           \
        static const char *const want_[] = {__VA_ARGS__};          \
        expect_split(line, sizeof want_ / sizeof want_[0], want_); \
    } while (0)

TEST(shell_1_1_split) {
    SPLIT("get a", "get|a");
    SPLIT("  set   a\tb  ", "set|a|b");
    SPLIT("writemode on; set a b;get a", "writemode|on", "set|a|b", "get|a");
    SPLIT("a;;b; ;", "a", "b");
    SPLIT("a\nb\r\nc", "a", "b", "c");
    SPLIT("set \"\" \"hello world\"", "set||hello world");
    SPLIT("set \"a;b\" 'c'", "set|a;b|'c'");
    SPLIT("get \"a b\"c", "get|a bc");
    SPLIT("get a\\ b\\;c\\\\d\\\"e", "get|a b;c\\d\"e");
    SPLIT("get \\x00\\xfF\\x41", "get|\\x00\\xffA");
    SPLIT("get \"\\x20\\\" \"", "get| \" ");
    SPLIT("get \xc3\xa9\x01", "get|\\xc3\\xa9\\x01");
    /* Nothing but separators: no command. */
    rl__shell_line l;
    rl_buf msg;
    rl__shell_line_init(&l);
    rl__buf_init(&msg);
    ASSERT_OK(rl__shell_split(" ; \n ", 5, &l, &msg));
    ASSERT_EQ(l.n_cmds, 0);
    ASSERT_OK(rl__shell_split("", 0, &l, &msg));
    ASSERT_EQ(l.n_cmds, 0);
    /* Bytes after a NUL are words too (the length decides, not the NUL). */
    ASSERT_OK(rl__shell_split("get a\0b", 7, &l, &msg));
    ASSERT_EQ(l.n_cmds, 1);
    ASSERT_EQ(l.cmds[0].words[1].len, 3);
    rl__shell_line_release(&l);
    rl__buf_release(&msg);
}

static void expect_split_error(const char *line, size_t len, const char *want) {
    rl__shell_line l;
    rl_buf msg;
    rl__shell_line_init(&l);
    rl__buf_init(&msg);
    ASSERT_OK(rl__shell_split("get x", 5, &l, &msg)); /* a previous split is forgotten */
    int rc = rl__shell_split(line, len, &l, &msg);
    if (rc != RL_E_INVALID_ARGUMENT) fail_msg("split of [%s]: %s, expected invalid_argument", line, rl_error_name(rc));
    if (!strstr((const char *)msg.data, want)) fail_msg("split of [%s]: message [%s] lacks [%s]", line, msg.data, want);
    ASSERT_EQ(l.n_cmds, 0);
    rl__shell_line_release(&l);
    rl__buf_release(&msg);
}

TEST(shell_1_2_split_errors) {
    expect_split_error("get \"abc", 8, "unterminated quote: the quote at offset 4 is not closed");
    expect_split_error("set \"a\" \"b", 10, "the quote at offset 8");
    expect_split_error("get a\\qb", 8, "bad escape '\\q' at offset 5 (use \\\\, \\\", \\ , \\; or \\xNN)");
    expect_split_error("get \"\\t\"", 8, "bad escape '\\t' at offset 5");
    expect_split_error("get \\x4", 7, "bad escape '\\x4' at offset 4: \\x needs two hex digits");
    expect_split_error("get \\xZZ", 8, "bad escape '\\xZZ' at offset 4: \\x needs two hex digits");
    expect_split_error("get \\x", 6, "bad escape '\\x' at offset 4");
    expect_split_error("get a\\", 6, "a lone backslash at offset 5");
    expect_split_error("get \\\x01", 6, "bad escape '\\\\x01' at offset 4");
    /* A line over the limit. */
    size_t big = RL__SHELL_LINE_MAX + 1;
    char *s = malloc(big);
    ASSERT_NOT_NULL(s);
    memset(s, 'a', big);
    expect_split_error(s, big, "more than the");
    free(s);
}

TEST(shell_1_3_quote_round_trip) {
    uint64_t seed = rl_test_seed(), st = seed;
    rl__shell_line l;
    rl_buf msg, q;
    rl__shell_line_init(&l);
    rl__buf_init(&msg);
    rl__buf_init(&q);
    for (int round = 0; round < 2000; round++) {
        uint8_t w[64];
        size_t n = (size_t)rl_test_rand_below(&st, sizeof w + 1);
        for (size_t i = 0; i < n; i++) {
            /* Mostly the bytes that need care. */
            static const uint8_t hard[] = {' ', ';', '"', '\\', '\n', '\t', '\r', 0, 0xff, 'x'};
            w[i] = rl_test_rand_below(&st, 2) ? hard[rl_test_rand_below(&st, sizeof hard)]
                                              : (uint8_t)rl_test_rand_below(&st, 256);
        }
        rl__buf_reset(&q);
        rl__buf_append_str(&q, "set ");
        rl__shell_quote(&q, w, n);
        ASSERT_OK(rl__shell_split((const char *)q.data, q.len, &l, &msg));
        ASSERT_EQ(l.n_cmds, 1);
        ASSERT_EQ(l.cmds[0].n_words, 2);
        ASSERT_MEM_EQ(l.cmds[0].words[1].data, l.cmds[0].words[1].len, w, n);
    }
    rl__shell_line_release(&l);
    rl__buf_release(&msg);
    rl__buf_release(&q);
}

/* ---- The executor ----------------------------------------------------------------------------- */

typedef struct {
    rl_db *db;
    rl__shell *sh;
    FILE *fo, *fe;
    char *out, *err;       /* everything written so far */
    size_t ol, el;         /* their lengths */
    size_t mark_o, mark_e; /* where the last run's output starts */
    int exit;
} shx;

static void shx_open_on(shx *s, rl_db *db) {
    memset(s, 0, sizeof *s);
    s->db = db;
    s->fo = open_memstream(&s->out, &s->ol);
    s->fe = open_memstream(&s->err, &s->el);
    ASSERT_NOT_NULL(s->fo);
    ASSERT_NOT_NULL(s->fe);
    ASSERT_OK(rl__shell_new(db, "mem:", s->fo, s->fe, &s->sh));
}

static void shx_close(shx *s) {
    rl__shell_free(s->sh);
    fclose(s->fo);
    fclose(s->fe);
    free(s->out);
    free(s->err);
}

/* Run line; the code it returned. Its output: out_of(s), err_of(s). */
static int shx_run(shx *s, const char *line) {
    fflush(s->fo);
    fflush(s->fe);
    s->mark_o = s->ol;
    s->mark_e = s->el;
    int rc = rl__shell_run_line(s->sh, line, strlen(line), &s->exit);
    fflush(s->fo);
    fflush(s->fe);
    return rc;
}

static const char *out_of(shx *s) { return s->out + s->mark_o; }
static const char *err_of(shx *s) { return s->err + s->mark_e; }

/* Run line, which must succeed and print exactly want (NULL: anything) and no error. */
static void ok(shx *s, const char *line, const char *want) {
    int rc = shx_run(s, line);
    if (rc) fail_msg("[%s]: %s: %s", line, rl_error_name(rc), err_of(s));
    if (*err_of(s)) fail_msg("[%s]: stderr: %s", line, err_of(s));
    if (want && strcmp(out_of(s), want)) fail_msg("[%s]: printed [%s], expected [%s]", line, out_of(s), want);
}

/* Run line, which must fail with code and print an error containing want. */
static void bad(shx *s, const char *line, int code, const char *want) {
    int rc = shx_run(s, line);
    if (rc != code)
        fail_msg("[%s]: %s (%d), expected %s: %s", line, rl_error_name(rc), rc, rl_error_name(code), err_of(s));
    char head[64];
    snprintf(head, sizeof head, "ERROR: %s (%d): ", rl_error_name(code), code);
    if (strncmp(err_of(s), head, strlen(head)))
        fail_msg("[%s]: stderr [%s] does not start [%s]", line, err_of(s), head);
    if (!strstr(err_of(s), want)) fail_msg("[%s]: stderr [%s] lacks [%s]", line, err_of(s), want);
}

static rl_db *mem_db(void) {
    rl_db *db = NULL;
    ASSERT_OK(rl_db_open("mem:", NULL, &db));
    return db;
}

/* Two shells on one new mem: database, writemode on in both. */
static rl_db *two_shells(shx *a, shx *b) {
    rl_db *db = mem_db();
    shx_open_on(a, db);
    shx_open_on(b, db);
    ok(a, "writemode on", "");
    ok(b, "writemode on", "");
    return db;
}

static void close_two(rl_db *db, shx *a, shx *b) {
    shx_close(a);
    shx_close(b);
    rl_db_close(db);
}

TEST(shell_1_4_commands_used_wrongly) {
    rl_db *db = mem_db();
    shx s;
    shx_open_on(&s, db);
    bad(&s, "frob", RL_E_USAGE, "Unknown command `frob'. Try `help'?");
    bad(&s, "GET a", RL_E_USAGE, "Unknown command `GET'");
    bad(&s, "\\x01x", RL_E_USAGE, "Unknown command `\\x01x'");
    /* Writes are refused until writemode on, whatever their arguments (fdbcli checks it first). */
    bad(&s, "set a b", RL_E_USAGE, "writemode must be enabled to set or clear keys in the database");
    bad(&s, "clear a", RL_E_USAGE, "writemode must be enabled");
    bad(&s, "clearrange a b c", RL_E_USAGE, "writemode must be enabled");
    bad(&s, "writemode", RL_E_USAGE, "writemode takes 1 argument, not 0. Usage: writemode <on|off>");
    bad(&s, "writemode yes", RL_E_USAGE, "writemode is `on' or `off', not `yes'");
    ok(&s, "writemode on", "");
    /* Argument counts, every command. */
    static const struct {
        const char *line, *want;
    } counts[] = {
        {"begin x", "begin takes 0 arguments, not 1. Usage: begin"},
        {"commit x", "commit takes 0 arguments, not 1"},
        {"rollback x y", "rollback takes 0 arguments, not 2"},
        {"reset x", "reset takes 0 arguments, not 1"},
        {"get", "get takes 1 argument, not 0. Usage: get <KEY>"},
        {"get a b", "get takes 1 argument, not 2"},
        {"set a", "set takes 2 arguments, not 1. Usage: set <KEY> <VALUE>"},
        {"set a b c", "set takes 2 arguments, not 3"},
        {"clear", "clear takes 1 argument, not 0"},
        {"clearrange a", "clearrange takes 2 arguments, not 1"},
        {"getrange", "getrange takes 1 to 3 arguments, not 0. Usage: getrange <BEGINKEY> [ENDKEY] [LIMIT]"},
        {"getrangekeys a b 1 2", "getrangekeys takes 1 to 3 arguments, not 4"},
        {"getversion now", "getversion takes 0 arguments, not 1"},
        {"status json now", "status takes 0 to 1 arguments, not 2"},
        {"help a b", "help takes 0 to 1 arguments, not 2"},
        {"exit now", "exit takes 0 arguments, not 1"},
        {"option on TIMEOUT 1 2", "option takes 0 to 3 arguments, not 4"},
        {"option on", "option needs a name after on|off"},
    };
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) bad(&s, counts[i].line, RL_E_USAGE, counts[i].want);
    bad(&s, "status xml", RL_E_USAGE, "status takes `json' or nothing, not `xml'");
    /* Limits: decimal digits, 1 to 999999999. */
    bad(&s, "getrange a b 0", RL_E_USAGE, "bad limit `0': LIMIT is an integer from 1 to 999999999");
    bad(&s, "getrange a b -1", RL_E_USAGE, "bad limit `-1'");
    bad(&s, "getrange a b 1000000000", RL_E_USAGE, "bad limit `1000000000'");
    bad(&s, "getrange a b 12x", RL_E_USAGE, "bad limit `12x'");
    bad(&s, "getrange a b \"\"", RL_E_USAGE, "bad limit `'");
    bad(&s, "getrange a b 1\\x002", RL_E_USAGE, "bad limit `1\\x002'");
    /* Options. */
    bad(&s, "option maybe TIMEOUT 1", RL_E_USAGE, "Invalid option state `maybe': option must be turned `on' or `off'");
    bad(&s, "option on FROB", RL_E_INVALID_OPTION, "invalid option `FROB'. Try `help options'");
    bad(&s, "option on TIMEOUT", RL_E_INVALID_OPTION_VALUE, "option TIMEOUT expected a parameter");
    bad(&s, "option on ACCESS_SYSTEM_KEYS 1", RL_E_INVALID_OPTION_VALUE,
        "option ACCESS_SYSTEM_KEYS did not expect a parameter");
    bad(&s, "option on TIMEOUT soon", RL_E_INVALID_OPTION_VALUE, "option TIMEOUT: `soon' is not an integer");
    bad(&s, "option on TIMEOUT 99999999999999999999", RL_E_INVALID_OPTION_VALUE, "is not an integer");
    bad(&s, "option on TIMEOUT -1", RL_E_INVALID_OPTION_VALUE, "option TIMEOUT -1: Option set with an invalid value");
    bad(&s, "option on SIZE_LIMIT 10", RL_E_INVALID_OPTION_VALUE, "option SIZE_LIMIT 10");
    bad(&s, "option off TIMEOUT 5", RL_E_USAGE, "Cannot specify option argument when turning option off");
    ok(&s, "option", "There are no options enabled\n");
    /* Transactions. */
    bad(&s, "commit", RL_E_USAGE, "No active transaction");
    bad(&s, "rollback", RL_E_USAGE, "No active transaction");
    bad(&s, "reset", RL_E_USAGE, "No active transaction");
    ok(&s, "begin", "Transaction started\n");
    ok(&s, "set k v", "");
    bad(&s, "begin", RL_E_USAGE, "Already in transaction");
    bad(&s, "option off TIMEOUT", RL_E_USAGE, "Cannot turn option off when using a transaction created with `begin'");
    bad(&s, "get a b", RL_E_USAGE, "get takes 1 argument");
    bad(&s, "frob", RL_E_USAGE, "Unknown command");
    /* None of that rolled the transaction back (only database errors do). */
    ASSERT_EQ(rl__shell_in_transaction(s.sh), 1);
    ok(&s, "get k", "`k' is `v'\n");
    shx_close(&s);
    rl_db_close(db);
}

TEST(shell_1_5_autocommit_and_transactions) {
    shx a, b;
    rl_db *db = two_shells(&a, &b);
    /* Autocommit: each write is its own transaction, committed at once. */
    ASSERT_OK(shx_run(&a, "set k1 v1"));
    ASSERT_TRUE(!strncmp(out_of(&a), "Committed (", 11));
    long long v1 = atoll(out_of(&a) + 11);
    ok(&b, "get k1", "`k1' is `v1'\n");
    ok(&b, "get nope", "`nope': not found\n");
    /* A transaction: its reads see its writes; others see them after commit. */
    ok(&a, "begin", "Transaction started\n");
    ok(&a, "set k2 v2", "");
    ok(&a, "clear k1", "");
    ok(&a, "get k2", "`k2' is `v2'\n");
    ok(&a, "get k1", "`k1': not found\n");
    ok(&b, "get k2", "`k2': not found\n");
    ok(&b, "get k1", "`k1' is `v1'\n");
    ASSERT_OK(shx_run(&a, "commit"));
    ASSERT_TRUE(!strncmp(out_of(&a), "Committed (", 11));
    ASSERT_TRUE(atoll(out_of(&a) + 11) > v1);
    ASSERT_EQ(rl__shell_in_transaction(a.sh), 0);
    ok(&b, "get k2", "`k2' is `v2'\n");
    ok(&b, "get k1", "`k1': not found\n");
    /* Rollback discards. */
    ok(&a, "begin", "Transaction started\n");
    ok(&a, "set k3 v3", "");
    ok(&a, "rollback", "Transaction rolled back\n");
    ok(&a, "get k3", "`k3': not found\n");
    /* Reset: still in a transaction, its writes gone. */
    ok(&a, "begin", "Transaction started\n");
    ok(&a, "set k4 v4", "");
    ok(&a, "reset", "Transaction reset\n");
    ASSERT_EQ(rl__shell_in_transaction(a.sh), 1);
    ok(&a, "get k4", "`k4': not found\n");
    ok(&a, "set k5 v5", "");
    ASSERT_OK(shx_run(&a, "commit"));
    ok(&b, "get k4", "`k4': not found\n");
    ok(&b, "get k5", "`k5' is `v5'\n");
    /* A transaction that only read commits nothing. */
    ok(&a, "begin", "Transaction started\n");
    ok(&a, "get k5", "`k5' is `v5'\n");
    ok(&a, "commit", "Nothing to commit\n");
    /* getversion: a number, in and out of a transaction; a transaction keeps its own. */
    ASSERT_OK(shx_run(&a, "getversion"));
    long long g1 = atoll(out_of(&a));
    ASSERT_TRUE(g1 > 0);
    ok(&a, "begin", NULL);
    ASSERT_OK(shx_run(&a, "getversion"));
    long long t1 = atoll(out_of(&a));
    ASSERT_OK(shx_run(&b, "set k6 v6"));
    ASSERT_OK(shx_run(&a, "getversion"));
    ASSERT_EQ(atoll(out_of(&a)), t1);
    ok(&a, "get k6", "`k6': not found\n"); /* its snapshot */
    ok(&a, "rollback", NULL);
    ASSERT_OK(shx_run(&a, "getversion"));
    ASSERT_TRUE(atoll(out_of(&a)) > t1);
    /* Clearrange. */
    ASSERT_OK(shx_run(&a, "clearrange k k6"));
    ok(&b, "getrangekeys k", "\nRange limited to 25 keys\n`k6'\n\n");
    close_two(db, &a, &b);
}

TEST(shell_1_6_lines_of_commands) {
    rl_db *db = mem_db();
    shx s;
    shx_open_on(&s, db);
    ok(&s, "writemode on; begin; set \"a b\" x; get \"a b\"; rollback",
       ">>> writemode on\n>>> begin\nTransaction started\n>>> set a\\x20b x\n>>> get a\\x20b\n`a b' is `x'\n"
       ">>> rollback\nTransaction rolled back\n");
    /* The first failure stops the line. */
    ASSERT_EQ(shx_run(&s, "set a 1; frob; set b 2"), RL_E_USAGE);
    ASSERT_TRUE(strstr(out_of(&s), ">>> set a 1\nCommitted (") != NULL);
    ASSERT_TRUE(strstr(out_of(&s), ">>> frob\n") != NULL);
    ASSERT_TRUE(strstr(out_of(&s), "set b") == NULL);
    ASSERT_STR_EQ(err_of(&s), "ERROR: usage (3800): Unknown command `frob'. Try `help'?\n"
                              "WARNING: the previous command failed, the remaining commands will not be executed.\n");
    ok(&s, "get b", "`b': not found\n");
    /* A line that does not split runs nothing. */
    ASSERT_EQ(shx_run(&s, "set c 1; set d \"2"), RL_E_INVALID_ARGUMENT);
    ASSERT_STR_EQ(out_of(&s), "");
    ok(&s, "get c", "`c': not found\n");
    /* exit and quit stop the line; the exit flag is set. */
    s.exit = 0;
    ok(&s, "get a; exit; set c 1", ">>> get a\n`a' is `1'\n>>> exit\n");
    ASSERT_EQ(s.exit, 1);
    s.exit = 0;
    ok(&s, "quit", "");
    ASSERT_EQ(s.exit, 1);
    s.exit = 0;
    ok(&s, "get c", "`c': not found\n");
    ASSERT_EQ(s.exit, 0);
    /* Empty lines and lines of separators do nothing. */
    ok(&s, "", "");
    ok(&s, " ;; ", "");
    shx_close(&s);
    rl_db_close(db);
}

TEST(shell_1_7_getrange) {
    rl_db *db = mem_db();
    shx s;
    shx_open_on(&s, db);
    ok(&s, "writemode on", "");
    ok(&s, "begin", NULL);
    for (int i = 0; i < 30; i++) {
        char line[64];
        snprintf(line, sizeof line, "set k%02d v%d", i, i);
        ok(&s, line, "");
    }
    ok(&s, "set a\\xffb \\x00\\\\v; set \\xfe x; set l y", NULL);
    ok(&s, "commit", NULL);
    /* The default limit, 25, and the default END: every key beginning with BEGIN. */
    ASSERT_OK(shx_run(&s, "getrange k"));
    ASSERT_TRUE(!strncmp(out_of(&s), "\nRange limited to 25 keys\n`k00' is `v0'\n`k01' is `v1'\n", 49));
    ASSERT_TRUE(strstr(out_of(&s), "`k24' is `v24'\n\n") != NULL);
    ASSERT_TRUE(strstr(out_of(&s), "k25") == NULL);
    ok(&s, "getrange k k03", "\nRange limited to 25 keys\n`k00' is `v0'\n`k01' is `v1'\n`k02' is `v2'\n\n");
    ok(&s, "getrangekeys k k99 2", "\nRange limited to 2 keys\n`k00'\n`k01'\n\n");
    ok(&s, "getrange k2 k99 100",
       "\nRange limited to 100 keys\n`k20' is `v20'\n`k21' is `v21'\n`k22' is `v22'\n`k23' is `v23'\n`k24' is "
       "`v24'\n`k25' is `v25'\n`k26' is `v26'\n`k27' is `v27'\n`k28' is `v28'\n`k29' is `v29'\n\n");
    /* Bytes that do not print, a backslash, the prefix a\xff. */
    ok(&s, "getrange a\\xff", "\nRange limited to 25 keys\n`a\\xffb' is `\\x00\\\\v'\n\n");
    ok(&s, "getrangekeys \"\" \\xff 3", "\nRange limited to 3 keys\n`a\\xffb'\n`k00'\n`k01'\n\n");
    ok(&s, "getrangekeys \\xfe", "\nRange limited to 25 keys\n`\\xfe'\n\n");
    ok(&s, "getrangekeys z", "\nRange limited to 25 keys\n\n");
    /* The system keyspace needs ACCESS_SYSTEM_KEYS; beyond it is outside the legal range. */
    bad(&s, "getrangekeys \\xff\\xff", RL_E_KEY_OUTSIDE_LEGAL_RANGE, "");
    bad(&s, "getrangekeys \\xff\\xff\\x01", RL_E_KEY_OUTSIDE_LEGAL_RANGE, "");
    shx_close(&s);
    rl_db_close(db);
}

TEST(shell_1_8_database_errors_and_options) {
    shx a, b;
    rl_db *db = two_shells(&a, &b);
    /* A conflict: a read k, b wrote it, a's commit fails and a's transaction is rolled back. */
    ok(&a, "begin", NULL);
    ok(&a, "get k", "`k': not found\n");
    ASSERT_OK(shx_run(&b, "set k theirs"));
    ok(&a, "set k mine", "");
    ASSERT_EQ(shx_run(&a, "commit"), RL_E_NOT_COMMITTED);
    ASSERT_STR_EQ(err_of(&a), "ERROR: not_committed (1020): Transaction not committed due to conflict with another "
                              "transaction\nRolling back current transaction\n");
    ASSERT_EQ(rl__shell_in_transaction(a.sh), 0);
    ok(&a, "get k", "`k' is `theirs'\n");
    /* A system key without ACCESS_SYSTEM_KEYS: refused, and the transaction rolled back. */
    ok(&a, "begin", NULL);
    ok(&a, "set x 1", "");
    bad(&a, "set \\xff/x 1", RL_E_SYSTEM_KEY_WRITE, "Keys beginning with \\xff");
    ASSERT_TRUE(strstr(err_of(&a), "Rolling back current transaction\n") != NULL);
    ASSERT_EQ(rl__shell_in_transaction(a.sh), 0);
    ok(&a, "get x", "`x': not found\n");
    bad(&a, "set \\xff/x 1", RL_E_SYSTEM_KEY_WRITE, ""); /* autocommit: the same */
    /* The option for the current transaction only. */
    ok(&a, "begin", NULL);
    ok(&a, "option on access_system_keys", "Option enabled for current transaction\n");
    ok(&a, "option", "\nCurrently enabled options:\n\nACCESS_SYSTEM_KEYS\n\n");
    ok(&a, "set \\xff/x 1", "");
    ASSERT_OK(shx_run(&a, "commit"));
    ok(&a, "option", "There are no options enabled\n");
    bad(&a, "set \\xff/y 1", RL_E_SYSTEM_KEY_WRITE, "");
    /* For all transactions: autocommit ones and those begun later; off again. */
    ok(&a, "option on ACCESS_SYSTEM_KEYS", "Option enabled for all transactions\n");
    ok(&a, "option on TIMEOUT 20000", "Option enabled for all transactions\n");
    ok(&a, "option", "\nCurrently enabled options:\n\nACCESS_SYSTEM_KEYS\nTIMEOUT: `20000'\n\n");
    ok(&a, "get \\xff/x", "`\\xff/x' is `1'\n");
    ASSERT_OK(shx_run(&a, "set \\xff/y 2"));
    ok(&a, "begin; get \\xff/y; rollback", NULL);
    ok(&a, "option off ACCESS_SYSTEM_KEYS", "Option disabled for all transactions\n");
    ok(&a, "option", "\nCurrently enabled options:\n\nTIMEOUT: `20000'\n\n");
    bad(&a, "get \\xff/x", RL_E_KEY_OUTSIDE_LEGAL_RANGE, "");
    /* Too large: a database error. */
    char big[16 + 4 * 10001];
    strcpy(big, "set ");
    for (int i = 0; i < 10001; i++) strcat(big, "k");
    strcat(big, " v");
    bad(&a, big, RL_E_KEY_TOO_LARGE, "");
    close_two(db, &a, &b);
}

TEST(shell_1_9_status_and_help) {
    rl_db *db = mem_db();
    shx s;
    shx_open_on(&s, db);
    ok(&s, "writemode on; set a b", NULL);
    ASSERT_OK(shx_run(&s, "status"));
    ASSERT_TRUE(!strncmp(out_of(&s), "Database `mem:'\n", 16));
    ASSERT_TRUE(strstr(out_of(&s), "  engine ") != NULL);
    ASSERT_TRUE(strstr(out_of(&s), "  keys                         1\n") != NULL);
    ASSERT_OK(shx_run(&s, "status json"));
    json_error_t je;
    json_t *j = json_loads(out_of(&s), 0, &je);
    if (!j) fail_msg("status json: %s: %s", je.text, out_of(&s));
    ASSERT_STR_EQ(json_string_value(json_object_get(j, "database")), "mem:");
    ASSERT_STR_EQ(json_string_value(json_object_get(j, "backend")), "embedded");
    ASSERT_EQ(json_integer_value(json_object_get(j, "keys")), 1);
    json_decref(j);
    /* Help: the list, every command, the topics, an unknown topic. */
    ASSERT_OK(shx_run(&s, "help"));
    static const char *const names[] = {"begin",    "clear",        "clearrange", "commit",   "exit",   "get",
                                        "getrange", "getrangekeys", "getversion", "help",     "option", "reset",
                                        "rollback", "set",          "status",     "writemode"};
    char *list = strdup(out_of(&s));
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char want[64], line[64];
        snprintf(want, sizeof want, "\n %s:\n", names[i]);
        if (!strstr(list, want)) fail_msg("help lacks %s:\n%s", names[i], list);
        snprintf(line, sizeof line, "help %s", names[i]);
        ASSERT_OK(shx_run(&s, line));
        ASSERT_TRUE(out_of(&s)[0] == '\n' && strlen(out_of(&s)) > 10);
    }
    free(list);
    ASSERT_OK(shx_run(&s, "help escaping"));
    ASSERT_TRUE(strstr(out_of(&s), "\\x20 is a space") != NULL);
    ASSERT_OK(shx_run(&s, "help options"));
    ASSERT_TRUE(strstr(out_of(&s), "ACCESS_SYSTEM_KEYS - ") != NULL);
    ASSERT_TRUE(strstr(out_of(&s), "TIMEOUT - ") != NULL);
    ok(&s, "help frob", "I don't know anything about `frob'\n");
    /* History: lines that mention writemode are kept out. */
    ASSERT_EQ(rl__shell_history_ok("get a"), 1);
    ASSERT_EQ(rl__shell_history_ok("writemode on; set a b"), 0);
    shx_close(&s);
    rl_db_close(db);
}

RL_TEST_MAIN(T(shell_1_1_split), T(shell_1_2_split_errors), T(shell_1_3_quote_round_trip),
             T(shell_1_4_commands_used_wrongly), T(shell_1_5_autocommit_and_transactions),
             T(shell_1_6_lines_of_commands), T(shell_1_7_getrange), T(shell_1_8_database_errors_and_options),
             T(shell_1_9_status_and_help))
