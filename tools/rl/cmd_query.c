/* cmd_query.c — `rl query`: scan an index of the Order store and fetch its records.
 *
 *   rl query [--db URL] [--store PREFIX] --index NAME [--eq V ...] [--ge V | --gt V]
 *            [--le V | --lt V] [--reverse] [--skip N] [--limit N] [--scan-limit N]
 *            [--byte-limit N] [--time-limit-ms N] [--fetch scan|remote|remote-fallback|adaptive]
 *            [--secondary default|individual|grouped] [--keep-index-entries] [--orphans error|skip|return]
 *            [--continuation HEX] [--stats] [--trace] [--explain] [--timeout S]
 *
 * Prints one JSON object per row (the record layer's record JSON; an orphan returned under
 * --orphans return prints {"orphan": true, "pk": ...}). With --stats, a last line
 * {"stats": {counters..., "net": {...}}, "no_next_reason": "...", "continuation": "HEX" | null}
 * follows; pass that continuation back with --continuation to get the next page (skip applies to
 * the first page only). "net" groups the tracing counters (docs/design.md §7): requests per link
 * and per type, bytes per link, round trips (total, storage-to-storage, critical) and waits; all 0
 * on embedded databases. With --trace, after the rows and before the stats line, one line per
 * request of the query: {"trace": {"start_us", "type", "server_id", "address", "port", "host",
 * "link", "bytes_sent", "bytes_received", "latency_us", "error", and for get_mapped_range the
 * server's "secondaries_local", "secondaries_remote", "s2s_requests", "s2s_round_trips",
 * "s2s_peers", "s2s_bytes_sent", "s2s_bytes_received", "server_us", and when it read from other
 * servers "s2s_by_peer": [{"server_id", "requests", "items", "bytes_sent", "bytes_received"}]}},
 * in start order. The stats' "index_bytes_omitted" counts the index bytes remote fetch's mapped
 * reads left out (the cursor rebuilt those entries from their records; --keep-index-entries turns
 * that off), "index_keys_read_back" the omitted entries it read from the index instead, and
 * "entries_early" the rows remote fetch gave while their page was still streaming in. With --explain (--fetch adaptive), after the rows and before the trace, one line
 * per page of the scan: {"explain": "page N: adaptive: <inputs>; <both estimates> -> <method>
 * (<why>)"} (rl_cursor_explain); the stats line's "adaptive" object counts the pages run with
 * each method and the explorations. Values V are integers when they look like integers ([-]digits that fit 64 bits), else
 * strings. The scan runs in one read transaction on the database opened read-only. A request
 * waiting for a server is reported on stderr after 3 s, and the transaction gives up after
 * --timeout seconds (default 30) with transaction_timed_out (app/tool.h, rl__tool_wait). Exit
 * codes: 0 done, 1 failure, 2 usage.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/args.h"
#include "reclayer/query.h"
#include "app/tool.h"
#include "reclayer/tuple.h"

/* Pack V as an integer if it is [-]digits fitting int64, else as a string. */
static void pack_value(rl_tuple_builder *b, const char *v) {
    char *end = NULL;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    int digits = *v && (v[0] == '-' ? v[1] >= '0' && v[1] <= '9' : v[0] >= '0' && v[0] <= '9');
    if (digits && end && !*end && errno == 0) rl_tuple_add_int(b, (int64_t)x);
    else rl_tuple_add_string(b, v, strlen(v));
}

#define U(x) ((unsigned long long)(x))

