/* adaptive.h (internal) — the cost model of the ADAPTIVE fetch method (docs/design.md §7): estimate what a
 * page of an index scan costs with SCAN_AND_FETCH and with USE_REMOTE_FETCH from what the client
 * knows or measures, pick the cheaper, calibrate the estimates from the observed time of each page,
 * explore the other method now and then at a bounded cost, and explain the choice.
 *
 * Pure: no I/O, no clock, no allocation; the cursor feeds it inputs and observed times. One
 * rl__adaptive_model per database (the calibration should outlive a query: a wrong estimate
 * corrects itself within a few pages or queries); it is not thread-safe — the caller serialises
 * (a mutex around decide/observe).
 *
 * The model (all times in nanoseconds; "rows" are the page's entries after the pushed-down skip,
 * which costs both methods the same one selector resolution):
 *
 *   SCAN_AND_FETCH   index_pages * rtt_index
 *                  + ceil(rows / pipeline_depth) * rtt_records       (loads, depth at a time)
 *                  + rows * client_per_record + bytes * client_per_byte
 *   USE_REMOTE_FETCH mapped_pages * rtt_index
 *                  + s2s_rounds * rtt_s2s                            (records on other servers)
 *                  + rows * server_per_entry + remote * server_per_remote
 *                  + bytes * (server_per_byte + client_per_byte)
 *
 * with index_pages = ceil(rows / index_page_rows), mapped_pages = ceil(bytes / mapped_page_bytes),
 * remote = rows * frac_remote, and s2s_rounds = ceil(remote / s2s_batch) for the `individual`
 * strategy (FoundationDB's: one batch of separate reads after another) or one per mapped page
 * holding remote records for `grouped`. Each method's estimate is then multiplied by its
 * calibration factor for the page's size class (rows bucketed by powers of two, and bytes per row
 * in four classes: rl__adaptive_size_class), learned as an
 * exponentially weighted mean of log(observed / estimated) with weight RL__ADAPTIVE_ALPHA: the
 * class's first observation replaces the prior outright unless it is more than 2x slower than
 * the prior says; such a first one (often a cold start: the process's first query), and each
 * later one, moves
 * the mean by ALPHA times its deviation from it, the deviation bounded below by -ln 4
 * (RL__ADAPTIVE_DEV_DOWN: one page lowers a factor by at most a third) and, unless the previous
 * observation of that class and method was such a surprise too, above by +ln 2
 * (RL__ADAPTIVE_DEV_UP: a single page slower than 2x the estimate raises the factor by at most
 * 23 %); a second such surprise in a row counts with weight 0.5, its deviation bounded by ln 8
 * (RL__ADAPTIVE_DEV_AGAIN: at most 2.8x). Page
 * times are noisy upwards (another process on the machine only ever adds time), and a method
 * made to look worse than the exploration bound by one slow page would never be observed again;
 * a real slowdown repeats, and is then counted more (a factor 50x too low is 3x closer after two
 * pages, enough to switch when round trips dominate: integ_query_test_adaptive_cluster); a
 * replacement outright was tried and let two noisy pages in a row strand the better method past
 * the exploration bound. ALPHA 0.3 rather than 0.5: on a loaded
 * machine short pages vary by 2x, and 0.5 flipped the choice of 10-row queries back and forth.
 *
 * The factor a decision uses is the smaller of that mean and the least of the class's last
 * RL__ADAPTIVE_WINDOW observations of the method (both as log(observed / estimated)): page times
 * are noisy upwards only (another process, a queue somewhere adds time, nothing takes it away),
 * so the least of the last few is the page undisturbed, and the mean alone, raised by a run of
 * slow pages of the better method, made the worse one look cheaper (a simulated loaded machine —
 * a fifth of the pages 1.2-4x slower — chose wrong 5-10 % of the time at a true 1.25x; tests
 * adaptive-3.2). A real slowdown is counted once the whole window shows it and the mean has
 * risen (a few pages); a speedup at once; the mean's bounds still guard the cold start (the
 * window's one slow first page is not the smaller).
 *
 * Exploration: the EXPLORE_EVERY-th decision of a size class since its last exploration runs the
 * other method when its calibrated estimate is at most RL__ADAPTIVE_EXPLORE_MAX times the chosen
 * one's (PROBE_MAX while that method has fewer than WINDOW observations in the class: at most
 * WINDOW such pages per class and method, once), and a
 * size class whose other method was never observed explores it once under the same bound. Once the
 * window is full the period is cost-bounded: a method estimated g times slower (g - 1 > EXPLORE_EVERY
 * x RL__ADAPTIVE_EXPLORE_BUDGET) waits ceil((g - 1) / EXPLORE_BUDGET) decisions (1.3x: 60, 1.5x:
 * 100), so exploration costs at most EXPLORE_BUDGET (0.5 %) of the chosen time in the long run
 * (it was (EXPLORE_MAX - 1) / EXPLORE_EVERY = 2.5 %: on embedded, where SCAN_AND_FETCH of 1,000
 * small rows is 1.3x remote fetch, every 20th query explored it for 1.5 % more), plus the
 * warm-up's bounded pages per size class. When the lead
 * changes in a class because of an observation (the page's method, the cheaper at its decision's
 * estimates, is not any more once its factor moved; a change of inputs does not count), the
 * method that lost it is run once more RL__ADAPTIVE_RECHECK_AFTER decisions later when it is
 * estimated at most RL__ADAPTIVE_RECHECK_MAX times slower: the change is often a burst of slow pages of the better
 * method (another process), whose factor would otherwise stay high until the next exploration —
 * 20 pages of the worse method, or 500 when the burst put it past EXPLORE_MAX. A recheck that
 * finds it still behind but not slower than its estimate (its factor did not rise: the burst
 * outlasted one page) is repeated twice as late (after 2, 4, 8, 16 decisions); one that found it
 * slower than estimated confirms the change and ends the rechecks — unless it is no slower than
 * the leader's own best page observed since the change, the page that made the change included
 * (the spell rule: a spell of the machine slows
 * both methods alike, so the method that lost the lead to it is compared with the leader in the
 * same spell, not with the leader's estimate from before it, which the spell never touched; when
 * it is no slower there, the change is undone: both methods are calibrated to their pages of the
 * spell, mean and window, so it leads again, the two compared on the same footing while the spell
 * lasts, and the first faster page after it lowers its method's factor at once; counted in
 * m->spells).
 * Without it a spell of a few dozen 1,000-row pages filled the better method's window with slow
 * pages, handed the lead to the other method, and the rechecks, slow in the same spell, confirmed
 * it: 10 % of the pages of a simulated spell ran the slower method, and the pages after it too
 * (adaptive-3.4). A page observed while a recheck is pending is always observed, so the leader's
 * page between the change and the recheck is there to compare. When a page wins its method the
 * lead instead (a speedup, often the first page after a spell), the method that lost it is
 * rechecked once under the same rule: its estimate may be from the spell. So a change of lead costs at
 * most 4 rechecks, each estimated at most RECHECK_MAX times the chosen page, and a real change
 * usually one (a stale estimate can be further off: the one after a deliberately wrong prior
 * cost 30x in integ_query_test_adaptive_cluster). And every
 * RL__ADAPTIVE_PROBE_EVERY-th decision of a class runs the other method when it is estimated at
 * most RL__ADAPTIVE_PROBE_MAX times slower, and a method estimated g times slower than that every
 * PROBE_EVERY x ceil((g - 1) / (PROBE_MAX - 1))-th: a method past the exploration bound because
 * of a stale estimate is never lost for good, at most (PROBE_MAX - 1) / PROBE_EVERY more (0.6 %).
 * (Beyond PROBE_MAX there was no probe at all: on embedded's 5 µs pages a few hiccups in a row
 * left remote fetch there, and SCAN_AND_FETCH ran for seconds — adaptive-3.6.) The spell rule
 * raises a method's level by at most DEV_UP above its mean, as any one page counts, and the
 * leader's estimate to at most EXPLORE_MAX times the other method's (before the rule or after it,
 * the lower), so the leader is explored again at the usual rate: its page of the spell may be a
 * hiccup (a preemption makes a 5 µs page 100x slower), and set as the whole window it put that
 * method past every bound until a probe, or for good (adaptive-3.2's seeds 19, 47 and 89 of 100
 * failed on it; adaptive-3.6). Likewise the method that lost the lead is set to at most
 * EXPLORE_MAX times the leader's estimate before the rule: the leader's level capped below its
 * spell page, its next normal page put it back, and the other, left at its own spell page, sat
 * past EXPLORE_MAX until a probe 500 decisions on (adaptive-3.2 seed 257). And the leader's page
 * compared is its best since the change, the one that changed it included: after a page won the
 * leader the lead, one hiccup of it right after made the recheck of the other look like a spell
 * of both and handed the lead back (seed 174; 35 wrong choices a seed on average over 400 seeds
 * before these two, 6 after).
 */
