/* shell.h (internal) — `rl shell`: fdbcli's commands and conventions over any reclayer database.
 * The tool (tools/rl/cmd_shell.c) reads lines (libedit, a pipe or --exec) and hands each to
 * rl__shell_run_line; everything else — splitting a line into commands and words, the command
 * table, transactions, options, output — is here, where the tests reach it.
 *
 * Lines (rl__shell_split; fdbcli's parseLine, made strict):
 *   1. Words are separated by spaces (tabs and carriage returns count as spaces); a command ends
 *      at ';' or a newline. Empty commands ("a;;b", a trailing ';') are skipped.
 *   2. '"' starts and ends a quoted part, in which spaces, tabs, ';' and newlines are literal; the
 *      quotes themselves are dropped, so "" is an empty word and "a b"c is the word `a bc'.
 *   3. A backslash, quoted or not, escapes: \\ (a backslash), \" (a quote), "\ " (a space),
 *      \; (a semicolon) and \xNN (the byte 0xNN, two hex digits in either case). Any other
 *      escape, \x without two hex digits, a backslash at the end and an unclosed quote are errors
 *      (RL_E_INVALID_ARGUMENT) naming the byte offset in the line; nothing of the line runs.
 *   4. Other bytes (UTF-8, control bytes) are taken as they are. A line is at most
 *      RL__SHELL_LINE_MAX bytes.
 * Keys and values are printed as fdbcli prints them: printable ASCII as is, a backslash as \\,
 * every other byte as \xNN, inside `...' quotes.
 *
 * Commands (fdbcli's names, arguments and output; `help` lists them, `help CMD` describes one):
 *   begin, commit, rollback, reset, get KEY, set KEY VALUE, clear KEY, clearrange BEGIN END,
 *   getrange BEGIN [END] [LIMIT], getrangekeys BEGIN [END] [LIMIT], writemode on|off,
 *   option [on|off NAME [ARG]], getversion, status [json], help [TOPIC], exit, quit.
 * Outside begin...commit every command runs in its own transaction (autocommit), retried on
 * retryable errors as rl_db_run retries; a write prints "Committed (VERSION)". After `begin` the
 * commands share one transaction (reads see its writes) until `commit` ("Committed (VERSION)",
 * or "Nothing to commit" for a transaction without writes), `rollback` or an error of the
 * database, which rolls it back ("Rolling back current transaction"), as fdbcli. set, clear and
 * clearrange are refused until `writemode on`.
 *
 * Errors: one line on the error stream, "ERROR: NAME (CODE): DETAIL", e.g.
 *   ERROR: usage (3800): No active transaction
 *   ERROR: invalid_argument (3000): bad escape '\q' at offset 6 (use \\, \", \ , \; or \xNN)
 *   ERROR: not_committed (1020): Transaction not committed due to conflict with another transaction
 * A command that fails stops the line: the commands after it are not run (a warning says so).
 * The shell's own conditions use usage (3800) for a command used wrongly (unknown command, wrong
 * number of arguments, no active transaction, writemode off), invalid_argument (3000) for a line
 * that does not split, invalid_option (2007) / invalid_option_value (2006) for `option`; errors of
 * the database are passed through with their codes.
 *
 * Ownership: rl__shell borrows the database, the URL and the two streams given to rl__shell_new
 * (they must outlive it) and owns its transaction and option lists. Thread rules: one thread per
 * rl__shell.
 */
#ifndef RL_APP_SHELL_H
#define RL_APP_SHELL_H

#include <stddef.h>
#include <stdio.h>

#include "base/buf.h"
#include "reclayer/common.h"
#include "reclayer/kv.h"

#define RL__SHELL_LINE_MAX \
    (4u << 20)                           /* bytes of one line (keys 10,000 and values 100,000 bytes
                                        * escaped as \xNN fit many times) */
#define RL__SHELL_RANGE_DEFAULT_LIMIT 25 /* getrange's LIMIT when none is given (fdbcli's) */
#define RL__SHELL_RANGE_MAX_LIMIT 999999999

/* ---- Splitting a line ------------------------------------------------------------------------ */

