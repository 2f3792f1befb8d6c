/* cluster_fixture.h — a local cluster for a test: started in a fresh temporary directory through
 * the library (src/app/cluster_admin.h), stopped whatever happens to the test.
 *
 *   rl_test_cluster c;
 *   rl__cluster_up_opts o = {.n_storage = 3, .split = keys, .n_split = 2};
 *   ASSERT_OK(rl_test_cluster_start(&c, &o));                 // a failure prints why
 *   ... rl_db_open(c.url, ...) ...
 *   rl_test_cluster_stop(&c);
 *
 * No test leaves processes behind:
 *   1. rl_test_cluster_stop (rl__cluster_down by recorded pid, then the directory is removed);
 *   2. atexit: every cluster still running is stopped the same way (a failed cmocka assertion
 *      returns through the test runner, and exit() runs this);
 *   3. SIGTERM, SIGINT, SIGHUP and SIGABRT: the handler sends SIGKILL to the recorded pids
 *      (async-signal-safe: a fixed table, refreshed after every start and restart) and re-raises;
 *   4. a guardian process per cluster (forked at start) holds a pipe from the test: when the
 *      test dies by any means (SIGKILL by ctest's timeout included), the pipe closes and the
 *      guardian runs rl__cluster_down (it reads pids.json, so restarted processes are found too)
 *      and removes the directory. It also gives up after RL_TEST_CLUSTER_MAX_LIFE_S.
 * Call rl_test_cluster_start before the test starts threads (the guardian is a fork). A child the
 * test forks inherits the hooks, but they act only in the process that started the cluster, so a
 * child's exit or signal never stops it (children should still leave with _exit).
 *
 * RL_TEST_KEEP=1 keeps the directory (logs) after the stop, and its path is printed.
 * Not thread-safe: start, restart and stop from one thread.
 */
#ifndef RL_TEST_CLUSTER_FIXTURE_H
#define RL_TEST_CLUSTER_FIXTURE_H

#include <stdint.h>

#include "app/cluster_admin.h"
#include "server/keyfile.h"

#define RL_TEST_CLUSTER_MAX_LIFE_S (4 * 3600)
/* ctest's SKIP_RETURN_CODE, for a test this machine cannot run at all (test_disk_full.c: not root).
 * Never for a cluster that does not start or open: that fails the test. */
#define RL_TEST_SKIP_CODE 77

typedef struct {
    char *dir;           /* the cluster's directory (heap), NULL when not started */
    char file[4200];     /* DIR/reclayer.cluster */
    char url[4300];      /* "cluster:" + file */
    char key_file[4200]; /* DIR/cluster.key */
    rl__keyfile key;     /* its contents: the member credentials tests' admin connections use */
    int n_storage;
    int guardian_pid; /* the guardian process */
    int guardian_fd;  /* the write end of its pipe */
    int slot;         /* index in the fixture's table of running clusters */
} rl_test_cluster;

/* rl_test_cluster_start — start a cluster (o: as rl__cluster_up; flags gets
 * RL_CLUSTER_DIE_WITH_PARENT; rlkvd defaults to the build's) in a fresh directory under $TMPDIR.
 * Returns RL_OK, or the error after printing why (and the log's last lines); *c is then not
 * started. A test fails on an error (ASSERT_OK): rlkvd and the cluster: backend are always built,
 * so a cluster that does not start is a defect, never a reason to skip. */
int rl_test_cluster_start(rl_test_cluster *c, const rl__cluster_up_opts *o);

/* rl_test_cluster_restart — `rl cluster restart` of process id (0: coordinator) through the
 * built rl (the tool end to end), with --kill when hard; refreshes the signal handler's pids.
 * Returns the command's exit code (0 success); its output is printed on failure. */
int rl_test_cluster_restart(rl_test_cluster *c, uint32_t id, int hard);

/* rl_test_cluster_restart_args — `rl cluster restart --dir DIR ARGS` through the built rl (args:
 * shell words, e.g. "--storage 2,3 --coordinator"); refreshes the signal handler's pids. Returns
 * the command's exit code; *out (NULL: not wanted) gets its stdout and stderr, to free(). */
int rl_test_cluster_restart_args(rl_test_cluster *c, const char *args, char **out);

/* rl_test_cluster_pid — the live pid of process id (0: coordinator), 0 if it is not running. */
int rl_test_cluster_pid(rl_test_cluster *c, uint32_t id);

/* rl_test_pid_gone — 1 once pid no longer runs: no such process, or a zombie (reaped here when it
 * is our child; the cluster's processes are the fixture's grandchildren or ours). */
int rl_test_pid_gone(int pid);

/* rl_test_cluster_stop — stop everything (by recorded pid), reap the guardian, remove the
 * directory (unless RL_TEST_KEEP=1). NULL or a stopped cluster is a no-op. */
void rl_test_cluster_stop(rl_test_cluster *c);

/* rl_test_status_num — the integer field `field` of the STATUS reply (JSON) of c's process on
 * 127.0.0.1:port (an admin connection with c's key file): -1 when it does not answer (2 s to
 * connect, 2 s for the reply), 0 when the reply has no such integer. */
long long rl_test_status_num(const rl_test_cluster *c, uint16_t port, const char *field);

#endif
