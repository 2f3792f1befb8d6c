/* fatal.h (internal) — why an rlkvd process stopped: the fatal error a coordinator or storage
 * server writes to DIR/fatal.json (its --dir) before it exits, and which `rl cluster status`
 * reads for a process that is down (docs/design.md §8.6, docs/file-format.md).
 *
 *   start ok ──rl__fatal_reserve──▶ cleared file, kept open ──fatal error──▶ rl__fatal_record
 *                                   (a later start clears it again)          (overwrites it in place)
 *   start fails ──────────────────────────────────────────────────────────▶ rl__fatal_record
 *                                                                            (a new file)
 *
 * Invariants:
 *   1. The file is always RL_FATAL_FILE_LEN bytes once reserved: one JSON object padded with
 *      spaces and ended by a newline, {"fatal": null, ...} while the process runs, {"fatal":
 *      {...}} after a fatal error. A record overwrites the reserved bytes with pwrite, so it
 *      allocates no new block: a disk that filled up (the error being recorded) cannot refuse
 *      it. Without a reservation (a failed start) the record is a new file, best effort.
 *   2. A successful start clears an older record (rl__fatal_reserve; in place when the file has
 *      its full size, so a disk that is still full does not keep a stale record): the file only
 *      ever tells why the last run stopped.
 *   3. Recording never fails the caller: it is the last thing a failing process does; a failure
 *      to record is logged and returned for information.
 *
 * Threads: reserve, record and release are called by the process's main thread; read by any
 * process (rl cluster status). Errors: codes of include/reclayer/error.h.
 */
#ifndef RL_SERVER_FATAL_H
#define RL_SERVER_FATAL_H

#include <stdint.h>

#include <jansson.h>

#include "base/buf.h"
#include "base/errdetail.h"

#define RL_FATAL_FILE "fatal.json"
#define RL_FATAL_FILE_LEN 4096 /* bytes of the file (invariant 1): one page */

/* A reserved fatal file: the open descriptor of DIR/fatal.json (-1: none). */
typedef struct {
    int fd;
    char path[4200];
} rl__fatal_file;

/* rl__fatal_init — a file that is not reserved yet (fd -1). */
void rl__fatal_init(rl__fatal_file *f);

/* rl__fatal_reserve — the process in dir started: write dir/fatal.json cleared ({"fatal": null,
 * "pid", "started"} padded to RL_FATAL_FILE_LEN bytes: over the old file in place when it has
 * that size, else as a new file replaced atomically), fdatasync it (unless no_sync) and keep it
 * open in f for rl__fatal_record. RL_OK, or the mapped error of the failed call with the reason
 * appended to err (f stays unreserved). [main thread] */
int rl__fatal_reserve(rl__fatal_file *f, const char *dir, int no_sync, rl__errdetail *err);

/* rl__fatal_record — record that the process (role "coordinator" or "storage", id) stops on
 * code: {"fatal": {"code", "name", "message" (the code's), "what" (what it was doing; may be
 * NULL), "role", "id", "pid", "time" (UTC, ISO 8601), "time_unix"}} — in place when f is
 * reserved, else as a new dir/fatal.json (f may be NULL). Returns RL_OK or the write's error
 * (logged; invariant 3). [main thread] */
int rl__fatal_record(rl__fatal_file *f, const char *dir, const char *role, uint32_t id, int code, const char *what);

/* rl__fatal_release — close f's descriptor (the file stays). NULL or unreserved: nothing. */
void rl__fatal_release(rl__fatal_file *f);

/* rl__fatal_read — the record of dir/fatal.json: *out the "fatal" object (json_decref; with a
 * "summary" string added: "no_space (3005) at 2026-01-02T03:04:05Z: syncing the engine: No space
 * left on device"), or NULL when there is none (no file, or cleared). RL_OK,
 * RL_E_CORRUPT_DATA (not such a file: the reason in err), RL_E_OUT_OF_MEMORY; another read error
 * of the file as mapped. */
int rl__fatal_read(const char *dir, json_t **out, rl__errdetail *err);

#endif
