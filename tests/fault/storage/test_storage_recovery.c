/* test_storage_recovery.c — recovery never destroys data (defects 1–3) and read-only
 * opening of the durable `memory` engine.
 *
 *   recovery-1  checkpoints: a junk or corrupt newest checkpoint fails open naming the file and
 *               changes no file; older files are deleted only by a later checkpoint, never by
 *               open; ckpt-(S+1).tmp is removed only after ckpt-S was verified.
 *   recovery-2  missing checkpoints: a log numbered above the newest checkpoint is refused,
 *               naming the missing checkpoint, and no file changes.
 *   recovery-3  the log tail: a torn (short) last record and a complete last record with a bad
 *               checksum both end the log, but their bytes are moved to a side file
 *               (log-S.discarded-OFFSET) byte for byte before the log is truncated; the warning
 *               names the side file and the kind, and the status reports it. A failure while
 *               saving the tail fails open and leaves the log whole. Zeros where a record
 *               would start end the log quietly (the log is written over zeros written ahead
 *               of it); a record cut short by them is torn.
 *   recovery-4  read-only: recovery into memory that changes no file, not even LOCK (a torn
 *               tail is ignored and reported), readers beside a writer in either order each
 *               keeping the snapshot it opened, writes refused with read_only_database, and
 *               readers opening again and again beside a writer that checkpoints every few KiB
 *               always see a consistent state.
 *
 * A "snapshot" of a directory is every entry's name and bytes, sorted by name: two snapshots are
 * equal when no file was created, deleted, renamed or changed.
 */
#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/log.h"
#include "storage/os.h"
#include "storage/storage.h"
#include "test.h"

/* ---- helpers ----------------------------------------------------------------------------- */

static int open_opts(const char *dir, int read_only, rl__storage **st, rl__errdetail *err) {
    rl__storage_options o = {0};
    o.dir = dir;
    o.no_sync = 1; /* formats and file sets are checked here, not power loss */
    o.read_only = read_only;
    return rl__storage_open(&o, st, err);
}

static int open_dir(const char *dir, rl__storage **st, rl__errdetail *err) { return open_opts(dir, 0, st, err); }

/* Version v sets k<v % 50> and "last" to a value naming v, and ADDs 1 to "count". */
static void put_version(rl__storage *st, rl__version v) {
    char k[16], val[64];
    snprintf(k, sizeof k, "k%02d", (int)(v % 50));
    int vl = snprintf(val, sizeof val, "value-of-version-%llu", (unsigned long long)v);
    rl__mutation m[] = {
        {RL_MUT_SET, (const uint8_t *)k, 3, (const uint8_t *)val, (uint32_t)vl},
        {RL_MUT_SET, (const uint8_t *)"last", 4, (const uint8_t *)val, (uint32_t)vl},
        {RL_MUT_ADD, (const uint8_t *)"count", 5, (const uint8_t *)"\x01\0\0\0\0\0\0\0", 8},
    };
    ASSERT_OK(rl__storage_apply(st, v, m, 3));
}

/* Every key-value at the latest version (and the version), serialized, into out. */
static void dump(rl__storage *st, rl_buf *out) {
    rl_arena a;
    rl__arena_init(&a, 0);
    rl_keyvalue *kvs;
    int n, more;
    rl__buf_reset(out);
    rl__buf_append_u64be(out, rl__storage_latest_version(st));
    ASSERT_OK(
        rl__storage_get_range(st, rl__storage_latest_version(st), "", 0, "\xff", 1, 0, 0, 0, &a, &kvs, &n, &more));
    for (int i = 0; i < n; i++) {
        rl__buf_append_u32be(out, kvs[i].key_len);
        rl__buf_append(out, kvs[i].key, kvs[i].key_len);
        rl__buf_append_u32be(out, kvs[i].value_len);
        rl__buf_append(out, kvs[i].value, kvs[i].value_len);
    }
    rl__arena_release(&a);
}

/* "dir/name" in a static buffer (one of four, so a few can be used at once). */
static const char *pathf(const char *dir, const char *fmt, unsigned long long n) {
    static char bufs[4][4200];
    static int next;
    char name[200];
    char *p = bufs[next++ % 4];
    snprintf(name, sizeof name, fmt, n);
    snprintf(p, 4200, "%s/%s", dir, name);
    return p;
}
#define CKPT(dir, s) pathf((dir), "ckpt-%016llx", (unsigned long long)(s))
#define LOG(dir, s) pathf((dir), "log-%016llx", (unsigned long long)(s))

static int exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0;
}

static off_t file_size(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 ? sb.st_size : -1;
}

static uint8_t *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("cannot read %s", path);
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *p = rl__malloc(*len + 1);
    ASSERT_EQ(fread(p, 1, *len, f), *len);
    fclose(f);
    return p;
}

static void spit(const char *path, const void *p, size_t len) {
    FILE *f = fopen(path, "wb");
    ASSERT_NOT_NULL(f);
    ASSERT_EQ(fwrite(p, 1, len, f), len);
    fclose(f);
}

static int cmp_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Every entry of dir (name, size, bytes), sorted by name, serialized into out. */
static void snapshot(const char *dir, rl_buf *out) {
    char *names[256];
    int n = 0;
    DIR *d = opendir(dir);
    ASSERT_NOT_NULL(d);
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        ASSERT_TRUE(n < 256);
        names[n++] = strdup(de->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp_names);
    rl__buf_reset(out);
    for (int i = 0; i < n; i++) {
        size_t len;
        char full[4200];
        snprintf(full, sizeof full, "%s/%s", dir, names[i]);
        uint8_t *p = slurp(full, &len);
        rl__buf_printf(out, "%s %zu\n", names[i], len);
        rl__buf_append(out, p, len);
        rl__free(p);
        free(names[i]);
    }
}

/* Names of the entries of dir, sorted, one per line (for failure messages). */
static void listing(const char *dir, rl_buf *out) {
    char *names[256];
    int n = 0;
    DIR *d = opendir(dir);
    ASSERT_NOT_NULL(d);
    struct dirent *de;
    while ((de = readdir(d)) != NULL && n < 256)
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) names[n++] = strdup(de->d_name);
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp_names);
    rl__buf_reset(out);
    for (int i = 0; i < n; i++) {
        rl__buf_printf(out, "%s ", names[i]);
        free(names[i]);
    }
}

