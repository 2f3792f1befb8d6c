/* test_fdbc_versions.c — every API version libfdb_c.so over reclayer accepts, each in a process of
 * its own (the version is chosen once per process): a program written for that version starts,
 * writes, reads and commits, and sees that version's behaviour where FoundationDB's changes it.
 *
 *   fdbc-2.1  610, 620, 630, 700, 710, 720 and 730 start and run a transaction; 600 and 609 are
 *             refused with api_version_not_supported (2203), as is a header above 730
 *   fdbc-2.2  fdb_future_get_version (removed in 620) reads a version below 620 and fails with 2203
 *             from 620 on, never aborting the program
 *   fdbc-2.3  on a cluster (RL_TEST_URL=cluster:FILE, ctest's *_cluster1 run): get_addresses_for_key
 *             gives "IP" below 630 and "IP:PORT" from 630, or with include_port_in_address (23)
 *
 * The children report on stderr and by exit code; the parent waits for each with a bound.
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fdbc_api.h"
#include "test.h"

#define CHILD_FAIL(...)                           \
    do {                                          \
        fprintf(stderr, "version %d: ", version); \
        fprintf(stderr, __VA_ARGS__);             \
        fprintf(stderr, "\n");                    \
        _exit(1);                                 \
    } while (0)

typedef fdb_error_t (*get_version_fn)(FDBFuture *f, int64_t *out);

static fdb_error_t set_k(fdbt_client *c, FDBTransaction *tr, void *ud) {
    (void)ud;
    c->api.transaction_set(tr, (const uint8_t *)"vk", 2, (const uint8_t *)"vv", 2);
    return 0;
}

/* The addresses of key "vk" as the library returns them, into out (the first one). */
static fdb_error_t first_address(fdbt_client *c, FDBTransaction *tr, char *out, size_t cap) {
    FDBFuture *f = c->api.transaction_get_addresses_for_key(tr, (const uint8_t *)"vk", 2);
    fdb_error_t rc = fdbt_wait(c, f);
    const char **strs;
    int n = 0;
    if (rc == 0) rc = c->api.future_get_string_array(f, &strs, &n);
    if (rc == 0 && n < 1) rc = 1;
    if (rc == 0) snprintf(out, cap, "%s", strs[0]);
    c->api.future_destroy(f);
    return rc;
}

/* One process: version `version` with header `header`; returns the exit code. */
static int child(int version, int header, const char *url) {
    alarm(60);
    fdbt_client c = {0};
    if (fdbt_load(&c.api, fdbt_lib_path())) CHILD_FAIL("cannot load %s", fdbt_lib_path());
    fdb_error_t rc = c.api.select_api_version_impl(version, header);
    if (version < 610 || header > 730) {
        if (rc != 2203) CHILD_FAIL("select gave %d, want 2203", rc);
        _exit(0);
    }
    if (rc) CHILD_FAIL("select: %d %s", rc, c.api.get_error(rc));
    if ((rc = c.api.setup_network())) CHILD_FAIL("setup_network: %d", rc);
    if (pthread_create(&c.net_thread, NULL, fdbt_net_main, &c)) CHILD_FAIL("pthread_create");
    c.started = 1;
    FDBDatabase *db;
    if ((rc = fdbt_open(&c, url, &db))) CHILD_FAIL("open %s: %d", url, rc);
    if ((rc = fdbt_run(&c, db, set_k, NULL, NULL))) CHILD_FAIL("commit: %d", rc);
    FDBTransaction *tr;
    if ((rc = c.api.database_create_transaction(db, &tr))) CHILD_FAIL("create_transaction: %d", rc);
    FDBFuture *f = c.api.transaction_get(tr, (const uint8_t *)"vk", 2, 0);
    fdb_bool_t present = 0;
    const uint8_t *v;
    int vl = 0;
    if ((rc = fdbt_wait(&c, f)) || (rc = c.api.future_get_value(f, &present, &v, &vl)) || !present || vl != 2 ||
        memcmp(v, "vv", 2))
        CHILD_FAIL("get: %d present %d len %d", rc, present, vl);
    c.api.future_destroy(f);
    /* fdbc-2.2: the read version through the removed name. */
    get_version_fn get_version = (get_version_fn)dlsym(c.api.lib, "fdb_future_get_version");
    if (!get_version) CHILD_FAIL("fdb_future_get_version is not exported");
    f = c.api.transaction_get_read_version(tr);
    int64_t rv = -1, rv2 = -1;
    if ((rc = fdbt_wait(&c, f)) || (rc = c.api.future_get_int64(f, &rv))) CHILD_FAIL("read version: %d", rc);
    rc = get_version(f, &rv2);
    if (header < 620 ? rc != 0 || rv2 != rv : rc != 2203)
        CHILD_FAIL("fdb_future_get_version gave %d (%lld against %lld)", rc, (long long)rv2, (long long)rv);
    c.api.future_destroy(f);
    /* fdbc-2.3: addresses with or without the port. */
    if (!strncmp(url, "cluster:", 8)) {
        char a[128];
        if ((rc = first_address(&c, tr, a, sizeof a))) CHILD_FAIL("get_addresses_for_key: %d", rc);
        int has_port = strchr(a, ':') != NULL;
        if (has_port != (version >= 630)) CHILD_FAIL("address '%s'", a);
        c.api.transaction_reset(tr);
        if ((rc = c.api.transaction_set_option(tr, 23, NULL, 0))) CHILD_FAIL("include_port_in_address: %d", rc);
        if ((rc = first_address(&c, tr, a, sizeof a)) || !strchr(a, ':'))
            CHILD_FAIL("address with the option '%s' (%d)", a, rc);
    }
    c.api.transaction_destroy(tr);
    c.api.database_destroy(db);
    fdbt_stop(&c);
    _exit(0);
}

TEST(fdbc_2_1_every_version) {
    const char *url = getenv("RL_TEST_URL");
    if (!url || !*url) url = "mem:";
    static const int versions[][2] = {{600, 600}, {609, 609}, {610, 610}, {610, 630}, {620, 620}, {630, 630},
                                      {700, 700}, {710, 710}, {720, 720}, {730, 730}, {730, 740}};
    for (size_t i = 0; i < sizeof versions / sizeof versions[0]; i++) {
        fflush(NULL);
        pid_t pid = fork();
        ASSERT_TRUE(pid >= 0);
        if (pid == 0) child(versions[i][0], versions[i][1], url);
        int st = 0;
        ASSERT_EQ(waitpid(pid, &st, 0), pid); /* the child's alarm bounds the wait */
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
            fail_msg("version %d (header %d) failed (status %d)", versions[i][0], versions[i][1], st);
        printf("version %d (header %d): ok on %s\n", versions[i][0], versions[i][1], url);
    }
}

RL_TEST_MAIN(T(fdbc_2_1_every_version))
