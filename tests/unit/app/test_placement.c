/* test_placement.c — the pure parts of src/app/placement.h: the disjoint fractions against an
 * independent computation on random placements (seeded: the seed is printed, RL_SEED=N replays),
 * the shard lookup, the map parser's refusals, the receipt's determinism and the even split of
 * records. The cluster side is tests/integ/server/test_placement.c.
 */
#include <stdlib.h>

#include <jansson.h>

#include "base/alloc.h"
#include "base/bytes.h"
#include "app/placement.h"
#include "test.h"
#include "tuple/tuple.h"

#define MAXS 40

/* A random map: n shards with keys "" < b1 < ... < "\xff" (2-byte keys), teams of 1..3 of
 * n_srv servers, hosts: server id h -> host "h<1 + id % n_hosts>" (some servers unlisted). */
static void random_map(uint64_t *rs, rl__pl_map *m, uint32_t n_srv, uint32_t n_hosts) {
    memset(m, 0, sizeof *m);
    uint32_t n = 1 + (uint32_t)rl_test_rand_below(rs, MAXS);
    m->shards = rl__calloc(n, sizeof *m->shards);
    m->servers = rl__calloc(n_srv, sizeof *m->servers);
    uint32_t prev = 0;
    for (uint32_t i = 0; i < n; i++) {
        rl__pl_shard *s = &m->shards[i];
        uint32_t step = (0xff00 - prev) / (n - i + 1);
        uint32_t next = i + 1 == n ? 0xff00 : prev + 1 + (uint32_t)rl_test_rand_below(rs, step ? step : 1);
        s->begin = rl__malloc(2);
        s->end = rl__malloc(2);
        s->begin[0] = (uint8_t)(prev >> 8), s->begin[1] = (uint8_t)prev;
        s->begin_len = i == 0 ? 0 : 2;
        s->end[0] = (uint8_t)(next >> 8), s->end[1] = (uint8_t)next;
        s->end_len = i + 1 == n ? 1 : 2; /* the last ends at "\xff" */
        prev = next;
        s->n_team = 1 + (uint32_t)rl_test_rand_below(rs, 3);
        for (uint32_t t = 0; t < s->n_team; t++) {
            uint32_t id;
            int dup;
            do {
                id = 1 + (uint32_t)rl_test_rand_below(rs, n_srv);
                dup = 0;
                for (uint32_t u = 0; u < t; u++) dup |= s->team[u] == id;
            } while (dup && s->n_team <= n_srv);
            s->team[t] = id;
        }
    }
    m->n_shards = n;
    for (uint32_t id = 1; id <= n_srv; id++) {
        if (rl_test_rand_below(rs, 8) == 0) continue; /* unlisted: its own host */
        rl__pl_server_entry *sv = &m->servers[m->n_servers++];
        sv->id = id;
        snprintf(sv->address, sizeof sv->address, "127.0.0.%u", id);
        sv->port = (uint16_t)(1000 + id);
        snprintf(sv->host, sizeof sv->host, "h%u", 1 + id % n_hosts);
    }
}

/* The independent computation: linear scans, sets as bitmasks. */
static int find_linear(const rl__pl_map *m, const uint8_t *k, size_t kl) {
    for (uint32_t i = 0; i < m->n_shards; i++) {
        const rl__pl_shard *s = &m->shards[i];
        if (rl__bytes_cmp(s->begin, s->begin_len, k, (uint32_t)kl) <= 0 &&
            rl__bytes_cmp(k, (uint32_t)kl, s->end, s->end_len) < 0)
            return (int)i;
    }
    return -1;
}

static uint64_t host_mask(const rl__pl_map *m, const rl__pl_shard *s) {
    uint64_t mask = 0;
    for (uint32_t t = 0; t < s->n_team; t++) {
        int h = -1;
        for (uint32_t j = 0; j < m->n_servers; j++)
            if (m->servers[j].id == s->team[t]) h = atoi(m->servers[j].host + 1);
        mask |= h >= 0 ? 1ull << h : 1ull << (32 + s->team[t] % 32); /* unlisted: unique */
    }
    return mask;
}

static uint64_t id_mask(const rl__pl_shard *s) {
    uint64_t mask = 0;
    for (uint32_t t = 0; t < s->n_team; t++) mask |= 1ull << s->team[t];
    return mask;
}

