/* cmd_shell.c — `rl shell`: fdbcli's commands and conventions over a reclayer database.
 *
 *   rl shell [--db URL] [--exec "CMD; CMD; ..."] [--timeout S]
 *
 * Three ways to give commands (the commands, their output and errors: src/app/shell.h):
 *   --exec       the semicolon-separated commands, run in order; the first that fails stops them
 *                (exit 1), as fdbcli --exec;
 *   a terminal   interactive, with line editing and history (libedit; ~/.rl_history, lines that
 *                mention writemode are kept out of it, as fdbcli does), until exit, quit or end of
 *                input (Ctrl-D); an error is shown and the session goes on (exit 0);
 *   a pipe       stdin read line by line without line editing; the first line that fails stops
 *                the session (exit 1).
 * Without --db the database is RL_DB's, else ./reclayer.cluster's (app/tool.h, rl__tool_db_find).
 * The database is opened once for the session, read-write; every transaction gives up after
 * --timeout seconds with transaction_timed_out (app/tool.h, rl__tool_wait), and a request waiting
 * for a server is reported on stderr after 3 s. A transaction begun and not committed when the
 * session ends is rolled back, with a warning. Exit codes: 0 success, 1 a command failed or the
 * database did not open, 2 usage. This file reads lines; src/app/shell.c runs them.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <editline/readline.h>

#include "app/args.h"
#include "app/shell.h"
#include "app/tool.h"
#include "base/buf.h"
#include "reclayer/kv.h"

#define HISTORY_FILE ".rl_history" /* in $HOME */
#define HISTORY_MAX 1000

/* An interactive session on a terminal: libedit's line editing and history. Returns 0. */
static int interactive(rl__shell *sh, const char *url) {
    char hist[PATH_MAX] = "";
    const char *home = getenv("HOME");
    if (home && *home && (size_t)snprintf(hist, sizeof hist, "%s/%s", home, HISTORY_FILE) >= sizeof hist) hist[0] = 0;
    using_history();
    stifle_history(HISTORY_MAX);
    if (hist[0]) read_history(hist); /* a missing file is a first session */
    printf("Using database `%s'.\n\nWelcome to the rl shell. For help, type `help'.\n", url);
    for (int done = 0; !done;) {
        char *line = readline("rl> ");
        if (!line) { /* end of input */
            printf("\n");
            break;
        }
        if (*line && rl__shell_history_ok(line)) add_history(line);
        rl__shell_run_line(sh, line, strlen(line), &done);
        free(line);
    }
    if (hist[0]) write_history(hist);
    return 0;
}

/* Read one line of stdin into line (reset first; without its newline and a carriage return
 * before it). At most RL__SHELL_LINE_MAX + 1 bytes are kept: the rest of a longer line is read
 * and dropped, so the splitter refuses it as too long without the whole of it ever being held.
 * Returns 0 at the end of input (nothing read), 1 otherwise. */
static int read_line(rl_buf *line) {
    rl__buf_reset(line);
    int c, any = 0;
    while ((c = getchar_unlocked()) != EOF) {
        any = 1;
        if (c == '\n') break;
        if (line->len <= RL__SHELL_LINE_MAX) rl__buf_append_byte(line, (uint8_t)c);
    }
    if (line->len > 0 && line->data[line->len - 1] == '\r') rl__buf_truncate(line, line->len - 1);
    return any;
}

/* Lines from a pipe or file, without line editing; the first that fails stops. Returns the exit
 * code. */
static int piped(rl__shell *sh) {
    rl_buf line;
    rl__buf_init(&line);
    int code = 0;
    for (int done = 0; !done && read_line(&line);) {
        if (rl__buf_error(&line)) {
            fprintf(stderr, "rl shell: out of memory reading a line\n");
            code = 1;
            break;
        }
        if (rl__shell_run_line(sh, (const char *)line.data, line.len, &done) != RL_OK) code = 1, done = 1;
    }
    rl__buf_release(&line);
    return code;
}

int rl_cmd_shell(int argc, char **argv) {
    const char *url = NULL, *exec = NULL;
    int code;
    double timeout_s = RL__TOOL_DEFAULT_TIMEOUT_S;
    const rl__arg opts[] = {RL__TOOL_OPT_DB(&url),
                            {.name = "exec",
                             .kind = RL_ARG_STRING,
                             .dest = &exec,
                             .metavar = "CMDS",
                             .flags = RL_ARG_NO_DEFAULT,
                             .help = "run the semicolon-separated commands and exit; the first that fails stops "
                                     "them (exit 1)"},
                            RL__TOOL_OPT_TIMEOUT(&timeout_s),
                            {0}};
    const rl__args_cmd cmd = {
        .name = "rl shell",
        .summary = "fdbcli's commands over a reclayer database: begin, commit, rollback, reset, get, set,\n"
                   "clear, clearrange, getrange, getrangekeys, writemode, option, getversion, status,\n"
                   "help, exit. Outside begin...commit each command is its own transaction. Writes are\n"
                   "refused until `writemode on'. Type `help' in the shell for more.",
        .epilog = "Interactive on a terminal (line editing, history in ~/.rl_history); otherwise stdin is\n"
                  "read line by line and the first failing line stops it, as --exec stops at the first\n"
                  "failing command. Keys and values: printable bytes as they are, \\xNN for others, \"quotes\"\n"
                  "around spaces (`help escaping'). Exit codes: 0 success, 1 a command failed, 2 usage.\n"
                  "\n"
                  "  rl shell --db file:/tmp/db --exec 'writemode on; set hello world; get hello'",
        .opts = opts};
    if (rl__args_parse(&cmd, argc, argv, &code)) return code;
    rl__tool_db dbu;
    if (rl__tool_db_choose(&cmd, url, &dbu, &code)) return code;
    url = dbu.url;
    rl_db_options dbo;
    memset(&dbo, 0, sizeof dbo);
    dbo.size = sizeof dbo;
    const rl__tool_wait w = {.prog = "rl shell", .timeout_ms = rl__tool_wait_ms(timeout_s)};
    rl__tool_db_options(&dbo, &w);
    rl_db *db = NULL;
    int rc = rl_db_open(url, &dbo, &db);
    if (rc) {
        fprintf(stderr, "rl shell: cannot open %s: %s (%d): %s\n", url, rl_error_name(rc), rc, rl_last_error_detail());
        return 1;
    }
    rl__shell *sh = NULL;
    rc = rl__shell_new(db, url, stdout, stderr, &sh);
    if (rc) {
        fprintf(stderr, "rl shell: %s (%d): %s\n", rl_error_name(rc), rc, rl_error_message(rc));
        rl_db_close(db);
        return 1;
    }
    if (exec) code = rl__shell_run_line(sh, exec, strlen(exec), NULL) == RL_OK ? 0 : 1;
    else if (isatty(STDIN_FILENO)) code = interactive(sh, url);
    else code = piped(sh);
    if (rl__shell_in_transaction(sh))
        fprintf(stderr, "WARNING: the transaction begun with `begin' was not committed: it is rolled back\n");
    rl__shell_free(sh);
    rl_db_close(db);
    return code;
}
