/* ss_life.c — the storage server's life cycle (storage_server.h): new, run, free. The one file
 * that knows every part of the role: it makes the core's state (storage_server.c, ss_int.h),
 * opens the engine, sets the hooks through which one part reaches another, starts the parts in
 * order and stops them in reverse.
 *
 *   new:  options and knobs -> the engine (recovered) -> the hooks (wake_parked: ss_serve.c,
 *         maybe_sync: ss_coord.c) -> loop, listener (rl__ss_on_accept, ss_serve.c) -> the sync
 *         thread (ss_coord.c) -> the workers (ss_mapped.c)
 *   run:  on the loop thread, replication starts (ss_coord.c: the coordinator connection, the
 *         housekeeping timer); then the loop until stopped or fatal
 *   free: workers -> sync thread -> listener, parked reads (ss_serve.c), peers (ss_mapped.c),
 *         fetches (ss_move.c) -> loop (closes every connection) -> engine, map, buffers
 *
 * Nothing calls into this file but storage_main.c and the tests (through storage_server.h).
 */
#include "server/storage_server.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/log.h"
#include "reclayer/error.h"
#include "server/ss_int.h"

static char *str_dup(const char *s) {
    size_t n = strlen(s);
    char *p = rl__malloc(n + 1);
    if (p) memcpy(p, s, n + 1);
    return p;
}

