/* sequencer.c — the version sequencer: strictly increasing commit versions at about 1,000,000 per
 * second of wall time (docs/design.md §2), and read versions reserved from the same clock.
 *
 * Invariants:
 *   1. Every version returned by rl__sequencer_next is greater than every version returned
 *      before it by the same sequencer (by rl__sequencer_next or rl__sequencer_reserve) and
 *      greater than the `recovered` version it started from, so versions keep increasing across
 *      restarts (the caller starts from the last durable one).
 *   2. version = max(last + 1, base + elapsed microseconds of the monotonic clock since init),
 *      so the version distance between two commits approximates the wall time between them in
 *      microseconds, never less; "5 seconds" is 5,000,000 versions. Tests may install their own
 *      clock (rl__sequencer_set_clock), which then stands for the monotonic clock; the default
 *      costs one NULL test per version.
 *   3. rl__sequencer_reserve returns max(last, base + elapsed microseconds) and makes it the
 *      last version: it follows the clock like a commit version but is not consumed, so any
 *      number of reservations within one microsecond share a version (read versions may be
 *      shared; a version per call would run the sequencer ahead of the clock when read versions
 *      are asked for faster than 1,000,000 a second). By invariant 1 every later commit version
 *      is greater than it, so nothing can ever commit at or below a reserved version that has not
 *      committed already: the snapshot at it is final (the embedded committer hands it out as a
 *      read version, commit.h).
 *
 * The sequencer is a plain value struct with no lock: its users (the committer's batch leader,
 * and the committer's read-version reservation under its mutex while no batch runs) serialise
 * calls.
 */
#include "commit/commit.h"

#include "base/clock.h"

/* Start a sequencer whose first version will be > recovered. s is caller-owned. */
void rl__sequencer_init(rl__sequencer *s, rl__version recovered) {
    s->last = recovered;
    s->base = recovered;
    s->clock = NULL;
    s->clock_ud = NULL;
    s->base_mono_ns = rl__clock_mono_ns();
}

/* The clock's reading: the real clock unless a test installed its own. */
static uint64_t now_ns(const rl__sequencer *s) { return s->clock ? s->clock(s->clock_ud) : rl__clock_mono_ns(); }

/* Switch clocks: rebase on the last version issued, so versions stay increasing (invariant 1)
 * and advance with the new clock from here (invariant 2). */
void rl__sequencer_set_clock(rl__sequencer *s, rl_seq_clock_fn fn, void *ud) {
    s->clock = fn;
    s->clock_ud = ud;
    s->base = s->last;
    s->base_mono_ns = now_ns(s);
}

/* The version the clock gives now: base + elapsed microseconds (invariant 2). */
static rl__version clock_version(const rl__sequencer *s) {
    uint64_t now = now_ns(s);
    uint64_t elapsed_us = now > s->base_mono_ns ? (now - s->base_mono_ns) / 1000 : 0;
    return s->base + elapsed_us;
}

/* The next commit version (invariants 1 and 2). Not thread-safe: the caller serialises. */
rl__version rl__sequencer_next(rl__sequencer *s) {
    rl__version v = clock_version(s);
    if (v <= s->last) v = s->last + 1;
    s->last = v;
    return v;
}

/* A read version that follows the clock (invariant 3): one clock reading, no version consumed.
 * Not thread-safe: the caller serialises it with rl__sequencer_next. */
rl__version rl__sequencer_reserve(rl__sequencer *s) {
    rl__version v = clock_version(s);
    if (v < s->last) v = s->last;
    s->last = v;
    return v;
}
