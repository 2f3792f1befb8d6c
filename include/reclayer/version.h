/* version.h — which reclayer this is: the release number (the one place it is written; the build
 * reads it from here) and the string that names a build, release and source revision. */
#ifndef RECLAYER_VERSION_H
#define RECLAYER_VERSION_H

#include "reclayer/common.h"

#define RL_VERSION_MAJOR 0
#define RL_VERSION_MINOR 9
#define RL_VERSION_PATCH 0
/* The same release as a string and as one comparable number (0.9.0 -> 900). */
#define RL_VERSION "0.9.0"
#define RL_VERSION_NUMBER (RL_VERSION_MAJOR * 10000 + RL_VERSION_MINOR * 100 + RL_VERSION_PATCH)

/* rl_version — the release of the library actually linked, "MAJOR.MINOR.PATCH" (compare with
 * RL_VERSION, the release of the headers compiled against). Static string; never fails. */
RL_API const char *rl_version(void);

/* rl_version_string — the build's full name, "reclayer 0.9.0 (git 0123456789ab)": the release and
 * the git revision the library was built from, "-dirty" appended when the tree had uncommitted
 * changes, "(git unknown)" when built outside a git checkout. Every program's --version prints
 * it, libfdb_c.so's fdb_get_client_version carries it and campaign manifests record it. Static
 * string; never fails. */
RL_API const char *rl_version_string(void);

#endif
