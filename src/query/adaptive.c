/* adaptive.c — the ADAPTIVE fetch method's cost model, calibration, exploration and explanation
 * (adaptive.h has the model and its rules). Pure arithmetic on caller-owned structs.
 */
#include "query/adaptive.h"

#include <math.h>
#include <string.h>

rl__adaptive_costs rl__adaptive_default_costs(void) {
    /* Priors from docs/benchmarks.md (the cluster, part 1): a record load through the cluster
     * client costs ~8 µs of client time beyond its round trip (future, request, reply decode); a
     * 1,000-entry mapped read ~0.7 µs per entry on the server (local read, encode); a remote
     * secondary ~2 µs more (GET_MULTI out and back); replies decode at ~0.3 ns per byte on the
     * client. The server's ~1 ns per byte of reading and encoding overlaps the transfer and the
     * client's decoding since mapped replies stream (docs/design.md §8.5): what stays on the
     * critical path is ~0.4 ns per byte (the c3 protocol's split-rows1000, 1,000 records of
     * 100 kB: 76 ms, of which 13 round trips 7 ms and the entries 0.7 ms, leave 0.68 ns per byte
     * in all). A prior above the truth by more than the exploration bound (1.5x) is never
     * corrected, so it errs low. Calibration corrects whatever these miss. */
    rl__adaptive_costs c = {
        .client_per_record = 8000.0,
        .client_per_byte = 0.3,
        .server_per_entry = 700.0,
        .server_per_remote = 2000.0,
        .server_per_byte = 0.4,
    };
    return c;
}

rl__adaptive_costs rl__adaptive_embedded_costs(void) {
    /* Priors for an embedded database (no network: both methods run in the caller's process),
     * from docs/benchmarks.md (rlbench query on mem:, 1,000 rows): a record loaded by the cursor
     * ~0.28 µs, a mapped entry ~0.25 µs, split records ~0.065 ns per byte either way. The two
     * estimates stay within the exploration bound, so calibration finds the faster. */
    rl__adaptive_costs c = {
        .client_per_record = 280.0,
        .client_per_byte = 0.06,
        .server_per_entry = 250.0,
        .server_per_remote = 0.0,
        .server_per_byte = 0.005,
    };
    return c;
}

void rl__adaptive_init(rl__adaptive_model *m, const rl__adaptive_costs *costs) {
    memset(m, 0, sizeof *m);
    m->costs = costs ? *costs : rl__adaptive_default_costs();
}

int rl__adaptive_class_of(double rows) {
    int k = 0;
    while (k < RL__ADAPTIVE_CLASSES - 1 && rows >= (double)(2u << k)) k++;
    return k;
}

int rl__adaptive_size_class(double rows, double bytes_per_row) {
    int b = 0;
    if (bytes_per_row >= 1024) b = 1;
    if (bytes_per_row >= 16384) b = 2;
    if (bytes_per_row >= 262144) b = 3;
    return b * RL__ADAPTIVE_CLASSES + rl__adaptive_class_of(rows);
}

uint64_t rl__adaptive_less_wait(uint64_t t0, uint64_t t1, uint64_t asked, uint64_t ready) {
    if (t1 <= t0) return 0;
    uint64_t span = t1 - t0;
    if (!asked) return span;
    uint64_t b = asked > t0 ? asked : t0;
    uint64_t e = ready && ready < t1 ? ready : t1;
    return e > b ? span - (e - b) : span;
}

/* The calibration's log and exp without libm's calls (one of each per observation): the
 * exponent from the bits, then a short series. Relative error below 1e-9 over the factors'
 * range (tests adaptive-3.3); x of rl__adaptive_log must be > 0 and finite (the callers clamp). */
