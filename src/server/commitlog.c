/* commitlog.c — the coordinator's durable commit log (the model is in commitlog.h; the record
 * format is src/storage/wal.h's, mirrored in docs/file-format.md).
 *
 * Directory contents (LOGDIR = the coordinator's DIR/log):
 *   LOCK                              flock()ed exclusively while the log is open
 *   seg-BBBBBBBBBBBBBBBB.log          a segment: records of versions > B (16 lower-case hex
 *                                     digits), B = the last version of the segment before it
 *   seg-B.log.discarded-OFF[.N]       bytes recovery cut off the end of the newest segment at
 *                                     byte offset OFF (decimal); kept for a person, never read
 *                                     or deleted
 *   anything else                     not ours: never read, renamed or deleted
 *
 * Memory. Every durable record stays in memory until its segment is truncated: a segment holds
 * an index of its records (version, payload pointer, length, count) and the chunks the payloads
 * live in — the whole file read at recovery, then for each sync either the pending buffer of
 * that sync, detached, so nothing is copied (a sync of more than CL_SMALL_SYNC bytes), or a copy
 * in the segment's packing chunk (CL_PACK_CHUNK bytes, shared by many small syncs). Packing
 * matters for the coordinator's version ticks: an idle cluster syncs one empty 24-byte record
 * every tick, which as a detached buffer of its own would cost a heap block of 64 bytes plus a
 * chunk header, six times the record, until its segment is truncated (a segment rolls over only
 * after segment_bytes of records, two days of ticks at 8 MiB); packed, a tick costs its 24 bytes
 * plus its 24-byte index entry. Chunks never move, so index entries keep pointing at them; the
 * index array itself may grow (realloc), so readers hold the mutex while they use it.
 *
 * Invariants:
 *   1. Versions strictly increase over the segments in base order; every record of a segment is
 *      > its base, and a segment's base is >= the last version of the segment before it.
 *   2. Only the writer appends; it writes only to the active (newest) segment. Published records
 *      (entries of a segment) are on disk (fdatasync returned, unless no_sync) and never change.
 *   3. durable is the version of the newest published record, or the active segment's base when
 *      the log holds none; it only grows.
 *   4. Truncation removes whole segments from the oldest end and never the active one, so the
 *      versions held are always a suffix: (oldest->base, durable].
 *   5. Once poisoned (a failed write or fdatasync), nothing more is written or published.
 *   6. Open changes no file except: creating LOCK, LOGDIR and the first segment of an empty log,
 *      and moving a damaged tail of the newest segment to a side file before truncating it (the
 *      side file is durable before the segment is cut).
 *
 * Recovery steps (rl__commitlog_open):
 *   1. mkdir LOGDIR if missing; take LOCK; list seg-*.log names (nothing else is looked at).
 *   2. No segment: create seg-0000000000000000.log and fsync the directory.
 *   3. For each segment in base order: read it whole; decode records one after another. A record
 *      that does not decode ends the log if it is in the newest segment and no valid record
 *      starts anywhere after it (discard_tail, rl__wal_cut_tail: copy to the side file, fsync, fsync directory,
 *      ftruncate, fdatasync); otherwise RL_E_LOG_CORRUPT naming the file and offset. A version
 *      that breaks invariant 1 is RL_E_LOG_CORRUPT too.
 *   4. Open the newest segment for appending.
 */
#include "server/commitlog.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/log.h"
#include "base/sync.h"
#include "reclayer/error.h"
#include "storage/os.h"
#include "storage/storage.h"
#include "storage/wal.h"

#define CL_DEFAULT_SEGMENT_BYTES (8ull << 20) /* truncation frees memory in these steps */
#define CL_SMALL_SYNC 4096u                   /* a sync of at most this many bytes is packed */
#define CL_PACK_CHUNK (64u << 10)             /* a packing chunk's size */
#define CL_PATH_MAX 4200

/* One record of a segment (payload points into one of the segment's chunks). */
typedef struct {
    rl__version version;
    const uint8_t *payload;
    uint32_t payload_len;
    uint32_t count;
} cl_entry;

