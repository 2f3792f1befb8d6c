/* clusterfile.c — parsing and formatting the cluster file (clusterfile.h states the form). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "kv/cluster/clusterfile.h"
#include "reclayer/error.h"

int rl__ip_is_loopback(const char *ip) {
    int parts = 0, v = -1, digits = 0, first = -1;
    for (const char *p = ip;; p++) {
        if (*p >= '0' && *p <= '9') {
            if (digits == 1 && v == 0) return 0; /* leading zero */
            v = (v < 0 ? 0 : v) * 10 + (*p - '0');
            if (++digits > 3 || v > 255) return 0;
        } else if (*p == '.' || *p == 0) {
            if (digits == 0) return 0;
            if (parts == 0) first = v;
            parts++;
            v = -1, digits = 0;
            if (*p == 0) break;
            if (parts == 4) return 0;
        } else {
            return 0;
        }
    }
    return parts == 4 && first == 127;
}

static int word_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

static int bad(rl__errdetail *err, const char *what) {
    rl__errdetail_append(err, "cluster file: %s (expected description:id@127.x.y.z:PORT)", what);
    return RL_E_CONNECTION_STRING_INVALID;
}

int rl__cluster_file_parse(const char *text, size_t len, rl__cluster_file *out, rl__errdetail *err) {
    memset(out, 0, sizeof *out);
    /* The first line that is neither empty nor a comment. */
    const char *p = text, *end = text + len, *line = NULL, *le = NULL;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *e = nl ? nl : end;
        const char *s = p;
        while (s < e && (*s == ' ' || *s == '\t' || *s == '\r')) s++;
        const char *t = e;
        while (t > s && (t[-1] == ' ' || t[-1] == '\t' || t[-1] == '\r')) t--;
        if (t > s && *s != '#') {
            if (line) return bad(err, "more than one connection string");
            line = s, le = t;
        }
        p = nl ? nl + 1 : end;
    }
    if (!line) return bad(err, "no connection string");
    const char *colon = memchr(line, ':', (size_t)(le - line));
    const char *at = memchr(line, '@', (size_t)(le - line));
    if (!colon || !at || at < colon) return bad(err, "missing ':' or '@'");
    size_t dl = (size_t)(colon - line), il = (size_t)(at - colon - 1);
    if (dl == 0 || dl > RL_CLUSTER_FIELD_MAX || il == 0 || il > RL_CLUSTER_FIELD_MAX)
        return bad(err, "description and id must be 1 to 64 characters");
    for (size_t i = 0; i < dl; i++)
        if (!word_char(line[i])) return bad(err, "the description may hold only A-Z, a-z, 0-9 and _");
    for (size_t i = 0; i < il; i++)
        if (!word_char(colon[1 + i])) return bad(err, "the id may hold only A-Z, a-z, 0-9 and _");
    memcpy(out->description, line, dl);
    memcpy(out->id, colon + 1, il);
    const char *addr = at + 1;
    const char *pc = NULL;
    for (const char *q = le; q > addr; q--)
        if (q[-1] == ':') {
            pc = q - 1;
            break;
        }
    if (!pc || pc == addr) return bad(err, "the coordinator address must be IP:PORT");
    size_t ipl = (size_t)(pc - addr);
    if (ipl >= sizeof out->ip) return bad(err, "the coordinator IP is not dotted IPv4");
    memcpy(out->ip, addr, ipl);
    out->ip[ipl] = 0;
    if (!rl__ip_is_loopback(out->ip)) return bad(err, "the coordinator IP must be dotted IPv4 inside 127.0.0.0/8");
    unsigned long port = 0;
    const char *q = pc + 1;
    if (q == le) return bad(err, "the port is missing");
    for (; q < le; q++) {
        if (*q < '0' || *q > '9') return bad(err, "the port is not a number");
        port = port * 10 + (unsigned long)(*q - '0');
        if (port > 65535) return bad(err, "the port is out of range [1, 65535]");
    }
    if (port == 0) return bad(err, "the port is out of range [1, 65535]");
    out->port = (uint16_t)port;
    return RL_OK;
}

int rl__cluster_file_read(const char *path, rl__cluster_file *out, rl__errdetail *err) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        int e = errno;
        rl__errdetail_append(err, "cluster file %s: %s", path, strerror(e));
        return e == ENOENT ? RL_E_FILE_NOT_FOUND : RL_E_IO_ERROR;
    }
    char text[4096];
    size_t n = fread(text, 1, sizeof text, f);
    int failed = ferror(f), more = !feof(f) && fgetc(f) != EOF;
    fclose(f);
    if (failed) {
        rl__errdetail_append(err, "cluster file %s: read error", path);
        return RL_E_IO_ERROR;
    }
    if (more) return bad(err, "the file is longer than 4096 bytes");
    return rl__cluster_file_parse(text, n, out, err);
}

void rl__cluster_file_format(const rl__cluster_file *cf, rl_buf *out) {
    rl__buf_printf(out, "%s:%s@%s:%u\n", cf->description, cf->id, cf->ip, (unsigned)cf->port);
}
