/* test_loop_reader.c — robustness of the frame reader (src/net/reader.h), alone and behind a real
 * socket: random valid streams fed in random pieces, randomly corrupted streams checked against a
 * model parser, the memory bound under a trickling 64 MiB claim, allocation failures, and random
 * byte streams thrown at a listening loop (test IDs loop_5_*). Seeds are printed (RL_SEED=N).
 */
#include "base/alloc.h"
#include "base/arena.h"
#include "base/log.h"
#include "looptest.h"
#include "net/reader.h"

/* Sanitizer builds copy and fault in every reallocated page: they run lighter versions. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define LIGHT 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define LIGHT 1
#endif
#endif
#ifndef LIGHT
#define LIGHT 0
#endif

/* ---- streams and the model ---- */

typedef struct {
    uint8_t *data;
    size_t len, cap;
} stream;

static void st_append(stream *s, const void *p, size_t n) {
    if (n == 0) return;
    if (s->len + n > s->cap) {
        s->cap = (s->len + n) * 2 + 64;
        s->data = realloc(s->data, s->cap);
    }
    memcpy(s->data + s->len, p, n);
    s->len += n;
}

static size_t rand_len(uint64_t *seed, size_t max_big) {
    uint64_t r = rl_test_rand_below(seed, 100);
    if (r < 70) return rl_test_rand_below(seed, 64);
    if (r < 95) return rl_test_rand_below(seed, 5000);
    return rl_test_rand_below(seed, max_big);
}

/* Append a valid frame to s. */
static void st_frame(stream *s, uint64_t *seed, size_t max_big) {
    size_t n = rand_len(seed, max_big);
    rl__frame_header h = {(uint32_t)n, (uint16_t)rl_test_rand(seed), (uint16_t)rl_test_rand_below(seed, 4),
                          rl_test_rand(seed)};
    uint8_t hdr[RL_FRAME_HEADER_LEN];
    rl__frame_header_encode(&h, hdr);
    st_append(s, hdr, sizeof hdr);
    uint8_t buf[4096];
    for (size_t done = 0; done < n;) {
        size_t k = n - done < sizeof buf ? n - done : sizeof buf;
        for (size_t i = 0; i < k; i += 8) { /* 8 random bytes at a time */
            uint64_t r = rl_test_rand(seed);
            memcpy(buf + i, &r, k - i < 8 ? k - i : 8);
        }
        st_append(s, buf, k);
        done += k;
    }
}

/* The model: parse s from the start. Returns the number of whole frames before the first invalid
 * header or the end; *out_offsets[i] is frame i's offset; *out_malformed 1 if an invalid complete
 * header follows them; *out_rest the bytes after the last whole frame otherwise. */
static size_t model_parse(const stream *s, size_t *offsets, size_t max, int *out_malformed, size_t *out_rest) {
    size_t off = 0, n = 0;
    *out_malformed = 0;
    for (;;) {
        if (s->len - off < RL_FRAME_HEADER_LEN) break;
        rl__frame_header h;
        if (rl__frame_header_decode(s->data + off, &h) != 0) {
            *out_malformed = 1;
            break;
        }
        if (s->len - off - RL_FRAME_HEADER_LEN < h.payload_len) break;
        if (n < max) offsets[n] = off;
        n++;
        off += RL_FRAME_HEADER_LEN + h.payload_len;
    }
    *out_rest = s->len - off;
    return n;
}

static size_t bound_for(size_t pending) {
    size_t ahead = pending < RL_FRAME_READER_CHUNK       ? RL_FRAME_READER_CHUNK
                   : pending > RL_FRAME_READER_MAX_AHEAD ? RL_FRAME_READER_MAX_AHEAD
                                                         : pending;
    size_t lim = pending + ahead;
    return lim > RL_FRAME_READER_KEEP ? lim : RL_FRAME_READER_KEEP;
}

/* Feed s to a reader in random pieces; check every frame against the model and the memory bound
 * after every space call. Returns 1 if the reader reported malformed. */
