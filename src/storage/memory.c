/* memory.c — the files of the `memory` engine: the lock file, the write-ahead log, checkpoints
 * and recovery. The formats are in wal.h (log records) and below (checkpoints), mirrored in
 * docs/file-format.md.
 *
 * Directory contents:
 *   LOCK                     flock()ed exclusively by a writer for the life of its handle (a
 *                            second writer fails with RL_E_DATABASE_LOCKED_BY_PROCESS, even from
 *                            the same process); read-only handles take no lock (Readers, below);
 *                            the ssd engine's read-only handles share it (ssd.c)
 *   ckpt-SSSSSSSSSSSSSSSS    checkpoint number S (16 lower-case hex digits): the whole state at
 *                            one version; absent before the first checkpoint (S = 0 is empty)
 *   log-SSSSSSSSSSSSSSSS     the log that follows checkpoint S: records of versions after it
 *   ckpt-SSSSSSSSSSSSSSSS.tmp
 *                            a checkpoint being written
 *   log-SSSSSSSSSSSSSSSS.discarded-OFF[.N]
 *                            the unreadable bytes recovery cut off the end of log-S at byte
 *                            offset OFF (decimal); .N (1, 2, …) when that name is taken. Kept
 *                            for a person: reclayer never reads or deletes them.
 *   anything else            not ours: never read, renamed or deleted
 *
 * Checkpoint file (integers little-endian):
 *
 *   OFFSET SIZE DESCRIPTION
 *   0      8    magic "RLCKPT01"
 *   8      4    checksum: rl__checksum32 of bytes [12, 32)
 *   12     4    format version (1)
 *   16     8    version: the state is the database at this version
 *   24     8    sequence number S (equals the file name's)
 *   32     ...  blocks, each:
 *                 0  4   kind: 0x4B4C4244 ("DBLK", data) or 0x444E4542 ("BEND", end)
 *                 4  4   checksum: rl__checksum32 of bytes [8, 16 + len) of the block
 *                 8  4   len: payload bytes (data: <= 64 MiB; end: 8)
 *                 12 4   count: entries in a data block; 0 in the end block
 *                 16 len payload: data: count entries (klen u32, vlen u32, key, value), keys
 *                        strictly ascending across the whole file; end: total entries (u64)
 *   The end block is last; a file without it, or with bytes after it, is corrupt.
 *
 * Checkpoint protocol (state diagram of one checkpoint; S = current sequence):
 *
 *   write ckpt-(S+1).tmp -> fsync -> rename to ckpt-(S+1) -> fsync dir -> create log-(S+1)
 *   -> fsync dir -> delete every ckpt-T, ckpt-T.tmp, log-T with T <= S   (remove_older)
 *
 * A crash at any point leaves checkpoint S with its complete log-S, or checkpoint S+1 (with or
 * without an empty log-(S+1)) beside leftovers numbered S or lower.
 *
 * The log file (rl__logdir_*, shared with ssd.c). Invariant:
 *   L1. The file holds records in [0, log_bytes) and zeros in [log_bytes, log_alloc), its size.
 *       Records overwrite zeros written ahead of them (64 KiB to 1 MiB at a time, the log's size
 *       within those bounds), so a record's fdatasync changes no file size and skips the file
 *       system's journal (append + fdatasync 314-332 us, overwrite 133-158 us on this machine's
 *       ext4: docs/benchmarks.md, commit100); SQLite's WAL gets the same by reusing its file. A
 *       record starts with a non-zero magic, so zeros where a record would start end the log;
 *       a clean close truncates them. A record cut short by a crash runs into zeros instead of
 *       the file's end: recovery classifies the bytes up to the first 512-byte boundary of the
 *       file at or after where the zeros begin (a crash leaves whole sectors written or not;
 *       the boundary keeps a complete record whose last bytes are zeros complete) — torn when
 *       the record does not fit in them.
 *
 *   L2. Records reach the file in order, but not always its readers or the disk: a reader beside
 *       a live writer may read a later record's bytes after it was written and an earlier one's
 *       before (the zeros still there), and a crash may leave pages of unsynced records on disk
 *       in any order. Neither can put zeros before an acknowledged record (its fdatasync covered
 *       everything written before it). So a bad record followed by valid ones is the log's tail,
 *       not corruption, when zeros of L1 lie between (the rest of the bad record's first sector,
 *       or a whole sector before the next valid record), and always for a read-only open while a
 *       writer holds the lock; recovery then ends the log there as for any tail (step 4). Damage
 *       that zeroes a whole sector of acknowledged records therefore reads as a tail: the bytes
 *       are still moved to the side file, never destroyed (R4), and the warning names them.
 *
 * Recovery (memory_open; rl__logdir_* are shared with ssd.c). Invariants:
 *   R1. Open deletes, renames or truncates nothing it has not first replaced by verified state:
 *       files older than the newest checkpoint are deleted only by the next checkpoint, after
 *       ckpt-(S+1) is durable (remove_older); a writable open removes ckpt-(S+1).tmp only after
 *       ckpt-S and log-S were verified (a .tmp is never state: the rename is the commit point).
 *   R2. A read-only open changes no file at all (not even LOCK).
 *   R3. Any refusal leaves every file as it was, and its message names the file.
 *   R4. The bytes of a discarded log tail are never destroyed: a writable open copies them to a
 *       side file (fsynced, directory fsynced) before it truncates the log.
 *
 * Steps:
 *   1. take_lock; scan_dir (reads names only).
 *   2. A log-T with T above the newest checkpoint S (or any log-T, T > 0, without a checkpoint)
 *      means ckpt-T is missing: refuse with RL_E_CHECKPOINT_CORRUPT naming ckpt-T. Opening the
 *      older state (or the empty database) would silently drop the commits of log-T.
 *   3. Load ckpt-S verifying everything; a defect is RL_E_CHECKPOINT_CORRUPT naming the file and
 *      offset. There is no fallback to an older checkpoint, and a file that merely has the name
 *      (junk, another program's file) is refused the same way: a checkpoint whose first bytes
 *      were lost looks exactly like junk, and treating it as "not ours" would open older state.
 *      The message says to move the file out of the directory if it is not ours.
 *   4. Replay log-S. Zeros from where a record would start to the file's end are the log's end
 *      (L1). A record that fails to decode ends the log (the tail) when no valid record starts
 *      anywhere after it, or when zeros lie between (L2); otherwise, or when versions do not
 *      increase, open fails with RL_E_LOG_CORRUPT naming the file and offset. The tail is classified (rl__wal_classify_tail):
 *        torn          the file, or its written part before the zeros that end it (L1), ends
 *                      inside the record's header or payload (normally an
 *                      interrupted write, whose sync never returned: not acknowledged)
 *        bad_checksum  the record is complete but its checksum is wrong (damage after writing;
 *                      its commit may have been acknowledged)
 *        bad_record    not a record at all (bad magic, impossible length, malformed payload)
 *      Writable: rl__wal_cut_tail copies the bytes to log-S.discarded-OFF (never overwriting: O_EXCL,
 *      then .1, .2, …), then the log is truncated at OFF and fsynced; a failure of either step
 *      fails open with the log still whole (or the bytes already saved). Read-only: the replay
 *      stops there and the file is left alone. Both log a warning naming the log, the offset,
 *      the kind and the side file, and keep it for rl__storage_status (recovery_*).
 *   5. Writable only: remove ckpt-(S+1).tmp; open log-S for writing after its last record
 *      (creating it); fsync dir.
 *      Any other ckpt-T.tmp does not fit the protocol: it is left in place with a warning.
 *
 * Readers (rl__storage_options.read_only): steps 1–4 with no lock and no file changed, so a
 * reader never blocks or waits for a writer, in this process or another, and never changes what
 * it sees; rl__storage_apply and rl__storage_checkpoint return RL_E_READ_ONLY_DATABASE,
 * rl__storage_sync succeeds (nothing to sync). The recovered state lives in memory; the files are
 * not read again after open, so the handle keeps the snapshot it opened, whatever the writer does
 * next. What a reader beside a live writer sees is a consistent state: checkpoint S plus a prefix
 * of log-S, cut at a record boundary (a record the writer is appending reads as a torn or
 * bad-checksum tail and ends the log, left in place). It is the newest state whose log bytes the
 * writer had written when the reader read them — versions applied and written, including any
 * whose fsync is still running (so possibly not yet acknowledged to their committer). A
 * checkpoint the writer completes during the open can delete ckpt-S or log-S under the reader:
 * the open compares the newest checkpoint before and after and, when it changed, starts over
 * (st->f.raced; rl__storage_open tries up to 16 times, and the last attempt's state, consistent
 * but maybe older, is kept).
 *
 * Errors while writing. Every file call goes through storage/os.h (so that tests/fault/storage
 * can fail the Nth open, read, write, fsync, rename, ftruncate or unlink). A
 * failed call is logged at RL_LOG_ERROR with the operation, the file and strerror, and is mapped
 * to RL_E_NO_SPACE (ENOSPC, EDQUOT) or RL_E_IO_ERROR. A failure that may have left the log or the
 * set of files in an unknown state poisons the engine (st->poisoned: every later apply, sync and
 * checkpoint returns that error; reads keep working): any failed write or fsync of the log, and
 * any failure of a checkpoint, since a checkpoint first flushes the log. A checkpoint that runs
 * out of memory before its rename changes nothing on disk that recovery would read: it deletes
 * its .tmp file and returns RL_E_OUT_OF_MEMORY without poisoning (an automatic checkpoint is
 * then retried after the next apply).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/hash.h"
#include "base/log.h"
#include "reclayer/error.h"
#include "storage/os.h"
#include "storage/storage_int.h"
#include "storage/wal.h"

#define CKPT_MAGIC "RLCKPT01"
#define CKPT_HEADER 32
#define BLK_HEADER 16
#define BLK_DATA 0x4B4C4244u
#define BLK_END 0x444E4542u
#define BLK_TARGET (1u << 20)
#define BLK_MAX (64u << 20)
#define PENDING_FLUSH (1u << 20)
#define LOG_STEP_MIN (64u << 10) /* zeros written ahead of the log: its size, within these bounds */
#define LOG_STEP_MAX (1u << 20)
#define DEFAULT_CKPT_BYTES (64ull << 20)