double rl__adaptive_log(double x) {
    union {
        double d;
        uint64_t u;
    } v = {x};
    int e = (int)((v.u >> 52) & 0x7ff) - 1023;
    v.u = (v.u & 0x000fffffffffffffull) | 0x3ff0000000000000ull; /* m in [1, 2) */
    double m = v.d;
    if (m > 1.4142135623730951) m *= 0.5, e++; /* m in (0.707, 1.414] */
    double t = (m - 1) / (m + 1), t2 = t * t;  /* |t| <= 0.172 */
    double p = t * (2 + t2 * (2.0 / 3 + t2 * (2.0 / 5 + t2 * (2.0 / 7 + t2 * (2.0 / 9 + t2 * (2.0 / 11))))));
    return p + e * 0.6931471805599453;
}

double rl__adaptive_exp(double x) {
    if (!(x > -700)) x = -700; /* also NaN */
    if (x > 700) x = 700;
    double n = (double)(int64_t)(x * 1.4426950408889634 + (x >= 0 ? 0.5 : -0.5));
    double r = x - n * 0.6931471805599453; /* |r| <= 0.35 */
    double p =
        1 +
        r * (1 + r * (1.0 / 2 +
                      r * (1.0 / 6 +
                           r * (1.0 / 24 +
                                r * (1.0 / 120 +
                                     r * (1.0 / 720 +
                                          r * (1.0 / 5040 + r * (1.0 / 40320 + r * (1.0 / 362880 + r / 3628800)))))))));
    union {
        double d;
        uint64_t u;
    } v;
    v.u = (uint64_t)((int64_t)n + 1023) << 52;
    return p * v.d;
}

static double clampd(double v, double lo, double hi) {
    if (!(v >= lo)) return lo; /* also NaN */
    return v > hi ? hi : v;
}

static double nonneg(double v) { return clampd(v, 0.0, 1e18); }

/* ceil of x >= 0 without libm's call (x is never NaN here: the callers' inputs are clamped);
 * from 2^52 on every double is an integer. */
static inline double ceil_pos(double x) {
    if (!(x < 4503599627370496.0)) return x;
    double t = (double)(int64_t)x;
    return t < x ? t + 1 : t;
}

double rl__adaptive_estimate(const rl__adaptive_costs *c, const rl__adaptive_inputs *in, int method) {
    /* Called three times per page (two decisions, one observation): plain arithmetic, no libm. */
    double rows = nonneg(in->rows);
    double bytes = rows * nonneg(in->bytes_per_row);
    double rtt_i = nonneg(in->rtt_index_ns);
    if (method == RL__ADAPTIVE_SF) {
        double depth = in->pipeline_depth >= 1 ? in->pipeline_depth : 1;
        double page_rows = in->index_page_rows >= 1 ? in->index_page_rows : 1;
        double index_pages = ceil_pos(rows / page_rows);
        if (index_pages < 1) index_pages = 1;
        double load_rounds = ceil_pos(rows / depth);
        /* A split record is one range read: its extra key-values (kvs_per_record) cost bytes,
         * not requests. */
        return index_pages * rtt_i + load_rounds * nonneg(in->rtt_records_ns) + rows * nonneg(c->client_per_record) +
               bytes * nonneg(c->client_per_byte);
    }
    double page_bytes = in->mapped_page_bytes > 0 ? in->mapped_page_bytes : 8.0 * 1024 * 1024;
    double pages = ceil_pos(bytes / page_bytes);
    if (pages < 1) pages = 1;
    double remote = rows * clampd(in->frac_remote, 0.0, 1.0);
    double t = pages * rtt_i + rows * nonneg(c->server_per_entry) +
               bytes * (nonneg(c->server_per_byte) + nonneg(c->client_per_byte));
    if (remote > 0) {
        double rounds;
        if (in->strategy == RL__ADAPTIVE_GROUPED) {
            rounds = pages;
        } else {
            double batch = in->s2s_batch >= 1 ? in->s2s_batch : 10;
            rounds = ceil_pos(remote / batch);
        }
        t += rounds * nonneg(in->rtt_s2s_ns) + remote * nonneg(c->server_per_remote);
    }
    return t;
}

