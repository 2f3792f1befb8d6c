/* test_errmsg.c — the one error-detail rule (include/reclayer/error.h, src/base/errdetail.h):
 * each handle's message after a failure it caused (metadata, store, cursor), the message's
 * lifetime, the pre-handle rule (rl_store_new → the metadata, rl_cursor_open → the store,
 * rl_db_open → the thread's rl_last_error_detail), and that a later success or another handle
 * does not clobber a message. Every database here is mem: (the rule does not depend on the
 * backend). Tests err-1.x.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "test.h"
#include "order.pb-c.h"
#include "reclayer/query.h"
#include "reclayer/record.h"
#include "app/tool.h"
#include "tuple/tuple.h"

static const uint8_t P1[] = {0x02, 'e', 'r', 'r', '1', 0x00};
static const uint8_t P2[] = {0x02, 'e', 'r', 'r', '2', 0x00};

static rl_db *open_mem(void) {
    rl_db *db = NULL;
    ASSERT_OK(rl_db_open("mem:", NULL, &db));
    return db;
}

static Reclayer__Order order(int64_t id, int64_t price) {
    Reclayer__Order o = RECLAYER__ORDER__INIT;
    o.has_order_id = 1, o.order_id = id;
    o.has_price = 1, o.price = price;
    return o;
}

static rl_store *new_store(rl_db *db, const rl_metadata *md, const uint8_t *p, size_t n) {
    rl_store *s = NULL;
    rl_txn *t = NULL;
    ASSERT_OK(rl_store_new(md, p, n, 0, &s));
    ASSERT_OK(rl_txn_begin(db, &t));
    ASSERT_OK(rl_store_open(s, t));
    rl_future *f = rl_txn_commit(t);
    ASSERT_OK(rl_future_wait(f));
    rl_future_free(f);
    rl_txn_free(t);
    return s;
}

/* A mem: database, the Order metadata and an open store at P1. */
typedef struct {
    rl_db *db;
    rl_metadata *md;
    rl_store *s;
} fixture;

static void fx_open(fixture *f) {
    f->db = open_mem();
    ASSERT_OK(rl__order_metadata(&f->md));
    f->s = new_store(f->db, f->md, P1, sizeof P1);
}

static void fx_close(fixture *f) {
    rl_store_free(f->s);
    rl_metadata_free(f->md);
    rl_db_close(f->db);
}

static int commit_free(rl_txn *t) {
    rl_future *f = rl_txn_commit(t);
    int rc = rl_future_wait(f);
    rl_future_free(f);
    rl_txn_free(t);
    return rc;
}

/* err-1.1: the metadata's message: set by the failure, left by a later success, by a failure of
 * another metadata and by rl_metadata_build; the pointer is the handle's own. */
TEST(err_1_1_metadata) {
    rl_metadata *md, *other;
    ASSERT_OK(rl_metadata_new(&md));
    ASSERT_OK(rl_metadata_new(&other));
    ASSERT_STR_EQ(rl_metadata_errmsg(md), "");
    static const char *const nope[] = {"nope"};
    static const char *const id[] = {"order_id"};
    ASSERT_RC(rl_metadata_add_type(md, &reclayer__order__descriptor, nope, 1), RL_E_RECORD_METADATA_INVALID);
    const char *m = rl_metadata_errmsg(md);
    char copy[256];
    snprintf(copy, sizeof copy, "%s", m);
    ASSERT_TRUE(strstr(copy, "'nope'") != NULL);
    /* Another handle's failure does not touch it. */
    ASSERT_RC(rl_metadata_build(other), RL_E_RECORD_METADATA_INVALID);
    ASSERT_TRUE(strstr(rl_metadata_errmsg(other), "no record types") != NULL);
    ASSERT_STR_EQ(rl_metadata_errmsg(md), copy);
    /* A success leaves it, and the string stays where it was. */
    ASSERT_OK(rl_metadata_add_type(md, &reclayer__order__descriptor, id, 1));
    ASSERT_OK(rl_metadata_build(md));
    ASSERT_TRUE(rl_metadata_errmsg(md) == m);
    ASSERT_STR_EQ(m, copy);
    /* The next failure replaces it. */
    ASSERT_RC(rl_metadata_add_type(md, &reclayer__order__descriptor, id, 1), RL_E_RECORD_METADATA_INVALID);
    ASSERT_TRUE(strstr(rl_metadata_errmsg(md), "already built") != NULL);
    ASSERT_STR_EQ(rl_metadata_errmsg(NULL), "");
    rl_metadata_free(other);
    rl_metadata_free(md);
}

