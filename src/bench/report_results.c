/* report_results.c — the campaign's results file: written compressed as DIR/results.json.zst, read
 * back in either form (rl__camp_results_write, rl__camp_results_load; campaign_int.h).
 *
 * Why compressed: a full run's results.json is 1.3–1.7 MB of the same field names over and over
 * (every raw sample, check and summary entry); zstd at level 19 makes it 65–80 KB in under a
 * second, so a run's outputs can be kept in the tree (docs/campaigns/) whole.
 *
 * The file:
 *   1. One zstd frame (RFC 8878) that records its content size and a checksum of it (XXH64, as the
 *      zstd program writes by default); its content is, byte for byte, what results.json was
 *      before compression existed: json_dumps of the results with RL_CAMP_RESULTS_JSON_FLAGS, no
 *      trailing newline. So `zstd -d results.json.zst` gives results.json, and tests compare the
 *      decompressed bytes with an uncompressed dump.
 *   2. Nothing else is written: there is no uncompressed copy beside it.
 *
 * Reading goes by content, not by name: a file that starts with zstd's magic number
 * (28 b5 2f fd) is decompressed — every frame, with or without a recorded content size, so what
 * the zstd program writes reads too — and anything else is parsed as JSON. Given a directory, the
 * reader takes DIR/results.json.zst, else DIR/results.json (runs from before compression, or
 * decompressed by hand). Decompressed text is capped at RL_CAMP_RESULTS_MAX bytes.
 *
 * Errors: RL_E_FILE_NOT_FOUND (neither file), RL_E_IO_ERROR (read or write), RL_E_CORRUPT_DATA
 * (not zstd and not JSON, a truncated or damaged frame, text past the cap), RL_E_OUT_OF_MEMORY;
 * the file's path and the reason in err.
 */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include <zstd.h>

#include "base/log.h"
#include "bench/campaign_int.h"

#define RESULTS_LEVEL 19 /* zstd level: 65–80 KB for a full run, < 1 s */

static const uint8_t zstd_magic[4] = {0x28, 0xb5, 0x2f, 0xfd};

/* json_dump_callback's sink: append to the rl_buf in data. */
static int dump_to_buf(const char *p, size_t n, void *data) {
    rl_buf *b = data;
    rl__buf_append(b, p, n);
    return rl__buf_error(b) ? -1 : 0;
}

/* Read the whole file at path into out. RL_OK, RL_E_FILE_NOT_FOUND, RL_E_IO_ERROR or
 * RL_E_OUT_OF_MEMORY, with err. */
static int read_all(const char *path, rl_buf *out, rl__errdetail *err) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        rl__errdetail_append(err, "cannot open %s: %s", path, strerror(errno));
        return errno == ENOENT ? RL_E_FILE_NOT_FOUND : RL_E_IO_ERROR;
    }
    int rc = RL_OK;
    for (;;) {
        if ((rc = rl__buf_reserve(out, 1 << 16))) {
            rl__errdetail_append(err, "%s: out of memory", path);
            break;
        }
        size_t n = fread(out->data + out->len, 1, 1 << 16, f);
        out->len += n;
        out->data[out->len] = 0;
        if (n < (1 << 16)) break;
    }
    if (!rc && ferror(f)) {
        rl__errdetail_append(err, "cannot read %s", path);
        rc = RL_E_IO_ERROR;
    }
    fclose(f);
    return rc;
}

/* Decompress every zstd frame of in[0..len) into out (NUL-terminated). RL_OK, RL_E_CORRUPT_DATA or
 * RL_E_OUT_OF_MEMORY, with err naming path. */
static int decompress(const char *path, const uint8_t *in, size_t len, rl_buf *out, rl__errdetail *err) {
    ZSTD_DCtx *d = ZSTD_createDCtx();
    if (!d) {
        rl__errdetail_append(err, "%s: out of memory", path);
        return RL_E_OUT_OF_MEMORY;
    }
    ZSTD_inBuffer ib = {in, len, 0};
    size_t left = 0; /* ZSTD_decompressStream's hint: 0 once a frame is decoded and flushed */
    int full = 0;    /* the last call filled its output: it may hold more */
    int rc = RL_OK;
    do {
        size_t room = ZSTD_DStreamOutSize();
        if (out->len + room > RL_CAMP_RESULTS_MAX) {
            rl__errdetail_append(err, "%s: decompresses to more than %d MiB", path, RL_CAMP_RESULTS_MAX >> 20);
            rc = RL_CORRUPT(RL_E_CORRUPT_DATA);
            goto done;
        }
        if (rl__buf_reserve(out, room)) {
            rl__errdetail_append(err, "%s: out of memory", path);
            rc = RL_E_OUT_OF_MEMORY;
            goto done;
        }
        ZSTD_outBuffer ob = {out->data + out->len, room, 0};
        left = ZSTD_decompressStream(d, &ob, &ib);
        if (ZSTD_isError(left)) {
            rl__errdetail_append(err, "%s: not a valid zstd file: %s", path, ZSTD_getErrorName(left));
            rc = RL_CORRUPT(RL_E_CORRUPT_DATA);
            goto done;
        }
        out->len += ob.pos;
        out->data[out->len] = 0;
        full = ob.pos == room;
    } while (ib.pos < ib.size || full);
    if (left != 0) {
        rl__errdetail_append(err, "%s: the zstd data is truncated", path);
        rc = RL_CORRUPT(RL_E_CORRUPT_DATA);
    }
done:
    ZSTD_freeDCtx(d);
    return rc;
}

