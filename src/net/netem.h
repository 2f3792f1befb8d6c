/* netem.h (internal) — the policy of injected delay that every role shares:
 * which connections carry a process's delay, the valid range, the per-connection jitter seed, and
 * the lateness summary that STATUS reports. The mechanism (release times, precise timers, never
 * reordering) is rl__conn_set_delay in loop.h; this file only decides where it applies.
 *
 * The rule (docs/design.md §8.1, the userspace `tc netem` on each direction): a process delays what it
 * SENDS on every connection whose peer carries another host label — rlkvd processes and the
 * cluster client alike — except admin connections (role RL_ROLE_ADMIN, the `rl` tool), which
 * measure and steer the cluster and must not pay the delay. Both ends of a link apply the rule,
 * so a round trip between two hosts carries the delay twice (once each way).
 *
 * Pure functions and a small value type; no globals, no locks. [any]
 */
#ifndef RL_NET_NETEM_H
#define RL_NET_NETEM_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/errdetail.h"
#include "net/loop.h"

#define RL_NETEM_MAX_US 10000000u /* delay and jitter: at most 10 s each */

/* rl__netem_applies — 1 if a process with host label own (own_len bytes) delays what it sends to
 * a peer that announced role peer_role and label peer (peer_len bytes), else 0: the labels
 * differ and the peer is not an admin tool. A peer whose label is not known yet (peer NULL)
 * counts as another host, so no frame goes out undelayed for want of a label. */
int rl__netem_applies(const char *own, size_t own_len, const uint8_t *peer, size_t peer_len, int peer_role);

/* rl__netem_check — RL_OK if delay_us and jitter_us are both <= RL_NETEM_MAX_US, else
 * RL_E_INVALID_ARGUMENT with the reason set in err (may be NULL). */
int rl__netem_check(uint32_t delay_us, uint32_t jitter_us, rl__errdetail *err);

/* rl__netem_set — apply (delay_us, jitter_us) to conn (rl__conn_set_delay) with a jitter seed
 * derived from salt (e.g. the process id and a connection counter), so jitter sequences differ
 * between connections. Returns rl__conn_set_delay's code (RL_E_CONNECTION_FAILED once closed:
 * harmless for callers that sweep their connections). [any] */
int rl__netem_set(rl__conn *conn, uint32_t delay_us, uint32_t jitter_us, uint64_t salt);

/* rl__netem_status_json — append the STATUS fields of a process's delay, without braces:
 *   "delay_us":D,"jitter_us":J,"delayed_frames":N,"late_p50_ns":A,"late_p99_ns":B,"late_max_ns":C
 * from the merged lateness histogram h of its delayed frames (first byte written − release
 * time, rl__conn_get_lateness). */
void rl__netem_status_json(rl_buf *out, uint32_t delay_us, uint32_t jitter_us, const rl__lat_hist *h);

#endif