/* The file helpers of os.h, bound to this engine's directory and log prefix. */
#define WHO "storage"

static int io_fail(const char *op, const char *path) { return rl__os_io_fail(WHO, op, path); }

static int write_all(int fd, const uint8_t *p, size_t n, const char *path) {
    return rl__os_write_all(fd, p, n, WHO, path);
}

static int sync_fd(const rl__storage *st, int fd, const char *path) {
    return rl__os_sync_fd(fd, st->f.no_sync, WHO, path);
}

static int sync_dir(const rl__storage *st) { return rl__os_sync_dir(st->f.dir, st->f.no_sync, WHO); }

/* Path "dir/name" into out (a fixed buffer of size PATH_MAX-ish). */
static void path_of(const rl__storage *st, char *out, size_t cap, const char *prefix, uint64_t seq,
                    const char *suffix) {
    snprintf(out, cap, "%s/%s%016" PRIx64 "%s", st->f.dir, prefix, seq, suffix);
}

/* ---- checkpoint load --------------------------------------------------------------------- */

static int load_checkpoint(rl__storage *st, const char *path, uint64_t seq, rl__errdetail *err) {
    uint8_t *buf = NULL;
    size_t n, off = 0;
    uint64_t total = 0;
    int rc = rl__os_read_file(path, &buf, &n);
    const char *why = NULL;
    if (rc != RL_OK) {
        rl__errdetail_append(err, "cannot read checkpoint %s: %s", path, rl_error_name(rc));
        return rc;
    }
    if (n < CKPT_HEADER || memcmp(buf, CKPT_MAGIC, 8) != 0) {
        why = "bad header magic";
        goto corrupt;
    }
    if (rl__checksum32(buf + 12, CKPT_HEADER - 12) != rl__le32(buf + 8)) {
        why = "bad header checksum";
        goto corrupt;
    }
    if (rl__le32(buf + 12) != 1 || rl__le64(buf + 24) != seq) {
        why = "unknown format version or sequence mismatch";
        goto corrupt;
    }
    rl__version v = rl__le64(buf + 16);
    off = CKPT_HEADER;
    for (;;) {
        if (n - off < BLK_HEADER) {
            why = "missing end block";
            goto corrupt;
        }
        const uint8_t *b = buf + off;
        uint32_t kind = rl__le32(b), len = rl__le32(b + 8), count = rl__le32(b + 12);
        if ((kind != BLK_DATA && kind != BLK_END) || len > BLK_MAX || n - off - BLK_HEADER < len) {
            why = "bad block header";
            goto corrupt;
        }
        if (rl__checksum32(b + 8, (size_t)8 + len) != rl__le32(b + 4)) {
            why = "bad block checksum";
            goto corrupt;
        }
        if (kind == BLK_END) {
            if (len != 8 || rl__le64(b + BLK_HEADER) != total || off + BLK_HEADER + len != n) {
                why = "bad end block";
                goto corrupt;
            }
            break;
        }
        const uint8_t *p = b + BLK_HEADER, *end = p + len;
        for (uint32_t i = 0; i < count; i++) {
            if (end - p < 8) goto bad_entry;
            uint32_t kl = rl__le32(p), vl = rl__le32(p + 4);
            p += 8;
            if ((uint64_t)(end - p) < (uint64_t)kl + vl) goto bad_entry;
            rc = rl__storage_map_load(st, v, p, kl, p + kl, vl);
            if (rc == RL_E_CHECKPOINT_CORRUPT) goto bad_entry;
            if (rc != RL_OK) goto fail;
            p += kl + vl;
            total++;
        }
        if (p != end) goto bad_entry;
        off += BLK_HEADER + len;
    }
    st->latest = st->oldest = st->durable = st->f.ckpt_version = v;
    rl__free(buf);
    return RL_OK;
bad_entry:
    why = "bad entry (length or key order)";
corrupt:
    rl__errdetail_append(err, "checkpoint %s corrupt at byte offset %zu: %s", path, off, why);
    rc = RL_CORRUPT(RL_E_CHECKPOINT_CORRUPT);
fail:
    rl__free(buf);
    return rc;
}