/* See storage_server.h. */
int rl__ss_new(const rl__ss_options *o, rl__ss **out, rl__errdetail *err) {
    int rc;
    if (!o || !out || !o->dir || !o->dir[0] || o->id == 0 || !o->coordinator_ip || o->coordinator_port == 0) {
        rl__errdetail_append(err, "storage server: --dir, --id (>= 1) and --coordinator are required");
        return RL_E_INVALID_ARGUMENT;
    }
    if (!o->auth || !o->auth->has_member_key) {
        rl__errdetail_append(err, "storage server: the cluster's key file (--key-file) is required");
        return RL_E_INVALID_ARGUMENT;
    }
    rl__errdetail dwhy;
    rl__errdetail_init(&dwhy, NULL);
    if (rl__netem_check(o->delay_us, o->jitter_us, &dwhy) != RL_OK) {
        rl__errdetail_append(err, "storage server: --delay-us / --jitter-us: %s", rl__errdetail_get(&dwhy));
        return RL_E_INVALID_ARGUMENT;
    }
    rl__ss *ss = rl__calloc(1, sizeof *ss);
    if (!ss) return RL_E_OUT_OF_MEMORY;
    ss->o = *o;
    ss->delay_us = o->delay_us;
    ss->jitter_us = o->jitter_us;
    ss->delay_salt = (uint64_t)getpid() << 32 | (uint64_t)o->id << 20;
    rl__lat_hist_reset(&ss->closed_late);
    ss->dir = str_dup(o->dir);
    ss->host = str_dup(o->host ? o->host : "host1");
    ss->coord_ip = str_dup(o->coordinator_ip);
    ss->coord_host = o->coordinator_host ? str_dup(o->coordinator_host) : NULL;
    ss->listen_ip = str_dup(o->listen_ip ? o->listen_ip : "127.0.0.1");
    pthread_mutex_init(&ss->map_mu, NULL);
    pthread_mutex_init(&ss->peers_mu, NULL);
    pthread_mutex_init(&ss->stream_mu, NULL);
    pthread_cond_init(&ss->stream_cv, NULL);
    pthread_mutex_init(&ss->sync_mu, NULL);
    pthread_cond_init(&ss->sync_cv, NULL);
    pthread_mutex_init(&ss->job_mu, NULL);
    pthread_cond_init(&ss->job_cv, NULL);
    rl__arena_init(&ss->req_arena, 0);
    rl__arena_init(&ss->s2s_arena, 0);
    rl__arena_init(&ss->co_arena, 0);
    rl__buf_init(&ss->reply);
    rl__buf_init(&ss->co_buf);
    if (!ss->dir || !ss->host || !ss->coord_ip || !ss->listen_ip || (o->coordinator_host && !ss->coord_host)) {
        rc = RL_E_OUT_OF_MEMORY;
        goto fail;
    }
    if (strlen(ss->host) > RL_PROTO_MAX_STRING) {
        rl__errdetail_append(err, "storage server: the host label is longer than %d bytes", RL_PROTO_MAX_STRING);
        rc = RL_E_INVALID_ARGUMENT;
        goto fail;
    }
    ss->o.dir = ss->dir;
    ss->o.host = ss->host;
    ss->o.coordinator_ip = ss->coord_ip;
    ss->o.listen_ip = ss->listen_ip;
    if (ss->o.workers <= 0) ss->o.workers = SS_DEFAULT_WORKERS;
    if (ss->o.workers > SS_MAX_WORKERS) ss->o.workers = SS_MAX_WORKERS;
    if (ss->o.future_wait_ms <= 0) ss->o.future_wait_ms = SS_DEFAULT_FUTURE_WAIT_MS;
    if (ss->o.s2s_timeout_ms <= 0) ss->o.s2s_timeout_ms = SS_DEFAULT_S2S_TIMEOUT_MS;
    if (ss->o.stream_credit_ms <= 0) ss->o.stream_credit_ms = SS_DEFAULT_STREAM_CREDIT_MS;
    if (ss->o.peek_wait_ms <= 0) ss->o.peek_wait_ms = SS_DEFAULT_PEEK_WAIT_MS;
    if (ss->o.sync_interval_ms <= 0) ss->o.sync_interval_ms = SS_DEFAULT_SYNC_INTERVAL_MS;
    if (ss->o.map_refresh_ms <= 0) ss->o.map_refresh_ms = SS_DEFAULT_MAP_REFRESH_MS;
    if (ss->o.connect_timeout_ms <= 0) ss->o.connect_timeout_ms = SS_DEFAULT_CONNECT_TIMEOUT_MS;
    if (ss->o.co_timeout_ms <= 0) ss->o.co_timeout_ms = SS_DEFAULT_CO_TIMEOUT_MS;
    if (ss->o.window_versions == 0) ss->o.window_versions = 5000000;

    /* The directory: created if missing (one level). */
    if (mkdir(ss->dir, 0755) != 0 && errno != EEXIST) {
        rl__errdetail_append(err, "storage server: cannot create %s: %s", ss->dir, strerror(errno));
        rc = RL_E_IO_ERROR;
        goto fail;
    }
    rl__storage_options so;
    memset(&so, 0, sizeof so);
    so.engine = !o->engine                     ? RL_ENGINE_AUTO
                : !strcmp(o->engine, "ssd")    ? RL_ENGINE_SSD
                : !strcmp(o->engine, "memory") ? RL_ENGINE_MEMORY
                                               : -1;
    if (so.engine < 0) {
        rl__errdetail_append(err, "storage server: unknown engine '%s' (memory or ssd)", o->engine);
        rc = RL_E_INVALID_ARGUMENT;
        goto fail;
    }
    so.dir = ss->dir;
    so.no_sync = o->no_sync;
    so.window_versions = ss->o.window_versions;
    so.checkpoint_log_bytes = o->checkpoint_log_bytes;
    if ((rc = rl__storage_open(&so, &ss->st, err)) != RL_OK) {
        rl__errdetail_append(err, "%sstorage server: cannot open the engine in %s: %s",
                             rl__errdetail_len(err) ? "; " : "", ss->dir, rl_error_name(rc));
        goto fail;
    }
    rl__storage_status s;
    rl__storage_get_status(ss->st, &s);
    atomic_store(&ss->applied, s.latest_version);
    atomic_store(&ss->known, s.latest_version);
    atomic_store(&ss->durable, s.durable_version);
    if (s.recovery_tail != RL_TAIL_CLEAN)
        rl__log(RL_LOG_WARN, "storage server %u: recovery cut a %s log tail of %" PRIu64 " bytes from %s (moved to %s)",
                o->id, rl__storage_tail_name(s.recovery_tail), s.recovery_tail_bytes,
                s.recovery_log ? s.recovery_log : "?", s.recovery_moved_to ? s.recovery_moved_to : "(left in place)");

    /* The hooks through which one part reaches another (ss_int.h). */
    ss->wake_parked = rl__ss_serve_wake_parked;
    ss->maybe_sync = rl__ss_repl_maybe_sync;
    ss->watch_applied = rl__ss_serve_watch_applied;
    ss->watch_moved = rl__ss_serve_watch_moved;

    rl__errdetail nd;
    rl__errdetail_init(&nd, NULL);
    if ((rc = rl__loop_new(0, &ss->loop, &nd)) != RL_OK) {
        rl__errdetail_append(err, "storage server: cannot create the event loop: %s", rl__errdetail_get(&nd));
        goto fail;
    }
    /* Every connection, accepted or made (coordinator, peers, fetches), runs the handshake; this
     * process proves membership (loop.h). The loop keeps its own copy of the credentials. */
    if ((rc = rl__loop_set_auth(ss->loop, o->auth)) != RL_OK ||
        (rc = rl__loop_set_limits(ss->loop, o->limits)) != RL_OK)
        goto fail;
    ss->o.auth = NULL;
    ss->o.limits = NULL;
    rc = rl__listen(ss->loop, ss->listen_ip, o->listen_port, rl__ss_on_accept, ss, &ss->lis, &nd);
    if (rc != RL_OK) {
        rl__errdetail_append(err, "storage server: cannot listen on %s:%u: %s (%s)", ss->listen_ip, o->listen_port,
                             rl_error_name(rc), rl__errdetail_get(&nd));
        goto fail;
    }
    ss->port = rl__listener_port(ss->lis);
    if ((rc = rl__ss_sync_start(ss)) != RL_OK) goto fail;
    if ((rc = rl__ss_workers_start(ss)) != RL_OK) goto fail;
    rl__log(RL_LOG_INFO, "storage server %u: %s:%u, dir %s, version %" PRIu64 "%s", o->id, ss->listen_ip, ss->port,
            ss->dir, s.latest_version, o->no_sync ? ", no sync" : "");
    *out = ss;
    return RL_OK;
fail:
    rl__ss_free(ss);
    return rc;
}