#ifndef RL_QUERY_ADAPTIVE_H
#define RL_QUERY_ADAPTIVE_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"

#define RL__ADAPTIVE_CLASSES 12 /* row classes: rows 0-1, 2-3, 4-7, ..., >= 2048 */
#define RL__ADAPTIVE_BYTE_CLASSES \
    4 /* byte classes: bytes per row < 1 KiB, < 16 KiB, < 256 KiB,
                                         * more (small and split records calibrate apart) */
#define RL__ADAPTIVE_ALL_CLASSES (RL__ADAPTIVE_CLASSES * RL__ADAPTIVE_BYTE_CLASSES)
#define RL__ADAPTIVE_ALPHA 0.3        /* weight of a new observation in the log factor */
#define RL__ADAPTIVE_WINDOW 4         /* observations per class and method whose least counts */
#define RL__ADAPTIVE_EXPLORE_EVERY 20 /* decisions of a class between explorations */
#define RL__ADAPTIVE_EXPLORE_MAX 1.5  /* explore only a method estimated at most this much slower */
#define RL__ADAPTIVE_EXPLORE_BUDGET \
    0.005                                      /* ... and no more often than this share of the chosen time
                                                   * allows (1.3x slower: every 60th decision) */
#define RL__ADAPTIVE_RECHECK_AFTER 2           /* decisions after a change of lead before a recheck */
#define RL__ADAPTIVE_RECHECK_MAX 4.0           /* recheck only a method estimated at most this much slower */
#define RL__ADAPTIVE_PROBE_EVERY 500           /* decisions of a class between long-period probes */
#define RL__ADAPTIVE_PROBE_MAX 4.0             /* ... a method estimated at most this much slower; beyond, less often */
#define RL__ADAPTIVE_OBSERVE_EVERY 8           /* a short page is observed one decision in this many */
#define RL__ADAPTIVE_OBSERVE_ALL_NS 20000.0    /* ... a page estimated at this many ns or more, always */
#define RL__ADAPTIVE_DEV_UP 0.6931471805599453 /* ln 2: the largest upward deviation counted */
#define RL__ADAPTIVE_DEV_DOWN 1.3862943611198906  /* ln 4: the largest downward deviation counted */
#define RL__ADAPTIVE_DEV_AGAIN 2.0794415416798357 /* ln 8: ... upward, for a repeated surprise */
#define RL__ADAPTIVE_FACTOR_MIN \
    1e-4 /* calibration factors are clamped to [MIN, MAX] (wide:
                                         * under valgrind or ASan pages take 50x the priors) */