int rl__camp_results_write(const char *dir, json_t *results, rl__errdetail *err) {
    char path[RL_CAMP_PATH_MAX + 64];
    rl_buf text, z;
    FILE *f = NULL;
    int rc = RL_OK;
    rl__buf_init(&text);
    rl__buf_init(&z);
    snprintf(path, sizeof path, "%s/%s", dir, RL_CAMP_RESULTS_NAME);
    if (json_dump_callback(results, dump_to_buf, &text, RL_CAMP_RESULTS_JSON_FLAGS) != 0) {
        rl__errdetail_append(err, "cannot write %s: %s", path,
                             rl__buf_error(&text) ? "out of memory" : "the results cannot be printed as JSON");
        rc = rl__buf_error(&text) ? RL_E_OUT_OF_MEMORY : RL_E_INTERNAL_ERROR;
        goto done;
    }
    size_t bound = ZSTD_compressBound(text.len);
    if (rl__buf_reserve(&z, bound)) {
        rl__errdetail_append(err, "cannot write %s: out of memory", path);
        rc = RL_E_OUT_OF_MEMORY;
        goto done;
    }
    /* One-shot compression records the content size in the frame header; the checksum (as the zstd
     * program writes by default) lets a reader tell damaged data from other results. */
    ZSTD_CCtx *c = ZSTD_createCCtx();
    size_t n = c ? ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, RESULTS_LEVEL) : 0;
    if (c && !ZSTD_isError(n)) n = ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 1);
    if (c && !ZSTD_isError(n)) n = ZSTD_compress2(c, z.data, bound, text.data, text.len);
    ZSTD_freeCCtx(c);
    if (!c) {
        rl__errdetail_append(err, "cannot write %s: out of memory", path);
        rc = RL_E_OUT_OF_MEMORY;
        goto done;
    }
    if (ZSTD_isError(n)) {
        rl__errdetail_append(err, "cannot write %s: zstd: %s", path, ZSTD_getErrorName(n));
        rc = RL_E_INTERNAL_ERROR;
        goto done;
    }
    f = fopen(path, "wb");
    if (!f || fwrite(z.data, 1, n, f) != n) {
        rl__errdetail_append(err, "cannot write %s: %s", path, strerror(errno));
        rc = RL_E_IO_ERROR;
    }
    if (f && fclose(f) && !rc) {
        rl__errdetail_append(err, "cannot write %s: %s", path, strerror(errno));
        rc = RL_E_IO_ERROR;
    }
done:
    rl__buf_release(&text);
    rl__buf_release(&z);
    return rc;
}

int rl__camp_results_load(const char *path, json_t **out, rl__errdetail *err) {
    char file[RL_CAMP_PATH_MAX + 64];
    struct stat st;
    rl_buf raw, text;
    int rc;
    *out = NULL;
    rl__buf_init(&raw);
    rl__buf_init(&text);
    snprintf(file, sizeof file, "%s", path);
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        snprintf(file, sizeof file, "%s/%s", path, RL_CAMP_RESULTS_NAME);
        if (stat(file, &st) != 0) snprintf(file, sizeof file, "%s/results.json", path);
        if (stat(file, &st) != 0) {
            rl__errdetail_append(err, "%s holds neither %s nor results.json", path, RL_CAMP_RESULTS_NAME);
            rc = RL_E_FILE_NOT_FOUND;
            goto done;
        }
    }
    if ((rc = read_all(file, &raw, err))) goto done;
    const rl_buf *json = &raw;
    if (raw.len >= sizeof zstd_magic && !memcmp(raw.data, zstd_magic, sizeof zstd_magic)) {
        if ((rc = decompress(file, raw.data, raw.len, &text, err))) goto done;
        json = &text;
    }
    json_error_t jerr;
    *out = json_loadb((const char *)json->data, json->len, 0, &jerr);
    if (!*out) {
        rl__errdetail_append(err, "%s: not JSON (line %d, column %d: %s)", file, jerr.line, jerr.column, jerr.text);
        rc = RL_CORRUPT(RL_E_CORRUPT_DATA);
    }
done:
    rl__buf_release(&raw);
    rl__buf_release(&text);
    return rc;
}
