/* tool.c — what the record commands of `rl` (load, get, check, inject-defect, query) share, kept
 * in the library so tests reach it: the --store PREFIX syntax, opening the database and the Order
 * store (read-only for the commands that only read), the Orders `rl load` writes, and rendering
 * a record as JSON through its descriptor.
 *
 * --store PREFIX is a JSON array of strings and integers, packed as a FoundationDB tuple:
 * '["bench","orders"]' (the default, RL__TOOL_DEFAULT_STORE) is the prefix ("bench", "orders").
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "base/alloc.h"
#include "base/log.h"
#include "order.pb-c.h"
#include "record/layout.h"
#include "app/tool.h"

int rl__tool_store_prefix(const char *json, rl_buf *out, rl__errdetail *err) {
    json_error_t jerr;
    json_t *a = json_loads(json, 0, &jerr);
    int rc = RL_OK;
    rl__tuple_packer pk;
    if (!a || !json_is_array(a) || json_array_size(a) == 0) {
        rl__errdetail_set(
            err, "--store must be a non-empty JSON array of strings and integers, e.g. '[\"bench\",\"orders\"]'");
        rc = RL_E_INVALID_ARGUMENT;
        goto done;
    }
    rl__tuple_packer_init(&pk, out);
    for (size_t i = 0; i < json_array_size(a); i++) {
        json_t *e = json_array_get(a, i);
        if (json_is_string(e)) {
            rl__tuple_pack_string(&pk, json_string_value(e), json_string_length(e));
        } else if (json_is_integer(e)) {
            rl__tuple_pack_int(&pk, (int64_t)json_integer_value(e));
        } else {
            rl__errdetail_set(err, "--store element %zu is neither a string nor an integer", i);
            rc = RL_E_INVALID_ARGUMENT;
            goto done;
        }
    }
    rc = rl__buf_error(out);
done:
    json_decref(a);
    return rc;
}

typedef struct {
    rl_store *s;
    int must_exist;
    int exists;
} open_ctx;

static int open_fn(rl_txn *txn, void *ud) {
    open_ctx *c = ud;
    rl_buf k;
    rl__tuple_packer pk;
    int rc, present = 0, vlen;
    const uint8_t *v;
    rl__buf_init(&k);
    rl__store_key(c->s, RL__KS_STORE_INFO, &k, &pk);
    rl_future *f = rl_txn_get(txn, k.data, k.len, 0);
    rc = rl_future_wait(f);
    if (!rc) rc = rl_future_get_value(f, &present, &v, &vlen);
    rl_future_free(f);
    rl__buf_release(&k);
    if (rc) return rc;
    c->exists = present;
    if (!present && c->must_exist) return RL_OK;
    return rl_store_open(c->s, txn);
}

/* The wait report of the rl commands (rl__tool_db_options): one line on stderr. */
static void report_wait(const char *line, void *ud) {
    const rl__tool_wait *w = ud;
    if (w->timeout_ms <= 0) fprintf(stderr, "%s: %s (no timeout: --timeout 0)\n", w->prog, line);
    else
        fprintf(stderr, "%s: %s (gives up %.1f s after the %s began: --timeout)\n", w->prog, line,
                (double)w->timeout_ms / 1000.0, w->pings ? "ping" : "transaction");
}

void rl__tool_db_options(rl_db_options *o, const rl__tool_wait *w) {
    if (!w) return;
    o->transaction_timeout_ms = w->pings ? 0 : w->timeout_ms;
    o->wait_report_ms = RL__TOOL_REPORT_MS;
    o->wait_report = report_wait;
    o->wait_report_ud = (void *)w;
}

int rl__tool_open(rl__tool *t, const char *url, const char *store_json, uint32_t create_flags, unsigned open_flags) {
    return rl__tool_open_with(t, url, store_json, create_flags, open_flags, NULL);
}