#define RL__ADAPTIVE_FACTOR_MAX 1e4

enum { RL__ADAPTIVE_SF = 0, RL__ADAPTIVE_RF = 1 };              /* the two methods */
enum { RL__ADAPTIVE_INDIVIDUAL = 1, RL__ADAPTIVE_GROUPED = 2 }; /* storage-to-storage strategy */

/* What the client knows about the page it is about to read. */
typedef struct {
    double rows;              /* entries the page is expected to return (>= 0) */
    double bytes_per_row;     /* index entry + record key-values, average (learned from earlier
                               * pages or store statistics) */
    double kvs_per_record;    /* key-values per record (1 for small records, more when split) */
    int pipeline_depth;       /* SCAN_AND_FETCH loads outstanding (>= 1) */
    double index_page_rows;   /* SCAN_AND_FETCH index entries per read (>= 1) */
    double mapped_page_bytes; /* USE_REMOTE_FETCH reply bytes per page (> 0) */
    double rtt_index_ns;      /* client <-> the server of the index entries */
    double rtt_records_ns;    /* client <-> the servers of the records (mean) */
    double rtt_s2s_ns;        /* index server <-> the records' servers, when they differ */
    double frac_remote;       /* records whose team does not include the index server, 0..1 */
    int strategy;             /* RL__ADAPTIVE_INDIVIDUAL or _GROUPED */
    int s2s_batch;            /* individual: secondary reads per batch (>= 1; FoundationDB: 10) */
} rl__adaptive_inputs;

/* CPU costs per unit, in nanoseconds (priors; calibration scales each method's total). */
typedef struct {
    double client_per_record; /* the client issuing and completing one record load */
    double client_per_byte;   /* the client receiving and decoding one byte */
    double server_per_entry;  /* the index server mapping one entry (local read, encoding) */
    double server_per_remote; /* ... plus its work for a record read from another server */
    double server_per_byte;   /* ... per byte it returns */
} rl__adaptive_costs;