/* One command of a line: its words (the command's name first), each a byte string. */
typedef struct {
    const rl_slice *words; /* points into the rl__shell_line that holds it */
    size_t n_words;        /* >= 1 */
} rl__shell_cmd;

/* A split line. Initialise with rl__shell_line_init; rl__shell_split fills it; the words are
 * valid until the next split into it or rl__shell_line_release. Every word's bytes are followed
 * by a NUL (not counted in its len), so a word without NUL bytes is also a C string. */
typedef struct {
    rl__shell_cmd *cmds; /* the non-empty commands in order */
    size_t n_cmds;
    /* private */
    rl_buf bytes;    /* every word's bytes, each followed by a NUL */
    rl_slice *words; /* all words; .data set once the split is complete */
    size_t *offs;    /* offset of each word in bytes */
    size_t n_words, cap_words, cap_offs, cap_cmds;
} rl__shell_line;

/* rl__shell_line_init — an empty line (no command); allocates nothing. */
void rl__shell_line_init(rl__shell_line *l);
/* rl__shell_line_release — free what l holds and leave it empty (as after init); l may be reused. */
void rl__shell_line_release(rl__shell_line *l);

/* rl__shell_split — split s[0..len) (file comment, "Lines") into l's commands and words (l is
 * reset first). RL_OK; RL_E_INVALID_ARGUMENT with the reason in msg (appended, one line, naming
 * the byte offset) for a bad escape, an unclosed quote or a line over RL__SHELL_LINE_MAX bytes
 * — l then holds no command; RL_E_OUT_OF_MEMORY. s is only read (it need not be NUL-terminated
 * and may hold any byte). */
int rl__shell_split(const char *s, size_t len, rl__shell_line *l, rl_buf *msg);

/* rl__shell_quote — append word w in the form rl__shell_split reads back as that one word:
 * printable ASCII as is, except that a backslash, a quote, a space and ';' are escaped with a
 * backslash, and every other byte is \xNN (so the result never needs quotes). ">>> " echoes
 * of multi-command lines use it. */
void rl__shell_quote(rl_buf *out, const void *w, size_t len);

/* ---- The executor ---------------------------------------------------------------------------- */

typedef struct rl__shell rl__shell;

/* rl__shell_new — a shell over db (opened by the caller, borrowed: it must outlive the shell;
 * the caller closes it after rl__shell_free). url (borrowed) names the database in `status` and
 * decides how status reads it (cluster: is summarised per process). Normal output goes to out,
 * "ERROR:" and "WARNING:" lines to err (both borrowed; they may be the same stream). writemode
 * starts off, no option is set, no transaction is open. *out_sh is the caller's
 * (rl__shell_free). RL_OK or RL_E_OUT_OF_MEMORY. */
int rl__shell_new(rl_db *db, const char *url, FILE *out, FILE *err, rl__shell **out_sh);

/* rl__shell_free — roll back an open transaction and free the shell (NULL: no-op). */
void rl__shell_free(rl__shell *sh);

/* rl__shell_run_line — split line[0..len) and run its commands in order. With more than one
 * command, each is echoed first as fdbcli does (">>> set a b"). The first command that fails
 * stops the line: its error is printed and, when commands follow, "WARNING: the previous command
 * failed, the remaining commands will not be executed.". `exit` and `quit` stop the line and set
 * *out_exit to 1 (otherwise it is left as it was; out_exit may be NULL).
 * Returns RL_OK when every command ran without error (a key not found is not an error), else
 * the failing command's code (file comment, "Errors"). Blocks while the database works; every
 * transaction is bounded by the database's transaction_timeout_ms. */
int rl__shell_run_line(rl__shell *sh, const char *line, size_t len, int *out_exit);

/* rl__shell_in_transaction — 1 while a transaction begun with `begin` is open, else 0. */
int rl__shell_in_transaction(const rl__shell *sh);

/* rl__shell_history_ok — 0 when line (NUL-terminated) mentions writemode, so that an
 * interactive session keeps it out of its history (fdbcli's rule: a recalled line must not turn
 * writes on by accident); 1 otherwise. */
int rl__shell_history_ok(const char *line);

#endif
