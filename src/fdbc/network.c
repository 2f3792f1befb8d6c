/* network.c — API version selection, network options and the network thread of libfdb_c.so
 * over reclayer.
 *
 * FoundationDB's life cycle, enforced as FoundationDB does:
 *
 *     (start) --fdb_select_api_version_impl--> SELECTED --fdb_setup_network--> SETUP
 *     SETUP --fdb_run_network (blocks)--> RUNNING --fdb_stop_network--> STOPPED (run returns)
 *
 *     call                          wrong state                          error
 *     ----------------------------  -----------------------------------  --------------------------
 *     fdb_select_api_version_impl   already selected                     api_version_already_set
 *     fdb_network_set_option        no API version                       api_version_unset
 *     fdb_setup_network             no API version / already set up      api_version_unset /
 *                                                                        network_already_setup
 *     fdb_run_network               not set up / running or stopped      network_not_setup /
 *                                                                        network_cannot_be_restarted
 *     fdb_stop_network              not set up                           network_not_setup
 *
 * Invariants:
 *   1. One network per process (FoundationDB's rule): the state is process-wide, guarded by
 *      net.mu. This is the one piece of global mutable state of the library, forced by the API.
 *   2. The network thread runs posted tasks (future callbacks) in FIFO order and nothing else;
 *      reclayer does its own I/O on its own threads, so a network that is not running delays
 *      callbacks only, never the readiness of a future.
 *   3. After fdb_stop_network the thread runs the tasks already queued, then the completion hooks
 *      (fdb_add_network_thread_completion_hook), then fdb_run_network returns. Tasks posted after
 *      that are never run (as FoundationDB's callbacks after the network stopped).
 *   4. Every wait is bounded: the loop wakes at least once a second to re-check its state.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/sync.h"
#include "fdbc/fdbc.h"
#include "reclayer/version.h"

typedef struct hook {
    void (*fn)(void *);
    void *ud;
    struct hook *next;
} hook;

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int api_version;                /* 0 until selected */
    int header_version;             /* the program's header, given with it */
    int setup;                      /* fdb_setup_network succeeded */
    int running;                    /* fdb_run_network has been entered (stays 1 after it returns) */
    int stop;                       /* fdb_stop_network was called */
    int finished;                   /* fdb_run_network returned: nothing runs any more */
    _Atomic int callbacks_anywhere; /* CALLBACKS_ON_EXTERNAL_THREADS (61) was set (read on
                                       every completion: atomic, not under mu) */
    pthread_t thread;               /* the thread in fdb_run_network, when running */
    fdbc_task *head, *tail;
    hook *hooks;
} net = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

int fdbc_api_version(void) { return rl__locked_int(&net.mu, &net.api_version); }

int fdbc_header_version(void) { return rl__locked_int(&net.mu, &net.header_version); }

int fdbc_callbacks_anywhere(void) { return atomic_load_explicit(&net.callbacks_anywhere, memory_order_relaxed); }

int fdbc_network_is_setup(void) { return rl__locked_int(&net.mu, &net.setup); }

int fdbc_on_network_thread(void) {
    pthread_mutex_lock(&net.mu);
    int on = net.running && !net.finished && pthread_equal(net.thread, pthread_self());
    pthread_mutex_unlock(&net.mu);
    return on;
}

void fdbc_post(fdbc_task *t) {
    t->next = NULL;
    pthread_mutex_lock(&net.mu);
    if (!net.finished) {
        if (net.tail) net.tail->next = t;
        else net.head = t;
        net.tail = t;
        pthread_cond_signal(&net.cv);
    }
    pthread_mutex_unlock(&net.mu);
}

FDBC_API int fdb_get_max_api_version(void) { return FDBC_MAX_API_VERSION; }

/* FoundationDB's release, source version and protocol version. The source field is reclayer's
 * build name (rl_version_string, what `rl --version` prints) so that a program can tell this
 * library from FoundationDB's own client, and which reclayer it is. */
static char client_version[160];
static pthread_once_t client_version_once = PTHREAD_ONCE_INIT;
static void client_version_init(void) {
    snprintf(client_version, sizeof client_version, "7.3.0,%s,fdb00b073000000", rl_version_string());
}
FDBC_API const char *fdb_get_client_version(void) {
    pthread_once(&client_version_once, client_version_init);
    return client_version;
}

/* Select the API version (once per process). runtime_version is what the program asks for,
 * header_version the version of the header it was compiled with (FoundationDB's checks, in
 * FoundationDB's order). */
FDBC_API fdb_error_t fdb_select_api_version_impl(int runtime_version, int header_version) {
    int rc = 0;
    pthread_mutex_lock(&net.mu);
    if (net.api_version != 0) rc = FDBC_E_API_VERSION_ALREADY_SET;
    else if (runtime_version > header_version) rc = FDBC_E_API_VERSION_INVALID;
    else if (header_version > FDBC_MAX_API_VERSION) rc = FDBC_E_API_VERSION_NOT_SUPPORTED;
    else if (runtime_version < FDBC_MIN_API_VERSION) rc = FDBC_E_API_VERSION_NOT_SUPPORTED;
    else net.api_version = runtime_version, net.header_version = header_version;
    pthread_mutex_unlock(&net.mu);
    return rc;
}

