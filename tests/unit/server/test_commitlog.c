/* test_commitlog.c — the coordinator's commit log (src/server/commitlog.h), commitlog-1.x.
 *
 * The content of version v is a closed formula of v (gen_version), so every test can check that
 * a version it finds is whole and exactly what was appended:
 *   v % 5 == 0   no mutation (an empty record: a batch that wrote only conflict ranges)
 *   otherwise    SET "k<v % 50>" = "value-<v>" (longer every 7th version), then for odd v an
 *                ADD to "count", and every 4th version a CLEAR_RANGE ["c<v>", "d").
 *
 *   1.1  append/sync/reopen: visible only after sync, every version whole after reopen
 *   1.2  reads: after-filter, early stop, durable; version rules; empty records; the lock
 *   1.3  a torn last record is cut and moved to a side file (bytes kept), then appends go on
 *   1.4  a complete last record with a bad checksum: the same, classified bad_checksum
 *   1.5  corruption in the middle fails the open naming the file and offset; no file changes
 *   1.6  segments: roll-over, truncation (never the active one), PROCESS_BEHIND, reopen keeps
 *        the base; a bad record in an older segment fails the open
 *   1.7  injected write / fsync / torn-write / ENOSPC failures poison the log; nothing
 *        acknowledged is lost (reopen)
 *   1.8  crash loop: a child appends and syncs and acknowledges through a pipe, kill -9 at
 *        random moments, reopen: every acknowledged version is there and whole (seeded)
 *   1.9  the directory cannot be created, a segment cannot be read (every read() of recovery
 *        in turn): open fails with RL_E_IO_ERROR and a message, and changes nothing
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"
#include "server/commitlog.h"
#include "storage/os.h"
#include "test.h"

/* ---- The workload --------------------------------------------------------------------------- */

typedef struct {
    char k[16], val[400], c[24];
    rl__mutation m[3];
    size_t n;
} gen_rec;

static void gen_version(rl__version v, gen_rec *g) {
    g->n = 0;
    if (v % 5 == 0) return;
    int kl = snprintf(g->k, sizeof g->k, "k%02d", (int)(v % 50));
    int vl = snprintf(g->val, sizeof g->val, "value-%llu", (unsigned long long)v);
    if (v % 7 == 0) {
        memset(g->val + vl, 'a' + (int)(v % 26), 300);
        vl += 300;
    }
    g->m[g->n++] =
        (rl__mutation){RL_MUT_SET, (const uint8_t *)g->k, (uint32_t)kl, (const uint8_t *)g->val, (uint32_t)vl};
    if (v % 2)
        g->m[g->n++] =
            (rl__mutation){RL_MUT_ADD, (const uint8_t *)"count", 5, (const uint8_t *)"\x01\0\0\0\0\0\0\0", 8};
    if (v % 4 == 0) {
        int cl = snprintf(g->c, sizeof g->c, "c%llu", (unsigned long long)v);
        g->m[g->n++] = (rl__mutation){RL_MUT_CLEAR_RANGE, (const uint8_t *)g->c, (uint32_t)cl, (const uint8_t *)"d", 1};
    }
}

static int append_version(rl__commitlog *log, rl__version v) {
    gen_rec g;
    gen_version(v, &g);
    return rl__commitlog_append(log, v, g.m, g.n);
}

/* What a read saw: versions in order, each checked against gen_version. */
typedef struct {
    rl__version seen[4096];
    size_t n;
    size_t stop_after; /* 0: never stop */
    int bad;           /* a record differed from gen_version */
} visit_log;

static int check_visit(void *ud, const rl__wal_record *rec) {
    visit_log *vl = ud;
    gen_rec g;
    gen_version(rec->version, &g);
    rl__wal_iter it;
    rl__mutation m;
    size_t k = 0;
    rl__wal_iter_init(&it, rec);
    while (rl__wal_iter_next(&it, &m)) {
        if (k >= g.n || m.type != g.m[k].type || m.len1 != g.m[k].len1 || m.len2 != g.m[k].len2 ||
            memcmp(m.p1, g.m[k].p1, m.len1) || (m.len2 && memcmp(m.p2, g.m[k].p2, m.len2)))
            vl->bad = 1;
        k++;
    }
    if (k != g.n || rec->count != g.n) vl->bad = 1;
    if (vl->n < 4096) vl->seen[vl->n] = rec->version;
    vl->n++;
    return vl->stop_after && vl->n >= vl->stop_after;
}

