/* wal.c — encode and decode write-ahead log records (format in wal.h and docs/file-format.md),
 * and recover a log's damaged tail (shared by memory.c and src/server/commitlog.c).
 *
 * The decoder is a pure function over a byte range so that it can be fuzzed
 * (tests/fuzz/storage/fuzz_log_decode.c) and so that recovery can tell a torn tail (the input
 * ends inside a record) from corruption (the bytes are there but wrong).
 */
#include "storage/wal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/hash.h"
#include "reclayer/error.h"
#include "storage/os.h"

int rl__wal_type_ok(int type) { return type >= 0 && rl__mutation_type_ok((unsigned)type, 1); }

/* Encode: header placeholder, mutations, then patch length and checksum in place. */
int rl__wal_encode(rl_buf *out, rl__version v, const rl__mutation *muts, size_t n) {
    size_t start = out->len;
    uint64_t payload = 0;
    uint8_t hdr[RL_WAL_HEADER];
    for (size_t i = 0; i < n; i++) {
        if (!rl__wal_type_ok(muts[i].type)) return RL_E_INVALID_MUTATION_TYPE;
        if (muts[i].len1 > RL_WAL_MAX_PARAM || muts[i].len2 > RL_WAL_MAX_PARAM) return RL_E_TRANSACTION_TOO_LARGE;
        payload += RL_WAL_MUT_HEADER + (uint64_t)muts[i].len1 + muts[i].len2;
    }
    if (payload > RL_WAL_MAX_PAYLOAD || n > UINT32_MAX) return RL_E_TRANSACTION_TOO_LARGE;
    if (rl__buf_reserve(out, RL_WAL_HEADER + (size_t)payload) != RL_OK) return RL_E_OUT_OF_MEMORY;
    memset(hdr, 0, sizeof hdr);
    rl__put_le32(hdr, RL_WAL_MAGIC);
    rl__put_le32(hdr + 8, (uint32_t)payload);
    rl__put_le32(hdr + 12, (uint32_t)n);
    rl__put_le64(hdr + 16, v);
    rl__buf_append(out, hdr, sizeof hdr);
    for (size_t i = 0; i < n; i++) {
        uint8_t mh[RL_WAL_MUT_HEADER];
        mh[0] = muts[i].type;
        rl__put_le32(mh + 1, muts[i].len1);
        rl__put_le32(mh + 5, muts[i].len2);
        rl__buf_append(out, mh, sizeof mh);
        if (muts[i].len1) rl__buf_append(out, muts[i].p1, muts[i].len1);
        if (muts[i].len2) rl__buf_append(out, muts[i].p2, muts[i].len2);
    }
    if (rl__buf_error(out) != RL_OK) return RL_E_OUT_OF_MEMORY;
    rl__put_le32(out->data + start + 4, rl__checksum32(out->data + start + 8, out->len - start - 8));
    return RL_OK;
}

int rl__wal_decode(const uint8_t *p, size_t n, rl__wal_record *out) {
    memset(out, 0, sizeof *out);
    if (n < RL_WAL_HEADER) {
        /* A prefix of a valid header is a torn write; anything else is corruption. */
        uint8_t m[4];
        rl__put_le32(m, RL_WAL_MAGIC);
        out->incomplete = memcmp(p, m, n < 4 ? n : 4) == 0;
        return RL_E_LOG_CORRUPT;
    }
    if (rl__le32(p) != RL_WAL_MAGIC) return RL_E_LOG_CORRUPT;
    uint32_t len = rl__le32(p + 8);
    if (len > RL_WAL_MAX_PAYLOAD) return RL_E_LOG_CORRUPT;
    if (n - RL_WAL_HEADER < len) {
        out->incomplete = 1;
        return RL_E_LOG_CORRUPT;
    }
    if (rl__checksum32(p + 8, (size_t)RL_WAL_HEADER - 8 + len) != rl__le32(p + 4)) return RL_E_LOG_CORRUPT;
    uint32_t count = rl__le32(p + 12);
    const uint8_t *q = p + RL_WAL_HEADER, *end = q + len;
    for (uint32_t i = 0; i < count; i++) {
        if ((size_t)(end - q) < RL_WAL_MUT_HEADER) return RL_E_LOG_CORRUPT;
        uint8_t type = q[0];
        uint32_t l1 = rl__le32(q + 1), l2 = rl__le32(q + 5);
        if (!rl__wal_type_ok(type)) return RL_E_LOG_CORRUPT;
        if (l1 > RL_WAL_MAX_PARAM || l2 > RL_WAL_MAX_PARAM) return RL_E_LOG_CORRUPT;
        if (type == RL_MUT_CLEAR && l2 != 0) return RL_E_LOG_CORRUPT;
        q += RL_WAL_MUT_HEADER;
        if ((uint64_t)(end - q) < (uint64_t)l1 + l2) return RL_E_LOG_CORRUPT;
        q += l1 + l2;
    }
    if (q != end) return RL_E_LOG_CORRUPT;
    out->version = rl__le64(p + 16);
    out->count = count;
    out->payload = p + RL_WAL_HEADER;
    out->payload_len = len;
    out->record_len = RL_WAL_HEADER + (size_t)len;
    return RL_OK;
}

