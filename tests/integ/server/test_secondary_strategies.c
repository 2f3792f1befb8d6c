/* test_secondary_strategies.c — the storage-to-storage secondary strategies of mapped reads
 * against a real 3-server cluster: `individual` (FoundationDB's batches of 10
 * separate reads) and `grouped` (the page's remote secondaries grouped by owner, one round) return
 * identical results, and the storage-to-storage round trips the servers report match the strategy.
 *
 * Layout: index entries ("i", price, pk) in one shard on storage 2; records ("r", pk, sub) split
 * over three shards on storages 3, 1 and 2 (so most records are remote from the index, some are
 * local); a record has 0-3 keys (0: the index entry is an orphan), values 1-300 bytes, a few of
 * 30,000 bytes so small byte targets cut pages. Each round draws bounds on the price, a
 * direction, a row limit, a byte target (0 or small) and a per-secondary row limit (a second
 * database handle opened with mapped_secondary_row_limit 2, so some secondaries come back `more`),
 * and reads the mapped range with RL_MAPPED_INDIVIDUAL, RL_MAPPED_GROUPED and no flag in one
 * transaction (one read version): every entry must be equal — index key and value, secondary
 * bounds, rows, more, served_locally — and match the model's count. Without a byte target the
 * read is one page (the index lies in one shard), so its s2s round trips are known exactly:
 * individual ceil-per-batch (the batches of 10 entries, in scan order, holding a remote one),
 * grouped 1 when any entry is remote, else 0. The seed is printed (RL_SEED=N replays).
 */
#include <stdlib.h>

#include "cluster_fixture.h"
#include "mapped_read.h"
#include "kv/kv_int.h"
#include "test.h"
#include "tuple/tuple.h"

#define MAXPK 200
#define ROUNDS 60

static rl_test_cluster g_cluster; /* static: the exit hook stops it after a failed assertion */

typedef struct {
    int present[MAXPK + 1]; /* the index entry exists */
    int price[MAXPK + 1];
    int nsub[MAXPK + 1]; /* record keys */
} model;

static void load(rl_db *db, model *m, uint64_t *rng) {
    rl_buf k, v;
    rl__buf_init(&k);
    rl__buf_init(&v);
    memset(m, 0, sizeof *m);
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(db, &t));
    for (int pk = 1; pk <= MAXPK; pk++) {
        if (rl_test_rand_below(rng, 4) == 0) continue; /* no index entry */
        m->present[pk] = 1;
        m->price[pk] = (int)rl_test_rand_below(rng, 50);
        m->nsub[pk] = (int)rl_test_rand_below(rng, 4);
        pack_index(&k, m->price[pk], pk);
        ASSERT_OK(rl_txn_set(t, k.data, k.len, "", 0));
        for (int s = 0; s < m->nsub[pk]; s++) {
            pack_record(&k, pk, s);
            size_t vl = rl_test_rand_below(rng, 40) == 0 ? 30000 : 1 + rl_test_rand_below(rng, 300);
            rl__buf_reset(&v);
            for (size_t i = 0; i < vl; i++) rl__buf_append_byte(&v, (uint8_t)('a' + (pk + s + i) % 26));
            ASSERT_OK(rl_txn_set(t, k.data, k.len, v.data, v.len));
        }
    }
    rl_future *f = rl_txn_commit(t);
    ASSERT_OK(rl_future_wait(f));
    rl_future_free(f);
    rl_txn_free(t);
    rl__buf_release(&k);
    rl__buf_release(&v);
}

/* strategies-1.1: individual and grouped return identical mapped results over random data,
 * bounds, directions, limits, byte targets and secondary limits, with records on other servers
 * than the index; the s2s round trips of one-page reads match the strategy. */
