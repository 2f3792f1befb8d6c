/* keyfile.c — creating and reading the cluster's key file (keyfile.h gives the format and the
 * rules; docs/file-format.md "Key file" the same for readers of the disk). */
#include "server/keyfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/bytes.h"
#include "reclayer/error.h"
#include "storage/os.h"

#define KF_WHO "key file"
#define KF_MAX_BYTES 4096 /* a key file is a few lines; anything longer is not one */

static int failf(rl__errdetail *err, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int failf(rl__errdetail *err, int rc, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        rl__errdetail_vappend(err, fmt, ap);
        va_end(ap);
    }
    return rc;
}

/* 1 if s (n bytes) is [A-Za-z0-9_]+ of at most 64 characters (FoundationDB's description rule). */
static int description_ok(const char *s, size_t n) {
    if (n == 0 || n > 64) return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return 0;
    }
    return 1;
}

int rl__keyfile_create(const char *path, const char *description, rl__keyfile *out, rl__errdetail *err) {
    rl__keyfile k;
    memset(&k, 0, sizeof k);
    if (!description || !description_ok(description, strlen(description)))
        return failf(err, RL_E_INVALID_ARGUMENT, "cluster description '%s' is not [A-Za-z0-9_]+ (at most 64)",
                     description ? description : "");
    struct stat sb;
    if (lstat(path, &sb) == 0)
        return failf(err, RL_E_ALREADY_EXISTS, "%s exists: a cluster's secrets are never overwritten", path);
    char id[RL_AUTH_ID_MIN + 1];
    int rc = rl__auth_random_id(id, RL_AUTH_ID_MIN);
    if (rc == RL_OK) rc = rl__auth_random(k.secret, sizeof k.secret);
    if (rc != RL_OK) return failf(err, rc, "no random bytes for the cluster's secrets");
    snprintf(k.name, sizeof k.name, "%s:%s", description, id);
    if ((rc = rl__auth_init(&k.auth, k.name, strlen(k.name), k.secret, sizeof k.secret)) != RL_OK)
        return failf(err, rc, "cannot derive the cluster's keys");
    rl_buf text;
    rl__buf_init(&text);
    rl__keyfile_format(&k, &text);
    rc = rl__buf_error(&text) ? RL_E_OUT_OF_MEMORY : rl__os_write_file_private(path, text.data, text.len, KF_WHO, err);
    memset(text.data, 0, text.len);
    rl__buf_release(&text);
    if (rc == RL_OK && out) *out = k;
    memset(&k, 0, sizeof k);
    return rc;
}

void rl__keyfile_format(const rl__keyfile *k, rl_buf *out) {
    rl__buf_printf(out,
                   "# reclayer key file: this cluster's name and member secret. Keep it mode 0600: whoever\n"
                   "# reads it can serve as a storage server, read and drop the commit log, and administer\n"
                   "# the cluster. The cluster file (clients) holds only the name.\n"
                   "cluster %s\nsecret ",
                   k->name);
    rl__buf_append_hex(out, k->secret, sizeof k->secret);
    rl__buf_append_str(out, "\n");
}

/* Split off the next line of [*p, end): its start and length without the newline. 0 at the end. */
static int next_line(const char **p, const char *end, const char **line, size_t *len) {
    if (*p >= end) return 0;
    const char *nl = memchr(*p, '\n', (size_t)(end - *p));
    *line = *p;
    *len = nl ? (size_t)(nl - *p) : (size_t)(end - *p);
    *p = nl ? nl + 1 : end;
    if (*len && (*line)[*len - 1] == '\r') (*len)--;
    return 1;
}

