/* test_kv_serial.c — KV conformance, part 3: a randomized serializability check.
 *
 * Several transactions are open at once and advanced op by op in one thread (random gets,
 * snapshot gets, full-range reads, sets, clears), then committed at random moments. Every
 * committed transaction's operations, read version and commit version are recorded. The check
 * replays the committed transactions in commit-version order: for each one, the state at its read
 * version plus its own earlier writes must equal every value it read. The final database must
 * equal the replay of all commits. Seeded (printed); public API only. */
#include "kvtest.h"

enum { NKEYS = 8, SLOTS = 4, MAXOPS = 10, ROUNDS = 600 };

typedef enum { OP_GET, OP_SNAP_GET, OP_RANGE, OP_SET, OP_CLEAR } op_kind;

typedef struct {
    int kind;
    int key;
    int val;               /* OP_SET: value written; OP_GET: value read (-1 absent) */
    int range_vals[NKEYS]; /* OP_RANGE: value per key (-1 absent) */
} op;

typedef struct {
    int64_t rv, cv; /* cv: -1 read-only */
    int order;      /* batch order from the versionstamp */
    int n_ops;
    op ops[MAXOPS];
} txn_log;

typedef struct {
    rl_txn *t;
    txn_log log;
    int target_ops;
} slot;

static void key_of(int k, char *out) { snprintf(out, 4, "s%d", k % 10); }

static int read_val(rl_txn *t, int k, int flags) {
    char key[4], buf[32];
    int present = 0, len = 0;
    key_of(k, key);
    int rc = kvt_get(t, key, strlen(key), flags, &present, buf, sizeof buf - 1, &len);
    if (rc) fail_msg("get: %s", rl_error_name(rc));
    if (!present) return -1;
    buf[len] = 0;
    return atoi(buf + 1);
}

static int cmp_cv(const void *a, const void *b) {
    const txn_log *x = a, *y = b;
    if (x->cv != y->cv) return x->cv < y->cv ? -1 : 1;
    return x->order - y->order;
}

/* State after every committed transaction with cv <= v (logs sorted by cv, order), or, when
 * before >= 0, after those preceding logs[before] in that order. */
static void state_at(const txn_log *logs, int n, int64_t v, int before, int *st) {
    for (int k = 0; k < NKEYS; k++) st[k] = -1;
    for (int i = 0; i < n && (before >= 0 ? i < before : logs[i].cv <= v); i++) {
        if (logs[i].cv < 0) continue;
        for (int j = 0; j < logs[i].n_ops; j++) {
            const op *o = &logs[i].ops[j];
            if (o->kind == OP_SET) st[o->key] = o->val;
            if (o->kind == OP_CLEAR) st[o->key] = -1;
        }
    }
}

