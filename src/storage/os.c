/* os.c — the durable code's file-system calls, their fault injection and the shared file
 * helpers (contract in os.h).
 *
 * Invariants:
 *   1. `armed` is 0 unless a test armed a fault; every wrapper reads it once (relaxed) and, when
 *      0, calls the OS directly: the production path is one load and one branch.
 *   2. The state below `armed` (target kind, countdown, errno, flags, counters, fired) is only
 *      read or written under `mu`.
 *   3. The failure fires at most once per arm: `fired` is set when it does, and the countdown is
 *      not consulted again.
 */
#include "storage/os.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/log.h"
#include "base/sync.h"
#include "reclayer/error.h"

static atomic_int armed;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static rl__os_kind f_kind;
static long f_left; /* calls of f_kind to let through before the failure; < 0: never fail */
static int f_errno;
static int f_flags;
static int f_fired;
static long f_count[RL_OS_KINDS];

void rl__os_fault_arm(rl__os_kind kind, long n, int err, int flags) {
    pthread_mutex_lock(&mu);
    f_kind = kind;
    f_left = n;
    f_errno = err;
    f_flags = flags;
    f_fired = 0;
    for (int i = 0; i < RL_OS_KINDS; i++) f_count[i] = 0;
    atomic_store_explicit(&armed, 1, memory_order_release);
    pthread_mutex_unlock(&mu);
}

void rl__os_fault_disarm(void) {
    pthread_mutex_lock(&mu);
    atomic_store_explicit(&armed, 0, memory_order_release);
    for (int i = 0; i < RL_OS_KINDS; i++) f_count[i] = 0;
    f_fired = 0;
    pthread_mutex_unlock(&mu);
}

long rl__os_fault_count(rl__os_kind kind) {
    pthread_mutex_lock(&mu);
    long n = (unsigned)kind < RL_OS_KINDS ? f_count[kind] : 0;
    pthread_mutex_unlock(&mu);
    return n;
}

int rl__os_fault_fired(void) { return rl__locked_int(&mu, &f_fired); }

/* Count one call of `kind` and decide whether it fails. Returns 0 (go ahead) or the errno to
 * fail with; *out_torn is set to 1 when a write should tear first. Only called when armed. */
static int inject(rl__os_kind kind, int *out_torn) {
    int err = 0;
    pthread_mutex_lock(&mu);
    f_count[kind]++;
    if (kind == f_kind && !f_fired && f_left >= 0) {
        if (f_left == 0) {
            f_fired = 1;
            err = f_errno;
            if (out_torn) *out_torn = (f_flags & RL_OS_FAULT_TORN) != 0;
        } else {
            f_left--;
        }
    }
    pthread_mutex_unlock(&mu);
    return err;
}

#define FAULT(kind, torn) \
    (__builtin_expect(atomic_load_explicit(&armed, memory_order_relaxed), 0) ? inject(kind, torn) : 0)

int rl__os_open(const char *path, int flags, mode_t mode) {
    int err = FAULT(RL_OS_OPEN, NULL);
    if (err) {
        errno = err;
        return -1;
    }
    return open(path, flags, mode);
}

ssize_t rl__os_read(int fd, void *p, size_t n) {
    int err = FAULT(RL_OS_READ, NULL);
    if (err) {
        errno = err;
        return -1;
    }
    return read(fd, p, n);
}

/* write (off < 0: at fd's position) or pwrite at off, under the RL_OS_WRITE fault. */
static ssize_t write_at(int fd, const void *p, size_t n, off_t off) {
    int torn = 0, err = FAULT(RL_OS_WRITE, &torn);
    if (err) {
        if (torn && n > 1) {
            ssize_t w = off < 0 ? write(fd, p, n / 2) : pwrite(fd, p, n / 2, off);
            (void)w; /* the call fails whatever the half did */
        }
        errno = err;
        return -1;
    }
    return off < 0 ? write(fd, p, n) : pwrite(fd, p, n, off);
}

ssize_t rl__os_write(int fd, const void *p, size_t n) { return write_at(fd, p, n, -1); }

ssize_t rl__os_pwrite(int fd, const void *p, size_t n, off_t off) { return write_at(fd, p, n, off); }

int rl__os_fsync(int fd) {
    int err = FAULT(RL_OS_FSYNC, NULL);
    if (err) {
        errno = err;
        return -1;
    }
    return fsync(fd);
}

int rl__os_fdatasync(int fd) {
    int err = FAULT(RL_OS_FSYNC, NULL);
    if (err) {
        errno = err;
        return -1;
    }
    return fdatasync(fd);
}

int rl__os_rename(const char *from, const char *to) {
    int err = FAULT(RL_OS_RENAME, NULL);
    if (err) {
        errno = err;
        return -1;
    }
    return rename(from, to);
}

int rl__os_ftruncate(int fd, off_t len) {
    int err = FAULT(RL_OS_FTRUNCATE, NULL);
    if (err) {
        errno = err;
        return -1;
    }
    return ftruncate(fd, len);
}

int rl__os_unlink(const char *path) {
    int err = FAULT(RL_OS_UNLINK, NULL);
    if (err) {
        errno = err;
        return -1;
    }
    return unlink(path);
}

int rl__os_mkdir(const char *path, mode_t mode) {
    int err = FAULT(RL_OS_MKDIR, NULL);
    if (err) {
        errno = err;
        return -1;
    }
    return mkdir(path, mode);
}

/* ---- Helpers ----------------------------------------------------------------------------- */

int rl__os_map_errno(int e) {
    switch (e) {
    case ENOENT: return RL_E_FILE_NOT_FOUND;
    case ENOSPC:
    case EDQUOT: return RL_E_NO_SPACE;
    case ENOMEM: return RL_E_OUT_OF_MEMORY;
    default: return RL_E_IO_ERROR;
    }
}