/* placement-1.1: the fractions equal an independent computation on random placements. */
TEST(placement_1_1_fractions_random) {
    uint64_t rs = rl_test_seed();
    for (int round = 0; round < 300; round++) {
        rl__pl_map m;
        uint32_t n_srv = 1 + (uint32_t)rl_test_rand_below(&rs, 20);
        random_map(&rs, &m, n_srv, 1 + (uint32_t)rl_test_rand_below(&rs, 5));
        size_t n = (size_t)rl_test_rand_below(&rs, 200);
        rl__pl_pair *pairs = calloc(n + 1, sizeof *pairs);
        uint8_t(*keys)[4] = calloc(n + 1, sizeof *keys);
        uint64_t sd = 0, hd = 0;
        for (size_t i = 0; i < n; i++) {
            keys[i][0] = (uint8_t)rl_test_rand_below(&rs, 255);
            keys[i][1] = (uint8_t)rl_test_rand(&rs);
            keys[i][2] = (uint8_t)rl_test_rand_below(&rs, 255);
            keys[i][3] = (uint8_t)rl_test_rand(&rs);
            pairs[i] = (rl__pl_pair){keys[i], 2, keys[i] + 2, 2};
            int a = find_linear(&m, keys[i], 2), b = find_linear(&m, keys[i] + 2, 2);
            ASSERT_TRUE(a >= 0 && b >= 0);
            ASSERT_TRUE(rl__pl_shard_of(&m, keys[i], 2) == &m.shards[a]);
            sd += (id_mask(&m.shards[a]) & id_mask(&m.shards[b])) == 0;
            hd += (host_mask(&m, &m.shards[a]) & host_mask(&m, &m.shards[b])) == 0;
        }
        rl__pl_fraction_counts f;
        rl__pl_fractions(&m, pairs, n, &f);
        ASSERT_EQ(f.records, n);
        ASSERT_EQ(f.server_disjoint, sd);
        ASSERT_EQ(f.host_disjoint, hd);
        ASSERT_TRUE(f.host_disjoint <= f.server_disjoint);
        if (n) ASSERT_TRUE(f.server_fraction == (double)sd / (double)n);
        else ASSERT_TRUE(f.server_fraction == 0.0);
        /* The same pairs on one team: 0; on disjoint single-server teams: 1. */
        free(pairs);
        free(keys);
        rl__pl_map_free(&m);
    }
}

/* A map of two shards ["", "m") team a and ["m", "\xff") team b, servers 1..4 on hosts h1 h1 h2 h2. */
static void two_shards(rl__pl_map *m, const uint32_t *a, uint32_t na, const uint32_t *b, uint32_t nb) {
    memset(m, 0, sizeof *m);
    m->shards = rl__calloc(2, sizeof *m->shards);
    m->servers = rl__calloc(4, sizeof *m->servers);
    m->shards[0] = (rl__pl_shard){(uint8_t *)rl__strdup("x"), (uint8_t *)rl__strdup("m"), 0, 1, {0}, na};
    m->shards[1] = (rl__pl_shard){(uint8_t *)rl__strdup("m"), (uint8_t *)rl__strdup("\xff"), 1, 1, {0}, nb};
    memcpy(m->shards[0].team, a, na * sizeof *a);
    memcpy(m->shards[1].team, b, nb * sizeof *b);
    m->n_shards = 2;
    for (uint32_t i = 0; i < 4; i++) {
        m->servers[i].id = i + 1;
        snprintf(m->servers[i].address, sizeof m->servers[i].address, "127.0.0.1");
        m->servers[i].port = (uint16_t)(4000 + i);
        snprintf(m->servers[i].host, sizeof m->servers[i].host, "h%u", i / 2 + 1);
    }
    m->n_servers = 4;
}

/* placement-1.2: fixed placements — same team 0.0, disjoint servers 1.0, disjoint servers on a
 * shared host: server 1.0 and host 0.0; the receipt is deterministic and sees a change. */
