/* fatal.c — DIR/fatal.json, why an rlkvd process stopped (fatal.h has the life cycle and the
 * invariants; docs/file-format.md the format).
 */
#include "server/fatal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/log.h"
#include "reclayer/error.h"
#include "storage/os.h"

/* The UTC time t as "2026-01-02T03:04:05Z" (cap >= 21). */
static void utc(time_t t, char *out, size_t cap) {
    struct tm tm;
    if (!gmtime_r(&t, &tm) || !strftime(out, cap, "%Y-%m-%dT%H:%M:%SZ", &tm)) snprintf(out, cap, "?");
}

/* o as the file's bytes (invariant 1): its compact JSON, spaces up to RL_FATAL_FILE_LEN - 1,
 * a newline. Returns a heap buffer of RL_FATAL_FILE_LEN bytes (rl__free), or NULL (memory, or
 * a text too long: the callers' objects are a few hundred bytes). */
static char *padded(json_t *o) {
    char *text = json_dumps(o, JSON_COMPACT);
    size_t len = text ? strlen(text) : 0;
    char *buf = text && len < RL_FATAL_FILE_LEN ? rl__malloc(RL_FATAL_FILE_LEN) : NULL;
    if (buf) {
        memcpy(buf, text, len);
        memset(buf + len, ' ', RL_FATAL_FILE_LEN - 1 - len);
        buf[RL_FATAL_FILE_LEN - 1] = '\n';
    }
    free(text);
    return buf;
}

void rl__fatal_init(rl__fatal_file *f) {
    f->fd = -1;
    f->path[0] = 0;
}

/* Write buf (RL_FATAL_FILE_LEN bytes) over the file open at fd from offset 0 and fdatasync it
 * (unless no_sync). RL_OK or the mapped error. */