static int feed_and_check(const stream *s, uint64_t *seed, int piece_mode) {
    static size_t offsets[200000];
    int want_malformed;
    size_t rest;
    size_t nf = model_parse(s, offsets, 200000, &want_malformed, &rest);
    rl__frame_reader r;
    rl__frame_reader_init(&r);
    size_t pos = 0, got = 0;
    int malformed = 0;
    while (pos < s->len && !malformed) {
        uint8_t *p;
        size_t room;
        ASSERT_OK(rl__frame_reader_space(&r, &p, &room));
        ASSERT_TRUE(room >= 1);
        size_t pending = rl__frame_reader_pending(&r);
        if (r.cap > bound_for(pending))
            fail_msg("cap %zu > bound %zu for %zu pending", r.cap, bound_for(pending), pending);
        size_t want;
        switch (piece_mode) {
        case 0: want = 1 + rl_test_rand_below(seed, 8); break;
        case 1: want = 1 + rl_test_rand_below(seed, 5000); break;
        default: want = room; break;
        }
        if (want > room) want = room;
        if (want > s->len - pos) want = s->len - pos;
        memcpy(p, s->data + pos, want);
        rl__frame_reader_commit(&r, want);
        pos += want;
        for (;;) {
            rl__frame_header h;
            const uint8_t *payload;
            int ready;
            int rc = rl__frame_reader_next(&r, &h, &payload, &ready);
            if (rc == RL_E_MALFORMED_FRAME) {
                malformed = 1;
                ASSERT_TRUE(strlen(r.why) > 0);
                /* Sticky. */
                ASSERT_RC(rl__frame_reader_next(&r, &h, &payload, &ready), RL_E_MALFORMED_FRAME);
                break;
            }
            ASSERT_OK(rc);
            if (!ready) break;
            ASSERT_TRUE(got < nf);
            rl__frame_header mh;
            ASSERT_EQ(rl__frame_header_decode(s->data + offsets[got], &mh), 0);
            ASSERT_EQ(h.payload_len, mh.payload_len);
            ASSERT_EQ(h.type, mh.type);
            ASSERT_EQ(h.flags, mh.flags);
            ASSERT_TRUE(h.id == mh.id);
            ASSERT_NOT_NULL(payload);
            ASSERT_MEM_EQ(payload, h.payload_len, s->data + offsets[got] + RL_FRAME_HEADER_LEN, mh.payload_len);
            got++;
        }
    }
    ASSERT_EQ(got, nf);
    ASSERT_EQ(malformed, want_malformed);
    if (!malformed) ASSERT_EQ(rl__frame_reader_pending(&r), rest);
    rl__frame_reader_release(&r);
    return malformed;
}

/* Random valid streams (small, medium and up to 2 MiB frames) in pieces of 1-8 bytes, up to 5000
 * bytes and as large as the reader offers: exactly the model's frames, within the memory bound. */
TEST(loop_5_1_reader_valid_streams) {
    uint64_t seed = rl_test_seed();
    for (int round = 0; round < (LIGHT ? 20 : 60); round++) {
        stream s = {0};
        int nframes = 1 + (int)rl_test_rand_below(&seed, 300);
        size_t big = round % 20 == 19 ? (2u << 20) : 200000;
        for (int i = 0; i < nframes; i++) st_frame(&s, &seed, big);
        ASSERT_EQ(feed_and_check(&s, &seed, big > 200000 ? 1 + round % 2 : round % 3), 0);
        free(s.data);
    }
}

/* Random corruption (bit flips, overwritten bytes, inserted junk, truncation) of valid streams:
 * the reader delivers exactly the frames before the first bad header and then fails (sticky), or
 * ends with the model's partial bytes. */
TEST(loop_5_2_reader_corrupted_streams) {
    uint64_t seed = rl_test_seed();
    int malformed = 0;
    for (int round = 0; round < 3000; round++) {
        stream s = {0};
        int nframes = 1 + (int)rl_test_rand_below(&seed, 20);
        for (int i = 0; i < nframes; i++) st_frame(&s, &seed, 20000);
        int muts = 1 + (int)rl_test_rand_below(&seed, 4);
        for (int m = 0; m < muts && s.len; m++) {
            size_t at = rl_test_rand_below(&seed, s.len);
            switch (rl_test_rand_below(&seed, 4)) {
            case 0: s.data[at] ^= (uint8_t)(1u << rl_test_rand_below(&seed, 8)); break;
            case 1: s.data[at] = (uint8_t)rl_test_rand(&seed); break;
            case 2: {
                uint8_t junk[32];
                size_t k = 1 + rl_test_rand_below(&seed, sizeof junk);
                for (size_t i = 0; i < k; i++) junk[i] = (uint8_t)rl_test_rand(&seed);
                stream t = {0};
                st_append(&t, s.data, at);
                st_append(&t, junk, k);
                st_append(&t, s.data + at, s.len - at);
                free(s.data);
                s = t;
                break;
            }
            default: s.len = at; break;
            }
        }
        malformed += feed_and_check(&s, &seed, (int)rl_test_rand_below(&seed, 3));
        free(s.data);
    }
    printf("loop_5_2: 3000 corrupted streams, %d refused as malformed, the rest parsed as the model\n", malformed);
}

