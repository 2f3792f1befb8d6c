/* sock.c — socket setup for the network runtime: loopback address checks, listening, connecting,
 * accepting, errno mapping and the thread-local detail message (loop_int.h). The only place that
 * knows socket options and errno values; everything above it sees error codes.
 *
 * Loopback only: every address must be IPv4 inside 127.0.0.0/8. Servers and clients of a local
 * cluster never talk to anything else (docs/design.md §8.1), and refusing other addresses
 * here makes a misconfiguration an error instead of an exposed port.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net/loop_int.h"
#include "reclayer/error.h"

int rl__net_loopback_addr(const char *ip, uint16_t port, struct sockaddr_in *out, rl__errdetail *d) {
    struct in_addr a;
    if (!ip || inet_pton(AF_INET, ip, &a) != 1) {
        rl__errdetail_set(d, "address %s is not a dotted IPv4 address (loopback 127.0.0.0/8 only)", ip ? ip : "(null)");
        return RL_E_INVALID_ARGUMENT;
    }
    if ((ntohl(a.s_addr) >> 24) != 127) {
        rl__errdetail_set(d, "address %s is outside 127.0.0.0/8: servers and clients use loopback only", ip);
        return RL_E_INVALID_ARGUMENT;
    }
    memset(out, 0, sizeof *out);
    out->sin_family = AF_INET;
    out->sin_addr = a;
    out->sin_port = htons(port);
    return RL_OK;
}

void rl__net_format_addr(const struct sockaddr_in *sa, char *buf, size_t cap) {
    char ip[INET_ADDRSTRLEN];
    if (!inet_ntop(AF_INET, &sa->sin_addr, ip, sizeof ip)) snprintf(ip, sizeof ip, "?");
    snprintf(buf, cap, "%s:%u", ip, (unsigned)ntohs(sa->sin_port));
}

int rl__net_map_errno(int e, int dflt) {
    switch (e) {
    case EADDRINUSE: return RL_E_ADDRESS_IN_USE;
    case ENOMEM:
    case ENOBUFS: return RL_E_OUT_OF_MEMORY;
    case ETIMEDOUT: return RL_E_TIMED_OUT;
    case ECONNREFUSED:
    case ECONNRESET:
    case ECONNABORTED:
    case EPIPE:
    case ENETUNREACH:
    case EHOSTUNREACH:
    case ENOTCONN: return RL_E_CONNECTION_FAILED;
    default: return dflt;
    }
}

static int set_nodelay(int fd) {
    int one = 1;
    return setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

int rl__net_listen_socket(const struct sockaddr_in *sa, int *out_fd, uint16_t *out_port, rl__errdetail *d) {
    char addr[32];
    rl__net_format_addr(sa, addr, sizeof addr);
    int rc, one = 1;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        rl__errdetail_set(d, "socket for %s: %s", addr, strerror(errno));
        return rl__net_map_errno(errno, RL_E_BIND_FAILED);
    }
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0) {
        rl__errdetail_set(d, "SO_REUSEADDR on %s: %s", addr, strerror(errno));
        rc = RL_E_BIND_FAILED;
        goto fail;
    }
    if (bind(fd, (const struct sockaddr *)sa, sizeof *sa) != 0) {
        rl__errdetail_set(d, "bind %s: %s", addr, strerror(errno));
        rc = rl__net_map_errno(errno, RL_E_BIND_FAILED);
        goto fail;
    }
    if (listen(fd, SOMAXCONN) != 0) {
        rl__errdetail_set(d, "listen %s: %s", addr, strerror(errno));
        rc = rl__net_map_errno(errno, RL_E_BIND_FAILED);
        goto fail;
    }
    struct sockaddr_in bound;
    socklen_t blen = sizeof bound;
    if (getsockname(fd, (struct sockaddr *)&bound, &blen) != 0) {
        rl__errdetail_set(d, "getsockname %s: %s", addr, strerror(errno));
        rc = RL_E_BIND_FAILED;
        goto fail;
    }
    *out_fd = fd;
    *out_port = ntohs(bound.sin_port);
    return RL_OK;
fail:
    close(fd);
    return rc;
}

int rl__net_connect_socket(const struct sockaddr_in *sa, int *out_fd, int *out_state, rl__errdetail *d) {
    char addr[32];
    rl__net_format_addr(sa, addr, sizeof addr);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        rl__errdetail_set(d, "socket for %s: %s", addr, strerror(errno));
        return rl__net_map_errno(errno, RL_E_CONNECTION_FAILED);
    }
    (void)set_nodelay(fd); /* set before connecting; a failure only costs latency */
    int r;
    do r = connect(fd, (const struct sockaddr *)sa, sizeof *sa);
    while (r != 0 && errno == EINTR);
    if (r == 0) *out_state = 0;
    else if (errno == EINPROGRESS) *out_state = 1;
    else {
        rl__errdetail_set(d, "connect %s: %s", addr, strerror(errno));
        *out_state = rl__net_map_errno(errno, RL_E_CONNECTION_FAILED);
        if (*out_state == RL_E_TIMED_OUT) *out_state = RL_E_CONNECTION_FAILED;
    }
    *out_fd = fd;
    return RL_OK;
}

int rl__net_accept(int lfd, int *out_fd, int *out_errno) {
    for (;;) {
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
            (void)set_nodelay(fd);
            *out_fd = fd;
            return RL_OK;
        }
        *out_errno = errno;
        if (errno == EINTR) continue;
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) return RL_E_OPERATION_FAILED;
        return RL_E_NOT_FOUND; /* EAGAIN, or a connection that died in the queue (ECONNABORTED …) */
    }
}

void rl__net_sock_names(int fd, char *local, char *peer, size_t cap) {
    struct sockaddr_in sa;
    socklen_t len = sizeof sa;
    local[0] = peer[0] = 0;
    if (getsockname(fd, (struct sockaddr *)&sa, &len) == 0 && sa.sin_family == AF_INET)
        rl__net_format_addr(&sa, local, cap);
    len = sizeof sa;
    if (getpeername(fd, (struct sockaddr *)&sa, &len) == 0 && sa.sin_family == AF_INET)
        rl__net_format_addr(&sa, peer, cap);
}
