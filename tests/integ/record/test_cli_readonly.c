/* test_cli_readonly.c — the commands that only read (`rl kv get|range|getkey|status`, `rl get`,
 * `rl check`, `rl query`) open the database read-only (rl_db_options.read_only): they change no
 * file, even where a writable open would (a damaged log tail is moved aside by a writable open).
 *
 *   cli_5_1  with junk appended to the log, each read-only command succeeds and leaves every
 *            file as it was (names, sizes, contents); status reports the tail; a write then
 *            moves the tail aside, so the check is sensitive
 *   cli_5_2  readers beside a writer process: while `rl load` writes a store in many
 *            transactions (checkpointing every 64 KiB of log), `rl check`, `rl get`, `rl query`
 *            and `rl kv status` run again and again on the same file: database; each succeeds,
 *            the checker finds the store whole (every committed transaction is all there or not
 *            at all), the record counts it sees never go back, and the writer finishes
 *            unharmed with every record it wrote
 */
#include <dirent.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test.h"

/* A listing of dir: "name size checksum\n" per file, sorted by name, into out (cap bytes). */
static void listing(const char *dir, char *out, size_t cap) {
    struct dirent **names;
    int n = scandir(dir, &names, NULL, alphasort);
    ASSERT_TRUE(n >= 0);
    size_t len = 0;
    out[0] = 0;
    for (int i = 0; i < n; i++) {
        char path[4400];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]->d_name);
        struct stat sb;
        uint64_t sum = 0;
        if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode)) {
            FILE *f = fopen(path, "rb");
            ASSERT_NOT_NULL(f);
            for (int c; (c = fgetc(f)) != EOF;) sum = sum * 131 + (uint64_t)c;
            fclose(f);
        }
        len += (size_t)snprintf(out + len, cap - len, "%s %lld %llx\n", names[i]->d_name, (long long)sb.st_size,
                                (unsigned long long)sum);
        free(names[i]);
    }
    free(names);
}

TEST(cli_5_1_read_only_commands_change_nothing) {
    char *dir = rl_test_tmpdir("cli51"), *out, before[8192], after[8192], log[4400] = "";
    ASSERT_EQ(rl_test_rl(&out, "load --db file:%s --count 5", dir), 0);
    free(out);
    DIR *dh = opendir(dir);
    ASSERT_NOT_NULL(dh);
    for (struct dirent *e; (e = readdir(dh));)
        if (!strncmp(e->d_name, "log-", 4)) snprintf(log, sizeof log, "%s/%s", dir, e->d_name);
    closedir(dh);
    ASSERT_TRUE(log[0] != 0);
    FILE *f = fopen(log, "ab");
    ASSERT_NOT_NULL(f);
    fputs("junkjunkjunk", f);
    fclose(f);
    listing(dir, before, sizeof before);
    const struct {
        const char *cmd, *args;
        int code;
    } cmds[] = {{"kv", "status", 0},
                {"kv", "get x", 1},
                {"kv", "range '' '\\xff'", 0},
                {"kv", "getkey fge a", 0},
                {"check", "", 0},
                {"get", "--pk 1", 0},
                {"query", "--index price_idx --limit 2", 0}};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        int rc = rl_test_rl(&out, "%s --db file:%s %s", cmds[i].cmd, dir, cmds[i].args);
        if (rc != cmds[i].code) fail_msg("rl %s %s: exit %d: %s", cmds[i].cmd, cmds[i].args, rc, out);
        free(out);
        listing(dir, after, sizeof after);
        if (strcmp(before, after))
            fail_msg("rl %s %s changed the directory:\n%s\nafter:\n%s", cmds[i].cmd, cmds[i].args, before, after);
    }
    ASSERT_EQ(rl_test_rl(&out, "kv --db file:%s status", dir), 0);
    ASSERT_TRUE(strstr(out, "\"log_tail\"") != NULL);
    free(out);
    /* A writable command moves the tail aside: the listing check above would have seen it. */
    ASSERT_EQ(rl_test_rl(&out, "kv --db file:%s set a b", dir), 0);
    free(out);
    listing(dir, after, sizeof after);
    ASSERT_TRUE(strcmp(before, after) != 0);
    ASSERT_TRUE(strstr(after, ".discarded-") != NULL);
    rl_test_rmtree(dir);
    free(dir);
}

