/* slow_storage_server_bench.c — measurements of the storage server (printed, not asserted: wall
 * clock figures on a shared machine): run with RL_SS_BENCH=1 for the full counts, otherwise a
 * smoke run of a few seconds (a benchmark: ctest label bench). In-process servers over real loopback sockets
 * with blocking test clients (ss_test.h), so the client machinery of the cluster: backend is not
 * in these figures.
 *
 *   ssb-1.1  PING vs GET round trips on one connection;
 *   ssb-1.2  a 1,000-entry mapped read with every secondary local: the embedded engine's
 *            rl__storage_get_mapped_range vs the server (round trip, and its server_ns);
 *   ssb-1.3  mapped reads of 10, 100 and 1,000 entries on two servers, half the records remote,
 *            individual vs grouped (requests, round trips, time);
 *   ssb-1.4  readers during syncs: rl__storage_get on one thread while another applies and
 *            syncs in a loop (the fsync runs without the engine lock): how many reads took
 *            more than 200 us while a sync was running, and how long they were stalled in all.
 *
 *   RL_SS_BENCH=1 ./unit_server_slow_storage_server_bench
 */
#include <sched.h>
#include <stdlib.h>

#include "base/bytes.h"
#include "base/log.h"
#include "server/storage_server.h"
#include "storage/mapped.h"
#include "storage/storage.h"
#include "unit/server/ss_test.h"

static int g_full;
static int scale(int full) { return g_full ? full : (full / 20 > 1 ? full / 20 : 1); }

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void summary(const char *what, uint64_t *v, size_t n) {
    if (!n) return;
    qsort(v, n, sizeof *v, cmp_u64);
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum += (double)v[i];
    printf("  %-44s n=%-6zu mean %8.1f us  p50 %8.1f  p99 %8.1f  max %8.1f\n", what, n, sum / (double)n / 1e3,
           (double)v[n / 2] / 1e3, (double)v[n * 99 / 100] / 1e3, (double)v[n - 1] / 1e3);
}

typedef struct {
    rl__ss *ss;
    pthread_t th;
    char *dir;
} srv;

static void *srv_main(void *a) {
    rl__ss_run(((srv *)a)->ss);
    return NULL;
}

static void srv_start(srv *s, uint32_t id, uint16_t cport) {
    rl__ss_options o;
    memset(&o, 0, sizeof o);
    s->dir = rl_test_tmpdir("ssb");
    o.dir = s->dir;
    o.id = id;
    o.coordinator_ip = "127.0.0.1";
    o.coordinator_port = cport;
    o.no_sync = 1;
    o.auth = sst_auth();
    ASSERT_OK(rl__ss_new(&o, &s->ss, NULL));
    ASSERT_EQ(pthread_create(&s->th, NULL, srv_main, s), 0);
}

static void srv_stop(srv *s) {
    rl__ss_stop(s->ss);
    pthread_join(s->th, NULL);
    rl__ss_free(s->ss);
    rl_test_rmtree(s->dir);
    free(s->dir);
}

/* Orders-like data: N records (1, pk, 0) of 100 bytes and an index (2, price, pk). */
#define N 1000
static rl_buf K[2 * N], V[2 * N];
static rl__mutation M[2 * N];

static void pack3(rl_buf *b, int a, int x, int y) {
    rl__tuple_packer p;
    rl__buf_reset(b);
    rl__tuple_packer_init(&p, b);
    rl__tuple_pack_int(&p, a);
    rl__tuple_pack_int(&p, x);
    rl__tuple_pack_int(&p, y);
}

static void build(void) {
    for (int i = 0; i < N; i++) {
        rl__buf_init(&K[2 * i]), rl__buf_init(&V[2 * i]), rl__buf_init(&K[2 * i + 1]), rl__buf_init(&V[2 * i + 1]);
        pack3(&K[2 * i], 1, i, 0);
        for (int j = 0; j < 100; j++) rl__buf_append_byte(&V[2 * i], (uint8_t)('a' + j % 26));
        pack3(&K[2 * i + 1], 2, (i * 37) % 997, i);
        M[2 * i] =
            (rl__mutation){RL_MUT_SET, K[2 * i].data, (uint32_t)K[2 * i].len, V[2 * i].data, (uint32_t)V[2 * i].len};
        M[2 * i + 1] =
            (rl__mutation){RL_MUT_SET, K[2 * i + 1].data, (uint32_t)K[2 * i + 1].len, (const uint8_t *)"", 0};
    }
}