/* Memory holding records: a detached buffer, a segment file read whole, or a packing chunk
 * (data is rl__malloc'ed, freed with the chunk). */
typedef struct cl_chunk {
    struct cl_chunk *next;
    uint8_t *data;
    size_t cap, used; /* a packing chunk: bytes of data and bytes used (0, 0 otherwise) */
} cl_chunk;

typedef struct cl_segment {
    struct cl_segment *next; /* the next newer segment */
    rl__version base;        /* from the file name (invariant 1) */
    rl__version last;        /* the newest record's version; base when empty */
    uint64_t file_bytes;     /* bytes of the file (= bytes of its records) */
    cl_entry *entries;       /* records, oldest first */
    size_t n, cap;
    cl_chunk *chunks; /* the memory the entries point into */
    cl_chunk *pack;   /* the packing chunk small syncs are copied into (one of chunks), or NULL */
    char *path;       /* heap */
} cl_segment;

/* A record waiting in the pending buffer (offsets into log->pending). */
typedef struct {
    rl__version version;
    size_t offset; /* of the record's header */
    uint32_t payload_len;
    uint32_t count;
} cl_pending;

struct rl__commitlog {
    char *dir;
    int no_sync;
    uint64_t segment_bytes;
    int lock_fd;
    pthread_mutex_t mu;
    /* Under mu. */
    cl_segment *oldest; /* list head; never NULL once open */
    cl_segment *active; /* list tail: the segment being written */
    uint64_t n_segments;
    uint64_t records;
    uint64_t bytes;
    uint64_t segments_deleted;
    rl__version durable;  /* invariant 3 */
    rl__version appended; /* newest appended version (the writer sets it under mu) */
    int poisoned;         /* invariant 5: 0 or the error */
    /* Writer only. */
    int fd;           /* the active segment, O_APPEND */
    rl_buf pending;   /* encoded records not yet written */
    cl_pending *pend; /* their versions and offsets */
    size_t n_pend, cap_pend;
    /* Recovery report (set by open, read-only afterwards). */
    int tail_kind;
    uint64_t tail_offset, tail_bytes;
    char *tail_segment, *tail_moved_to;
};

/* ---- Small helpers ----------------------------------------------------------------------- */

/* The file helpers of storage/os.h, bound to this log's directory and log prefix. */
#define WHO "commit log"

static int io_fail(const char *op, const char *path) { return rl__os_io_fail(WHO, op, path); }

static int sync_fd(const rl__commitlog *log, int fd, const char *path) {
    return rl__os_sync_fd(fd, log->no_sync, WHO, path);
}

static int sync_dir(const rl__commitlog *log) { return rl__os_sync_dir(log->dir, log->no_sync, WHO); }

/* "DIR/seg-<base>.log" (heap), or NULL on OOM. */
static char *segment_path(const rl__commitlog *log, rl__version base) {
    char p[CL_PATH_MAX];
    snprintf(p, sizeof p, "%s/seg-%016" PRIx64 ".log", log->dir, base);
    return rl__strdup(p);
}

/* 1 and *out_base if name is "seg-" + 16 lower-case hex digits + ".log", else 0. */
static int parse_segment_name(const char *name, rl__version *out_base) {
    if (strncmp(name, "seg-", 4) != 0 || strlen(name) != 4 + 16 + 4 || strcmp(name + 20, ".log")) return 0;
    rl__version b = 0;
    for (int i = 0; i < 16; i++) {
        char c = name[4 + i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0) return 0;
        b = b << 4 | (rl__version)d;
    }
    *out_base = b;
    return 1;
}

/* Free a segment object, its chunks and its index (not its file). */
static void segment_free(cl_segment *s) {
    if (!s) return;
    for (cl_chunk *c = s->chunks; c;) {
        cl_chunk *next = c->next;
        rl__free(c->data);
        rl__free(c);
        c = next;
    }
    rl__free(s->entries);
    rl__free(s->path);
    rl__free(s);
}