static void print_stats(rl_cursor *c) {
    rl_query_counters k;
    const uint8_t *cb;
    size_t cl;
    rl_cursor_get_counters(c, &k);
    printf("{\"stats\": {\"index_entries_read\": %llu, \"rows_returned\": %llu, \"records_returned\": %llu, "
           "\"orphans\": %llu, \"reads_get\": %llu, \"reads_range\": %llu, \"reads_mapped_range\": %llu, "
           "\"mapped_range_requests\": %llu, \"record_loads\": %llu, \"secondary_local\": %llu, "
           "\"secondary_remote\": %llu, \"secondary_completions\": %llu, \"kv_bytes_received\": %llu, "
           "\"allocs\": %llu, \"alloc_bytes\": %llu, \"fallbacks\": %llu, \"fallback_error\": \"%s\", ",
           U(k.index_entries_read), U(k.rows_returned), U(k.records_returned), U(k.orphans), U(k.reads_get),
           U(k.reads_range), U(k.reads_mapped_range), U(k.mapped_range_requests), U(k.record_loads),
           U(k.secondary_local), U(k.secondary_remote), U(k.secondary_completions), U(k.kv_bytes_received), U(k.allocs),
           U(k.alloc_bytes), U(k.fallbacks), k.fallback_error ? rl_error_name(k.fallback_error) : "");
    printf("\"index_bytes_omitted\": %llu, \"index_keys_read_back\": %llu, \"entries_early\": %llu, ",
           U(k.index_bytes_omitted), U(k.index_keys_read_back), U(k.entries_early));
    printf("\"adaptive\": {\"pages_scan_and_fetch\": %llu, \"pages_remote_fetch\": %llu, \"explorations\": %llu}, ",
           U(k.pages_scan_and_fetch), U(k.pages_remote_fetch), U(k.adaptive_explorations));
    printf("\"net\": {\"requests\": {\"total\": %llu, \"by_link\": {\"client_storage\": %llu, "
           "\"client_coordinator\": %llu, \"storage_storage\": %llu}, \"by_type\": {\"get\": %llu, "
           "\"get_key\": %llu, \"get_range\": %llu, \"get_mapped_range\": %llu, \"get_read_version\": %llu, "
           "\"get_multi\": %llu}}, ",
           U(k.requests), U(k.requests_client_storage), U(k.requests_client_coordinator), U(k.requests_storage_storage),
           U(k.requests_get), U(k.requests_get_key), U(k.requests_get_range), U(k.requests_get_mapped_range),
           U(k.requests_get_read_version), U(k.requests_get_multi));
    printf("\"bytes\": {\"client_storage\": {\"sent\": %llu, \"received\": %llu}, \"client_coordinator\": "
           "{\"sent\": %llu, \"received\": %llu}, \"storage_storage\": {\"sent\": %llu, \"received\": %llu}}, ",
           U(k.bytes_sent_client_storage), U(k.bytes_received_client_storage), U(k.bytes_sent_client_coordinator),
           U(k.bytes_received_client_coordinator), U(k.bytes_sent_storage_storage),
           U(k.bytes_received_storage_storage));
    printf("\"round_trips\": {\"total\": %llu, \"storage_storage\": %llu, \"critical\": %llu}, "
           "\"waits\": %llu, \"s2s_peers_max\": %llu}}, \"no_next_reason\": \"%s\", \"continuation\": ",
           U(k.round_trips), U(k.s2s_round_trips), U(k.critical_round_trips), U(k.waits), U(k.s2s_peers_max),
           rl_no_next_reason_name(rl_cursor_no_next_reason(c)));
    if (rl_cursor_continuation(c, &cb, &cl) == RL_OK && cb) {
        putchar('"');
        for (size_t i = 0; i < cl; i++) printf("%02x", cb[i]);
        printf("\"}\n");
    } else {
        printf("null}\n");
    }
}

/* --explain: one {"explain": "..."} line per line of rl_cursor_explain (JSON-escaped). */
static void print_explain(rl_cursor *c) {
    const char *p = rl_cursor_explain(c);
    while (*p) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        fputs("{\"explain\": \"", stdout);
        for (size_t i = 0; i < n; i++) {
            unsigned char ch = (unsigned char)p[i];
            if (ch == '"' || ch == '\\') printf("\\%c", ch);
            else if (ch < 0x20) printf("\\u%04x", ch);
            else putchar(ch);
        }
        fputs("\"}\n", stdout);
        p += n + (nl ? 1 : 0);
    }
}

/* One JSON line per traced request (--trace), in start order. Host labels and addresses are
 * printable ASCII (the shard map checks them); anything else is replaced by '?'. */