int rl__tool_open_with(rl__tool *t, const char *url, const char *store_json, uint32_t create_flags, unsigned open_flags,
                       const rl__tool_wait *w) {
    int rc;
    int must_exist = (open_flags & (RL__TOOL_MUST_EXIST | RL__TOOL_READ_ONLY)) != 0;
    rl_buf prefix;
    memset(t, 0, sizeof *t);
    rl__errdetail_init(&t->err, NULL);
    rl__buf_init(&prefix);
    if ((rc = rl__tool_store_prefix(store_json ? store_json : RL__TOOL_DEFAULT_STORE, &prefix, &t->err))) goto fail;
    rl_db_options dbo;
    memset(&dbo, 0, sizeof dbo);
    dbo.size = sizeof dbo;
    dbo.read_only = (open_flags & RL__TOOL_READ_ONLY) != 0;
    rl__tool_db_options(&dbo, w);
    if ((rc = rl_db_open(url, &dbo, &t->db))) {
        rl__errdetail_set(&t->err, "cannot open database %s: %s %s", url, rl_error_name(rc), rl_last_error_detail());
        goto fail;
    }
    if ((rc = rl__order_metadata(&t->md))) {
        rl__errdetail_set(&t->err, "cannot build the Order metadata: %s", rl_error_message(rc));
        goto fail;
    }
    if ((rc = rl_store_new(t->md, prefix.data, prefix.len, create_flags, &t->s))) {
        rl__errdetail_copy(&t->err, rl_metadata_errmsg(t->md));
        goto fail;
    }
    open_ctx c = {t->s, must_exist, 0};
    if ((rc = rl_db_run(t->db, open_fn, &c))) {
        if (rl_store_errmsg(t->s)[0]) rl__errdetail_copy(&t->err, rl_store_errmsg(t->s));
        else rl__errdetail_set(&t->err, "cannot open the store: %s", rl_error_message(rc));
        goto fail;
    }
    if (!c.exists && must_exist) {
        rl__errdetail_set(&t->err, "no record store at %s (run `rl load` first)",
                          store_json ? store_json : RL__TOOL_DEFAULT_STORE);
        rc = RL_E_NOT_FOUND;
        goto fail;
    }
    rl__buf_release(&prefix);
    return RL_OK;
fail:
    rl__buf_release(&prefix);
    rl__tool_close(t);
    return rc;
}

void rl__tool_close(rl__tool *t) {
    rl_store_free(t->s);
    rl_metadata_free(t->md);
    rl_db_close(t->db);
    t->s = NULL;
    t->md = NULL;
    t->db = NULL; /* t->err stays: it says why rl__tool_open failed */
}

static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

int64_t rl__tool_order_price(uint64_t seed, int64_t id) {
    uint64_t st = seed ^ ((uint64_t)id * 0x2545f4914f6cdd1dull);
    return (int64_t)(splitmix(&st) % 1000);
}

int rl__tool_save_orders(rl_store *s, rl_txn *txn, int64_t first, int64_t n, uint64_t seed, const uint8_t *pad,
                         size_t pad_len) {
    for (int64_t id = first; id < first + n; id++) {
        uint64_t st = seed ^ ((uint64_t)id * 0x2545f4914f6cdd1dull);
        char customer[32];
        Reclayer__Order o = RECLAYER__ORDER__INIT;
        o.has_order_id = 1, o.order_id = id;
        o.has_price = 1, o.price = (int64_t)(splitmix(&st) % 1000); /* rl__tool_order_price */
        o.has_quantity = 1, o.quantity = (int32_t)(1 + splitmix(&st) % 10);
        snprintf(customer, sizeof customer, "customer-%03d", (int)(id % 100));
        o.customer = customer;
        if (pad_len) o.has_padding = 1, o.padding.data = (uint8_t *)pad, o.padding.len = pad_len;
        int rc = rl_store_save(s, txn, &o.base, NULL);
        if (rc) return rc;
    }
    return RL_OK;
}