static double factor_of(const rl__adaptive_model *m, int cls, int method) {
    const rl__adaptive_class *k = &m->cls[cls];
    if (k->observed[method]) return k->factor[method];
    /* Unobserved in this class: borrow the nearest observed row class's factor of the same byte
     * class (the same machine and network make neighbouring sizes err alike), else 1. Never
     * across byte classes: small and split records err differently (a small-record factor made
     * SCAN_AND_FETCH of split records look 2.4x dearer, past the exploration bound). */
    int b0 = cls / RL__ADAPTIVE_CLASSES, r0 = cls % RL__ADAPTIVE_CLASSES;
    const rl__adaptive_class *row = &m->cls[b0 * RL__ADAPTIVE_CLASSES];
    for (int d = 1; d < RL__ADAPTIVE_CLASSES; d++) {
        int lo = r0 - d, hi = r0 + d;
        if (lo >= 0 && row[lo].observed[method]) return row[lo].factor[method];
        if (hi < RL__ADAPTIVE_CLASSES && row[hi].observed[method]) return row[hi].factor[method];
    }
    return 1.0;
}

static int same_inputs(const rl__adaptive_inputs *a, const rl__adaptive_inputs *b) {
    return a->rows == b->rows && a->bytes_per_row == b->bytes_per_row && a->kvs_per_record == b->kvs_per_record &&
           a->pipeline_depth == b->pipeline_depth && a->index_page_rows == b->index_page_rows &&
           a->mapped_page_bytes == b->mapped_page_bytes && a->rtt_index_ns == b->rtt_index_ns &&
           a->rtt_records_ns == b->rtt_records_ns && a->rtt_s2s_ns == b->rtt_s2s_ns &&
           a->frac_remote == b->frac_remote && a->strategy == b->strategy && a->s2s_batch == b->s2s_batch;
}

void rl__adaptive_raw(rl__adaptive_model *m, const rl__adaptive_inputs *in, double out[2]) {
    for (int i = 0; i < m->memo_n; i++) {
        if (same_inputs(&m->memo_in[i], in)) {
            out[0] = m->memo_raw[i][0];
            out[1] = m->memo_raw[i][1];
            return;
        }
    }
    out[0] = rl__adaptive_estimate(&m->costs, in, RL__ADAPTIVE_SF);
    out[1] = rl__adaptive_estimate(&m->costs, in, RL__ADAPTIVE_RF);
    int i = m->memo_next;
    m->memo_in[i] = *in;
    m->memo_raw[i][0] = out[0];
    m->memo_raw[i][1] = out[1];
    m->memo_next = 1 - i;
    if (m->memo_n < 2) m->memo_n++;
}

void rl__adaptive_set_factor(rl__adaptive_model *m, int cls, int method, double f) {
    if (cls < 0 || cls >= RL__ADAPTIVE_ALL_CLASSES || (method != 0 && method != 1) || !(f > 0)) return;
    rl__adaptive_class *c = &m->cls[cls];
    f = clampd(f, RL__ADAPTIVE_FACTOR_MIN, RL__ADAPTIVE_FACTOR_MAX);
    c->log_factor[method] = log(f);
    c->factor[method] = f;
    c->win_n[method] = c->win_pos[method] = 0; /* no observation: the mean alone */
    if (!c->observed[method]) c->observed[method] = 1;
}

/* The exploration rule's bound for the other method of class c (adaptive.h): a method with fewer
 * than WINDOW observations here has an estimate still warming up (one cold or disturbed page can
 * be most of it), explored under the probe's wider bound. */
static int explorable(const rl__adaptive_class *c, int other, const double est[2]) {
    double bound = c->win_n[other] < RL__ADAPTIVE_WINDOW ? RL__ADAPTIVE_PROBE_MAX : RL__ADAPTIVE_EXPLORE_MAX;
    return est[other] <= bound * est[1 - other];
}