/* A header claiming the maximum payload, then the payload trickled in random pieces: the buffer
 * stays within the bound at every step (at most twice what arrived + 64 KiB, at most 8 MiB
 * ahead), and the complete 64 MiB frame is delivered. */
TEST(loop_5_3_reader_trickle_bound) {
    uint64_t seed = rl_test_seed();
    rl__frame_reader r;
    rl__frame_reader_init(&r);
    uint8_t hdr[RL_FRAME_HEADER_LEN];
    rl__frame_header h = {RL_NET_MAX_PAYLOAD, 9, RL_FRAME_REPLY, 77};
    rl__frame_header_encode(&h, hdr);
    /* The whole 64 MiB frame; sanitizer builds stop after 12 MiB (the bound is the point). */
    size_t total = RL_FRAME_HEADER_LEN + RL_NET_MAX_PAYLOAD, fed = 0, max_over = 0;
    size_t stop = LIGHT ? (12u << 20) : total;
    while (fed < stop) {
        uint8_t *p;
        size_t room;
        ASSERT_OK(rl__frame_reader_space(&r, &p, &room));
        size_t pending = rl__frame_reader_pending(&r);
        ASSERT_TRUE(r.cap <= bound_for(pending));
        if (r.cap - pending > max_over) max_over = r.cap - pending;
        size_t want = 1 + rl_test_rand_below(&seed, fed < (1u << 20) ? 3000 : 400000);
        if (want > room) want = room;
        if (want > stop - fed) want = stop - fed;
        size_t i = 0;
        for (; i < want && fed + i < RL_FRAME_HEADER_LEN; i++) p[i] = hdr[fed + i];
        if (i < want) memset(p + i, 0x5c, want - i);
        rl__frame_reader_commit(&r, want);
        fed += want;
        const uint8_t *payload;
        int ready;
        rl__frame_header got;
        ASSERT_OK(rl__frame_reader_next(&r, &got, &payload, &ready));
        if (fed < total) ASSERT_FALSE(ready);
        else {
            ASSERT_TRUE(ready);
            ASSERT_EQ(got.payload_len, RL_NET_MAX_PAYLOAD);
            ASSERT_EQ(got.id, 77);
            ASSERT_EQ(payload[0], 0x5c);
            ASSERT_EQ(payload[RL_NET_MAX_PAYLOAD - 1], 0x5c);
        }
    }
    printf("loop_5_3: %zu bytes of a 64 MiB frame trickled in; the buffer was never more than %zu bytes ahead "
           "of the data\n",
           stop, max_over);
    ASSERT_TRUE(max_over <= RL_FRAME_READER_MAX_AHEAD + RL_FRAME_READER_CHUNK);
    /* After the big frame, the buffer shrinks back. */
    uint8_t *p;
    size_t room;
    ASSERT_OK(rl__frame_reader_space(&r, &p, &room));
    if (!LIGHT) ASSERT_TRUE(r.cap <= RL_FRAME_READER_KEEP);
    rl__frame_reader_release(&r);
}

/* An allocation failure while growing is RL_E_OUT_OF_MEMORY with the reader unchanged; a retry
 * succeeds and the frame completes. */
