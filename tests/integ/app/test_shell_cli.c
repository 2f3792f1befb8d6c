/* test_shell_cli.c — the built `rl shell` on file: databases, and how every rl command finds its
 * database when --db is not given (real processes, each in a directory and environment of the
 * test's choosing):
 *
 *   shell-2.1  --exec: autocommit writes last across invocations; begin/set/get/commit (the reads
 *              see the transaction's own writes, "Committed (V)"); rollback discards
 *   shell-2.2  writemode off refuses set, clear and clearrange (exit 1, the reason, nothing
 *              written)
 *   shell-2.3  getrange and getrangekeys with and without END and LIMIT, through --exec
 *   shell-2.4  the first error stops --exec (exit 1; the commands after it do not run): an unknown
 *              command, a wrong argument count, a database error, a line that does not split; a
 *              transaction left open is rolled back with a warning; usage errors of rl shell
 *              itself exit 2
 *   shell-2.5  piped stdin: line by line; the first failing line stops it (exit 1), exit stops it
 *              (exit 0); a line over the limit (5 MiB) is refused and stops it
 *   shell-2.6  a terminal (a pty): the libedit session runs commands, exits on `exit` and on end
 *              of input, and saves its history without the writemode lines
 *   dbarg-1.1  no --db, no RL_DB, no ./reclayer.cluster: every command that opens a database
 *              (kv, load, get, check, query, inject-defect, ping, placement, shell) exits 2 naming
 *              the three ways, and creates nothing
 *   dbarg-1.2  RL_DB is used when --db is not given, and --db wins over it
 *   dbarg-1.3  ./reclayer.cluster is used when neither is (the URL is cluster:<cwd>/reclayer.cluster:
 *              a cluster file of a stopped cluster fails to open naming that path), RL_DB wins
 *              over it; a directory of that name is not a cluster file
 *   dbarg-1.4  mem: chosen explicitly (--db or RL_DB) prints one note on stderr that its data is
 *              discarded at exit; other databases print none
 * (A real cluster through ./reclayer.cluster: test_shell_cluster.c, shell-3.4.)
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "base/buf.h"
#include "test.h"

/* `rl shell --db file:DB --exec 'CMDS'`: exit code; output in *out and *err (to free). CMDS must not
 * hold a single quote. */
static int shell_exec(const char *db, const char *cmds, char **out, char **err) {
    return rl_test_run_in(NULL, NULL, NULL, "rl", out, err, "shell --db file:%s --exec '%s'", db, cmds);
}

/* --exec that must succeed; its stdout (to free). */
static char *exec_ok(const char *db, const char *cmds) {
    char *out, *err;
    int rc = shell_exec(db, cmds, &out, &err);
    if (rc != 0) fail_msg("rl shell --exec '%s': exit %d\nstdout: %s\nstderr: %s", cmds, rc, out, err);
    if (*err) fail_msg("rl shell --exec '%s': stderr: %s", cmds, err);
    free(err);
    return out;
}

static void expect_in(const char *hay, const char *needle, const char *what) {
    if (!strstr(hay, needle)) fail_msg("%s: [%s] lacks [%s]", what, hay, needle);
}

/* --exec that must succeed and print exactly want. */
static void exec_is(const char *db, const char *cmds, const char *want) {
    char *out = exec_ok(db, cmds);
    if (strcmp(out, want)) fail_msg("rl shell --exec '%s': printed [%s], expected [%s]", cmds, out, want);
    free(out);
}

/* --exec that must succeed and print want somewhere. */
static void exec_has(const char *db, const char *cmds, const char *want) {
    char *out = exec_ok(db, cmds);
    expect_in(out, want, cmds);
    free(out);
}

/* ---- shell-2 ------------------------------------------------------------------------------------ */