/* Make room for `more` entries in s (mutex held if s is visible to readers). */
static int reserve_entries(cl_segment *s, size_t more) {
    if (s->n + more <= s->cap) return RL_OK;
    size_t cap = s->cap ? s->cap : 256;
    while (cap < s->n + more) cap *= 2;
    cl_entry *e = rl__realloc(s->entries, cap * sizeof *e);
    if (!e) return RL_E_OUT_OF_MEMORY;
    s->entries = e;
    s->cap = cap;
    return RL_OK;
}

/* ---- Recovery ---------------------------------------------------------------------------- */

/* The newest segment ends in n unreadable bytes at offset off (p points at them): record them
 * for the status, move them aside and cut the segment at off (synced). */
static int discard_tail(rl__commitlog *log, const char *path, size_t off, const uint8_t *p, size_t n,
                        rl__errdetail *err) {
    char *side = NULL;
    int rc;
    log->tail_kind = rl__wal_classify_tail(p, n);
    log->tail_offset = off;
    log->tail_bytes = n;
    if (!(log->tail_segment = rl__strdup(path))) return RL_E_OUT_OF_MEMORY;
    const rl__wal_file f = {WHO, "commit log segment", log->dir, log->no_sync};
    if ((rc = rl__wal_cut_tail(&f, path, off, p, n, &side, err)) != RL_OK) return rc;
    rl__log(RL_LOG_WARN,
            "commit log %s: the record at byte offset %zu is %s; the segment now ends before it, "
            "and the %zu bytes from there were moved to %s",
            path, off, rl__wal_tail_words(log->tail_kind), n, side);
    log->tail_moved_to = side;
    return RL_OK;
}

/* Replay segment s (its file read whole into one chunk) after version *prev (invariant 1).
 * is_newest: a damaged tail may be discarded. Updates *prev to the segment's last version. */
static int replay_segment(rl__commitlog *log, cl_segment *s, int is_newest, rl__version *prev, rl__errdetail *err) {
    uint8_t *buf = NULL;
    size_t n = 0, off = 0;
    int rc = rl__os_read_file(s->path, &buf, &n);
    if (rc != RL_OK) {
        rl__errdetail_append(err, "cannot read commit log segment %s: %s", s->path, rl_error_name(rc));
        return rc;
    }
    cl_chunk *c = rl__calloc(1, sizeof *c);
    if (!c) {
        rl__free(buf);
        return RL_E_OUT_OF_MEMORY;
    }
    c->data = buf;
    s->chunks = c;
    if (s->base < *prev) {
        rl__errdetail_append(err,
                             "commit log segment %s corrupt: its base version %" PRIu64 " is below the "
                             "last version %" PRIu64 " of the segment before it",
                             s->path, s->base, *prev);
        return RL_CORRUPT(RL_E_LOG_CORRUPT);
    }
    rl__version last = s->base;
    while (off < n) {
        rl__wal_record r;
        if (rl__wal_decode(buf + off, n - off, &r) != RL_OK) {
            if (!is_newest || rl__wal_valid_record_after(buf, n, off + 1)) {
                rl__errdetail_append(err, "commit log segment %s corrupt at byte offset %zu: a bad record %s", s->path,
                                     off, is_newest ? "followed by valid ones" : "in an older segment");
                return RL_CORRUPT(RL_E_LOG_CORRUPT);
            }
            if ((rc = discard_tail(log, s->path, off, buf + off, n - off, err)) != RL_OK) return rc;
            break;
        }
        if (r.version <= last) {
            rl__errdetail_append(
                err, "commit log segment %s corrupt at byte offset %zu: version %" PRIu64 " does not follow %" PRIu64,
                s->path, off, r.version, last);
            return RL_CORRUPT(RL_E_LOG_CORRUPT);
        }
        if ((rc = reserve_entries(s, 1)) != RL_OK) return rc;
        cl_entry *e = &s->entries[s->n++];
        e->version = r.version;
        e->payload = r.payload;
        e->payload_len = r.payload_len;
        e->count = r.count;
        last = r.version;
        off += r.record_len;
    }
    s->last = last;
    s->file_bytes = off;
    *prev = last;
    return RL_OK;
}

