/* fdb_client.c — FoundationDB's client library, once per process: dlopen, API version, network
 * thread.
 *
 *     (none) --rl__fdb_client: dlopen + dlsym--> LOADED --select API version--> SELECTED
 *     SELECTED --fdb_setup_network + thread running fdb_run_network--> RUNNING
 *     RUNNING --exit (atexit)--> fdb_stop_network, the thread joined (at most 5 s)
 *
 * Invariants:
 *   1. FoundationDB allows one API version selection and one network per process, and its
 *      library is never unloaded: this state is process-wide (the one piece of global mutable
 *      state of the backend, forced by FoundationDB), guarded by g.mu, and created at most once.
 *   2. The library is RL_FDB_LIBRARY when set and not empty, else "libfdb_c.so" (the dynamic
 *      linker's search). A library that cannot be opened, or lacks a function, leaves no state:
 *      a later open tries again. Once an API version is selected the library stays for the
 *      life of the process; an open naming another library then fails (two client libraries
 *      cannot run in one process).
 *   3. The API version is 730, or the highest the library offers when that is lower, and at
 *      least 710 (the first with mapped ranges as used here): older libraries are refused with
 *      a message naming what to install.
 *   4. The network thread only runs fdb_run_network; the backend's callbacks run on it, or on the
 *      client library's own threads (network option CALLBACKS_ON_EXTERNAL_THREADS is set: the
 *      callbacks are thread-agnostic). At exit it is stopped and joined with a timeout, so a stuck
 *      network cannot hang the process.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kv/fdb/fdb.h"
#include "kv/fdb/fdb_int.h"
#include "reclayer/error.h"

#define INSTALL_HINT                                                                     \
    "install FoundationDB's client package (foundationdb-clients, 7.1 or later) or set " \
    "RL_FDB_LIBRARY to the path of a libfdb_c.so"

static struct {
    pthread_mutex_t mu;
    int ready; /* 1: g.api is complete and the network runs */
    void *lib;
    rl__fdb_api api;
    pthread_t net;
    int has_net;  /* we started the network thread */
    int net_done; /* fdb_run_network returned (under mu) */
    pthread_cond_t net_cv;
} g = {.mu = PTHREAD_MUTEX_INITIALIZER, .net_cv = PTHREAD_COND_INITIALIZER};

static const char *library_path(void) {
    const char *p = getenv("RL_FDB_LIBRARY");
    return p && *p ? p : "libfdb_c.so";
}

static void *net_main(void *ud) {
    (void)ud;
    g.api.run_network();
    pthread_mutex_lock(&g.mu);
    g.net_done = 1;
    pthread_cond_broadcast(&g.net_cv);
    pthread_mutex_unlock(&g.mu);
    return NULL;
}

/* atexit: stop the network and wait for its thread, at most 5 s (invariant 4). */
static void stop_at_exit(void) {
    g.api.stop_network();
    pthread_mutex_lock(&g.mu);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 5;
    int rc = 0;
    while (!g.net_done && rc == 0) rc = pthread_cond_timedwait(&g.net_cv, &g.mu, &ts);
    int done = g.net_done;
    pthread_mutex_unlock(&g.mu);
    if (done) pthread_join(g.net, NULL);
}

#define SYM(field, name)                       \
    do {                                       \
        *(void **)&(field) = dlsym(lib, name); \
        if (!(field)) {                        \
            missing = name;                    \
            goto fail;                         \
        }                                      \
    } while (0)

/* Load, select the API version and start the network. Under g.mu. */
static int load(rl__errdetail *err) {
    const char *path = library_path();
    const char *missing = NULL;
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *why = dlerror();
        rl__errdetail_append(err, "cannot load FoundationDB's client library %s (%s): " INSTALL_HINT, path,
                             why ? why : "unknown reason");
        return RL_E_FILE_NOT_FOUND;
    }
    rl__fdb_api a;
    memset(&a, 0, sizeof a);
#define X(need, ret, name, params) \
    if (need) SYM(a.name, "fdb_" #name);
    RL_FDB_FUNCTIONS(X)
#undef X
    int max = a.get_max_api_version();
    if (max < RL_FDB_API_MIN) {
        rl__errdetail_append(err, "%s offers FoundationDB API version %d, older than %d (7.1): " INSTALL_HINT, path,
                             max, RL_FDB_API_MIN);
        dlclose(lib);
        return RL_E_UNSUPPORTED_OPERATION;
    }
    a.api_version = max < RL_FDB_API_MAX ? max : RL_FDB_API_MAX;
    snprintf(a.path, sizeof a.path, "%s", path);
    /* From here on the library stays loaded (invariant 2). */
    g.lib = lib;
    int rc = a.select_api_version_impl(a.api_version, a.api_version);
    if (rc) {
        rl__errdetail_append(err, "%s: selecting API version %d failed: %d %s%s", path, a.api_version, rc,
                             a.get_error(rc), rc == 2201 ? " (another part of this process already selected one)" : "");
        return rc;
    }
    /* CALLBACKS_ON_EXTERNAL_THREADS (61): the backend's callbacks are thread-agnostic, so a
     * client may call them on its own threads (reclayer's libfdb_c.so then skips a thread hop per
     * completion). Advisory: an error is ignored. */
    (void)a.network_set_option(61, NULL, 0);
    rc = a.setup_network();
    if (rc && rc != 2009) { /* network_already_setup: someone else in the process runs it */
        rl__errdetail_append(err, "%s: fdb_setup_network failed: %d %s", path, rc, a.get_error(rc));
        return rc;
    }
    g.api = a; /* before the network thread, which calls g.api.run_network */
    if (rc == 0) {
        if (pthread_create(&g.net, NULL, net_main, NULL) != 0) {
            rl__errdetail_append(err, "cannot start FoundationDB's network thread");
            return RL_E_OUT_OF_MEMORY;
        }
        g.has_net = 1;
        atexit(stop_at_exit);
    }
    g.ready = 1;
    return RL_OK;
fail:
    rl__errdetail_append(err,
                         "%s lacks %s: not a FoundationDB client library of API version %d or later (" INSTALL_HINT ")",
                         path, missing, RL_FDB_API_MIN);
    dlclose(lib);
    return RL_E_UNSUPPORTED_OPERATION;
}

int rl__fdb_client(const rl__fdb_api **out, rl__errdetail *err) {
    int rc = RL_OK;
    pthread_mutex_lock(&g.mu);
    if (g.ready) {
        if (strcmp(g.api.path, library_path()) != 0) {
            rl__errdetail_append(err, "FoundationDB's client library %s is loaded; this process cannot load %s too",
                                 g.api.path, library_path());
            rc = RL_E_UNSUPPORTED_OPERATION;
        }
    } else if (g.lib) {
        rl__errdetail_append(err, "FoundationDB's client library failed to start earlier in this process");
        rc = RL_E_UNSUPPORTED_OPERATION;
    } else {
        rc = load(err);
    }
    pthread_mutex_unlock(&g.mu);
    if (rc == RL_OK) *out = &g.api;
    return rc;
}

int rl__kv_fdb_load(rl__errdetail *err) {
    const rl__fdb_api *api;
    return rl__fdb_client(&api, err);
}