/* Periodic exploration, cost-bounded (adaptive.h): every EXPLORE_EVERY-th decision, or later when
 * the other method is estimated so much slower that EXPLORE_EVERY would spend more than
 * EXPLORE_BUDGET of the chosen time on it (not while its window warms up). */
static uint32_t explore_every(const rl__adaptive_class *c, int other, const double est[2]) {
    double best = est[1 - other];
    double gap = best > 0 ? est[other] / best - 1 : 0;
    if (c->win_n[other] >= RL__ADAPTIVE_WINDOW && gap > RL__ADAPTIVE_EXPLORE_BUDGET * RL__ADAPTIVE_EXPLORE_EVERY)
        return (uint32_t)ceil(gap / RL__ADAPTIVE_EXPLORE_BUDGET - 1e-9);
    return RL__ADAPTIVE_EXPLORE_EVERY;
}

/* The long-period probe: a method past the exploration bound (a stale or cold-start estimate) is
 * still tried now and then: every PROBE_EVERY-th decision when it is estimated at most PROBE_MAX
 * slower, proportionally less often beyond (adaptive.h). */
static uint64_t probe_period(int other, const double est[2]) {
    uint64_t period = RL__ADAPTIVE_PROBE_EVERY;
    double best = est[1 - other];
    if (est[other] > RL__ADAPTIVE_PROBE_MAX * best) {
        double g = best > 0 ? est[other] / best : 1e12;
        double k = ceil_pos((g - 1) / (RL__ADAPTIVE_PROBE_MAX - 1));
        period *= (uint64_t)(k < 1e6 ? k : 1e6); /* at most 5e8: within the uint32_t decisions */
    }
    return period;
}

static int leader(const double est[2]) {
    return est[RL__ADAPTIVE_RF] < est[RL__ADAPTIVE_SF] ? RL__ADAPTIVE_RF : RL__ADAPTIVE_SF;
}

void rl__adaptive_decide(rl__adaptive_model *m, const rl__adaptive_inputs *in, rl__adaptive_decision *out) {
    out->in = *in; /* every field of *out is set below */
    out->explored = 0;
    int cls = rl__adaptive_size_class(in->rows, in->bytes_per_row);
    out->size_class = cls;
    rl__adaptive_raw(m, in, out->raw_ns);
    for (int k = 0; k < 2; k++) {
        out->factor[k] = factor_of(m, cls, k);
        out->est_ns[k] = out->raw_ns[k] * out->factor[k];
    }
    int best = leader(out->est_ns);
    int other = 1 - best;
    rl__adaptive_class *c = &m->cls[cls];
    c->decisions++;
    m->decisions++;
    int within = explorable(c, other, out->est_ns);
    /* The recheck of a method that lost the lead by its own observation (adaptive.h). */
    int recheck = c->recheck && --c->recheck == 0 && c->recheck_method == other &&
                  out->est_ns[other] <= RL__ADAPTIVE_RECHECK_MAX * out->est_ns[best];
    uint32_t every = explore_every(c, other, out->est_ns);
    if (c->since_explore < UINT32_MAX) c->since_explore++;
    int due = c->since_explore >= every || (c->observed[other] == 0 && c->observed[best] > 0);
    int probe = c->decisions % probe_period(other, out->est_ns) == 0;
    out->method = best;
    if ((within && due) || probe || recheck) {
        out->method = other;
        out->explored = 1;
        c->since_explore = 0;
        m->explorations++;
    }
    out->observe = out->explored || c->recheck || c->win_n[out->method] < RL__ADAPTIVE_WINDOW ||
                   out->est_ns[out->method] >= RL__ADAPTIVE_OBSERVE_ALL_NS ||
                   c->decisions % RL__ADAPTIVE_OBSERVE_EVERY == 0;
    m->observe_asked += (uint64_t)out->observe;
}