TEST(placement_1_2_fixed_and_receipt) {
    const uint8_t rk[] = "a", ik[] = "z";
    rl__pl_pair p = {rk, 1, ik, 1};
    uint32_t t1[] = {1}, t2[] = {2}, t3[] = {3, 4}, t12[] = {1, 2};
    rl__pl_map m;
    rl__pl_fraction_counts f;
    two_shards(&m, t12, 2, t12, 2);
    rl__pl_fractions(&m, &p, 1, &f);
    ASSERT_TRUE(f.server_fraction == 0.0 && f.host_fraction == 0.0);
    rl__pl_map_free(&m);
    two_shards(&m, t1, 1, t2, 1);
    rl__pl_fractions(&m, &p, 1, &f);
    ASSERT_TRUE(f.server_fraction == 1.0 && f.host_fraction == 0.0);
    rl__pl_map_free(&m);
    two_shards(&m, t1, 1, t3, 2);
    rl__pl_fractions(&m, &p, 1, &f);
    ASSERT_TRUE(f.server_fraction == 1.0 && f.host_fraction == 1.0);
    json_t *r1 = rl__pl_receipt(&m, (const uint8_t *)"m", 1, (const uint8_t *)"n", 1, (const uint8_t *)"", 0,
                                (const uint8_t *)"m", 1, &p, 1);
    json_t *r2 = rl__pl_receipt(&m, (const uint8_t *)"m", 1, (const uint8_t *)"n", 1, (const uint8_t *)"", 0,
                                (const uint8_t *)"m", 1, &p, 1);
    char *s1 = json_dumps(r1, JSON_SORT_KEYS | JSON_COMPACT), *s2 = json_dumps(r2, JSON_SORT_KEYS | JSON_COMPACT);
    ASSERT_STR_EQ(s1, s2);
    ASSERT_TRUE(strstr(s1, "\"records\":1") != NULL);
    ASSERT_TRUE(strstr(s1, "\"host\":\"h2\"") != NULL);
    rl__pl_map_free(&m);
    two_shards(&m, t1, 1, t2, 1);
    json_t *r3 = rl__pl_receipt(&m, (const uint8_t *)"m", 1, (const uint8_t *)"n", 1, (const uint8_t *)"", 0,
                                (const uint8_t *)"m", 1, &p, 1);
    char *s3 = json_dumps(r3, JSON_SORT_KEYS | JSON_COMPACT);
    ASSERT_TRUE(strcmp(s1, s3) != 0);
    free(s1), free(s2), free(s3);
    json_decref(r1), json_decref(r2), json_decref(r3);
    rl__pl_map_free(&m);
}

/* placement-1.3: the parser builds the map from system rows and refuses bad ones. */
TEST(placement_1_3_parse) {
    rl_buf v0, v1, vs, vsys;
    rl__buf_init(&v0), rl__buf_init(&v1), rl__buf_init(&vs), rl__buf_init(&vsys);
    rl__tuple_packer pk;
    rl__tuple_packer_init(&pk, &v0);
    rl__tuple_pack_int(&pk, 1);
    rl__tuple_packer_init(&pk, &v1);
    rl__tuple_pack_int(&pk, 2);
    rl__tuple_pack_int(&pk, 3);
    rl__tuple_packer_init(&pk, &vsys);
    rl__tuple_pack_int(&pk, 0);
    rl__tuple_packer_init(&pk, &vs);
    rl__tuple_pack_string(&pk, "127.0.0.2", 9);
    rl__tuple_pack_int(&pk, 4242);
    rl__tuple_pack_string(&pk, "host2", 5);
    rl__tuple_pack_int(&pk, 2);
    rl_keyvalue ks[3] = {{(const uint8_t *)"\xff/keyServers/", 13, v0.data, (uint32_t)v0.len},
                         {(const uint8_t *)"\xff/keyServers/k", 14, v1.data, (uint32_t)v1.len},
                         {(const uint8_t *)"\xff/keyServers/\xff", 14, vsys.data, (uint32_t)vsys.len}};
    rl_keyvalue sl[1] = {{(const uint8_t *)"\xff/serverList/\0\0\0\2", 17, vs.data, (uint32_t)vs.len}};
    rl__pl_map m;
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    ASSERT_OK(rl__pl_map_parse(ks, 3, sl, 1, &m, &msg));
    ASSERT_EQ(m.n_shards, 2);
    ASSERT_EQ(m.shards[1].n_team, 2);
    ASSERT_EQ(m.shards[1].team[1], 3);
    ASSERT_EQ(m.shards[1].end_len, 1);
    ASSERT_EQ(m.n_servers, 1);
    ASSERT_STR_EQ(m.servers[0].host, "host2");
    ASSERT_EQ(m.servers[0].port, 4242);
    ASSERT_TRUE(rl__pl_shard_of(&m, (const uint8_t *)"j", 1) == &m.shards[0]);
    ASSERT_TRUE(rl__pl_shard_of(&m, (const uint8_t *)"k", 1) == &m.shards[1]);
    ASSERT_TRUE(rl__pl_shard_of(&m, (const uint8_t *)"\xff", 1) == NULL);
    rl__pl_map_free(&m);
    /* A team that is not a tuple of ids, and a map not starting at "". */
    rl_keyvalue bad[1] = {{(const uint8_t *)"\xff/keyServers/", 13, vs.data, (uint32_t)vs.len}};
    ASSERT_RC(rl__pl_map_parse(bad, 1, sl, 1, &m, &msg), RL_E_CORRUPT_DATA);
    ASSERT_RC(rl__pl_map_parse(ks + 1, 2, sl, 1, &m, &msg), RL_E_CORRUPT_DATA);
    rl__buf_release(&v0), rl__buf_release(&v1), rl__buf_release(&vs), rl__buf_release(&vsys);
}