TEST(loop_5_4_reader_out_of_memory) {
    rl__frame_reader r;
    rl__frame_reader_init(&r);
    uint8_t *p;
    size_t room;
    rl_alloc_fail_after(0);
    ASSERT_RC(rl__frame_reader_space(&r, &p, &room), RL_E_OUT_OF_MEMORY);
    rl_alloc_fail_after(-1);
    ASSERT_OK(rl__frame_reader_space(&r, &p, &room));
    rl__frame_header h = {200000, 1, 0, 5};
    rl__frame_header_encode(&h, p);
    memset(p + RL_FRAME_HEADER_LEN, 0xab, room - RL_FRAME_HEADER_LEN);
    rl__frame_reader_commit(&r, room);
    size_t have = room;
    rl_alloc_fail_after(0);
    ASSERT_RC(rl__frame_reader_space(&r, &p, &room), RL_E_OUT_OF_MEMORY);
    rl_alloc_fail_after(-1);
    ASSERT_EQ(rl__frame_reader_pending(&r), have);
    while (have < RL_FRAME_HEADER_LEN + 200000) {
        ASSERT_OK(rl__frame_reader_space(&r, &p, &room));
        size_t k = RL_FRAME_HEADER_LEN + 200000 - have < room ? RL_FRAME_HEADER_LEN + 200000 - have : room;
        memset(p, 0xab, k);
        rl__frame_reader_commit(&r, k);
        have += k;
    }
    const uint8_t *payload;
    int ready;
    ASSERT_OK(rl__frame_reader_next(&r, &h, &payload, &ready));
    ASSERT_TRUE(ready);
    ASSERT_EQ(payload[199999], 0xab);
    rl__frame_reader_release(&r);
}

/* A caller that asks for space without draining complete frames (or after a refusal) never loses
 * pending bytes, also when the buffer is large enough to be shrunk. */
TEST(loop_5_6_reader_space_without_draining) {
    rl__frame_reader r;
    rl__frame_reader_init(&r);
    size_t total = 0;
    uint8_t *p;
    size_t room;
    /* 3 MiB of small complete frames, never drained. */
    while (total < (3u << 20)) {
        ASSERT_OK(rl__frame_reader_space(&r, &p, &room));
        ASSERT_TRUE(room >= 1);
        size_t k = room < 100000 ? room : 100000;
        for (size_t i = 0; i < k; i++) {
            size_t at = total + i;
            size_t in = at % 20; /* 20-byte frames: header (payload 4) + 4 bytes */
            p[i] = in == 0 ? 4 : in < RL_FRAME_HEADER_LEN ? 0 : (uint8_t)(at / 20);
        }
        rl__frame_reader_commit(&r, k);
        total += k;
        ASSERT_EQ(rl__frame_reader_pending(&r), total);
    }
    size_t n = 0;
    rl__frame_header h;
    const uint8_t *payload;
    int ready;
    while (rl__frame_reader_next(&r, &h, &payload, &ready) == RL_OK && ready) {
        ASSERT_EQ(h.payload_len, 4);
        ASSERT_EQ(payload[0], (uint8_t)n);
        n++;
    }
    ASSERT_EQ(n, total / 20);
    rl__frame_reader_release(&r);
}

/* Invariant 6: large frames (64 KiB to 1 MiB) that do not arrive with their header are read into
 * their own buffer — after one, the reader offers a header's bytes alone, then the rest of the
 * payload straight into that buffer — and the consumer may take that buffer: it is the payload it
 * was handed, and it outlives the next space. Small frames and the largest (above 1 MiB) stay in
 * the reader's buffer (take gives NULL). Random sizes, random pieces; every payload checked. */
