/* errdetail.h (internal) — the one internal error-detail type: the text that says, beyond its
 * code, why a call failed (STYLE §4, "Detail message per handle", SQLite's sqlite3_errmsg;
 * docs/design.md §2, "Error details").
 *
 * Every function of the library and the programs that has more to say than its code takes an
 * `rl__errdetail *err` (or `detail`) to write it to; NULL means the caller does not want it, and
 * every function below accepts NULL as a no-op. A caller that wants the text declares one on the
 * stack (rl__errdetail_init(&d, NULL)) and reads it with rl__errdetail_get. Nothing here
 * allocates or fails: the text lives in the struct and is cut at RL__ERRDETAIL_CAP - 1 bytes.
 *
 * Writing. A callee sets its message (rl__errdetail_set, replacing what was there) or appends
 * it (rl__errdetail_append, after what is there: on an empty detail the same as set). A caller
 * that wants context prefixes the callee's text: it writes "what: " first and passes the same
 * detail down for the callee to append to, taking rl__errdetail_len as a mark and cutting back to
 * it (rl__errdetail_truncate) when the callee succeeds or is retried.
 *
 * Handles. Every handle that can fail with more to say than its code embeds one rl__errdetail
 * and exposes it through a public rl_<object>_errmsg function: rl_metadata_errmsg,
 * rl_store_errmsg, rl_cursor_errmsg. rl_db_open, which has no handle to leave it on, keeps one per
 * thread (rl_last_error_detail, src/kv/db.c). The rules, the same for every handle:
 *   1. A failed call sets the message: its detail, or "<what>: <the code's message>" when it has
 *      no more to say (rl__errdetail_finish). A call that succeeds, or that returns an expected
 *      outcome (RL_E_NOT_FOUND, RL_E_ALREADY_EXISTS), leaves it as it was.
 *   2. The text lives in the handle (no allocation, so setting it cannot fail): the pointer stays
 *      valid until the handle is freed, the text until the next call on the handle.
 *   3. A call that would create a handle and fails leaves its detail on the parent handle it was
 *      given (rl_store_new → the metadata's, rl_cursor_open → the store's).
 *   4. A handle that threads may share (a built metadata, an opened store) gives its detail a
 *      mutex: writers never interleave. A reader that wants the detail of its own call reads it
 *      before another thread's call on the handle can fail (as SQLite's serialized mode).
 */
#ifndef RL_BASE_ERRDETAIL_H
#define RL_BASE_ERRDETAIL_H

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>

#define RL__ERRDETAIL_CAP 1024

typedef struct {
    pthread_mutex_t *mu;         /* borrowed; NULL when one thread at a time uses the handle */
    atomic_uint n_set;           /* how many times the message was set (rl__errdetail_mark):
                                  * read without the mutex, so a call that succeeds takes no lock */
    char msg[RL__ERRDETAIL_CAP]; /* NUL-terminated; "" until a call fails */
} rl__errdetail;

/* Initialise d with an empty message. mu: a mutex the handle owns and that outlives d, or NULL
 * (a detail on the stack, or of a handle one thread at a time uses). Cheap: three stores, so a
 * detail on the stack of a hot path costs nothing until a call fails. */
void rl__errdetail_init(rl__errdetail *d, pthread_mutex_t *mu);
/* Set the message (printf format; cut to fit), replacing the old one. The arguments may point
 * into d's own message. d NULL is a no-op. Never fails. */
void rl__errdetail_set(rl__errdetail *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void rl__errdetail_vset(rl__errdetail *d, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
/* Append to the message (printf format; cut to fit: a message already full is left as it is).
 * The arguments may point into d's own message. d NULL is a no-op. Never fails. */
void rl__errdetail_append(rl__errdetail *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void rl__errdetail_vappend(rl__errdetail *d, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
/* Copy another message (e.g. a lower layer's detail) into d. */
void rl__errdetail_copy(rl__errdetail *d, const char *msg);
/* The message: borrowed from d (rule 2); "" for NULL. */
const char *rl__errdetail_get(const rl__errdetail *d);
/* The message's length in bytes (0 for NULL): a mark for rl__errdetail_truncate. */
size_t rl__errdetail_len(const rl__errdetail *d);
/* Cut the message back to its first len bytes (a mark taken with rl__errdetail_len); a len at or
 * past its end leaves it as it is. d NULL is a no-op. Not a "set" for rl__errdetail_finish. */
void rl__errdetail_truncate(rl__errdetail *d, size_t len);
/* Empty the message (rl__errdetail_truncate(d, 0)). */
void rl__errdetail_clear(rl__errdetail *d);
/* A mark to pass to rl__errdetail_finish: taken when a public call starts (no lock; one atomic
 * load). */
unsigned rl__errdetail_mark(const rl__errdetail *d);
/* End a public call (rule 1): when rc is a failure and the call set no message since mark, set
 * "<what>: <rl_error_message(rc)>". Returns rc. */
int rl__errdetail_finish(rl__errdetail *d, unsigned mark, int rc, const char *what);

/* The calling thread's detail, for the public calls that have no handle (rl_db_open, the tuple
 * functions of reclayer/tuple.h): they clear it when they start and set it when they fail;
 * rl_last_error_detail reads it (src/base/error.c). Never NULL. */
rl__errdetail *rl__thread_detail(void);

#endif