static void assert_same_snapshot(const rl_buf *before, const char *dir, const char *what) {
    rl_buf now, names;
    rl__buf_init(&now);
    rl__buf_init(&names);
    snapshot(dir, &now);
    if (now.len != before->len || memcmp(now.data, before->data, now.len) != 0) {
        listing(dir, &names);
        fail_msg("%s: the directory changed (now: %s)", what, (const char *)names.data);
    }
    rl__buf_release(&now);
    rl__buf_release(&names);
}

/* Capture stderr (the engine's warnings) into a file between begin and end. */
typedef struct {
    int saved;
    char path[4200];
} capture;

static void capture_begin(capture *c, const char *dir) {
    snprintf(c->path, sizeof c->path, "%s-stderr-%d.txt", dir, (int)getpid());
    fflush(stderr);
    c->saved = dup(2);
    int fd = open(c->path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ASSERT_TRUE(fd >= 0 && c->saved >= 0);
    dup2(fd, 2);
    close(fd);
}

/* Restore stderr; the captured text (heap, free()) is returned. */
static char *capture_end(capture *c) {
    fflush(stderr);
    dup2(c->saved, 2);
    close(c->saved);
    char *buf = calloc(1, 65536);
    FILE *f = fopen(c->path, "r");
    size_t n = f ? fread(buf, 1, 65535, f) : 0;
    if (f) fclose(f);
    unlink(c->path);
    buf[n] = 0;
    fputs(buf, stderr); /* keep the warnings visible in the test log */
    return buf;
}

/* A database with a checkpoint (ckpt-1: versions 1..10) and log-1 holding versions 11..20. */
static void make_db(const char *dir, rl_buf *state) {
    rl__storage *st;
    ASSERT_OK(open_dir(dir, &st, NULL));
    for (rl__version v = 1; v <= 10; v++) put_version(st, v);
    ASSERT_OK(rl__storage_checkpoint(st));
    for (rl__version v = 11; v <= 20; v++) put_version(st, v);
    ASSERT_OK(rl__storage_sync(st));
    if (state) dump(st, state);
    rl__storage_close(st);
    ASSERT_TRUE(exists(CKPT(dir, 1)));
    ASSERT_TRUE(file_size(LOG(dir, 1)) > 0);
}

/* Byte offsets where each record of a log file starts (the walk trusts the length fields: the
 * file is one the engine wrote). Returns the count; offs[count] is the file size. */
static int record_offsets(const uint8_t *p, size_t n, size_t *offs, int cap) {
    int k = 0;
    size_t off = 0;
    while (off + 24 <= n && k < cap - 1) {
        offs[k++] = off;
        uint32_t len = (uint32_t)p[off + 8] | (uint32_t)p[off + 9] << 8 | (uint32_t)p[off + 10] << 16 |
                       (uint32_t)p[off + 11] << 24;
        off += 24 + len;
    }
    offs[k] = off;
    return k;
}

/* ---- recovery-1: checkpoints ------------------------------------------------------------- */

/* Defect 1: a junk file named like a newer checkpoint. Open fails naming it and changes no
 * file; once the junk is removed, the database opens with all its data. */
TEST(recovery_1_1_junk_newer_checkpoint) {
    char *dir = rl_test_tmpdir("rec-junk");
    rl_buf want, got, snap;
    rl__errdetail err;
    rl__buf_init(&want);
    rl__buf_init(&got);
    rl__buf_init(&snap);
    rl__errdetail_init(&err, NULL);
    make_db(dir, &want);
    spit(CKPT(dir, 0xff), "junk\n", 5);
    snapshot(dir, &snap);
    rl__storage *st = NULL;
    ASSERT_RC(open_dir(dir, &st, &err), RL_E_CHECKPOINT_CORRUPT);
    ASSERT_NULL(st);
    if (!strstr(rl__errdetail_get(&err), "ckpt-00000000000000ff"))
        fail_msg("message does not name the file: %s", rl__errdetail_get(&err));
    assert_same_snapshot(&snap, dir, "failed open");
    /* A second try changes nothing either. */
    ASSERT_RC(open_dir(dir, &st, NULL), RL_E_CHECKPOINT_CORRUPT);
    assert_same_snapshot(&snap, dir, "second failed open");
    ASSERT_EQ(unlink(CKPT(dir, 0xff)), 0);
    ASSERT_OK(open_dir(dir, &st, NULL));
    dump(st, &got);
    ASSERT_MEM_EQ(got.data, got.len, want.data, want.len);
    ASSERT_EQ(rl__storage_latest_version(st), 20);
    rl__storage_close(st);
    rl__buf_release(&want);
    rl__buf_release(&got);
    rl__buf_release(&snap);
    rl_test_rmtree(dir);
    free(dir);
}

/* Leftovers of an interrupted checkpoint (ckpt-1 and log-1 beside ckpt-2 and log-2): open keeps
 * them; a corrupt ckpt-2 fails open naming it with every file kept (no fallback to ckpt-1);
 * only the next checkpoint, once ckpt-3 is durable, deletes everything older. */
TEST(recovery_1_2_leftovers_kept_until_next_checkpoint) {
    char *dir = rl_test_tmpdir("rec-left");
    rl_buf want, got, snap;
    rl__errdetail err;
    rl__buf_init(&want);
    rl__buf_init(&got);
    rl__buf_init(&snap);
    rl__errdetail_init(&err, NULL);
    make_db(dir, NULL);
    size_t c1n, l1n;
    uint8_t *c1 = slurp(CKPT(dir, 1), &c1n), *l1 = slurp(LOG(dir, 1), &l1n);
    rl__storage *st;
    ASSERT_OK(open_dir(dir, &st, NULL));
    ASSERT_OK(rl__storage_checkpoint(st)); /* ckpt-2; deletes ckpt-1 and log-1 */
    for (rl__version v = 21; v <= 25; v++) put_version(st, v);
    ASSERT_OK(rl__storage_sync(st));
    dump(st, &want);
    rl__storage_close(st);
    ASSERT_FALSE(exists(CKPT(dir, 1)));
    ASSERT_FALSE(exists(LOG(dir, 1)));
    /* As if the process had died before deleting them. */
    spit(CKPT(dir, 1), c1, c1n);
    spit(LOG(dir, 1), l1, l1n);
    snapshot(dir, &snap);
    ASSERT_OK(open_dir(dir, &st, NULL));
    dump(st, &got);
    ASSERT_MEM_EQ(got.data, got.len, want.data, want.len);
    rl__storage_close(st);
    assert_same_snapshot(&snap, dir, "open with leftovers");
    /* A corrupt newest checkpoint: refused, nothing deleted, no fallback to ckpt-1. */
    size_t c2n;
    uint8_t *c2 = slurp(CKPT(dir, 2), &c2n);
    c2[c2n / 2] ^= 0x10;
    spit(CKPT(dir, 2), c2, c2n);
    snapshot(dir, &snap);
    ASSERT_RC(open_dir(dir, &st, &err), RL_E_CHECKPOINT_CORRUPT);
    if (!strstr(rl__errdetail_get(&err), "ckpt-0000000000000002"))
        fail_msg("message does not name the file: %s", rl__errdetail_get(&err));
    assert_same_snapshot(&snap, dir, "open of a corrupt newest checkpoint");
    c2[c2n / 2] ^= 0x10;
    spit(CKPT(dir, 2), c2, c2n);
    /* The next checkpoint deletes every older file; open did not. */
    ASSERT_OK(open_dir(dir, &st, NULL));
    ASSERT_TRUE(exists(CKPT(dir, 1)) && exists(LOG(dir, 1)));
    ASSERT_OK(rl__storage_checkpoint(st));
    ASSERT_FALSE(exists(CKPT(dir, 1)));
    ASSERT_FALSE(exists(LOG(dir, 1)));
    ASSERT_FALSE(exists(CKPT(dir, 2)));
    ASSERT_FALSE(exists(LOG(dir, 2)));
    ASSERT_TRUE(exists(CKPT(dir, 3)) && exists(LOG(dir, 3)));
    dump(st, &got);
    ASSERT_MEM_EQ(got.data, got.len, want.data, want.len);
    rl__storage_close(st);
    rl__free(c1);
    rl__free(l1);
    rl__free(c2);
    rl__buf_release(&want);
    rl__buf_release(&got);
    rl__buf_release(&snap);
    rl_test_rmtree(dir);
    free(dir);
}

/* ckpt-(S+1).tmp (an interrupted checkpoint) is deleted by a writable open only after ckpt-S
 * and log-S were verified; when ckpt-S is corrupt it stays. Another .tmp (not the one the
 * protocol leaves) is never deleted by open. */
TEST(recovery_1_3_tmp_removed_after_verification) {
    char *dir = rl_test_tmpdir("rec-tmp");
    rl_buf snap;
    rl__buf_init(&snap);
    make_db(dir, NULL);
    const char *tmp2 = pathf(dir, "ckpt-%016llx.tmp", 2), *tmp9 = pathf(dir, "ckpt-%016llx.tmp", 9);
    char t2[4200], t9[4200];
    snprintf(t2, sizeof t2, "%s", tmp2);
    snprintf(t9, sizeof t9, "%s", tmp9);
    spit(t2, "RLCKPT01 partial", 16);
    spit(t9, "someone else's", 14);
    size_t cn;
    uint8_t *c = slurp(CKPT(dir, 1), &cn);
    c[40] ^= 1;
    spit(CKPT(dir, 1), c, cn);
    snapshot(dir, &snap);
    rl__storage *st;
    ASSERT_RC(open_dir(dir, &st, NULL), RL_E_CHECKPOINT_CORRUPT);
    assert_same_snapshot(&snap, dir, "open of a corrupt checkpoint with a .tmp");
    c[40] ^= 1;
    spit(CKPT(dir, 1), c, cn);
    ASSERT_OK(open_dir(dir, &st, NULL));
    ASSERT_FALSE(exists(t2));
    ASSERT_TRUE(exists(t9));
    rl__storage_close(st);
    rl__free(c);
    rl__buf_release(&snap);
    rl_test_rmtree(dir);
    free(dir);
}

/* ---- recovery-2: missing checkpoints ----------------------------------------------------- */

/* Defect 2: ckpt-1 deleted, log-1 left. Open is refused naming ckpt-1; nothing changes. */
TEST(recovery_2_1_missing_checkpoint) {
    char *dir = rl_test_tmpdir("rec-missing");
    rl_buf snap;
    rl__errdetail err;
    rl__buf_init(&snap);
    rl__errdetail_init(&err, NULL);
    make_db(dir, NULL);
    ASSERT_EQ(unlink(CKPT(dir, 1)), 0);
    snapshot(dir, &snap);
    rl__storage *st = NULL;
    int rc = open_dir(dir, &st, &err);
    if (rc == RL_OK) {
        rl__storage_status s;
        rl__storage_get_status(st, &s);
        rl__storage_close(st);
        fail_msg("opened with %llu keys", (unsigned long long)s.keys);
    }
    ASSERT_RC(rc, RL_E_CHECKPOINT_CORRUPT);
    const char *m = rl__errdetail_get(&err);
    if (!strstr(m, "ckpt-0000000000000001") || !strstr(m, "missing"))
        fail_msg("message does not name the missing checkpoint: %s", m);
    assert_same_snapshot(&snap, dir, "refused open");
    rl__buf_release(&snap);
    rl_test_rmtree(dir);
    free(dir);
}

/* The missing checkpoint is not the newest one: ckpt-1 and log-1 (leftovers) with log-2 but no
 * ckpt-2. Refused naming ckpt-2 (not a silent open of the older state). */
TEST(recovery_2_2_missing_newer_checkpoint) {
    char *dir = rl_test_tmpdir("rec-missing2");
    rl_buf snap;
    rl__errdetail err;
    rl__buf_init(&snap);
    rl__errdetail_init(&err, NULL);
    make_db(dir, NULL);
    size_t c1n, l1n;
    uint8_t *c1 = slurp(CKPT(dir, 1), &c1n), *l1 = slurp(LOG(dir, 1), &l1n);
    rl__storage *st;
    ASSERT_OK(open_dir(dir, &st, NULL));
    ASSERT_OK(rl__storage_checkpoint(st));
    put_version(st, 21);
    ASSERT_OK(rl__storage_sync(st));
    rl__storage_close(st);
    spit(CKPT(dir, 1), c1, c1n);
    spit(LOG(dir, 1), l1, l1n);
    ASSERT_EQ(unlink(CKPT(dir, 2)), 0);
    snapshot(dir, &snap);
    ASSERT_RC(open_dir(dir, &st, &err), RL_E_CHECKPOINT_CORRUPT);
    const char *m = rl__errdetail_get(&err);
    if (!strstr(m, "ckpt-0000000000000002") || !strstr(m, "missing"))
        fail_msg("message does not name the missing checkpoint: %s", m);
    assert_same_snapshot(&snap, dir, "refused open");
    rl__free(c1);
    rl__free(l1);
    rl__buf_release(&snap);
    rl_test_rmtree(dir);
    free(dir);
}

/* S = 0 is the empty database: log-0 without any checkpoint is valid, and an empty directory
 * opens empty. */
TEST(recovery_2_3_log0_needs_no_checkpoint) {
    char *dir = rl_test_tmpdir("rec-log0");
    rl__storage *st;
    ASSERT_OK(open_dir(dir, &st, NULL));
    ASSERT_EQ(rl__storage_latest_version(st), 0);
    put_version(st, 1);
    ASSERT_OK(rl__storage_sync(st));
    rl__storage_close(st);
    ASSERT_TRUE(exists(LOG(dir, 0)));
    ASSERT_OK(open_dir(dir, &st, NULL));
    ASSERT_EQ(rl__storage_latest_version(st), 1);
    rl__storage_close(st);
    rl_test_rmtree(dir);
    free(dir);
}

/* ---- recovery-3: the log tail ------------------------------------------------------------ */

/* Damage the last record of log-1 of a fresh make_db: flip one byte in its payload (bad
 * checksum) or cut its last `cut` bytes (torn). Returns the record's offset; *out_bytes gets
 * the damaged tail as it is on disk (heap) and *out_len its length. */
static size_t damage_last_record(const char *dir, int flip, size_t cut, uint8_t **out_bytes, size_t *out_len) {
    size_t n, offs[64];
    uint8_t *p = slurp(LOG(dir, 1), &n);
    int k = record_offsets(p, n, offs, 64);
    ASSERT_EQ(offs[k], n);
    ASSERT_TRUE(k == 10);
    size_t off = offs[k - 1];
    if (flip) p[off + 30] ^= 0x20;
    n -= cut;
    spit(LOG(dir, 1), p, n);
    *out_len = n - off;
    *out_bytes = rl__malloc(*out_len);
    memcpy(*out_bytes, p + off, *out_len);
    rl__free(p);
    return off;
}

/* Open after damage_last_record: succeeds at version 19; the log is truncated at the record;
 * the side file named in the warning holds the damaged bytes exactly; the warning says `kind`
 * and the status reports `want_tail`. */
static void check_tail_recovery(const char *dir, size_t off, const uint8_t *tail, size_t tail_len, const char *kind,
                                int want_tail, const char *side) {
    capture cap;
    rl__errdetail err;
    rl__errdetail_init(&err, NULL);
    rl__storage *st = NULL;
    capture_begin(&cap, dir);
    int rc = open_dir(dir, &st, &err);
    char *warn = capture_end(&cap);
    if (rc != RL_OK) fail_msg("open: %s: %s", rl_error_name(rc), rl__errdetail_get(&err));
    ASSERT_EQ(rl__storage_latest_version(st), 19);
    ASSERT_EQ(file_size(LOG(dir, 1)), (off_t)off);
    if (!exists(side)) fail_msg("no side file %s (warning: %s)", side, warn);
    size_t sn;
    uint8_t *sp = slurp(side, &sn);
    ASSERT_MEM_EQ(sp, sn, tail, tail_len);
    rl__free(sp);
    if (!strstr(warn, side)) fail_msg("the warning does not name %s: %s", side, warn);
    if (!strstr(warn, kind)) fail_msg("the warning does not say \"%s\": %s", kind, warn);
    rl__storage_status s;
    memset(&s, 0, sizeof s);
    rl__storage_get_status(st, &s);
    ASSERT_EQ(s.recovery_tail, want_tail);
    ASSERT_EQ(s.recovery_tail_offset, off);
    ASSERT_EQ(s.recovery_tail_bytes, tail_len);
    ASSERT_NOT_NULL(s.recovery_moved_to);
    ASSERT_STR_EQ(s.recovery_moved_to, side);
    ASSERT_NOT_NULL(s.recovery_log);
    ASSERT_STR_EQ(s.recovery_log, LOG(dir, 1));
    /* Writing goes on after the kept records. */
    put_version(st, 19 + 1);
    ASSERT_OK(rl__storage_sync(st));
    rl__storage_close(st);
    ASSERT_OK(open_dir(dir, &st, NULL));
    ASSERT_EQ(rl__storage_latest_version(st), 20);
    rl__storage_get_status(st, &s);
    ASSERT_EQ(s.recovery_tail, RL_TAIL_CLEAN);
    ASSERT_NULL(s.recovery_moved_to);
    rl__storage_close(st);
    free(warn);
}

/* Defect 3: a complete last record with one flipped byte. */
TEST(recovery_3_1_bad_checksum_tail_moved_aside) {
    char *dir = rl_test_tmpdir("rec-badsum");
    make_db(dir, NULL);
    uint8_t *tail;
    size_t tail_len, off = damage_last_record(dir, 1, 0, &tail, &tail_len);
    char side[4200];
    snprintf(side, sizeof side, "%s.discarded-%zu", LOG(dir, 1), off);
    check_tail_recovery(dir, off, tail, tail_len, "complete record with bad checksum", RL_TAIL_BAD_CHECKSUM, side);
    rl__free(tail);
    rl_test_rmtree(dir);
    free(dir);
}

/* A short (torn) last record, cut at several places including inside its header. */
TEST(recovery_3_2_torn_tail_moved_aside) {
    size_t cuts[] = {1, 7, 40};
    for (int i = 0; i < 3; i++) {
        char *dir = rl_test_tmpdir("rec-torn");
        make_db(dir, NULL);
        uint8_t *tail;
        size_t tail_len, off;
        if (cuts[i] == 40) {
            /* Leave only 10 bytes of the record: the file ends inside the header. */
            size_t n, offs[64];
            uint8_t *p = slurp(LOG(dir, 1), &n);
            int k = record_offsets(p, n, offs, 64);
            off = offs[k - 1];
            rl__free(p);
            off = damage_last_record(dir, 0, n - off - 10, &tail, &tail_len);
            ASSERT_EQ(tail_len, 10);
        } else {
            off = damage_last_record(dir, 0, cuts[i], &tail, &tail_len);
        }
        char side[4200];
        snprintf(side, sizeof side, "%s.discarded-%zu", LOG(dir, 1), off);
        check_tail_recovery(dir, off, tail, tail_len, "torn (short record)", RL_TAIL_TORN, side);
        rl__free(tail);
        rl_test_rmtree(dir);
        free(dir);
    }
}

/* The same damage twice at the same offset: the second side file gets another name and the
 * first is left as it was. */
TEST(recovery_3_3_side_file_never_overwritten) {
    char *dir = rl_test_tmpdir("rec-twice");
    make_db(dir, NULL);
    size_t n;
    uint8_t *orig = slurp(LOG(dir, 1), &n);
    uint8_t *tail1, *tail2;
    size_t len1, len2, off = damage_last_record(dir, 1, 0, &tail1, &len1);
    char side[4200], side2[4200];
    snprintf(side, sizeof side, "%s.discarded-%zu", LOG(dir, 1), off);
    snprintf(side2, sizeof side2, "%s.discarded-%zu.1", LOG(dir, 1), off);
    rl__storage *st;
    ASSERT_OK(open_dir(dir, &st, NULL));
    rl__storage_close(st);
    ASSERT_TRUE(exists(side));
    spit(LOG(dir, 1), orig, n);
    ASSERT_EQ(damage_last_record(dir, 0, 3, &tail2, &len2), off);
    capture cap;
    capture_begin(&cap, dir);
    ASSERT_OK(open_dir(dir, &st, NULL));
    char *warn = capture_end(&cap);
    rl__storage_close(st);
    size_t sn;
    uint8_t *sp = slurp(side, &sn);
    ASSERT_MEM_EQ(sp, sn, tail1, len1);
    rl__free(sp);
    if (!exists(side2) || !strstr(warn, side2)) fail_msg("second side file: %s", warn);
    sp = slurp(side2, &sn);
    ASSERT_MEM_EQ(sp, sn, tail2, len2);
    rl__free(sp);
    free(warn);
    rl__free(orig);
    rl__free(tail1);
    rl__free(tail2);
    rl_test_rmtree(dir);
    free(dir);
}

/* Saving the tail fails (the side file's open, write or fsync): open fails with io_error and a
 * message naming the side file, the log keeps every byte, no partial side file is left, and a
 * later open without faults moves the tail aside. */
TEST(recovery_3_4_saving_the_tail_fails) {
    rl__os_kind kinds[] = {RL_OS_OPEN, RL_OS_WRITE, RL_OS_FSYNC};
    for (int k = 0; k < 3; k++) {
        char *dir = rl_test_tmpdir("rec-savefail");
        make_db(dir, NULL);
        uint8_t *tail;
        size_t tail_len, off = damage_last_record(dir, 1, 0, &tail, &tail_len);
        char side[4200];
        snprintf(side, sizeof side, "%s.discarded-%zu", LOG(dir, 1), off);
        off_t full = file_size(LOG(dir, 1));
        rl__storage_options o = {0};
        o.dir = dir; /* with fsync, so that the side file's fsync is a call to fail */
        rl__errdetail err;
        rl__errdetail_init(&err, NULL);
        /* Count the calls of this kind that open makes before the side file. */
        long before;
        {
            char *probe = rl_test_tmpdir("rec-probe");
            make_db(probe, NULL);
            uint8_t *t;
            size_t tl;
            damage_last_record(probe, 1, 0, &t, &tl);
            rl__free(t);
            rl__storage_options po = o;
            po.dir = probe;
            po.read_only = 1; /* the same reads and no side file (it probes LOCK where a writer opens it) */
            rl__storage *pst;
            rl__os_fault_arm(kinds[k], -1, 0, 0);
            ASSERT_OK(rl__storage_open(&po, &pst, NULL));
            before = rl__os_fault_count(kinds[k]);
            rl__os_fault_disarm();
            rl__storage_close(pst);
            rl_test_rmtree(probe);
            free(probe);
        }
        rl__storage *st = NULL;
        capture cap;
        capture_begin(&cap, dir);
        rl__os_fault_arm(kinds[k], before, EIO, 0);
        int rc = rl__storage_open(&o, &st, &err);
        int fired = rl__os_fault_fired();
        rl__os_fault_disarm();
        free(capture_end(&cap));
        ASSERT_TRUE(fired);
        ASSERT_RC(rc, RL_E_IO_ERROR);
        ASSERT_NULL(st);
        if (!strstr(rl__errdetail_get(&err), side)) fail_msg("message: %s", rl__errdetail_get(&err));
        ASSERT_EQ(file_size(LOG(dir, 1)), full);
        ASSERT_FALSE(exists(side));
        check_tail_recovery(dir, off, tail, tail_len, "complete record with bad checksum", RL_TAIL_BAD_CHECKSUM, side);
        rl__free(tail);
        rl_test_rmtree(dir);
        free(dir);
    }
}

/* Zeros after the last record: the log's end, written ahead of its records (memory.c L1; a file
 * system can also extend a file with them after a crash). The open keeps every record (version
 * 20), moves nothing aside and says nothing; the next record overwrites them; a clean close
 * truncates the rest, so the file ends at its last record. */
TEST(recovery_3_5_zeros_after_last_record_end_the_log) {
    char *dir = rl_test_tmpdir("rec-zeros");
    make_db(dir, NULL);
    size_t n;
    uint8_t *p = slurp(LOG(dir, 1), &n);
    size_t offs[64];
    ASSERT_EQ(record_offsets(p, n, offs, 64), 10); /* a clean close left no zeros */
    ASSERT_EQ(offs[10], n);
    uint8_t *q = rl__calloc(1, n + 100000);
    memcpy(q, p, n);
    spit(LOG(dir, 1), q, n + 100000);
    capture cap;
    capture_begin(&cap, dir);
    rl__storage *st;
    ASSERT_OK(open_dir(dir, &st, NULL));
    char *warn = capture_end(&cap);
    ASSERT_EQ(rl__storage_latest_version(st), 20);
    rl__storage_status s;
    rl__storage_get_status(st, &s);
    ASSERT_EQ(s.recovery_tail, RL_TAIL_CLEAN);
    ASSERT_NULL(s.recovery_moved_to);
    if (strstr(warn, "discarded")) fail_msg("warning: %s", warn);
    ASSERT_EQ(file_size(LOG(dir, 1)), (off_t)(n + 100000)); /* left in place, to be overwritten */
    put_version(st, 21);
    ASSERT_OK(rl__storage_sync(st));
    ASSERT_EQ(file_size(LOG(dir, 1)), (off_t)(n + 100000));
    rl__storage_close(st);
    size_t m;
    uint8_t *r = slurp(LOG(dir, 1), &m);
    ASSERT_EQ(record_offsets(r, m, offs, 64), 11);
    ASSERT_EQ(offs[11], m);
    ASSERT_MEM_EQ(r, n, p, n);
    ASSERT_OK(open_dir(dir, &st, NULL));
    ASSERT_EQ(rl__storage_latest_version(st), 21);
    rl__storage_close(st);
    free(warn);
    rl__free(p);
    rl__free(q);
    rl__free(r);
    rl_test_rmtree(dir);
    free(dir);
}

/* A crash while a record was written over the zeros ahead: from a 512-byte boundary of the
 * file inside it (a crash leaves whole sectors) its bytes are still zeros, and more follow; the
 * second time only its first 10 bytes were written. It reads as torn, not as a bad checksum; the
 * bytes from its start to the file's end go to the side file. */
TEST(recovery_3_6_torn_record_into_zeros) {
    for (int i = 0; i < 2; i++) {
        char *dir = rl_test_tmpdir("rec-tornz");
        make_db(dir, NULL);
        size_t n, offs[64];
        uint8_t *p = slurp(LOG(dir, 1), &n);
        ASSERT_EQ(record_offsets(p, n, offs, 64), 10);
        size_t off = offs[9];
        size_t cut = i == 0 ? (off / 512 + 1) * 512 : off + 10;
        if (cut >= n) fail_msg("no 512-byte boundary inside the last record [%zu, %zu)", off, n);
        size_t total = n + 4096;
        uint8_t *q = rl__calloc(1, total);
        memcpy(q, p, cut);
        spit(LOG(dir, 1), q, total);
        char side[4200];
        snprintf(side, sizeof side, "%s.discarded-%zu", LOG(dir, 1), off);
        check_tail_recovery(dir, off, q + off, total - off, "torn (short record)", RL_TAIL_TORN, side);
        rl__free(p);
        rl__free(q);
        rl_test_rmtree(dir);
        free(dir);
    }
}

/* Pages of unsynced records reach the disk in any order in a crash (memory.c L2). A log of 40
 * records; the sector [1024, 1536) of the file never written (zeros), the records after it
 * whole — or, the second time, only the rest of the first sector of the record holding byte 1024
 * zeros. Either way the log ends before that record (torn) and the bytes from it to the file's
 * end go to the side file. A record with one flipped byte before valid ones (no zeros between)
 * is still corrupt: the open is refused. */
TEST(recovery_3_8_hole_before_valid_records) {
    for (int i = 0; i < 2; i++) {
        char *dir = rl_test_tmpdir("rec-hole");
        make_db(dir, NULL);
        rl__storage *st;
        ASSERT_OK(open_dir(dir, &st, NULL));
        for (rl__version v = 21; v <= 50; v++) put_version(st, v);
        ASSERT_OK(rl__storage_sync(st));
        rl__storage_close(st);
        size_t n, offs[64];
        uint8_t *p = slurp(LOG(dir, 1), &n);
        int nrec = record_offsets(p, n, offs, 64);
        ASSERT_EQ(nrec, 40);
        int k = 0;
        while (k + 1 < nrec && offs[k + 1] <= 1024) k++; /* record k holds byte 1024 */
        if (offs[k] % 512 == 0 || offs[nrec - 1] < 1536) fail_msg("log layout: record %d at %zu", k, offs[k]);
        size_t off = offs[k], total = n + 4096;
        uint8_t *q = rl__calloc(1, total);
        memcpy(q, p, n);
        if (i == 0) memset(q + 1024, 0, 512);
        else memset(q + off, 0, (off / 512 + 1) * 512 - off);
        spit(LOG(dir, 1), q, total);
        capture cap;
        capture_begin(&cap, dir);
        ASSERT_OK(open_dir(dir, &st, NULL));
        free(capture_end(&cap));
        ASSERT_EQ(rl__storage_latest_version(st), (rl__version)(10 + k));
        rl__storage_status s;
        rl__storage_get_status(st, &s);
        ASSERT_EQ(s.recovery_tail, RL_TAIL_TORN);
        ASSERT_EQ(s.recovery_tail_offset, off);
        ASSERT_EQ(s.recovery_tail_bytes, total - off);
        rl__storage_close(st);
        char side[4200];
        snprintf(side, sizeof side, "%s.discarded-%zu", LOG(dir, 1), off);
        size_t sn;
        uint8_t *sp = slurp(side, &sn);
        ASSERT_MEM_EQ(sp, sn, q + off, total - off);
        rl__free(sp);
        /* Without zeros between: corrupt, the open refused. */
        ASSERT_EQ(unlink(side), 0);
        memcpy(q, p, n);
        q[off + 30] ^= 0x20;
        spit(LOG(dir, 1), q, n);
        rl__errdetail err;
        rl__errdetail_init(&err, NULL);
        capture_begin(&cap, dir);
        ASSERT_RC(open_dir(dir, &st, &err), RL_E_LOG_CORRUPT);
        free(capture_end(&cap));
        rl__free(p);
        rl__free(q);
        rl_test_rmtree(dir);
        free(dir);
    }
}

/* A writer that stops without closing (as kill -9 would leave it) after its log got zeros ahead:
 * every synced version is there on the next open, quietly. A complete record with a bad
 * checksum before the zeros is still a bad checksum. */
TEST(recovery_3_7_zeros_ahead_after_a_crash) {
    char *dir = rl_test_tmpdir("rec-crashz");
    make_db(dir, NULL);
    rl__storage *st;
    ASSERT_OK(open_dir(dir, &st, NULL));
    for (rl__version v = 21; v <= 30; v++) {
        put_version(st, v);
        ASSERT_OK(rl__storage_sync(st));
    }
    size_t n, offs[64];
    uint8_t *p = slurp(LOG(dir, 1), &n); /* the file as a crash now would leave it */
    int k = record_offsets(p, n, offs, 64);
    ASSERT_TRUE(k >= 20);
    ASSERT_EQ(p[offs[20]], 0); /* zeros ahead of the records */
    size_t end = offs[20];
    for (size_t i = end; i < n; i++)
        if (p[i]) fail_msg("byte %zu of the zeros ahead is %d", i, p[i]);
    rl__storage_close(st);
    spit(LOG(dir, 1), p, n);
    capture cap;
    capture_begin(&cap, dir);
    ASSERT_OK(open_dir(dir, &st, NULL));
    char *warn = capture_end(&cap);
    ASSERT_EQ(rl__storage_latest_version(st), 30);
    rl__storage_status s;
    rl__storage_get_status(st, &s);
    ASSERT_EQ(s.recovery_tail, RL_TAIL_CLEAN);
    if (strstr(warn, "discarded")) fail_msg("warning: %s", warn);
    rl__storage_close(st);
    /* The last record damaged, zeros after it. */
    p[offs[19] + 30] ^= 0x20;
    spit(LOG(dir, 1), p, n);
    char side[4200];
    snprintf(side, sizeof side, "%s.discarded-%zu", LOG(dir, 1), offs[19]);
    capture_begin(&cap, dir);
    ASSERT_OK(open_dir(dir, &st, NULL));
    free(capture_end(&cap));
    ASSERT_EQ(rl__storage_latest_version(st), 29);
    rl__storage_get_status(st, &s);
    ASSERT_EQ(s.recovery_tail, RL_TAIL_BAD_CHECKSUM);
    ASSERT_EQ(s.recovery_tail_offset, offs[19]);
    ASSERT_EQ(s.recovery_tail_bytes, n - offs[19]);
    ASSERT_TRUE(exists(side));
    rl__storage_close(st);
    free(warn);
    rl__free(p);
    rl_test_rmtree(dir);
    free(dir);
}

/* ---- recovery-4: read-only --------------------------------------------------------------- */

/* A read-only open of a directory with a torn tail and leftovers (older files, a .tmp) changes
 * no file: the tail is ignored and reported, not moved; writes are refused. */
TEST(recovery_4_1_read_only_changes_nothing) {
    char *dir = rl_test_tmpdir("rec-ro");
    rl_buf snap, got, want;
    rl__buf_init(&snap);
    rl__buf_init(&got);
    rl__buf_init(&want);
    make_db(dir, NULL);
    rl__storage *st;
    /* The state without the last record, for comparison. */
    {
        char *copy = rl_test_tmpdir("rec-ro-model");
        rl__storage *m;
        ASSERT_OK(open_dir(copy, &m, NULL));
        for (rl__version v = 1; v <= 19; v++) put_version(m, v);
        dump(m, &want);
        rl__storage_close(m);
        rl_test_rmtree(copy);
        free(copy);
    }
    uint8_t *tail;
    size_t tail_len, off = damage_last_record(dir, 0, 5, &tail, &tail_len);
    char t2[4200];
    snprintf(t2, sizeof t2, "%s.tmp", CKPT(dir, 2));
    spit(t2, "partial", 7);
    snapshot(dir, &snap);
    capture cap;
    capture_begin(&cap, dir); /* no writer: the torn tail is damage, and a reader warns */
    ASSERT_OK(open_opts(dir, 1, &st, NULL));
    char *warn = capture_end(&cap);
    if (!strstr(warn, "torn (short record)") || !strstr(warn, LOG(dir, 1))) fail_msg("warning: %s", warn);
    free(warn);
    dump(st, &got);
    ASSERT_MEM_EQ(got.data, got.len, want.data, want.len);
    rl__storage_status s;
    rl__storage_get_status(st, &s);
    ASSERT_EQ(s.read_only, 1);
    ASSERT_EQ(s.recovery_tail, RL_TAIL_TORN);
    ASSERT_EQ(s.recovery_tail_offset, off);
    ASSERT_EQ(s.recovery_tail_bytes, tail_len);
    ASSERT_NULL(s.recovery_moved_to);
    ASSERT_STR_EQ(s.recovery_log, LOG(dir, 1));
    ASSERT_RC(rl__storage_apply(st, 100, NULL, 0), RL_E_READ_ONLY_DATABASE);
    ASSERT_RC(rl__storage_checkpoint(st), RL_E_READ_ONLY_DATABASE);
    ASSERT_OK(rl__storage_sync(st));
    assert_same_snapshot(&snap, dir, "read-only open");
    rl__storage_close(st);
    assert_same_snapshot(&snap, dir, "read-only close");
    rl__free(tail);
    rl__buf_release(&snap);
    rl__buf_release(&got);
    rl__buf_release(&want);
    rl_test_rmtree(dir);
    free(dir);
}

/* Read-only in an empty directory creates LOCK and nothing else; refusals (junk checkpoint,
 * missing checkpoint) are the same as a writable open's. */
TEST(recovery_4_2_read_only_creates_nothing) {
    char *dir = rl_test_tmpdir("rec-ro-empty");
    rl__storage *st;
    rl_buf snap;
    rl__errdetail err;
    rl__buf_init(&snap);
    rl__errdetail_init(&err, NULL);
    ASSERT_OK(open_opts(dir, 1, &st, NULL));
    ASSERT_EQ(rl__storage_latest_version(st), 0);
    rl__storage_close(st);
    rl_buf names;
    rl__buf_init(&names);
    listing(dir, &names);
    ASSERT_STR_EQ((const char *)names.data, ""); /* not even LOCK */
    rl__buf_release(&names);
    rl_test_rmtree(dir);
    free(dir);

    dir = rl_test_tmpdir("rec-ro-refuse");
    make_db(dir, NULL);
    spit(CKPT(dir, 0xff), "junk\n", 5);
    snapshot(dir, &snap);
    ASSERT_RC(open_opts(dir, 1, &st, &err), RL_E_CHECKPOINT_CORRUPT);
    ASSERT_NOT_NULL(strstr(rl__errdetail_get(&err), "ckpt-00000000000000ff"));
    assert_same_snapshot(&snap, dir, "read-only open of a junk checkpoint");
    ASSERT_EQ(unlink(CKPT(dir, 0xff)), 0);
    ASSERT_EQ(unlink(CKPT(dir, 1)), 0);
    snapshot(dir, &snap);
    rl__errdetail_clear(&err);
    ASSERT_RC(open_opts(dir, 1, &st, &err), RL_E_CHECKPOINT_CORRUPT);
    ASSERT_NOT_NULL(strstr(rl__errdetail_get(&err), "ckpt-0000000000000001"));
    assert_same_snapshot(&snap, dir, "read-only open with a missing checkpoint");
    rl__buf_release(&snap);
    rl_test_rmtree(dir);
    free(dir);
}

/* Readers take no lock: they coexist with each other and with one writer, in either order, and
 * each keeps the state it opened; only a second writer is refused. */
TEST(recovery_4_3_readers_beside_a_writer) {
    char *dir = rl_test_tmpdir("rec-ro-lock");
    rl_buf at20, now;
    rl__buf_init(&at20);
    rl__buf_init(&now);
    make_db(dir, &at20);
    rl__storage *r1, *r2, *w = NULL, *w2 = NULL;
    ASSERT_OK(open_opts(dir, 1, &r1, NULL));
    ASSERT_OK(open_dir(dir, &w, NULL)); /* a reader does not keep a writer out */
    ASSERT_RC(open_dir(dir, &w2, NULL), RL_E_DATABASE_LOCKED_BY_PROCESS);
    ASSERT_NULL(w2);
    for (rl__version v = 21; v <= 30; v++) put_version(w, v);
    ASSERT_OK(rl__storage_sync(w));
    ASSERT_OK(open_opts(dir, 1, &r2, NULL)); /* nor a writer a reader */
    ASSERT_EQ(rl__storage_latest_version(r2), 30);
    ASSERT_OK(rl__storage_checkpoint(w)); /* deletes the files r1 read: r1 keeps its snapshot */
    dump(r1, &now);
    ASSERT_TRUE(now.len == at20.len && !memcmp(now.data, at20.data, now.len));
    ASSERT_EQ(rl__storage_latest_version(r2), 30);
    rl__storage_close(w);
    rl__storage_close(r1);
    rl__storage_close(r2);
    rl__buf_release(&at20);
    rl__buf_release(&now);
    rl_test_rmtree(dir);
    free(dir);

    /* The ssd engine keeps its shared lock: no reader beside a writer there, and it says why. */
    dir = rl_test_tmpdir("rec-ro-ssd");
    rl__storage_options so = {0};
    so.dir = dir;
    so.no_sync = 1;
    so.engine = RL_ENGINE_SSD;
    ASSERT_OK(rl__storage_open(&so, &w, NULL));
    so.read_only = 1;
    rl__errdetail err;
    rl__errdetail_init(&err, NULL);
    ASSERT_RC(rl__storage_open(&so, &r1, &err), RL_E_DATABASE_LOCKED_BY_PROCESS);
    if (!strstr(rl__errdetail_get(&err), "no readers beside a writer"))
        fail_msg("message: %s", rl__errdetail_get(&err));
    rl__storage_close(w);
    rl_test_rmtree(dir);
    free(dir);
}

/* A writer thread applies versions (each keeps "count" equal to its version and "last" naming
 * it) and checkpoints every few KiB, while this thread opens read-only again and again: every
 * reader sees a consistent state — count, last and the latest version agree — never an error,
 * and the states it sees never go back. */
typedef struct {
    const char *dir;
    atomic_int stop;
    rl__version written;
} race_writer;

static void *race_write(void *arg) {
    race_writer *rw = arg;
    rl__storage_options o = {0};
    o.dir = rw->dir;
    o.no_sync = 1;
    o.checkpoint_log_bytes = 4096; /* a checkpoint every ~40 versions */
    rl__storage *st;
    if (rl__storage_open(&o, &st, NULL) != RL_OK) abort();
    rl__version v = rl__storage_latest_version(st);
    while (!atomic_load(&rw->stop) && v < 200000) {
        put_version(st, ++v);
        if (v % 8 == 0 && rl__storage_sync(st) != RL_OK) abort();
    }
    rl__storage_close(st);
    rw->written = v;
    return NULL;
}

TEST(recovery_4_5_readers_race_checkpoints) {
    char *dir = rl_test_tmpdir("rec-ro-race");
    make_db(dir, NULL); /* versions 1..20: count == version from here on */
    race_writer rw = {.dir = dir};
    pthread_t t;
    ASSERT_EQ(pthread_create(&t, NULL, race_write, &rw), 0);
    rl__version seen = 0;
    int opens = 0, advanced = 0;
    for (; opens < 300; opens++) {
        rl__storage *r;
        rl__errdetail err;
        rl__errdetail_init(&err, NULL);
        int rc = open_opts(dir, 1, &r, &err);
        if (rc != RL_OK) fail_msg("reader open %d: %s: %s", opens, rl_error_name(rc), rl__errdetail_get(&err));
        rl__version v = rl__storage_latest_version(r);
        rl_arena a;
        rl__arena_init(&a, 0);
        const uint8_t *val;
        uint32_t vl;
        int present;
        char want[64];
        ASSERT_OK(rl__storage_get(r, v, "count", 5, &a, &present, &val, &vl));
        ASSERT_TRUE(present && vl == 8);
        uint64_t count = 0;
        for (int i = 7; i >= 0; i--) count = count << 8 | val[i];
        if (count != v)
            fail_msg("reader %d: count %llu at version %llu", opens, (unsigned long long)count, (unsigned long long)v);
        ASSERT_OK(rl__storage_get(r, v, "last", 4, &a, &present, &val, &vl));
        snprintf(want, sizeof want, "value-of-version-%llu", (unsigned long long)v);
        ASSERT_TRUE(present && vl == strlen(want) && !memcmp(val, want, vl));
        if (v < seen)
            fail_msg("reader %d went back: version %llu after %llu", opens, (unsigned long long)v,
                     (unsigned long long)seen);
        advanced += v > seen;
        seen = v;
        rl__arena_release(&a);
        rl__storage_close(r);
    }
    atomic_store(&rw.stop, 1);
    ASSERT_EQ(pthread_join(t, NULL), 0);
    printf("%d reader opens beside the writer saw %d distinct states, up to version %llu of %llu\n", opens, advanced,
           (unsigned long long)seen, (unsigned long long)rw.written);
    ASSERT_TRUE(advanced > 1); /* the readers really ran beside a moving writer */
    rl_test_rmtree(dir);
    free(dir);
}

/* A read-only memory engine (no directory) refuses writes too. */
TEST(recovery_4_4_read_only_mem) {
    rl__storage_options o = {0};
    o.read_only = 1;
    rl__storage *st;
    ASSERT_OK(rl__storage_open(&o, &st, NULL));
    rl__mutation m = {RL_MUT_SET, (const uint8_t *)"a", 1, (const uint8_t *)"b", 1};
    ASSERT_RC(rl__storage_apply(st, 1, &m, 1), RL_E_READ_ONLY_DATABASE);
    ASSERT_EQ(rl__storage_latest_version(st), 0);
    rl__storage_close(st);
}

RL_TEST_MAIN(T(recovery_1_1_junk_newer_checkpoint), T(recovery_1_2_leftovers_kept_until_next_checkpoint),
             T(recovery_1_3_tmp_removed_after_verification), T(recovery_2_1_missing_checkpoint),
             T(recovery_2_2_missing_newer_checkpoint), T(recovery_2_3_log0_needs_no_checkpoint),
             T(recovery_3_1_bad_checksum_tail_moved_aside), T(recovery_3_2_torn_tail_moved_aside),
             T(recovery_3_3_side_file_never_overwritten), T(recovery_3_4_saving_the_tail_fails),
             T(recovery_3_5_zeros_after_last_record_end_the_log), T(recovery_3_6_torn_record_into_zeros),
             T(recovery_3_7_zeros_ahead_after_a_crash), T(recovery_3_8_hole_before_valid_records),
             T(recovery_4_1_read_only_changes_nothing), T(recovery_4_2_read_only_creates_nothing),
             T(recovery_4_3_readers_beside_a_writer), T(recovery_4_4_read_only_mem),
             T(recovery_4_5_readers_race_checkpoints))
