/* coord_life.c — the coordinator's life cycle (coordinator.h): open, run, stop, close. The one
 * file that knows every part of the role: it makes the core (coordinator.c), starts the parts in
 * order — placement (coord_move.c) resumes a move in flight, connections and requests
 * (coord_net.c) come with the listener —, wires them (the listener's callback and the waker of
 * parked PEEKs, coord_net.c), runs the housekeeping timer, and closes them in reverse.
 *
 *   open:  rl__co_new (options, recovery, layout) -> rl__co_move_load -> loop, listener
 *          (rl__co_on_accept) -> rl__co_publish (own server entry, port file)
 *   run:   housekeeping every CO_HOUSEKEEPING_NS (completions, placement, the version tick),
 *          the version tick's timer, then the loop until stopped
 *   close: listener -> committer (its completions run in the loop's last pass) -> parked PEEKs ->
 *          loop -> placement -> rl__co_free (the core)
 *
 * Nothing calls into this file but coordinator_main.c (through coordinator.h); the parts reach
 * each other only through the core (coord_int.h, "The files").
 */
#include "server/coordinator.h"

#include "base/clock.h"
#include "reclayer/error.h"
#include "server/coord_int.h"

/* The housekeeping timer (every CO_HOUSEKEEPING_NS): flush (a failed post may have left
 * completions queued), placement, the version tick (a move that started waiting shortens its
 * interval), and re-arm. */
static void housekeeping(rl__loop *loop, void *ud) {
    rl__coordinator *co = ud;
    rl__co_flush(co);
    rl__co_move_tick(co);
    rl__co_tick_check(co);
    if (rl__loop_timer_add(loop, rl__clock_mono_ns() + CO_HOUSEKEEPING_NS, housekeeping, co, &co->housekeeping_timer) !=
        RL_OK)
        co->housekeeping_timer = 0;
}

/* See coordinator.h. */
int rl__coordinator_open(const rl__coordinator_options *o, rl__coordinator **out, rl__errdetail *err) {
    rl__coordinator *co = NULL;
    /* 1-3. The core: options, the directory, the commit log, the system keyspace, the committer,
     * the layout. */
    int rc = rl__co_new(o, out ? &co : NULL, err);
    if (rc != RL_OK) goto fail;
    co->wake_parked = rl__co_wake_parked; /* coord_net.c's, for the core and coord_move.c */
    /* Placement: a move recorded in flight resumes once its destinations register. */
    if ((rc = rl__co_move_load(co, err)) != RL_OK) goto fail;

    /* 4. Listen, publish our own address, write the port file. */
    rl__errdetail nd;
    rl__errdetail_init(&nd, NULL);
    if ((rc = rl__loop_new(0, &co->loop, &nd)) != RL_OK) {
        rl__errdetail_append(err, "cannot create the event loop: %s", rl__errdetail_get(&nd));
        goto fail;
    }
    /* Every connection proves it knows the cluster's secrets before it is served (loop.h). */
    if ((rc = rl__loop_set_auth(co->loop, o->auth)) != RL_OK ||
        (rc = rl__loop_set_limits(co->loop, o->limits)) != RL_OK)
        goto fail;
    /* Its timers (PEEK long polls, housekeeping) need no microsecond precision: never spin —
     * unless a delay is injected, whose release timers do (rl__co_margin_for_delay). */
    rl__co_margin_for_delay(co);
    rc = rl__listen(co->loop, co->listen_ip, o->listen_port, rl__co_on_accept, co, &co->listener, &nd);
    if (rc != RL_OK) {
        rl__errdetail_append(err, "cannot listen on %s:%u: %s (%s)", co->listen_ip, o->listen_port, rl_error_name(rc),
                             rl__errdetail_get(&nd));
        goto fail;
    }
    co->port = rl__listener_port(co->listener);
    if ((rc = rl__co_publish(co, err)) != RL_OK) goto fail;
    co->notified = rl__co_durable(co);
    *out = co;
    return RL_OK;
fail:
    rl__coordinator_close(co);
    if (rc == RL_E_OUT_OF_MEMORY && rl__errdetail_len(err) == 0) rl__errdetail_append(err, "out of memory");
    return rc;
}

/* See coordinator.h: arms the housekeeping and version tick timers (the first tick is due an
 * interval from now), then runs the loop on this thread. */
int rl__coordinator_run(rl__coordinator *co) {
    if (rl__loop_timer_add(co->loop, rl__clock_mono_ns() + CO_HOUSEKEEPING_NS, housekeeping, co,
                           &co->housekeeping_timer) != RL_OK)
        co->housekeeping_timer = 0;
    co->last_version_ns = rl__clock_mono_ns();
    rl__co_tick_check(co);
    return rl__loop_run(co->loop);
}

/* See coordinator.h (rl__loop_stop only bumps an atomic and writes an eventfd). */
void rl__coordinator_stop(rl__coordinator *co) {
    if (co && co->loop) rl__loop_stop(co->loop);
}

/* See coordinator.h. */
uint16_t rl__coordinator_port(const rl__coordinator *co) { return co->port; }

/* See coordinator.h. Also used by a failed open on a partly built coordinator: every step
 * copes with what was never created. */
void rl__coordinator_close(rl__coordinator *co) {
    if (!co) return;
    if (co->listener) rl__listener_close(co->listener);
    co->listener = NULL;
    /* The committer thread finishes what is queued; its completions are posted to the loop and
     * run (replies sent where the connection still takes them) by rl__loop_free. */
    rl__committer_free(co->cm);
    co->cm = NULL;
    rl__co_drop_parked(co);
    rl__loop_free(co->loop);
    rl__co_move_free(co);
    co->loop = NULL;
    rl__co_free(co);
}
