/* test.c — helpers behind test.h. */
#include "test.h"

#include <ftw.h>
#include <stdarg.h>
#include <sys/wait.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

void rl_test_init(int argc, char **argv) {
    if (argc > 1) cmocka_set_test_filter(argv[1]);
    const char *skip = getenv("RL_TEST_SKIP");
    if (skip && *skip) cmocka_set_skip_filter(skip);
    setvbuf(stdout, NULL, _IOLBF, 0);
}

const char *rl_test_group_name(const char *argv0) {
    const char *s = strrchr(argv0, '/');
    return s ? s + 1 : argv0;
}

uint64_t rl_test_seed(void) {
    const char *e = getenv("RL_SEED");
    uint64_t seed;
    if (e && *e) seed = strtoull(e, NULL, 10);
    else {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        seed = ((uint64_t)ts.tv_sec * 1000003u) ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 20);
        seed %= 1000000000000ull;
    }
    printf("seed = %llu (replay with RL_SEED=%llu)\n", (unsigned long long)seed, (unsigned long long)seed);
    fflush(stdout);
    return seed;
}

uint64_t rl_test_rand(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

uint64_t rl_test_rand_below(uint64_t *s, uint64_t n) { return n ? rl_test_rand(s) % n : 0; }

const char *rl_test_url(void) {
    const char *e = getenv("RL_TEST_URL");
    return e && *e ? e : "mem:";
}

/* The directories rl_test_fresh_url made, removed at exit. */
static char *fresh_dirs[256];
static char *fresh_urls[256];
static int n_fresh;

static void fresh_cleanup(void) {
    for (int i = 0; i < n_fresh; i++) {
        rl_test_rmtree(fresh_dirs[i]);
        free(fresh_dirs[i]);
        free(fresh_urls[i]);
    }
    n_fresh = 0;
}

const char *rl_test_fresh_url(const char *url) {
    if (!url || strncmp(url, "file:", 5) != 0 || (url[5] && url[5] != '?')) return url;
    if (n_fresh == 256) return url;
    char *dir = rl_test_tmpdir("db");
    if (!dir) return url;
    size_t n = strlen(dir) + strlen(url) + 8;
    char *u = malloc(n);
    if (!u) {
        free(dir);
        return url;
    }
    snprintf(u, n, "file:%s%s", dir, url + 5);
    if (n_fresh == 0) atexit(fresh_cleanup);
    fresh_dirs[n_fresh] = dir;
    fresh_urls[n_fresh++] = u;
    return u;
}

const char *rl_test_data_path(const char *rel) {
    static char path[4096];
    snprintf(path, sizeof path, "%s/%s", RL_TEST_DATA_DIR, rel);
    return path;
}

char *rl_test_tmpdir(const char *tag) {
    const char *base = getenv("TMPDIR");
    char tmpl[4096];
    snprintf(tmpl, sizeof tmpl, "%s/rltest-%s-XXXXXX", base && *base ? base : "/tmp", tag);
    if (!mkdtemp(tmpl)) {
        fail_msg("mkdtemp %s failed", tmpl);
        return NULL;
    }
    return strdup(tmpl);
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

void rl_test_rmtree(const char *path) {
    if (path) nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

const char *rl_test_bin(const char *prog) {
    static char path[4096];
    snprintf(path, sizeof path, "%s/%s", RL_BIN_DIR, prog);
    return path;
}

/* Read all of f into a new NUL-terminated heap string. */
static char *read_all(FILE *f) {
    size_t cap = 1 << 16, len = 0, n;
    char *buf = malloc(cap);
    assert_non_null(buf);
    while ((n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (cap - len < 2) {
            buf = realloc(buf, cap *= 2);
            assert_non_null(buf);
        }
    }
    buf[len] = 0;
    return buf;
}

#define RL_TEST_ARGS_MAX 65536 /* bytes of a command line built by the run helpers */

/* Run prog with args; stderr merged into stdout (err_path NULL) or written to err_path. prefix:
 * shell words before the program ("" for none), in: words after it (a stdin redirection, or ""). */
static int run_prog(const char *prefix, const char *prog, const char *args, const char *in, const char *err_path,
                    char **out) {
    char cmd[RL_TEST_ARGS_MAX + 3 * 4096 + 64];
    if (err_path) snprintf(cmd, sizeof cmd, "%s%s %s %s 2>'%s'", prefix, rl_test_bin(prog), args, in, err_path);
    else snprintf(cmd, sizeof cmd, "%s%s %s %s 2>&1", prefix, rl_test_bin(prog), args, in);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char *buf = read_all(p);
    int st = pclose(p);
    if (out) *out = buf;
    else free(buf);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* run_prog with stdout and stderr apart (the rl_test_run contract). */
static int run_apart(const char *prefix, const char *prog, const char *args, const char *in, char **out, char **err) {
    char path[4096];
    const char *base = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/rltest-stderr-XXXXXX", base && *base ? base : "/tmp");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    int rc = run_prog(prefix, prog, args, in, path, out);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char *e = read_all(f);
    fclose(f);
    remove(path);
    if (err) *err = e;
    else free(e);
    return rc;
}

int rl_test_rl(char **out, const char *fmt, ...) {
    char args[RL_TEST_ARGS_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    return run_prog("", "rl", args, "", NULL, out);
}

int rl_test_rlbench(char **out, const char *fmt, ...) {
    char args[RL_TEST_ARGS_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    return run_prog("", "rlbench", args, "", NULL, out);
}

int rl_test_run(const char *prog, char **out, char **err, const char *fmt, ...) {
    char args[RL_TEST_ARGS_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    return run_apart("", prog, args, "", out, err);
}

int rl_test_run_in(const char *dir, const char *db_env, const char *in_path, const char *prog, char **out, char **err,
                   const char *fmt, ...) {
    char args[RL_TEST_ARGS_MAX], prefix[2 * 4096 + 64], in[4096 + 8];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    int n = snprintf(prefix, sizeof prefix, "cd '%s' && ", dir ? dir : ".");
    if (db_env) snprintf(prefix + n, sizeof prefix - (size_t)n, "env RL_DB='%s' ", db_env);
    else snprintf(prefix + n, sizeof prefix - (size_t)n, "env -u RL_DB ");
    snprintf(in, sizeof in, "<'%s'", in_path ? in_path : "/dev/null");
    return run_apart(prefix, prog, args, in, out, err);
}

int rl_test_machine_busy(void) {
    double load = 0;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &load) != 1) load = 0;
        fclose(f);
    }
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (cpus < 1) cpus = 1;
    if (load <= (double)cpus) return 0;
    printf("load average %.1f on %ld CPUs: latency bounds are relaxed\n", load, cpus);
    return 1;
}