/* Read everything after `after` and check it is exactly the versions lo..hi, each whole. */
static void expect_versions(rl__commitlog *log, rl__version after, rl__version lo, rl__version hi) {
    visit_log vl;
    memset(&vl, 0, sizeof vl);
    rl__version durable = 0;
    ASSERT_OK(rl__commitlog_read(log, after, check_visit, &vl, &durable));
    ASSERT_FALSE(vl.bad);
    ASSERT_EQ(vl.n, hi >= lo ? hi - lo + 1 : 0);
    for (size_t i = 0; i < vl.n && i < 4096; i++) ASSERT_EQ(vl.seen[i], lo + i);
    if (hi >= lo) ASSERT_EQ(durable, hi);
}

static int open_log(const char *dir, uint64_t segment_bytes, rl__commitlog **out, rl__errdetail *err) {
    rl__commitlog_options o = {dir, 0, segment_bytes};
    return rl__commitlog_open(&o, out, err);
}

static char *logdir(const char *tag) {
    char *base = rl_test_tmpdir(tag);
    char *d = malloc(strlen(base) + 8);
    sprintf(d, "%s/log", base);
    free(base);
    return d;
}

static void rm_logdir(char *d) {
    char *base = strdup(d);
    *strrchr(base, '/') = 0;
    rl_test_rmtree(base);
    free(base);
    free(d);
}

/* The bytes of a file (heap, NUL-terminated) and its length. */
static uint8_t *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)n + 1);
    if (fread(b, 1, (size_t)n, f) != (size_t)n) n = 0;
    fclose(f);
    b[n] = 0;
    *len = (size_t)n;
    return b;
}

static void spit(const char *path, const uint8_t *p, size_t n) {
    FILE *f = fopen(path, "wb");
    ASSERT_NOT_NULL(f);
    ASSERT_EQ(fwrite(p, 1, n, f), n);
    fclose(f);
}

static char *seg_path(const char *dir, rl__version base) {
    char *p = malloc(strlen(dir) + 64);
    sprintf(p, "%s/seg-%016llx.log", dir, (unsigned long long)base);
    return p;
}

/* Number of directory entries whose name starts with prefix. */
static int count_files(const char *dir, const char *prefix) {
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL) n += strncmp(de->d_name, prefix, strlen(prefix)) == 0;
    if (d) closedir(d);
    return n;
}

/* Byte offset of the record of version `which` (1-based position) in a segment file. */
static size_t record_offset(const uint8_t *p, size_t n, int which) {
    size_t off = 0;
    for (int i = 1; i < which; i++) {
        rl__wal_record r;
        ASSERT_OK(rl__wal_decode(p + off, n - off, &r));
        off += r.record_len;
    }
    return off;
}

/* ---- Tests ---------------------------------------------------------------------------------- */

/* commitlog-1.1: records are invisible until synced, durable after; reopen gives them back whole
 * and appending continues after the last version. */
TEST(commitlog_1_1_append_sync_reopen) {
    char *dir = logdir("cl11");
    rl__commitlog *log;
    ASSERT_OK(open_log(dir, 0, &log, NULL));
    ASSERT_EQ(rl__commitlog_durable_version(log), 0);
    ASSERT_EQ(rl__commitlog_base_version(log), 0);
    for (rl__version v = 1; v <= 200; v++) {
        ASSERT_OK(append_version(log, v));
        if (v % 3 == 0 || v == 200) {
            ASSERT_OK(rl__commitlog_sync(log));
            ASSERT_EQ(rl__commitlog_durable_version(log), v);
        } else if (v < 3) {
            expect_versions(log, 0, 1, 0); /* appended but not synced: nothing visible */
        }
    }
    ASSERT_OK(rl__commitlog_sync(log)); /* nothing pending: a no-op */
    expect_versions(log, 0, 1, 200);
    expect_versions(log, 150, 151, 200);
    expect_versions(log, 200, 1, 0);
    rl__commitlog_status st;
    rl__commitlog_get_status(log, &st);
    ASSERT_EQ(st.records, 200);
    ASSERT_EQ(st.segments, 1);
    ASSERT_EQ(st.first_version, 1);
    ASSERT_EQ(st.appended_version, 200);
    ASSERT_EQ(st.recovery_tail, RL_TAIL_CLEAN);
    rl__commitlog_close(log);

    ASSERT_OK(open_log(dir, 0, &log, NULL));
    ASSERT_EQ(rl__commitlog_durable_version(log), 200);
    expect_versions(log, 0, 1, 200);
    ASSERT_RC(append_version(log, 200), RL_E_VERSION_INVALID);
    ASSERT_OK(append_version(log, 201));
    ASSERT_OK(rl__commitlog_sync(log));
    rl__commitlog_close(log);
    ASSERT_OK(open_log(dir, 0, &log, NULL));
    expect_versions(log, 0, 1, 201);
    rl__commitlog_close(log);
    rm_logdir(dir);
}