typedef struct {
    double log_factor[2];               /* per method: mean log(observed / estimated) */
    double factor[2];                   /* exp(min(log_factor, least of win)): the factor decisions use,
                               * kept by rl__adaptive_observe so that a decision computes no exp
                               * (set it with rl__adaptive_set_factor) */
    double win[2][RL__ADAPTIVE_WINDOW]; /* per method: the last observations' log(obs / est) */
    uint8_t win_n[2], win_pos[2];       /* ... how many (up to WINDOW), the next slot */
    uint32_t observed[2];               /* observations per method */
    uint32_t decisions;                 /* decisions made in this class */
    uint32_t since_explore;             /* decisions since the class's last exploration (periodic,
                               * probe or recheck) */
    uint8_t surprised[2];               /* per method: its last observation was > 2x its estimate */
    uint8_t recheck;                    /* decisions left until recheck_method, which lost the lead by
                               * an observation (its own, or the other's speedup), is run again
                               * (0: none pending) */
    uint8_t recheck_method;
    uint8_t recheck_gap;  /* the delay of the last recheck (doubles while it finds the
                               * method still behind, up to EXPLORE_EVERY / 2) */
    uint32_t seq;         /* observations in this class (both methods) */
    uint32_t last_seq[2]; /* per method: seq of its latest observation (0: none) */
    uint32_t lost_seq;    /* seq of the observation that cost recheck_method the lead */
    double best_x[2];     /* per method: the least log(observed / raw) of its observations since
                           * the one at lost_seq, that one included */
} rl__adaptive_class;

typedef struct {
    rl__adaptive_costs costs;
    rl__adaptive_class cls[RL__ADAPTIVE_ALL_CLASSES]; /* [byte class * CLASSES + row class] */
    uint64_t decisions, explorations;
    uint64_t spells;        /* changes of lead undone by a recheck that found the method that lost the
                      * lead no slower than the leader's page since (a slowdown of both) */
    uint64_t observe_asked; /* decisions whose page the model asked to observe (out->observe) */
    /* The raw estimates of the last two distinct inputs (rl__adaptive_raw): a stream of alike
     * short queries (embedded: the same inputs every time) decides and observes without the
     * model's arithmetic. Replaced round-robin; valid while n > i (set memo_n to 0 after
     * changing costs). */
    rl__adaptive_inputs memo_in[2];
    double memo_raw[2][2];
    int memo_n, memo_next;
} rl__adaptive_model;

/* One decision, with everything needed to explain it. */
typedef struct {
    rl__adaptive_inputs in;
    int size_class;   /* rl__adaptive_size_class of the page */
    double raw_ns[2]; /* the model's estimates */
    double factor[2]; /* the calibration factors applied */
    double est_ns[2]; /* raw * factor */
    int method;       /* RL__ADAPTIVE_SF or RL__ADAPTIVE_RF */
    int explored;     /* 1: chose the estimated-slower method to explore it */
    int observe;      /* 1: the page should be timed and observed (rl__adaptive_decide: the
                       * observation rule); 0: a caller whose timing costs more than a
                       * negligible share of a short page may leave it untimed */
} rl__adaptive_decision;

/* rl__adaptive_default_costs — the priors, measured on this project's machines (docs/design.md §7,
 * ADAPTIVE): what a record load, a mapped entry and a byte cost the client and a server. */
rl__adaptive_costs rl__adaptive_default_costs(void);

/* rl__adaptive_embedded_costs — the priors for an embedded database (no round trips; both methods
 * run in the caller's process): docs/design.md §7, ADAPTIVE. */
rl__adaptive_costs rl__adaptive_embedded_costs(void);

/* rl__adaptive_init — a fresh model with the given priors (NULL: the defaults). */
void rl__adaptive_init(rl__adaptive_model *m, const rl__adaptive_costs *costs);

/* rl__adaptive_estimate — the model's raw estimate (ns) of method (RL__ADAPTIVE_SF/_RF) for in,
 * without calibration. Out-of-range inputs are clamped (rows < 0 to 0, depth < 1 to 1, fractions
 * to [0, 1], ...), so the result is always finite and >= 0. */
double rl__adaptive_estimate(const rl__adaptive_costs *c, const rl__adaptive_inputs *in, int method);

/* rl__adaptive_raw — out[method] = rl__adaptive_estimate(&m->costs, in, method) for both
 * methods, from m's memo of the last two inputs when in equals one of them (field by field),
 * else computed and remembered. Same thread rules as the model. */
void rl__adaptive_raw(rl__adaptive_model *m, const rl__adaptive_inputs *in, double out[2]);

/* rl__adaptive_set_factor — set method's calibration factor in size class cls to f (> 0) as if
 * observed once (tests: a deliberately wrong calibration). Out-of-range arguments do nothing. */
