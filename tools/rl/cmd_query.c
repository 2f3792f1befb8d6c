/* cmd_query.c — `rl query`: scan an index of the Order store and fetch its records.
 *
 *   rl query --db URL [--store PREFIX] --index NAME [--eq V ...] [--ge V | --gt V]
 *            [--le V | --lt V] [--reverse] [--skip N] [--limit N] [--scan-limit N]
 *            [--byte-limit N] [--time-limit-ms N] [--fetch scan|remote|remote-fallback]
 *            [--orphans error|skip|return] [--continuation HEX] [--stats]
 *
 * Prints one JSON object per row (the record layer's record JSON; an orphan returned under
 * --orphans return prints {"orphan": true, "pk": ...}). With --stats, a last line
 * {"stats": {counters...}, "no_next_reason": "...", "continuation": "HEX" | null} follows; pass
 * that continuation back with --continuation to get the next page (skip applies to the first page
 * only). Values V are integers when they look like integers ([-]digits that fit 64 bits), else
 * strings. The scan runs in one read transaction. Exit codes: 0 done, 1 failure, 2 usage.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reclayer/query.h"
#include "record/record_int.h"

static void help(FILE *f) {
    fprintf(f,
            "usage: rl query --db URL [--store PREFIX] --index NAME [--eq V ...] [--ge V | --gt V]\n"
            "                [--le V | --lt V] [--reverse] [--skip N] [--limit N] [--scan-limit N]\n"
            "                [--byte-limit N] [--time-limit-ms N] [--fetch scan|remote|remote-fallback]\n"
            "                [--orphans error|skip|return] [--continuation HEX] [--stats]\n"
            "\n"
            "Scan index NAME of the Order store and print each row's record as one JSON line.\n"
            "--eq values form the equality prefix of the index values; --ge/--gt and --le/--lt\n"
            "bound the next value. V is an integer if it looks like one, else a string.\n"
            "--stats ends with a JSON line of counters, the end reason and the continuation (hex)\n"
            "to pass to --continuation for the next page (--skip applies to the first page only).\n");
}

/* Pack V as an integer if it is [-]digits fitting int64, else as a string. */
static void pack_value(rl_tuple_packer *pk, const char *v) {
    char *end = NULL;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    int digits = *v && (v[0] == '-' ? v[1] >= '0' && v[1] <= '9' : v[0] >= '0' && v[0] <= '9');
    if (digits && end && !*end && errno == 0) rl__tuple_pack_int(pk, (int64_t)x);
    else rl__tuple_pack_string(pk, v, strlen(v));
}

static int parse_int(const char *s, long long lo, long long *out) {
    char *end = NULL;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (!*s || *end || errno || x < lo || x > 2147483647LL * 1000000) return -1;
    *out = x;
    return 0;
}

static int unhex(const char *s, rl_buf *out) {
    size_t n = strlen(s);
    if (n % 2) return -1;
    for (size_t i = 0; i < n; i += 2) {
        int v = 0;
        for (int j = 0; j < 2; j++) {
            char ch = s[i + j];
            int d = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
                    : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10 : -1;
            if (d < 0) return -1;
            v = v * 16 + d;
        }
        rl__buf_append_byte(out, (uint8_t)v);
    }
    return rl__buf_error(out) ? -1 : 0;
}

