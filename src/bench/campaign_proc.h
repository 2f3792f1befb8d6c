/* campaign_proc.h (internal) — what the campaign needs from the operating system: child processes
 * with a deadline (workers, git, gnuplot), the CPU accounting of /proc behind the contamination
 * check, and the machine facts of the manifest. Linux only (/proc); where /proc is missing the
 * CPU check is recorded as unverifiable, never guessed.
 *
 * Every wait has a deadline. A child still running at its deadline is killed with SIGKILL by the
 * pid fork returned (never by name), then reaped.
 */
#ifndef RL_BENCH_CAMPAIGN_PROC_H
#define RL_BENCH_CAMPAIGN_PROC_H

#include <stdint.h>

#include "base/buf.h"
#include "base/errdetail.h"

/* How a child ended. Caller-owned; rl__camp_child_release frees the buffers. */
typedef struct {
    int pid;       /* the child's pid (0 if fork failed) */
    int exit_code; /* its exit status, or -1 when it was signalled or not started */
    int signal;    /* the signal that ended it (0: none) */
    int timed_out; /* 1: still running at the deadline, killed */
    double wall_s; /* from fork to reaping */
    double cpu_s;  /* rl__camp_children_run: utime+stime at exit (NaN: unknown); NaN otherwise */
    rl_buf out;    /* its stdout */
    rl_buf err;    /* its stderr (the last 64 KiB) */
} rl__camp_child;

/* rl__camp_child_run — run argv[0] (a path, or a name looked up in PATH) with argv, stdin from
 * /dev/null, capturing stdout and stderr, for at most timeout_s seconds. [out] c: initialised
 * here (release it in every case). Returns RL_OK when the child ran (whatever its exit code: read
 * c), RL_E_IO_ERROR when it could not be started (pipe or fork failed, err says why; an exec
 * failure is exit code 127 with the reason on its stderr), RL_E_OUT_OF_MEMORY. */
int rl__camp_child_run(char *const argv[], double timeout_s, rl__camp_child *c, rl__errdetail *err);
void rl__camp_child_release(rl__camp_child *c);

/* rl__camp_proc_cpu_seconds — utime+stime of process pid (0: this process) from /proc/PID/stat, in
 * seconds; NaN when it cannot be read. A process that has exited but is not reaped yet still
 * shows its final counts. */
double rl__camp_proc_cpu_seconds(int pid);

/* rl__camp_children_run — run n children at once, each as rl__camp_child_run runs one (argvs[i]),
 * for at most timeout_s seconds in all; [out] c[i] initialised here (release each in every case);
 * c[i].cpu_s is its utime+stime from /proc/PID/stat read once it has exited and before it is
 * reaped (NaN if unread; killed children too). at (may be NULL) is called with ud and j when the
 * monotonic clock passes marks_s[j] (rl__clock_mono_ns seconds, increasing; n_marks of them) while
 * the children run — the runner samples its servers' CPU there. Returns RL_OK when every child was
 * started (whatever they did: read c), else the first start's error (the children already started
 * are killed by pid and reaped). */
int rl__camp_children_run(char **const argvs[], int n, double timeout_s, const double *marks_s, int n_marks,
                          void (*at)(void *ud, int j), void *ud, rl__camp_child *c, rl__errdetail *err);

/* A snapshot of the CPU counters, in clock ticks (sysconf(_SC_CLK_TCK)). */
typedef struct {
    int ok;                /* 0: /proc could not be read (the rest is zero) */
    uint64_t busy;         /* /proc/stat "cpu": user+nice+system+irq+softirq+steal */
    uint64_t self;         /* this process: utime+stime+cutime+cstime (reaped children included) */
    uint64_t others_owned; /* the campaign's other processes (servers it started): utime+stime */
    double mono_s;         /* monotonic clock, seconds */
} rl__camp_cpu;

/* rl__camp_cpu_snapshot — read the counters now; pids[0..n) are the campaign's processes that are
 * not this process's reaped children (cluster servers). A pid that cannot be read counts 0 and
 * clears ok. Never fails otherwise. */
void rl__camp_cpu_snapshot(const int *pids, int n, rl__camp_cpu *out);

/* What the machine did between two snapshots. */
typedef struct {
    int ok;                /* both snapshots were complete */
    double wall_s;         /* b - a, monotonic */
    double busy_s;         /* CPU seconds used on the machine (all cores) */
    double campaign_s;     /* ... by the campaign's processes */
    double other_s;        /* ... by everything else: busy - campaign, at least 0 */
    double other_fraction; /* other_s / (cores x wall_s): the share of the machine's capacity */
    int cores;
} rl__camp_cpu_use;

/* The use between a and b (b taken after a). Pure apart from reading the tick rate and cores. */
void rl__camp_cpu_between(const rl__camp_cpu *a, const rl__camp_cpu *b, rl__camp_cpu_use *out);

/* Machine facts for the manifest, appended as strings to out (each may be "unknown"):
 * the CPU model (/proc/cpuinfo), the kernel (uname), the memory in bytes (/proc/meminfo). */
void rl__camp_machine(rl_buf *cpu_model, rl_buf *kernel, uint64_t *out_mem_bytes, int *out_cores);

/* The absolute path of the running program (/proc/self/exe) into out. RL_OK or RL_E_IO_ERROR. */
int rl__camp_self_exe(rl_buf *out);

#endif