void rl__wal_iter_init(rl__wal_iter *it, const rl__wal_record *rec) {
    it->p = rec->payload;
    it->end = rec->payload + rec->payload_len;
}

int rl__wal_iter_next(rl__wal_iter *it, rl__mutation *out) {
    if (it->p == NULL || (size_t)(it->end - it->p) < RL_WAL_MUT_HEADER) return 0;
    out->type = it->p[0];
    out->len1 = rl__le32(it->p + 1);
    out->len2 = rl__le32(it->p + 5);
    out->p1 = it->p + RL_WAL_MUT_HEADER;
    out->p2 = out->p1 + out->len1;
    it->p = out->p2 + out->len2;
    return 1;
}

/* ---- A log's damaged tail ---------------------------------------------------------------- */

size_t rl__wal_next_valid_record(const uint8_t *p, size_t n, size_t from) {
    rl__wal_record r;
    for (size_t i = from; i + RL_WAL_HEADER <= n; i++)
        if (rl__le32(p + i) == RL_WAL_MAGIC && rl__wal_decode(p + i, n - i, &r) == RL_OK) return i;
    return n;
}

int rl__wal_valid_record_after(const uint8_t *p, size_t n, size_t from) {
    return rl__wal_next_valid_record(p, n, from) < n;
}

int rl__wal_classify_tail(const uint8_t *p, size_t n) {
    rl__wal_record r;
    if (rl__wal_decode(p, n, &r) != RL_OK && r.incomplete) return RL_TAIL_TORN;
    if (n >= RL_WAL_HEADER && rl__le32(p) == RL_WAL_MAGIC) {
        uint32_t len = rl__le32(p + 8);
        if (len <= RL_WAL_MAX_PAYLOAD && n - RL_WAL_HEADER >= len &&
            rl__checksum32(p + 8, (size_t)RL_WAL_HEADER - 8 + len) != rl__le32(p + 4))
            return RL_TAIL_BAD_CHECKSUM;
    }
    return RL_TAIL_BAD_RECORD;
}

const char *rl__wal_tail_words(int kind) {
    switch (kind) {
    case RL_TAIL_TORN: return "torn (short record)";
    case RL_TAIL_BAD_CHECKSUM: return "a complete record with bad checksum";
    default: return "not a record (bad magic, length or payload)";
    }
}

/* Save p[0..n) to a new side file of path (see rl__wal_cut_tail). On failure the partial side
 * file is removed again, err says why and *out_side stays NULL. */
static int save_tail(const rl__wal_file *f, const char *path, size_t off, const uint8_t *p, size_t n, char **out_side,
                     rl__errdetail *err) {
    char side[4300];
    int fd = -1, rc, created = 0;
    *out_side = NULL;
    for (int i = 0; i < 1000; i++) {
        if (i == 0) snprintf(side, sizeof side, "%s.discarded-%zu", path, off);
        else snprintf(side, sizeof side, "%s.discarded-%zu.%d", path, off, i);
        fd = rl__os_open(side, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd >= 0 || errno != EEXIST) break;
    }
    if (fd < 0) {
        rc = rl__os_io_fail(f->who, "open", side);
        goto fail;
    }
    created = 1;
    if ((rc = rl__os_write_all(fd, p, n, f->who, side)) != RL_OK) goto fail;
    if ((rc = rl__os_sync_fd(fd, f->no_sync, f->who, side)) != RL_OK) goto fail;
    close(fd);
    fd = -1;
    if ((rc = rl__os_sync_dir(f->dir, f->no_sync, f->who)) != RL_OK) goto fail;
    if (!(*out_side = rl__strdup(side))) {
        rc = RL_E_OUT_OF_MEMORY;
        goto fail;
    }
    return RL_OK;
fail:
    rl__errdetail_append(err,
                         "cannot truncate %s %s at byte offset %zu: saving the %zu discarded bytes "
                         "to %s failed (%s); no file was changed",
                         f->what, path, off, n, side, rl_error_name(rc));
    if (fd >= 0) close(fd);
    if (created && rl__os_unlink(side) != 0) rl__os_io_fail(f->who, "unlink", side);
    return rc;
}

int rl__wal_cut_tail(const rl__wal_file *f, const char *path, size_t off, const uint8_t *p, size_t n, char **out_side,
                     rl__errdetail *err) {
    char *side = NULL;
    int rc, fd;
    *out_side = NULL;
    if ((rc = save_tail(f, path, off, p, n, &side, err)) != RL_OK) return rc;
    fd = rl__os_open(path, O_WRONLY | O_CLOEXEC, 0);
    if (fd < 0) rc = rl__os_io_fail(f->who, "open", path);
    else if (rl__os_ftruncate(fd, (off_t)off) != 0) rc = rl__os_io_fail(f->who, "ftruncate", path);
    else rc = rl__os_sync_fd(fd, f->no_sync, f->who, path);
    if (fd >= 0) close(fd);
    if (rc != RL_OK) {
        rl__errdetail_append(err,
                             "cannot truncate %s %s at byte offset %zu: %s (the discarded bytes "
                             "are saved in %s)",
                             f->what, path, off, rl_error_name(rc), side);
        rl__free(side);
        return rc;
    }
    *out_side = side;
    return RL_OK;
}