static void unbuild(void) {
    for (int i = 0; i < 2 * N; i++) rl__buf_release(&K[i]), rl__buf_release(&V[i]);
}

static const char MAPPER[] = "\x15\x01\x02{K[2]}\x00\x02{...}\x00";

static uint64_t mapped_call(sst_client *c, int strategy, int limit, rl__msg_mapped_stats *st) {
    rl__msg q = sst_req(RL_MSG_GET_MAPPED_RANGE), r;
    q.u.get_mapped_range_req.version = 10;
    q.u.get_mapped_range_req.begin = RL_FIRST_GREATER_OR_EQUAL("\x15\x02", 2);
    q.u.get_mapped_range_req.end = RL_FIRST_GREATER_OR_EQUAL("\x15\x03", 2);
    q.u.get_mapped_range_req.mapper = (const uint8_t *)MAPPER;
    q.u.get_mapped_range_req.mapper_len = sizeof MAPPER - 1;
    q.u.get_mapped_range_req.strategy = (uint8_t)strategy;
    q.u.get_mapped_range_req.limit = limit;
    uint64_t t0 = rl__clock_mono_ns();
    ASSERT_EQ(sst_call(c, &q, &r), 0);
    uint64_t d = rl__clock_mono_ns() - t0;
    ASSERT_EQ(r.u.get_mapped_range_reply.n_entries, (uint32_t)limit);
    *st = r.u.get_mapped_range_reply.stats;
    return d;
}

static const rl__keyrange ALL[] = {{(const uint8_t *)"", 0, (const uint8_t *)"\xff", 1}};

/* ssb-1.1, ssb-1.2 */
TEST(ssb_1_1_one_server) {
    build();
    sst_fc fc;
    sst_fc_init(&fc);
    srv s;
    srv_start(&s, 1, fc.port);
    sst_fc_accept_register(&fc, 0, ALL, 1);
    rl__msg_peek_version pv = {10, M, 2 * N};
    sst_fc_peek_reply(&fc, &pv, 1, 10);
    sst_client c;
    sst_client_open(&c, rl__ss_port(s.ss), RL_ROLE_CLIENT, 0);
    int n = scale(20000);
    uint64_t *t = calloc((size_t)n, sizeof *t);
    rl__msg q, r;
    printf("ssb-1.1 round trips on one connection:\n");
    for (int i = 0; i < n; i++) {
        q = sst_req(RL_MSG_PING);
        uint64_t t0 = rl__clock_mono_ns();
        ASSERT_EQ(sst_call(&c, &q, &r), 0);
        t[i] = rl__clock_mono_ns() - t0;
    }
    summary("PING", t, (size_t)n);
    for (int i = 0; i < n; i++) {
        int present;
        uint64_t t0 = rl__clock_mono_ns();
        ASSERT_EQ(sst_get(&c, 10, (const char *)K[2 * (i % N)].data, K[2 * (i % N)].len, &present, NULL), 0);
        t[i] = rl__clock_mono_ns() - t0;
    }
    summary("GET", t, (size_t)n);

    printf("ssb-1.2 a 1,000-entry mapped read, every secondary local:\n");
    rl__storage *loc;
    rl__storage_options so;
    memset(&so, 0, sizeof so);
    ASSERT_OK(rl__storage_open(&so, &loc, NULL));
    ASSERT_OK(rl__storage_apply(loc, 10, M, 2 * N));
    rl_arena a;
    rl__arena_init(&a, 0);
    int m = scale(300);
    uint64_t *e = calloc((size_t)m, sizeof *e), *w = calloc((size_t)m, sizeof *w), *sv = calloc((size_t)m, sizeof *sv);
    for (int i = 0; i < m; i++) {
        rl__mapper *mp;
        rl__mapped_entry *ents;
        int ne, more;
        rl__arena_reset(&a);
        uint64_t t0 = rl__clock_mono_ns();
        ASSERT_OK(rl__mapper_parse(MAPPER, sizeof MAPPER - 1, &a, &mp));
        ASSERT_OK(rl__storage_get_mapped_range(loc, 10, "\x15\x02", 2, "\x15\x03", 2, mp, NULL, NULL, NULL, &a, &ents,
                                               &ne, &more));
        e[i] = rl__clock_mono_ns() - t0;
        ASSERT_EQ(ne, N);
    }
    for (int i = 0; i < m; i++) {
        rl__msg_mapped_stats st;
        w[i] = mapped_call(&c, RL_FETCH_INDIVIDUAL, N, &st);
        sv[i] = st.server_ns;
    }
    summary("embedded rl__storage_get_mapped_range", e, (size_t)m);
    summary("server: round trip", w, (size_t)m);
    summary("server: server_ns (before encoding)", sv, (size_t)m);
    rl__arena_release(&a);
    rl__storage_close(loc);
    free(t), free(e), free(w), free(sv);
    sst_client_close(&c);
    srv_stop(&s);
    sst_fc_release(&fc);
    unbuild();
}