TEST(strategies_1_1_identical) {
    rl_test_cluster *c = &g_cluster;
    /* ("i", ...) on storage 2; ("r", 1..69) on 3, ("r", 70..139) on 1, ("r", 140..) on 2. */
    const char *keys[] = {"\\x02i", "\\x02j", "\\x02r\\x00\\x15\\x46", "\\x02r\\x00\\x15\\x8c"};
    rl__cluster_up_opts o;
    memset(&o, 0, sizeof o);
    o.n_storage = 3;
    o.split = keys;
    o.n_split = 4;
    int rc = rl_test_cluster_start(c, &o);
    ASSERT_OK(rc);
    rl_db *db = NULL, *db2 = NULL;
    ASSERT_OK(rl_db_open(c->url, NULL, &db));
    rl_db_options dopt;
    memset(&dopt, 0, sizeof dopt);
    dopt.size = sizeof dopt;
    dopt.mapped_secondary_row_limit = 2;
    ASSERT_OK(rl_db_open(c->url, &dopt, &db2));
    uint64_t rng = rl_test_seed();
    model m;
    load(db, &m, &rng);
    int checked_rt = 0, remote_seen = 0, local_seen = 0, more_seen = 0;
    for (int round = 0; round < ROUNDS; round++) {
        int lo = (int)rl_test_rand_below(&rng, 50), hi = lo + 1 + (int)rl_test_rand_below(&rng, 50);
        int rev = (int)rl_test_rand_below(&rng, 2);
        int limit = rl_test_rand_below(&rng, 3) == 0 ? 0 : 1 + (int)rl_test_rand_below(&rng, 60);
        int target = rl_test_rand_below(&rng, 3) == 0 ? 2000 + (int)rl_test_rand_below(&rng, 60000) : 0;
        rl_db *d = rl_test_rand_below(&rng, 3) == 0 ? db2 : db;
        rl_txn *t;
        ASSERT_OK(rl_txn_begin(d, &t));
        int fl = rev ? RL_REVERSE : 0;
        rl_future *fi = mapped(t, lo, hi, limit, target, fl | RL_MAPPED_INDIVIDUAL);
        rl_future *fg = mapped(t, lo, hi, limit, target, fl | RL_MAPPED_GROUPED);
        rl_future *fd = mapped(t, lo, hi, limit, target, fl);
        const rl_mapped_keyvalue *ei, *eg, *ed;
        int ni, ng, nd, mi, mg, md;
        ASSERT_OK(rl_future_wait(fi));
        ASSERT_OK(rl_future_wait(fg));
        ASSERT_OK(rl_future_wait(fd));
        ASSERT_OK(rl_future_get_mapped_keyvalue_array(fi, &ei, &ni, &mi));
        ASSERT_OK(rl_future_get_mapped_keyvalue_array(fg, &eg, &ng, &mg));
        ASSERT_OK(rl_future_get_mapped_keyvalue_array(fd, &ed, &nd, &md));
        char what[160];
        snprintf(what, sizeof what, "round %d (prices [%d, %d), %s, limit %d, target %d%s)", round, lo, hi,
                 rev ? "reverse" : "forward", limit, target, d == db2 ? ", 2 rows per secondary" : "");
        same_entries(ei, ni, mi, eg, ng, mg, target != 0, what);
        same_entries(eg, ng, mg, ed, nd, md, 0, what); /* the servers' default is grouped */
        /* The model: entries with lo <= price < hi (all of them without a limit or target). */
        int want = 0;
        for (int pk = 1; pk <= MAXPK; pk++) want += m.present[pk] && m.price[pk] >= lo && m.price[pk] < hi;
        if (limit == 0 && target == 0) ASSERT_EQ(ni, want);
        else ASSERT_TRUE(ni <= want && (ni > 0 || want == 0));
        int batches = 0, any_remote = 0;
        for (int i = 0; i < ni; i++) {
            int pk = (int)(ei[i].index.key[ei[i].index.key_len - 1]);
            int maxrows = d == db2 ? 2 : 3;
            ASSERT_EQ(ei[i].n_kvs, m.nsub[pk] < maxrows ? m.nsub[pk] : maxrows);
            more_seen += ei[i].more;
            any_remote |= !ei[i].served_locally;
            remote_seen += !ei[i].served_locally;
            local_seen += ei[i].served_locally;
            if (i % 10 == 9 || i == ni - 1) {
                int rem = 0;
                for (int j = i - i % 10; j <= i; j++) rem |= !ei[j].served_locally;
                batches += rem;
            }
        }
        rl_future *fs[3] = {fi, fg, fd};
        if (target == 0) {
            ASSERT_EQ(fi->stats.s2s_round_trips, (uint32_t)batches);
            ASSERT_EQ(fg->stats.s2s_round_trips, (uint32_t)any_remote);
            checked_rt++;
        } else {
            ASSERT_TRUE(fg->stats.s2s_round_trips <= fi->stats.s2s_round_trips);
        }
        for (int k = 0; k < 3; k++) rl_future_free(fs[k]);
        rl_txn_free(t);
    }
    printf("%d rounds (%d with their s2s round trips checked): %d entries remote, %d local, %d cut off (more)\n",
           ROUNDS, checked_rt, remote_seen, local_seen, more_seen);
    ASSERT_TRUE(remote_seen > 0 && local_seen > 0 && checked_rt > 0);
    rl_db_close(db2);
    rl_db_close(db);
    rl_test_cluster_stop(c);
}

