/* test_entries.c — query_5: how SCAN_AND_FETCH splits index entries into (values..., primary
 * key...) (cursor.c: next_raw, split_entry, issue_load), against rl__tuple_validate as the model:
 * an entry of exactly two valid elements is an orphan returned with its second element's bytes as
 * the primary key; anything else (non-minimal or truncated integers, strings, nested tuples,
 * one or three elements, random bytes) is RL_E_CORRUPT_DATA.
 *
 * Test IDs: query_5_*. Seeded by rl_test_seed() (printed).
 */
#include "qtest.h"

/* Append one element (or near-miss bytes) chosen from the seed to b. */
static void add_elem(rl_buf *b, uint64_t *rs) {
    static const struct {
        uint8_t b[10];
        size_t n;
    } pick[] = {
        {{0x14}, 1},
        {{0x15, 0x00}, 2},
        {{0x15, 0x07}, 2},
        {{0x15}, 1},
        {{0x13, 0xff}, 2},
        {{0x13, 0xfe}, 2},
        {{0x12, 0xff, 0x00}, 3},
        {{0x12, 0xfe, 0x00}, 3},
        {{0x16, 0x00, 0x05}, 3},
        {{0x16, 0x01, 0x00}, 3},
        {{0x1c, 1, 2, 3, 4, 5, 6, 7, 8}, 9},
        {{0x1c, 0, 2, 3, 4, 5, 6, 7, 8}, 9},
        {{0x1c, 1, 2, 3}, 4},
        {{0x0c, 0x7f, 2, 3, 4, 5, 6, 7, 8}, 9},
        {{0x0c, 0xff, 2, 3, 4, 5, 6, 7, 8}, 9},
        {{0x1d, 0x09, 1, 2, 3, 4, 5, 6, 7, 8}, 10},
        {{0x1d, 0x08, 1, 2, 3, 4, 5, 6, 7}, 9},
        {{0x0b, 0xf6, 1, 2, 3, 4, 5, 6, 7, 8}, 10},
        {{0x02, 'a', 0x00}, 3},
        {{0x02, 'a'}, 2},
        {{0x01, 0x00, 0xff, 0x00}, 4},
        {{0x00}, 1},
        {{0x05, 0x14, 0x00}, 3},
        {{0x05, 0x14}, 2},
        {{0x21, 0x80, 0, 0, 0, 0, 0, 0, 1}, 9},
        {{0x26}, 1},
    };
    uint64_t k = rl_test_rand_below(rs, sizeof pick / sizeof pick[0] + 2);
    if (k < sizeof pick / sizeof pick[0]) {
        rl__buf_append(b, pick[k].b, pick[k].n);
        return;
    }
    size_t n = 1 + rl_test_rand_below(rs, 3);
    for (size_t i = 0; i < n; i++) rl__buf_append_byte(b, (uint8_t)rl_test_rand_below(rs, 256));
}

/* query_5_1: random entries of price_idx, one at a time, read by SCAN_AND_FETCH (forward and
 * reverse) with orphans returned: a row with the model's primary key, or RL_E_CORRUPT_DATA. */
TEST(query_5_1_entry_split_matches_tuple_decoder) {
    qt_env e;
    uint64_t rs = rl_test_seed();
    qt_open(&e, "q51");
    rl_slice p = rl_store_prefix(e.s);
    rl_buf ix, key, end;
    rl__tuple_packer pk;
    rl__buf_init(&ix);
    rl__buf_init(&key);
    rl__buf_init(&end);
    rl__buf_append(&ix, p.data, p.len);
    rl__tuple_packer_init(&pk, &ix);
    rl__tuple_pack_int(&pk, 2);
    rl__tuple_pack_string(&pk, "price_idx", 9);
    rl__buf_append(&end, ix.data, ix.len);
    rl__buf_append_byte(&end, 0xff);
    int rows = 0, corrupt = 0;
    for (int iter = 0; iter < 1500; iter++) {
        rl__buf_reset(&key);
        rl__buf_append(&key, ix.data, ix.len);
        int n = (int)rl_test_rand_below(&rs, 8) == 0 ? (int)rl_test_rand_below(&rs, 4) : 2;
        for (int i = 0; i < n; i++) add_elem(&key, &rs);
        /* The bare prefix and keys from prefix + 0xff on are outside the index's range. */
        if (key.len == ix.len || key.data[ix.len] == 0xff) continue;
        size_t count = 0;
        int valid = rl__tuple_validate(key.data + ix.len, key.len - ix.len, &count) == RL_OK && count == 2;
        rl__tuple_elem pk_elem = {0}; /* the model's primary key: element 1 */
        if (valid) ASSERT_OK(rl__tuple_get(key.data + ix.len, key.len - ix.len, 1, &pk_elem));
        rl_txn *t = qt_begin(&e);
        ASSERT_OK(rl_txn_clear_range(t, ix.data, ix.len, end.data, end.len));
        ASSERT_OK(rl_txn_set(t, key.data, key.len, "", 0));
        qt_commit(t);
        for (int rev = 0; rev < 2; rev++) {
            t = qt_begin(&e);
            rl_query_options o;
            memset(&o, 0, sizeof o);
            o.size = sizeof o;
            o.fetch = RL_FETCH_SCAN_AND_FETCH;
            o.reverse = rev;
            o.orphans = RL_ORPHAN_RETURN;
            rl_cursor *c;
            const rl_query_row *row = NULL;
            ASSERT_OK(rl_cursor_open(e.s, t, "price_idx", &o, &c));
            int rc = rl_cursor_next(c, &row);
            if (valid) {
                ASSERT_OK(rc);
                ASSERT_NOT_NULL(row);
                ASSERT_MEM_EQ(row->pk, row->pk_len, pk_elem.raw, pk_elem.raw_len);
                ASSERT_MEM_EQ(row->index_key, row->index_key_len, key.data, key.len);
                rows++;
            } else if (rc != RL_E_CORRUPT_DATA) {
                fail_msg("entry of %zu elements (valid tuple: %d): %s, want corrupt_data", count,
                         rl__tuple_validate(key.data + ix.len, key.len - ix.len, NULL) == RL_OK, rl_error_name(rc));
            } else {
                corrupt++;
            }
            rl_cursor_free(c);
            rl_txn_free(t);
        }
    }
    ASSERT_TRUE(rows > 100);
    ASSERT_TRUE(corrupt > 100);
    rl__buf_release(&ix);
    rl__buf_release(&key);
    rl__buf_release(&end);
    qt_close(&e);
}

RL_TEST_MAIN(T(query_5_1_entry_split_matches_tuple_decoder))
