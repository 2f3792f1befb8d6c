/* scratch.c — the benchmarks' scratch directories (see scratch.h).
 *
 * Removal walks the tree with openat/fdopendir/unlinkat relative to directory descriptors, so it
 * never follows a symbolic link out of the tree (an entry is examined with AT_SYMLINK_NOFOLLOW and
 * only real directories are descended into).
 */
#include "bench/scratch.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "reclayer/error.h"

static int map_errno(int e) {
    switch (e) {
    case ENOENT: return RL_E_FILE_NOT_FOUND;
    case ENOTDIR: return RL_E_INVALID_ARGUMENT;
    case ENOSPC:
    case EDQUOT: return RL_E_NO_SPACE;
    case ENOMEM: return RL_E_OUT_OF_MEMORY;
    default: return RL_E_IO_ERROR;
    }
}

int rl__bench_scratch_create(const char *base, const char *name, rl_buf *out, rl__errdetail *err) {
    if (!base) {
        const char *t = getenv("TMPDIR");
        base = t && *t ? t : "/tmp";
    }
    if (!*base) {
        rl__errdetail_set(err, "the scratch base directory is empty");
        return RL_E_INVALID_ARGUMENT;
    }
    size_t start = out->len;
    rl__buf_printf(out, "%s%srlbench-%s-XXXXXX", base, base[strlen(base) - 1] == '/' ? "" : "/", name);
    if (rl__buf_error(out)) return RL_E_OUT_OF_MEMORY;
    char *path = (char *)out->data + start;
    if (!mkdtemp(path)) {
        int e = errno;
        /* mkdtemp may have filled in the Xs: name the template. */
        rl__errdetail_set(err, "cannot create %s%srlbench-%s-XXXXXX: %s", base,
                          base[strlen(base) - 1] == '/' ? "" : "/", name, strerror(e));
        rl__buf_truncate(out, start);
        return map_errno(e);
    }
    return RL_OK;
}

/* Remove every entry of the directory open as dfd (named path, for messages); closes dfd.
 * Returns the first error (RL_OK if none); *first_msg set once. */
static int remove_entries(int dfd, const char *path, rl__errdetail *err, int *have_msg) {
    int rc = RL_OK;
    DIR *d = fdopendir(dfd);
    if (!d) {
        int e = errno;
        close(dfd);
        if (!*have_msg) rl__errdetail_set(err, "cannot read %s: %s", path, strerror(e)), *have_msg = 1;
        return RL_E_IO_ERROR;
    }
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        const char *n = de->d_name;
        if (!strcmp(n, ".") || !strcmp(n, "..")) continue;
        struct stat sb;
        char sub[4096];
        snprintf(sub, sizeof sub, "%s/%s", path, n);
        if (fstatat(dirfd(d), n, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(sb.st_mode)) {
            int cfd = openat(dirfd(d), n, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
            if (cfd >= 0) {
                int e2 = remove_entries(cfd, sub, err, have_msg);
                if (e2 && !rc) rc = e2;
            }
            if (unlinkat(dirfd(d), n, AT_REMOVEDIR) != 0) {
                if (!*have_msg) rl__errdetail_set(err, "cannot remove %s: %s", sub, strerror(errno)), *have_msg = 1;
                rc = rc ? rc : RL_E_IO_ERROR;
            }
        } else if (unlinkat(dirfd(d), n, 0) != 0 && errno != ENOENT) {
            if (!*have_msg) rl__errdetail_set(err, "cannot remove %s: %s", sub, strerror(errno)), *have_msg = 1;
            rc = rc ? rc : RL_E_IO_ERROR;
        }
    }
    closedir(d);
    return rc;
}

int rl__bench_scratch_remove(const char *path, rl__errdetail *err) {
    int have_msg = 0, rc;
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
    if (fd < 0) {
        if (errno == ENOENT) return RL_OK;
        rl__errdetail_set(err, "cannot open %s: %s", path, strerror(errno));
        return RL_E_IO_ERROR;
    }
    rc = remove_entries(fd, path, err, &have_msg);
    if (rmdir(path) != 0) {
        if (!have_msg) rl__errdetail_set(err, "cannot remove %s: %s", path, strerror(errno));
        rc = rc ? rc : RL_E_IO_ERROR;
    }
    return rc;
}