extern char **environ;

/* The number after "records = " in rl check's report, or -1. */
static long long checked_records(const char *out) {
    const char *p = out ? strstr(out, "records") : NULL;
    while (p && !(p == out || p[-1] == '\n')) p = strstr(p + 1, "records");
    if (!p || !(p = strchr(p, '='))) return -1;
    return strtoll(p + 1, NULL, 10);
}

TEST(cli_5_2_readers_beside_a_writer_process) {
    char *dir = rl_test_tmpdir("cli-readers"), url[4400], *out = NULL;
    snprintf(url, sizeof url, "file:%s?checkpoint_bytes=65536", dir);
    ASSERT_EQ(rl_test_rl(&out, "load --db '%s' --count 50 --seed 1", url), 0);
    free(out);
    /* The writer: a separate process, stopped by its pid whatever happens. Writers one after
     * another (orders 1..20,000, then twice as many each time) until two rounds of readers ran
     * entirely beside one: how many rounds fit beside one writer depends on the machine and the
     * build (under ASan a round of four processes can outlast a 20,000-order load). */
    long long n_orders = 20000;
    char count[24] = "20000", seed[16] = "2";
    char *argv[] = {(char *)rl_test_bin("rl"), "load", "--db", url, "--count", count, "--seed", seed, NULL};
    pid_t w;
    ASSERT_EQ(posix_spawn(&w, argv[0], NULL, NULL, argv, environ), 0);
    int status = -1, alive_reads = 0, rounds = 0, writers = 1;
    long long last_records = 0;
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        int was_alive = waitpid(w, &status, WNOHANG) == 0;
        out = NULL;
        int rc = rl_test_rl(&out, "check --db '%s'", url);
        if (rc != 0) {
            kill(w, SIGKILL);
            waitpid(w, NULL, 0);
            fail_msg("rl check beside the writer exited %d:\n%s", rc, out);
        }
        long long n = checked_records(out);
        if (n < last_records) fail_msg("rl check saw %lld records after %lld:\n%s", n, last_records, out);
        last_records = n;
        free(out);
        ASSERT_EQ(rl_test_rl(&out, "get --db '%s' --pk 3", url), 0);
        free(out);
        ASSERT_EQ(rl_test_rl(&out, "query --db '%s' --index price_idx --limit 5 --fetch adaptive", url), 0);
        free(out);
        ASSERT_EQ(rl_test_rl(&out, "kv --db '%s' status", url), 0);
        free(out);
        rounds++;
        if (was_alive && waitpid(w, &status, WNOHANG) == 0) {
            alive_reads++; /* all four ran beside it */
        } else if (!was_alive) {
            ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0); /* the writer was not harmed */
            if (alive_reads >= 2 || writers == 6) break;
            snprintf(seed, sizeof seed, "%d", 2 + writers++);
            n_orders *= 2;
            snprintf(count, sizeof count, "%lld", n_orders);
            ASSERT_EQ(posix_spawn(&w, argv[0], NULL, NULL, argv, environ), 0);
        }
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - t0.tv_sec > 240) {
            kill(w, SIGKILL);
            waitpid(w, NULL, 0);
            fail_msg("the writer did not finish in 240 s");
        }
    }
    printf("%d writers, %d rounds of readers, %d entirely beside a writer; last count seen %lld\n", writers, rounds,
           alive_reads, last_records);
    ASSERT_TRUE(alive_reads >= 2);
    ASSERT_EQ(rl_test_rl(&out, "check --db '%s'", url), 0);
    ASSERT_EQ(checked_records(out), n_orders);
    free(out);
    rl_test_rmtree(dir);
    free(dir);
}

RL_TEST_MAIN(T(cli_5_1_read_only_commands_change_nothing), T(cli_5_2_readers_beside_a_writer_process))
