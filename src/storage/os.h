/* os.h (internal) — the file-system calls of the durable code (the storage engines' memory.c
 * and ssd.c, the coordinator's commit log src/server/commitlog.c), with fault injection for
 * tests, and the small file helpers they share on top of them.
 *
 * The durable code makes every file call (open, read, write, fsync, fdatasync, rename,
 * ftruncate, unlink, mkdir) through these wrappers; what it calls directly only asks about
 * names (stat, fstat, opendir/readdir), locks (flock), duplicates or closes a descriptor. The
 * ssd engine's data.mdb is LMDB's, which does its own I/O. Each behaves exactly like the POSIX call it wraps
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
 * A write armed with RL_OS_FAULT_TORN first writes the first half of its bytes for
 * real and then fails, as a device that fills up or errors mid-request would: the file is left
 * with a torn record for recovery to deal with.
 */
#ifndef RL_STORAGE_OS_H
#define RL_STORAGE_OS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/buf.h"
#include "base/errdetail.h"

/* Kinds of calls that can fail. open covers every open() the durable code makes (files, the
 * directory it fsyncs, reads during recovery); fsync covers fsync and fdatasync. */
typedef enum {
    RL_OS_OPEN = 0,
    RL_OS_WRITE = 1, /* write and pwrite */
    RL_OS_FSYNC = 2, /* fsync and fdatasync */
    RL_OS_RENAME = 3,
    RL_OS_FTRUNCATE = 4,
    RL_OS_UNLINK = 5,
    RL_OS_READ = 6,
    RL_OS_MKDIR = 7,
    RL_OS_KINDS = 8
} rl__os_kind;

enum { RL_OS_FAULT_TORN = 1 }; /* flags of rl__os_fault_arm */

/* Arm one failure: the (n+1)th call of `kind` from now (n = 0: the next one) fails with errno
 * `err` (e.g. EIO, ENOSPC). Resets the counters. flags: 0 or RL_OS_FAULT_TORN. n < 0 arms
 * counting only (nothing fails). */
void rl__os_fault_arm(rl__os_kind kind, long n, int err, int flags);
/* Stop injecting and counting. */
void rl__os_fault_disarm(void);
/* Calls of `kind` made since the last arm (0 when nothing was armed). */
long rl__os_fault_count(rl__os_kind kind);
/* 1 if the armed failure has happened. */
int rl__os_fault_fired(void);

/* The wrappers: same contracts as the POSIX calls. rl__os_open's mode is used with O_CREAT. */
int rl__os_open(const char *path, int flags, mode_t mode);
ssize_t rl__os_read(int fd, void *p, size_t n);
ssize_t rl__os_write(int fd, const void *p, size_t n);
ssize_t rl__os_pwrite(int fd, const void *p, size_t n, off_t off);
int rl__os_fsync(int fd);
int rl__os_fdatasync(int fd);
int rl__os_rename(const char *from, const char *to);
int rl__os_ftruncate(int fd, off_t len);
int rl__os_unlink(const char *path);
int rl__os_mkdir(const char *path, mode_t mode);

/* ---- Helpers on top of the wrappers -------------------------------------------------------
 * `who` is the prefix of the error log line ("storage", "commit log"); `path` names the file in
 * it. Failures are logged at RL_LOG_ERROR with the operation, the file and strerror, and mapped
 * by rl__os_map_errno. errno is left as the failed call set it. */

/* ENOENT -> RL_E_FILE_NOT_FOUND, ENOSPC/EDQUOT -> RL_E_NO_SPACE, ENOMEM -> RL_E_OUT_OF_MEMORY,
 * anything else -> RL_E_IO_ERROR. */
int rl__os_map_errno(int e);
/* Log the failed operation `op` on `path` (errno still set by it) and return its mapped code. */
int rl__os_io_fail(const char *who, const char *op, const char *path);
/* Write all n bytes at fd's position (retrying short writes and EINTR). RL_OK or the mapped
 * error (logged); the file may then hold part of the bytes. */
int rl__os_write_all(int fd, const void *p, size_t n, const char *who, const char *path);
/* As rl__os_write_all, at byte offset off (fd's position is neither used nor moved). */
int rl__os_pwrite_all(int fd, const void *p, size_t n, off_t off, const char *who, const char *path);
/* fdatasync fd unless no_sync. RL_OK or the mapped error (logged). */
int rl__os_sync_fd(int fd, int no_sync, const char *who, const char *path);
/* fsync directory dir (names created or removed in it become durable) unless no_sync. RL_OK
 * or the mapped error of the open or the fsync (logged). */
int rl__os_sync_dir(const char *dir, int no_sync, const char *who);
/* Replace the small file at path with data[0..len) so that a crash leaves the old contents or
 * the new, never a mix: write path.tmp, fdatasync it (unless no_sync), rename it over path,
 * fsync the directory (unless no_sync). RL_OK, or the mapped error of the failed call (logged),
 * with "cannot write PATH: <strerror>" appended to err (may be NULL); path.tmp is then removed.
 * RL_E_INVALID_ARGUMENT (nothing done) if path is longer than 4,095 bytes. */
int rl__os_write_file_atomic(const char *path, const void *data, size_t len, int no_sync, const char *who,
                             rl__errdetail *err);
/* As rl__os_write_file_atomic (always synced), but the file gets mode 0600 (owner only): for
 * secrets (the cluster's key file, its cluster file). */
int rl__os_write_file_private(const char *path, const void *data, size_t len, const char *who, rl__errdetail *err);
/* Read the whole file at path into a new heap buffer (*out, rl__free; at least 1 byte is
 * allocated, so *out is not NULL on RL_OK even for an empty file). Errors (nothing allocated,
 * nothing logged): the mapped errno of open/fstat/read, RL_E_IO_ERROR when the file shrank
 * while read, RL_E_OUT_OF_MEMORY. */
int rl__os_read_file(const char *path, uint8_t **out, size_t *out_len);
/* Open lock file `path` and flock() it without blocking: shared (read-only handles coexist)
 * or exclusive. shared first opens an existing file read-only and creates it only when it is
 * missing; exclusive opens it read-write, creating it. On RL_OK *out_fd is the descriptor (the
 * caller's: closing it releases the lock). Errors (*out_fd is then -1 or the open descriptor,
 * which the caller closes): the mapped error of the open (logged; err "cannot open PATH:
 * ..."), RL_E_DATABASE_LOCKED_BY_PROCESS when someone holds it (err "PATH is locked by
 * HOLDER"), or the mapped error of flock. */
int rl__os_lock_file(const char *path, int shared, const char *who, const char *holder, int *out_fd,
                     rl__errdetail *err);

#endif
