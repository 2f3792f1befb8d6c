/* os.h (internal) — the storage engine's file-system calls, with fault injection for tests.
 *
 * durable.c makes every call that changes files (open, write, pwrite, fsync, fdatasync, rename,
 * ftruncate, unlink) through these wrappers. Each behaves exactly like the POSIX call it wraps
 * (same arguments, same return value, errno set on failure), except that a test can arm one
 * injected failure: "the (n+1)th call of kind K from now fails with errno E"
 * (tests/fault/storage).
 *
 * Cost when nothing is armed: one relaxed atomic load and one predictable branch per call.
 *
 * Injection is per process (not per thread: the KV layer's commits may sync on any caller's
 * thread) and fires once; the calls after it succeed again. While armed, calls of every kind are
 * counted, so that a test can first measure a workload (arm with a huge n, read the counts) and
 * then sweep n over every call it makes. Arming, disarming and reading the counters are
 * thread-safe; a test arms before the workload and disarms after it.
 *
 * A write (or pwrite) armed with RL_OS_FAULT_TORN first writes the first half of its bytes for
 * real and then fails, as a device that fills up or errors mid-request would: the file is left
 * with a torn record for recovery to deal with.
 */
#ifndef RL_STORAGE_OS_H
#define RL_STORAGE_OS_H

#include <stddef.h>
#include <sys/types.h>

/* Kinds of calls that can fail. open covers every open() durable.c makes (files, the directory
 * it fsyncs, reads during recovery); fsync covers fsync and fdatasync. */
typedef enum {
    RL_OS_OPEN = 0,
    RL_OS_WRITE = 1, /* write and pwrite */
    RL_OS_FSYNC = 2, /* fsync and fdatasync */
    RL_OS_RENAME = 3,
    RL_OS_FTRUNCATE = 4,
    RL_OS_UNLINK = 5,
    RL_OS_KINDS = 6
} rl_os_kind;

enum { RL_OS_FAULT_TORN = 1 }; /* flags of rl__os_fault_arm */

/* Arm one failure: the (n+1)th call of `kind` from now (n = 0: the next one) fails with errno
 * `err` (e.g. EIO, ENOSPC). Resets the counters. flags: 0 or RL_OS_FAULT_TORN. n < 0 arms
 * counting only (nothing fails). */
void rl__os_fault_arm(rl_os_kind kind, long n, int err, int flags);
/* Stop injecting and counting. */
void rl__os_fault_disarm(void);
/* Calls of `kind` made since the last arm (0 when nothing was armed). */
long rl__os_fault_count(rl_os_kind kind);
/* 1 if the armed failure has happened. */
int rl__os_fault_fired(void);

/* The wrappers: same contracts as the POSIX calls. rl__os_open's mode is used with O_CREAT. */
int rl__os_open(const char *path, int flags, mode_t mode);
ssize_t rl__os_write(int fd, const void *p, size_t n);
ssize_t rl__os_pwrite(int fd, const void *p, size_t n, off_t off);
int rl__os_fsync(int fd);
int rl__os_fdatasync(int fd);
int rl__os_rename(const char *from, const char *to);
int rl__os_ftruncate(int fd, off_t len);
int rl__os_unlink(const char *path);

#endif
