/* shell.c — `rl shell`'s line splitter, command table and executor (shell.h).
 *
 * State (one rl__shell):
 *
 *      autocommit ──begin──▶ in a transaction ──commit (ok or failed)──▶ autocommit
 *          ▲                    │   │  ▲                  rollback
 *          │                    │   └──┘ reset (a fresh transaction, options as global)
 *          └────────────────────┘  a database error of any command (rolled back)
 *
 *   transition                               function
 *   begin                                    cmd_begin
 *   commit                                   cmd_commit
 *   rollback, a database error               cmd_rollback, report (rollback_open)
 *   reset                                    cmd_reset
 *
 * Invariants:
 *   1. sh->txn is non-NULL exactly in a transaction; it carries the options of sh->active.
 *   2. An autocommit command runs in a transaction of its own, made with sh->global's options
 *      and freed before the command returns (with_txn); nothing it read is kept in it.
 *   3. Nothing is printed for a command until it has succeeded, except its "ERROR:" line: an
 *      autocommit command that is retried prints once.
 *   4. Only errors of the database (sh->db_error) roll an open transaction back; a command used
 *      wrongly (usage, a bad option) leaves it as it was, as fdbcli does.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "app/args.h"
#include "app/cluster_status.h"
#include "app/shell.h"
#include "app/tool.h"
#include "base/alloc.h"
#include "base/bytes.h"
#include "reclayer/error.h"

/* ---------------------------------------------------------------------------------------------
 * Splitting a line
 * ------------------------------------------------------------------------------------------ */

void rl__shell_line_init(rl__shell_line *l) {
    memset(l, 0, sizeof *l);
    rl__buf_init(&l->bytes);
}

void rl__shell_line_release(rl__shell_line *l) {
    rl__buf_release(&l->bytes);
    rl__free(l->words);
    rl__free(l->offs);
    rl__free(l->cmds);
    memset(l, 0, sizeof *l);
    rl__buf_init(&l->bytes);
}

/* Start a word at the current end of l->bytes. */
static int word_start(rl__shell_line *l) {
    if (RL_GROW(l->offs, l->cap_offs, l->n_words + 1, 16) || RL_GROW(l->words, l->cap_words, l->n_words + 1, 16))
        return RL_E_OUT_OF_MEMORY;
    l->offs[l->n_words] = l->bytes.len;
    l->words[l->n_words].data = NULL;
    l->words[l->n_words].len = 0;
    l->n_words++;
    return RL_OK;
}

/* End the word being built: its length, and the NUL after it. */
static void word_end(rl__shell_line *l) {
    l->words[l->n_words - 1].len = l->bytes.len - l->offs[l->n_words - 1];
    rl__buf_append_byte(&l->bytes, 0);
}

/* End a command: the words since *first (if any) become one. */
static int cmd_end(rl__shell_line *l, size_t *first) {
    if (l->n_words == *first) return RL_OK;
    if (RL_GROW(l->cmds, l->cap_cmds, l->n_cmds + 1, 4)) return RL_E_OUT_OF_MEMORY;
    l->cmds[l->n_cmds].words = NULL; /* set once the bytes stop moving */
    l->cmds[l->n_cmds].n_words = l->n_words - *first;
    l->n_cmds++;
    *first = l->n_words;
    return RL_OK;
}