int rl__os_io_fail(const char *who, const char *op, const char *path) {
    int e = errno;
    rl__log(RL_LOG_ERROR, "%s: %s %s failed: %s", who, op, path, strerror(e));
    errno = e;
    return rl__os_map_errno(e);
}

/* All n bytes by write_at (off < 0: at fd's position), retrying short writes and EINTR. */
static int write_all_at(int fd, const void *p, size_t n, off_t off, const char *who, const char *path) {
    const uint8_t *q = p;
    while (n > 0) {
        ssize_t w = write_at(fd, q, n, off);
        if (w < 0) {
            if (errno == EINTR) continue;
            return rl__os_io_fail(who, "write", path);
        }
        q += w;
        n -= (size_t)w;
        if (off >= 0) off += w;
    }
    return RL_OK;
}

int rl__os_write_all(int fd, const void *p, size_t n, const char *who, const char *path) {
    return write_all_at(fd, p, n, -1, who, path);
}

int rl__os_pwrite_all(int fd, const void *p, size_t n, off_t off, const char *who, const char *path) {
    return write_all_at(fd, p, n, off, who, path);
}

int rl__os_sync_fd(int fd, int no_sync, const char *who, const char *path) {
    if (no_sync) return RL_OK;
    if (rl__os_fdatasync(fd) != 0) return rl__os_io_fail(who, "fdatasync", path);
    return RL_OK;
}

int rl__os_sync_dir(const char *dir, int no_sync, const char *who) {
    if (no_sync) return RL_OK;
    int fd = rl__os_open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
    if (fd < 0) return rl__os_io_fail(who, "open", dir);
    int rc = rl__os_fsync(fd) == 0 ? RL_OK : rl__os_io_fail(who, "fsync", dir);
    close(fd);
    return rc;
}

/* The atomic write of rl__os_write_file_atomic (mode 0644) and rl__os_write_file_private (mode
 * 0600: the temporary file is created anew, O_EXCL, so it never inherits a stale file's mode). */
static int write_atomic(const char *path, const void *data, size_t len, int private_mode, int no_sync, const char *who,
                        rl__errdetail *err) {
    char tmp[4104], dir[4096];
    size_t n = strlen(path);
    if (n >= sizeof dir) {
        rl__errdetail_append(err, "cannot write %.64s...: the path is longer than %zu bytes", path, sizeof dir - 1);
        return RL_E_INVALID_ARGUMENT;
    }
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    if (private_mode) (void)rl__os_unlink(tmp);
    int rc, fd = private_mode ? rl__os_open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)
                              : rl__os_open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        rc = rl__os_io_fail(who, "open", tmp);
        goto fail;
    }
    rc = rl__os_write_all(fd, data, len, who, tmp);
    if (rc == RL_OK) rc = rl__os_sync_fd(fd, no_sync, who, tmp);
    close(fd);
    if (rc == RL_OK && rl__os_rename(tmp, path) != 0) rc = rl__os_io_fail(who, "rename", tmp);
    if (rc != RL_OK) {
        int e = errno;
        (void)rl__os_unlink(tmp);
        errno = e;
        goto fail;
    }
    memcpy(dir, path, n + 1);
    char *slash = strrchr(dir, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == dir) dir[1] = 0;
    else *slash = 0;
    if ((rc = rl__os_sync_dir(dir, no_sync, who)) == RL_OK) return RL_OK;
fail:
    rl__errdetail_append(err, "cannot write %s: %s", path, strerror(errno));
    return rc;
}

int rl__os_write_file_atomic(const char *path, const void *data, size_t len, int no_sync, const char *who,
                             rl__errdetail *err) {
    return write_atomic(path, data, len, 0, no_sync, who, err);
}

int rl__os_write_file_private(const char *path, const void *data, size_t len, const char *who, rl__errdetail *err) {
    return write_atomic(path, data, len, 1, 0, who, err);
}

int rl__os_read_file(const char *path, uint8_t **out, size_t *out_len) {
    int fd = rl__os_open(path, O_RDONLY | O_CLOEXEC, 0), rc = RL_OK;
    uint8_t *buf = NULL;
    struct stat sb;
    *out = NULL;
    *out_len = 0;
    if (fd < 0) return rl__os_map_errno(errno);
    if (fstat(fd, &sb) != 0) {
        rc = rl__os_map_errno(errno);
        goto fail;
    }
    size_t n = (size_t)sb.st_size, got = 0;
    buf = rl__malloc(n ? n : 1);
    if (!buf) {
        rc = RL_E_OUT_OF_MEMORY;
        goto fail;
    }
    while (got < n) {
        ssize_t r = rl__os_read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            rc = r < 0 ? rl__os_map_errno(errno) : RL_E_IO_ERROR;
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

int rl__os_lock_file(const char *path, int shared, const char *who, const char *holder, int *out_fd,
                     rl__errdetail *err) {
    int fd = -1, rc;
    if (shared) fd = rl__os_open(path, O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0 && (!shared || errno == ENOENT)) fd = rl__os_open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    *out_fd = fd;
    if (fd < 0) {
        rc = rl__os_io_fail(who, "open", path);
        rl__errdetail_append(err, "cannot open %s: %s", path, strerror(errno));
        return rc;
    }
    if (flock(fd, (shared ? LOCK_SH : LOCK_EX) | LOCK_NB) != 0) {
        rc = errno == EWOULDBLOCK ? RL_E_DATABASE_LOCKED_BY_PROCESS : rl__os_map_errno(errno);
        rl__errdetail_append(err, "%s is locked by %s", path, holder);
        return rc;
    }
    return RL_OK;
}