/* ssb-1.3 */
TEST(ssb_1_3_two_servers) {
    build();
    rl_buf split;
    rl__buf_init(&split);
    pack3(&split, 1, N / 2, 0);
    split.len -= 1; /* (1, N/2) without the chunk: records of pk >= N/2 on server 2 */
    sst_fc f1, f2;
    sst_fc_init(&f1);
    sst_fc_init(&f2);
    srv s1, s2;
    srv_start(&s1, 1, f1.port);
    srv_start(&s2, 2, f2.port);
    rl__msg_server svs[2] = {
        {1, RL_ROLE_STORAGE, (const uint8_t *)"127.0.0.1", 9, rl__ss_port(s1.ss), (const uint8_t *)"h1", 2, 1},
        {2, RL_ROLE_STORAGE, (const uint8_t *)"127.0.0.1", 9, rl__ss_port(s2.ss), (const uint8_t *)"h2", 2, 1}};
    uint32_t t1[1] = {1}, t2[1] = {2};
    rl__msg_shard shs[3] = {{(const uint8_t *)"", 0, split.data, (uint32_t)split.len, t1, 1},
                            {split.data, (uint32_t)split.len, (const uint8_t *)"\x15\x02", 2, t2, 1},
                            {(const uint8_t *)"\x15\x02", 2, (const uint8_t *)"\xff", 1, t1, 1}};
    rl__msg_get_shard_map_reply map = {1, svs, 2, shs, 3, 0, 0};
    f1.map = map, f2.map = map;
    rl__keyrange r1[] = {{(const uint8_t *)"", 0, split.data, (uint32_t)split.len},
                         {(const uint8_t *)"\x15\x02", 2, (const uint8_t *)"\xff", 1}};
    rl__keyrange r2[] = {{split.data, (uint32_t)split.len, (const uint8_t *)"\x15\x02", 2}};
    static rl__mutation m1[2 * N], m2[2 * N];
    int n1 = 0, n2 = 0;
    for (int i = 0; i < 2 * N; i++) {
        int on2 = rl__bytes_cmp(M[i].p1, M[i].len1, split.data, split.len) >= 0 &&
                  rl__bytes_cmp(M[i].p1, M[i].len1, "\x15\x02", 2) < 0;
        if (on2) m2[n2++] = M[i];
        else m1[n1++] = M[i];
    }
    sst_fc_accept_register(&f1, 0, r1, 2);
    sst_fc_accept_register(&f2, 0, r2, 1);
    rl__msg_peek_version p1 = {10, m1, (uint32_t)n1}, p2 = {10, m2, (uint32_t)n2};
    sst_fc_peek_reply(&f1, &p1, 1, 10);
    sst_fc_peek_reply(&f2, &p2, 1, 10);
    sst_client c;
    sst_client_open(&c, rl__ss_port(s1.ss), RL_ROLE_CLIENT, 0);
    printf("ssb-1.3 mapped reads on 2 servers (records of pk >= %d remote):\n", N / 2);
    const int lims[] = {10, 100, 1000};
    int reps = scale(60);
    uint64_t *w = calloc((size_t)reps, sizeof *w);
    for (int li = 0; li < 3; li++)
        for (int stg = RL_FETCH_INDIVIDUAL; stg <= RL_FETCH_GROUPED; stg++) {
            rl__msg_mapped_stats st;
            memset(&st, 0, sizeof st);
            for (int i = 0; i < reps; i++) w[i] = mapped_call(&c, stg, lims[li], &st);
            char what[128];
            snprintf(what, sizeof what, "%4d entries %-10s req %3u rt %3u remote %3u", lims[li],
                     stg == RL_FETCH_INDIVIDUAL ? "individual" : "grouped", st.s2s_requests, st.s2s_round_trips,
                     st.secondaries_remote);
            summary(what, w, (size_t)reps);
        }
    free(w);
    sst_client_close(&c);
    srv_stop(&s1);
    srv_stop(&s2);
    sst_fc_release(&f1);
    sst_fc_release(&f2);
    rl__buf_release(&split);
    unbuild();
}

