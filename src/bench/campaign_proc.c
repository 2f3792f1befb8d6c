/* campaign_proc.c — child processes with deadlines, /proc CPU accounting and machine facts for the
 * campaign (see campaign_proc.h).
 *
 * A child's pipes are read with poll() until both reach end of file or the deadline passes; the
 * child is then reaped with waitpid(WNOHANG) in 1 ms steps until the same deadline. At the
 * deadline the child (the pid fork returned) gets SIGKILL and is reaped.
 */
#include "bench/campaign_proc.h"

#include <errno.h>
#include <math.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/clock.h"
#include "reclayer/error.h"

#define ERR_KEEP 65536 /* bytes of a child's stderr kept */

static double now_s(void) { return (double)rl__clock_mono_ns() / 1e9; }

void rl__camp_child_release(rl__camp_child *c) {
    rl__buf_release(&c->out);
    rl__buf_release(&c->err);
}

/* Keep only the last ERR_KEEP bytes of b. */
static void keep_tail(rl_buf *b) {
    if (b->len <= 2 * ERR_KEEP) return;
    memmove(b->data, b->data + b->len - ERR_KEEP, ERR_KEEP);
    rl__buf_truncate(b, ERR_KEEP);
}

int rl__camp_child_run(char *const argv[], double timeout_s, rl__camp_child *c, rl__errdetail *err) {
    int po[2] = {-1, -1}, pe[2] = {-1, -1}, status = 0;
    double t0 = now_s(), deadline = t0 + timeout_s;
    memset(c, 0, sizeof *c);
    c->exit_code = -1;
    c->cpu_s = NAN;
    rl__buf_init(&c->out);
    rl__buf_init(&c->err);
    if (pipe(po) || pipe(pe)) {
        rl__errdetail_append(err, "cannot make a pipe for %s: %s", argv[0], strerror(errno));
        goto fail;
    }
    pid_t pid = fork();
    if (pid < 0) {
        rl__errdetail_append(err, "cannot start %s: fork: %s", argv[0], strerror(errno));
        goto fail;
    }
    if (pid == 0) {
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull >= 0) dup2(devnull, 0);
        dup2(po[1], 1);
        dup2(pe[1], 2);
        close(po[0]), close(po[1]), close(pe[0]), close(pe[1]);
        if (strchr(argv[0], '/')) execv(argv[0], argv);
        else execvp(argv[0], argv);
        fprintf(stderr, "cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    c->pid = (int)pid;
    close(po[1]), close(pe[1]);
    po[1] = pe[1] = -1;
    struct pollfd fds[2] = {{po[0], POLLIN, 0}, {pe[0], POLLIN, 0}};
    int open_fds = 2;
    while (open_fds > 0) {
        double left = deadline - now_s();
        if (left <= 0) break;
        int n = poll(fds, 2, (int)(left * 1000) + 1);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) break;
        for (int i = 0; i < 2; i++) {
            if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            char buf[16384];
            ssize_t got = read(fds[i].fd, buf, sizeof buf);
            if (got < 0 && errno == EINTR) continue;
            if (got <= 0) {
                close(fds[i].fd);
                fds[i].fd = -1;
                open_fds--;
                continue;
            }
            rl__buf_append(i ? &c->err : &c->out, buf, (size_t)got);
            if (i) keep_tail(&c->err);
        }
    }
    for (int i = 0; i < 2; i++)
        if (fds[i].fd >= 0) close(fds[i].fd);
    po[0] = pe[0] = -1;
    for (;;) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid) break;
        if (w < 0 && errno != EINTR) break;
        if (now_s() >= deadline) {
            kill(pid, SIGKILL);
            c->timed_out = 1;
            while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
            break;
        }
        rl__clock_sleep_us(1000);
    }
    if (WIFEXITED(status) && !c->timed_out) c->exit_code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) c->signal = WTERMSIG(status);
    c->wall_s = now_s() - t0;
    return rl__buf_error(&c->out) || rl__buf_error(&c->err) ? RL_E_OUT_OF_MEMORY : RL_OK;
fail:
    for (int i = 0; i < 2; i++) {
        if (po[i] >= 0) close(po[i]);
        if (pe[i] >= 0) close(pe[i]);
    }
    return RL_E_IO_ERROR;
}

/* ---- Several children at once ----------------------------------------------------------------- */