/* commitlog-1.2: read stops when the visitor says so; versions must increase; empty records are
 * records; the directory is locked; unsynced records vanish at close. */
TEST(commitlog_1_2_reads_versions_lock) {
    char *dir = logdir("cl12");
    rl__commitlog *log, *other;
    ASSERT_OK(open_log(dir, 0, &log, NULL));
    rl__errdetail err;
    rl__errdetail_init(&err, NULL);
    ASSERT_RC(open_log(dir, 0, &other, &err), RL_E_DATABASE_LOCKED_BY_PROCESS);
    ASSERT_NOT_NULL(strstr(rl__errdetail_get(&err), "LOCK"));
    for (rl__version v = 10; v <= 100; v += 10) ASSERT_OK(append_version(log, v));
    ASSERT_RC(append_version(log, 100), RL_E_VERSION_INVALID);
    ASSERT_RC(append_version(log, 5), RL_E_VERSION_INVALID);
    rl__mutation vs = {RL_MUT_SET_VERSIONSTAMPED_KEY, (const uint8_t *)"k\0\0\0\0", 5, (const uint8_t *)"v", 1};
    ASSERT_RC(rl__commitlog_append(log, 200, &vs, 1), RL_E_INVALID_MUTATION_TYPE);
    ASSERT_OK(rl__commitlog_sync(log));
    visit_log vl;
    memset(&vl, 0, sizeof vl);
    vl.stop_after = 3;
    rl__version durable = 0;
    ASSERT_OK(rl__commitlog_read(log, 15, check_visit, &vl, &durable));
    ASSERT_EQ(vl.n, 3);
    ASSERT_EQ(vl.seen[0], 20);
    ASSERT_EQ(vl.seen[2], 40);
    ASSERT_EQ(durable, 100);
    ASSERT_FALSE(vl.bad);
    /* Version 50 is an empty record (50 % 5 == 0) and is still visited. */
    memset(&vl, 0, sizeof vl);
    ASSERT_OK(rl__commitlog_read(log, 45, check_visit, &vl, NULL));
    ASSERT_EQ(vl.seen[0], 50);
    ASSERT_EQ(vl.n, 6);
    /* Appended, never synced: gone after close. */
    ASSERT_OK(append_version(log, 110));
    rl__commitlog_close(log);
    ASSERT_OK(open_log(dir, 0, &log, NULL));
    ASSERT_EQ(rl__commitlog_durable_version(log), 100);
    ASSERT_OK(append_version(log, 110));
    ASSERT_OK(rl__commitlog_sync(log));
    rl__commitlog_close(log);
    rm_logdir(dir);
}

/* Write versions 1..n (synced one by one) and close. */
static void write_versions(const char *dir, rl__version n) {
    rl__commitlog *log;
    ASSERT_OK(open_log(dir, 0, &log, NULL));
    for (rl__version v = 1; v <= n; v++) {
        ASSERT_OK(append_version(log, v));
        ASSERT_OK(rl__commitlog_sync(log));
    }
    rl__commitlog_close(log);
}

/* Reopen after damaging the last record; expect it cut and moved aside as `kind`. */
static void check_tail_cut(const char *dir, size_t cut_at, size_t file_len, int kind, const uint8_t *orig) {
    rl__commitlog *log;
    rl__errdetail err;
    rl__errdetail_init(&err, NULL);
    ASSERT_OK(open_log(dir, 0, &log, &err));
    rl__commitlog_status st;
    rl__commitlog_get_status(log, &st);
    ASSERT_EQ(st.recovery_tail, kind);
    ASSERT_EQ(st.recovery_tail_offset, cut_at);
    ASSERT_EQ(st.recovery_tail_bytes, file_len - cut_at);
    ASSERT_NOT_NULL(st.recovery_moved_to);
    size_t sl = 0;
    uint8_t *side = slurp(st.recovery_moved_to, &sl);
    ASSERT_NOT_NULL(side);
    ASSERT_MEM_EQ(side, sl, orig + cut_at, file_len - cut_at); /* never delete bytes */
    free(side);
    expect_versions(log, 0, 1, 9);
    ASSERT_OK(append_version(log, 10));
    ASSERT_OK(append_version(log, 11));
    ASSERT_OK(rl__commitlog_sync(log));
    rl__commitlog_close(log);
    ASSERT_OK(open_log(dir, 0, &log, NULL));
    rl__commitlog_get_status(log, &st);
    ASSERT_EQ(st.recovery_tail, RL_TAIL_CLEAN);
    expect_versions(log, 0, 1, 11);
    rl__commitlog_close(log);
}

