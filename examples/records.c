/* records.c — reclayer's record layer: a protobuf record type, a primary key and a VALUE index,
 * records saved in one transaction, then an index query (books by one author, by year) with the
 * ADAPTIVE fetch method, which picks SCAN_AND_FETCH or remote fetch per page.
 *
 *   protoc-c --c_out=. book.proto
 *   cc records.c book.pb-c.c $(pkg-config --cflags --libs reclayer) -o records
 *   ./records mem:            (or file:DIR, cluster:FILE)
 */
#include <stdio.h>
#include <string.h>

#include <reclayer/query.h>
#include <reclayer/record.h>
#include <reclayer/tuple.h>

#include "book.pb-c.h"

static const struct {
    int64_t id;
    const char *title, *author;
    int year;
} books[] = {
    {1, "The Left Hand of Darkness", "Le Guin", 1969},
    {2, "Solaris", "Lem", 1961},
    {3, "The Dispossessed", "Le Guin", 1974},
    {4, "A Wizard of Earthsea", "Le Guin", 1968},
    {5, "The Cyberiad", "Lem", 1965},
};

static int save_all(rl_txn *txn, void *ud) {
    rl_store *s = ud;
    int rc = rl_store_open(s, txn); /* creates the store on first use */
    for (size_t i = 0; rc == RL_OK && i < sizeof books / sizeof books[0]; i++) {
        Example__Book b = EXAMPLE__BOOK__INIT;
        b.has_id = 1, b.id = books[i].id;
        b.title = (char *)books[i].title;
        b.author = (char *)books[i].author;
        b.has_year = 1, b.year = books[i].year;
        rc = rl_store_save(s, txn, &b.base, NULL);
    }
    return rc;
}

typedef struct {
    rl_store *s;
    const uint8_t *author;
    size_t author_len;
    int rows;
} query_ctx;

/* Books by one author, in year order (the index holds (author, year, id)). */
static int query(rl_txn *txn, void *ud) {
    query_ctx *q = ud;
    rl_query_options o;
    memset(&o, 0, sizeof o);
    o.size = sizeof o;
    o.eq = q->author, o.eq_len = q->author_len;
    o.fetch = RL_FETCH_ADAPTIVE;
    rl_cursor *c = NULL;
    int rc = rl_store_open(q->s, txn);
    if (rc == RL_OK) rc = rl_cursor_open(q->s, txn, "by_author_year", &o, &c);
    const rl_query_row *row;
    q->rows = 0;
    while (rc == RL_OK && (rc = rl_cursor_next(c, &row)) == RL_OK && row) {
        const Example__Book *b = (const Example__Book *)row->record->msg;
        printf("  %d  %s\n", b->year, b->title);
        q->rows++;
    }
    if (rc != RL_OK) fprintf(stderr, "query: %s\n", c ? rl_cursor_errmsg(c) : rl_store_errmsg(q->s));
    rl_cursor_free(c);
    return rc;
}

int main(int argc, char **argv) {
    const char *url = argc > 1 ? argv[1] : "mem:";
    static const char *const pk[] = {"id"};
    static const char *const idx[] = {"author", "year"};
    rl_metadata *md = NULL;
    rl_store *s = NULL;
    rl_db *db = NULL;
    rl_tuple_builder *prefix = NULL, *author = NULL;
    const uint8_t *p;
    size_t n;
    int rc = rl_metadata_new(&md);
    if (rc == RL_OK) rc = rl_metadata_add_type(md, &example__book__descriptor, pk, 1);
    if (rc == RL_OK) rc = rl_metadata_add_value_index(md, "Book", "by_author_year", idx, 2, NULL);
    if (rc == RL_OK) rc = rl_metadata_build(md);
    if (rc != RL_OK) fprintf(stderr, "metadata: %s\n", rl_metadata_errmsg(md));
    if (rc == RL_OK) rc = rl_tuple_builder_new(&prefix);
    if (rc == RL_OK) {
        rl_tuple_add_string(prefix, "example", 7);
        rl_tuple_add_string(prefix, "books", 5);
        rc = rl_tuple_builder_result(prefix, &p, &n);
    }
    if (rc == RL_OK) rc = rl_store_new(md, p, n, 0, &s);
    if (rc == RL_OK && (rc = rl_db_open(url, NULL, &db)) != RL_OK)
        fprintf(stderr, "cannot open %s: %s\n", url, rl_last_error_detail());
    if (rc == RL_OK) rc = rl_db_run(db, save_all, s);
    query_ctx q = {.s = s};
    if (rc == RL_OK) rc = rl_tuple_builder_new(&author);
    if (rc == RL_OK) {
        rl_tuple_add_string(author, "Le Guin", 7);
        rc = rl_tuple_builder_result(author, &q.author, &q.author_len);
    }
    if (rc == RL_OK) {
        printf("books by Le Guin:\n");
        rc = rl_db_run(db, query, &q);
    }
    if (rc == RL_OK) printf("%d rows\n", q.rows);
    else fprintf(stderr, "records: %s (%d): %s\n", rl_error_name(rc), rc, rl_error_message(rc));
    rl_tuple_builder_free(author);
    rl_tuple_builder_free(prefix);
    rl_store_free(s);
    rl_metadata_free(md);
    rl_db_close(db);
    return rc == RL_OK && q.rows == 3 ? 0 : 1;
}