TEST(loop_5_7_reader_own_buffers) {
    uint64_t seed = rl_test_seed();
    static const size_t sizes[] = {10,     5000,   RL_FRAME_READER_OWN_MIN - 1, RL_FRAME_READER_OWN_MIN,
                                   100000, 262144, RL_FRAME_READER_OWN_MAX,     RL_FRAME_READER_OWN_MAX + 1};
    int nsz = (int)(sizeof sizes / sizeof sizes[0]);
    size_t taken = 0, own_reads = 0, header_reads = 0;
    for (int round = 0; round < (LIGHT ? 4 : 12); round++) {
        stream s = {0};
        int nframes = 20 + (int)rl_test_rand_below(&seed, 20);
        size_t *lens = calloc((size_t)nframes, sizeof *lens);
        for (int i = 0; i < nframes; i++) {
            lens[i] = sizes[rl_test_rand_below(&seed, (uint64_t)nsz)];
            rl__frame_header h = {(uint32_t)lens[i], 7, 0, (uint64_t)i};
            uint8_t hdr[RL_FRAME_HEADER_LEN];
            rl__frame_header_encode(&h, hdr);
            st_append(&s, hdr, sizeof hdr);
            uint8_t *pl = malloc(lens[i] ? lens[i] : 1);
            for (size_t k = 0; k < lens[i]; k++) pl[k] = (uint8_t)(i * 31 + k * 7);
            st_append(&s, pl, lens[i]);
            free(pl);
        }
        rl__frame_reader r;
        rl__frame_reader_init(&r);
        size_t pos = 0;
        int got = 0, prev_large = 0;
        uint8_t *kept = NULL; /* the last taken payload: checked after the next space */
        size_t kept_len = 0;
        int kept_i = -1;
        while (pos < s.len) {
            uint8_t *p;
            size_t room;
            size_t pending = rl__frame_reader_pending(&r);
            ASSERT_OK(rl__frame_reader_space(&r, &p, &room));
            if (kept) { /* a taken payload survives the space call */
                for (size_t k = 0; k < kept_len; k += 997) ASSERT_EQ(kept[k], (uint8_t)(kept_i * 31 + k * 7));
                rl__arena_block_free(kept);
                kept = NULL;
            }
            if (prev_large && pending == 0) {
                ASSERT_EQ(room, RL_FRAME_HEADER_LEN);
                header_reads++;
            }
            if (rl__frame_reader_frame_len(&r) > RL_FRAME_HEADER_LEN + RL_FRAME_READER_OWN_MIN - 1 && pending > 0 &&
                rl__frame_reader_frame_len(&r) <= RL_FRAME_HEADER_LEN + RL_FRAME_READER_OWN_MAX) {
                ASSERT_EQ(room, rl__frame_reader_frame_len(&r) - pending); /* the rest, straight in */
                own_reads++;
            }
            size_t want = 1 + rl_test_rand_below(&seed, round % 2 ? 300000 : 5000);
            if (want > room) want = room;
            if (want > s.len - pos) want = s.len - pos;
            memcpy(p, s.data + pos, want);
            rl__frame_reader_commit(&r, want);
            pos += want;
            for (;;) {
                rl__frame_header h;
                const uint8_t *payload;
                int ready;
                ASSERT_OK(rl__frame_reader_next(&r, &h, &payload, &ready));
                if (!ready) break;
                ASSERT_TRUE(got < nframes);
                ASSERT_EQ(h.payload_len, lens[got]);
                ASSERT_TRUE(h.id == (uint64_t)got);
                for (size_t k = 0; k < lens[got]; k++)
                    if (payload[k] != (uint8_t)(got * 31 + k * 7)) fail_msg("frame %d byte %zu differs", got, k);
                int large = lens[got] >= RL_FRAME_READER_OWN_MIN && lens[got] <= RL_FRAME_READER_OWN_MAX;
                uint8_t *own = rl__frame_reader_take(&r);
                if (own) {
                    ASSERT_TRUE(large);
                    ASSERT_TRUE(own == payload);
                    ASSERT_NULL(rl__frame_reader_take(&r)); /* taken once */
                    ASSERT_NULL(kept);
                    kept = own, kept_len = lens[got], kept_i = got;
                    taken++;
                }
                prev_large = large;
                got++;
            }
        }
        ASSERT_EQ(got, nframes);
        ASSERT_EQ(rl__frame_reader_pending(&r), 0);
        rl__arena_block_free(kept);
        rl__frame_reader_release(&r);
        free(lens);
        free(s.data);
    }
    printf("loop_5_7: %zu payloads taken, %zu reads straight into a frame's own buffer, %zu header-only reads\n", taken,
           own_reads, header_reads);
    ASSERT_TRUE(taken > 0 && own_reads > 0 && header_reads > 0);
}

/* ---- behind a socket ---- */

/* Random byte streams (valid frames, then corruption) from raw peers to a loop: each connection
 * delivers exactly the model's frames and is closed once (malformed_frame at a bad header,
 * connection_failed when the stream ends, whole or truncated); a good connection keeps working. */
