/* locmap.c — the cluster client's location cache snapshots (locmap.h states the invariants). */
#include <stdatomic.h>
#include <string.h>

#include "base/alloc.h"
#include "base/bytes.h"
#include "kv/cluster/clusterfile.h"
#include "kv/cluster/locmap.h"

static const uint8_t key_ffff[2] = {0xff, 0xff};

static int refuse(rl__errdetail *err, const char *what, uint32_t i) {
    rl__errdetail_append(err, "shard map: %s (entry %u)", what, i);
    return RL_E_MALFORMED_FRAME;
}

int rl__locmap_new(const rl__msg_get_shard_map_reply *m, rl__locmap **out, rl__errdetail *err) {
    *out = NULL;
    if (m->n_shards == 0) return refuse(err, "no shards", 0);
    for (uint32_t i = 1; i < m->n_servers; i++)
        if (m->servers[i].id <= m->servers[i - 1].id) return refuse(err, "server ids not increasing", i);
    if (m->shards[0].begin_len != 0) return refuse(err, "the first shard does not begin at \"\"", 0);
    const rl__msg_shard *last = &m->shards[m->n_shards - 1];
    if (rl__bytes_cmp(last->end, last->end_len, key_ffff, 2) != 0)
        return refuse(err, "the last shard does not end at \\xff\\xff", m->n_shards - 1);
    for (uint32_t i = 0; i < m->n_shards; i++) {
        const rl__msg_shard *s = &m->shards[i];
        if (rl__bytes_cmp(s->begin, s->begin_len, s->end, s->end_len) >= 0)
            return refuse(err, "an empty or inverted shard", i);
        if (i > 0 && rl__bytes_cmp(s->begin, s->begin_len, m->shards[i - 1].end, m->shards[i - 1].end_len))
            return refuse(err, "a shard that does not begin at the previous one's end", i);
        if (s->n_team == 0 || s->n_team > RL_PROTO_MAX_TEAM) return refuse(err, "a team size out of range", i);
    }
    rl__locmap *lm = rl__calloc(1, sizeof *lm);
    if (!lm) return RL_E_OUT_OF_MEMORY;
    lm->refs = 1;
    lm->version = m->version;
    rl__arena_init(&lm->arena, 4096);
    lm->n_servers = m->n_servers;
    lm->n_shards = m->n_shards;
    lm->servers = rl__arena_alloc(&lm->arena, sizeof *lm->servers * (m->n_servers ? m->n_servers : 1));
    lm->shards = rl__arena_alloc(&lm->arena, sizeof *lm->shards * m->n_shards);
    if (!lm->servers || !lm->shards) goto oom;
    for (uint32_t i = 0; i < m->n_servers; i++) {
        const rl__msg_server *s = &m->servers[i];
        rl__loc_server *d = &lm->servers[i];
        memset(d, 0, sizeof *d);
        d->id = s->id;
        d->role = s->role;
        d->port = s->port;
        d->healthy = s->healthy;
        if (s->address_len >= sizeof d->address) {
            rl__locmap_unref(lm);
            return refuse(err, "a server address too long", i);
        }
        memcpy(d->address, s->address, s->address_len);
        d->address[s->address_len] = 0;
        if (!rl__ip_is_loopback(d->address)) {
            rl__locmap_unref(lm);
            return refuse(err, "a server address outside 127.0.0.0/8", i);
        }
        char *h = rl__arena_alloc(&lm->arena, (size_t)s->host_len + 1);
        if (!h) goto oom;
        if (s->host_len) memcpy(h, s->host, s->host_len);
        h[s->host_len] = 0;
        d->host = h;
    }
    for (uint32_t i = 0; i < m->n_shards; i++) {
        const rl__msg_shard *s = &m->shards[i];
        rl__loc_shard *d = &lm->shards[i];
        memset(d, 0, sizeof *d);
        d->begin = rl__arena_memdup(&lm->arena, s->begin, s->begin_len);
        d->end = rl__arena_memdup(&lm->arena, s->end, s->end_len);
        if (!d->begin || !d->end) goto oom;
        d->begin_len = s->begin_len;
        d->end_len = s->end_len;
        d->n_team = s->n_team;
        for (uint32_t j = 0; j < s->n_team; j++) {
            d->team_id[j] = s->team[j];
            d->team_idx[j] = rl__locmap_server(lm, s->team[j]);
        }
    }
    *out = lm;
    return RL_OK;
oom:
    rl__locmap_unref(lm);
    return RL_E_OUT_OF_MEMORY;
}

void rl__locmap_ref(rl__locmap *m) {
    if (m) atomic_fetch_add_explicit((_Atomic int *)&m->refs, 1, memory_order_relaxed);
}

void rl__locmap_unref(rl__locmap *m) {
    if (!m) return;
    if (atomic_fetch_sub_explicit((_Atomic int *)&m->refs, 1, memory_order_acq_rel) != 1) return;
    rl__arena_release(&m->arena);
    rl__free(m);
}

int rl__locmap_server(const rl__locmap *m, uint32_t id) {
    uint32_t lo = 0, hi = m->n_servers;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (m->servers[mid].id < id) lo = mid + 1;
        else hi = mid;
    }
    return lo < m->n_servers && m->servers[lo].id == id ? (int)lo : -1;
}

int rl__locmap_find(const rl__locmap *m, const uint8_t *key, uint32_t key_len, int backward) {
    if (m->n_shards == 0) return -1;
    if (backward && key_len == 0) return 0;
    /* The last shard whose begin is <= key (forward) or < key (backward). */
    uint32_t lo = 0, hi = m->n_shards;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        int c = rl__bytes_cmp(m->shards[mid].begin, m->shards[mid].begin_len, key, key_len);
        if (backward ? c < 0 : c <= 0) lo = mid + 1;
        else hi = mid;
    }
    if (lo == 0) return -1; /* cannot happen: the first shard begins at "" (invariant 1) */
    const rl__loc_shard *s = &m->shards[lo - 1];
    int c = rl__bytes_cmp(key, key_len, s->end, s->end_len);
    if (backward ? c > 0 : c >= 0) return -1;
    return (int)lo - 1;
}

int rl__locmap_pick_avoid(const rl__locmap *m, const rl__loc_shard *s, uint32_t salt, const uint32_t *avoid,
                          int n_avoid) {
    int best = -1, best_rank = 5;
    for (uint32_t k = 0; k < s->n_team && best_rank > 1; k++) {
        int idx = s->team_idx[(salt + k) % s->n_team];
        if (idx < 0) continue;
        int avoided = 0;
        for (int j = 0; j < n_avoid; j++) avoided |= avoid[j] == m->servers[idx].id;
        /* 1: healthy, not avoided; 2: not avoided; 3: healthy; 4: known. */
        int rank = avoided ? (m->servers[idx].healthy ? 3 : 4) : (m->servers[idx].healthy ? 1 : 2);
        if (rank < best_rank) best = idx, best_rank = rank;
    }
    return best;
}

int rl__locmap_pick(const rl__locmap *m, const rl__loc_shard *s, uint32_t salt) {
    int known = -1;
    for (uint32_t k = 0; k < s->n_team; k++) {
        int idx = s->team_idx[(salt + k) % s->n_team];
        if (idx < 0) continue;
        if (m->servers[idx].healthy) return idx;
        if (known < 0) known = idx;
    }
    return known;
}