/* commitlog-1.3: a torn last record (the file ends inside it) is cut off; its bytes go to a side
 * file; the log goes on after the last whole record. */
TEST(commitlog_1_3_torn_tail) {
    char *dir = logdir("cl13");
    write_versions(dir, 10);
    char *seg = seg_path(dir, 0);
    size_t n;
    uint8_t *orig = slurp(seg, &n);
    size_t off10 = record_offset(orig, n, 10);
    /* Cut in the middle of record 10's payload. */
    size_t cut = off10 + (n - off10) / 2;
    ASSERT_EQ(truncate(seg, (off_t)cut), 0);
    check_tail_cut(dir, off10, cut, RL_TAIL_TORN, orig);
    ASSERT_EQ(count_files(dir, "seg-0000000000000000.log.discarded-"), 1);
    free(orig);
    free(seg);
    rm_logdir(dir);

    dir = logdir("cl13b");
    write_versions(dir, 10);
    seg = seg_path(dir, 0);
    orig = slurp(seg, &n);
    off10 = record_offset(orig, n, 10);
    ASSERT_EQ(truncate(seg, (off_t)(off10 + 10)), 0);
    check_tail_cut(dir, off10, off10 + 10, RL_TAIL_TORN, orig);
    free(orig);
    free(seg);
    rm_logdir(dir);
}

/* commitlog-1.4: a complete last record whose checksum is wrong is cut the same way. */
TEST(commitlog_1_4_bad_checksum_tail) {
    char *dir = logdir("cl14");
    write_versions(dir, 10);
    char *seg = seg_path(dir, 0);
    size_t n;
    uint8_t *orig = slurp(seg, &n);
    size_t off10 = record_offset(orig, n, 10);
    orig[n - 1] ^= 0x40; /* the last payload byte */
    spit(seg, orig, n);
    check_tail_cut(dir, off10, n, RL_TAIL_BAD_CHECKSUM, orig);
    free(orig);
    free(seg);
    rm_logdir(dir);
}

/* commitlog-1.5: a bad record followed by good ones is corruption: the open fails naming the file
 * and the offset, and no file is changed. */
TEST(commitlog_1_5_corruption_in_the_middle) {
    char *dir = logdir("cl15");
    write_versions(dir, 10);
    char *seg = seg_path(dir, 0);
    size_t n;
    uint8_t *orig = slurp(seg, &n);
    size_t off5 = record_offset(orig, n, 4);
    orig[off5 + 30] ^= 0x01; /* inside record 4 (version 5 is an empty record) */
    spit(seg, orig, n);
    rl__commitlog *log = NULL;
    rl__errdetail err;
    rl__errdetail_init(&err, NULL);
    ASSERT_RC(open_log(dir, 0, &log, &err), RL_E_LOG_CORRUPT);
    ASSERT_NULL(log);
    printf("open refused: %s\n", rl__errdetail_get(&err));
    ASSERT_NOT_NULL(strstr(rl__errdetail_get(&err), seg));
    char want[64];
    snprintf(want, sizeof want, "byte offset %zu", off5);
    ASSERT_NOT_NULL(strstr(rl__errdetail_get(&err), want));
    size_t n2;
    uint8_t *after = slurp(seg, &n2);
    ASSERT_MEM_EQ(after, n2, orig, n);
    ASSERT_EQ(count_files(dir, "seg-"), 1); /* no side file either */
    free(after);
    free(orig);
    free(seg);
    rm_logdir(dir);
}

/* commitlog-1.6: small segments roll over; truncation deletes whole segments whose last version
 * is <= the point, oldest first, never the active one; a read before the base is
 * PROCESS_BEHIND; the base survives a reopen; a bad record in an older segment fails the open. */
