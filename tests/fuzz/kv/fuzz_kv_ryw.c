/* fuzz_kv_ryw.c — libFuzzer target: the input is a program of KV operations (sets, clears, clear
 * ranges, atomic operations, commits, gets, ranges with limits and selectors, forward and
 * reverse) on a mem: database. Oracles: no crash, hang or sanitizer report; every call returns a
 * known error code; a range read agrees with point reads of the same transaction (same keys in
 * order, same values) and get_key agrees with the range it implies. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reclayer/kv.h"

static rl_db *db;

static const uint8_t *in;
static size_t in_len;

static unsigned next(void) {
    if (!in_len) return 0;
    in_len--;
    return *in++;
}

/* A key from a small alphabet: 0..3 bytes of 'a'..'d' (sometimes \xff or \x00). */
static size_t key(uint8_t *k) {
    size_t n = next() % 4;
    for (size_t i = 0; i < n; i++) {
        unsigned c = next();
        k[i] = c == 255 ? 0xff : c == 254 ? 0x00 : (uint8_t)('a' + c % 4);
    }
    return n;
}

static void check(int rc) {
    if (!rl_error_is_known(rc)) {
        fprintf(stderr, "unknown error code %d\n", rc);
        abort();
    }
}

/* Range [b, e) agrees with point gets. */
static void cross_check(rl_txn *t, const uint8_t *b, size_t bl, const uint8_t *e, size_t el, int limit, int flags) {
    rl_future *f = rl_txn_get_range(t, RL_FIRST_GREATER_OR_EQUAL(b, bl), RL_FIRST_GREATER_OR_EQUAL(e, el), limit, 0,
                                    RL_STREAMING_WANT_ALL, 0, flags);
    const rl_keyvalue *kvs;
    int n, more;
    int rc = rl_future_wait(f);
    check(rc);
    if (rc == RL_OK && rl_future_get_keyvalue_array(f, &kvs, &n, &more) == RL_OK) {
        for (int i = 0; i < n; i++) {
            if (i > 0) {
                size_t m = kvs[i - 1].key_len < kvs[i].key_len ? kvs[i - 1].key_len : kvs[i].key_len;
                int c = m ? memcmp(kvs[i - 1].key, kvs[i].key, m) : 0;
                if (c == 0) c = (int)kvs[i - 1].key_len - (int)kvs[i].key_len;
                if ((flags & RL_REVERSE) ? c <= 0 : c >= 0) abort();
            }
            rl_future *g = rl_txn_get(t, kvs[i].key, kvs[i].key_len, RL_SNAPSHOT);
            int present, vl;
            const uint8_t *v;
            if (rl_future_wait(g) == RL_OK && rl_future_get_value(g, &present, &v, &vl) == RL_OK) {
                if (!present || (uint32_t)vl != kvs[i].value_len || (vl && memcmp(v, kvs[i].value, (size_t)vl)))
                    abort();
            }
            rl_future_free(g);
        }
        if (limit && n > limit) abort();
    }
    rl_future_free(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!db && rl_db_open("mem:", NULL, &db) != RL_OK) abort();
    in = data;
    in_len = size;
    rl_txn *t;
    if (rl_txn_begin(db, &t) != RL_OK) return 0;
    if (next() & 1) rl_txn_set_option(t, RL_TXN_OPT_ACCESS_SYSTEM_KEYS, 0);
    uint8_t k1[4], k2[4], v[8];
    for (int steps = 0; in_len && steps < 200; steps++) {
        size_t l1 = key(k1), l2, vl;
        switch (next() % 9) {
        case 0:
            vl = next() % 8;
            for (size_t i = 0; i < vl; i++) v[i] = (uint8_t)next();
            check(rl_txn_set(t, k1, l1, v, vl));
            break;
        case 1: check(rl_txn_clear(t, k1, l1)); break;
        case 2:
            l2 = key(k2);
            check(rl_txn_clear_range(t, k1, l1, k2, l2));
            break;
        case 3: {
            static const rl_atomic_op ops[] = {RL_ATOMIC_ADD,
                                               RL_ATOMIC_BIT_AND,
                                               RL_ATOMIC_BIT_OR,
                                               RL_ATOMIC_BIT_XOR,
                                               RL_ATOMIC_APPEND_IF_FITS,
                                               RL_ATOMIC_MAX,
                                               RL_ATOMIC_MIN,
                                               RL_ATOMIC_BYTE_MIN,
                                               RL_ATOMIC_BYTE_MAX,
                                               RL_ATOMIC_COMPARE_AND_CLEAR,
                                               RL_ATOMIC_SET_VERSIONSTAMPED_VALUE};
            vl = next() % 8;
            for (size_t i = 0; i < vl; i++) v[i] = (uint8_t)next();
            check(rl_txn_atomic_op(t, k1, l1, v, vl, ops[next() % 11]));
            break;
        }
        case 4: {
            rl_future *f = rl_txn_commit(t);
            check(rl_future_wait(f));
            rl_future_free(f);
            rl_txn_reset(t);
            break;
        }
        case 5: {
            rl_future *f = rl_txn_get(t, k1, l1, next() & 1);
            check(rl_future_wait(f));
            rl_future_free(f);
            break;
        }
        case 6: {
            rl_key_selector s = {k1, (uint32_t)l1, (int)(next() & 1), (int)(next() % 7) - 3};
            rl_future *f = rl_txn_get_key(t, s, 0);
            check(rl_future_wait(f));
            rl_future_free(f);
            break;
        }
        default:
            l2 = key(k2);
            cross_check(t, k1, l1, k2, l2, (int)(next() % 4), (next() & 1) ? RL_REVERSE : 0);
            break;
        }
    }
    rl_txn_free(t);
    /* Wipe the database so runs stay independent. */
    if (rl_txn_begin(db, &t) == RL_OK) {
        rl_txn_set_option(t, RL_TXN_OPT_ACCESS_SYSTEM_KEYS, 0);
        rl_txn_clear_range(t, "", 0, "\xff\xff", 2);
        rl_future *f = rl_txn_commit(t);
        rl_future_wait(f);
        rl_future_free(f);
        rl_txn_free(t);
    }
    return 0;
}
