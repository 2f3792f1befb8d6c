/* replay.c — a main for the libFuzzer targets in ordinary builds, so `make check` (and the ASan
 * build) replays every target's corpus: a decoder that regresses on a known input fails ctest, not
 * only a fuzz run.
 *
 *   fuzz_NAME [--random N] [--seed S] PATH...
 *
 * Every regular file under each PATH (a file or a directory, not recursive) is passed to
 * LLVMFuzzerTestOneInput once; then N random inputs (default 2,000; lengths 0..1,024, bytes from
 * a xorshift generator seeded with S, default the time; the seed is printed) and the empty input.
 * A target that crashes or trips a sanitizer fails the test (libFuzzer's contract: the target
 * aborts on a finding). Exit 0 after everything ran, 2 on usage or I/O errors.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static int run_file(const char *path, long *count) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "replay: cannot open %s\n", path);
        return 2;
    }
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len == cap) {
            size_t nc = cap ? cap * 2 : 4096;
            uint8_t *nb = realloc(buf, nc);
            if (!nb) {
                fclose(f);
                free(buf);
                return 2;
            }
            buf = nb;
            cap = nc;
        }
        size_t n = fread(buf + len, 1, cap - len, f);
        if (n == 0) break;
        len += n;
    }
    int err = ferror(f);
    fclose(f);
    if (err) {
        free(buf);
        fprintf(stderr, "replay: cannot read %s\n", path);
        return 2;
    }
    /* A copy of exactly len bytes, so ASan sees a read past the input. */
    uint8_t *in = malloc(len ? len : 1);
    if (!in) {
        free(buf);
        return 2;
    }
    if (len) memcpy(in, buf, len);
    free(buf);
    LLVMFuzzerTestOneInput(in, len);
    free(in);
    (*count)++;
    return 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int run_path(const char *path, long *count) {
    struct stat st;
    if (stat(path, &st) != 0) {
        fprintf(stderr, "replay: %s does not exist\n", path);
        return 2;
    }
    if (!S_ISDIR(st.st_mode)) return run_file(path, count);
    DIR *d = opendir(path);
    if (!d) return 2;
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            char **nn = realloc(names, cap * sizeof *names);
            if (!nn) break;
            names = nn;
        }
        size_t l = strlen(path) + strlen(e->d_name) + 2;
        if (!(names[n] = malloc(l))) break;
        snprintf(names[n++], l, "%s/%s", path, e->d_name);
    }
    closedir(d);
    if (n > 1) qsort(names, n, sizeof *names, cmp_str); /* a deterministic order */
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        struct stat fs;
        if (rc == 0 && stat(names[i], &fs) == 0 && S_ISREG(fs.st_mode)) rc = run_file(names[i], count);
        free(names[i]);
    }
    free(names);
    return rc;
}

int main(int argc, char **argv) {
    long n_random = 2000, files = 0;
    uint64_t seed = (uint64_t)time(NULL) ^ ((uint64_t)clock() << 32);
    if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
    int i = 1;
    for (; i < argc && !strncmp(argv[i], "--", 2); i++) {
        if (!strcmp(argv[i], "--random") && i + 1 < argc) n_random = strtol(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], NULL, 10);
        else {
            fprintf(stderr, "usage: %s [--random N] [--seed S] PATH...\n", argv[0]);
            return 2;
        }
    }
    for (; i < argc; i++)
        if (run_path(argv[i], &files)) return 2;
    printf("replay: %ld corpus inputs; %ld random inputs, seed %llu\n", files, n_random, (unsigned long long)seed);
    fflush(stdout);
    uint64_t x = seed | 1;
    static uint8_t buf[1024];
    LLVMFuzzerTestOneInput(buf, 0);
    for (long k = 0; k < n_random; k++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        size_t len = (size_t)(x % (sizeof buf + 1));
        for (size_t j = 0; j < len; j++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            buf[j] = (uint8_t)x;
        }
        uint8_t *in = malloc(len ? len : 1);
        if (!in) return 2;
        memcpy(in, buf, len);
        LLVMFuzzerTestOneInput(in, len);
        free(in);
    }
    printf("replay: done\n");
    return 0;
}