int rl__camp_children_run(char **const argvs[], int n, double timeout_s, const double *marks_s, int n_marks,
                          void (*at)(void *ud, int j), void *ud, rl__camp_child *c, rl__errdetail *err) {
    double t0 = now_s(), deadline = t0 + timeout_s;
    int rc = RL_OK, started = 0, next_mark = 0;
    struct pollfd *fds = calloc((size_t)n * 2 + 1, sizeof *fds);
    int *done = calloc((size_t)n + 1, sizeof *done);
    for (int i = 0; i < n; i++) {
        memset(&c[i], 0, sizeof c[i]);
        c[i].exit_code = -1;
        c[i].cpu_s = NAN;
        rl__buf_init(&c[i].out);
        rl__buf_init(&c[i].err);
    }
    if (!fds || !done) {
        free(fds);
        free(done);
        rl__errdetail_append(err, "out of memory");
        return RL_E_OUT_OF_MEMORY;
    }
    for (int i = 0; i < n; i++) {
        int po[2], pe[2];
        if (pipe2(po, O_CLOEXEC)) {
            rl__errdetail_append(err, "cannot make a pipe for %s: %s", argvs[i][0], strerror(errno));
            rc = RL_E_IO_ERROR;
            break;
        }
        if (pipe2(pe, O_CLOEXEC)) {
            close(po[0]), close(po[1]);
            rl__errdetail_append(err, "cannot make a pipe for %s: %s", argvs[i][0], strerror(errno));
            rc = RL_E_IO_ERROR;
            break;
        }
        pid_t pid = fork();
        if (pid < 0) {
            close(po[0]), close(po[1]), close(pe[0]), close(pe[1]);
            rl__errdetail_append(err, "cannot start %s: fork: %s", argvs[i][0], strerror(errno));
            rc = RL_E_IO_ERROR;
            break;
        }
        if (pid == 0) {
            int devnull = open("/dev/null", O_RDONLY);
            if (devnull >= 0) dup2(devnull, 0);
            dup2(po[1], 1);
            dup2(pe[1], 2);
            if (strchr(argvs[i][0], '/')) execv(argvs[i][0], argvs[i]);
            else execvp(argvs[i][0], argvs[i]);
            fprintf(stderr, "cannot run %s: %s\n", argvs[i][0], strerror(errno));
            _exit(127);
        }
        close(po[1]), close(pe[1]);
        c[i].pid = (int)pid;
        fds[2 * i] = (struct pollfd){po[0], POLLIN, 0};
        fds[2 * i + 1] = (struct pollfd){pe[0], POLLIN, 0};
        started++;
    }
    int open_fds = 2 * started;
    if (rc) deadline = now_s(); /* a start failed: stop the others now */
    while (open_fds > 0) {
        double now = now_s(), left = deadline - now;
        while (at && next_mark < n_marks && now >= marks_s[next_mark]) at(ud, next_mark++);
        if (left <= 0) break;
        double wait = left;
        if (at && next_mark < n_marks && marks_s[next_mark] - now < wait) wait = marks_s[next_mark] - now;
        int got_n = poll(fds, (nfds_t)(2 * started), (int)(wait * 1000) + 1);
        if (got_n < 0 && errno == EINTR) continue;
        if (got_n < 0) break;
        for (int k = 0; k < 2 * started; k++) {
            if (fds[k].fd < 0 || !(fds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            char buf[16384];
            ssize_t got = read(fds[k].fd, buf, sizeof buf);
            if (got < 0 && errno == EINTR) continue;
            if (got <= 0) {
                close(fds[k].fd);
                fds[k].fd = -1;
                open_fds--;
                continue;
            }
            rl_buf *b = k % 2 ? &c[k / 2].err : &c[k / 2].out;
            rl__buf_append(b, buf, (size_t)got);
            if (k % 2) keep_tail(b);
        }
    }
    for (int k = 0; k < 2 * started; k++)
        if (fds[k].fd >= 0) close(fds[k].fd);
    /* Reap: each child's CPU is read from /proc while it is a zombie (waitid WNOWAIT), then it is
     * reaped; a child still running at the deadline is killed by its pid. */
    for (int left_n = started; left_n > 0;) {
        for (int i = 0; i < started; i++) {
            if (done[i]) continue;
            siginfo_t si;
            memset(&si, 0, sizeof si);
            int killed = 0;
            if (now_s() >= deadline) {
                kill(c[i].pid, SIGKILL);
                c[i].timed_out = !rc;
                killed = 1;
            }
            if (waitid(P_PID, (id_t)c[i].pid, &si, WEXITED | WNOWAIT | (killed ? 0 : WNOHANG)) < 0 && errno == EINTR)
                continue;
            if (si.si_pid != c[i].pid && !killed) continue;
            c[i].cpu_s = rl__camp_proc_cpu_seconds(c[i].pid);
            int status = 0;
            while (waitpid(c[i].pid, &status, 0) < 0 && errno == EINTR) {}
            if (WIFEXITED(status) && !c[i].timed_out) c[i].exit_code = WEXITSTATUS(status);
            if (WIFSIGNALED(status)) c[i].signal = WTERMSIG(status);
            c[i].wall_s = now_s() - t0;
            done[i] = 1;
            left_n--;
        }
        if (left_n > 0) rl__clock_sleep_us(1000);
    }
    while (at && next_mark < n_marks) at(ud, next_mark++); /* every mark is called once */
    for (int i = 0; i < n && !rc; i++)
        if (rl__buf_error(&c[i].out) || rl__buf_error(&c[i].err)) rc = RL_E_OUT_OF_MEMORY;
    free(fds);
    free(done);
    return rc;
}

/* ---- CPU accounting ---------------------------------------------------------------------------- */

/* Fields 14..17 (utime, stime, cutime, cstime) of /proc/PID/stat; *ok cleared on failure. */
static uint64_t proc_ticks(const char *path, int with_children, int *ok) {
    char buf[2048];
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f) fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    unsigned long long v[15];
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %llu %llu", &v[11], &v[12], &v[13],
                     &v[14]) != 4) {
        *ok = 0;
        return 0;
    }
    return v[11] + v[12] + (with_children ? v[13] + v[14] : 0);
}