/* A split error at offset at: msg gets the reason, l is left empty. */
static int split_fail(rl__shell_line *l, rl_buf *msg, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int split_fail(rl__shell_line *l, rl_buf *msg, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    rl__buf_vprintf(msg, fmt, ap);
    va_end(ap);
    l->n_cmds = l->n_words = 0;
    rl__buf_reset(&l->bytes);
    return RL_E_INVALID_ARGUMENT;
}

#define SHELL_ESCAPES "use \\\\, \\\", \\ , \\; or \\xNN"

int rl__shell_split(const char *s, size_t len, rl__shell_line *l, rl_buf *msg) {
    const uint8_t *p = (const uint8_t *)s;
    rl__buf_reset(&l->bytes);
    l->n_words = l->n_cmds = 0;
    if (len > RL__SHELL_LINE_MAX)
        return split_fail(l, msg, "the line has more than the %u bytes a line may have", RL__SHELL_LINE_MAX);
    size_t first = 0, quote_at = 0;
    int in_word = 0, quoted = 0, rc = RL_OK;
    for (size_t i = 0; i < len && rc == RL_OK;) {
        uint8_t c = p[i];
        if (!quoted && (c == ' ' || c == '\t' || c == '\r' || c == ';' || c == '\n')) {
            if (in_word) word_end(l), in_word = 0;
            if (c == ';' || c == '\n') rc = cmd_end(l, &first);
            i++;
            continue;
        }
        if (!in_word) {
            if ((rc = word_start(l))) break;
            in_word = 1;
        }
        if (c == '"') {
            quoted = !quoted;
            quote_at = i++;
        } else if (c != '\\') {
            rl__buf_append_byte(&l->bytes, c);
            i++;
        } else if (i + 1 == len) {
            return split_fail(l, msg, "a lone backslash at offset %zu, the end of the line (" SHELL_ESCAPES ")", i);
        } else if (p[i + 1] == '\\' || p[i + 1] == '"' || p[i + 1] == ' ' || p[i + 1] == ';') {
            rl__buf_append_byte(&l->bytes, p[i + 1]);
            i += 2;
        } else if (p[i + 1] == 'x') {
            int hi = i + 2 < len ? rl__hex_digit(p[i + 2]) : -1, lo = i + 3 < len ? rl__hex_digit(p[i + 3]) : -1;
            if (hi < 0 || lo < 0) {
                rl_buf e;
                rl__buf_init(&e);
                rl__bytes_printable(&e, p + i + 1, i + 4 <= len ? 3 : len - i - 1);
                rc = split_fail(l, msg, "bad escape '\\%s' at offset %zu: \\x needs two hex digits",
                                (const char *)e.data, i);
                rl__buf_release(&e);
                return rc;
            }
            rl__buf_append_byte(&l->bytes, (uint8_t)(hi << 4 | lo));
            i += 4;
        } else {
            rl_buf e;
            rl__buf_init(&e);
            rl__bytes_printable(&e, p + i + 1, 1);
            rc = split_fail(l, msg, "bad escape '\\%s' at offset %zu (" SHELL_ESCAPES ")", (const char *)e.data, i);
            rl__buf_release(&e);
            return rc;
        }
    }
    if (rc) return split_fail(l, msg, "out of memory splitting the line");
    if (quoted) return split_fail(l, msg, "unterminated quote: the quote at offset %zu is not closed", quote_at);
    if (in_word) word_end(l);
    if (cmd_end(l, &first) || rl__buf_error(&l->bytes)) return split_fail(l, msg, "out of memory splitting the line");
    /* The bytes are final: point the words and the commands at them. */
    for (size_t k = 0; k < l->n_words; k++) l->words[k].data = l->bytes.data + l->offs[k];
    for (size_t j = 0, w = 0; j < l->n_cmds; w += l->cmds[j++].n_words) l->cmds[j].words = l->words + w;
    return RL_OK;
}

void rl__shell_quote(rl_buf *out, const void *w, size_t len) {
    const uint8_t *p = w;
    if (len == 0) rl__buf_append(out, "\"\"", 2);
    for (size_t i = 0; i < len; i++) {
        if (p[i] == '\\' || p[i] == '"') {
            rl__buf_append_byte(out, '\\');
            rl__buf_append_byte(out, p[i]);
        } else if (p[i] > ' ' && p[i] < 127 && p[i] != ';') {
            rl__buf_append_byte(out, p[i]);
        } else {
            rl__buf_printf(out, "\\x%02x", p[i]);
        }
    }
}

int rl__shell_history_ok(const char *line) { return strstr(line, "writemode") == NULL; }

/* ---------------------------------------------------------------------------------------------
 * Options (`option`; include/reclayer/kv.h's transaction options under FoundationDB's names)
 * ------------------------------------------------------------------------------------------ */

typedef struct {
    const char *name; /* FoundationDB's name (fdbcli's spelling: upper case) */
    rl_txn_option opt;
    int has_arg; /* 1: takes an integer */
    const char *help;
} opt_def;

static const opt_def options[] = {
    {"ACCESS_SYSTEM_KEYS", RL_TXN_OPT_ACCESS_SYSTEM_KEYS, 0,
     "lets the transaction read and write the system keyspace (keys from \\xff)."},
    {"MAX_RETRY_DELAY", RL_TXN_OPT_MAX_RETRY_DELAY_MS, 1,
     "the longest backoff, in milliseconds, between the retries of an autocommitted command."},
    {"NEXT_WRITE_NO_WRITE_CONFLICT_RANGE", RL_TXN_OPT_NEXT_WRITE_NO_WRITE_CONFLICT_RANGE, 0,
     "the transaction's next write adds no write conflict range (other transactions do not conflict with "
     "it)."},
    {"READ_YOUR_WRITES_DISABLE", RL_TXN_OPT_READ_YOUR_WRITES_DISABLE, 0,
     "the transaction's reads do not see its own writes; only before its first read or write."},
    {"RETRY_LIMIT", RL_TXN_OPT_RETRY_LIMIT, 1,
     "how many times an autocommitted command is retried before its last error is reported (-1: no "
     "limit)."},
    {"SIZE_LIMIT", RL_TXN_OPT_SIZE_LIMIT, 1,
     "the most bytes of writes and conflict ranges a transaction may hold (32 to 10,000,000)."},
    {"TIMEOUT", RL_TXN_OPT_TIMEOUT_MS, 1,
     "milliseconds after which the transaction fails with transaction_timed_out (0: never; without it, rl "
     "shell --timeout)."},
};
#define N_OPTIONS (sizeof options / sizeof options[0])

typedef struct {
    int on;
    int64_t arg;
} opt_val;

/* ---------------------------------------------------------------------------------------------
 * The executor
 * ------------------------------------------------------------------------------------------ */

struct rl__shell {
    rl_db *db;       /* borrowed */
    const char *url; /* borrowed */
    FILE *out, *err; /* borrowed */
    int writemode;
    rl_txn *txn;               /* the transaction of `begin` (invariant 1), NULL in autocommit */
    opt_val global[N_OPTIONS]; /* options of every new transaction */
    opt_val active[N_OPTIONS]; /* options of txn */
    int db_error;              /* the failing command's error came from the database (invariant 4) */
    int exit;                  /* `exit` or `quit` ran */
    rl_buf msg;                /* the failing command's detail */
    rl_buf tmp;                /* scratch for printing */
    rl__shell_line line;
};

typedef int (*cmd_fn)(rl__shell *sh, const rl_slice *w, size_t n);

typedef struct {
    const char *name;
    int min_args, max_args; /* arguments after the name */
    int writes;             /* refused until `writemode on` */
    cmd_fn fn;
    const char *usage, *brief, *help; /* fdbcli's help texts */
} cmd_def;

static const cmd_def *find_cmd(const rl_slice *name);

/* Set the failing command's detail; returns rc. */
static int fail(rl__shell *sh, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(rl__shell *sh, int rc, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    rl__buf_reset(&sh->msg);
    rl__buf_vprintf(&sh->msg, fmt, ap);
    va_end(ap);
    return rc;
}

/* A database error: the detail is the code's message, and an open transaction is rolled back. */
static int db_fail(rl__shell *sh, int rc) {
    sh->db_error = 1;
    rl__buf_reset(&sh->msg);
    return rc;
}

/* printable(w) as a C string in sh->tmp, valid until the next call. */
static const char *printable(rl__shell *sh, const void *p, size_t n) {
    rl__buf_reset(&sh->tmp);
    rl__bytes_printable(&sh->tmp, p, n);
    return (const char *)sh->tmp.data;
}

static int apply_options(rl_txn *t, const opt_val *v) {
    for (size_t i = 0; i < N_OPTIONS; i++) {
        if (!v[i].on) continue;
        int rc = rl_txn_set_option(t, options[i].opt, v[i].arg);
        if (rc) return rc;
    }
    return RL_OK;
}

int rl__shell_new(rl_db *db, const char *url, FILE *out, FILE *err, rl__shell **out_sh) {
    *out_sh = NULL;
    rl__shell *sh = rl__calloc(1, sizeof *sh);
    if (!sh) return RL_E_OUT_OF_MEMORY;
    sh->db = db;
    sh->url = url;
    sh->out = out;
    sh->err = err;
    rl__buf_init(&sh->msg);
    rl__buf_init(&sh->tmp);
    rl__shell_line_init(&sh->line);
    *out_sh = sh;
    return RL_OK;
}

void rl__shell_free(rl__shell *sh) {
    if (!sh) return;
    rl_txn_free(sh->txn);
    rl__buf_release(&sh->msg);
    rl__buf_release(&sh->tmp);
    rl__shell_line_release(&sh->line);
    rl__free(sh);
}

int rl__shell_in_transaction(const rl__shell *sh) { return sh->txn != NULL; }

/* ---- Running an operation in a transaction ---------------------------------------------------- */

/* An operation: issue its requests on t, wait for them, keep what it needs in ctx (not in t: an
 * autocommit transaction is freed before anything is printed). RL_OK or the database's error. */
typedef int (*txn_op)(rl__shell *sh, rl_txn *t, void *ctx);

/* Run op in the open transaction; or, in autocommit, in a transaction of its own (invariant 2),
 * committed when do_commit (the version in *out_version), retried on retryable errors as
 * rl_db_run retries (rl_txn_on_error: backoff, the retry limit, transaction_timed_out). */
static int with_txn(rl__shell *sh, txn_op op, void *ctx, int do_commit, int64_t *out_version) {
    if (sh->txn) {
        int rc = op(sh, sh->txn, ctx);
        return rc ? db_fail(sh, rc) : RL_OK;
    }
    rl_txn *t = NULL;
    int rc = rl_txn_begin(sh->db, &t);
    if (rc) return db_fail(sh, rc);
    for (;;) {
        rc = apply_options(t, sh->global);
        if (!rc) rc = op(sh, t, ctx);
        if (!rc && do_commit) {
            rl_future *f = rl_txn_commit(t);
            rc = rl_future_wait(f);
            rl_future_free(f);
            if (!rc) rc = rl_txn_get_committed_version(t, out_version);
        }
        if (!rc || (rc = rl__tool_retry(t, rc)) != RL_OK) break;
    }
    rl_txn_free(t);
    return rc ? db_fail(sh, rc) : RL_OK;
}

/* ---- Transactions ----------------------------------------------------------------------------- */

/* Make sh->txn a new transaction with the global options (freeing the one there was, if any)
 * and the active options the global ones. On error sh->txn is as it was. */
static int open_txn(rl__shell *sh) {
    rl_txn *t = NULL;
    int rc = rl_txn_begin(sh->db, &t);
    if (!rc) rc = apply_options(t, sh->global);
    if (rc) {
        rl_txn_free(t);
        return db_fail(sh, rc);
    }
    rl_txn_free(sh->txn);
    sh->txn = t;
    memcpy(sh->active, sh->global, sizeof sh->active);
    return RL_OK;
}

static int cmd_begin(rl__shell *sh, const rl_slice *w, size_t n) {
    (void)w, (void)n;
    if (sh->txn) return fail(sh, RL_E_USAGE, "Already in transaction");
    int rc = open_txn(sh);
    if (!rc) fprintf(sh->out, "Transaction started\n");
    return rc;
}

static void print_commit(rl__shell *sh, int64_t v) {
    if (v >= 0) fprintf(sh->out, "Committed (%lld)\n", (long long)v);
    else fprintf(sh->out, "Nothing to commit\n");
}

static int cmd_commit(rl__shell *sh, const rl_slice *w, size_t n) {
    (void)w, (void)n;
    if (!sh->txn) return fail(sh, RL_E_USAGE, "No active transaction");
    rl_future *f = rl_txn_commit(sh->txn);
    int rc = rl_future_wait(f);
    rl_future_free(f);
    int64_t v = -1;
    if (!rc) rc = rl_txn_get_committed_version(sh->txn, &v);
    if (rc) return db_fail(sh, rc); /* report rolls the transaction back */
    rl_txn_free(sh->txn);
    sh->txn = NULL;
    print_commit(sh, v);
    return RL_OK;
}

static int cmd_rollback(rl__shell *sh, const rl_slice *w, size_t n) {
    (void)w, (void)n;
    if (!sh->txn) return fail(sh, RL_E_USAGE, "No active transaction");
    rl_txn_free(sh->txn);
    sh->txn = NULL;
    fprintf(sh->out, "Transaction rolled back\n");
    return RL_OK;
}

static int cmd_reset(rl__shell *sh, const rl_slice *w, size_t n) {
    (void)w, (void)n;
    if (!sh->txn) return fail(sh, RL_E_USAGE, "No active transaction");
    /* A fresh transaction with the global options, as fdbcli resets its options too (rl_txn_reset
     * would keep the options set on this one). */
    int rc = open_txn(sh);
    if (!rc) fprintf(sh->out, "Transaction reset\n");
    return rc;
}

/* ---- Reads ------------------------------------------------------------------------------------ */

typedef struct {
    rl_slice key;
    int present;
    rl_buf value;
} get_ctx;

static int op_get(rl__shell *sh, rl_txn *t, void *ud) {
    (void)sh;
    get_ctx *c = ud;
    rl_future *f = rl_txn_get(t, c->key.data, c->key.len, 0);
    const uint8_t *v = NULL;
    int len = 0;
    int rc = rl_future_wait(f);
    if (!rc) rc = rl_future_get_value(f, &c->present, &v, &len);
    rl__buf_reset(&c->value);
    if (!rc && c->present) rl__buf_append(&c->value, v, (size_t)len);
    if (!rc) rc = rl__buf_error(&c->value);
    rl_future_free(f);
    return rc;
}

static int cmd_get(rl__shell *sh, const rl_slice *w, size_t n) {
    (void)n;
    get_ctx c = {.key = w[1]};
    rl__buf_init(&c.value);
    int rc = with_txn(sh, op_get, &c, 0, NULL);
    if (!rc) {
        fprintf(sh->out, "`%s'", printable(sh, w[1].data, w[1].len));
        if (c.present) fprintf(sh->out, " is `%s'\n", printable(sh, c.value.data, c.value.len));
        else fprintf(sh->out, ": not found\n");
    }
    rl__buf_release(&c.value);
    return rc;
}

typedef struct {
    rl_slice begin, end;
    int limit;
    rl_buf rows; /* per row: u32 key length, key, u32 value length, value (host order) */
    int n_rows;
} range_ctx;

static void put_u32(rl_buf *b, uint32_t v) { rl__buf_append(b, &v, sizeof v); }

static uint32_t get_u32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static int op_range(rl__shell *sh, rl_txn *t, void *ud) {
    (void)sh;
    range_ctx *c = ud;
    rl__buf_reset(&c->rows);
    c->n_rows = 0;
    rl_buf from; /* where the next page starts: after the last key read */
    rl__buf_init(&from);
    int rc = RL_OK, more = 1, after = 0;
    while (rc == RL_OK && more && c->n_rows < c->limit) {
        rl_key_selector b =
            after ? RL_FIRST_GREATER_THAN(from.data, from.len) : RL_FIRST_GREATER_OR_EQUAL(c->begin.data, c->begin.len);
        rl_future *f = rl_txn_get_range(t, b, RL_FIRST_GREATER_OR_EQUAL(c->end.data, c->end.len), c->limit - c->n_rows,
                                        0, RL_STREAMING_WANT_ALL, 0, 0);
        const rl_keyvalue *kv = NULL;
        int n = 0;
        rc = rl_future_wait(f);
        if (!rc) rc = rl_future_get_keyvalue_array(f, &kv, &n, &more);
        for (int i = 0; !rc && i < n; i++) {
            put_u32(&c->rows, kv[i].key_len);
            rl__buf_append(&c->rows, kv[i].key, kv[i].key_len);
            put_u32(&c->rows, kv[i].value_len);
            rl__buf_append(&c->rows, kv[i].value, kv[i].value_len);
            c->n_rows++;
        }
        if (!rc && n > 0) {
            rl__buf_reset(&from);
            rl__buf_append(&from, kv[n - 1].key, kv[n - 1].key_len);
            after = 1;
        } else if (!rc) {
            more = 0;
        }
        rl_future_free(f);
        if (!rc) rc = rl__buf_error(&c->rows) ? rl__buf_error(&c->rows) : rl__buf_error(&from);
    }
    rl__buf_release(&from);
    return rc;
}

/* FoundationDB's strinc: the first key after every key that begins with k (k without its trailing
 * \xff bytes, its last byte plus one), into out. 0, or -1 when k is empty or all \xff. */
static int strinc(const rl_slice *k, rl_buf *out) {
    size_t n = k->len;
    while (n > 0 && k->data[n - 1] == 0xff) n--;
    if (n == 0) return -1;
    rl__buf_append(out, k->data, n);
    out->data[n - 1]++;
    return 0;
}

static int cmd_getrange(rl__shell *sh, const rl_slice *w, size_t n) {
    int keys_only = w[0].len == strlen("getrangekeys");
    range_ctx c = {.begin = w[1], .limit = RL__SHELL_RANGE_DEFAULT_LIMIT};
    rl_buf end;
    rl__buf_init(&end);
    rl__buf_init(&c.rows);
    int rc = RL_OK;
    if (n == 4) {
        int64_t lim = 0;
        if (memchr(w[3].data, 0, w[3].len) ||
            rl__args_int64((const char *)w[3].data, 1, RL__SHELL_RANGE_MAX_LIMIT, &lim, NULL) != RL_OK) {
            rc = fail(sh, RL_E_USAGE, "bad limit `%s': LIMIT is an integer from 1 to %d",
                      printable(sh, w[3].data, w[3].len), RL__SHELL_RANGE_MAX_LIMIT);
            goto done;
        }
        c.limit = (int)lim;
    }
    /* END defaults as fdbcli's: every key beginning with BEGIN ("" and "\xff": the user and the
     * system keyspace). */
    static const uint8_t ff[] = {0xff, 0xff};
    if (n >= 3) {
        c.end = w[2];
    } else if (w[1].len == 0) {
        c.end = (rl_slice){ff, 1};
    } else if (w[1].len == 1 && w[1].data[0] == 0xff) {
        c.end = (rl_slice){ff, 2};
    } else if (strinc(&w[1], &end) != 0 || (w[1].len >= 2 && w[1].data[0] == 0xff && w[1].data[1] == 0xff)) {
        rc = db_fail(sh, RL_E_KEY_OUTSIDE_LEGAL_RANGE);
        goto done;
    } else {
        c.end = (rl_slice){end.data, end.len};
    }
    rc = with_txn(sh, op_range, &c, 0, NULL);
    if (rc) goto done;
    fprintf(sh->out, "\nRange limited to %d keys\n", c.limit);
    const uint8_t *p = c.rows.data;
    for (int i = 0; i < c.n_rows; i++) {
        uint32_t kl = get_u32(p), vl = get_u32(p + 4 + kl);
        fprintf(sh->out, "`%s'", printable(sh, p + 4, kl));
        if (!keys_only) fprintf(sh->out, " is `%s'", printable(sh, p + 8 + kl, vl));
        fprintf(sh->out, "\n");
        p += 8 + kl + vl;
    }
    fprintf(sh->out, "\n");
done:
    rl__buf_release(&end);
    rl__buf_release(&c.rows);
    return rc;
}

static int op_version(rl__shell *sh, rl_txn *t, void *ud) {
    (void)sh;
    rl_future *f = rl_txn_get_read_version(t);
    int rc = rl_future_wait(f);
    if (!rc) rc = rl_future_get_int64(f, ud);
    rl_future_free(f);
    return rc;
}

static int cmd_getversion(rl__shell *sh, const rl_slice *w, size_t n) {
    (void)w, (void)n;
    int64_t v = 0;
    int rc = with_txn(sh, op_version, &v, 0, NULL);
    if (!rc) fprintf(sh->out, "%lld\n", (long long)v);
    return rc;
}

/* ---- Writes ----------------------------------------------------------------------------------- */

typedef struct {
    int kind; /* 0 set, 1 clear, 2 clearrange */
    const rl_slice *w;
} write_ctx;

static int op_write(rl__shell *sh, rl_txn *t, void *ud) {
    (void)sh;
    write_ctx *c = ud;
    const rl_slice *w = c->w;
    if (c->kind == 0) return rl_txn_set(t, w[1].data, w[1].len, w[2].data, w[2].len);
    if (c->kind == 1) return rl_txn_clear(t, w[1].data, w[1].len);
    return rl_txn_clear_range(t, w[1].data, w[1].len, w[2].data, w[2].len);
}

static int cmd_write(rl__shell *sh, const rl_slice *w, size_t n) {
    (void)n;
    write_ctx c = {.kind = w[0].len == 3 ? 0 : w[0].len == 5 ? 1 : 2, .w = w};
    int64_t v = -1;
    int autocommit = sh->txn == NULL;
    int rc = with_txn(sh, op_write, &c, autocommit, &v);
    if (!rc && autocommit) print_commit(sh, v);
    return rc;
}

static int cmd_writemode(rl__shell *sh, const rl_slice *w, size_t n) {
    (void)n;
    if (w[1].len == 2 && !memcmp(w[1].data, "on", 2)) sh->writemode = 1;
    else if (w[1].len == 3 && !memcmp(w[1].data, "off", 3)) sh->writemode = 0;
    else
        return fail(sh, RL_E_USAGE, "writemode is `on' or `off', not `%s'. Usage: writemode <on|off>",
                    printable(sh, w[1].data, w[1].len));
    return RL_OK;
}

/* ---- Options ---------------------------------------------------------------------------------- */

static void print_options(rl__shell *sh, const opt_val *v) {
    int any = 0;
    for (size_t i = 0; i < N_OPTIONS; i++) any |= v[i].on;
    if (!any) {
        fprintf(sh->out, "There are no options enabled\n");
        return;
    }
    fprintf(sh->out, "\nCurrently enabled options:\n\n");
    for (size_t i = 0; i < N_OPTIONS; i++) {
        if (!v[i].on) continue;
        if (options[i].has_arg) fprintf(sh->out, "%s: `%lld'\n", options[i].name, (long long)v[i].arg);
        else fprintf(sh->out, "%s\n", options[i].name);
    }
    fprintf(sh->out, "\n");
}

static int cmd_option(rl__shell *sh, const rl_slice *w, size_t n) {
    opt_val *set = sh->txn ? sh->active : sh->global;
    if (n == 1) {
        print_options(sh, set);
        return RL_OK;
    }
    if (n == 2) return fail(sh, RL_E_USAGE, "option needs a name after on|off. Usage: option <STATE> <OPTION> <ARG>");
    int on;
    if (w[1].len == 2 && !memcmp(w[1].data, "on", 2)) on = 1;
    else if (w[1].len == 3 && !memcmp(w[1].data, "off", 3)) on = 0;
    else
        return fail(sh, RL_E_USAGE, "Invalid option state `%s': option must be turned `on' or `off'",
                    printable(sh, w[1].data, w[1].len));
    size_t i = 0;
    while (i < N_OPTIONS &&
           !(strlen(options[i].name) == w[2].len && !strncasecmp(options[i].name, (const char *)w[2].data, w[2].len)))
        i++;
    if (i == N_OPTIONS)
        return fail(sh, RL_E_INVALID_OPTION, "invalid option `%s'. Try `help options' for a list of available options.",
                    printable(sh, w[2].data, w[2].len));
    const opt_def *d = &options[i];
    if (!on) {
        if (sh->txn)
            return fail(sh, RL_E_USAGE, "Cannot turn option off when using a transaction created with `begin'");
        if (n > 3) return fail(sh, RL_E_USAGE, "Cannot specify option argument when turning option off");
        sh->global[i].on = 0;
        fprintf(sh->out, "Option disabled for all transactions\n");
        return RL_OK;
    }
    if ((n == 4) != d->has_arg)
        return fail(sh, RL_E_INVALID_OPTION_VALUE, "option %s %s a parameter", d->name,
                    d->has_arg ? "expected" : "did not expect");
    int64_t arg = 0;
    if (d->has_arg) {
        if (memchr(w[3].data, 0, w[3].len) ||
            rl__args_int64((const char *)w[3].data, INT64_MIN, INT64_MAX, &arg, NULL) != RL_OK)
            return fail(sh, RL_E_INVALID_OPTION_VALUE, "option %s: `%s' is not an integer", d->name,
                        printable(sh, w[3].data, w[3].len));
    }
    /* The library checks the value: on the open transaction, or on a scratch one for the global
     * list, so a bad value is refused now rather than by every later command. */
    rl_txn *t = sh->txn;
    int rc = t ? RL_OK : rl_txn_begin(sh->db, &t);
    if (!rc) rc = rl_txn_set_option(t, d->opt, arg);
    if (!sh->txn) rl_txn_free(t);
    if (rc) {
        if (d->has_arg) return fail(sh, rc, "option %s %lld: %s", d->name, (long long)arg, rl_error_message(rc));
        return fail(sh, rc, "option %s: %s", d->name, rl_error_message(rc));
    }
    set[i].on = 1;
    set[i].arg = arg;
    fprintf(sh->out, "Option enabled for %s\n", sh->txn ? "current transaction" : "all transactions");
    return RL_OK;
}

/* ---- Status ----------------------------------------------------------------------------------- */

/* Print the members of o as "  PATH  VALUE" lines, nested objects with dotted paths, arrays as
 * compact JSON when short and as their element count otherwise. */
static void print_flat(FILE *f, json_t *o, const char *prefix) {
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v) {
        char path[256];
        snprintf(path, sizeof path, "%s%s%s", prefix, *prefix ? "." : "", k);
        if (json_is_object(v)) {
            print_flat(f, v, path);
            continue;
        }
        char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
        if (json_is_array(v) && s && strlen(s) > 72) fprintf(f, "  %-28s [%zu elements]\n", path, json_array_size(v));
        else if (json_is_string(v)) fprintf(f, "  %-28s %s\n", path, json_string_value(v));
        else fprintf(f, "  %-28s %s\n", path, s ? s : "?");
        free(s);
    }
}

static int cmd_status(rl__shell *sh, const rl_slice *w, size_t n) {
    int as_json = 0;
    if (n == 2) {
        if (w[1].len != 4 || memcmp(w[1].data, "json", 4) != 0)
            return fail(sh, RL_E_USAGE, "status takes `json' or nothing, not `%s'. Usage: status [json]",
                        printable(sh, w[1].data, w[1].len));
        as_json = 1;
    }
    char *text = NULL;
    int rc = rl_db_status_json(sh->db, &text);
    if (rc) return fail(sh, rc, "reading the database's status: %s", rl_error_message(rc));
    json_error_t jerr;
    json_t *st = json_loads(text, 0, &jerr), *view = NULL, *top = json_object();
    rl_free(text);
    if (!st || !top) {
        json_decref(st);
        json_decref(top);
        return fail(sh, RL_E_INTERNAL_ERROR, "the database's status is not JSON: %s", st ? "out of memory" : jerr.text);
    }
    int is_cluster = !strncmp(sh->url, "cluster:", 8);
    if (is_cluster) {
        rc = rl__cluster_status_from_client(st, &view);
        if (rc == RL_E_SERVER_UNAVAILABLE) rc = RL_OK; /* shown as DOWN: the status itself worked */
        if (rc) {
            json_decref(st);
            json_decref(top);
            return fail(sh, rc, "summarising the cluster's status: %s", rl_error_message(rc));
        }
    }
    json_object_set_new(top, "database", json_string(sh->url));
    json_object_update(top, view ? view : st);
    if (as_json) {
        char *s = json_dumps(top, JSON_INDENT(2));
        fprintf(sh->out, "%s\n", s ? s : "null");
        free(s);
    } else if (view) {
        rl__cluster_status_print(sh->out, view);
        json_t *rv = json_object_get(view, "read_version"), *keys = json_object_get(view, "keys");
        fprintf(sh->out, "read version ");
        if (json_is_integer(rv)) fprintf(sh->out, "%lld", (long long)json_integer_value(rv));
        else fprintf(sh->out, "unknown");
        if (json_is_integer(keys))
            fprintf(sh->out, "; %lld keys held by the storage servers (a key of a team of R counts R times)",
                    (long long)json_integer_value(keys));
        fprintf(sh->out, "; the cluster is %s\n",
                json_is_true(json_object_get(view, "ok")) ? "healthy" : "NOT healthy: a process is down");
    } else {
        fprintf(sh->out, "Database `%s'\n", sh->url);
        print_flat(sh->out, st, "");
    }
    json_decref(view);
    json_decref(st);
    json_decref(top);
    return RL_OK;
}

/* ---- Help and exit ---------------------------------------------------------------------------- */

static void print_command_list(FILE *f);

static void print_wrapped(FILE *f, const char *text, int col) {
    /* Words to lines of at most col characters; paragraphs ("\n\n") kept. */
    const char *p = text;
    while (*p) {
        int used = 0;
        while (*p && *p != '\n') {
            const char *e = p;
            while (*e && *e != ' ' && *e != '\n') e++;
            int wl = (int)(e - p);
            if (used && used + 1 + wl > col) {
                fputc('\n', f);
                used = 0;
            }
            if (used) fputc(' ', f), used++;
            fwrite(p, 1, (size_t)wl, f);
            used += wl;
            p = e;
            while (*p == ' ') p++;
        }
        fputc('\n', f);
        if (*p == '\n') p++;
    }
}

static int cmd_help(rl__shell *sh, const rl_slice *w, size_t n) {
    FILE *f = sh->out;
    if (n == 1 || (w[1].len == 4 && !memcmp(w[1].data, "help", 4))) {
        fprintf(f, "\nList of commands:\n\n");
        print_command_list(f);
        fprintf(f, "\n`help COMMAND' describes one command, `help escaping' how to write keys and values,\n"
                   "`help options' the transaction options.\n\n");
        return RL_OK;
    }
    if (w[1].len == 8 && !memcmp(w[1].data, "escaping", 8)) {
        fprintf(f, "\n");
        print_wrapped(f,
                      "A line is split into words at spaces, and into commands at semicolons and line ends. A "
                      "word with spaces or semicolons goes in double quotes (\"hello world\"); a backslash also "
                      "keeps the next space, semicolon, quote or backslash as it is (hello\\ world, \\\", \\\\).\n\n"
                      "Any byte is \\x and two hex digits: \\x20 is a space, \\x00\\xff two bytes. Any other "
                      "backslash is an error, and so is a quote left open; such a line does not run at all.\n\n"
                      "Keys and values are printed with printable ASCII as it is, a backslash as \\\\ and every "
                      "other byte as \\xNN, between ` and '.",
                      80);
        fprintf(f, "\n");
        return RL_OK;
    }
    if (w[1].len == 7 && !memcmp(w[1].data, "options", 7)) {
        fprintf(f, "\nThe transaction options (`option on NAME [ARG]', `option off NAME'):\n\n");
        for (size_t i = 0; i < N_OPTIONS; i++) {
            char line[512];
            snprintf(line, sizeof line, "%s - %s%s", options[i].name, options[i].help,
                     options[i].has_arg ? " (takes an integer)" : "");
            print_wrapped(f, line, 80);
        }
        fprintf(f, "\n");
        return RL_OK;
    }
    const cmd_def *d = find_cmd(&w[1]);
    if (!d || !d->brief) {
        fprintf(f, "I don't know anything about `%s'\n", printable(sh, w[1].data, w[1].len));
        return RL_OK;
    }
    fprintf(f, "\n%s\n\n%c%s.\n", d->usage, d->brief[0] - 'a' + 'A', d->brief + 1);
    if (d->help && *d->help) {
        fprintf(f, "\n");
        print_wrapped(f, d->help, 80);
    }
    fprintf(f, "\n");
    return RL_OK;
}

static int cmd_exit(rl__shell *sh, const rl_slice *w, size_t n) {
    (void)w, (void)n;
    sh->exit = 1;
    return RL_OK;
}

/* ---- The table -------------------------------------------------------------------------------- */

#define ESCAPINGK "\n\nHow to write a key: `help escaping'."
#define ESCAPINGKV "\n\nHow to write keys and values: `help escaping'."

/* Sorted by name (help lists them in this order). Names, usage lines and one-line summaries are
 * fdbcli's (the interface); the longer texts are this shell's own. */
static const cmd_def commands[] = {
    {"begin", 0, 0, 0, cmd_begin, "begin", "begin a new transaction",
     "Without begin, every command runs in a transaction of its own that is committed when the command "
     "ends (autocommit). After begin, the commands that follow share one transaction: its reads see its own "
     "writes, and nothing is visible to others until commit.\n\nEnd it with commit, or discard it with "
     "rollback."},
    {"clear", 1, 1, 1, cmd_write, "clear <KEY>", "clear a key from the database",
     "Clearing a key that is not there is not an error; a conflict with another transaction is." ESCAPINGK},
    {"clearrange", 2, 2, 1, cmd_write, "clearrange <BEGINKEY> <ENDKEY>", "clear a range of keys from the database",
     "Clears every key from BEGINKEY up to, but not including, ENDKEY. An empty range is not an error; a "
     "conflict with another transaction is." ESCAPINGK},
    {"commit", 0, 0, 0, cmd_commit, "commit", "commit the current transaction",
     "Makes the writes of the transaction begun with begin durable and visible, and prints the version they "
     "were committed at. When the commit fails the error is printed and the transaction is rolled back: run "
     "it again."},
    {"exit", 0, 0, 0, cmd_exit, "exit", "exit the CLI", ""},
    {"get", 1, 1, 0, cmd_get, "get <KEY>", "fetch the value for a given key",
     "Prints KEY and its value, or that KEY is not found." ESCAPINGK},
    {"getrange", 1, 3, 0, cmd_getrange, "getrange <BEGINKEY> [ENDKEY] [LIMIT]",
     "fetch key/value pairs in a range of keys",
     "Prints at most LIMIT (default 25) keys from BEGINKEY up to, but not including, ENDKEY, with their "
     "values. Without ENDKEY, every key that begins with BEGINKEY." ESCAPINGK},
    {"getrangekeys", 1, 3, 0, cmd_getrange, "getrangekeys <BEGINKEY> [ENDKEY] [LIMIT]", "fetch keys in a range of keys",
     "As getrange, without the values." ESCAPINGK},
    {"getversion", 0, 0, 0, cmd_getversion, "getversion", "fetch the current read version",
     "Prints the read version of the transaction begun with begin, or else of a new one."},
    {"help", 0, 1, 0, cmd_help, "help [<topic>]", "get help about a topic or command", ""},
    {"option", 0, 3, 0, cmd_option, "option <STATE> <OPTION> <ARG>", "enables or disables an option",
     "option on OPTION [ARG] sets a transaction option (ARG: its integer, for the options that take one); "
     "option off OPTION unsets it. Outside a transaction begun with begin, the option holds for every "
     "transaction from now on, autocommitted or begun; inside one, for that transaction only, and options "
     "cannot be turned off there.\n\nWithout arguments, option lists the options set.\n\nThe options: "
     "`help options'."},
    {"quit", 0, 0, 0, cmd_exit, "quit", NULL, NULL},
    {"reset", 0, 0, 0, cmd_reset, "reset", "reset the current transaction",
     "Discards the writes and reads of the transaction begun with begin and starts it again, with the "
     "options of every transaction; it stays open."},
    {"rollback", 0, 0, 0, cmd_rollback, "rollback", "rolls back the current transaction",
     "Discards the transaction begun with begin and everything it wrote; the commands after it autocommit "
     "again."},
    {"set", 2, 2, 1, cmd_write, "set <KEY> <VALUE>", "set a value for a given key",
     "Creates KEY or replaces its value." ESCAPINGKV},
    {"status", 0, 1, 0, cmd_status, "status [json]", "get the status of the database",
     "Over a cluster (cluster:FILE), reads everything through the cluster file: the coordinator's and every "
     "storage server's STATUS, one line per process (role, id, host, address, delay, pid, health, versions and "
     "shards). Over an embedded database (mem:, file:DIR), what the database is: engine, versions, sizes, log "
     "and checkpoint state.\n\nstatus json prints the same as JSON."},
    {"writemode", 1, 1, 0, cmd_writemode, "writemode <on|off>", "enables or disables sets and clears",
     "set, clear and clearrange are refused until writemode on, so that a line typed by mistake does not "
     "write."},
};
static const size_t n_commands = sizeof commands / sizeof commands[0];

static void print_command_list(FILE *f) {
    for (size_t i = 0; i < n_commands; i++)
        if (commands[i].brief) fprintf(f, " %s:\n      %s\n", commands[i].name, commands[i].brief);
}

static const cmd_def *find_cmd(const rl_slice *name) {
    for (size_t i = 0; i < n_commands; i++)
        if (strlen(commands[i].name) == name->len && !memcmp(commands[i].name, name->data, name->len))
            return &commands[i];
    return NULL;
}

/* ---- Running a line --------------------------------------------------------------------------- */

/* Print the failing command's error; roll back the open transaction on a database error. */
static void report(rl__shell *sh, int rc) {
    fflush(sh->out);
    fprintf(sh->err, "ERROR: %s (%d): %s\n", rl_error_name(rc), rc,
            sh->msg.len ? (const char *)sh->msg.data : rl_error_message(rc));
    if (sh->db_error && sh->txn) {
        rl_txn_free(sh->txn);
        sh->txn = NULL;
        fprintf(sh->err, "Rolling back current transaction\n");
    }
}

static int run_cmd(rl__shell *sh, const rl__shell_cmd *c) {
    const rl_slice *w = c->words;
    const cmd_def *d = find_cmd(&w[0]);
    if (!d) return fail(sh, RL_E_USAGE, "Unknown command `%s'. Try `help'?", printable(sh, w[0].data, w[0].len));
    /* fdbcli checks writemode first, so a refused write says why whatever its arguments. */
    if (d->writes && !sh->writemode)
        return fail(sh, RL_E_USAGE,
                    "writemode must be enabled to set or clear keys in the database (type `writemode on')");
    int n_args = (int)c->n_words - 1;
    if (n_args < d->min_args || n_args > d->max_args) {
        if (d->min_args == d->max_args)
            return fail(sh, RL_E_USAGE, "%s takes %d argument%s, not %d. Usage: %s", d->name, d->min_args,
                        d->min_args == 1 ? "" : "s", n_args, d->usage);
        return fail(sh, RL_E_USAGE, "%s takes %d to %d arguments, not %d. Usage: %s", d->name, d->min_args, d->max_args,
                    n_args, d->usage);
    }
    return d->fn(sh, w, c->n_words);
}

int rl__shell_run_line(rl__shell *sh, const char *line, size_t len, int *out_exit) {
    rl__buf_reset(&sh->msg);
    sh->db_error = 0;
    sh->exit = 0;
    int rc = rl__shell_split(line, len, &sh->line, &sh->msg);
    if (rc) {
        report(sh, rc);
        return rc;
    }
    int multi = sh->line.n_cmds > 1;
    for (size_t j = 0; j < sh->line.n_cmds; j++) {
        const rl__shell_cmd *c = &sh->line.cmds[j];
        if (multi) {
            rl__buf_reset(&sh->tmp);
            rl__buf_append_str(&sh->tmp, ">>>");
            for (size_t k = 0; k < c->n_words; k++) {
                rl__buf_append_byte(&sh->tmp, ' ');
                rl__shell_quote(&sh->tmp, c->words[k].data, c->words[k].len);
            }
            fprintf(sh->out, "%s\n", (const char *)sh->tmp.data);
        }
        rl__buf_reset(&sh->msg);
        sh->db_error = 0;
        rc = run_cmd(sh, c);
        if (rc) {
            report(sh, rc);
            if (j + 1 < sh->line.n_cmds)
                fprintf(sh->err,
                        "WARNING: the previous command failed, the remaining commands will not be executed.\n");
            break;
        }
        if (sh->exit) {
            if (out_exit) *out_exit = 1;
            break;
        }
    }
    fflush(sh->out);
    fflush(sh->err);
    return rc;
}