/* strategies-1.2: the database's default strategy: cluster:FILE?secondary=grouped makes
 * unflagged mapped reads grouped (one s2s round trip for 100 remote entries), ?secondary=individual
 * individual (10), a flag overrides it, none at all is the servers' default (grouped), and an
 * unknown value is refused. */
TEST(strategies_1_2_database_default) {
    rl_test_cluster *c = &g_cluster;
    const char *keys[] = {"\\x02i", "\\x02j"};
    rl__cluster_up_opts o;
    memset(&o, 0, sizeof o);
    o.n_storage = 3;
    o.split = keys;
    o.n_split = 2;
    int rc = rl_test_cluster_start(c, &o);
    ASSERT_OK(rc);
    /* ("i", ...) on storage 2, ("r", ...) on storage 3: every record remote. */
    rl_db *db = NULL;
    ASSERT_OK(rl_db_open(c->url, NULL, &db));
    rl_buf k;
    rl__buf_init(&k);
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(db, &t));
    for (int pk = 1; pk <= 100; pk++) {
        pack_index(&k, pk, pk);
        ASSERT_OK(rl_txn_set(t, k.data, k.len, "", 0));
        pack_record(&k, pk, 0);
        ASSERT_OK(rl_txn_set(t, k.data, k.len, "v", 1));
    }
    rl_future *f = rl_txn_commit(t);
    ASSERT_OK(rl_future_wait(f));
    rl_future_free(f);
    rl_txn_free(t);
    rl_db_close(db);
    struct {
        const char *suffix;
        int flags;
        uint32_t want;
    } cases[] = {
        {"?secondary=grouped", 0, 1},
        {"?secondary=individual", 0, 10},
        {"?secondary=grouped", RL_MAPPED_INDIVIDUAL, 10},
        {"?secondary=individual", RL_MAPPED_GROUPED, 1},
        {"", 0, 1},
        {"?secondary=default", RL_MAPPED_INDIVIDUAL, 10},
    };
    char url[4400];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(url, sizeof url, "%.4299s%s", c->url, cases[i].suffix);
        ASSERT_OK(rl_db_open(url, NULL, &db));
        ASSERT_OK(rl_txn_begin(db, &t));
        f = mapped(t, 0, 1000, 0, 0, cases[i].flags);
        ASSERT_OK(rl_future_wait(f));
        const rl_mapped_keyvalue *e;
        int n, more;
        ASSERT_OK(rl_future_get_mapped_keyvalue_array(f, &e, &n, &more));
        ASSERT_EQ(n, 100);
        if (f->stats.s2s_round_trips != cases[i].want)
            fail_msg("%s flags %d: %u s2s round trips, expected %u", url, cases[i].flags, f->stats.s2s_round_trips,
                     cases[i].want);
        rl_future_free(f);
        /* Both flags at once are refused. */
        f = mapped(t, 0, 1000, 0, 0, RL_MAPPED_INDIVIDUAL | RL_MAPPED_GROUPED);
        ASSERT_RC(rl_future_wait(f), RL_E_INVALID_ARGUMENT);
        rl_future_free(f);
        rl_txn_free(t);
        rl_db_close(db);
    }
    snprintf(url, sizeof url, "%.4299s?secondary=fast", c->url);
    ASSERT_RC(rl_db_open(url, NULL, &db), RL_E_BAD_URL);
    rl_db_options dopt;
    memset(&dopt, 0, sizeof dopt);
    dopt.size = sizeof dopt;
    dopt.mapped_secondary_strategy = RL_SECONDARY_GROUPED;
    ASSERT_OK(rl_db_open(c->url, &dopt, &db));
    ASSERT_OK(rl_txn_begin(db, &t));
    f = mapped(t, 0, 1000, 0, 0, 0);
    ASSERT_OK(rl_future_wait(f));
    ASSERT_EQ(f->stats.s2s_round_trips, 1);
    rl_future_free(f);
    rl_txn_free(t);
    rl_db_close(db);
    dopt.mapped_secondary_strategy = 3;
    ASSERT_RC(rl_db_open(c->url, &dopt, &db), RL_E_INVALID_ARGUMENT);
    rl__buf_release(&k);
    rl_test_cluster_stop(c);
}