int rl__tool_message_json(const ProtobufCMessage *m, rl_buf *out) {
    const ProtobufCMessageDescriptor *d = m->descriptor;
    int first = 1;
    rl__buf_append_byte(out, '{');
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *fd = &d->fields[i];
        if (fd->label == PROTOBUF_C_LABEL_REPEATED || fd->type == PROTOBUF_C_TYPE_MESSAGE) {
            if (fd->label == PROTOBUF_C_LABEL_REPEATED) {
                size_t n = *(const size_t *)((const char *)m + fd->quantifier_offset);
                if (!first) rl__buf_append_byte(out, ',');
                first = 0;
                rl__buf_append_json_str(out, fd->name, strlen(fd->name));
                rl__buf_printf(out, ":{\"repeated\":%zu}", n);
            }
            continue;
        }
        /* Scalars through the tuple packer's presence rules: pack to learn presence. */
        rl_buf tmp;
        rl__tuple_packer pk;
        int present;
        rl__buf_init(&tmp);
        rl__tuple_packer_init(&pk, &tmp);
        rl__md_pack_field(&pk, m, fd, &present);
        rl__buf_release(&tmp);
        if (!present) continue;
        if (!first) rl__buf_append_byte(out, ',');
        first = 0;
        rl__buf_append_json_str(out, fd->name, strlen(fd->name));
        rl__buf_append_byte(out, ':');
        const void *v = (const char *)m + fd->offset;
        switch (fd->type) {
        case PROTOBUF_C_TYPE_INT32:
        case PROTOBUF_C_TYPE_SINT32:
        case PROTOBUF_C_TYPE_SFIXED32: rl__buf_printf(out, "%d", *(const int32_t *)v); break;
        case PROTOBUF_C_TYPE_ENUM: rl__buf_printf(out, "%d", *(const int *)v); break;
        case PROTOBUF_C_TYPE_INT64:
        case PROTOBUF_C_TYPE_SINT64:
        case PROTOBUF_C_TYPE_SFIXED64: rl__buf_printf(out, "%lld", (long long)*(const int64_t *)v); break;
        case PROTOBUF_C_TYPE_UINT32:
        case PROTOBUF_C_TYPE_FIXED32: rl__buf_printf(out, "%u", *(const uint32_t *)v); break;
        case PROTOBUF_C_TYPE_UINT64:
        case PROTOBUF_C_TYPE_FIXED64: rl__buf_printf(out, "%llu", (unsigned long long)*(const uint64_t *)v); break;
        case PROTOBUF_C_TYPE_BOOL: rl__buf_append_str(out, *(const protobuf_c_boolean *)v ? "true" : "false"); break;
        case PROTOBUF_C_TYPE_FLOAT: rl__buf_printf(out, "%.9g", (double)*(const float *)v); break;
        case PROTOBUF_C_TYPE_DOUBLE: rl__buf_printf(out, "%.17g", *(const double *)v); break;
        case PROTOBUF_C_TYPE_STRING: {
            const char *s = *(char *const *)v;
            rl__buf_append_json_str(out, s, strlen(s));
            break;
        }
        case PROTOBUF_C_TYPE_BYTES: {
            const ProtobufCBinaryData *b = v;
            rl__buf_append_byte(out, '"');
            rl__buf_append_hex(out, b->data, b->len);
            rl__buf_append_byte(out, '"');
            break;
        }
        default: rl__buf_append_str(out, "null"); break;
        }
    }
    rl__buf_append_byte(out, '}');
    return rl__buf_error(out);
}

int rl__tool_record_json(const rl_record *r, rl_buf *out) {
    rl__buf_append_str(out, "{\"type\":");
    rl__buf_append_json_str(out, r->type->name, strlen(r->type->name));
    rl__buf_append_str(out, ",\"pk\":");
    rl_buf pk;
    rl__buf_init(&pk);
    rl__tuple_print(r->pk, r->pk_len, &pk, NULL);
    rl__buf_append_json_str(out, (const char *)pk.data, pk.len);
    rl__buf_release(&pk);
    rl__buf_append_str(out, ",\"version\":");
    if (r->has_version) {
        rl__buf_append_byte(out, '"');
        rl__buf_append_hex(out, r->version, 12);
        rl__buf_append_byte(out, '"');
    } else {
        rl__buf_append_str(out, "null");
    }
    rl__buf_printf(out, ",\"stored_bytes\":%zu,\"chunks\":%d,\"record\":", r->stored_len, r->n_chunks);
    int rc = rl__tool_message_json(r->msg, out);
    rl__buf_append_byte(out, '}');
    return rc ? rc : rl__buf_error(out);
}

/* ---- rl placement's ranges ------------------------------------------------------------------ */

/* Append strinc(b) semantics for a tuple prefix: the prefix followed by 0xff bytes sorts below
 * prefix + 1 in its last byte; a packed tuple prefix never ends in 0xff, so +1 is enough. */
static void prefix_end(const rl_buf *b, rl_buf *e) {
    rl__buf_reset(e);
    rl__buf_append(e, b->data, b->len);
    if (e->len && !rl__buf_error(e)) e->data[e->len - 1]++;
}

int rl__tool_placement_ranges(const rl_store *s, const char *index, rl_buf *rec_b, rl_buf *rec_e, rl_buf *idx_b,
                              rl_buf *idx_e) {
    rl__index_layout lay;
    if (!index || rl__md_index_layout(rl_store_metadata(s), index, &lay) != RL_OK) {
        rl__errdetail_set(rl__store_err(s), "the store has no index named %s", index ? index : "(none)");
        return RL_E_NOT_FOUND;
    }
    rl__buf_reset(rec_b);
    rl__store_records_prefix(s, rec_b);
    prefix_end(rec_b, rec_e);
    rl__buf_reset(idx_b);
    rl__store_index_prefix(s, lay.subspace_key, idx_b);
    prefix_end(idx_b, idx_e);
    return rl__buf_error(rec_b) || rl__buf_error(rec_e) || rl__buf_error(idx_b) || rl__buf_error(idx_e)
               ? RL_E_OUT_OF_MEMORY
               : RL_OK;
}

