/* tcp_floor.h (internal) — the raw-TCP floor of a networked read: the time to move the same bytes
 * over one plain loopback TCP connection, measured in the same run as the read it bounds
 * (`rlbench query --db cluster:…` prints it beside the remote fetch arms).
 *
 * One op: the client sends an 8-byte request naming n, a server thread in this process answers
 * with n bytes on the same connection, and the op ends when the client has read the last one —
 * a request and its reply, with none of reclayer's framing, decoding, storage or injected delay.
 * Both ends use 1 MiB reads and writes into buffers allocated once.
 */
#ifndef RL_BENCH_TCP_FLOOR_H
#define RL_BENCH_TCP_FLOOR_H

#include <stdint.h>

#include "base/errdetail.h"

typedef struct rl__tcp_floor rl__tcp_floor;

/* rl__tcp_floor_open — listen on 127.0.0.1 (an ephemeral port), connect to it and start the
 * answering thread. [out] out: free with rl__tcp_floor_close. Errors: RL_E_CONNECTION_FAILED (a
 * socket call failed; err says which, with errno's text), RL_E_OUT_OF_MEMORY. */
int rl__tcp_floor_open(rl__tcp_floor **out, rl__errdetail *err);

/* rl__tcp_floor_measure — run ops of `bytes` bytes for about `seconds` (at least 3 ops) and set
 * *out_ns to the mean nanoseconds per op. Errors: RL_E_INVALID_ARGUMENT (bytes 0), RL_E_CONNECTION_FAILED
 * (the connection failed; the floor is unusable afterwards). */
int rl__tcp_floor_measure(rl__tcp_floor *f, uint64_t bytes, double seconds, double *out_ns, rl__errdetail *err);

/* rl__tcp_floor_close — stop the thread, close both ends, free f. NULL is a no-op. */
void rl__tcp_floor_close(rl__tcp_floor *f);

#endif