double rl__camp_proc_cpu_seconds(int pid) {
    char path[64];
    int ok = 1;
    if (pid) snprintf(path, sizeof path, "/proc/%d/stat", pid);
    else snprintf(path, sizeof path, "/proc/self/stat");
    uint64_t t = proc_ticks(path, 0, &ok);
    long hz = sysconf(_SC_CLK_TCK);
    return ok && hz > 0 ? (double)t / (double)hz : NAN;
}

void rl__camp_cpu_snapshot(const int *pids, int n, rl__camp_cpu *out) {
    unsigned long long u = 0, ni = 0, sy = 0, id = 0, io = 0, irq = 0, sirq = 0, steal = 0;
    char path[64];
    memset(out, 0, sizeof *out);
    out->ok = 1;
    FILE *f = fopen("/proc/stat", "r");
    if (!f ||
        fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &u, &ni, &sy, &id, &io, &irq, &sirq, &steal) != 8)
        out->ok = 0;
    if (f) fclose(f);
    out->busy = u + ni + sy + irq + sirq + steal;
    out->self = proc_ticks("/proc/self/stat", 1, &out->ok);
    for (int i = 0; i < n; i++) {
        snprintf(path, sizeof path, "/proc/%d/stat", pids[i]);
        out->others_owned += proc_ticks(path, 0, &out->ok);
    }
    out->mono_s = now_s();
    if (!out->ok) out->busy = out->self = out->others_owned = 0;
}

void rl__camp_cpu_between(const rl__camp_cpu *a, const rl__camp_cpu *b, rl__camp_cpu_use *out) {
    long hz = sysconf(_SC_CLK_TCK);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    memset(out, 0, sizeof *out);
    out->cores = cores > 0 ? (int)cores : 1;
    out->wall_s = b->mono_s - a->mono_s;
    out->ok = a->ok && b->ok && hz > 0 && b->busy >= a->busy;
    if (!out->ok) return;
    out->busy_s = (double)(b->busy - a->busy) / (double)hz;
    out->campaign_s = (double)((b->self - a->self) + (b->others_owned - a->others_owned)) / (double)hz;
    out->other_s = out->busy_s > out->campaign_s ? out->busy_s - out->campaign_s : 0;
    out->other_fraction = out->wall_s > 0 ? out->other_s / ((double)out->cores * out->wall_s) : 0;
}

/* ---- Machine facts ----------------------------------------------------------------------------- */

void rl__camp_machine(rl_buf *cpu_model, rl_buf *kernel, uint64_t *out_mem_bytes, int *out_cores) {
    char line[512];
    struct utsname u;
    size_t before = cpu_model->len;
    FILE *f = fopen("/proc/cpuinfo", "r");
    while (f && fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) || !colon) continue;
        colon += 2;
        colon[strcspn(colon, "\n")] = 0;
        rl__buf_append_str(cpu_model, colon);
        break;
    }
    if (f) fclose(f);
    if (cpu_model->len == before) rl__buf_append_str(cpu_model, "unknown");
    if (uname(&u) == 0) rl__buf_printf(kernel, "%s %s %s %s", u.sysname, u.release, u.version, u.machine);
    else rl__buf_append_str(kernel, "unknown");
    *out_mem_bytes = 0;
    f = fopen("/proc/meminfo", "r");
    unsigned long long kb;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemTotal: %llu kB", &kb) == 1) {
            *out_mem_bytes = (uint64_t)kb * 1024;
            break;
        }
    if (f) fclose(f);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    *out_cores = cores > 0 ? (int)cores : 0;
}

int rl__camp_self_exe(rl_buf *out) {
    char path[4096];
    ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
    if (n <= 0) return RL_E_IO_ERROR;
    path[n] = 0;
    rl__buf_append_str(out, path);
    return rl__buf_error(out);
}