TEST(loop_5_5_socket_random_streams) {
    uint64_t seed = rl_test_seed();
    lt_loop srv, cli;
    lt_loop_start(&srv, 0);
    lt_loop_start(&cli, 0);
    lt_server s;
    lt_server_start(&s, srv.loop, 0, 1);
    lt_peer *good = lt_connect(cli.loop, s.port, 0, 0);
    long accepted = 1;
    (void)lt_server_peer(&s, accepted);
    int outcomes[2] = {0, 0};
    static size_t offsets[4096];
    for (int round = 0; round < 40; round++) {
        stream st = {0};
        int nframes = (int)rl_test_rand_below(&seed, 30);
        for (int i = 0; i < nframes; i++) st_frame(&st, &seed, 100000);
        int mode = (int)rl_test_rand_below(&seed, 3);
        if (mode == 0) { /* junk tail */
            size_t k = 1 + rl_test_rand_below(&seed, 100);
            for (size_t i = 0; i < k; i++) {
                uint8_t b = (uint8_t)rl_test_rand(&seed);
                st_append(&st, &b, 1);
            }
        } else if (mode == 1 && st.len) { /* truncated */
            st.len = rl_test_rand_below(&seed, st.len);
        } else if (st.len) { /* a flipped bit */
            st.data[rl_test_rand_below(&seed, st.len)] ^= (uint8_t)(1u << rl_test_rand_below(&seed, 8));
        }
        int want_malformed;
        size_t rest;
        size_t nf = model_parse(&st, offsets, 4096, &want_malformed, &rest);
        int fd = lt_raw_connect(s.port);
        lt_peer *p = lt_server_peer(&s, ++accepted);
        /* Write in random pieces; the server may close early (malformed), so ignore write errors. */
        for (size_t off = 0; off < st.len;) {
            size_t k = 1 + rl_test_rand_below(&seed, 20000);
            if (k > st.len - off) k = st.len - off;
            ssize_t w = send(fd, st.data + off, k, MSG_NOSIGNAL);
            if (w <= 0) break;
            off += (size_t)w;
        }
        shutdown(fd, SHUT_WR);
        ASSERT_TRUE(lt_wait_flag(&p->closed, LT_WAIT_MS));
        close(fd);
        int err = atomic_load(&p->close_err);
        int want_err = want_malformed ? RL_E_MALFORMED_FRAME : RL_E_CONNECTION_FAILED;
        if (err != want_err)
            fail_msg("round %d: closed with %s, expected %s (%s)", round, rl_error_name(err), rl_error_name(want_err),
                     rl__conn_close_reason(p->conn));
        outcomes[err == RL_E_MALFORMED_FRAME]++;
        ASSERT_EQ(atomic_load(&p->close_calls), 1);
        ASSERT_EQ((size_t)atomic_load(&p->frame_count), nf);
        for (size_t i = 0; i < nf; i++) {
            rl__frame_header mh;
            ASSERT_EQ(rl__frame_header_decode(st.data + offsets[i], &mh), 0);
            ASSERT_EQ(p->frames[i].h.id == mh.id, 1);
            ASSERT_MEM_EQ(p->frames[i].payload, p->frames[i].h.payload_len, st.data + offsets[i] + RL_FRAME_HEADER_LEN,
                          mh.payload_len);
        }
        free(st.data);
        ASSERT_OK(rl__conn_send(good->conn, 1, 0, (uint64_t)round, "alive", 5));
    }
    lt_peer *gp = NULL;
    pthread_mutex_lock(&s.mu);
    for (lt_peer *q = s.peers; q; q = q->next)
        if (!q->next) gp = q; /* the oldest: the good connection's server side */
    pthread_mutex_unlock(&s.mu);
    ASSERT_TRUE(lt_wait_count(&gp->frame_count, 40, LT_WAIT_MS));
    ASSERT_FALSE(atomic_load(&gp->closed));
    printf("loop_5_5: 40 random streams: %d malformed, %d EOF; the good connection got all 40 frames\n", outcomes[1],
           outcomes[0]);
    lt_loop_finish(&cli);
    lt_loop_finish(&srv);
    lt_peer_free(good);
    lt_server_free_peers(&s);
    LT_ASSERT_NO_BG_ERRORS();
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {T(loop_5_1_reader_valid_streams),  T(loop_5_2_reader_corrupted_streams),
                                       T(loop_5_3_reader_trickle_bound),  T(loop_5_4_reader_out_of_memory),
                                       T(loop_5_5_socket_random_streams), T(loop_5_6_reader_space_without_draining),
                                       T(loop_5_7_reader_own_buffers)};
    rl_test_init(argc, argv);
    rl__log_set_level(RL_LOG_ERROR); /* 40 malformed connections would print 40 warnings */
    return cmocka_run_group_tests_name(rl_test_group_name(argv[0]), tests, NULL, NULL);
}