int rl__tool_index_entry_record(const rl_store *s, const char *index, const uint8_t *key, size_t len, rl_buf *out) {
    rl__index_layout lay;
    if (!index || rl__md_index_layout(rl_store_metadata(s), index, &lay) != RL_OK) return RL_E_NOT_FOUND;
    rl_buf rb, re, b, e;
    rl__buf_init(&rb);
    rl__buf_init(&re);
    rl__buf_init(&b);
    rl__buf_init(&e);
    int rc = rl__tool_placement_ranges(s, index, &rb, &re, &b, &e);
    rl__buf_release(&rb);
    rl__buf_release(&re);
    rl__buf_release(&e);
    if (rc != RL_OK || len < b.len || memcmp(key, b.data, b.len) != 0) {
        rl__buf_release(&b);
        return rc != RL_OK ? rc : RL_CORRUPT(RL_E_CORRUPT_DATA);
    }
    rl__tuple_iter it;
    rl__tuple_elem el[64];
    int n = 0;
    rl__tuple_iter_init(&it, key + b.len, len - b.len);
    while (n < 64 && rl__tuple_iter_next(&it, &el[n]) == RL_OK) n++;
    rl__buf_release(&b);
    rl__buf_reset(out);
    rl__store_records_prefix(s, out);
    int appended = lay.n_fields;
    for (int j = 0; j < lay.n_pk; j++) {
        int pos = lay.pk_pos[j] >= 0 ? lay.pk_pos[j] : appended++;
        if (pos >= n) return RL_CORRUPT(RL_E_CORRUPT_DATA);
        rl__buf_append(out, el[pos].raw, el[pos].raw_len);
    }
    return rl__buf_error(out);
}

int rl__tool_retry(rl_txn *t, int rc) {
    rl_future *e = rl_txn_on_error(t, rc);
    int rc2 = rl_future_wait(e);
    rl_future_free(e);
    return rc2;
}

/* ---- Which database (tool.h) ------------------------------------------------------------------ */

int rl__tool_db_find(const char *given, rl__tool_db *out, rl_buf *msg) {
    rl__buf_reset(msg);
    memset(out, 0, sizeof *out);
    const char *env = getenv(RL__TOOL_DB_ENV);
    struct stat st;
    if (given) {
        out->url = given;
        out->source = "--db";
    } else if (env && *env) {
        out->url = env;
        out->source = RL__TOOL_DB_ENV;
    } else if (stat(RL__TOOL_DB_CLUSTER_FILE, &st) == 0 && S_ISREG(st.st_mode)) {
        char cwd[PATH_MAX];
        int n = getcwd(cwd, sizeof cwd) ? snprintf(out->buf, sizeof out->buf, "cluster:%s/%s",
                                                   strcmp(cwd, "/") ? cwd : "", RL__TOOL_DB_CLUSTER_FILE)
                                        : -1;
        if (n < 0 || (size_t)n >= sizeof out->buf) {
            rl__buf_printf(msg, "the current directory holds %s, but its path is too long to use: give --db",
                           RL__TOOL_DB_CLUSTER_FILE);
            return RL_E_USAGE;
        }
        out->url = out->buf;
        out->source = "./" RL__TOOL_DB_CLUSTER_FILE;
    } else {
        rl__buf_printf(msg,
                       "no database: give --db URL, or set the environment variable %s=URL, or run in a directory "
                       "holding the cluster file %s (rl cluster up writes DIR/%s)",
                       RL__TOOL_DB_ENV, RL__TOOL_DB_CLUSTER_FILE, RL__TOOL_DB_CLUSTER_FILE);
        return RL_E_USAGE;
    }
    out->is_mem = !strncmp(out->url, "mem:", 4);
    return RL_OK;
}

int rl__tool_db_choose(const rl__args_cmd *cmd, const char *given, rl__tool_db *out, int *out_code) {
    rl_buf msg;
    rl__buf_init(&msg);
    int rc = rl__tool_db_find(given, out, &msg);
    if (rc == RL_E_USAGE) {
        *out_code = rl__args_usage_error(cmd, "%s", (const char *)msg.data);
    } else if (out->is_mem) {
        fprintf(stderr, "%s: note: mem: is an empty in-memory database; what is written to it is discarded at exit\n",
                cmd->name);
    }
    rl__buf_release(&msg);
    return rc != RL_OK;
}