/* ---- log replay -------------------------------------------------------------------------- */

const char *rl__storage_tail_name(int kind) {
    switch (kind) {
    case RL_TAIL_CLEAN: return "clean";
    case RL_TAIL_TORN: return "torn";
    case RL_TAIL_BAD_CHECKSUM: return "bad_checksum";
    case RL_TAIL_BAD_RECORD: return "bad_record";
    default: return "unknown";
    }
}

/* The log ends in n unreadable bytes at byte offset off of `path` (p points at them): record
 * what they are for the status and, unless read-only, move them aside and truncate the log at
 * off (rl__wal_cut_tail), so that new records follow the last good one. Read-only leaves the
 * file as it is. Returns RL_OK, or the error of a failed save or truncate (err says which;
 * the log then still holds every byte, or the side file does). */

/* Whether a writer holds the directory's LOCK right now (a reader probes it without keeping it:
 * a shared flock that fails means an exclusive one is held). No LOCK file: no writer. */
static int writer_holds_lock(rl__storage *st) {
    char path[4200];
    snprintf(path, sizeof path, "%s/LOCK", st->f.dir);
    int fd = rl__os_open(path, O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0) return 0;
    int held = flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
    close(fd); /* releases the probe's lock, if it got one */
    return held;
}

static int discard_tail(rl__storage *st, const char *path, size_t off, const uint8_t *p, size_t n, size_t written,
                        rl__errdetail *err) {
    char *side = NULL;
    int rc;
    st->f.tail_kind = rl__wal_classify_tail(p, written); /* a record running into the zeros is torn (L1) */
    st->f.tail_offset = off;
    st->f.tail_bytes = n;
    if (!(st->f.tail_log = rl__strdup(path))) return RL_E_OUT_OF_MEMORY;
    if (st->read_only) { /* a live writer may be appending it right now (Readers): then say it quietly */
        rl__log(writer_holds_lock(st) ? RL_LOG_INFO : RL_LOG_WARN,
                "log %s: the record at byte offset %zu is %s; recovery ends the log before it and "
                "leaves the %zu bytes from there in place (read-only open)",
                path, off, rl__wal_tail_words(st->f.tail_kind), n);
        return RL_OK;
    }
    const rl__wal_file f = {WHO, "log", st->f.dir, st->f.no_sync};
    if ((rc = rl__wal_cut_tail(&f, path, off, p, n, &side, err)) != RL_OK) return rc;
    rl__log(RL_LOG_WARN,
            "log %s: the record at byte offset %zu is %s; the log now ends before it, and the %zu "
            "bytes from there were moved to %s",
            path, off, rl__wal_tail_words(st->f.tail_kind), n, side);
    st->f.tail_moved_to = side;
    return RL_OK;
}

/* L2: where [a, b) holds zeros still waiting for their records — the rest of the 512-byte sector
 * holding byte a, or a whole 512-byte sector of the file inside [a, b): a, that sector's start,
 * or b when there is none. */
static int all_zero(const uint8_t *p, size_t a, size_t e) {
    while (a < e && p[a] == 0) a++;
    return a == e;
}

static size_t hole_at(const uint8_t *p, size_t a, size_t b) {
    size_t s = (a / 512 + 1) * 512;
    if (s > b) s = b;
    if (all_zero(p, a, s)) return a;
    for (; s + 512 <= b; s += 512)
        if (all_zero(p, s, s + 512)) return s;
    return b;
}

/* Replay log `path` (a missing file is an empty log) into the map. A record that does not
 * decode ends the log when no valid record starts after it (discard_tail); otherwise, or when a
 * version does not increase, the open fails with RL_E_LOG_CORRUPT naming the file and offset. */