static void print_stats(rl_cursor *c) {
    rl_query_counters k;
    const uint8_t *cb;
    size_t cl;
    rl_cursor_get_counters(c, &k);
    printf("{\"stats\": {\"index_entries_read\": %llu, \"rows_returned\": %llu, \"records_returned\": %llu, "
           "\"orphans\": %llu, \"reads_get\": %llu, \"reads_range\": %llu, \"reads_mapped_range\": %llu, "
           "\"mapped_range_requests\": %llu, \"record_loads\": %llu, \"secondary_local\": %llu, "
           "\"secondary_remote\": %llu, \"secondary_completions\": %llu, \"kv_bytes_received\": %llu, "
           "\"allocs\": %llu, \"alloc_bytes\": %llu, \"fallbacks\": %llu, \"fallback_error\": \"%s\"}, "
           "\"no_next_reason\": \"%s\", \"continuation\": ",
           (unsigned long long)k.index_entries_read, (unsigned long long)k.rows_returned,
           (unsigned long long)k.records_returned, (unsigned long long)k.orphans,
           (unsigned long long)k.reads_get, (unsigned long long)k.reads_range,
           (unsigned long long)k.reads_mapped_range, (unsigned long long)k.mapped_range_requests,
           (unsigned long long)k.record_loads, (unsigned long long)k.secondary_local,
           (unsigned long long)k.secondary_remote, (unsigned long long)k.secondary_completions,
           (unsigned long long)k.kv_bytes_received, (unsigned long long)k.allocs,
           (unsigned long long)k.alloc_bytes, (unsigned long long)k.fallbacks,
           k.fallback_error ? rl_error_name(k.fallback_error) : "",
           rl_no_next_reason_name(rl_cursor_no_next_reason(c)));
    if (rl_cursor_continuation(c, &cb, &cl) == RL_OK && cb) {
        putchar('"');
        for (size_t i = 0; i < cl; i++) printf("%02x", cb[i]);
        printf("\"}\n");
    } else {
        printf("null}\n");
    }
}