TEST(shell_2_1_exec_autocommit_and_transactions) {
    char *db = rl_test_tmpdir("sh21"), *out;
    exec_has(db, "writemode on; set a 1; set \"b c\" \\x00\\xff", ">>> set a 1\nCommitted (");
    /* Another invocation (another process) reads them. */
    exec_is(db, "get a; get \"b c\"; get zz",
            ">>> get a\n`a' is `1'\n>>> get b\\x20c\n`b c' is `\\x00\\xff'\n>>> get zz\n`zz': not found\n");
    /* A transaction: reads see its writes; committed once. */
    exec_has(db, "writemode on; begin; set t1 x; clear a; get t1; get a; commit",
             ">>> get t1\n`t1' is `x'\n>>> get a\n`a': not found\n>>> commit\nCommitted (");
    exec_is(db, "get t1; get a", ">>> get t1\n`t1' is `x'\n>>> get a\n`a': not found\n");
    /* Rollback discards. */
    exec_has(db, "writemode on; begin; set t2 y; get t2; rollback; get t2",
             "`t2' is `y'\n>>> rollback\nTransaction rolled back\n>>> get t2\n`t2': not found\n");
    exec_is(db, "get t2", "`t2': not found\n");
    /* A single command prints no echo; getversion is a number. */
    out = exec_ok(db, "getversion");
    ASSERT_TRUE(atoll(out) > 0);
    free(out);
    rl_test_rmtree(db);
    free(db);
}

TEST(shell_2_2_writemode_off_refuses_writes) {
    char *db = rl_test_tmpdir("sh22"), *out, *err;
    free(exec_ok(db, "writemode on; set keep 1"));
    static const char *const writes[] = {"set a b", "clear keep", "clearrange a z", "begin; set a b; commit"};
    for (size_t i = 0; i < sizeof writes / sizeof writes[0]; i++) {
        ASSERT_EQ(shell_exec(db, writes[i], &out, &err), 1);
        expect_in(err,
                  "ERROR: usage (3800): writemode must be enabled to set or clear keys in the database (type "
                  "`writemode on')",
                  writes[i]);
        free(out);
        free(err);
    }
    /* writemode off again after on. */
    ASSERT_EQ(shell_exec(db, "writemode on; set x 1; writemode off; set y 2", &out, &err), 1);
    free(out);
    free(err);
    exec_is(db, "getrangekeys \"\"", "\nRange limited to 25 keys\n`keep'\n`x'\n\n");
    rl_test_rmtree(db);
    free(db);
}

TEST(shell_2_3_getrange_limits) {
    char *db = rl_test_tmpdir("sh23"), *out;
    char cmds[4096] = "writemode on; begin";
    for (int i = 0; i < 40; i++) snprintf(cmds + strlen(cmds), sizeof cmds - strlen(cmds), "; set r%02d %d", i, i);
    strcat(cmds, "; set s 1; commit");
    free(exec_ok(db, cmds));
    out = exec_ok(db, "getrange r");
    int lines = 0;
    for (const char *p = out; (p = strstr(p, "' is `")); p++) lines++;
    ASSERT_EQ(lines, 25);
    ASSERT_TRUE(!strncmp(out, "\nRange limited to 25 keys\n`r00' is `0'\n", 38));
    free(out);
    exec_is(db, "getrange r00 r03", "\nRange limited to 25 keys\n`r00' is `0'\n`r01' is `1'\n`r02' is `2'\n\n");
    exec_is(db, "getrange r35 s 3", "\nRange limited to 3 keys\n`r35' is `35'\n`r36' is `36'\n`r37' is `37'\n\n");
    exec_is(db, "getrangekeys r38 \\xff 100", "\nRange limited to 100 keys\n`r38'\n`r39'\n`s'\n\n");
    exec_is(db, "getrangekeys \"\" \\xff 2", "\nRange limited to 2 keys\n`r00'\n`r01'\n\n");
    rl_test_rmtree(db);
    free(db);
}