int rl__adaptive_lease_grant(const rl__adaptive_model *m, const rl__adaptive_decision *d, rl__adaptive_lease *l) {
    int cls = d->size_class;
    if (cls < 0 || cls >= RL__ADAPTIVE_ALL_CLASSES) return 0;
    const rl__adaptive_class *c = &m->cls[cls];
    int best = leader(d->est_ns), other = 1 - best;
    /* A later decision explores or observes, whatever its number, when a recheck is pending, the
     * leader's window is not full or its page is long; the other method's first observation is
     * due at once when it is within the bound. */
    if (c->recheck || c->win_n[best] < RL__ADAPTIVE_WINDOW || d->est_ns[best] >= RL__ADAPTIVE_OBSERVE_ALL_NS) return 0;
    l->every = UINT32_MAX;
    if (explorable(c, other, d->est_ns)) {
        if (c->observed[other] == 0 && c->observed[best] > 0) return 0;
        l->every = explore_every(c, other, d->est_ns);
    }
    /* The next multiples of the probe's and the observation's periods (not past the uint32_t
     * count's wrap, where rl__adaptive_decide's next number is 0, a multiple of both). */
    uint64_t from = c->decisions, p = probe_period(other, d->est_ns), o = RL__ADAPTIVE_OBSERVE_EVERY;
    uint64_t until = (from / p + 1) * p, next_o = (from / o + 1) * o;
    if (next_o < until) until = next_o;
    if (until > (uint64_t)UINT32_MAX + 1) until = (uint64_t)UINT32_MAX + 1;
    l->from = from;
    l->until = until;
    l->dec = *d;
    l->dec.method = best;
    l->dec.explored = 0;
    l->dec.observe = 0;
    return 1;
}

int rl__adaptive_lease_take(rl__adaptive_model *m, const rl__adaptive_lease *l, rl__adaptive_decision *out) {
    rl__adaptive_class *c = &m->cls[l->dec.size_class];
    uint64_t next = (uint64_t)c->decisions + 1;
    uint32_t since = c->since_explore < UINT32_MAX ? c->since_explore + 1 : UINT32_MAX;
    if (next <= l->from || next >= l->until || since >= l->every || c->recheck) return 0;
    c->decisions++;
    m->decisions++;
    c->since_explore = since;
    *out = l->dec;
    return 1;
}

/* Calibrate method k of class c to lx = log(observed / raw) of one page: mean and window. */
static void set_level(rl__adaptive_class *c, int k, double lx) {
    c->log_factor[k] = lx;
    for (int i = 0; i < RL__ADAPTIVE_WINDOW; i++) c->win[k][i] = lx;
    c->win_n[k] = RL__ADAPTIVE_WINDOW;
    c->factor[k] = rl__adaptive_exp(lx);
    c->surprised[k] = 0;
}

/* The level the spell rule gives method k of class c for its page of the spell lx: at most
 * DEV_UP above its mean, as any one page counts (adaptive.h). That page may be a hiccup, not the
 * spell's level (a preemption makes a 5 µs page 100x slower); set as the whole window it put the
 * method past every exploration bound for good (rl__adaptive_observe bounds the leader's further,
 * to EXPLORE_MAX times the other method's estimate). */
static double spell_level(const rl__adaptive_class *c, int k, double lx) {
    double cap = c->log_factor[k] + RL__ADAPTIVE_DEV_UP;
    return lx < cap ? lx : cap;
}

/* This observation (c->seq) changed the lead: the methods' best pages are counted from it on,
 * it included (rl__adaptive_observe). */
static void lead_changed(rl__adaptive_class *c) {
    c->lost_seq = c->seq;
    c->best_x[0] = c->best_x[1] = HUGE_VAL;
}