void rl__adaptive_set_factor(rl__adaptive_model *m, int cls, int method, double f);

/* rl__adaptive_decide — choose the method for a page: the smaller calibrated estimate, or the other
 * one when the exploration rule (file comment) says so. Counts the decision in m. *out gets the
 * decision and its explanation, and out->observe whether the page is worth observing: always when
 * it explores, while the chosen method's window in the class is not full, when its estimate is at
 * least RL__ADAPTIVE_OBSERVE_ALL_NS, and otherwise one decision of the class in
 * RL__ADAPTIVE_OBSERVE_EVERY (on embedded, timing a 2-4 µs page and observing it was 4-7 % of it:
 * docs/design.md §7; the calibration of a stream of alike short pages needs no more than a sample of
 * them). */
void rl__adaptive_decide(rl__adaptive_model *m, const rl__adaptive_inputs *in, rl__adaptive_decision *out);

/* A decision's lease (rl__adaptive_lease_grant): the answer a later decision on the same inputs
 * gives while the model has not changed since (rl__adaptive_lease_take). */
typedef struct {
    rl__adaptive_decision dec; /* the answer: the leader, neither explored nor observed */
    uint64_t from, until;      /* the class's decision numbers in (from, until) are neither a
                                * probe's nor an observation's */
    uint32_t every;            /* ... while the class's since_explore stays below this */
} rl__adaptive_lease;

/* rl__adaptive_lease_grant — after rl__adaptive_decide gave d: 1 and *l set when later decisions
 * of d's inputs would repeat its leader without exploring or observing for a while (the
 * exploration, probe and observation rules, the pending recheck), else 0 (*l unspecified). On a
 * local backend a limit-1 query is 2 µs and a decision's arithmetic 1-2 % of it; a stream of
 * alike short queries is answered from the lease (docs/design.md §7). Reads m only. */
int rl__adaptive_lease_grant(const rl__adaptive_model *m, const rl__adaptive_decision *d, rl__adaptive_lease *l);

/* rl__adaptive_lease_take — decide from lease l, granted on m for inputs equal (field by field) to
 * the ones about to be decided: 1, *out set and the decision counted in m exactly as
 * rl__adaptive_decide would have (same method, counters and flags), or 0 when the lease no longer
 * answers (the caller decides in full; m unchanged). The caller must drop l once anything changed
 * m other than decisions (rl__adaptive_observe, rl__adaptive_set_factor, the costs): the lease
 * does not see it. */
int rl__adaptive_lease_take(rl__adaptive_model *m, const rl__adaptive_lease *l, rl__adaptive_decision *out);

/* rl__adaptive_observe — the page of decision d took observed_ns with method d->method: update
 * that method's calibration factor in d's size class (observations <= 0 are ignored). */
void rl__adaptive_observe(rl__adaptive_model *m, const rl__adaptive_decision *d, double observed_ns);

/* rl__adaptive_explain — append one line explaining d to out: the inputs, both estimates (raw,
 * factor, calibrated, in µs), the choice and why. Errors stay in out. */
void rl__adaptive_explain(const rl__adaptive_decision *d, rl_buf *out);

/* rl__adaptive_less_wait — the time of [t0, t1) (ns, any one clock) outside the wait
 * [asked, ready) for the transaction's read version: (t1 - t0) less their overlap. asked 0: no
 * wait; ready 0: still waiting at t1 (the overlap runs to t1). Both methods pay that wait on the
 * first page that reads (its first read waits for the version), so the cursor observes a page's
 * time without it (measured by the transaction layer: kv_stats.h rl__txn_rv_wait), not a model
 * of it. t1 < t0 gives 0. */
uint64_t rl__adaptive_less_wait(uint64_t t0, uint64_t t1, uint64_t asked, uint64_t ready);

/* rl__adaptive_log, rl__adaptive_exp — log and exp of the calibration (relative error < 1e-9;
 * log's x > 0 and finite; exp's x is clamped to [-700, 700]). Pure. */
double rl__adaptive_log(double x);
double rl__adaptive_exp(double x);

/* rl__adaptive_class_of — the row class of a page of rows entries (0..RL__ADAPTIVE_CLASSES-1). */
int rl__adaptive_class_of(double rows);

/* rl__adaptive_size_class — the calibration class of a page: its byte class (bytes per row) times
 * RL__ADAPTIVE_CLASSES plus its row class (0..RL__ADAPTIVE_ALL_CLASSES-1). */
int rl__adaptive_size_class(double rows, double bytes_per_row);

#endif