static int overwrite(int fd, const char *buf, int no_sync, const char *path) {
    size_t done = 0;
    while (done < RL_FATAL_FILE_LEN) {
        ssize_t w = pwrite(fd, buf + done, RL_FATAL_FILE_LEN - done, (off_t)done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return rl__os_map_errno(w < 0 ? errno : EIO);
        done += (size_t)w;
    }
    return rl__os_sync_fd(fd, no_sync, "rlkvd", path);
}

/* dir/fatal.json into out (cap bytes); 0, or -1 when it does not fit. */
static int file_path(const char *dir, char *out, size_t cap) {
    int n = snprintf(out, cap, "%s/%s", dir, RL_FATAL_FILE);
    return n < 0 || (size_t)n >= cap ? -1 : 0;
}

int rl__fatal_reserve(rl__fatal_file *f, const char *dir, int no_sync, rl__errdetail *err) {
    rl__fatal_release(f);
    if (file_path(dir, f->path, sizeof f->path)) {
        rl__errdetail_append(err, "the directory name %s is too long", dir);
        return RL_E_INVALID_ARGUMENT;
    }
    char when[32];
    utc(time(NULL), when, sizeof when);
    json_t *o = json_object();
    json_object_set_new(o, "fatal", json_null());
    json_object_set_new(o, "pid", json_integer((json_int_t)getpid()));
    json_object_set_new(o, "started", json_string(when));
    char *buf = padded(o);
    json_decref(o);
    if (!buf) return RL_E_OUT_OF_MEMORY;
    /* A file of the right size (an earlier run's) is cleared in place: no new block, so a
     * restart on a disk that is still full clears it too. Otherwise it is replaced atomically
     * (a crash leaves the old record or the cleared one) and opened for the record. */
    int rc = RL_OK;
    struct stat st;
    f->fd = open(f->path, O_WRONLY | O_CLOEXEC);
    if (f->fd >= 0 && fstat(f->fd, &st) == 0 && st.st_size == RL_FATAL_FILE_LEN) {
        rc = overwrite(f->fd, buf, no_sync, f->path);
        if (rc) rl__errdetail_append(err, "cannot clear %s: %s", f->path, rl_error_name(rc));
    } else {
        if (f->fd >= 0) close(f->fd);
        f->fd = -1;
        rc = rl__os_write_file_atomic(f->path, buf, RL_FATAL_FILE_LEN, no_sync, "rlkvd", err);
        if (rc == RL_OK && (f->fd = open(f->path, O_WRONLY | O_CLOEXEC)) < 0) {
            int e = errno;
            rl__errdetail_append(err, "cannot open %s: %s", f->path, strerror(e));
            rc = rl__os_map_errno(e);
        }
    }
    rl__free(buf);
    if (rc) rl__fatal_release(f);
    return rc;
}

int rl__fatal_record(rl__fatal_file *f, const char *dir, const char *role, uint32_t id, int code, const char *what) {
    char path[4200], when[32];
    time_t now = time(NULL);
    utc(now, when, sizeof when);
    json_t *r = json_object();
    json_object_set_new(r, "code", json_integer(code));
    json_object_set_new(r, "name", json_string(rl_error_name(code)));
    json_object_set_new(r, "message", json_string(rl_error_message(code)));
    if (what && *what) json_object_set_new(r, "what", json_string(what));
    json_object_set_new(r, "role", json_string(role));
    json_object_set_new(r, "id", json_integer(id));
    json_object_set_new(r, "pid", json_integer((json_int_t)getpid()));
    json_object_set_new(r, "time", json_string(when));
    json_object_set_new(r, "time_unix", json_integer((json_int_t)now));
    json_t *o = json_object();
    json_object_set_new(o, "fatal", r);
    char *buf = padded(o);
    json_decref(o);
    if (!buf) return RL_E_OUT_OF_MEMORY;
    int rc = RL_OK;
    if (f && f->fd >= 0) { /* in place: no new block (invariant 1) */
        rc = overwrite(f->fd, buf, 0, f->path);
        if (rc) rl__log(RL_LOG_ERROR, "rlkvd: cannot record the fatal error in %s: %s", f->path, rl_error_name(rc));
    } else if (file_path(dir, path, sizeof path)) {
        rc = RL_E_INVALID_ARGUMENT;
    } else {
        rc = rl__os_write_file_atomic(path, buf, RL_FATAL_FILE_LEN, 0, "rlkvd", NULL);
    }
    rl__free(buf);
    return rc;
}

void rl__fatal_release(rl__fatal_file *f) {
    if (!f || f->fd < 0) return;
    close(f->fd);
    f->fd = -1;
}

int rl__fatal_read(const char *dir, json_t **out, rl__errdetail *err) {
    *out = NULL;
    char path[4200];
    if (file_path(dir, path, sizeof path)) return RL_E_INVALID_ARGUMENT;
    uint8_t *text = NULL;
    size_t len = 0;
    int rc = rl__os_read_file(path, &text, &len);
    if (rc == RL_E_FILE_NOT_FOUND) return RL_OK; /* never reserved nor recorded */
    if (rc) return rc;
    json_error_t je;
    json_t *root = json_loadb((const char *)text, len, 0, &je);
    rl__free(text);
    json_t *r = root ? json_object_get(root, "fatal") : NULL;
    if (!root || !r) {
        rl__errdetail_append(err, "%s is not a fatal file: %s", path, root ? "no \"fatal\" member" : je.text);
        json_decref(root);
        return RL_E_CORRUPT_DATA;
    }
    if (json_is_object(r)) {
        json_int_t code = json_integer_value(json_object_get(r, "code"));
        const char *name = json_string_value(json_object_get(r, "name"));
        const char *when = json_string_value(json_object_get(r, "time"));
        const char *what = json_string_value(json_object_get(r, "what"));
        const char *m = json_string_value(json_object_get(r, "message"));
        char summary[512];
        snprintf(summary, sizeof summary, "%s (%lld) at %s: %s%s%s", name ? name : "?", (long long)code,
                 when ? when : "?", what ? what : "", what ? ": " : "", m ? m : "");
        json_object_set_new(r, "summary", json_string(summary));
        *out = json_incref(r);
    }
    json_decref(root);
    return RL_OK;
}