void rl__adaptive_observe(rl__adaptive_model *m, const rl__adaptive_decision *d, double observed_ns) {
    if (!(observed_ns > 0) || !(d->raw_ns[d->method] > 0)) return;
    int cls = d->size_class;
    if (cls < 0 || cls >= RL__ADAPTIVE_ALL_CLASSES) return;
    rl__adaptive_class *c = &m->cls[cls];
    double x =
        rl__adaptive_log(clampd(observed_ns / d->raw_ns[d->method], RL__ADAPTIVE_FACTOR_MIN, RL__ADAPTIVE_FACTOR_MAX));
    int k = d->method;
    /* A first observation of a class at most 2x slower than the prior (borrowed or 1) replaces
     * it outright; a slower one, and later ones,
     * move the mean by alpha times their deviation, bounded (adaptive.h: one page slowed down by
     * something else on the machine must not make a method look worse beyond the exploration
     * bound, where it would never be observed again). */
    if (c->observed[k] || x > log(factor_of(m, cls, k)) + RL__ADAPTIVE_DEV_UP) {
        /* (A first observation more than 2x slower than the prior is bounded like any other
         * surprise: it is often a cold start — the process's first query — and would otherwise
         * put the method beyond the exploration bound for good.) */
        if (!c->observed[k]) c->log_factor[k] = log(factor_of(m, cls, k));
        double dev = x - c->log_factor[k];
        if (dev > RL__ADAPTIVE_DEV_UP) {
            /* Slower than expected by more than 2x: bounded the first time; when the page before
             * was such a surprise too, counted with more weight (a real change repeats; a hiccup
             * does not). */
            int again = c->surprised[k];
            c->surprised[k] = 1;
            if (again) { /* weight 0.5 instead of ALPHA, at most 8x off counted */
                c->log_factor[k] += 0.5 * (dev < RL__ADAPTIVE_DEV_AGAIN ? dev : RL__ADAPTIVE_DEV_AGAIN);
                dev = 0;
            } else {
                dev = RL__ADAPTIVE_DEV_UP;
            }
        } else {
            c->surprised[k] = 0;
            if (dev < -RL__ADAPTIVE_DEV_DOWN) dev = -RL__ADAPTIVE_DEV_DOWN;
        }
        c->log_factor[k] += RL__ADAPTIVE_ALPHA * dev;
    } else {
        c->log_factor[k] = x;
    }
    /* The window of the last observations; the decisions' factor (adaptive.h). */
    c->win[k][c->win_pos[k]] = x;
    c->win_pos[k] = (uint8_t)((c->win_pos[k] + 1) % RL__ADAPTIVE_WINDOW);
    if (c->win_n[k] < RL__ADAPTIVE_WINDOW) c->win_n[k]++;
    double lf = c->log_factor[k];
    for (int i = 0; i < c->win_n[k]; i++)
        if (c->win[k][i] < lf) lf = c->win[k][i];
    c->factor[k] = rl__adaptive_exp(lf);
    /* Did this page cost its method the lead, at the decision's estimates? Then run it once
     * more soon (adaptive.h: the recheck). Not when the inputs moved the lead: only the factor
     * changed here. */
    int o = 1 - k;
    double other_est = d->raw_ns[o] * (d->factor[o] > 0 ? d->factor[o] : 1);
    int behind = d->raw_ns[k] * c->factor[k] > other_est && other_est > 0;
    if (c->seq < UINT32_MAX) c->seq++;
    if (d->raw_ns[k] * d->factor[k] <= other_est && behind) {
        c->recheck = c->recheck_gap = RL__ADAPTIVE_RECHECK_AFTER;
        c->recheck_method = (uint8_t)k;
        lead_changed(c);
    } else if (d->explored && behind && c->recheck_method == k && c->recheck_gap && c->last_seq[o] >= c->lost_seq &&
               observed_ns <= d->raw_ns[o] * rl__adaptive_exp(c->best_x[o])) {
        /* The spell rule (adaptive.h): no slower than the leader's best page since the change
         * (the page that changed it included), so the change came from a slowdown of both. Both
         * methods are calibrated to their pages of the spell, mean and window alike: compared on
         * the same footing while it lasts, and the first faster page after it lowers the factor
         * of the method that ran it at once. */
        double xk = spell_level(c, k, x), xo = spell_level(c, o, c->best_x[o]);
        /* The leader's estimate at most EXPLORE_MAX times the other's, before the rule or
         * after it, whichever is the lower: explored again at the usual rate. */
        double lk = rl__adaptive_log(c->factor[k]);
        double bound = (lk < xk ? lk : xk) + rl__adaptive_log(RL__ADAPTIVE_EXPLORE_MAX * d->raw_ns[k] / d->raw_ns[o]);
        set_level(c, o, xo < bound ? xo : bound);
        /* ... and the other at most EXPLORE_MAX times the leader's estimate before the rule:
         * when the leader's level was capped below its page (spell_level) and its next page is
         * back to that estimate, the other is still explored at the usual rate. */
        double kb = rl__adaptive_log(RL__ADAPTIVE_EXPLORE_MAX * other_est / d->raw_ns[k]);
        set_level(c, k, xk < kb ? xk : kb);
        c->recheck_gap = 0;
        m->spells++;
    } else if (d->explored && behind && c->recheck_method == k && c->recheck_gap &&
               c->recheck_gap < RL__ADAPTIVE_EXPLORE_EVERY / 2 && c->factor[k] <= d->factor[k]) {
        /* A recheck (or exploration) that found it still behind, yet no slower than estimated:
         * once more, twice as late (a burst of slow pages can outlast one recheck). One slower
         * than estimated confirms the change: no more. */
        c->recheck_gap = (uint8_t)(c->recheck_gap * 2);
        c->recheck = c->recheck_gap;
    } else if (d->raw_ns[k] * d->factor[k] > other_est && !behind && other_est > 0) {
        /* This page won its method the lead (ending its own rechecks, if any): the other
         * method's estimate may be from a spell that has ended (adaptive.h). Recheck it once,
         * under the spell rule, without doubling. */
        c->recheck = RL__ADAPTIVE_RECHECK_AFTER;
        c->recheck_gap = RL__ADAPTIVE_EXPLORE_EVERY / 2;
        c->recheck_method = (uint8_t)o;
        lead_changed(c);
    } else if (c->recheck_method == k) {
        c->recheck_gap = 0; /* ahead again, or the change confirmed */
    }
    if (x < c->best_x[k]) c->best_x[k] = x;
    c->last_seq[k] = c->seq;
    if (c->observed[k] < UINT32_MAX) c->observed[k]++;
}

