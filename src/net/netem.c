/* netem.c — where injected delay applies (netem.h has the rule and the contracts). */
#include "net/netem.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "net/proto.h"
#include "reclayer/error.h"

int rl__netem_applies(const char *own, size_t own_len, const uint8_t *peer, size_t peer_len, int peer_role) {
    if (peer_role == RL_ROLE_ADMIN) return 0;
    if (!peer) return 1;
    return own_len != peer_len || (own_len && memcmp(own, peer, own_len) != 0);
}

int rl__netem_check(uint32_t delay_us, uint32_t jitter_us, rl__errdetail *err) {
    if (delay_us <= RL_NETEM_MAX_US && jitter_us <= RL_NETEM_MAX_US) return RL_OK;
    rl__errdetail_set(err, "delay %" PRIu32 " us / jitter %" PRIu32 " us: each must be at most %u us (10 s)", delay_us,
                      jitter_us, RL_NETEM_MAX_US);
    return RL_E_INVALID_ARGUMENT;
}

int rl__netem_set(rl__conn *conn, uint32_t delay_us, uint32_t jitter_us, uint64_t salt) {
    /* splitmix64 of the salt: distinct, well-mixed seeds for nearby salts. */
    uint64_t z = salt + 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return rl__conn_set_delay(conn, delay_us, jitter_us, z);
}

void rl__netem_status_json(rl_buf *out, uint32_t delay_us, uint32_t jitter_us, const rl__lat_hist *h) {
    rl__buf_printf(out,
                   "\"delay_us\":%" PRIu32 ",\"jitter_us\":%" PRIu32 ",\"delayed_frames\":%" PRIu64
                   ",\"late_p50_ns\":%" PRIu64 ",\"late_p99_ns\":%" PRIu64 ",\"late_max_ns\":%" PRIu64,
                   delay_us, jitter_us, h->count, rl__lat_hist_quantile(h, 0.50), rl__lat_hist_quantile(h, 0.99),
                   h->max_ns);
}
