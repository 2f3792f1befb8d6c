/* rlkvd_opts.c — what both rlkvd roles do with the options they share (rlkvd.h,
 * RL__RLKVD_COMMON_OPTS): read the cluster's key file and turn the limits into rl__net_limits. */
#include <stdio.h>

#include "reclayer/error.h"
#include "server/keyfile.h"
#include "app/rlkvd.h"

int rl__rlkvd_credentials(const rl__rlkvd_opts *c, const char *who, rl__keyfile *out_kf, rl__net_limits *out_lim) {
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    int rc = rl__keyfile_read(c->key_file, out_kf, &msg);
    if (rc != RL_OK)
        fprintf(stderr, "%s: cannot start: %s (%s)\n", who,
                rl__errdetail_len(&msg) ? rl__errdetail_get(&msg) : rl_error_message(rc), rl_error_name(rc));
    out_lim->max_conns = (uint32_t)c->max_conns;
    out_lim->max_handshakes = (uint32_t)c->max_handshakes;
    out_lim->handshake_timeout_ms = (uint32_t)c->handshake_timeout_ms;
    out_lim->max_queued_bytes = c->max_queued_bytes;
    return rc;
}
