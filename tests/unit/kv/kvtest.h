/* kvtest.h — helpers shared by the KV conformance tests: open the database under test
 * (rl_test_url(); "file:" alone means a fresh temporary directory per test), and short
 * wrappers that wait on futures and assert. Header-only (static functions) so every test
 * program of tests/{unit,fault,integ}/kv can include it. */
#ifndef RL_KVTEST_H
#define RL_KVTEST_H

#include <stdlib.h>
#include <string.h>

#include "reclayer/kv.h"
#include "test.h"

typedef struct {
    rl_db *db;
    char *dir; /* file: temp dir (free()), or NULL */
    char url[4200];
} kvt_env;

/* Open a fresh database of the kind RL_TEST_URL names (see the file comment). */
static inline void kvt_open_opts(kvt_env *e, const rl_db_options *o) {
    const char *url = rl_test_url();
    memset(e, 0, sizeof *e);
    if (!strncmp(url, "file:", 5) && (!url[5] || url[5] == '?')) {
        e->dir = rl_test_tmpdir("kv");
        snprintf(e->url, sizeof e->url, "file:%s%s", e->dir, url + 5); /* keeps ?engine= */
    } else {
        snprintf(e->url, sizeof e->url, "%s", url);
    }
    int rc = rl_test_db_open(e->url, o, &e->db); /* cluster: also clears the keyspace */
    if (rc) fail_msg("rl_db_open(%s): %s %s", e->url, rl_error_name(rc), rl_last_error_detail());
}

static inline void kvt_open(kvt_env *e) { kvt_open_opts(e, NULL); }

static inline void kvt_close(kvt_env *e) {
    rl_db_close(e->db);
    e->db = NULL;
    if (e->dir) {
        rl_test_rmtree(e->dir);
        free(e->dir);
        e->dir = NULL;
    }
}

/* Commit and return the outcome. */
static inline int kvt_commit(rl_txn *t) {
    rl_future *f = rl_txn_commit(t);
    int rc = rl_future_wait(f);
    rl_future_free(f);
    return rc;
}

/* get: returns the future's error; *present and up to cap bytes of the value in buf. */
static inline int kvt_get(rl_txn *t, const char *k, size_t kl, int flags, int *present, char *buf, size_t cap,
                          int *len) {
    rl_future *f = rl_txn_get(t, k, kl, flags);
    int rc = rl_future_wait(f);
    if (rc == RL_OK) {
        const uint8_t *v;
        int vl;
        rc = rl_future_get_value(f, present, &v, &vl);
        if (rc == RL_OK && *present) {
            if ((size_t)vl > cap) vl = (int)cap;
            if (vl) memcpy(buf, v, (size_t)vl);
        }
        if (len) *len = *present ? vl : 0;
    }
    rl_future_free(f);
    return rc;
}

/* Assert the value of a string key (NULL: absent). */
static inline void kvt_expect(rl_txn *t, const char *k, const char *want, int flags) {
    int present = 0, len = 0;
    char buf[4096];
    ASSERT_OK(kvt_get(t, k, strlen(k), flags, &present, buf, sizeof buf, &len));
    if (!want) {
        if (present) fail_msg("key %s: expected absent, got '%.*s'", k, len, buf);
    } else {
        if (!present) fail_msg("key %s: expected '%s', got absent", k, want);
        ASSERT_MEM_EQ(buf, (size_t)len, want, strlen(want));
    }
}

/* Set string keys in one committed transaction: kvt_put(db, "a", "1", "b", "2", NULL). */
static inline void kvt_put(rl_db *db, ...) {
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(db, &t));
    va_list ap;
    va_start(ap, db);
    for (;;) {
        const char *k = va_arg(ap, const char *);
        if (!k) break;
        const char *v = va_arg(ap, const char *);
        ASSERT_OK(rl_txn_set(t, k, strlen(k), v, strlen(v)));
    }
    va_end(ap);
    ASSERT_OK(kvt_commit(t));
    rl_txn_free(t);
}

#endif
