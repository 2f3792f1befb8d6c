/* errdetail.h (internal) — the one implementation of an error detail message: the text a handle
 * keeps about the last failed call on it (STYLE §4, "Detail message per handle", SQLite's
 * sqlite3_errmsg).
 *
 * Every handle that can fail with more to say than its code embeds one rl__errdetail and exposes
 * it through a public rl_<object>_errmsg function: rl_metadata_errmsg, rl_store_errmsg,
 * rl_cursor_errmsg. rl_db_open, which has no handle to leave it on, keeps one per thread
 * (rl_last_error_detail, src/kv/db.c). The rules, the same for every handle (docs/design.md §2,
 * "Error details"):
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
 * Messages are cut at RL__ERRDETAIL_CAP - 1 bytes.
 */
#ifndef RL_BASE_ERRDETAIL_H
#define RL_BASE_ERRDETAIL_H

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>

#define RL__ERRDETAIL_CAP 1024

typedef struct {
    pthread_mutex_t *mu;         /* borrowed; NULL when one thread at a time uses the handle */
    atomic_uint n_set;           /* how many times the message was set (rl__errdetail_mark):
                                  * read without the mutex, so a call that succeeds takes no lock */
    char msg[RL__ERRDETAIL_CAP]; /* NUL-terminated; "" until a call fails */
} rl__errdetail;

/* Initialise d with an empty message. mu: a mutex the handle owns and that outlives d, or NULL. */
void rl__errdetail_init(rl__errdetail *d, pthread_mutex_t *mu);
/* Set the message (printf format; cut to fit). d NULL is a no-op. Never fails. */
void rl__errdetail_set(rl__errdetail *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void rl__errdetail_vset(rl__errdetail *d, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
/* Copy another message (e.g. a lower layer's detail) into d. */
void rl__errdetail_copy(rl__errdetail *d, const char *msg);
/* The message: borrowed from d (rule 2); "" for NULL. */
const char *rl__errdetail_get(const rl__errdetail *d);
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