/* err-1.2: the store's message: a failed call names what failed; a later success, and failures
 * on another store over the same metadata, leave it; a failure without a detail of its own (bad
 * scan flags) still replaces it, so a message is never left over from an older failure; an
 * expected outcome (not_found) is not a failure. */
TEST(err_1_2_store) {
    fixture f;
    fx_open(&f);
    rl_db *db = f.db;
    rl_metadata *md = f.md;
    rl_store *s = f.s;
    rl_store *s2 = new_store(db, md, P2, sizeof P2);
    ASSERT_STR_EQ(rl_store_errmsg(s), "");
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(db, &t));
    Reclayer__Order o = RECLAYER__ORDER__INIT;
    o.has_price = 1, o.price = 5;
    ASSERT_RC(rl_store_save(s, t, &o.base, NULL), RL_E_RECORD_PK_MISSING);
    const char *m = rl_store_errmsg(s);
    ASSERT_TRUE(strstr(m, "order_id") != NULL);
    char copy[256];
    snprintf(copy, sizeof copy, "%s", m);
    /* Another store fails: its own message; s keeps its. */
    rl_record r;
    ASSERT_RC(rl_store_load(s2, t, "\x15", 1, &r), RL_E_INVALID_ARGUMENT);
    ASSERT_TRUE(strstr(rl_store_errmsg(s2), "primary key is not a packed tuple") != NULL);
    ASSERT_STR_EQ(rl_store_errmsg(s), copy);
    /* Successes and expected outcomes on s leave it. */
    Reclayer__Order ok = order(1, 10);
    ASSERT_OK(rl_store_save(s, t, &ok.base, NULL));
    uint8_t pk[16];
    rl_buf b;
    rl__buf_init(&b);
    rl__tuple_packer tp;
    rl__tuple_packer_init(&tp, &b);
    rl__tuple_pack_int(&tp, 99);
    ASSERT_EQ(b.len <= sizeof pk, 1);
    memcpy(pk, b.data, b.len);
    ASSERT_RC(rl_store_load(s, t, pk, b.len, &r), RL_E_NOT_FOUND);
    int64_t n = -1;
    ASSERT_OK(rl_store_count(s, t, &n));
    ASSERT_EQ(n, 1);
    ASSERT_TRUE(rl_store_errmsg(s) == m);
    ASSERT_STR_EQ(m, copy);
    /* A failure with nothing more to say than its code still says which call failed. */
    rl_record_page pg;
    ASSERT_RC(rl_store_scan(s, t, NULL, 0, NULL, 0, 0x100, 0, NULL, 0, &pg), RL_E_INVALID_ARGUMENT);
    ASSERT_TRUE(strstr(rl_store_errmsg(s), "rl_store_scan") != NULL);
    ASSERT_TRUE(strstr(rl_store_errmsg(s), rl_error_message(RL_E_INVALID_ARGUMENT)) != NULL);
    rl__buf_release(&b);
    ASSERT_OK(commit_free(t));
    ASSERT_STR_EQ(rl_store_errmsg(NULL), "");
    rl_store_free(s2);
    fx_close(&f);
}

/* err-1.3: before a handle exists. rl_store_new leaves its detail on the metadata and no store;
 * rl_cursor_open leaves its on the store and no cursor; rl_db_open has no parent: its detail is
 * the thread's rl_last_error_detail, which the next rl_db_open of the thread resets and which
 * another thread's rl_db_open does not touch. */