int rl_cmd_query(int argc, char **argv) {
    const char *url = NULL, *store = NULL, *index = NULL, *low = NULL, *high = NULL, *cont = NULL;
    int low_excl = 0, high_excl = 0, stats = 0, rc = 0, status = 1;
    rl_query_options o;
    rl_buf eq, lo, hi, cb, out;
    rl_tuple_packer pk;
    memset(&o, 0, sizeof o);
    o.size = sizeof o;
    rl__buf_init(&eq);
    rl__buf_init(&lo);
    rl__buf_init(&hi);
    rl__buf_init(&cb);
    rl__buf_init(&out);
    rl__tuple_packer_init(&pk, &eq);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long long n;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            help(stdout);
            status = 0;
            goto done;
        } else if (!strcmp(a, "--reverse")) {
            o.reverse = 1;
        } else if (!strcmp(a, "--stats")) {
            stats = 1;
        } else if (v && !strcmp(a, "--db")) {
            url = v, i++;
        } else if (v && !strcmp(a, "--store")) {
            store = v, i++;
        } else if (v && !strcmp(a, "--index")) {
            index = v, i++;
        } else if (v && !strcmp(a, "--eq")) {
            pack_value(&pk, v), i++;
        } else if (v && (!strcmp(a, "--ge") || !strcmp(a, "--gt")) && !low) {
            low = v, low_excl = a[3] == 't', i++;
        } else if (v && (!strcmp(a, "--le") || !strcmp(a, "--lt")) && !high) {
            high = v, high_excl = a[3] == 't', i++;
        } else if (v && !strcmp(a, "--continuation")) {
            cont = v, i++;
        } else if (v && !strcmp(a, "--fetch")) {
            if (!strcmp(v, "scan")) o.fetch = RL_FETCH_SCAN_AND_FETCH;
            else if (!strcmp(v, "remote")) o.fetch = RL_FETCH_USE_REMOTE_FETCH;
            else if (!strcmp(v, "remote-fallback")) o.fetch = RL_FETCH_USE_REMOTE_FETCH_WITH_FALLBACK;
            else if (!strcmp(v, "adaptive")) o.fetch = RL_FETCH_ADAPTIVE;
            else goto usage;
            i++;
        } else if (v && !strcmp(a, "--orphans")) {
            if (!strcmp(v, "error")) o.orphans = RL_ORPHAN_ERROR;
            else if (!strcmp(v, "skip")) o.orphans = RL_ORPHAN_SKIP;
            else if (!strcmp(v, "return")) o.orphans = RL_ORPHAN_RETURN;
            else goto usage;
            i++;
        } else if (v && !strcmp(a, "--skip") && !parse_int(v, 0, &n) && n <= 2147483647) {
            o.skip = (int)n, i++;
        } else if (v && !strcmp(a, "--limit") && !parse_int(v, 0, &n) && n <= 2147483647) {
            o.limit = (int)n, i++;
        } else if (v && !strcmp(a, "--scan-limit") && !parse_int(v, 0, &n) && n <= 2147483647) {
            o.scan_limit = (int)n, i++;
        } else if (v && !strcmp(a, "--byte-limit") && !parse_int(v, 0, &n)) {
            o.byte_limit = n, i++;
        } else if (v && !strcmp(a, "--time-limit-ms") && !parse_int(v, 0, &n)) {
            o.time_limit_ms = n, i++;
        } else {
            fprintf(stderr, "rl query: unexpected or invalid argument '%s'\n", a);
            goto usage;
        }
    }
    if (!url || !index) goto usage;
    if (eq.len) o.eq = eq.data, o.eq_len = eq.len;
    if (low) {
        rl__tuple_packer_init(&pk, &lo);
        pack_value(&pk, low);
        o.low = lo.data, o.low_len = lo.len, o.low_exclusive = low_excl;
    }
    if (high) {
        rl__tuple_packer_init(&pk, &hi);
        pack_value(&pk, high);
        o.high = hi.data, o.high_len = hi.len, o.high_exclusive = high_excl;
    }
    if (cont && unhex(cont, &cb)) {
        fprintf(stderr, "rl query: --continuation must be hex digits\n");
        goto usage;
    }
    if (cont) o.continuation = cb.data, o.continuation_len = cb.len;
    if (rl__buf_error(&eq) || rl__buf_error(&lo) || rl__buf_error(&hi)) {
        fprintf(stderr, "rl query: out of memory\n");
        goto done;
    }
    {
        rl__tool t;
        rl_txn *txn = NULL;
        rl_cursor *c = NULL;
        const rl_query_row *row;
        if ((rc = rl__tool_open(&t, url, store, 0, 1))) {
            fprintf(stderr, "rl query: %s: %s\n", rl_error_name(rc), rl_record_errmsg());
            goto done;
        }
        rc = rl_txn_begin(t.db, &txn);
        if (!rc && (rc = rl_cursor_open(t.s, txn, index, &o, &c)))
            fprintf(stderr, "rl query: %s: %s\n", rl_error_name(rc), rl_record_errmsg());
        while (!rc && (rc = rl_cursor_next(c, &row)) == RL_OK && row) {
            rl__buf_reset(&out);
            if (row->record) {
                rc = rl__tool_record_json(row->record, &out);
            } else {
                rl__buf_append_str(&out, "{\"orphan\": true, \"pk\": ");
                rl_buf p;
                rl__buf_init(&p);
                rl__tuple_print(row->pk, row->pk_len, &p);
                rl__buf_append_str(&out, "\"");
                for (size_t i = 0; i < p.len; i++) {
                    if (p.data[i] == '"' || p.data[i] == '\\') rl__buf_append_byte(&out, '\\');
                    rl__buf_append_byte(&out, p.data[i]);
                }
                rl__buf_append_str(&out, "\"}");
                rl__buf_release(&p);
                rc = rl__buf_error(&out);
            }
            if (!rc) printf("%s\n", (const char *)out.data);
        }
        if (c && rc) {
            fprintf(stderr, "rl query: %s: %s %s\n", rl_error_name(rc), rl_error_message(rc), rl_cursor_errmsg(c));
            if (rc == RL_E_FALLBACK_FAILED)
                fprintf(stderr, "rl query: cause: %s\n", rl_error_name(rl_cursor_error_cause(c)));
        } else if (rc && c == NULL && txn == NULL) {
            fprintf(stderr, "rl query: %s\n", rl_error_name(rc));
        }
        if (!rc && stats) print_stats(c);
        if (!rc) status = 0;
        rl_cursor_free(c);
        rl_txn_free(txn);
        rl__tool_close(&t);
    }
    goto done;
usage:
    help(stderr);
    status = 2;
done:
    rl__buf_release(&eq);
    rl__buf_release(&lo);
    rl__buf_release(&hi);
    rl__buf_release(&cb);
    rl__buf_release(&out);
    return status;
}