static const char *name_of(int method) { return method == RL__ADAPTIVE_RF ? "USE_REMOTE_FETCH" : "SCAN_AND_FETCH"; }

void rl__adaptive_explain(const rl__adaptive_decision *d, rl_buf *out) {
    const rl__adaptive_inputs *in = &d->in;
    rl__buf_printf(out,
                   "adaptive: rows %.0f (class %d.%d), %.0f B/row, %.1f kvs/record, rtt index %.1f µs, "
                   "records %.1f µs, s2s %.1f µs, remote %.0f%% (%s), depth %d; "
                   "SCAN_AND_FETCH %.1f µs x %.2f = %.1f µs, USE_REMOTE_FETCH %.1f µs x %.2f = %.1f µs "
                   "-> %s (%s)\n",
                   in->rows, d->size_class % RL__ADAPTIVE_CLASSES, d->size_class / RL__ADAPTIVE_CLASSES,
                   in->bytes_per_row, in->kvs_per_record, in->rtt_index_ns / 1e3, in->rtt_records_ns / 1e3,
                   in->rtt_s2s_ns / 1e3, 100.0 * clampd(in->frac_remote, 0, 1),
                   in->strategy == RL__ADAPTIVE_GROUPED ? "grouped" : "individual", in->pipeline_depth,
                   d->raw_ns[0] / 1e3, d->factor[0], d->est_ns[0] / 1e3, d->raw_ns[1] / 1e3, d->factor[1],
                   d->est_ns[1] / 1e3, name_of(d->method),
                   d->explored ? "exploring the estimated-slower method" : "cheaper estimate");
}