/* Parse the text of a key file into k (keyfile.h: rl__keyfile_parse). */
static int parse(const char *path, const char *text, size_t n, rl__keyfile *k, rl__errdetail *err) {
    const char *p = text, *end = text + n, *line;
    size_t len;
    int have_name = 0, have_secret = 0, lineno = 0;
    while (next_line(&p, end, &line, &len)) {
        lineno++;
        while (len && (line[len - 1] == ' ' || line[len - 1] == '\t')) len--;
        if (len == 0 || line[0] == '#') continue;
        if (len > 8 && !memcmp(line, "cluster ", 8)) {
            const char *name = line + 8;
            size_t nl = len - 8;
            const char *colon = memchr(name, ':', nl);
            if (have_name || !colon || !description_ok(name, (size_t)(colon - name)) ||
                !rl__auth_id_ok(colon + 1, nl - (size_t)(colon - name) - 1) || nl >= sizeof k->name)
                return failf(err, RL_E_INVALID_ARGUMENT,
                             "%s line %d: 'cluster' must be given once, as description:ID with an ID of at least %d "
                             "letters and digits",
                             path, lineno, RL_AUTH_ID_MIN);
            memcpy(k->name, name, nl);
            k->name[nl] = 0;
            have_name = 1;
        } else if (len > 7 && !memcmp(line, "secret ", 7)) {
            rl_buf b;
            rl__buf_init(&b);
            int rc = rl__bytes_from_hex(&b, line + 7, len - 7);
            int ok = rc == RL_OK && b.len == RL_AUTH_SECRET_LEN && !have_secret;
            if (ok) memcpy(k->secret, b.data, RL_AUTH_SECRET_LEN);
            if (b.data) memset(b.data, 0, b.len);
            rl__buf_release(&b);
            if (!ok)
                return failf(err, RL_E_INVALID_ARGUMENT, "%s line %d: 'secret' must be given once, as %d hex digits",
                             path, lineno, 2 * RL_AUTH_SECRET_LEN);
            have_secret = 1;
        } else {
            return failf(err, RL_E_INVALID_ARGUMENT, "%s line %d: not a 'cluster', 'secret' or comment line", path,
                         lineno);
        }
    }
    if (!have_name || !have_secret)
        return failf(err, RL_E_INVALID_ARGUMENT, "%s has no '%s' line: not a reclayer key file", path,
                     have_name ? "secret" : "cluster");
    int rc = rl__auth_init(&k->auth, k->name, strlen(k->name), k->secret, sizeof k->secret);
    return rc == RL_OK ? RL_OK : failf(err, rc, "%s: cannot derive the cluster's keys", path);
}

int rl__keyfile_parse(const char *path, const char *text, size_t n, rl__keyfile *out, rl__errdetail *err) {
    memset(out, 0, sizeof *out);
    int rc = parse(path, text, n, out, err);
    if (rc != RL_OK) memset(out, 0, sizeof *out);
    return rc;
}

int rl__keyfile_read(const char *path, rl__keyfile *out, rl__errdetail *err) {
    memset(out, 0, sizeof *out);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        int e = errno;
        int rc = e == ENOENT ? RL_E_FILE_NOT_FOUND : e == EACCES ? RL_E_PERMISSION_DENIED : RL_E_IO_ERROR;
        return failf(err, rc, "cannot open the key file %s: %s", path, strerror(e));
    }
    struct stat sb;
    char text[KF_MAX_BYTES + 1];
    ssize_t n = -1;
    int rc = RL_OK;
    if (fstat(fd, &sb) != 0) {
        rc = failf(err, RL_E_IO_ERROR, "cannot stat the key file %s: %s", path, strerror(errno));
    } else if (!S_ISREG(sb.st_mode)) {
        rc = failf(err, RL_E_INVALID_ARGUMENT, "the key file %s is not a regular file", path);
    } else if (sb.st_mode & 077) {
        rc = failf(err, RL_E_INVALID_ARGUMENT,
                   "the key file %s may be read or written by group or others (mode %04o): it holds the cluster's "
                   "secrets; chmod 600 %s",
                   path, (unsigned)(sb.st_mode & 07777), path);
    } else if ((n = read(fd, text, sizeof text)) < 0) {
        rc = failf(err, RL_E_IO_ERROR, "cannot read the key file %s: %s", path, strerror(errno));
    } else if (n > KF_MAX_BYTES) {
        rc = failf(err, RL_E_INVALID_ARGUMENT, "%s is longer than %d bytes: not a reclayer key file", path,
                   KF_MAX_BYTES);
    }
    close(fd);
    if (rc == RL_OK) rc = parse(path, text, (size_t)n, out, err);
    memset(text, 0, sizeof text);
    if (rc != RL_OK) memset(out, 0, sizeof *out);
    return rc;
}

int rl__keyfile_in_dir(const char *dir, char *out, size_t cap) {
    int n = snprintf(out, cap, "%s/%s", dir, RL_KEYFILE_NAME);
    return n > 0 && (size_t)n < cap ? RL_OK : RL_E_INVALID_ARGUMENT;
}

int rl__keyfile_next_to(const char *cluster_file, char *out, size_t cap) {
    const char *slash = strrchr(cluster_file, '/');
    int n = slash ? snprintf(out, cap, "%.*s/%s", (int)(slash - cluster_file), cluster_file, RL_KEYFILE_NAME)
                  : snprintf(out, cap, "%s", RL_KEYFILE_NAME);
    return n > 0 && (size_t)n < cap ? RL_OK : RL_E_INVALID_ARGUMENT;
}