static int replay_log(rl__storage *st, const char *path, rl__version skip_upto, rl__errdetail *err) {
    uint8_t *buf = NULL;
    size_t n, off = 0;
    int rc = rl__os_read_file(path, &buf, &n);
    if (rc == RL_E_FILE_NOT_FOUND) return RL_OK;
    if (rc != RL_OK) {
        rl__errdetail_append(err, "cannot read log %s: %s", path, rl_error_name(rc));
        return rc;
    }
    st->f.replaying = 1;
    while (off < n) {
        rl__wal_record r;
        if (rl__wal_decode(buf + off, n - off, &r) != RL_OK) {
            size_t z = n; /* the zeros that end the file start at z (invariant L1) */
            while (z > off && buf[z - 1] == 0) z--;
            if (z == off) break;              /* only zeros: the log's end, written ahead of its records */
            size_t w = (z + 511) / 512 * 512; /* L1: a crash leaves whole sectors written or not */
            if (w > n) w = n;
            size_t next = rl__wal_next_valid_record(buf, n, off + 1);
            if (next < n) { /* L2 */
                size_t hole = hole_at(buf, off, next);
                if (hole == next && !(st->read_only && writer_holds_lock(st))) {
                    rl__errdetail_append(err, "log %s corrupt at byte offset %zu: bad record followed by valid ones",
                                         path, off);
                    rc = RL_CORRUPT(RL_E_LOG_CORRUPT);
                    goto out;
                }
                w = hole > off ? hole : off; /* classified on the bytes before the hole */
            }
            if ((rc = discard_tail(st, path, off, buf + off, n - off, w - off, err)) != RL_OK) goto out;
            break;
        }
        if (r.version <= skip_upto) { /* already in the base (ssd: flushed before a crash) */
            off += r.record_len;
            continue;
        }
        if (r.version <= st->latest) {
            rl__errdetail_append(err, "log %s corrupt at byte offset %zu: version %" PRIu64 " does not follow %" PRIu64,
                                 path, off, r.version, st->latest);
            rc = RL_CORRUPT(RL_E_LOG_CORRUPT);
            goto out;
        }
        /* Decode the mutations into a small array (a record holds at most count of them). */
        rl__mutation stackm[64], *m = stackm;
        if (r.count > 64 && !(m = rl__malloc((size_t)r.count * sizeof *m))) {
            rc = RL_E_OUT_OF_MEMORY;
            goto out;
        }
        rl__wal_iter it;
        size_t k = 0;
        rl__wal_iter_init(&it, &r);
        while (k < r.count && rl__wal_iter_next(&it, &m[k])) k++;
        rc = rl__storage_map_apply(st, r.version, m, k);
        if (m != stackm) rl__free(m);
        if (rc != RL_OK) goto out;
        off += r.record_len;
    }
    st->f.log_bytes = off;
out:
    st->f.replaying = 0;
    rl__free(buf);
    return rc;
}

/* ---- open / close ------------------------------------------------------------------------ */

enum { NAME_OTHER = 0, NAME_CKPT, NAME_CKPT_TMP, NAME_LOG };

/* What a directory entry is: ckpt-S, ckpt-S.tmp, log-S (S: exactly 16 lower-case hex digits,
 * stored in *seq), or anything else (NAME_OTHER: side files, LOCK, files that are not ours). */
static int name_kind(const char *name, uint64_t *seq) {
    const char *h;
    int is_ckpt = strncmp(name, "ckpt-", 5) == 0;
    if (is_ckpt) h = name + 5;
    else if (strncmp(name, "log-", 4) == 0) h = name + 4;
    else return NAME_OTHER;
    for (int i = 0; i < 16; i++)
        if (!((h[i] >= '0' && h[i] <= '9') || (h[i] >= 'a' && h[i] <= 'f'))) return NAME_OTHER;
    *seq = strtoull(h, NULL, 16);
    if (h[16] == 0) return is_ckpt ? NAME_CKPT : NAME_LOG;
    if (is_ckpt && strcmp(h + 16, ".tmp") == 0) return NAME_CKPT_TMP;
    return NAME_OTHER;
}

/* What open's scan of the directory found (it changes nothing). */
typedef struct {
    int has_ckpt;        /* a ckpt-S exists */
    uint64_t best;       /* the newest one's S (0 without one: the empty database) */
    int has_prev;        /* a checkpoint older than best exists */
    uint64_t prev;       /* the newest of those */
    int has_orphan_log;  /* a log-T with T > best exists: ckpt-T is missing */
    uint64_t orphan_log; /* the lowest such T */
} dir_scan;

static int scan_dir(rl__storage *st, dir_scan *out, rl__errdetail *err) {
    uint64_t seq;
    struct dirent *de;
    memset(out, 0, sizeof *out);
    DIR *d = opendir(st->f.dir);
    if (!d) {
        int rc = io_fail("opendir", st->f.dir);
        rl__errdetail_append(err, "cannot list storage directory %s: %s", st->f.dir, strerror(errno));
        return rc;
    }
    while ((de = readdir(d)) != NULL)
        if (name_kind(de->d_name, &seq) == NAME_CKPT && (!out->has_ckpt || seq > out->best)) {
            out->best = seq;
            out->has_ckpt = 1;
        }
    rewinddir(d);
    while ((de = readdir(d)) != NULL) {
        int kind = name_kind(de->d_name, &seq);
        if (kind == NAME_CKPT && seq < out->best && (!out->has_prev || seq > out->prev)) {
            out->prev = seq;
            out->has_prev = 1;
        } else if (kind == NAME_LOG && seq > out->best && (!out->has_orphan_log || seq < out->orphan_log)) {
            out->orphan_log = seq;
            out->has_orphan_log = 1;
        } else if (kind == NAME_CKPT_TMP && seq != out->best + 1) {
            rl__log(RL_LOG_WARN,
                    "storage: %s/%s is not the checkpoint in progress after "
                    "ckpt-%016" PRIx64 "; left in place",
                    st->f.dir, de->d_name, out->best);
        }
    }
    closedir(d);
    return RL_OK;
}

/* Take the directory's lock: exclusive for a writer, shared for a read-only handle (readers
 * coexist; a writer excludes everyone). A read-only open creates LOCK only when it is missing. */
static int take_lock(rl__storage *st, rl__errdetail *err) {
    char path[4096];
    if (st->f.lockless) return RL_OK; /* a reader of the memory engine (Readers, above) */
    snprintf(path, sizeof path, "%s/LOCK", st->f.dir);
    return rl__os_lock_file(path, st->read_only, WHO,
                            st->read_only ? "another handle that writes (the ssd engine has no readers beside a "
                                            "writer: its LMDB runs without a reader table)"
                                          : "another handle",
                            &st->f.lock_fd, err);
}

