/* kv_hello.c — reclayer's key-value API in one page: open a database, write a key made of a
 * tuple in a transaction, read it back in another, print both with the library's version.
 *
 *   cc kv_hello.c $(pkg-config --cflags --libs reclayer) -o kv_hello
 *   mkdir -p /tmp/hello && ./kv_hello file:/tmp/hello
 *
 * The URL may be any reclayer URL: file:DIR (durable, DIR must exist), mem:, cluster:FILE. */
#include <stdio.h>
#include <string.h>

#include <reclayer/kv.h>
#include <reclayer/tuple.h>
#include <reclayer/version.h>

typedef struct {
    const uint8_t *key;
    size_t key_len;
    char value[64];
} ctx;

/* The body of a transaction: rl_db_run retries it on conflicts and retryable errors. */
static int write_fn(rl_txn *txn, void *ud) {
    ctx *c = ud;
    return rl_txn_set(txn, c->key, c->key_len, "hello, reclayer", strlen("hello, reclayer"));
}

static int read_fn(rl_txn *txn, void *ud) {
    ctx *c = ud;
    rl_future *f = rl_txn_get(txn, c->key, c->key_len, 0);
    int rc = rl_future_wait(f), present = 0, len = 0;
    const uint8_t *v = NULL;
    if (rc == RL_OK) rc = rl_future_get_value(f, &present, &v, &len);
    if (rc == RL_OK) snprintf(c->value, sizeof c->value, "%.*s", present ? len : 0, present ? (const char *)v : "");
    rl_future_free(f);
    return rc;
}

int main(int argc, char **argv) {
    const char *url = argc > 1 ? argv[1] : "mem:";
    printf("%s (headers %s)\n", rl_version_string(), RL_VERSION);
    rl_db *db = NULL;
    int rc = rl_db_open(url, NULL, &db);
    if (rc != RL_OK) {
        fprintf(stderr, "cannot open %s: %s: %s\n", url, rl_error_name(rc), rl_last_error_detail());
        return 1;
    }
    rl_tuple_builder *b = NULL;
    ctx c = {0};
    rc = rl_tuple_builder_new(&b);
    if (rc == RL_OK) {
        rl_tuple_add_string(b, "greeting", 8);
        rl_tuple_add_int(b, 1);
        rc = rl_tuple_builder_result(b, &c.key, &c.key_len);
    }
    if (rc == RL_OK) rc = rl_db_run(db, write_fn, &c);
    if (rc == RL_OK) rc = rl_db_run(db, read_fn, &c);
    if (rc == RL_OK) {
        char *printed = NULL;
        rc = rl_tuple_print(c.key, c.key_len, &printed);
        if (rc == RL_OK) printf("%s = %s\n", printed, c.value);
        rl_free(printed);
    }
    if (rc != RL_OK) fprintf(stderr, "kv_hello: %s (%d): %s\n", rl_error_name(rc), rc, rl_error_message(rc));
    rl_tuple_builder_free(b);
    rl_db_close(db);
    return rc == RL_OK ? 0 : 1;
}