static void *other_open(void *ud) {
    rl_db *db = NULL;
    int *rc = ud;
    *rc = rl_db_open("nosuchscheme:x", NULL, &db);
    if (!strstr(rl_last_error_detail(), "nosuchscheme")) *rc = -1;
    return NULL;
}

TEST(err_1_3_before_a_handle) {
    fixture f;
    fx_open(&f);
    rl_db *db = f.db;
    rl_metadata *md = f.md;
    rl_store *s = f.s, *none = (rl_store *)&none; /* none must become NULL */
    static const uint8_t junk[] = {0x15};
    ASSERT_RC(rl_store_new(md, junk, sizeof junk, 0, &none), RL_E_INVALID_ARGUMENT);
    ASSERT_NULL(none);
    ASSERT_TRUE(strstr(rl_metadata_errmsg(md), "store prefix is not a packed tuple") != NULL);
    ASSERT_RC(rl_store_new(md, P1, sizeof P1, 0x80, &none), RL_E_INVALID_ARGUMENT);
    ASSERT_TRUE(strstr(rl_metadata_errmsg(md), "unknown flags") != NULL);
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(db, &t));
    rl_cursor *c = (rl_cursor *)&c;
    ASSERT_RC(rl_cursor_open(s, t, "no_such_index", NULL, &c), RL_E_INDEX_UNKNOWN);
    ASSERT_NULL(c);
    ASSERT_TRUE(strstr(rl_store_errmsg(s), "no index named no_such_index") != NULL);
    rl_query_options o;
    memset(&o, 0, sizeof o);
    o.size = sizeof o;
    o.skip = -1;
    ASSERT_RC(rl_cursor_open(s, t, "price_idx", &o, &c), RL_E_INVALID_ARGUMENT);
    ASSERT_TRUE(strstr(rl_store_errmsg(s), "out of range") != NULL);
    rl_txn_free(t);
    /* rl_db_open. */
    rl_db *bad = (rl_db *)&bad;
    ASSERT_RC(rl_db_open("file:/nonexistent/rl-errmsg-test", NULL, &bad), RL_E_FILE_NOT_FOUND);
    ASSERT_NULL(bad);
    ASSERT_TRUE(strstr(rl_last_error_detail(), "/nonexistent/rl-errmsg-test") != NULL);
    int orc = 0;
    pthread_t th;
    ASSERT_EQ(pthread_create(&th, NULL, other_open, &orc), 0);
    pthread_join(th, NULL);
    ASSERT_EQ(orc, RL_E_BAD_URL);
    ASSERT_TRUE(strstr(rl_last_error_detail(), "/nonexistent/rl-errmsg-test") != NULL);
    /* Handles' failures do not touch it either. */
    rl_record r;
    ASSERT_OK(rl_txn_begin(db, &t));
    ASSERT_RC(rl_store_load(s, t, "\x15", 1, &r), RL_E_INVALID_ARGUMENT);
    rl_txn_free(t);
    ASSERT_TRUE(strstr(rl_last_error_detail(), "/nonexistent/rl-errmsg-test") != NULL);
    rl_db *db2 = open_mem();
    ASSERT_STR_EQ(rl_last_error_detail(), "");
    rl_db_close(db2);
    fx_close(&f);
}

/* err-1.4: the cursor's message: an orphan index entry fails the cursor with a detail naming the
 * entry; the error is sticky and so is the message (a second call does not replace it with a
 * generic one); the store's message is not touched by the cursor's failure. */
