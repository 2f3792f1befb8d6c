/* tcp_floor.c — the raw-TCP floor probe (tcp_floor.h): one loopback connection, a thread that
 * answers each 8-byte request for n bytes with n bytes, timed from the client's side.
 */
#include "bench/tcp_floor.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "reclayer/error.h"

#define IO_BYTES (1u << 20)

struct rl__tcp_floor {
    int cfd, sfd; /* the client's end, the server thread's end */
    pthread_t th;
    int started;
    uint8_t *cbuf, *sbuf; /* IO_BYTES each */
};

static int write_all(int fd, const uint8_t *p, size_t n) {
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL); /* a closed peer is an error, not SIGPIPE */
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w, n -= (size_t)w;
    }
    return 0;
}

static int read_all(int fd, uint8_t *p, size_t n) {
    while (n) {
        ssize_t r = read(fd, p, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        p += r, n -= (size_t)r;
    }
    return 0;
}

/* The answering thread: until the client closes, read a request (n, big-endian) and write n
 * bytes. */
static void *serve(void *arg) {
    rl__tcp_floor *f = arg;
    uint8_t req[8];
    while (read_all(f->sfd, req, sizeof req) == 0) {
        uint64_t n = 0;
        for (int i = 0; i < 8; i++) n = n << 8 | req[i];
        while (n) {
            size_t k = n < IO_BYTES ? (size_t)n : IO_BYTES;
            if (write_all(f->sfd, f->sbuf, k)) return NULL;
            n -= k;
        }
    }
    return NULL;
}

static int fail(rl__errdetail *err, const char *what) {
    rl__errdetail_set(err, "raw TCP floor: %s: %s", what, strerror(errno));
    return RL_E_CONNECTION_FAILED;
}

int rl__tcp_floor_open(rl__tcp_floor **out, rl__errdetail *err) {
    *out = NULL;
    rl__tcp_floor *f = rl__calloc(1, sizeof *f);
    if (!f) return RL_E_OUT_OF_MEMORY;
    f->cfd = f->sfd = -1;
    f->cbuf = rl__malloc(IO_BYTES);
    f->sbuf = rl__calloc(1, IO_BYTES);
    if (!f->cbuf || !f->sbuf) {
        rl__tcp_floor_close(f);
        return RL_E_OUT_OF_MEMORY;
    }
    int rc = RL_OK, one = 1;
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a;
    socklen_t al = sizeof a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (lfd < 0) rc = fail(err, "socket");
    else if (bind(lfd, (struct sockaddr *)&a, sizeof a) || listen(lfd, 1)) rc = fail(err, "bind/listen on 127.0.0.1");
    else if (getsockname(lfd, (struct sockaddr *)&a, &al)) rc = fail(err, "getsockname");
    else if ((f->cfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0) rc = fail(err, "socket");
    else if (connect(f->cfd, (struct sockaddr *)&a, sizeof a)) rc = fail(err, "connect");
    else if ((f->sfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC)) < 0) rc = fail(err, "accept");
    if (lfd >= 0) close(lfd);
    if (!rc) {
        /* As reclayer's connections: no Nagle delay on the small request. */
        (void)setsockopt(f->cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        (void)setsockopt(f->sfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (pthread_create(&f->th, NULL, serve, f)) {
            rl__errdetail_set(err, "raw TCP floor: cannot start its thread");
            rc = RL_E_OUT_OF_MEMORY;
        } else f->started = 1;
    }
    if (rc) {
        rl__tcp_floor_close(f);
        return rc;
    }
    *out = f;
    return RL_OK;
}

static int one_op(rl__tcp_floor *f, uint64_t bytes) {
    uint8_t req[8];
    for (int i = 0; i < 8; i++) req[i] = (uint8_t)(bytes >> (56 - 8 * i));
    if (write_all(f->cfd, req, sizeof req)) return -1;
    while (bytes) {
        ssize_t r = read(f->cfd, f->cbuf, bytes < IO_BYTES ? (size_t)bytes : IO_BYTES);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        bytes -= (uint64_t)r;
    }
    return 0;
}

int rl__tcp_floor_measure(rl__tcp_floor *f, uint64_t bytes, double seconds, double *out_ns, rl__errdetail *err) {
    if (!bytes) {
        rl__errdetail_set(err, "raw TCP floor: no bytes to move");
        return RL_E_INVALID_ARGUMENT;
    }
    if (one_op(f, bytes)) return fail(err, "the first transfer"); /* warm, outside the clock */
    uint64_t budget = (uint64_t)(seconds * 1e9), ops = 0, t0 = rl__clock_mono_ns(), t1;
    do {
        if (one_op(f, bytes)) return fail(err, "a transfer");
        ops++;
        t1 = rl__clock_mono_ns();
    } while (t1 - t0 < budget || ops < 3);
    *out_ns = (double)(t1 - t0) / (double)ops;
    return RL_OK;
}

void rl__tcp_floor_close(rl__tcp_floor *f) {
    if (!f) return;
    if (f->cfd >= 0) shutdown(f->cfd, SHUT_RDWR); /* the thread's read ends */
    if (f->started) pthread_join(f->th, NULL);
    if (f->cfd >= 0) close(f->cfd);
    if (f->sfd >= 0) close(f->sfd);
    rl__free(f->cbuf);
    rl__free(f->sbuf);
    rl__free(f);
}
