/* scratch.h (internal) — the benchmarks' scratch directories: made fresh inside a base directory,
 * removed whole at the end of a run (also when it fails), so a run never writes outside the
 * directory it was given and never leaves data behind.
 *
 * A scratch directory is always a new directory of its own ("BASE/rlbench-NAME-XXXXXX", mkdtemp),
 * so removing it can only remove what the run created; files already in BASE are never touched.
 */
#ifndef RL_BENCH_SCRATCH_H
#define RL_BENCH_SCRATCH_H

#include <stddef.h>

#include "base/buf.h"
#include "base/errdetail.h"

/* rl__bench_scratch_create — make a new empty directory BASE/rlbench-NAME-XXXXXX, mode 0700.
 * [in] base  an existing directory, or NULL for $TMPDIR (when set and not empty) or /tmp
 * [in] name  a short tag, e.g. "micro"
 * [out] out  the path is appended (the caller releases the buffer)
 * [out] err  on failure, "cannot create BASE/rlbench-NAME-XXXXXX: <strerror>" (may be NULL)
 * Returns RL_OK, RL_E_FILE_NOT_FOUND (BASE or a parent missing), RL_E_INVALID_ARGUMENT (base is
 * empty or BASE is not a directory), RL_E_NO_SPACE, RL_E_IO_ERROR (others, e.g. permission),
 * RL_E_OUT_OF_MEMORY. */
int rl__bench_scratch_create(const char *base, const char *name, rl_buf *out, rl__errdetail *err);

/* rl__bench_scratch_remove — remove the directory tree at path: every entry under it (symbolic
 * links are removed, never followed), then path itself. Best effort: it goes on after a failure.
 * Returns RL_OK, or RL_E_IO_ERROR with the first failure in err ("cannot remove P: <strerror>").
 * A missing path is RL_OK. */
int rl__bench_scratch_remove(const char *path, rl__errdetail *err);

#endif