/* ssb-1.4 */
static rl__storage *g_st;
static atomic_int g_stop;
static uint64_t g_slow0[100000], g_slow1[100000];
static size_t g_nslow;
static uint64_t g_reads;

static void *reader(void *arg) {
    (void)arg;
    struct sched_param sp = {.sched_priority = 10};
    /* Not preempted by other processes, when allowed: then a slow read is a lock wait. */
    int fifo = pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp) == 0;
    rl_arena ar;
    rl__arena_init(&ar, 0);
    while (!atomic_load(&g_stop)) {
        int p;
        const uint8_t *v;
        uint32_t vl;
        uint64_t t0 = rl__clock_mono_ns();
        rl__storage_get(g_st, rl__storage_latest_version(g_st), "k0001", 5, &ar, &p, &v, &vl);
        uint64_t t1 = rl__clock_mono_ns();
        g_reads++;
        if (t1 - t0 > 200000 && g_nslow < 100000) g_slow0[g_nslow] = t0, g_slow1[g_nslow++] = t1;
        rl__arena_reset(&ar);
        if (!fifo && (g_reads & 1023) == 0) sched_yield();
    }
    rl__arena_release(&ar);
    return (void *)(intptr_t)fifo;
}

TEST(ssb_1_4_readers_during_sync) {
    char *dir = rl_test_tmpdir("ssbsync");
    rl__storage_options o;
    memset(&o, 0, sizeof o);
    o.dir = dir;
    ASSERT_OK(rl__storage_open(&o, &g_st, NULL));
    enum { MAXS = 100000 };
    uint64_t *s0 = calloc(MAXS, sizeof *s0), *s1 = calloc(MAXS, sizeof *s1), *d = calloc(MAXS, sizeof *d);
    size_t ns = 0;
    pthread_t th;
    atomic_store(&g_stop, 0);
    ASSERT_EQ(pthread_create(&th, NULL, reader, NULL), 0);
    char val[100];
    memset(val, 'x', sizeof val);
    uint64_t end = rl__clock_mono_ns() + (uint64_t)scale(3000) * 1000000u;
    for (rl__version v = 1; rl__clock_mono_ns() < end && ns < MAXS; v++) {
        rl__mutation m = {RL_MUT_SET, (const uint8_t *)"k0001", 5, (const uint8_t *)val, 100};
        ASSERT_OK(rl__storage_apply(g_st, v, &m, 1));
        s0[ns] = rl__clock_mono_ns();
        ASSERT_OK(rl__storage_sync(g_st));
        s1[ns] = rl__clock_mono_ns();
        d[ns] = s1[ns] - s0[ns];
        ns++;
        rl__clock_sleep_us(1000);
    }
    atomic_store(&g_stop, 1);
    void *fifo;
    pthread_join(th, &fifo);
    uint64_t in_sync = 0, stalled = 0;
    size_t overlapping = 0;
    for (size_t i = 0; i < ns; i++) in_sync += s1[i] - s0[i];
    for (size_t k = 0; k < g_nslow; k++)
        for (size_t i = 0; i < ns; i++)
            if (g_slow0[k] < s1[i] && g_slow1[k] > s0[i]) {
                overlapping++;
                stalled += g_slow1[k] - g_slow0[k];
                break;
            }
    printf("ssb-1.4 readers during syncs (reader %s):\n", fifo ? "SCHED_FIFO" : "normal priority");
    summary("rl__storage_sync (fsync without the lock)", d, ns);
    printf("  %zu syncs, %.1f ms in sync; %llu reads, %zu over 200 us, %zu of them during a sync, "
           "%.1f ms stalled in all\n",
           ns, (double)in_sync / 1e6, (unsigned long long)g_reads, g_nslow, overlapping, (double)stalled / 1e6);
    rl__storage_close(g_st);
    rl_test_rmtree(dir);
    free(dir), free(s0), free(s1), free(d);
}

static int bench_init(void **state) {
    (void)state;
    const char *e = getenv("RL_SS_BENCH");
    g_full = e && *e && *e != '0';
    if (rl__log_level() < RL_LOG_ERROR) rl__log_set_level(RL_LOG_ERROR);
    return 0;
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {T(ssb_1_1_one_server), T(ssb_1_3_two_servers), T(ssb_1_4_readers_during_sync)};
    rl_test_init(argc, argv);
    return cmocka_run_group_tests_name(rl_test_group_name(argv[0]), tests, bench_init, NULL);
}