/* Started on the loop thread by rl__ss_run. */
static void on_start(rl__loop *loop, void *ud) {
    (void)loop;
    rl__ss_repl_start(ud);
}

/* See storage_server.h. */
int rl__ss_run(rl__ss *ss) {
    if (atomic_load(&ss->stopping)) return atomic_load(&ss->fatal);
    int rc = rl__loop_post(ss->loop, on_start, ss);
    if (rc != RL_OK) return rc;
    rc = rl__loop_run(ss->loop);
    atomic_store(&ss->stopping, 1);
    int f = atomic_load(&ss->fatal);
    return f ? f : rc;
}

/* See storage_server.h: the parts stop in reverse order of their start. */
void rl__ss_free(rl__ss *ss) {
    if (!ss) return;
    atomic_store(&ss->stopping, 1);
    rl__ss_workers_stop(ss); /* workers waiting for peers see `stopping` within a slice */
    rl__ss_sync_stop(ss);
    if (ss->loop) {
        rl__listener_close(ss->lis);
        ss->lis = NULL;
        rl__ss_serve_free_parked(ss); /* their clients close below */
        rl__ss_peers_free(ss);
        rl__ss_move_free(ss);    /* fetch connections close in rl__loop_free */
        rl__loop_free(ss->loop); /* closes clients (on_client_close frees them) and the
                                    coordinator connection */
        ss->loop = NULL;
    }
    rl__storage_close(ss->st);
    pthread_mutex_lock(&ss->map_mu);
    rl__ss_ranges_free(ss->own, ss->n_own);
    rl__ss_map_free(ss->map);
    pthread_mutex_unlock(&ss->map_mu);
    rl__arena_release(&ss->req_arena);
    rl__arena_release(&ss->s2s_arena);
    rl__arena_release(&ss->co_arena);
    rl__buf_release(&ss->reply);
    rl__buf_release(&ss->co_buf);
    pthread_mutex_destroy(&ss->map_mu);
    pthread_mutex_destroy(&ss->peers_mu);
    pthread_mutex_destroy(&ss->stream_mu);
    pthread_cond_destroy(&ss->stream_cv);
    pthread_mutex_destroy(&ss->sync_mu);
    pthread_cond_destroy(&ss->sync_cv);
    pthread_mutex_destroy(&ss->job_mu);
    pthread_cond_destroy(&ss->job_cv);
    rl__free(ss->dir);
    rl__free(ss->host);
    rl__free(ss->coord_ip);
    rl__free(ss->coord_host);
    rl__free(ss->listen_ip);
    rl__free(ss);
}