TEST(commitlog_1_6_segments_truncation) {
    char *dir = logdir("cl16");
    rl__commitlog *log;
    ASSERT_OK(open_log(dir, 2000, &log, NULL));
    for (rl__version v = 1; v <= 300; v++) {
        ASSERT_OK(append_version(log, v));
        if (v % 4 == 0) ASSERT_OK(rl__commitlog_sync(log));
    }
    ASSERT_OK(rl__commitlog_sync(log));
    rl__commitlog_status st;
    rl__commitlog_get_status(log, &st);
    printf("segments = %llu, bytes = %llu\n", (unsigned long long)st.segments, (unsigned long long)st.bytes);
    ASSERT_TRUE(st.segments >= 5);
    ASSERT_EQ((int)st.segments, count_files(dir, "seg-"));
    expect_versions(log, 0, 1, 300);
    uint64_t deleted = 0;
    ASSERT_OK(rl__commitlog_truncate(log, 0, &deleted));
    ASSERT_EQ(deleted, 0);
    ASSERT_OK(rl__commitlog_truncate(log, 150, &deleted));
    ASSERT_TRUE(deleted >= 1);
    rl__version base = rl__commitlog_base_version(log);
    printf("deleted %llu segments, base = %llu\n", (unsigned long long)deleted, (unsigned long long)base);
    ASSERT_TRUE(base > 0 && base <= 150);
    expect_versions(log, base, base + 1, 300);
    visit_log vl;
    memset(&vl, 0, sizeof vl);
    ASSERT_RC(rl__commitlog_read(log, base - 1, check_visit, &vl, NULL), RL_E_PROCESS_BEHIND);
    ASSERT_EQ(vl.n, 0);
    /* Truncating past everything keeps the active segment. */
    ASSERT_OK(rl__commitlog_truncate(log, 1000, &deleted));
    rl__commitlog_get_status(log, &st);
    ASSERT_EQ(st.segments, 1);
    ASSERT_EQ(count_files(dir, "seg-"), 1);
    base = rl__commitlog_base_version(log);
    ASSERT_TRUE(base <= 300);
    expect_versions(log, base, base + 1, 300);
    rl__commitlog_close(log);
    ASSERT_OK(open_log(dir, 2000, &log, NULL));
    ASSERT_EQ(rl__commitlog_base_version(log), base);
    ASSERT_EQ(rl__commitlog_durable_version(log), 300);
    ASSERT_OK(append_version(log, 301));
    ASSERT_OK(rl__commitlog_sync(log));
    expect_versions(log, base, base + 1, 301);
    rl__commitlog_close(log);
    rm_logdir(dir);

    /* A bad record at the end of an older segment is not a tail: the open fails. */
    dir = logdir("cl16b");
    ASSERT_OK(open_log(dir, 2000, &log, NULL));
    for (rl__version v = 1; v <= 100; v++) {
        ASSERT_OK(append_version(log, v));
        ASSERT_OK(rl__commitlog_sync(log));
    }
    rl__commitlog_close(log);
    char *seg0 = seg_path(dir, 0);
    size_t n;
    uint8_t *b = slurp(seg0, &n);
    b[n - 1] ^= 0x20;
    spit(seg0, b, n);
    rl__errdetail err;
    rl__errdetail_init(&err, NULL);
    ASSERT_RC(open_log(dir, 2000, &log, &err), RL_E_LOG_CORRUPT);
    printf("open refused: %s\n", rl__errdetail_get(&err));
    ASSERT_NOT_NULL(strstr(rl__errdetail_get(&err), seg0));
    free(b);
    free(seg0);
    rm_logdir(dir);
}

/* One sweep of injected failures of `kind` (errno err, flags) over a workload of 40 versions
 * synced in groups of 3. For each n until the workload completes unharmed: the first failing
 * call returns the mapped error, the log is poisoned (append and sync keep failing, reads still
 * give what was published), and a reopen holds every version whose sync returned RL_OK. */
