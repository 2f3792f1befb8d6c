/* durable.c — the files of the `memory` engine: the lock file, the write-ahead log, checkpoints
 * and recovery. The formats are in wal.h (log records) and below (checkpoints), mirrored in
 * docs/file-format.md.
 *
 * Directory contents:
 *   LOCK                     flock()ed for the life of the handle (a second open fails with
 *                            RL_E_DATABASE_LOCKED_BY_PROCESS, even from the same process)
 *   ckpt-SSSSSSSSSSSSSSSS    checkpoint number S (16 lower-case hex digits): the whole state at
 *                            one version; absent before the first checkpoint (S = 0 is empty)
 *   log-SSSSSSSSSSSSSSSS     the log that follows checkpoint S: records of versions after it
 *   ckpt-....tmp             a checkpoint being written (deleted by recovery)
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
 *   write ckpt-(S+1).tmp -> fsync -> rename to ckpt-(S+1) -> fsync dir -> create log-(S+1)
 *   -> fsync dir -> delete log-S and ckpt-S. A crash at any point leaves either checkpoint S
 *   with log-S (complete), or checkpoint S+1 (with or without an empty log-(S+1)); recovery
 *   takes the highest valid-named checkpoint, deletes older files and *.tmp.
 *
 * Recovery replays log-S record by record. A record that fails to decode is a torn tail when no
 * valid record starts anywhere after it: the file is truncated there. Otherwise, or when
 * versions do not increase, open fails with RL_E_LOG_CORRUPT naming the file and byte offset.
 *
 * Errors while writing. Every call that changes files goes through storage/os.h (so that
 * tests/fault/storage can fail the Nth write, fsync, rename, open or ftruncate). A failed call
 * is logged at RL_LOG_ERROR with the operation, the file and strerror, and is mapped to
 * RL_E_NO_SPACE (ENOSPC, EDQUOT) or RL_E_IO_ERROR. A failure that may have left the log or the
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
#include <stdarg.h>
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
#define DEFAULT_CKPT_BYTES (64ull << 20)

static int map_errno(int e) {
    switch (e) {
    case ENOENT:
        return RL_E_FILE_NOT_FOUND;
    case ENOSPC:
    case EDQUOT:
        return RL_E_NO_SPACE;
    case ENOMEM:
        return RL_E_OUT_OF_MEMORY;
    default:
        return RL_E_IO_ERROR;
    }
}

/* Log a failed file operation (errno still set by it) and map errno to an error code. */
static int io_fail(const char *op, const char *path) {
    int e = errno;
    rl__log(RL_LOG_ERROR, "storage: %s %s failed: %s", op, path, strerror(e));
    errno = e;
    return map_errno(e);
}

static void errf(rl_buf *errmsg, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void errf(rl_buf *errmsg, const char *fmt, ...) {
    if (!errmsg) return;
    va_list ap;
    va_start(ap, fmt);
    rl__buf_vprintf(errmsg, fmt, ap);
    va_end(ap);
}

/* Path "dir/name" into out (a fixed buffer of size PATH_MAX-ish). */
static void path_of(const rl_storage *st, char *out, size_t cap, const char *prefix, uint64_t seq,
                    const char *suffix) {
    snprintf(out, cap, "%s/%s%016" PRIx64 "%s", st->dir, prefix, seq, suffix);
}

/* Write n bytes at the file position of fd; path names the file in the error log. */
static int write_all(int fd, const uint8_t *p, size_t n, const char *path) {
    while (n > 0) {
        ssize_t w = rl__os_write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return io_fail("write", path);
        }
        p += w;
        n -= (size_t)w;
    }
    return RL_OK;
}

static int sync_fd(rl_storage *st, int fd, const char *path) {
    if (st->no_sync) return RL_OK;
    if (rl__os_fdatasync(fd) != 0) return io_fail("fdatasync", path);
    return RL_OK;
}

static int sync_dir(rl_storage *st) {
    if (st->no_sync) return RL_OK;
    int fd = rl__os_open(st->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
    if (fd < 0) return io_fail("open", st->dir);
    int rc = rl__os_fsync(fd) == 0 ? RL_OK : io_fail("fsync", st->dir);
    close(fd);
    return rc;
}

/* Read a whole file into a heap buffer (rl__free). */
static int read_file(const char *path, uint8_t **out, size_t *out_len) {
    int fd = rl__os_open(path, O_RDONLY | O_CLOEXEC, 0), rc = RL_OK;
    uint8_t *buf = NULL;
    struct stat sb;
    *out = NULL;
    *out_len = 0;
    if (fd < 0) return map_errno(errno);
    if (fstat(fd, &sb) != 0) {
        rc = map_errno(errno);
        goto fail;
    }
    size_t n = (size_t)sb.st_size, got = 0;
    buf = rl__malloc(n ? n : 1);
    if (!buf) {
        rc = RL_E_OUT_OF_MEMORY;
        goto fail;
    }
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            rc = r < 0 ? map_errno(errno) : RL_E_IO_ERROR;
            goto fail;
        }
        got += (size_t)r;
    }
    close(fd);
    *out = buf;
    *out_len = n;
    return RL_OK;
