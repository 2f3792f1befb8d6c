/* test_fdbc_abi.c — ABI of build/fdb/libfdb_c.so against FoundationDB's documentation: struct
 * sizes and field offsets (declared in fdbc_api.h from the documentation, not from src/fdbc),
 * the exported symbols (every function of the 730 API, nothing but fdb_*), the soname, and the
 * layouts as the library fills them at run time (rows and mapped entries read through the
 * documented structs).
 *
 *   fdbc-abi-1.1  sizes, offsets and alignment of FDBKey, FDBKeyValue, FDBKeySelector,
 *                 FDBGetRangeReqAndResult, FDBMappedKeyValue
 *   fdbc-abi-1.2  every documented function resolves; only fdb_* symbols are exported; soname
 *   fdbc-abi-1.3  a range result read through FDBKeyValue (packed, 24-byte stride)
 *   fdbc-abi-1.4  a mapped range result read through FDBMappedKeyValue (index key and value,
 *                 getRange selectors and rows, the opaque buffer's `more` and variant bytes)
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "fdbc_api.h"

static fdbt_client cl;

static void start_once(void) {
    if (!cl.started && fdbt_start(&cl)) fail_msg("cannot start the client over %s", fdbt_lib_path());
}

TEST(fdbc_abi_1_1) {
    ASSERT_EQ(sizeof(FDBKey), 12);
    ASSERT_EQ(offsetof(FDBKey, key), 0);
    ASSERT_EQ(offsetof(FDBKey, key_length), 8);
    ASSERT_EQ(sizeof(FDBKeyValue), 24);
    ASSERT_EQ(_Alignof(FDBKeyValue), 4);
    ASSERT_EQ(offsetof(FDBKeyValue, key), 0);
    ASSERT_EQ(offsetof(FDBKeyValue, key_length), 8);
    ASSERT_EQ(offsetof(FDBKeyValue, value), 12);
    ASSERT_EQ(offsetof(FDBKeyValue, value_length), 20);
    ASSERT_EQ(sizeof(FDBKeySelector), 20);
    ASSERT_EQ(offsetof(FDBKeySelector, key), 0);
    ASSERT_EQ(offsetof(FDBKeySelector, orEqual), 12);
    ASSERT_EQ(offsetof(FDBKeySelector, offset), 16);
    ASSERT_EQ(sizeof(FDBGetRangeReqAndResult), 56);
    ASSERT_EQ(offsetof(FDBGetRangeReqAndResult, begin), 0);
    ASSERT_EQ(offsetof(FDBGetRangeReqAndResult, end), 20);
    ASSERT_EQ(offsetof(FDBGetRangeReqAndResult, data), 40);
    ASSERT_EQ(offsetof(FDBGetRangeReqAndResult, m_size), 48);
    ASSERT_EQ(offsetof(FDBGetRangeReqAndResult, m_capacity), 52);
    ASSERT_EQ(sizeof(FDBMappedKeyValue), 112);
    ASSERT_EQ(offsetof(FDBMappedKeyValue, key), 0);
    ASSERT_EQ(offsetof(FDBMappedKeyValue, value), 12);
    ASSERT_EQ(offsetof(FDBMappedKeyValue, getRange), 24);
    ASSERT_EQ(offsetof(FDBMappedKeyValue, buffer), 80);
}

/* Run a shell command and return its output (to free), or NULL if it failed. */
static char *run(const char *cmd) {
    FILE *p = popen(cmd, "r");
    if (!p) return NULL;
    size_t cap = 1 << 16, len = 0;
    char *out = malloc(cap);
    size_t n;
    while (out && (n = fread(out + len, 1, cap - len - 1, p)) > 0) {
        len += n;
        if (len + 1 == cap) out = realloc(out, cap *= 2);
    }
    int st = pclose(p);
    if (!out) return NULL;
    out[len] = 0;
    if (st != 0) {
        free(out);
        return NULL;
    }
    return out;
}