static void fault_sweep(rl__os_kind kind, int err, int flags, const char *name) {
    int want = err == ENOSPC ? RL_E_NO_SPACE : RL_E_IO_ERROR;
    int fired_runs = 0;
    for (long n = 0; n < 200; n++) {
        char *dir = logdir("cl17");
        rl__commitlog *log;
        ASSERT_OK(open_log(dir, 3000, &log, NULL));
        rl__version acked = 0, last_ok_append = 0;
        int failed = 0;
        rl__os_fault_arm(kind, n, err, flags);
        for (rl__version v = 1; v <= 40 && !failed; v++) {
            int rc = append_version(log, v);
            if (rc == RL_OK) last_ok_append = v;
            if (rc == RL_OK && (v % 3 == 0 || v == 40)) rc = rl__commitlog_sync(log);
            if (rc != RL_OK) {
                ASSERT_RC(rc, want);
                failed = 1;
            } else if (v % 3 == 0 || v == 40) {
                acked = v;
            }
        }
        int fired = rl__os_fault_fired();
        rl__os_fault_disarm();
        if (!fired) {
            ASSERT_FALSE(failed);
            rl__commitlog_close(log);
            rm_logdir(dir);
            break;
        }
        fired_runs++;
        if (failed) {
            /* Poisoned: nothing more is accepted; what was published stays readable. */
            ASSERT_RC(append_version(log, 1000), want);
            ASSERT_RC(rl__commitlog_sync(log), want);
            rl__commitlog_status st;
            rl__commitlog_get_status(log, &st);
            ASSERT_EQ(st.poisoned, want);
            expect_versions(log, 0, 1, acked);
        }
        rl__commitlog_close(log);
        /* Reopen without faults: every acknowledged version, each whole, nothing beyond the
         * last appended one. */
        ASSERT_OK(open_log(dir, 3000, &log, NULL));
        rl__version got = rl__commitlog_durable_version(log);
        if (got < acked || got > last_ok_append)
            fail_msg("%s n=%ld: acknowledged %llu, appended %llu, recovered %llu", name, n, (unsigned long long)acked,
                     (unsigned long long)last_ok_append, (unsigned long long)got);
        expect_versions(log, 0, 1, got);
        ASSERT_OK(append_version(log, got + 1));
        ASSERT_OK(rl__commitlog_sync(log));
        rl__commitlog_close(log);
        rm_logdir(dir);
    }
    printf("%s: %d runs with an injected failure\n", name, fired_runs);
    ASSERT_TRUE(fired_runs > 0);
}

/* commitlog-1.7: injected I/O failures (write, torn write, ENOSPC, fdatasync). */
TEST(commitlog_1_7_injected_failures) {
    fault_sweep(RL_OS_WRITE, EIO, 0, "write EIO");
    fault_sweep(RL_OS_WRITE, EIO, RL_OS_FAULT_TORN, "torn write");
    fault_sweep(RL_OS_WRITE, ENOSPC, 0, "write ENOSPC");
    fault_sweep(RL_OS_FSYNC, EIO, 0, "fdatasync EIO");
}

/* The crash-loop child: append and sync versions from the recovered one on, in groups of 1-4,
 * acknowledging each synced version through the pipe; runs until killed. */
static void crash_child(const char *dir, int wfd, uint64_t seed) {
    rl__commitlog *log;
    if (open_log(dir, 4096, &log, NULL) != RL_OK) _exit(3);
    uint64_t rng = seed;
    rl__version v = rl__commitlog_durable_version(log);
    for (;;) {
        int group = 1 + (int)rl_test_rand_below(&rng, 4);
        for (int i = 0; i < group; i++)
            if (append_version(log, ++v) != RL_OK) _exit(4);
        if (rl__commitlog_sync(log) != RL_OK) _exit(5);
        if (write(wfd, &v, sizeof v) != sizeof v) _exit(6);
        if (rl_test_rand_below(&rng, 8) == 0) {
            uint64_t deleted;
            rl__commitlog_truncate(log, v > 200 ? v - 200 : 0, &deleted);
        }
    }
}

