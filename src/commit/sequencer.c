/* sequencer.c — the version sequencer: strictly increasing commit versions at about 1,000,000 per
 * second of wall time (DESIGN §2).
 *
 * Invariants:
 *   1. Every version returned by rl__sequencer_next is greater than every version returned
 *      before it by the same sequencer and greater than the `recovered` version it started from,
 *      so versions keep increasing across restarts (the caller starts from the last durable one).
 *   2. version = max(last + 1, base + elapsed microseconds of the monotonic clock since init),
 *      so the version distance between two commits approximates the wall time between them in
 *      microseconds, never less; "5 seconds" is 5,000,000 versions. Tests may install their own
 *      clock (rl__sequencer_set_clock), which then stands for the monotonic clock; the default
 *      costs one NULL test per version.
 *
 * The sequencer is a plain value struct with no lock: its one user (the committer's batch leader)
 * serialises calls.
 */
#include "commit/commit.h"

#include "base/clock.h"

/* Start a sequencer whose first version will be > recovered. s is caller-owned. */
void rl__sequencer_init(rl_sequencer *s, rl_version recovered) {
    s->last = recovered;
    s->base = recovered;
    s->clock = NULL;
    s->clock_ud = NULL;
    s->base_mono_ns = rl__clock_mono_ns();
}

/* The clock's reading: the real clock unless a test installed its own. */
static uint64_t now_ns(const rl_sequencer *s) { return s->clock ? s->clock(s->clock_ud) : rl__clock_mono_ns(); }

/* Switch clocks: rebase on the last version issued, so versions stay increasing (invariant 1)
 * and advance with the new clock from here (invariant 2). */
void rl__sequencer_set_clock(rl_sequencer *s, rl_seq_clock_fn fn, void *ud) {
    s->clock = fn;
    s->clock_ud = ud;
    s->base = s->last;
    s->base_mono_ns = now_ns(s);
}

/* The next commit version (invariants 1 and 2). Not thread-safe: the caller serialises. */
rl_version rl__sequencer_next(rl_sequencer *s) {
    uint64_t now = now_ns(s);
    uint64_t elapsed_us = now > s->base_mono_ns ? (now - s->base_mono_ns) / 1000 : 0;
    rl_version v = s->base + elapsed_us;
    if (v <= s->last) v = s->last + 1;
    s->last = v;
    return v;
}