TEST(fdbc_abi_1_2) {
    void *lib = dlopen(fdbt_lib_path(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) fail_msg("dlopen %s: %s", fdbt_lib_path(), dlerror());
    for (int i = 0; fdbt_all_symbols[i]; i++)
        if (!dlsym(lib, fdbt_all_symbols[i])) fail_msg("%s is not exported", fdbt_all_symbols[i]);
    ASSERT_NULL(dlsym(lib, "rl_db_open")); /* reclayer's own symbols stay private */
    ASSERT_NULL(dlsym(lib, "rl_txn_begin"));
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "nm -D --defined-only '%s' 2>/dev/null", fdbt_lib_path());
    char *syms = run(cmd);
    if (syms) {
        int n = 0;
        for (char *line = strtok(syms, "\n"); line; line = strtok(NULL, "\n")) {
            char *name = strrchr(line, ' ');
            name = name ? name + 1 : line;
            if (strncmp(name, "fdb_", 4)) fail_msg("exported symbol %s is not fdb_*", name);
            n++;
        }
        ASSERT_TRUE(n >= 80);
        free(syms);
    } else {
        printf("nm not available: export list checked through dlsym only\n");
    }
    snprintf(cmd, sizeof cmd, "objdump -p '%s' 2>/dev/null | grep SONAME", fdbt_lib_path());
    char *so = run(cmd);
    if (so) {
        ASSERT_NOT_NULL(strstr(so, "libfdb_c.so"));
        ASSERT_NULL(strstr(so, "libfdb_c.so."));
        free(so);
    }
}

static fdb_error_t put3(fdbt_client *c, FDBTransaction *tr, void *ud) {
    (void)ud;
    c->api.transaction_set(tr, (const uint8_t *)"abi/a", 5, (const uint8_t *)"1", 1);
    c->api.transaction_set(tr, (const uint8_t *)"abi/bb", 6, (const uint8_t *)"22", 2);
    c->api.transaction_set(tr, (const uint8_t *)"abi/ccc", 7, (const uint8_t *)"333", 3);
    return 0;
}

TEST(fdbc_abi_1_3) {
    start_once();
    FDBDatabase *db;
    ASSERT_OK(fdbt_open(&cl, "mem:", &db));
    ASSERT_OK(fdbt_run(&cl, db, put3, NULL, NULL));
    FDBTransaction *tr;
    ASSERT_OK(cl.api.database_create_transaction(db, &tr));
    FDBFuture *f = cl.api.transaction_get_range(tr, (const uint8_t *)"abi/", 4, 0, 1, (const uint8_t *)"abi0", 4, 0, 1,
                                                0, 0, FDB_STREAMING_MODE_WANT_ALL, 0, 0, 0);
    ASSERT_OK(fdbt_wait(&cl, f));
    const FDBKeyValue *kv;
    int n;
    fdb_bool_t more;
    ASSERT_OK(cl.api.future_get_keyvalue_array(f, &kv, &n, &more));
    ASSERT_EQ(n, 3);
    ASSERT_FALSE(more);
    const char *keys[] = {"abi/a", "abi/bb", "abi/ccc"}, *vals[] = {"1", "22", "333"};
    for (int i = 0; i < 3; i++) {
        ASSERT_MEM_EQ(kv[i].key, (size_t)kv[i].key_length, keys[i], strlen(keys[i]));
        ASSERT_MEM_EQ(kv[i].value, (size_t)kv[i].value_length, vals[i], strlen(vals[i]));
    }
    /* The raw bytes: key pointer at 0, key length at 8, value pointer at 12, length at 20. */
    const unsigned char *raw = (const unsigned char *)kv;
    int kl;
    memcpy(&kl, raw + 24 + 8, 4);
    ASSERT_EQ(kl, 6);
    cl.api.future_destroy(f);
    cl.api.transaction_destroy(tr);
    cl.api.database_destroy(db);
}

/* Tuple-encode a string element (0x02 ... 0x00, no NULs in s). */
static size_t tup_str(uint8_t *out, const char *s) {
    size_t n = strlen(s);
    out[0] = 0x02;
    memcpy(out + 1, s, n);
    out[n + 1] = 0;
    return n + 2;
}

/* Tuple-encode a small non-negative integer (0x15 n, or 0x14 for 0). */
static size_t tup_int(uint8_t *out, int v) {
    if (v == 0) {
        out[0] = 0x14;
        return 1;
    }
    out[0] = 0x15;
    out[1] = (uint8_t)v;
    return 2;
}

typedef struct {
    int n;
} idx_ctx;