static void print_trace(rl_cursor *c) {
    const rl_query_trace_event *ev;
    size_t n;
    rl_cursor_get_trace(c, &ev, &n);
    for (size_t i = 0; i < n; i++) {
        const rl_query_trace_event *e = &ev[i];
        char host[sizeof e->host];
        for (size_t j = 0; j < sizeof host; j++) {
            char ch = e->host[j];
            host[j] = ch && (ch < 0x20 || ch > 0x7e || ch == '"' || ch == '\\') ? '?' : ch;
            if (!ch) break;
        }
        host[sizeof host - 1] = 0;
        printf("{\"trace\": {\"start_us\": %.1f, \"type\": \"%s\", \"server_id\": %u, \"address\": \"%s\", "
               "\"port\": %u, \"host\": \"%s\", \"link\": \"%s\", \"bytes_sent\": %llu, \"bytes_received\": %llu, "
               "\"latency_us\": %.1f, \"error\": \"%s\"",
               (double)e->start_ns / 1e3, e->type, e->server_id, e->address, e->port, host, e->link, U(e->bytes_sent),
               U(e->bytes_received), (double)e->latency_ns / 1e3, e->error ? rl_error_name(e->error) : "");
        if (strcmp(e->type, "get_mapped_range") == 0)
            printf(", \"secondaries_local\": %u, \"secondaries_remote\": %u, \"s2s_requests\": %u, "
                   "\"s2s_round_trips\": %u, \"s2s_peers\": %u, \"s2s_bytes_sent\": %llu, "
                   "\"s2s_bytes_received\": %llu, \"server_us\": %.1f",
                   e->secondaries_local, e->secondaries_remote, e->s2s_requests, e->s2s_round_trips, e->s2s_peers,
                   U(e->s2s_bytes_sent), U(e->s2s_bytes_received), (double)e->server_ns / 1e3);
        if (e->n_s2s_by_peer) {
            printf(", \"s2s_by_peer\": [");
            for (size_t j = 0; j < e->n_s2s_by_peer; j++) {
                const rl_query_s2s_peer *p = &e->s2s_by_peer[j];
                printf("%s{\"server_id\": %u, \"requests\": %u, \"items\": %u, \"bytes_sent\": %llu, "
                       "\"bytes_received\": %llu}",
                       j ? ", " : "", p->server_id, p->requests, p->items, U(p->bytes_sent), U(p->bytes_received));
            }
            printf("]");
        }
        printf("}}\n");
    }
}

#define MAX_EQ 32 /* --eq values accepted by the parser (the index decides how many fit) */

