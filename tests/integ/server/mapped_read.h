/* mapped_read.h — what the mapped-read integration tests share (test_mapped_stream.c,
 * test_secondary_strategies.c): the index and record keys of their little schema, the mapper
 * joining them, one mapped read of a price range, and the comparison of two reads' entries.
 * Static inline: each test file uses what it needs. */
#ifndef RL_TEST_MAPPED_READ_H
#define RL_TEST_MAPPED_READ_H

#include <stdio.h>

#include "base/buf.h"
#include "reclayer/kv.h"
#include "test.h"
#include "tuple/tuple.h"

/* The index key ("i", price, pk) into b. */
static inline void pack_index(rl_buf *b, int price, int pk) {
    rl__tuple_packer p;
    rl__buf_reset(b);
    rl__tuple_packer_init(&p, b);
    rl__tuple_pack_string(&p, "i", 1);
    rl__tuple_pack_int(&p, price);
    rl__tuple_pack_int(&p, pk);
}

/* The record key ("r", pk, sub) into b; sub < 0: ("r", pk), the record's prefix. */
static inline void pack_record(rl_buf *b, int pk, int sub) {
    rl__tuple_packer p;
    rl__buf_reset(b);
    rl__tuple_packer_init(&p, b);
    rl__tuple_pack_string(&p, "r", 1);
    rl__tuple_pack_int(&p, pk);
    if (sub >= 0) rl__tuple_pack_int(&p, sub);
}

/* The mapper (rec, {K[k]}, {...}) joining an index entry to the keys under rec (one byte). */
static inline void mapper_to(rl_buf *b, const char *rec, int k) {
    rl__tuple_packer p;
    char ph[16];
    int n = snprintf(ph, sizeof ph, "{K[%d]}", k);
    rl__buf_reset(b);
    rl__tuple_packer_init(&p, b);
    rl__tuple_pack_string(&p, rec, 1);
    rl__tuple_pack_string(&p, ph, (size_t)n);
    rl__tuple_pack_string(&p, "{...}", 5);
}

/* The mapper joining an index entry to its record's keys: ("r", {K[2]}, {...}). */
static inline void mapper(rl_buf *b) { mapper_to(b, "r", 2); }

/* One mapped read of the index between prices [lo, hi) by the mapper (rec, {K[k]}, {...}). */
static inline rl_future *mapped_to(rl_txn *t, const char *rec, int k, int lo, int hi, int limit, int target,
                                   int flags) {
    rl_buf b, e, mp;
    rl__buf_init(&b);
    rl__buf_init(&e);
    rl__buf_init(&mp);
    rl__tuple_packer p;
    rl__tuple_packer_init(&p, &b);
    rl__tuple_pack_string(&p, "i", 1);
    rl__tuple_pack_int(&p, lo);
    rl__tuple_packer_init(&p, &e);
    rl__tuple_pack_string(&p, "i", 1);
    rl__tuple_pack_int(&p, hi);
    mapper_to(&mp, rec, k);
    rl_future *f =
        rl_txn_get_mapped_range(t, RL_FIRST_GREATER_OR_EQUAL(b.data, b.len), RL_FIRST_GREATER_OR_EQUAL(e.data, e.len),
                                mp.data, mp.len, limit, target, RL_STREAMING_WANT_ALL, 0, flags);
    rl__buf_release(&b);
    rl__buf_release(&e);
    rl__buf_release(&mp);
    return f;
}

/* One mapped read of the index between prices [lo, hi), joined to the ("r", pk, sub) records. */
static inline rl_future *mapped(rl_txn *t, int lo, int hi, int limit, int target, int flags) {
    return mapped_to(t, "r", 2, lo, hi, limit, target, flags);
}

/* x and y hold the same entries (prefix_ok: one may be a prefix of the other, the shorter one
 * then saying more). */
static inline void same_entries(const rl_mapped_keyvalue *x, int nx, int mx, const rl_mapped_keyvalue *y, int ny,
                                int my, int prefix_ok, const char *what) {
    if (nx != ny && !prefix_ok) fail_msg("%s: %d entries against %d", what, nx, ny);
    if (nx != ny && !(nx < ny ? mx : my)) fail_msg("%s: %d entries against %d, the shorter without more", what, nx, ny);
    if (nx == ny && mx != my) fail_msg("%s: more %d against %d", what, mx, my);
    int n = nx < ny ? nx : ny;
    for (int i = 0; i < n; i++) {
        ASSERT_MEM_EQ(x[i].index.key, x[i].index.key_len, y[i].index.key, y[i].index.key_len);
        ASSERT_MEM_EQ(x[i].index.value, x[i].index.value_len, y[i].index.value, y[i].index.value_len);
        ASSERT_EQ(x[i].is_range, y[i].is_range);
        ASSERT_MEM_EQ(x[i].begin, x[i].begin_len, y[i].begin, y[i].begin_len);
        ASSERT_MEM_EQ(x[i].end, x[i].end_len, y[i].end, y[i].end_len);
        if (x[i].n_kvs != y[i].n_kvs) fail_msg("%s: entry %d has %d rows against %d", what, i, x[i].n_kvs, y[i].n_kvs);
        ASSERT_EQ(x[i].more, y[i].more);
        ASSERT_EQ(x[i].served_locally, y[i].served_locally);
        for (int j = 0; j < x[i].n_kvs; j++) {
            ASSERT_MEM_EQ(x[i].kvs[j].key, x[i].kvs[j].key_len, y[i].kvs[j].key, y[i].kvs[j].key_len);
            ASSERT_MEM_EQ(x[i].kvs[j].value, x[i].kvs[j].value_len, y[i].kvs[j].value, y[i].kvs[j].value_len);
        }
    }
}

#endif