/* Network options (fdb.options, NetworkOption scope). CALLBACKS_ON_EXTERNAL_THREADS (61) lets
 * callbacks run on the threads that complete reclayer's futures (reclayer's own: an embedded
 * caller's, a cluster's network thread, a worker) instead of being handed to the network thread
 * (future.c invariant 3) — one thread hop less per completion. Tracing, TLS, knobs, buggify,
 * client versions and the multi-version client's other options are accepted and have no effect:
 * reclayer has no trace files, no TLS (it listens on loopback only) and one client. Unknown codes
 * are invalid_option. */
FDBC_API fdb_error_t fdb_network_set_option(int option, const uint8_t *value, int value_length) {
    (void)value;
    if (fdbc_api_version() == 0) return FDBC_E_API_VERSION_UNSET;
    if (value_length < 0) return FDBC_E_INVALID_OPTION_VALUE;
    if (option == 61) {
        atomic_store(&net.callbacks_anywhere, 1);
        return 0;
    }
    switch (option) {
    case 10:
    case 20: /* local_address, cluster_file */
    case 30:
    case 31:
    case 32:
    case 33:
    case 34:
    case 35: /* trace_* */
    case 36:
    case 37:
    case 38:
    case 39:
    case 40: /* knob */
    case 41:
    case 42:
    case 43:
    case 45:
    case 46:
    case 47: /* TLS_* */
    case 48:
    case 49:
    case 50:
    case 51: /* buggify_* */
    case 52:
    case 53:
    case 54:
    case 55: /* TLS_ca_*, TLS_password, disable_tls */
    case 60:
    case 62:
    case 63:
    case 64:
    case 65: /* multi-version client */
    case 66:
    case 67:
    case 70:
    case 71: /* statistics, run loop profiling */
    case 80:
    case 81:
    case 82:
    case 83: /* client_buggify_* */
    case 90: /* distributed_client_tracer */
    case 100:
    case 101:
    case 102: /* client_tmp_dir, ... */
    case 1000:
    case 1001:
    case 1002:
    case 1003: /* hidden: client versions */ return 0;
    }
    return FDBC_E_INVALID_OPTION;
}

FDBC_API fdb_error_t fdb_setup_network(void) {
    int rc = 0;
    pthread_mutex_lock(&net.mu);
    if (net.api_version == 0) rc = FDBC_E_API_VERSION_UNSET;
    else if (net.setup) rc = FDBC_E_NETWORK_ALREADY_SETUP;
    else net.setup = 1;
    pthread_mutex_unlock(&net.mu);
    return rc;
}

/* Run the network thread until fdb_stop_network (invariants 2-4). */
FDBC_API fdb_error_t fdb_run_network(void) {
    pthread_mutex_lock(&net.mu);
    if (!net.setup) {
        pthread_mutex_unlock(&net.mu);
        return FDBC_E_NETWORK_NOT_SETUP;
    }
    if (net.running) {
        pthread_mutex_unlock(&net.mu);
        return FDBC_E_NETWORK_CANNOT_BE_RESTARTED;
    }
    net.running = 1;
    net.thread = pthread_self();
    for (;;) {
        while (!net.head && !net.stop) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_sec += 1;
            pthread_cond_timedwait(&net.cv, &net.mu, &ts);
        }
        if (!net.head) break; /* stopped with nothing queued */
        fdbc_task *t = net.head;
        net.head = t->next;
        if (!net.head) net.tail = NULL;
        pthread_mutex_unlock(&net.mu);
        t->fn(t);
        pthread_mutex_lock(&net.mu);
    }
    hook *h = net.hooks;
    net.hooks = NULL;
    pthread_mutex_unlock(&net.mu);
    while (h) {
        hook *next = h->next;
        h->fn(h->ud);
        free(h);
        h = next;
    }
    pthread_mutex_lock(&net.mu);
    net.finished = 1;
    pthread_mutex_unlock(&net.mu);
    return 0;
}

FDBC_API fdb_error_t fdb_stop_network(void) {
    int rc = 0;
    pthread_mutex_lock(&net.mu);
    if (!net.setup) rc = FDBC_E_NETWORK_NOT_SETUP;
    else {
        net.stop = 1;
        pthread_cond_broadcast(&net.cv);
    }
    pthread_mutex_unlock(&net.mu);
    return rc;
}

/* Call hook(hook_parameter) on the network thread just before fdb_run_network returns. */
FDBC_API fdb_error_t fdb_add_network_thread_completion_hook(void (*fn)(void *), void *ud) {
    if (!fn) return FDBC_E_CLIENT_INVALID_OPERATION;
    hook *h = malloc(sizeof *h);
    if (!h) return FDBC_E_LARGE_ALLOC_FAILED;
    h->fn = fn;
    h->ud = ud;
    pthread_mutex_lock(&net.mu);
    if (net.finished) {
        pthread_mutex_unlock(&net.mu);
        free(h);
        return FDBC_E_NETWORK_CANNOT_BE_RESTARTED;
    }
    h->next = net.hooks;
    net.hooks = h;
    pthread_mutex_unlock(&net.mu);
    return 0;
}