/* Records ("rec", pk, part) and index entries ("idx", pk). */
static fdb_error_t put_index(fdbt_client *c, FDBTransaction *tr, void *ud) {
    idx_ctx *x = ud;
    uint8_t k[64];
    for (int pk = 1; pk <= x->n; pk++) {
        size_t l = tup_str(k, "idx");
        l += tup_int(k + l, pk);
        c->api.transaction_set(tr, k, (int)l, (const uint8_t *)"", 0);
        for (int part = 0; part < 2; part++) {
            size_t r = tup_str(k, "rec");
            r += tup_int(k + r, pk);
            r += tup_int(k + r, part);
            char v[16];
            int vl = snprintf(v, sizeof v, "v%d.%d", pk, part);
            c->api.transaction_set(tr, k, (int)r, (const uint8_t *)v, vl);
        }
    }
    return 0;
}

TEST(fdbc_abi_1_4) {
    start_once();
    FDBDatabase *db;
    ASSERT_OK(fdbt_open(&cl, "mem:", &db));
    idx_ctx x = {3};
    ASSERT_OK(fdbt_run(&cl, db, put_index, &x, NULL));
    uint8_t b[16], e[16], m[64];
    size_t bl = tup_str(b, "idx");
    memcpy(e, b, bl);
    e[bl - 1] = 0x01; /* strinc of the "idx" element's terminator */
    size_t ml = tup_str(m, "rec");
    ml += tup_str(m + ml, "{K[1]}");
    ml += tup_str(m + ml, "{...}");
    FDBTransaction *tr;
    ASSERT_OK(cl.api.database_create_transaction(db, &tr));
    FDBFuture *f = cl.api.transaction_get_mapped_range(tr, b, (int)bl, 0, 1, e, (int)bl, 0, 1, m, (int)ml, 0, 0,
                                                       FDB_STREAMING_MODE_WANT_ALL, 0, 0, 0);
    ASSERT_OK(fdbt_wait(&cl, f));
    const FDBMappedKeyValue *mkv;
    int n;
    fdb_bool_t more;
    ASSERT_OK(cl.api.future_get_mappedkeyvalue_array(f, &mkv, &n, &more));
    ASSERT_EQ(n, 3);
    ASSERT_FALSE(more);
    for (int i = 0; i < n; i++) {
        uint8_t want[32];
        size_t wl = tup_str(want, "idx");
        wl += tup_int(want + wl, i + 1);
        ASSERT_MEM_EQ(mkv[i].key.key, (size_t)mkv[i].key.key_length, want, wl);
        ASSERT_EQ(mkv[i].value.key_length, 0);
        uint8_t p[32];
        size_t pl = tup_str(p, "rec");
        pl += tup_int(p + pl, i + 1);
        ASSERT_MEM_EQ(mkv[i].getRange.begin.key.key, (size_t)mkv[i].getRange.begin.key.key_length, p, pl);
        ASSERT_EQ(mkv[i].getRange.begin.orEqual, 0);
        ASSERT_EQ(mkv[i].getRange.begin.offset, 1);
        ASSERT_EQ(mkv[i].getRange.end.key.key_length, (int)pl); /* strinc(P): same length */
        ASSERT_EQ(mkv[i].getRange.m_size, 2);
        for (int j = 0; j < 2; j++) {
            char v[16];
            int vl = snprintf(v, sizeof v, "v%d.%d", i + 1, j);
            ASSERT_MEM_EQ(mkv[i].getRange.data[j].value, (size_t)mkv[i].getRange.data[j].value_length, v, (size_t)vl);
        }
        ASSERT_EQ(mkv[i].buffer[0], 0);  /* the secondary range's more */
        ASSERT_EQ(mkv[i].buffer[24], 1); /* variant index: a range result */
    }
    cl.api.future_destroy(f);
    cl.api.transaction_destroy(tr);
    cl.api.database_destroy(db);
}

static int teardown(void **state) {
    (void)state;
    fdbt_stop(&cl);
    return 0;
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {T(fdbc_abi_1_1), T(fdbc_abi_1_2), T(fdbc_abi_1_3), T(fdbc_abi_1_4)};
    rl_test_init(argc, argv);
    return cmocka_run_group_tests_name(rl_test_group_name(argv[0]), tests, NULL, teardown);
}