int rl_cmd_query(int argc, char **argv) {
    const char *url = NULL, *store = NULL, *index = NULL, *cont = NULL, *eqv[MAX_EQ];
    const char *ge = NULL, *gt = NULL, *le = NULL, *lt = NULL, *low = NULL, *high = NULL;
    int n_eq = 0, low_excl = 0, high_excl = 0, stats = 0, trace = 0, explain = 0, rc = 0, status = 1, fetch, orphans,
        code, secondary = 0;
    rl__errdetail msg;
    rl__tool_db dbu;
    rl__errdetail_init(&msg, NULL);
    double timeout_s = RL__TOOL_DEFAULT_TIMEOUT_S;
    rl_query_options o;
    rl_buf cb, out;
    rl_tuple_builder *eq = NULL, *lo = NULL, *hi = NULL;
    memset(&o, 0, sizeof o);
    o.size = sizeof o;
    fetch = o.fetch;
    orphans = o.orphans;
    static const rl__arg_choice fetches[] = {{"scan", RL_FETCH_SCAN_AND_FETCH},
                                             {"remote", RL_FETCH_USE_REMOTE_FETCH},
                                             {"remote-fallback", RL_FETCH_USE_REMOTE_FETCH_WITH_FALLBACK},
                                             {"adaptive", RL_FETCH_ADAPTIVE},
                                             {NULL, 0}};
    static const rl__arg_choice secondaries[] = {{"default", RL_SECONDARY_DEFAULT},
                                                 {"individual", RL_SECONDARY_INDIVIDUAL},
                                                 {"grouped", RL_SECONDARY_GROUPED},
                                                 {NULL, 0}};
    static const rl__arg_choice orphan_modes[] = {
        {"error", RL_ORPHAN_ERROR}, {"skip", RL_ORPHAN_SKIP}, {"return", RL_ORPHAN_RETURN}, {NULL, 0}};
    const rl__arg opts[] = {
        RL__TOOL_OPT_DB(&url),
        RL__TOOL_OPT_STORE(&store),
        RL__TOOL_OPT_TIMEOUT(&timeout_s),
        {.name = "index",
         .kind = RL_ARG_STRING,
         .dest = &index,
         .metavar = "NAME",
         .flags = RL_ARG_REQUIRED,
         .help = "the index to scan (the Order store has price_idx)"},
        {.name = "eq",
         .kind = RL_ARG_STRING,
         .dest = eqv,
         .metavar = "V",
         .flags = RL_ARG_MULTI,
         .max_count = MAX_EQ,
         .count = &n_eq,
         .help = "the next index value equals V (the equality prefix, in order)"},
        {.name = "ge", .kind = RL_ARG_STRING, .dest = &ge, .metavar = "V", .help = "the value after the prefix >= V"},
        {.name = "gt", .kind = RL_ARG_STRING, .dest = &gt, .metavar = "V", .help = "... > V"},
        {.name = "le", .kind = RL_ARG_STRING, .dest = &le, .metavar = "V", .help = "... <= V"},
        {.name = "lt", .kind = RL_ARG_STRING, .dest = &lt, .metavar = "V", .help = "... < V"},
        {.name = "reverse", .kind = RL_ARG_FLAG, .dest = &o.reverse, .help = "in descending index order"},
        {.name = "skip",
         .kind = RL_ARG_INT,
         .dest = &o.skip,
         .min = 0,
         .max = RL_QUERY_MAX_SKIP,
         .help = "index entries to skip first (first page only)"},
        {.name = "limit",
         .kind = RL_ARG_INT,
         .dest = &o.limit,
         .min = 0,
         .max = INT_MAX,
         .help = "rows to return (0: all)"},
        {.name = "scan-limit",
         .kind = RL_ARG_INT,
         .dest = &o.scan_limit,
         .min = 0,
         .max = INT_MAX,
         .help = "index entries to scan (0: no limit)"},
        {.name = "byte-limit",
         .kind = RL_ARG_INT64,
         .dest = &o.byte_limit,
         .min = 0,
         .max = INT64_MAX,
         .help = "bytes to scan (0: no limit)"},
        {.name = "time-limit-ms",
         .kind = RL_ARG_INT64,
         .dest = &o.time_limit_ms,
         .min = 0,
         .max = 3600000,
         .help = "milliseconds from the start (0: no limit)"},
        {.name = "fetch",
         .kind = RL_ARG_ENUM,
         .dest = &fetch,
         .metavar = "METHOD",
         .choices = fetches,
         .help = "how records are fetched"},
        {.name = "secondary",
         .kind = RL_ARG_ENUM,
         .dest = &secondary,
         .metavar = "STRATEGY",
         .choices = secondaries,
         .help = "remote fetch on a cluster: how storage servers read records other servers hold "
                 "(individual: batches of 10 reads; grouped: one multi-read per server per page)"},
        {.name = "keep-index-entries",
         .kind = RL_ARG_FLAG,
         .dest = &o.keep_index_entries,
         .help = "remote fetch: mapped reads bring every index entry (default: those the query can "
                 "rebuild from their records are left out; the stats' index_bytes_omitted)"},
        {.name = "orphans",
         .kind = RL_ARG_ENUM,
         .dest = &orphans,
         .metavar = "MODE",
         .choices = orphan_modes,
         .help = "what an index entry without its record does"},
        {.name = "continuation",
         .kind = RL_ARG_STRING,
         .dest = &cont,
         .metavar = "HEX",
         .help = "resume after the page that printed it (--stats)"},
        {.name = "stats",
         .kind = RL_ARG_FLAG,
         .dest = &stats,
         .help = "end with a JSON line of counters, the end reason and the continuation"},
        {.name = "trace",
         .kind = RL_ARG_FLAG,
         .dest = &trace,
         .help = "after the rows, one JSON line per request of the query (its timeline)"},
        {.name = "explain",
         .kind = RL_ARG_FLAG,
         .dest = &explain,
         .help = "--fetch adaptive: after the rows, one JSON line per page: the inputs, both estimates, the choice"},
        {0}};
    const rl__args_cmd cmd = {
        .name = "rl query",
        .summary = "Scan index NAME of the Order store and print each row's record as one JSON line.\n"
                   "--eq values form the equality prefix of the index values; --ge/--gt and --le/--lt\n"
                   "bound the next value. V is an integer if it looks like one, else a string.\n"
                   "--stats ends with a JSON line of counters, the end reason and the continuation (hex)\n"
                   "to pass to --continuation for the next page (--skip applies to the first page only);\n"
                   "its \"net\" object has the requests per link and type, bytes and round trips.\n"
                   "--trace prints, after the rows, one {\"trace\": ...} line per request: start (us from the\n"
                   "query's start), type, server, address, host, link, bytes each way, latency, and for\n"
                   "mapped reads the server's storage-to-storage figures.\n"
                   "--fetch adaptive picks SCAN_AND_FETCH or USE_REMOTE_FETCH per page from a cost model\n"
                   "calibrated by the pages it ran; --explain prints one {\"explain\": ...} line per page.",
        .epilog = "Exit codes: 0 done, 1 failure, 2 usage.",
        .opts = opts};
    rl__buf_init(&cb);
    rl__buf_init(&out);
    if (rl__args_parse(&cmd, argc, argv, &code)) {
        status = code;
        goto done;
    }
    if (rl__tool_db_choose(&cmd, url, &dbu, &code)) {
        status = code;
        goto done;
    }
    url = dbu.url;
    o.fetch = (rl_fetch_method)fetch;
    o.orphans = (rl_orphan_behavior)orphans;
    o.secondary_strategy = secondary;
    if (ge && gt) {
        status = rl__args_usage_error(&cmd, "--ge and --gt exclude each other");
        goto done;
    }
    if (le && lt) {
        status = rl__args_usage_error(&cmd, "--le and --lt exclude each other");
        goto done;
    }
    low = ge ? ge : gt, low_excl = gt != NULL;
    high = le ? le : lt, high_excl = lt != NULL;
    if (cont && rl__args_unhex(cont, &cb, &msg)) {
        status = rl__args_usage_error(&cmd, "--continuation: %s", rl__errdetail_get(&msg));
        goto done;
    }
    if (rl_tuple_builder_new(&eq) || rl_tuple_builder_new(&lo) || rl_tuple_builder_new(&hi)) {
        fprintf(stderr, "rl query: out of memory\n");
        goto done;
    }
    for (int i = 0; i < n_eq; i++) pack_value(eq, eqv[i]);
    if (low) pack_value(lo, low);
    if (high) pack_value(hi, high);
    const uint8_t *eqb, *lob, *hib;
    if (rl_tuple_builder_result(eq, &eqb, &o.eq_len) || rl_tuple_builder_result(lo, &lob, &o.low_len) ||
        rl_tuple_builder_result(hi, &hib, &o.high_len)) {
        fprintf(stderr, "rl query: out of memory\n");
        goto done;
    }
    o.eq = eqb, o.low = lob, o.high = hib; /* NULL when empty: no prefix, open bounds */
    o.low_exclusive = low_excl;
    o.high_exclusive = high_excl;
    if (cont) o.continuation = cb.data, o.continuation_len = cb.len;
    o.trace = trace;
    o.explain = explain;
    {
        rl__tool t;
        rl_txn *txn = NULL;
        rl_cursor *c = NULL;
        const rl_query_row *row;
        const rl__tool_wait w = {.prog = "rl query", .timeout_ms = rl__tool_wait_ms(timeout_s)};
        if ((rc = rl__tool_open_with(&t, url, store, 0, RL__TOOL_READ_ONLY, &w))) {
            fprintf(stderr, "rl query: %s (%d): %s\n", rl_error_name(rc), rc, rl__tool_errmsg(&t));
            goto done;
        }
        rc = rl_txn_begin(t.db, &txn);
        if (!rc && (rc = rl_cursor_open(t.s, txn, index, &o, &c)))
            fprintf(stderr, "rl query: %s: %s\n", rl_error_name(rc), rl_store_errmsg(t.s));
        while (!rc && (rc = rl_cursor_next(c, &row)) == RL_OK && row) {
            rl__buf_reset(&out);
            if (row->record) {
                rc = rl__tool_record_json(row->record, &out);
            } else {
                rl__buf_append_str(&out, "{\"orphan\": true, \"pk\": ");
                char *p = NULL;
                rl_tuple_print(row->pk, row->pk_len, &p); /* a primary key the store read back */
                rl__buf_append_str(&out, "\"");
                for (const char *q = p ? p : ""; *q; q++) {
                    if (*q == '"' || *q == '\\') rl__buf_append_byte(&out, '\\');
                    rl__buf_append_byte(&out, (uint8_t)*q);
                }
                rl__buf_append_str(&out, "\"}");
                rl_free(p);
                rc = rl__buf_error(&out);
            }
            if (!rc) printf("%s\n", (const char *)out.data);
        }
        if (c && rc) {
            fprintf(stderr, "rl query: %s (%d): %s %s\n", rl_error_name(rc), rc, rl_error_message(rc),
                    rl_cursor_errmsg(c));
            if (rc == RL_E_FALLBACK_FAILED)
                fprintf(stderr, "rl query: cause: %s\n", rl_error_name(rl_cursor_error_cause(c)));
        } else if (rc && c == NULL && txn == NULL) {
            fprintf(stderr, "rl query: %s (%d)\n", rl_error_name(rc), rc);
        }
        if (!rc && explain) print_explain(c);
        if (!rc && trace) print_trace(c);
        if (!rc && stats) print_stats(c);
        if (!rc) status = 0;
        rl_cursor_free(c);
        rl_txn_free(txn);
        rl__tool_close(&t);
    }
done:
    rl_tuple_builder_free(eq);
    rl_tuple_builder_free(lo);
    rl_tuple_builder_free(hi);
    rl__buf_release(&cb);
    rl__buf_release(&out);
    return status;
}
