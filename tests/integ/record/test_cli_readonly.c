/* test_cli_readonly.c — the commands that only read (`rl kv get|range|getkey|status`, `rl get`,
 * `rl check`, `rl query`) open the database read-only (rl_db_options.read_only): they change no
 * file, even where a writable open would (a damaged log tail is moved aside by a writable open).
 *
 *   cli_5_1  with junk appended to the log, each read-only command succeeds and leaves every
 *            file as it was (names, sizes, contents); status reports the tail; a write then
 *            moves the tail aside, so the check is sensitive
 */
#include <dirent.h>
#include <stdlib.h>
#include <sys/stat.h>

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

RL_TEST_MAIN(T(cli_5_1_read_only_commands_change_nothing))