/* commitlog-1.8: kill -9 at random moments; every acknowledged version survives whole. */
TEST(commitlog_1_8_crash_loop) {
    uint64_t rng = rl_test_seed();
    char *dir = logdir("cl18");
    rl__version acked = 0;
    uint64_t t0 = (uint64_t)time(NULL);
    int rounds = 0, tails = 0;
    for (int round = 0; round < 40 && (uint64_t)time(NULL) - t0 < 10; round++, rounds++) {
        int fds[2];
        ASSERT_EQ(pipe(fds), 0);
        uint64_t child_seed = rl_test_rand(&rng);
        pid_t pid = fork();
        ASSERT_TRUE(pid >= 0);
        if (pid == 0) {
            close(fds[0]);
            crash_child(dir, fds[1], child_seed);
            _exit(0);
        }
        close(fds[1]);
        usleep((useconds_t)(2000 + rl_test_rand_below(&rng, 50000)));
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
        rl__commitlog *log;
        rl__errdetail err;
        rl__errdetail_init(&err, NULL);
        int rc = open_log(dir, 4096, &log, &err);
        if (rc != RL_OK) fail_msg("round %d: reopen failed: %s", round, rl__errdetail_get(&err));
        rl__commitlog_status st;
        rl__commitlog_get_status(log, &st);
        tails += st.recovery_tail != RL_TAIL_CLEAN;
        rl__version got = rl__commitlog_durable_version(log), base = st.base_version;
        if (got < acked)
            fail_msg("round %d: acknowledged %llu but recovered %llu", round, (unsigned long long)acked,
                     (unsigned long long)got);
        ASSERT_TRUE(base <= acked || acked == 0 || base <= got);
        expect_versions(log, base, base + 1, got);
        acked = got;
        rl__commitlog_close(log);
    }
    printf("crash rounds = %d, damaged tails moved aside = %d, last version = %llu\n", rounds, tails,
           (unsigned long long)acked);
    ASSERT_TRUE(acked > 0);
    rm_logdir(dir);
}

/* commitlog-1.9: the file calls of open that fail: mkdir of the directory, and each read() of
 * recovery in turn (counted first). Open fails with RL_E_IO_ERROR and says what; a later open
 * without faults finds every version. */
TEST(commitlog_1_9_open_mkdir_read_fail) {
    char *dir = logdir("cl19");
    rl__commitlog *log = NULL;
    rl__errdetail err;
    rl__errdetail_init(&err, NULL);
    rl__os_fault_arm(RL_OS_MKDIR, 0, EIO, 0);
    int rc = open_log(dir, 3000, &log, &err);
    ASSERT_TRUE(rl__os_fault_fired());
    rl__os_fault_disarm();
    ASSERT_RC(rc, RL_E_IO_ERROR);
    if (!rl__errdetail_get(&err) || !strstr(rl__errdetail_get(&err), "cannot create commit log directory"))
        fail_msg("message: %s", rl__errdetail_get(&err) ? rl__errdetail_get(&err) : "(none)");

    ASSERT_OK(open_log(dir, 3000, &log, NULL)); /* small segments: several files to read */
    for (rl__version v = 1; v <= 60; v++) {
        ASSERT_OK(append_version(log, v));
        ASSERT_OK(rl__commitlog_sync(log));
    }
    rl__commitlog_close(log);
    rl__os_fault_arm(RL_OS_READ, -1, 0, 0); /* count only */
    ASSERT_OK(open_log(dir, 3000, &log, NULL));
    long reads = rl__os_fault_count(RL_OS_READ);
    rl__os_fault_disarm();
    rl__commitlog_status st;
    rl__commitlog_get_status(log, &st);
    ASSERT_TRUE(st.segments >= 2); /* the reads cover more than one segment */
    rl__commitlog_close(log);
    ASSERT_TRUE(reads >= 2);
    for (long i = 0; i < reads; i++) {
        rl__errdetail_init(&err, NULL);
        rl__os_fault_arm(RL_OS_READ, i, EIO, 0);
        rc = open_log(dir, 3000, &log, &err);
        int fired = rl__os_fault_fired();
        rl__os_fault_disarm();
        ASSERT_TRUE(fired);
        ASSERT_RC(rc, RL_E_IO_ERROR);
        if (!rl__errdetail_get(&err) || !strstr(rl__errdetail_get(&err), "cannot read commit log segment"))
            fail_msg("read %ld: message: %s", i, rl__errdetail_get(&err) ? rl__errdetail_get(&err) : "(none)");
    }
    ASSERT_OK(open_log(dir, 3000, &log, NULL));
    expect_versions(log, 0, 1, 60);
    rl__commitlog_close(log);
    rm_logdir(dir);
}

RL_TEST_MAIN(T(commitlog_1_1_append_sync_reopen), T(commitlog_1_2_reads_versions_lock), T(commitlog_1_3_torn_tail),
             T(commitlog_1_4_bad_checksum_tail), T(commitlog_1_5_corruption_in_the_middle),
             T(commitlog_1_6_segments_truncation), T(commitlog_1_7_injected_failures), T(commitlog_1_8_crash_loop),
             T(commitlog_1_9_open_mkdir_read_fail))
