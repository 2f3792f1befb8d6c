/* test_storage_crash.c — kill -9 during apply + sync + checkpoint, then recover.
 *
 * A child process applies versions 1, 2, 3, ... (each writes four keys with the same value, an
 * 8-byte ADD counter and a rotating set/clear), syncs, and writes each acknowledged version to a
 * pipe. The parent SIGKILLs it at a random moment, reopens the directory and checks that every
 * acknowledged version is present and that the recovered version is whole: the four keys agree
 * with each other and with the counter. Small checkpoint_log_bytes make checkpoints happen
 * during the kills too.
 */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"
#include "storage/storage.h"
#include "test.h"

static int open_dir(const char *dir, rl__storage **st) {
    rl__storage_options o = {0};
    o.dir = dir;
    o.checkpoint_log_bytes = 16384;
    return rl__storage_open(&o, st, NULL);
}

static void child(const char *dir, int wfd) {
    rl__storage *st;
    if (open_dir(dir, &st) != RL_OK) _exit(3);
    for (rl__version v = rl__storage_latest_version(st) + 1;; v++) {
        char val[32], x[8];
        int vl = snprintf(val, sizeof val, "value-%llu", (unsigned long long)v);
        snprintf(x, sizeof x, "x%02d", (int)(v % 40));
        rl__mutation m[] = {
            {RL_MUT_SET, (const uint8_t *)"a", 1, (const uint8_t *)val, (uint32_t)vl},
            {RL_MUT_SET, (const uint8_t *)"b", 1, (const uint8_t *)val, (uint32_t)vl},
            {RL_MUT_ADD, (const uint8_t *)"count", 5, (const uint8_t *)"\x01\0\0\0\0\0\0\0", 8},
            {v % 3 ? RL_MUT_SET : RL_MUT_CLEAR, (const uint8_t *)x, 3, (const uint8_t *)val, v % 3 ? (uint32_t)vl : 0},
            {RL_MUT_SET, (const uint8_t *)"c", 1, (const uint8_t *)val, (uint32_t)vl},
            {RL_MUT_SET, (const uint8_t *)"d", 1, (const uint8_t *)val, (uint32_t)vl},
        };
        if (rl__storage_apply(st, v, m, 6) != RL_OK) _exit(4);
        if (rl__storage_sync(st) != RL_OK) _exit(5);
        if (write(wfd, &v, sizeof v) != sizeof v) _exit(6);
    }
}

static const char *get(rl__storage *st, const char *k, rl_arena *a, uint32_t *len) {
    int present;
    const uint8_t *val;
    ASSERT_OK(rl__storage_get(st, rl__storage_latest_version(st), k, strlen(k), a, &present, &val, len));
    return present ? (const char *)val : NULL;
}

TEST(storage_crash_1_kill9) {
    uint64_t rng = rl_test_seed();
    char *dir = rl_test_tmpdir("st-crash");
    rl__version acked = 0;
    uint64_t t0 = (uint64_t)time(NULL);
    int rounds = 0;
    for (int round = 0; round < 40 && (uint64_t)time(NULL) - t0 < 12; round++, rounds++) {
        int fds[2];
        ASSERT_EQ(pipe(fds), 0);
        pid_t pid = fork();
        ASSERT_TRUE(pid >= 0);
        if (pid == 0) {
            close(fds[0]);
            child(dir, fds[1]);
            _exit(0);
        }
        close(fds[1]);
        usleep((useconds_t)(1000 + rl_test_rand_below(&rng, 60000)));
        kill(pid, SIGKILL);
        int status;
        ASSERT_EQ(waitpid(pid, &status, 0), pid);
        if (!(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL))
            fail_msg("round %d: child exited with status %d", round, status);
        rl__version v;
        while (read(fds[0], &v, sizeof v) == sizeof v) {
            ASSERT_TRUE(v > acked);
            acked = v;
        }
        close(fds[0]);

        rl__storage *st;
        ASSERT_OK(open_dir(dir, &st));
        rl__version latest = rl__storage_latest_version(st);
        if (latest < acked)
            fail_msg("round %d: acknowledged %llu but recovered %llu", round, (unsigned long long)acked,
                     (unsigned long long)latest);
        rl_arena a;
        rl__arena_init(&a, 0);
        if (latest > 0) {
            char want[32];
            int wl = snprintf(want, sizeof want, "value-%llu", (unsigned long long)latest);
            const char *keys[] = {"a", "b", "c", "d"};
            for (int i = 0; i < 4; i++) {
                uint32_t len;
                const char *got = get(st, keys[i], &a, &len);
                ASSERT_NOT_NULL(got);
                ASSERT_MEM_EQ(got, len, want, (size_t)wl);
            }
            uint32_t len;
            const uint8_t *c = (const uint8_t *)get(st, "count", &a, &len);
            ASSERT_NOT_NULL(c);
            ASSERT_EQ(len, 8);
            uint64_t n = 0;
            for (int i = 7; i >= 0; i--) n = n << 8 | c[i];
            ASSERT_EQ(n, latest);
            char x[8];
            snprintf(x, sizeof x, "x%02d", (int)(latest % 40));
            const char *xv = get(st, x, &a, &len);
            if (latest % 3) ASSERT_MEM_EQ(xv, len, want, (size_t)wl);
            else ASSERT_NULL(xv);
        }
        rl__arena_release(&a);
        acked = latest;
        rl__storage_close(st);
    }
    printf("crash rounds = %d, last version = %llu\n", rounds, (unsigned long long)acked);
    ASSERT_TRUE(acked > 0);
    rl_test_rmtree(dir);
    free(dir);
}

RL_TEST_MAIN(T(storage_crash_1_kill9))