TEST(kv_6_1_serializability) {
    kvt_env e;
    kvt_open(&e);
    uint64_t rs = rl_test_seed();
    txn_log *logs = calloc(ROUNDS * 2, sizeof *logs);
    txn_log *aborted = calloc(ROUNDS * 4, sizeof *aborted);
    int n_aborted = 0;
    int n_logs = 0, next_val = 1, conflicts = 0, commits = 0;
    slot s[SLOTS];
    for (int i = 0; i < SLOTS; i++) {
        ASSERT_OK(rl_txn_begin(e.db, &s[i].t));
        memset(&s[i].log, 0, sizeof s[i].log);
        s[i].target_ops = 1 + (int)rl_test_rand_below(&rs, MAXOPS);
    }
    for (int step = 0; step < ROUNDS * 4 && n_logs < ROUNDS; step++) {
        slot *sl = &s[rl_test_rand_below(&rs, SLOTS)];
        if (sl->log.n_ops < sl->target_ops) {
            op *o = &sl->log.ops[sl->log.n_ops++];
            memset(o, 0, sizeof *o);
            o->kind = (int)rl_test_rand_below(&rs, 5);
            o->key = (int)rl_test_rand_below(&rs, NKEYS);
            char key[4];
            key_of(o->key, key);
            switch (o->kind) {
            case OP_GET: o->val = read_val(sl->t, o->key, 0); break;
            case OP_SNAP_GET: o->val = read_val(sl->t, o->key, RL_SNAPSHOT); break;
            case OP_RANGE: {
                rl_future *f = rl_txn_get_range(sl->t, RL_FIRST_GREATER_OR_EQUAL("s", 1),
                                                RL_FIRST_GREATER_OR_EQUAL("t", 1), 0, 0, RL_STREAMING_WANT_ALL, 0, 0);
                const rl_keyvalue *kvs;
                int n, more;
                (void)rl_future_wait(f); /* futures may complete later (RL_TEST_URL=defer:, cluster:) */
                ASSERT_OK(rl_future_get_keyvalue_array(f, &kvs, &n, &more));
                for (int k = 0; k < NKEYS; k++) o->range_vals[k] = -1;
                for (int i = 0; i < n; i++) {
                    char buf[32];
                    memcpy(buf, kvs[i].value, kvs[i].value_len);
                    buf[kvs[i].value_len] = 0;
                    o->range_vals[kvs[i].key[1] - '0'] = atoi(buf + 1);
                }
                rl_future_free(f);
                break;
            }
            case OP_SET: {
                char v[16];
                o->val = next_val++;
                int vl = snprintf(v, sizeof v, "v%d", o->val);
                ASSERT_OK(rl_txn_set(sl->t, key, strlen(key), v, (size_t)vl));
                break;
            }
            case OP_CLEAR: ASSERT_OK(rl_txn_clear(sl->t, key, strlen(key))); break;
            }
            continue;
        }
        /* Commit this slot. */
        rl_future *f = rl_txn_get_read_version(sl->t);
        (void)rl_future_wait(f); /* futures may complete later (RL_TEST_URL=defer:, cluster:) */
        ASSERT_OK(rl_future_get_int64(f, &sl->log.rv));
        rl_future_free(f);
        rl_future *vf = rl_txn_get_versionstamp(sl->t);
        int rc = kvt_commit(sl->t);
        if (rc == RL_OK) {
            ASSERT_OK(rl_txn_get_committed_version(sl->t, &sl->log.cv));
            const uint8_t *vs;
            int vl;
            if (sl->log.cv >= 0) {
                ASSERT_OK(rl_future_get_key(vf, &vs, &vl));
                sl->log.order = vs[8] << 8 | vs[9];
            }
            logs[n_logs++] = sl->log;
            commits++;
        } else {
            ASSERT_RC(rc, RL_E_NOT_COMMITTED);
            aborted[n_aborted++] = sl->log;
            conflicts++;
        }
        rl_future_free(vf);
        rl_txn_reset(sl->t);
        memset(&sl->log, 0, sizeof sl->log);
        sl->target_ops = 1 + (int)rl_test_rand_below(&rs, MAXOPS);
    }
    for (int i = 0; i < SLOTS; i++) rl_txn_free(s[i].t);
    int read_only = 0;
    for (int i = 0; i < n_logs; i++) read_only += logs[i].cv < 0;
    printf("committed %d (of which read-only %d), conflicts %d\n", commits, read_only, conflicts);
    /* Read-only transactions (cv -1) are checked at their read version too. */
    qsort(logs, (size_t)n_logs, sizeof *logs, cmp_cv);
    int st[NKEYS], ser[NKEYS];
    for (int i = 0; i < n_logs; i++) {
        /* st: the snapshot at the read version; ser: the state at the transaction's place in the
         * serial order (just before it for a write transaction; its read version if read-only).
         * Every read must match the snapshot; serializable (non-snapshot) reads also the serial
         * order, which is what conflict detection guarantees. */
        state_at(logs, n_logs, logs[i].rv, -1, st);
        if (logs[i].cv >= 0) state_at(logs, n_logs, 0, i, ser);
        else memcpy(ser, st, sizeof st);
        for (int j = 0; j < logs[i].n_ops; j++) {
            const op *o = &logs[i].ops[j];
            switch (o->kind) {
            case OP_GET:
            case OP_SNAP_GET:
                if (o->val != st[o->key])
                    fail_msg("txn rv %lld cv %lld op %d: read s%d = %d, snapshot model %d", (long long)logs[i].rv,
                             (long long)logs[i].cv, j, o->key, o->val, st[o->key]);
                if (o->kind == OP_GET && o->val != ser[o->key])
                    fail_msg("txn rv %lld cv %lld op %d: read s%d = %d, serial model %d", (long long)logs[i].rv,
                             (long long)logs[i].cv, j, o->key, o->val, ser[o->key]);
                break;
            case OP_RANGE:
                for (int k = 0; k < NKEYS; k++)
                    if (o->range_vals[k] != st[k] || o->range_vals[k] != ser[k])
                        fail_msg("txn rv %lld op %d: range s%d = %d, models %d / %d", (long long)logs[i].rv, j, k,
                                 o->range_vals[k], st[k], ser[k]);
                break;
            case OP_SET: st[o->key] = ser[o->key] = o->val; break;
            case OP_CLEAR: st[o->key] = ser[o->key] = -1; break;
            }
        }
    }
    /* The final state is the replay of every commit. */
    state_at(logs, n_logs, INT64_MAX, -1, st);
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(e.db, &t));
    for (int k = 0; k < NKEYS; k++) ASSERT_EQ(read_val(t, k, 0), st[k]);
    rl_txn_free(t);
    ASSERT_TRUE(conflicts > 0);
    /* The resolver must not abort more than it has to: every aborted transaction read a key
     * (serializably: a get, or the range, which covers every key) that a transaction committed
     * after its read version wrote. A resolver that aborted every writer, or every transaction
     * that ran beside another, fails here. And most write transactions commit. */
    int writers = 0;
    for (int i = 0; i < n_logs; i++) writers += logs[i].cv >= 0;
    for (int a = 0; a < n_aborted; a++) {
        unsigned read_mask = 0;
        for (int j = 0; j < aborted[a].n_ops; j++) {
            if (aborted[a].ops[j].kind == OP_GET) read_mask |= 1u << aborted[a].ops[j].key;
            if (aborted[a].ops[j].kind == OP_RANGE) read_mask = (1u << NKEYS) - 1;
        }
        int justified = 0;
        for (int i = 0; i < n_logs && !justified; i++) {
            if (logs[i].cv <= aborted[a].rv) continue;
            for (int j = 0; j < logs[i].n_ops; j++) {
                const op *o = &logs[i].ops[j];
                if ((o->kind == OP_SET || o->kind == OP_CLEAR) && (read_mask >> o->key & 1)) justified = 1;
            }
        }
        if (!justified)
            fail_msg("transaction with read version %lld (read keys mask 0x%x) was aborted, but no "
                     "transaction committed after its read version wrote a key it read",
                     (long long)aborted[a].rv, read_mask);
    }
    printf("write transactions committed %d, aborted %d (each with a conflicting commit)\n", writers, n_aborted);
    ASSERT_TRUE(writers > 0 && writers >= (writers + n_aborted) / 4); /* about half, measured */
    free(aborted);
    free(logs);
    kvt_close(&e);
}

RL_TEST_MAIN(T(kv_6_1_serializability))