fail:
    rl__free(buf);
    close(fd);
    return rc;
}

/* ---- checkpoint load --------------------------------------------------------------------- */

static int load_checkpoint(rl_storage *st, const char *path, uint64_t seq, rl_buf *errmsg) {
    uint8_t *buf = NULL;
    size_t n, off = 0;
    uint64_t total = 0;
    int rc = read_file(path, &buf, &n);
    const char *why = NULL;
    if (rc != RL_OK) {
        errf(errmsg, "cannot read checkpoint %s: %s", path, rl_error_name(rc));
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
    rl_version v = rl__le64(buf + 16);
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
    st->latest = st->oldest = st->durable = st->ckpt_version = v;
    rl__free(buf);
    return RL_OK;
bad_entry:
    why = "bad entry (length or key order)";
corrupt:
    errf(errmsg, "checkpoint %s corrupt at byte offset %zu: %s", path, off, why);
    rc = RL_CORRUPT(RL_E_CHECKPOINT_CORRUPT);
fail:
    rl__free(buf);
    return rc;
}

/* ---- log replay -------------------------------------------------------------------------- */

/* 1 if a valid record starts anywhere in p[from, n). */
static int valid_record_after(const uint8_t *p, size_t n, size_t from) {
    rl_wal_record r;
    for (size_t i = from; i + RL_WAL_HEADER <= n; i++)
        if (rl__le32(p + i) == RL_WAL_MAGIC && rl__wal_decode(p + i, n - i, &r) == RL_OK) return 1;
    return 0;
}

static int replay_log(rl_storage *st, const char *path, rl_buf *errmsg) {
    uint8_t *buf = NULL;
    size_t n, off = 0;
    int rc = read_file(path, &buf, &n);
    if (rc == RL_E_FILE_NOT_FOUND) return RL_OK;
    if (rc != RL_OK) {
        errf(errmsg, "cannot read log %s: %s", path, rl_error_name(rc));
        return rc;
    }
    st->replaying = 1;
    while (off < n) {
        rl_wal_record r;
        if (rl__wal_decode(buf + off, n - off, &r) != RL_OK) {
            if (valid_record_after(buf, n, off + 1)) {
                errf(errmsg, "log %s corrupt at byte offset %zu: bad record followed by valid ones",
                     path, off);
                rc = RL_CORRUPT(RL_E_LOG_CORRUPT);
                goto out;
            }
            /* Torn tail: drop it so new records follow the last good one. */
            rl__log(RL_LOG_WARN, "log %s: discarding torn tail at byte offset %zu (%zu bytes)",
                    path, off, n - off);
            int fd = rl__os_open(path, O_WRONLY | O_CLOEXEC, 0);
            if (fd < 0)
                rc = io_fail("open", path);
            else if (rl__os_ftruncate(fd, (off_t)off) != 0)
                rc = io_fail("ftruncate", path);
            else
                rc = sync_fd(st, fd, path);
            if (fd >= 0) close(fd);
            if (rc != RL_OK) {
                errf(errmsg, "cannot truncate log %s at %zu: %s", path, off, rl_error_name(rc));
                goto out;
            }
            break;
        }
        if (r.version <= st->latest) {
            errf(errmsg, "log %s corrupt at byte offset %zu: version %" PRIu64
                         " does not follow %" PRIu64, path, off, r.version, st->latest);
            rc = RL_CORRUPT(RL_E_LOG_CORRUPT);
            goto out;
        }
        /* Decode the mutations into a small array (a record holds at most count of them). */
        rl_mutation stackm[64], *m = stackm;
        if (r.count > 64 && !(m = rl__malloc((size_t)r.count * sizeof *m))) {
            rc = RL_E_OUT_OF_MEMORY;
            goto out;
        }
        rl_wal_iter it;
        size_t k = 0;
        rl__wal_iter_init(&it, &r);
        while (k < r.count && rl__wal_iter_next(&it, &m[k])) k++;
        rc = rl__storage_map_apply(st, r.version, m, k);
        if (m != stackm) rl__free(m);
        if (rc != RL_OK) goto out;
        off += r.record_len;
    }
    st->log_bytes = off;
out:
    st->replaying = 0;
    rl__free(buf);
    return rc;
}

/* ---- open / close ------------------------------------------------------------------------ */

static int parse_name(const char *name, const char *prefix, uint64_t *seq, int *is_tmp) {
    size_t pl = strlen(prefix);
    if (strncmp(name, prefix, pl) != 0) return 0;
    const char *h = name + pl;
    for (int i = 0; i < 16; i++)
        if (!((h[i] >= '0' && h[i] <= '9') || (h[i] >= 'a' && h[i] <= 'f'))) return 0;
    *is_tmp = strcmp(h + 16, ".tmp") == 0;
    if (h[16] != 0 && !*is_tmp) return 0;
    *seq = strtoull(h, NULL, 16);
    return 1;
}

int rl__storage_durable_open(rl_storage *st, const rl_storage_options *o, rl_buf *errmsg) {
    char path[4096];
    struct stat sb;
    int rc;
    st->no_sync = o->no_sync;
    st->checkpoint_log_bytes = o->checkpoint_log_bytes ? o->checkpoint_log_bytes : DEFAULT_CKPT_BYTES;
    if (!(st->dir = rl__strdup(o->dir))) return RL_E_OUT_OF_MEMORY;
    if (strlen(o->dir) > 4000) return RL_E_INVALID_ARGUMENT;
    if (stat(o->dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        rc = stat(o->dir, &sb) != 0 ? map_errno(errno) : RL_E_INVALID_ARGUMENT;
        errf(errmsg, "storage directory %s: %s", o->dir,
             rc == RL_E_FILE_NOT_FOUND ? "does not exist" : "not a directory");
        return rc;
    }
    snprintf(path, sizeof path, "%s/LOCK", st->dir);
    st->lock_fd = rl__os_open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (st->lock_fd < 0) {
        rc = io_fail("open", path);
        errf(errmsg, "cannot open %s: %s", path, strerror(errno));
        return rc;
    }
    if (flock(st->lock_fd, LOCK_EX | LOCK_NB) != 0) {
        rc = errno == EWOULDBLOCK ? RL_E_DATABASE_LOCKED_BY_PROCESS : map_errno(errno);
        errf(errmsg, "%s is locked by another handle", path);
        return rc;
    }

    /* Find the newest checkpoint; remove temporaries. */
    uint64_t best = 0, seq;
    int have_ckpt = 0, is_tmp;
    DIR *d = opendir(st->dir);
    if (!d) return map_errno(errno);
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (parse_name(de->d_name, "ckpt-", &seq, &is_tmp)) {
            if (is_tmp) {
                snprintf(path, sizeof path, "%s/%s", st->dir, de->d_name);
                unlink(path);
            } else if (!have_ckpt || seq > best) {
                best = seq;
                have_ckpt = 1;
            }
        }
    }
    rewinddir(d);
    /* Files older than the checkpoint are leftovers of an interrupted checkpoint. */
    while ((de = readdir(d)) != NULL) {
        if ((parse_name(de->d_name, "ckpt-", &seq, &is_tmp) ||
             parse_name(de->d_name, "log-", &seq, &is_tmp)) && seq < best) {
            snprintf(path, sizeof path, "%s/%s", st->dir, de->d_name);
            unlink(path);
        }
    }
    closedir(d);
    st->seq = best;
    if (have_ckpt) {
        path_of(st, path, sizeof path, "ckpt-", best, "");
        if ((rc = load_checkpoint(st, path, best, errmsg)) != RL_OK) return rc;
    }
    path_of(st, path, sizeof path, "log-", best, "");
    if ((rc = replay_log(st, path, errmsg)) != RL_OK) return rc;
    st->log_fd = rl__os_open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (st->log_fd < 0) {
        rc = io_fail("open", path);
        errf(errmsg, "cannot open log %s: %s", path, strerror(errno));
        return rc;
    }
    if ((rc = sync_dir(st)) != RL_OK) {
        errf(errmsg, "cannot sync directory %s: %s", st->dir, rl_error_name(rc));
        return rc;
    }
    st->durable = st->latest;
    return RL_OK;
}

void rl__storage_durable_close(rl_storage *st) {
    if (st->log_fd >= 0) close(st->log_fd);
    if (st->lock_fd >= 0) close(st->lock_fd); /* releases the flock */
    st->log_fd = st->lock_fd = -1;
}

/* ---- writing ----------------------------------------------------------------------------- */

static int poison(rl_storage *st, int rc) {
    if (rc != RL_OK && !st->poisoned) st->poisoned = rc;
    return rc;
}

/* Write the pending records to the log file (no fsync). A failure poisons: the log may now end
 * in part of a record. */
static int flush_pending(rl_storage *st) {
    if (st->pending.len == 0) return RL_OK;
    char path[4096];
    path_of(st, path, sizeof path, "log-", st->seq, "");
    int rc = write_all(st->log_fd, st->pending.data, st->pending.len, path);
    if (rc != RL_OK) return poison(st, rc);
    st->log_bytes += st->pending.len;
    rl__buf_reset(&st->pending);
    return RL_OK;
}

int rl__storage_durable_log(rl_storage *st, rl_version v, const rl_mutation *muts, size_t n) {
    size_t mark = st->pending.len;
    int rc = rl__wal_encode(&st->pending, v, muts, n);
    if (rc != RL_OK) {
        rl__buf_truncate(&st->pending, mark);
        st->pending.oom = 0; /* the truncated buffer is whole again */
    }
    return rc;
}

/* After a version was applied and its record queued: checkpoint when the log is large, else
 * write the queue out when it is large. The version is applied whatever this returns; an error
 * here is an I/O error that poisoned the engine. A checkpoint that ran out of memory (nothing
 * poisoned, nothing changed on disk) is not an error of this apply: it is retried next time. */
int rl__storage_durable_after_apply(rl_storage *st) {
    if (st->log_bytes + st->pending.len >= st->checkpoint_log_bytes) {
        int rc = rl__storage_durable_checkpoint(st);
        return rc == RL_E_OUT_OF_MEMORY && !st->poisoned ? RL_OK : rc;
    }
    if (st->pending.len >= PENDING_FLUSH) return flush_pending(st);
    return RL_OK;
}

int rl__storage_durable_sync(rl_storage *st) {
    int rc;
    if (st->poisoned) return st->poisoned;
    if ((rc = flush_pending(st)) != RL_OK) return rc;
    char path[4096];
    path_of(st, path, sizeof path, "log-", st->seq, "");
    if ((rc = sync_fd(st, st->log_fd, path)) != RL_OK) return poison(st, rc);
    st->durable = st->latest;
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

int rl__storage_durable_checkpoint(rl_storage *st) {
    char tmp[4096], path[4096];
    uint8_t hdr[CKPT_HEADER];
    rl_buf blk;
    int rc, fd = -1, renamed = 0;
    uint32_t count = 0;
    uint64_t total = 0, next = st->seq + 1;
    if (st->poisoned) return st->poisoned;
    tmp[0] = 0;
    rl__buf_init(&blk);
    if ((rc = flush_pending(st)) != RL_OK) goto fail;
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
    rl__buf_append(&blk, "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0", BLK_HEADER);
    /* Every row in key order: the leaves left to right. */
    for (const bt_leaf *l = st->first; l; l = l->next)
        for (uint32_t i = 0; i < l->n; i++) {
            const bt_row *n = l->rows[i];
            const sl_ver *e = n->chain; /* the state at latest is the head of each chain */
            if (e->is_clear) continue;
            uint8_t lens[8];
            rl__put_le32(lens, n->klen);
            rl__put_le32(lens + 4, e->len);
            rl__buf_append(&blk, lens, 8);
            rl__buf_append(&blk, n->key, n->klen);
            rl__buf_append(&blk, e->data, e->len);
            count++;
            total++;
            if (blk.len >= BLK_TARGET) {
                if ((rc = rl__buf_error(&blk)) != RL_OK) goto fail;
                if ((rc = ckpt_emit(fd, &blk, BLK_DATA, count, tmp)) != RL_OK) goto fail;
                count = 0;
            }
        }
    if (count && (rc = ckpt_emit(fd, &blk, BLK_DATA, count, tmp)) != RL_OK) goto fail;
    uint8_t tot[8];
    rl__put_le64(tot, total);
    rl__buf_append(&blk, tot, 8);
    if ((rc = rl__buf_error(&blk)) != RL_OK) goto fail;
    if ((rc = ckpt_emit(fd, &blk, BLK_END, 0, tmp)) != RL_OK) goto fail;
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
    path_of(st, path, sizeof path, "log-", next, "");
    int nfd = rl__os_open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
    if (nfd < 0) {
        rc = io_fail("open", path);
        goto fail;
    }
    close(st->log_fd);
    st->log_fd = nfd;
    if ((rc = sync_dir(st)) != RL_OK) goto fail;
    path_of(st, path, sizeof path, "log-", st->seq, "");
    unlink(path);
    path_of(st, path, sizeof path, "ckpt-", st->seq, "");
    unlink(path);
    st->seq = next;
    st->log_bytes = 0;
    st->durable = st->ckpt_version = st->latest;
    st->checkpoints++;
    rl__buf_release(&blk);
    return RL_OK;
fail:
    if (fd >= 0) close(fd);
    rl__buf_release(&blk);
    if (rc == RL_E_OUT_OF_MEMORY && !renamed && !st->poisoned) {
        /* Only memory ran out: the log is whole (flushed or untouched) and the .tmp file is not
         * a checkpoint yet. Drop it and leave the engine writable. */
        if (tmp[0]) unlink(tmp);
        return rc;
    }
    return poison(st, rc);
}
