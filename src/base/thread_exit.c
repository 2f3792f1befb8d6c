/* thread_exit.c — rl__thread_at_exit (thread_exit.h): one pthread key for the process, whose
 * destructor runs this thread's registered functions. */
#include "base/thread_exit.h"

#include <pthread.h>

static _Thread_local struct {
    void (*fn[RL_THREAD_AT_EXIT_MAX])(void);
    int n;
    int set; /* the key holds this thread's value (so the destructor runs) */
} te;
static pthread_key_t te_key;
static int te_key_ok;
static pthread_once_t te_once = PTHREAD_ONCE_INIT;

static void te_run(void *unused) {
    (void)unused;
    for (int i = te.n - 1; i >= 0; i--) te.fn[i]();
    te.n = 0;
    te.set = 0;
}

static void te_key_create(void) { te_key_ok = pthread_key_create(&te_key, te_run) == 0; }

int rl__thread_at_exit(void (*fn)(void)) {
    for (int i = 0; i < te.n; i++)
        if (te.fn[i] == fn) return 1;
    if (te.n == RL_THREAD_AT_EXIT_MAX) return 0;
    if (!te.set) {
        pthread_once(&te_once, te_key_create);
        if (!te_key_ok || pthread_setspecific(te_key, &te) != 0) return 0;
        te.set = 1;
    }
    te.fn[te.n++] = fn;
    return 1;
}