/* strategies-1.3: the index read alone (cluster.c's header, docs/design.md §8.4 "Deferred
 * secondaries"). Index ("i", ...) on storage 2; records ("r", ...) on storage 3 (none on the
 * index's server) and the same records again as ("t", ...) on storage 2 (all on it). A `grouped`
 * read with RL_MAPPED_DEFER_REMOTE of the "r" records goes as plain GET_RANGEs — no mapped
 * request at all — and returns what the server would have: every entry with its index key-value
 * and secondary bounds (equal to an `individual` read's), no rows, more, not served locally;
 * rows, more and limits over random bounds, directions, limits and byte targets (pages). The
 * servers' default strategy defers the same way. The "t" records, which the index's server
 * holds, still go as a mapped read and come with their rows; so do `individual` reads (they
 * never defer). A mapper whose placeholder is past the key's end fails the same way on both
 * paths (mapper_bad_index). The seed is printed (RL_SEED=N replays). */
TEST(strategies_1_3_index_read_alone) {
    rl_test_cluster *c = &g_cluster;
    /* shards [, i) s1, [i, j) s2, [j, s) s3 (all of "r"), [s, t) s1, [t, ) s2 (all of "t") */
    const char *keys[] = {"\\x02i", "\\x02j", "\\x02s", "\\x02t"};
    rl__cluster_up_opts o;
    memset(&o, 0, sizeof o);
    o.n_storage = 3;
    o.split = keys;
    o.n_split = 4;
    ASSERT_OK(rl_test_cluster_start(c, &o));
    rl_db *db = NULL;
    ASSERT_OK(rl_db_open(c->url, NULL, &db));
    uint64_t rng = rl_test_seed();
    model m;
    load(db, &m, &rng); /* ("i", price, pk) and ("r", pk, sub) */
    rl_buf k, v;
    rl__buf_init(&k);
    rl__buf_init(&v);
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(db, &t)); /* the same records under "t" */
    for (int pk = 1; pk <= MAXPK; pk++) {
        for (int s = 0; s < m.nsub[pk]; s++) {
            rl__tuple_packer p;
            rl__buf_reset(&k);
            rl__tuple_packer_init(&p, &k);
            rl__tuple_pack_string(&p, "t", 1);
            rl__tuple_pack_int(&p, pk);
            rl__tuple_pack_int(&p, s);
            ASSERT_OK(rl_txn_set(t, k.data, k.len, "tv", 2));
        }
    }
    rl_future *f = rl_txn_commit(t);
    ASSERT_OK(rl_future_wait(f));
    rl_future_free(f);
    rl_txn_free(t);
    const int defer = RL_MAPPED_DEFER_REMOTE;
    int entries = 0, pages = 0;
    for (int round = 0; round < 40; round++) {
        int lo = (int)rl_test_rand_below(&rng, 50), hi = lo + 1 + (int)rl_test_rand_below(&rng, 50);
        int rev = (int)rl_test_rand_below(&rng, 2) ? RL_REVERSE : 0;
        int limit = rl_test_rand_below(&rng, 3) == 0 ? 0 : 1 + (int)rl_test_rand_below(&rng, 60);
        int target = rl_test_rand_below(&rng, 3) == 0 ? 200 + (int)rl_test_rand_below(&rng, 2000) : 0;
        int strat = round % 2 ? RL_MAPPED_GROUPED : 0; /* 0: the servers' default, grouped */
        char what[160];
        snprintf(what, sizeof what, "round %d (prices [%d, %d), %s, limit %d, target %d, %s)", round, lo, hi,
                 rev ? "reverse" : "forward", limit, target, strat ? "grouped" : "default");
        ASSERT_OK(rl_txn_begin(db, &t));
        rl_future *fa = mapped_to(t, "r", 2, lo, hi, limit, target, rev | strat | defer);
        rl_future *fi = mapped_to(t, "r", 2, lo, hi, limit, target, rev | RL_MAPPED_INDIVIDUAL | defer);
        rl_future *ft = mapped_to(t, "t", 2, lo, hi, limit, target, rev | strat | defer);
        const rl_mapped_keyvalue *ea, *ei, *et;
        int na, ni, nt, ma, mi, mt;
        ASSERT_OK(rl_future_wait(fa));
        ASSERT_OK(rl_future_wait(fi));
        ASSERT_OK(rl_future_wait(ft));
        ASSERT_OK(rl_future_get_mapped_keyvalue_array(fa, &ea, &na, &ma));
        ASSERT_OK(rl_future_get_mapped_keyvalue_array(fi, &ei, &ni, &mi));
        ASSERT_OK(rl_future_get_mapped_keyvalue_array(ft, &et, &nt, &mt));
        /* Where they went: the index read alone, against mapped reads. */
        if (fa->stats.req_get_mapped != 0 || fa->stats.req_get_range == 0)
            fail_msg("%s: the \"r\" read sent %u mapped and %u range requests", what, fa->stats.req_get_mapped,
                     fa->stats.req_get_range);
        ASSERT_TRUE(fi->stats.req_get_mapped > 0);
        ASSERT_TRUE(ft->stats.req_get_mapped > 0);
        pages += (int)fa->stats.req_get_range;
        /* The same entries as the individual read, unread. */
        if (na != ni && !(target && (na < ni ? ma : mi))) fail_msg("%s: %d entries against %d", what, na, ni);
        if (na == ni) ASSERT_EQ(ma, mi);
        int n = na < ni ? na : ni;
        for (int i = 0; i < n; i++) {
            ASSERT_MEM_EQ(ea[i].index.key, ea[i].index.key_len, ei[i].index.key, ei[i].index.key_len);
            ASSERT_MEM_EQ(ea[i].index.value, ea[i].index.value_len, ei[i].index.value, ei[i].index.value_len);
            ASSERT_EQ(ea[i].is_range, 1);
            ASSERT_MEM_EQ(ea[i].begin, ea[i].begin_len, ei[i].begin, ei[i].begin_len);
            ASSERT_MEM_EQ(ea[i].end, ea[i].end_len, ei[i].end, ei[i].end_len);
            ASSERT_EQ(ea[i].n_kvs, 0);
            ASSERT_EQ(ea[i].more, 1);
            ASSERT_EQ(ea[i].served_locally, 0);
            int pk = (int)(ei[i].index.key[ei[i].index.key_len - 1]);
            ASSERT_EQ(ei[i].n_kvs, m.nsub[pk] < 3 ? m.nsub[pk] : 3);
        }
        /* "t": read by the index's server, rows and all. */
        if (nt != ni && !(target && (nt < ni ? mt : mi))) fail_msg("%s: \"t\" %d entries against %d", what, nt, ni);
        for (int i = 0; i < (nt < ni ? nt : ni); i++) {
            ASSERT_MEM_EQ(et[i].index.key, et[i].index.key_len, ei[i].index.key, ei[i].index.key_len);
            ASSERT_EQ(et[i].n_kvs, ei[i].n_kvs);
            ASSERT_EQ(et[i].served_locally, 1);
        }
        entries += na;
        rl_future_free(fa);
        rl_future_free(fi);
        rl_future_free(ft);
        rl_txn_free(t);
    }
    printf("40 rounds: %d entries read alone in %d range requests\n", entries, pages);
    ASSERT_TRUE(entries > 0);
    /* A placeholder past the index key's end: the same error either way. */
    ASSERT_OK(rl_txn_begin(db, &t));
    rl_future *fa = mapped_to(t, "r", 7, 0, 1000, 0, 0, RL_MAPPED_GROUPED | defer);
    rl_future *fi = mapped_to(t, "r", 7, 0, 1000, 0, 0, RL_MAPPED_INDIVIDUAL | defer);
    ASSERT_RC(rl_future_wait(fa), RL_E_MAPPER_BAD_INDEX);
    ASSERT_RC(rl_future_wait(fi), RL_E_MAPPER_BAD_INDEX);
    ASSERT_EQ(fa->stats.req_get_mapped, 0);
    rl_future_free(fa);
    rl_future_free(fi);
    rl_txn_free(t);
    rl__buf_release(&k);
    rl__buf_release(&v);
    rl_db_close(db);
    rl_test_cluster_stop(c);
}

RL_TEST_MAIN(T(strategies_1_1_identical), T(strategies_1_2_database_default), T(strategies_1_3_index_read_alone))
