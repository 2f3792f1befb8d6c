/* os.c — the storage engine's file-system calls and their fault injection (contract in os.h).
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
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

static atomic_int armed;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static rl_os_kind f_kind;
static long f_left;  /* calls of f_kind to let through before the failure; < 0: never fail */
static int f_errno;
static int f_flags;
static int f_fired;
static long f_count[RL_OS_KINDS];

void rl__os_fault_arm(rl_os_kind kind, long n, int err, int flags) {
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

long rl__os_fault_count(rl_os_kind kind) {
    pthread_mutex_lock(&mu);
    long n = (unsigned)kind < RL_OS_KINDS ? f_count[kind] : 0;
    pthread_mutex_unlock(&mu);
    return n;
}

int rl__os_fault_fired(void) {
    pthread_mutex_lock(&mu);
    int f = f_fired;
    pthread_mutex_unlock(&mu);
    return f;
}

/* Count one call of `kind` and decide whether it fails. Returns 0 (go ahead) or the errno to
 * fail with; *out_torn is set to 1 when a write should tear first. Only called when armed. */
static int inject(rl_os_kind kind, int *out_torn) {
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

#define FAULT(kind, torn)                                                                          \
    (__builtin_expect(atomic_load_explicit(&armed, memory_order_relaxed), 0) ? inject(kind, torn)  \
                                                                             : 0)

int rl__os_open(const char *path, int flags, mode_t mode) {
    int err = FAULT(RL_OS_OPEN, NULL);
    if (err) {
        errno = err;
        return -1;
    }
    return open(path, flags, mode);
}

ssize_t rl__os_write(int fd, const void *p, size_t n) {
    int torn = 0, err = FAULT(RL_OS_WRITE, &torn);
    if (err) {
        if (torn && n > 1) {
            ssize_t w = write(fd, p, n / 2);
            (void)w; /* the call fails whatever the half did */
        }
        errno = err;
        return -1;
    }
    return write(fd, p, n);
}

ssize_t rl__os_pwrite(int fd, const void *p, size_t n, off_t off) {
    int torn = 0, err = FAULT(RL_OS_WRITE, &torn);
    if (err) {
        if (torn && n > 1) {
            ssize_t w = pwrite(fd, p, n / 2, off);
            (void)w;
        }
        errno = err;
        return -1;
    }
    return pwrite(fd, p, n, off);
}

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