TEST(err_1_4_cursor) {
    fixture f;
    fx_open(&f);
    rl_db *db = f.db;
    rl_store *s = f.s;
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(db, &t));
    Reclayer__Order o = order(7, 42);
    ASSERT_OK(rl_store_save(s, t, &o.base, NULL));
    ASSERT_OK(commit_free(t));
    /* Remove the record's keys, keep its index entry: (1, 7, ...) under the prefix. */
    uint8_t b[32], e[32];
    memcpy(b, P1, sizeof P1);
    b[sizeof P1] = 0x15, b[sizeof P1 + 1] = 0x01;
    memcpy(e, b, sizeof P1 + 2);
    e[sizeof P1 + 1] = 0x02;
    ASSERT_OK(rl_txn_begin(db, &t));
    ASSERT_OK(rl_txn_clear_range(t, b, sizeof P1 + 2, e, sizeof P1 + 2));
    ASSERT_OK(commit_free(t));
    /* A store failure first, to see that the cursor leaves it. */
    ASSERT_OK(rl_txn_begin(db, &t));
    rl_record r;
    ASSERT_RC(rl_store_load(s, t, "\x15", 1, &r), RL_E_INVALID_ARGUMENT);
    char store_msg[256];
    snprintf(store_msg, sizeof store_msg, "%s", rl_store_errmsg(s));
    rl_cursor *c;
    ASSERT_OK(rl_cursor_open(s, t, "price_idx", NULL, &c));
    ASSERT_STR_EQ(rl_cursor_errmsg(c), "");
    const rl_query_row *row;
    ASSERT_RC(rl_cursor_next(c, &row), RL_E_INDEX_ORPHAN_ENTRY);
    const char *m = rl_cursor_errmsg(c);
    if (!strstr(m, "record not found for index entry") || !strstr(m, "42")) fail_msg("detail: %s", m);
    char copy[256];
    snprintf(copy, sizeof copy, "%s", m);
    ASSERT_RC(rl_cursor_next(c, &row), RL_E_INDEX_ORPHAN_ENTRY);
    ASSERT_STR_EQ(rl_cursor_errmsg(c), copy);
    ASSERT_STR_EQ(rl_store_errmsg(s), store_msg);
    rl_cursor_free(c);
    ASSERT_STR_EQ(rl_cursor_errmsg(NULL), "");
    rl_txn_free(t);
    fx_close(&f);
}

/* err-1.5: a store shared by threads (record.h allows it): every thread's failures write the one
 * message without interleaving, so afterwards it is exactly one of the failures' texts. */
typedef struct {
    rl_db *db;
    rl_store *s;
    int which;
    int rc;
} thr;

static void *fail_loop(void *ud) {
    thr *a = ud;
    rl_txn *t;
    if ((a->rc = rl_txn_begin(a->db, &t))) return NULL;
    for (int i = 0; i < 2000 && !a->rc; i++) {
        rl_record r;
        rl_record_page pg;
        int rc = a->which ? rl_store_load(a->s, t, "\x15", 1, &r)
                          : rl_store_scan(a->s, t, NULL, 0, NULL, 0, 0x100, 0, NULL, 0, &pg);
        if (rc != RL_E_INVALID_ARGUMENT) a->rc = rc ? rc : -1;
    }
    rl_txn_free(t);
    return NULL;
}

TEST(err_1_5_shared_store) {
    fixture f;
    fx_open(&f);
    rl_db *db = f.db;
    rl_store *s = f.s;
    pthread_t th[4];
    thr a[4];
    for (int i = 0; i < 4; i++) {
        a[i] = (thr){db, s, i % 2, 0};
        ASSERT_EQ(pthread_create(&th[i], NULL, fail_loop, &a[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        ASSERT_OK(a[i].rc);
    }
    char scan_msg[256];
    snprintf(scan_msg, sizeof scan_msg, "rl_store_scan: %s", rl_error_message(RL_E_INVALID_ARGUMENT));
    const char *m = rl_store_errmsg(s);
    if (strcmp(m, "primary key is not a packed tuple") != 0 && strcmp(m, scan_msg) != 0)
        fail_msg("the message is neither failure's: %s", m);
    fx_close(&f);
}

RL_TEST_MAIN(T(err_1_1_metadata), T(err_1_2_store), T(err_1_3_before_a_handle), T(err_1_4_cursor),
             T(err_1_5_shared_store))