int rl__logdir_open(rl__storage *st, const rl__storage_options *o, rl__errdetail *err) {
    struct stat sb;
    int rc;
    st->f.no_sync = o->no_sync;
    st->f.checkpoint_log_bytes = o->checkpoint_log_bytes ? o->checkpoint_log_bytes : DEFAULT_CKPT_BYTES;
    if (!(st->f.dir = rl__strdup(o->dir))) return RL_E_OUT_OF_MEMORY;
    if (strlen(o->dir) > 4000) return RL_E_INVALID_ARGUMENT;
    if (stat(o->dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        rc = stat(o->dir, &sb) != 0 ? rl__os_map_errno(errno) : RL_E_INVALID_ARGUMENT;
        rl__errdetail_append(err, "storage directory %s: %s", o->dir,
                             rc == RL_E_FILE_NOT_FOUND ? "does not exist" : "not a directory");
        return rc;
    }
    return take_lock(st, err);
}

int rl__logdir_replay(rl__storage *st, uint64_t seq, rl__version skip_upto, rl__errdetail *err) {
    char path[4096];
    path_of(st, path, sizeof path, "log-", seq, "");
    return replay_log(st, path, skip_upto, err);
}

int rl__logdir_open_log(rl__storage *st, uint64_t seq, rl__errdetail *err) {
    char path[4096];
    int rc;
    path_of(st, path, sizeof path, "log-", seq, "");
    st->f.log_fd = rl__os_open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    struct stat sb;
    if (st->f.log_fd < 0 || fstat(st->f.log_fd, &sb) != 0) {
        rc = io_fail(st->f.log_fd < 0 ? "open" : "fstat", path);
        rl__errdetail_append(err, "cannot open log %s: %s", path, strerror(errno));
        return rc;
    }
    /* Recovery left records in [0, log_bytes) and zeros after them (invariant L1). */
    st->f.log_alloc = (uint64_t)sb.st_size > st->f.log_bytes ? (uint64_t)sb.st_size : st->f.log_bytes;
    if ((rc = sync_dir(st)) != RL_OK) {
        rl__errdetail_append(err, "cannot sync directory %s: %s", st->f.dir, rl_error_name(rc));
        return rc;
    }
    return RL_OK;
}

int rl__logdir_sync_dir(rl__storage *st) { return sync_dir(st); }

/* Read DIR/ENGINE into name (trailing newline removed): 1 read, 0 missing, -1 unreadable. */
static int read_engine_file(const char *dir, char *name, size_t cap) {
    char path[4200];
    snprintf(path, sizeof path, "%s/ENGINE", dir);
    int fd = rl__os_open(path, O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0) return errno == ENOENT ? 0 : -1;
    ssize_t n = rl__os_read(fd, name, cap - 1);
    close(fd);
    if (n < 0) return -1;
    name[n] = 0;
    while (n > 0 && (name[n - 1] == '\n' || name[n - 1] == '\r')) name[--n] = 0;
    return 1;
}

int rl__logdir_pick_engine(const rl__storage_options *o, const rl__engine_ops **out, rl__errdetail *err) {
    char name[64], path[4200];
    const rl__engine_ops *want = o->engine == RL_ENGINE_SSD      ? &rl__engine_ssd
                                 : o->engine == RL_ENGINE_MEMORY ? &rl__engine_memory
                                                                 : NULL;
    const rl__engine_ops *have = NULL;
    int r = read_engine_file(o->dir, name, sizeof name);
    if (r < 0) {
        rl__errdetail_append(err, "cannot read %s/ENGINE: %s", o->dir, strerror(errno));
        return rl__os_map_errno(errno);
    }
    if (r == 1) {
        if (strcmp(name, "ssd") == 0) have = &rl__engine_ssd;
        else if (strcmp(name, "memory") == 0) have = &rl__engine_memory;
        else {
            rl__errdetail_append(err, "%s/ENGINE names an unknown storage engine \"%s\"", o->dir, name);
            return RL_CORRUPT(RL_E_CORRUPT_DATA);
        }
    } else {
        snprintf(path, sizeof path, "%s/data.mdb", o->dir);
        struct stat sb;
        if (stat(path, &sb) == 0) {
            rl__errdetail_append(err,
                                 "%s has an LMDB file (data.mdb) but no ENGINE file: restore ENGINE "
                                 "(\"ssd\") or move data.mdb out of the directory",
                                 o->dir);
            return RL_CORRUPT(RL_E_CORRUPT_DATA);
        }
        /* Files of the memory engine (or none: a new database, which gets what was asked). */
        DIR *d = opendir(o->dir);
        if (d) {
            struct dirent *de;
            uint64_t seq;
            while ((de = readdir(d)) != NULL)
                if (name_kind(de->d_name, &seq) != NAME_OTHER) have = &rl__engine_memory;
            closedir(d);
        }
    }
    if (have && want && have != want) {
        rl__errdetail_append(err,
                             "%s holds a database of the %s engine; it cannot be opened with the %s "
                             "engine (omit the engine, or ask for %s)",
                             o->dir, have->name, want->name, have->name);
        return RL_E_INVALID_ARGUMENT;
    }
    *out = have ? have : want ? want : &rl__engine_memory;
    return RL_OK;
}

int rl__logdir_record_engine(rl__storage *st, const char *name, rl__errdetail *err) {
    char path[4200], cur[64], line[80];
    int r = read_engine_file(st->f.dir, cur, sizeof cur);
    if (r == 1) return RL_OK;
    snprintf(path, sizeof path, "%s/ENGINE", st->f.dir);
    int n = snprintf(line, sizeof line, "%s\n", name);
    int rc = rl__os_write_file_atomic(path, line, (size_t)n, st->f.no_sync, WHO, NULL);
    if (rc != RL_OK) rl__errdetail_append(err, "cannot record the engine in %s: %s", path, rl_error_name(rc));
    return rc;
}

/* The newest checkpoint's sequence number (0 without one), or UINT64_MAX when the directory
 * cannot be listed. */
static uint64_t newest_checkpoint(rl__storage *st) {
    dir_scan sc;
    return scan_dir(st, &sc, NULL) == RL_OK ? sc.best : UINT64_MAX;
}

static int recover(rl__storage *st, dir_scan *sc, rl__errdetail *err);

/* The memory engine's open: lock, scan, the newest checkpoint, its log. */
static int memory_open(rl__storage *st, const rl__storage_options *o, rl__errdetail *err) {
    char path[4096];
    dir_scan sc;
    int rc;
    st->f.lockless = st->read_only;
    if ((rc = rl__logdir_open(st, o, err)) != RL_OK) return rc;
    if (st->read_only) { /* Readers: recover, and say whether a writer checkpointed meanwhile */
        uint64_t before = newest_checkpoint(st);
        rc = recover(st, &sc, err);
        st->f.raced = newest_checkpoint(st) != before;
        return rc;
    }
    if ((rc = recover(st, &sc, err)) != RL_OK) return rc;

    /* 4. Writable: the state is verified, so the checkpoint an interrupted checkpoint left
     *    half-written (always ckpt-(S+1).tmp) holds nothing that is not in it: remove it. Then
     *    open (or create) log-S for appending. */
    path_of(st, path, sizeof path, "ckpt-", sc.best + 1, ".tmp");
    if (rl__os_unlink(path) != 0 && errno != ENOENT) io_fail("unlink", path);
    return rl__logdir_open_log(st, sc.best, err);
}

/* Steps 1–3 of recovery into the map: the scan, the newest checkpoint, its log. Changes no file
 * when read-only; *sc: what the scan found. */
static int recover(rl__storage *st, dir_scan *sc_out, rl__errdetail *err) {
    char path[4096];
    dir_scan sc;
    int rc;

    /* 1. Scan (changes nothing). A log above the newest checkpoint needs a checkpoint that is
     *    not there: refuse rather than open an older (or the empty) state. */
    if ((rc = scan_dir(st, &sc, err)) != RL_OK) return rc;
    *sc_out = sc;
    if (sc.has_orphan_log) {
        rl__errdetail_append(err,
                             "checkpoint %s/ckpt-%016" PRIx64 " is missing: %s/log-%016" PRIx64
                             " holds the commits after it and cannot be replayed without it (newest "
                             "checkpoint present: ",
                             st->f.dir, sc.orphan_log, st->f.dir, sc.orphan_log);
        if (sc.has_ckpt) rl__errdetail_append(err, "ckpt-%016" PRIx64 ")", sc.best);
        else rl__errdetail_append(err, "none)");
        rl__errdetail_append(err, "; no file was changed");
        return RL_CORRUPT(RL_E_CHECKPOINT_CORRUPT);
    }
    st->f.seq = sc.best;

    /* 2. Load and verify the newest checkpoint. No fallback to an older one. */
    if (sc.has_ckpt) {
        path_of(st, path, sizeof path, "ckpt-", sc.best, "");
        if ((rc = load_checkpoint(st, path, sc.best, err)) != RL_OK) {
            if (rc == RL_E_CHECKPOINT_CORRUPT) {
                rl__errdetail_append(err, "; no file was changed");
                if (sc.has_prev)
                    rl__errdetail_append(err,
                                         " (the older ckpt-%016" PRIx64 " is kept but not used: recovery "
                                         "never falls back to an older checkpoint)",
                                         sc.prev);
                rl__errdetail_append(err,
                                     "; if this file is not a checkpoint of this database, move it out "
                                     "of %s and open again",
                                     st->f.dir);
            }
            return rc;
        }
    }

    /* 3. Replay its log (a damaged tail is moved aside, or only reported when read-only). */
    path_of(st, path, sizeof path, "log-", sc.best, "");
    if ((rc = replay_log(st, path, 0, err)) != RL_OK) return rc;
    st->durable = st->latest;
    return RL_OK;
}

void rl__logdir_close(rl__storage *st) {
    if (st->f.log_fd >= 0) {
        /* Invariant L1: the zeros ahead go, so a closed log ends at its last record. Not synced
         * (a crash may leave them: they read as the log's end). Not after a failed write
         * (poisoned): what follows the records is then unknown, and recovery sorts it out. */
        if (!st->poisoned && st->f.log_alloc > st->f.log_bytes &&
            rl__os_ftruncate(st->f.log_fd, (off_t)st->f.log_bytes) != 0) {
            char path[4096];
            path_of(st, path, sizeof path, "log-", st->f.seq, "");
            io_fail("ftruncate", path);
        }
        close(st->f.log_fd);
    }
    if (st->f.lock_fd >= 0) close(st->f.lock_fd); /* releases the flock */
    st->f.log_fd = st->f.lock_fd = -1;
    rl__free(st->f.tail_log);
    rl__free(st->f.tail_moved_to);
    st->f.tail_log = st->f.tail_moved_to = NULL;
}

/* ---- writing ----------------------------------------------------------------------------- */

static int poison(rl__storage *st, int rc) {
    if (rc != RL_OK && !st->poisoned) st->poisoned = rc;
    return rc;
}

int rl__logdir_poison(rl__storage *st, int rc) { return poison(st, rc); }

/* Write the pending records to the log file (no fsync). A failure poisons: the log may now end
 * in part of a record. */
int rl__logdir_flush_pending(rl__storage *st) {
    if (st->f.pending.len == 0) return RL_OK;
    char path[4096];
    path_of(st, path, sizeof path, "log-", st->f.seq, "");
    int rc = RL_OK;
    uint64_t need = st->f.log_bytes + st->f.pending.len;
    if (need > st->f.log_alloc) { /* invariant L1: zeros ahead of the records, then the records */
        static const uint8_t zeros[64 << 10];
        uint64_t step = st->f.log_alloc < LOG_STEP_MIN   ? LOG_STEP_MIN
                        : st->f.log_alloc > LOG_STEP_MAX ? LOG_STEP_MAX
                                                         : st->f.log_alloc;
        uint64_t to = st->f.log_alloc + step;
        if (to < need) to = need + step;
        for (uint64_t o = st->f.log_alloc; o < to && rc == RL_OK; o += sizeof zeros) {
            size_t k = to - o < sizeof zeros ? (size_t)(to - o) : sizeof zeros;
            rc = rl__os_pwrite_all(st->f.log_fd, zeros, k, (off_t)o, WHO, path);
        }
        if (rc != RL_OK) return poison(st, rc);
        st->f.log_alloc = to;
    }
    rc = rl__os_pwrite_all(st->f.log_fd, st->f.pending.data, st->f.pending.len, (off_t)st->f.log_bytes, WHO, path);
    if (rc != RL_OK) return poison(st, rc);
    st->f.log_bytes += st->f.pending.len;
    rl__buf_reset(&st->f.pending);
    return RL_OK;
}

int rl__memory_log(rl__storage *st, rl__version v, const rl__mutation *muts, size_t n) {
    size_t mark = st->f.pending.len;
    int rc = rl__wal_encode(&st->f.pending, v, muts, n);
    if (rc != RL_OK) {
        rl__buf_truncate(&st->f.pending, mark);
        st->f.pending.oom = 0; /* the truncated buffer is whole again */
    }
    return rc;
}

/* After a version was applied and its record queued: checkpoint when the log is large, else
 * write the queue out when it is large (engine.h). The version is applied whatever this returns;
 * an error here is an I/O error that poisoned the engine. A checkpoint that ran out of memory
 * (nothing poisoned, nothing changed on disk) is not an error of this apply: it is retried next
 * time. */
int rl__logdir_after_apply(rl__storage *st, int (*checkpoint)(rl__storage *st)) {
    if (st->f.log_bytes + st->f.pending.len >= st->f.checkpoint_log_bytes) {
        int rc = checkpoint(st);
        return rc == RL_E_OUT_OF_MEMORY && !st->poisoned ? RL_OK : rc;
    }
    if (st->f.pending.len >= PENDING_FLUSH) return rl__logdir_flush_pending(st);
    return RL_OK;
}

static int memory_checkpoint(rl__storage *st);

static int memory_after_apply(rl__storage *st) { return rl__logdir_after_apply(st, memory_checkpoint); }

static int memory_sync(rl__storage *st) {
    int rc;
    if (st->poisoned) return st->poisoned;
    if ((rc = rl__logdir_flush_pending(st)) != RL_OK) return rc;
    char path[4096];
    path_of(st, path, sizeof path, "log-", st->f.seq, "");
    if ((rc = sync_fd(st, st->f.log_fd, path)) != RL_OK) return poison(st, rc);
    st->durable = st->latest;
    return RL_OK;
}

int rl__memory_sync_begin(rl__storage *st, rl__version *out_target, int *out_fd, uint64_t *out_seq) {
    int rc;
    *out_fd = -1;
    *out_seq = st->f.seq;
    *out_target = st->latest;
    if (st->poisoned) return st->poisoned;
    if ((rc = rl__logdir_flush_pending(st)) != RL_OK) return rc;
    if (st->f.no_sync) {
        st->durable = st->latest;
        return RL_OK;
    }
    /* A duplicate, so a checkpoint that switches logs meanwhile (and closes log_fd) cannot make
     * the fsync hit a closed or reused descriptor; the old log's data is what needs the fsync. */
    int fd = fcntl(st->f.log_fd, F_DUPFD_CLOEXEC, 0);
    if (fd < 0) {
        /* No descriptor to spare: sync under the lock, as before. */
        rc = memory_sync(st);
        return rc;
    }
    *out_fd = fd;
    return RL_OK;
}

int rl__memory_sync_fd(rl__storage *st, int fd, uint64_t seq) {
    char path[4096];
    path_of(st, path, sizeof path, "log-", seq, "");
    return sync_fd(st, fd, path);
}

int rl__memory_sync_end(rl__storage *st, rl__version target, int fd, int sync_rc) {
    if (fd >= 0) close(fd);
    if (sync_rc != RL_OK) return poison(st, sync_rc);
    if (st->poisoned) return st->poisoned;
    if (target > st->durable) st->durable = target;
    return RL_OK;
}

/* Close the current block of a checkpoint being written (blk holds its 16-byte header
 * placeholder and payload): patch its header, write it to fd (path names the file in the error
 * log), then, after a data block, start the next block in blk. Returns RL_E_OUT_OF_MEMORY
 * without writing when an append to blk failed (blk.data may then be the empty string, too
 * short for a header), or the write's error. */
static int ckpt_emit(int fd, rl_buf *blk, uint32_t kind, uint32_t count, const char *path) {
    int rc = rl__buf_error(blk);
    if (rc != RL_OK || blk->len < BLK_HEADER) return RL_E_OUT_OF_MEMORY;
    uint32_t len = (uint32_t)(blk->len - BLK_HEADER);
    rl__put_le32(blk->data, kind);
    rl__put_le32(blk->data + 8, len);
    rl__put_le32(blk->data + 12, count);
    rl__put_le32(blk->data + 4, rl__checksum32(blk->data + 8, (size_t)8 + len));
    rc = write_all(fd, blk->data, blk->len, path);
    rl__buf_reset(blk);
    if (rc != RL_OK || kind == BLK_END) return rc;
    rl__buf_append(blk, "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0", BLK_HEADER);
    return rl__buf_error(blk);
}

/* Delete every ckpt-T, ckpt-T.tmp and log-T with T < next: called only once ckpt-next is
 * written, fsynced, renamed and the directory fsynced, so each of them is replaced by verified
 * newer state (the current pair, and leftovers of interrupted checkpoints that open kept). Side
 * files (*.discarded-*) and files that are not ours are never deleted. A failed unlink is
 * logged and otherwise harmless: open ignores files older than the newest checkpoint, and the
 * next checkpoint tries again. */
static void remove_older(rl__storage *st, uint64_t next) {
    char path[4200];
    uint64_t seq;
    struct dirent *de;
    DIR *d = opendir(st->f.dir);
    if (!d) {
        io_fail("opendir", st->f.dir);
        /* At least the pair this checkpoint replaces. */
        path_of(st, path, sizeof path, "log-", st->f.seq, "");
        if (rl__os_unlink(path) != 0 && errno != ENOENT) io_fail("unlink", path);
        path_of(st, path, sizeof path, "ckpt-", st->f.seq, "");
        if (rl__os_unlink(path) != 0 && errno != ENOENT) io_fail("unlink", path);
        return;
    }
    while ((de = readdir(d)) != NULL) {
        if (name_kind(de->d_name, &seq) == NAME_OTHER || seq >= next) continue;
        snprintf(path, sizeof path, "%s/%s", st->f.dir, de->d_name);
        if (rl__os_unlink(path) != 0 && errno != ENOENT) io_fail("unlink", path);
    }
    closedir(d);
}

/* The checkpoint being written: its file, current block and counts (ckpt_row). */
typedef struct {
    int fd;
    const char *tmp;
    rl_buf blk;
    uint32_t count;
    uint64_t total;
} ckpt_writer;

/* rl__storage_map_each callback: append one entry, emitting the block when it is full. */
static int ckpt_row(void *ctx, const uint8_t *k, uint32_t kl, const uint8_t *v, uint32_t vl) {
    ckpt_writer *w = ctx;
    uint8_t lens[8];
    int rc;
    rl__put_le32(lens, kl);
    rl__put_le32(lens + 4, vl);
    rl__buf_append(&w->blk, lens, 8);
    rl__buf_append(&w->blk, k, kl);
    rl__buf_append(&w->blk, v, vl);
    w->count++;
    w->total++;
    if (w->blk.len >= BLK_TARGET) {
        if ((rc = rl__buf_error(&w->blk)) != RL_OK) return rc;
        if ((rc = ckpt_emit(w->fd, &w->blk, BLK_DATA, w->count, w->tmp)) != RL_OK) return rc;
        w->count = 0;
    }
    return RL_OK;
}

int rl__logdir_switch(rl__storage *st, uint64_t next) {
    char path[4096];
    int rc;
    path_of(st, path, sizeof path, "log-", next, "");
    int nfd = rl__os_open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (nfd < 0) return io_fail("open", path);
    close(st->f.log_fd);
    st->f.log_fd = nfd;
    if ((rc = sync_dir(st)) != RL_OK) return rc;
    remove_older(st, next);
    st->f.seq = next;
    st->f.log_bytes = st->f.log_alloc = 0;
    st->durable = st->f.ckpt_version = st->latest;
    st->f.checkpoints++;
    return RL_OK;
}

static int memory_checkpoint(rl__storage *st) {
    char tmp[4096], path[4096];
    uint8_t hdr[CKPT_HEADER];
    ckpt_writer w;
    int rc, fd = -1, renamed = 0;
    uint64_t next = st->f.seq + 1;
    memset(&w, 0, sizeof w);
    if (st->poisoned) return st->poisoned;
    tmp[0] = 0;
    rl__buf_init(&w.blk);
    if ((rc = rl__logdir_flush_pending(st)) != RL_OK) goto fail;
    path_of(st, tmp, sizeof tmp, "ckpt-", next, ".tmp");
    path_of(st, path, sizeof path, "ckpt-", next, "");
    fd = rl__os_open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        rc = io_fail("open", tmp);
        goto fail;
    }
    memset(hdr, 0, sizeof hdr);
    memcpy(hdr, CKPT_MAGIC, 8);
    rl__put_le32(hdr + 12, 1);
    rl__put_le64(hdr + 16, st->latest);
    rl__put_le64(hdr + 24, next);
    rl__put_le32(hdr + 8, rl__checksum32(hdr + 12, CKPT_HEADER - 12));
    if ((rc = write_all(fd, hdr, sizeof hdr, tmp)) != RL_OK) goto fail;
    rl__buf_append(&w.blk, "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0", BLK_HEADER);
    w.fd = fd;
    w.tmp = tmp;
    if ((rc = rl__storage_map_each(st, ckpt_row, &w)) != RL_OK) goto fail;
    if (w.count && (rc = ckpt_emit(fd, &w.blk, BLK_DATA, w.count, tmp)) != RL_OK) goto fail;
    uint8_t tot[8];
    rl__put_le64(tot, w.total);
    rl__buf_append(&w.blk, tot, 8);
    if ((rc = rl__buf_error(&w.blk)) != RL_OK) goto fail;
    if ((rc = ckpt_emit(fd, &w.blk, BLK_END, 0, tmp)) != RL_OK) goto fail;
    if ((rc = sync_fd(st, fd, tmp)) != RL_OK) goto fail;
    close(fd);
    fd = -1;
    if (rl__os_rename(tmp, path) != 0) {
        rc = io_fail("rename", tmp);
        goto fail;
    }
    renamed = 1;
    if ((rc = sync_dir(st)) != RL_OK) goto fail;
    /* The checkpoint is durable: switch to a new log and drop the old pair. */
    if ((rc = rl__logdir_switch(st, next)) != RL_OK) goto fail;
    rl__buf_release(&w.blk);
    return RL_OK;
fail:
    if (fd >= 0) close(fd);
    rl__buf_release(&w.blk);
    if (rc == RL_E_OUT_OF_MEMORY && !renamed && !st->poisoned) {
        /* Only memory ran out: the log is whole (flushed or untouched) and the .tmp file is not
         * a checkpoint yet. Drop it and leave the engine writable. */
        if (tmp[0] && rl__os_unlink(tmp) != 0) io_fail("unlink", tmp);
        return rc;
    }
    return poison(st, rc);
}

void rl__memory_status(rl__storage *st, rl__storage_status *out) {
    out->log_bytes = st->f.log_bytes + st->f.pending.len;
    out->checkpoint_version = st->f.ckpt_version;
    out->checkpoints = st->f.checkpoints;
    out->recovery_tail = st->f.tail_kind;
    out->recovery_tail_offset = st->f.tail_offset;
    out->recovery_tail_bytes = st->f.tail_bytes;
    out->recovery_log = st->f.tail_log;
    out->recovery_moved_to = st->f.tail_moved_to;
}

static void memory_close(rl__storage *st) { rl__logdir_close(st); }

const rl__engine_ops rl__engine_memory = {
    .name = "memory",
    .open = memory_open,
    .close = memory_close,
    .log = rl__memory_log,
    .after_apply = memory_after_apply,
    .sync_begin = rl__memory_sync_begin,
    .sync_fd = rl__memory_sync_fd,
    .sync_end = rl__memory_sync_end,
    .checkpoint = memory_checkpoint,
    .status = rl__memory_status,
};