/* placement-1.4: even split points. */
TEST(placement_1_4_split_points) {
    size_t p[8];
    ASSERT_EQ(rl__pl_split_points(100, 1, p), 0);
    ASSERT_EQ(rl__pl_split_points(100, 2, p), 1);
    ASSERT_EQ(p[0], 50);
    ASSERT_EQ(rl__pl_split_points(10, 3, p), 2);
    ASSERT_EQ(p[0], 3);
    ASSERT_EQ(p[1], 6);
    ASSERT_EQ(rl__pl_split_points(2, 4, p), 1); /* fewer records than teams */
    ASSERT_EQ(p[0], 1);
    ASSERT_EQ(rl__pl_split_points(0, 4, p), 0);
}

/* placement-1.5: the admin calls refuse bad input before connecting. */
TEST(placement_1_5_bad_input) {
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    uint32_t team[2] = {1, 1};
    ASSERT_RC(rl__placement_split("cluster:/nonexistent", NULL, (const uint8_t *)"", 0, 100, NULL, NULL, &msg),
              RL_E_INVALID_ARGUMENT);
    ASSERT_RC(rl__placement_split("cluster:/nonexistent", NULL, (const uint8_t *)"\xff\x01", 2, 100, NULL, NULL, &msg),
              RL_E_INVALID_ARGUMENT);
    ASSERT_RC(rl__placement_assign("cluster:/x", NULL, (const uint8_t *)"b", 1, (const uint8_t *)"a", 1, team, 1, 100,
                                   NULL, NULL, &msg),
              RL_E_INVALID_ARGUMENT);
    ASSERT_RC(rl__placement_assign("cluster:/x", NULL, (const uint8_t *)"a", 1, (const uint8_t *)"a", 1, team, 1, 100,
                                   NULL, NULL, &msg),
              RL_E_INVALID_ARGUMENT);
    ASSERT_RC(rl__placement_assign("cluster:/x", NULL, (const uint8_t *)"a", 1, (const uint8_t *)"\xff\x00", 2, team, 1,
                                   100, NULL, NULL, &msg),
              RL_E_INVALID_ARGUMENT);
    ASSERT_RC(rl__placement_assign("cluster:/x", NULL, (const uint8_t *)"a", 1, (const uint8_t *)"b", 1, team, 2, 100,
                                   NULL, NULL, &msg),
              RL_E_INVALID_ARGUMENT);
    ASSERT_RC(rl__placement_assign("mem:", NULL, (const uint8_t *)"a", 1, (const uint8_t *)"b", 1, team, 1, 100, NULL,
                                   NULL, &msg),
              RL_E_INVALID_ARGUMENT);
}

RL_TEST_MAIN(T(placement_1_1_fractions_random), T(placement_1_2_fixed_and_receipt), T(placement_1_3_parse),
             T(placement_1_4_split_points), T(placement_1_5_bad_input))