TEST(shell_2_4_errors_stop_exec) {
    char *db = rl_test_tmpdir("sh24"), *out, *err;
    static const struct {
        const char *cmds, *err;
    } cases[] = {
        {"writemode on; set a 1; frob; set b 2", "ERROR: usage (3800): Unknown command `frob'. Try `help'?\n"},
        {"writemode on; set a 1; get a b; set b 2", "ERROR: usage (3800): get takes 1 argument, not 2"},
        {"writemode on; set a 1; set \\xff/x 1; set b 2", "ERROR: system_key_write (3040): "},
        {"writemode on; set a 1; set b \"2", "ERROR: invalid_argument (3000): unterminated quote"},
        {"writemode on; set a 1; set b \\q", "ERROR: invalid_argument (3000): bad escape '\\q' at offset 29"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int rc = shell_exec(db, cases[i].cmds, &out, &err);
        if (rc != 1) fail_msg("[%s]: exit %d, expected 1: %s %s", cases[i].cmds, rc, out, err);
        expect_in(err, cases[i].err, cases[i].cmds);
        free(out);
        free(err);
        exec_is(db, "get b", "`b': not found\n");
    }
    /* The commands before the failure ran (except for a line that does not split). */
    exec_is(db, "get a", "`a' is `1'\n");
    /* A transaction left open is rolled back, with a warning; exit code 0 (nothing failed). */
    ASSERT_EQ(shell_exec(db, "writemode on; begin; set open 1", &out, &err), 0);
    expect_in(err, "WARNING: the transaction begun with `begin' was not committed: it is rolled back", "open txn");
    free(out);
    free(err);
    exec_is(db, "get open", "`open': not found\n");
    /* A database error inside a transaction rolls it back. */
    ASSERT_EQ(shell_exec(db, "writemode on; begin; set t 1; set \\xff/x 1; commit", &out, &err), 1);
    expect_in(err, "Rolling back current transaction\n", "rollback on error");
    free(out);
    free(err);
    /* Usage errors of rl shell itself: exit 2. */
    ASSERT_EQ(rl_test_run_in(NULL, NULL, NULL, "rl", NULL, &err, "shell --db file:%s --exec", db), 2);
    expect_in(err, "rl shell: option --exec needs a value", "--exec");
    free(err);
    ASSERT_EQ(rl_test_run_in(NULL, NULL, NULL, "rl", NULL, &err, "shell --db file:%s --frob", db), 2);
    free(err);
    ASSERT_EQ(rl_test_run_in(NULL, NULL, NULL, "rl", NULL, &err, "shell --db file:%s x", db), 2);
    free(err);
    /* A database that does not open: exit 1, the reason. */
    ASSERT_EQ(rl_test_run_in(NULL, NULL, NULL, "rl", NULL, &err, "shell --db file:%s/nope --exec 'get a'", db), 1);
    expect_in(err, "rl shell: cannot open file:", "open");
    free(err);
    rl_test_rmtree(db);
    free(db);
}

/* Write text to a new file in dir; returns its path (to free). */
static char *write_file(const char *dir, const char *name, const char *text) {
    char *path = malloc(strlen(dir) + strlen(name) + 2);
    ASSERT_NOT_NULL(path);
    sprintf(path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    ASSERT_NOT_NULL(f);
    fputs(text, f);
    fclose(f);
    return path;
}

TEST(shell_2_5_piped_stdin) {
    char *dir = rl_test_tmpdir("sh25"), *out, *err, db[4200];
    snprintf(db, sizeof db, "%s/db", dir);
    ASSERT_EQ(mkdir(db, 0700), 0);
    char *good = write_file(dir, "good.txt", "writemode on\nset p 1\r\n\nbegin; set q 2\ncommit\nget p\nget q\n");
    ASSERT_EQ(rl_test_run_in(NULL, NULL, good, "rl", &out, &err, "shell --db file:%s", db), 0);
    expect_in(out, "Committed (", "piped");
    expect_in(out, "`p' is `1'\n`q' is `2'\n", "piped");
    ASSERT_TRUE(strstr(out, "Welcome") == NULL); /* no banner without a terminal */
    ASSERT_STR_EQ(err, "");
    free(out);
    free(err);
    /* The first failing line stops the rest. */
    char *failing = write_file(dir, "bad.txt", "writemode on\nset r 1\nget r r\nset s 1\n");
    ASSERT_EQ(rl_test_run_in(NULL, NULL, failing, "rl", &out, &err, "shell --db file:%s", db), 1);
    expect_in(err, "ERROR: usage (3800): get takes 1 argument, not 2", "piped error");
    free(out);
    free(err);
    exec_is(db, "get r; get s", ">>> get r\n`r' is `1'\n>>> get s\n`s': not found\n");
    /* exit stops reading. */
    char *exiting = write_file(dir, "exit.txt", "writemode on\nexit\nset t 1\n");
    ASSERT_EQ(rl_test_run_in(NULL, NULL, exiting, "rl", &out, &err, "shell --db file:%s", db), 0);
    free(out);
    free(err);
    exec_is(db, "get t", "`t': not found\n");
    /* A line longer than a line may be (5 MiB) is refused, not held whole, and stops the rest. */
    char *huge_path = malloc(strlen(dir) + 16);
    ASSERT_NOT_NULL(huge_path);
    sprintf(huge_path, "%s/huge.txt", dir);
    FILE *f = fopen(huge_path, "w");
    ASSERT_NOT_NULL(f);
    fputs("writemode on\nset huge ", f);
    for (int i = 0; i < 5 * 1024; i++) {
        char kb[1024];
        memset(kb, 'x', sizeof kb);
        fwrite(kb, 1, sizeof kb, f);
    }
    fputs("\nset after 1\n", f);
    fclose(f);
    ASSERT_EQ(rl_test_run_in(NULL, NULL, huge_path, "rl", &out, &err, "shell --db file:%s", db), 1);
    expect_in(err, "ERROR: invalid_argument (3000): the line has more than the 4194304 bytes a line may have", "huge");
    free(out);
    free(err);
    exec_is(db, "get huge; get after", ">>> get huge\n`huge': not found\n>>> get after\n`after': not found\n");
    free(huge_path);
    free(good);
    free(failing);
    free(exiting);
    rl_test_rmtree(dir);
    free(dir);
}

/* ---- A terminal --------------------------------------------------------------------------------- */

static uint64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Read from the pty into b until it holds want (after offset from), at most 20 s. 1 if seen. */
static int read_until(int fd, rl_buf *b, size_t from, const char *want) {
    uint64_t deadline = now_ms() + 20000;
    while (!strstr((const char *)b->data + from, want)) {
        uint64_t now = now_ms();
        if (now >= deadline) return 0;
        struct pollfd p = {fd, POLLIN, 0};
        int r = poll(&p, 1, (int)(deadline - now));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return 0;
        char chunk[1024];
        ssize_t n = read(fd, chunk, sizeof chunk);
        if (n <= 0) return 0; /* EIO: the child closed the terminal */
        rl__buf_append(b, chunk, (size_t)n);
    }
    return 1;
}

/* Wait for pid (our child) at most 20 s; its exit code, or -1 (then it is killed). */
static int wait_child(pid_t pid) {
    uint64_t deadline = now_ms() + 20000;
    for (;;) {
        int st;
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid) {
            if (WIFEXITED(st)) return WEXITSTATUS(st);
            printf("rl shell ended by signal %d\n", WIFSIGNALED(st) ? WTERMSIG(st) : -1);
            return -1;
        }
        if (now_ms() >= deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            return -1;
        }
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

/* Start rl shell on a pty with HOME=home; *out_fd is the master. */
static pid_t start_on_pty(const char *home, const char *db, int *out_fd) {
    pid_t pid = forkpty(out_fd, NULL, NULL, NULL);
    ASSERT_TRUE(pid >= 0);
    if (pid == 0) {
        setenv("HOME", home, 1);
        setenv("TERM", "vt100", 1);
        unsetenv("RL_DB");
        char url[4300];
        snprintf(url, sizeof url, "file:%s", db);
        execl(rl_test_bin("rl"), "rl", "shell", "--db", url, (char *)NULL);
        _exit(127);
    }
    return pid;
}

/* Wait (at most 20 s) until the program on the pty reads the terminal in raw mode: libedit
 * turns canonical mode off while it reads a line and back on while a command runs, and what is
 * typed while it is on may be lost (libedit sets the terminal up per line). Linux gives the
 * slave's modes through the master. 1 once raw. */
static int wait_raw(int fd) {
    uint64_t deadline = now_ms() + 20000;
    for (;;) {
        struct termios t;
        if (tcgetattr(fd, &t) == 0 && !(t.c_lflag & ICANON)) return 1;
        if (now_ms() >= deadline) return 0;
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

/* Type line on the pty once libedit reads, then read until want and the next prompt appear after
 * what was read so far. */
static void type(int fd, rl_buf *b, const char *line, const char *want) {
    size_t from = b->len;
    if (!wait_raw(fd)) fail_msg("the shell is not reading its terminal:\n%s", b->data);
    ASSERT_EQ(write(fd, line, strlen(line)), (ssize_t)strlen(line));
    if (!read_until(fd, b, from, want)) fail_msg("typed [%s]: no [%s] in:\n%s", line, want, b->data + from);
    const char *at = strstr((const char *)b->data + from, want);
    size_t after = (size_t)(at - (const char *)b->data) + strlen(want);
    if (!read_until(fd, b, after, "rl> ")) fail_msg("typed [%s]: no prompt after it:\n%s", line, b->data + from);
}

TEST(shell_2_6_terminal) {
    char *dir = rl_test_tmpdir("sh26"), db[4200];
    snprintf(db, sizeof db, "%s/db", dir);
    ASSERT_EQ(mkdir(db, 0700), 0);
    int fd;
    pid_t pid = start_on_pty(dir, db, &fd);
    rl_buf b;
    rl__buf_init(&b);
    if (!read_until(fd, &b, 0, "rl> ")) fail_msg("no prompt:\n%s", b.data);
    expect_in((const char *)b.data, "Welcome to the rl shell. For help, type `help'.", "banner");
    type(fd, &b, "writemode on\r", "writemode on");
    type(fd, &b, "set hello world\r", "Committed (");
    type(fd, &b, "get hello\r", "`hello' is `world'");
    type(fd, &b, "frob\r", "Unknown command `frob'"); /* shown; the session goes on */
    type(fd, &b, "begin; set a 1; get a\r", "`a' is `1'");
    type(fd, &b, "rollback\r", "Transaction rolled back");
    size_t from = b.len;
    ASSERT_TRUE(wait_raw(fd));
    ASSERT_EQ(write(fd, "exit\r", 5), 5);
    read_until(fd, &b, from, "\x01never"); /* until the child closes the terminal */
    ASSERT_EQ(wait_child(pid), 0);
    close(fd);
    /* The history: the commands typed, but not writemode. */
    char hist[4300];
    snprintf(hist, sizeof hist, "%s/.rl_history", dir);
    FILE *f = fopen(hist, "r");
    if (!f) fail_msg("no history file %s", hist);
    char text[8192];
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = 0;
    fclose(f);
    expect_in(text, "hello", "history");
    ASSERT_TRUE(strstr(text, "writemode") == NULL);
    /* End of input (Ctrl-D) ends the session too; the written key is there. */
    pid = start_on_pty(dir, db, &fd);
    rl__buf_reset(&b);
    if (!read_until(fd, &b, 0, "rl> ")) fail_msg("no prompt:\n%s", b.data);
    type(fd, &b, "get hello\r", "`hello' is `world'");
    type(fd, &b, "get a\r", "`a': not found");
    ASSERT_TRUE(wait_raw(fd));
    ASSERT_EQ(write(fd, "\x04", 1), 1);
    read_until(fd, &b, b.len, "\x01never");
    ASSERT_EQ(wait_child(pid), 0);
    close(fd);
    rl__buf_release(&b);
    rl_test_rmtree(dir);
    free(dir);
}

/* ---- dbarg-1: which database -------------------------------------------------------------------- */

/* The commands that open a database, with arguments that are otherwise complete. */
static const char *const db_commands[] = {
    "kv get a",
    "kv set a b",
    "load --count 1",
    "get --pk 1",
    "check",
    "query --index price_idx",
    "inject-defect --pk 1 --kind stray-suffix",
    "ping -n 1",
    "placement show --index price_idx",
    "shell --exec getversion",
};
#define N_DB_COMMANDS (sizeof db_commands / sizeof db_commands[0])

static int dir_entries(const char *dir) {
    char cmd[4400];
    snprintf(cmd, sizeof cmd, "ls -A '%s' | wc -l", dir);
    FILE *p = popen(cmd, "r");
    int n = -1;
    if (p && fscanf(p, "%d", &n) != 1) n = -1;
    if (p) pclose(p);
    return n;
}

TEST(dbarg_1_1_no_database_anywhere) {
    char *dir = rl_test_tmpdir("dbarg11"), *out, *err;
    for (size_t i = 0; i < N_DB_COMMANDS; i++) {
        int rc = rl_test_run_in(dir, NULL, NULL, "rl", &out, &err, "%s", db_commands[i]);
        if (rc != 2) fail_msg("rl %s without a database: exit %d, expected 2\n%s%s", db_commands[i], rc, out, err);
        expect_in(err,
                  "no database: give --db URL, or set the environment variable RL_DB=URL, or run in a directory "
                  "holding the cluster file reclayer.cluster",
                  db_commands[i]);
        expect_in(err, "--help", db_commands[i]);
        free(out);
        free(err);
    }
    /* An empty RL_DB counts as unset. */
    ASSERT_EQ(rl_test_run_in(dir, "", NULL, "rl", NULL, &err, "kv get a"), 2);
    expect_in(err, "no database", "RL_DB=''");
    free(err);
    /* Nothing was created in the directory. */
    ASSERT_EQ(dir_entries(dir), 0);
    rl_test_rmtree(dir);
    free(dir);
}

TEST(dbarg_1_2_rl_db) {
    char *dir = rl_test_tmpdir("dbarg12"), *out, *err, db[4300], other[4300], url[4400];
    snprintf(db, sizeof db, "%s/db", dir);
    snprintf(other, sizeof other, "%s/other", dir);
    ASSERT_EQ(mkdir(db, 0700), 0);
    ASSERT_EQ(mkdir(other, 0700), 0);
    snprintf(url, sizeof url, "file:%s", db);
    ASSERT_EQ(rl_test_run_in(dir, url, NULL, "rl", &out, &err, "kv set a 1"), 0);
    ASSERT_STR_EQ(err, "");
    free(out);
    free(err);
    ASSERT_EQ(rl_test_run_in(dir, url, NULL, "rl", &out, NULL, "shell --exec 'get a'"), 0);
    ASSERT_STR_EQ(out, "`a' is `1'\n");
    free(out);
    ASSERT_EQ(rl_test_run_in(dir, url, NULL, "rl", &out, NULL, "load --count 3"), 0);
    free(out);
    ASSERT_EQ(rl_test_run_in(dir, url, NULL, "rl", &out, NULL, "check"), 0);
    expect_in(out, "records = 3", "check through RL_DB");
    free(out);
    /* --db wins over RL_DB. */
    ASSERT_EQ(rl_test_run_in(dir, url, NULL, "rl", &out, NULL, "kv --db file:%s get a", other), 1);
    free(out);
    ASSERT_EQ(rl_test_run_in(NULL, NULL, NULL, "rl", &out, NULL, "kv --db %s get a", url), 0);
    ASSERT_STR_EQ(out, "1\n");
    free(out);
    rl_test_rmtree(dir);
    free(dir);
}

TEST(dbarg_1_3_cluster_file_in_cwd) {
    char *dir = rl_test_tmpdir("dbarg13"), *out, *err, db[4300], url[4400];
    snprintf(db, sizeof db, "%s/db", dir);
    ASSERT_EQ(mkdir(db, 0700), 0);
    /* A cluster file whose cluster is not running: the command tries exactly that file. */
    char *cf = write_file(dir, "reclayer.cluster", "reclayer:abcdefghijklmnopqrstuvwxyz012345@127.0.0.1:1\n");
    char want[4400];
    snprintf(want, sizeof want, "cluster:%s/reclayer.cluster", dir);
    ASSERT_EQ(rl_test_run_in(dir, NULL, NULL, "rl", &out, &err, "kv --timeout 1 get a"), 1);
    expect_in(err, want, "kv through ./reclayer.cluster");
    free(out);
    free(err);
    ASSERT_EQ(rl_test_run_in(dir, NULL, NULL, "rl", &out, &err, "shell --timeout 1 --exec 'get a'"), 1);
    expect_in(err, want, "shell through ./reclayer.cluster");
    free(out);
    free(err);
    /* RL_DB wins over it. */
    snprintf(url, sizeof url, "file:%s", db);
    ASSERT_EQ(rl_test_run_in(dir, url, NULL, "rl", &out, &err, "shell --exec 'get a'"), 0);
    ASSERT_STR_EQ(out, "`a': not found\n");
    free(out);
    free(err);
    /* A directory named reclayer.cluster is not a cluster file. */
    remove(cf);
    ASSERT_EQ(mkdir(cf, 0700), 0);
    ASSERT_EQ(rl_test_run_in(dir, NULL, NULL, "rl", NULL, &err, "kv get a"), 2);
    expect_in(err, "no database", "a directory named reclayer.cluster");
    free(err);
    free(cf);
    rl_test_rmtree(dir);
    free(dir);
}

TEST(dbarg_1_4_mem_warns) {
    char *dir = rl_test_tmpdir("dbarg14"), *out, *err, url[4400];
    static const char note[] = "note: mem: is an empty in-memory database; what is written to it is discarded at exit";
    ASSERT_EQ(rl_test_run_in(dir, NULL, NULL, "rl", &out, &err, "kv --db mem: set a b"), 0);
    ASSERT_STR_EQ(err,
                  "rl kv: note: mem: is an empty in-memory database; what is written to it is discarded at exit\n");
    free(out);
    free(err);
    ASSERT_EQ(rl_test_run_in(dir, "mem:", NULL, "rl", &out, &err, "shell --exec 'writemode on; set a b; get a'"), 0);
    expect_in(err, note, "RL_DB=mem:");
    expect_in(out, "`a' is `b'", "mem: shell");
    free(out);
    free(err);
    ASSERT_EQ(rl_test_run_in(dir, NULL, NULL, "rl", &out, &err, "load --db mem: --count 2"), 0);
    expect_in(err, "rl load: note: mem:", "load");
    free(out);
    free(err);
    /* Not for other databases. */
    snprintf(url, sizeof url, "file:%s", dir);
    ASSERT_EQ(rl_test_run_in(dir, url, NULL, "rl", &out, &err, "kv set a b"), 0);
    ASSERT_STR_EQ(err, "");
    free(out);
    free(err);
    rl_test_rmtree(dir);
    free(dir);
}

RL_TEST_MAIN(T(shell_2_1_exec_autocommit_and_transactions), T(shell_2_2_writemode_off_refuses_writes),
             T(shell_2_3_getrange_limits), T(shell_2_4_errors_stop_exec), T(shell_2_5_piped_stdin),
             T(shell_2_6_terminal), T(dbarg_1_1_no_database_anywhere), T(dbarg_1_2_rl_db),
             T(dbarg_1_3_cluster_file_in_cwd), T(dbarg_1_4_mem_warns))