/* The sorted list of segment bases in dir (heap array). */
static int list_segments(rl__commitlog *log, rl__version **out, size_t *out_n, rl__errdetail *err) {
    DIR *d = opendir(log->dir);
    rl__version *v = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    *out = NULL;
    *out_n = 0;
    if (!d) {
        int rc = io_fail("opendir", log->dir);
        rl__errdetail_append(err, "cannot list commit log directory %s: %s", log->dir, strerror(errno));
        return rc;
    }
    while ((de = readdir(d)) != NULL) {
        rl__version b;
        if (!parse_segment_name(de->d_name, &b)) continue;
        if (RL_GROW(v, cap, n + 1, 16)) {
            closedir(d);
            rl__free(v);
            return RL_E_OUT_OF_MEMORY;
        }
        v[n++] = b;
    }
    closedir(d);
    for (size_t i = 1; i < n; i++) /* insertion sort: a handful of segments */
        for (size_t j = i; j > 0 && v[j - 1] > v[j]; j--) {
            rl__version t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    *out = v;
    *out_n = n;
    return RL_OK;
}

/* Append a new, empty segment object with this base to the list (mutex held or not yet
 * shared). */
static int add_segment(rl__commitlog *log, rl__version base, cl_segment **out) {
    cl_segment *s = rl__calloc(1, sizeof *s);
    if (!s) return RL_E_OUT_OF_MEMORY;
    s->base = s->last = base;
    if (!(s->path = segment_path(log, base))) {
        rl__free(s);
        return RL_E_OUT_OF_MEMORY;
    }
    if (log->active) log->active->next = s;
    else log->oldest = s;
    log->active = s;
    log->n_segments++;
    *out = s;
    return RL_OK;
}

/* flock LOGDIR/LOCK exclusively (creating it), or say who holds it. */
static int take_lock(rl__commitlog *log, rl__errdetail *err) {
    char path[CL_PATH_MAX];
    snprintf(path, sizeof path, "%s/LOCK", log->dir);
    return rl__os_lock_file(path, 0, WHO, "another process (is another coordinator running on this directory?)",
                            &log->lock_fd, err);
}

/* See commitlog.h and the recovery steps in the file header. */
int rl__commitlog_open(const rl__commitlog_options *o, rl__commitlog **out, rl__errdetail *err) {
    if (!o || !o->dir || !*o->dir || strlen(o->dir) > 4000 || !out) return RL_E_INVALID_ARGUMENT;
    int rc = RL_E_OUT_OF_MEMORY;
    rl__version *bases = NULL;
    size_t nb = 0;
    rl__commitlog *log = rl__calloc(1, sizeof *log);
    if (!log) return RL_E_OUT_OF_MEMORY;
    log->lock_fd = log->fd = -1;
    log->no_sync = o->no_sync;
    log->segment_bytes = o->segment_bytes ? o->segment_bytes : CL_DEFAULT_SEGMENT_BYTES;
    rl__buf_init(&log->pending);
    if (pthread_mutex_init(&log->mu, NULL) != 0) {
        rl__free(log);
        return RL_E_OUT_OF_MEMORY;
    }
    if (!(log->dir = rl__strdup(o->dir))) goto fail;

    /* 1. The directory, the lock, the segment names. */
    struct stat sb;
    if (stat(log->dir, &sb) != 0) {
        if (errno != ENOENT || rl__os_mkdir(log->dir, 0755) != 0) {
            rc = io_fail("mkdir", log->dir);
            rl__errdetail_append(err, "cannot create commit log directory %s: %s", log->dir, strerror(errno));
            goto fail;
        }
    } else if (!S_ISDIR(sb.st_mode)) {
        rc = RL_E_INVALID_ARGUMENT;
        rl__errdetail_append(err, "commit log directory %s: not a directory", log->dir);
        goto fail;
    }
    if ((rc = take_lock(log, err)) != RL_OK) goto fail;
    if ((rc = list_segments(log, &bases, &nb, err)) != RL_OK) goto fail;

    /* 2. An empty log gets its first segment. */
    if (nb == 0) {
        cl_segment *s;
        if ((rc = add_segment(log, 0, &s)) != RL_OK) goto fail;
        int fd = rl__os_open(s->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0) {
            rc = io_fail("open", s->path);
            rl__errdetail_append(err, "cannot create commit log segment %s: %s", s->path, strerror(errno));
            goto fail;
        }
        close(fd);
        if ((rc = sync_dir(log)) != RL_OK) {
            rl__errdetail_append(err, "cannot sync directory %s: %s", log->dir, rl_error_name(rc));
            goto fail;
        }
    }

    /* 3. Replay every segment in base order. */
    rl__version prev = 0;
    for (size_t i = 0; i < nb; i++) {
        cl_segment *s;
        if ((rc = add_segment(log, bases[i], &s)) != RL_OK) goto fail;
        if ((rc = replay_segment(log, s, i + 1 == nb, &prev, err)) != RL_OK) goto fail;
        log->records += s->n;
        log->bytes += s->file_bytes;
    }
    log->durable = log->appended = log->active->last;

    /* 4. Append to the newest segment. */
    log->fd = rl__os_open(log->active->path, O_WRONLY | O_APPEND | O_CLOEXEC, 0);
    if (log->fd < 0) {
        rc = io_fail("open", log->active->path);
        rl__errdetail_append(err, "cannot open commit log segment %s: %s", log->active->path, strerror(errno));
        goto fail;
    }
    rl__free(bases);
    *out = log;
    return RL_OK;
fail:
    rl__free(bases);
    rl__commitlog_close(log);
    return rc;
}

/* See commitlog.h. */
void rl__commitlog_close(rl__commitlog *log) {
    if (!log) return;
    if (log->fd >= 0) close(log->fd);
    if (log->lock_fd >= 0) close(log->lock_fd); /* releases the flock */
    for (cl_segment *s = log->oldest; s;) {
        cl_segment *next = s->next;
        segment_free(s);
        s = next;
    }
    rl__buf_release(&log->pending);
    rl__free(log->pend);
    rl__free(log->tail_segment);
    rl__free(log->tail_moved_to);
    rl__free(log->dir);
    pthread_mutex_destroy(&log->mu);
    rl__free(log);
}

/* ---- Writing ----------------------------------------------------------------------------- */

/* See commitlog.h: encode into the pending buffer and remember the record's place in it. */
int rl__commitlog_append(rl__commitlog *log, rl__version v, const rl__mutation *muts, size_t n) {
    pthread_mutex_lock(&log->mu);
    int poisoned = log->poisoned;
    rl__version appended = log->appended;
    pthread_mutex_unlock(&log->mu);
    if (poisoned) return poisoned;
    if (v <= appended) return RL_E_VERSION_INVALID;
    if (RL_GROW(log->pend, log->cap_pend, log->n_pend + 1, 16)) return RL_E_OUT_OF_MEMORY;
    size_t mark = log->pending.len;
    int rc = rl__wal_encode(&log->pending, v, muts, n);
    if (rc != RL_OK) {
        rl__buf_truncate(&log->pending, mark);
        log->pending.oom = 0; /* the truncated buffer is whole again */
        return rc;
    }
    cl_pending *p = &log->pend[log->n_pend++];
    p->version = v;
    p->offset = mark;
    p->payload_len = rl__le32(log->pending.data + mark + 8);
    p->count = rl__le32(log->pending.data + mark + 12);
    pthread_mutex_lock(&log->mu);
    log->appended = v;
    pthread_mutex_unlock(&log->mu);
    return RL_OK;
}

/* Record the first error that poisoned the log (invariant 5) and return rc. */
static int poison(rl__commitlog *log, int rc) {
    pthread_mutex_lock(&log->mu);
    if (!log->poisoned) log->poisoned = rc;
    pthread_mutex_unlock(&log->mu);
    return rc;
}

/* Start a new active segment after the current one (the writer, after a publish). A failure is
 * logged and leaves the current segment active (retried at the next sync). */
static void roll_over(rl__commitlog *log) {
    rl__version base = log->active->last;
    char *path = segment_path(log, base);
    if (!path) return;
    int fd = rl__os_open(path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
        io_fail("open", path);
        rl__free(path);
        return;
    }
    if (sync_dir(log) != RL_OK) {
        /* The new name may not survive a crash: do not write into it. */
        close(fd);
        if (rl__os_unlink(path) != 0) io_fail("unlink", path);
        rl__free(path);
        return;
    }
    cl_segment *s = rl__calloc(1, sizeof *s);
    if (!s) {
        /* The empty file stays; recovery takes it as the active segment (its base is the
         * current last version, so nothing may be appended to the old segment any more). */
        close(fd);
        rl__free(path);
        poison(log, RL_E_OUT_OF_MEMORY);
        return;
    }
    s->base = s->last = base;
    s->path = path;
    pthread_mutex_lock(&log->mu);
    log->active->next = s;
    log->active = s;
    log->n_segments++;
    pthread_mutex_unlock(&log->mu);
    close(log->fd);
    log->fd = fd;
}

/* See commitlog.h. The memory publishing needs is reserved before the write, so a record that
 * reached the disk is always published (or the log is poisoned before anything is written). */
int rl__commitlog_sync(rl__commitlog *log) {
    int rc;
    pthread_mutex_lock(&log->mu);
    int poisoned = log->poisoned;
    pthread_mutex_unlock(&log->mu);
    if (poisoned) return poisoned;
    if (log->n_pend == 0) return RL_OK;
    cl_segment *s = log->active; /* only the writer changes which segment is active */

    /* Reserve what publishing needs before writing, so a durable record is always published:
     * room in the packing chunk (a new one if the current one is full) for a small sync, else
     * the chunk header the detached pending buffer will get. */
    size_t len = log->pending.len;
    int packed = len <= CL_SMALL_SYNC;
    cl_chunk *c = packed ? s->pack : NULL;
    int fresh = !c || c->cap - c->used < len;
    if (fresh) {
        c = rl__calloc(1, sizeof *c);
        if (!c) return poison(log, RL_E_OUT_OF_MEMORY);
        if (packed && !(c->data = rl__malloc(CL_PACK_CHUNK))) {
            rl__free(c);
            return poison(log, RL_E_OUT_OF_MEMORY);
        }
        if (packed) c->cap = CL_PACK_CHUNK;
    }
    pthread_mutex_lock(&log->mu);
    rc = reserve_entries(s, log->n_pend);
    pthread_mutex_unlock(&log->mu);
    if (rc == RL_OK) rc = rl__os_write_all(log->fd, log->pending.data, len, WHO, s->path);
    if (rc == RL_OK) rc = sync_fd(log, log->fd, s->path);
    if (rc != RL_OK) {
        if (fresh) {
            rl__free(c->data);
            rl__free(c);
        }
        return poison(log, rc);
    }

    /* Publish: the records are copied into the packing chunk, or the pending buffer becomes the
     * chunk; the new entries point into it. */
    uint8_t *base;
    if (packed) {
        base = c->data + c->used;
        memcpy(base, log->pending.data, len);
        c->used += len;
        rl__buf_reset(&log->pending); /* its memory serves the next syncs */
    } else {
        c->data = base = rl__buf_detach(&log->pending, &len);
    }
    pthread_mutex_lock(&log->mu);
    for (size_t i = 0; i < log->n_pend; i++) {
        const cl_pending *p = &log->pend[i];
        cl_entry *e = &s->entries[s->n++];
        e->version = p->version;
        e->payload = base + p->offset + RL_WAL_HEADER;
        e->payload_len = p->payload_len;
        e->count = p->count;
    }
    if (fresh) {
        c->next = s->chunks;
        s->chunks = c;
        if (packed) s->pack = c;
    }
    s->last = log->pend[log->n_pend - 1].version;
    s->file_bytes += len;
    log->records += log->n_pend;
    log->bytes += len;
    log->durable = s->last;
    pthread_mutex_unlock(&log->mu);
    log->n_pend = 0;

    if (s->file_bytes >= log->segment_bytes) roll_over(log);
    return RL_OK;
}

/* ---- Reading and truncation -------------------------------------------------------------- */

/* See commitlog.h. */
rl__version rl__commitlog_durable_version(rl__commitlog *log) { return rl__locked_u64(&log->mu, &log->durable); }

/* See commitlog.h. */
rl__version rl__commitlog_base_version(rl__commitlog *log) {
    pthread_mutex_lock(&log->mu);
    rl__version v = log->oldest->base;
    pthread_mutex_unlock(&log->mu);
    return v;
}

/* The index of the first entry of s with version > after (binary search). */
static size_t first_after(const cl_segment *s, rl__version after) {
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->entries[mid].version <= after) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* See commitlog.h (records from the segment holding after + 1 on, binary search inside it). */
int rl__commitlog_read(rl__commitlog *log, rl__version after, rl_commitlog_visit_fn fn, void *ud,
                       rl__version *out_durable) {
    int rc = RL_OK;
    pthread_mutex_lock(&log->mu);
    if (out_durable) *out_durable = log->durable;
    if (after < log->oldest->base) {
        rc = RL_E_PROCESS_BEHIND;
        goto out;
    }
    for (const cl_segment *s = log->oldest; s; s = s->next) {
        if (s->last <= after) continue;
        for (size_t i = first_after(s, after); i < s->n; i++) {
            const cl_entry *e = &s->entries[i];
            rl__wal_record r;
            r.version = e->version;
            r.count = e->count;
            r.payload = e->payload;
            r.payload_len = e->payload_len;
            r.record_len = RL_WAL_HEADER + (size_t)e->payload_len;
            r.incomplete = 0;
            if (fn(ud, &r)) goto out;
        }
    }
out:
    pthread_mutex_unlock(&log->mu);
    return rc;
}

/* See commitlog.h (invariant 4). */
int rl__commitlog_truncate(rl__commitlog *log, rl__version v, uint64_t *out_deleted) {
    uint64_t deleted = 0;
    pthread_mutex_lock(&log->mu);
    while (log->oldest != log->active && log->oldest->last <= v) {
        cl_segment *s = log->oldest;
        if (rl__os_unlink(s->path) != 0 && errno != ENOENT) {
            io_fail("unlink", s->path);
            break;
        }
        log->oldest = s->next;
        log->n_segments--;
        log->records -= s->n;
        log->bytes -= s->file_bytes;
        log->segments_deleted++;
        deleted++;
        segment_free(s);
    }
    pthread_mutex_unlock(&log->mu);
    if (out_deleted) *out_deleted = deleted;
    return RL_OK;
}

/* See commitlog.h. */
void rl__commitlog_get_status(rl__commitlog *log, rl__commitlog_status *out) {
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&log->mu);
    out->durable_version = log->durable;
    out->appended_version = log->appended;
    out->base_version = log->oldest->base;
    for (const cl_segment *s = log->oldest; s; s = s->next)
        if (s->n) {
            out->first_version = s->entries[0].version;
            break;
        }
    out->records = log->records;
    out->bytes = log->bytes;
    out->segments = log->n_segments;
    out->segments_deleted = log->segments_deleted;
    out->poisoned = log->poisoned;
    pthread_mutex_unlock(&log->mu);
    out->recovery_tail = log->tail_kind;
    out->recovery_tail_offset = log->tail_offset;
    out->recovery_tail_bytes = log->tail_bytes;
    out->recovery_segment = log->tail_segment;
    out->recovery_moved_to = log->tail_moved_to;
}
