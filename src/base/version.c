/* version.c — rl_version and rl_version_string (reclayer/version.h). RL_BUILD_REV comes from the
 * header cmake/build-rev.cmake writes into the build tree at every build. */
#include "reclayer/version.h"

#include "rl_build_rev.h"

_Static_assert(RL_VERSION_NUMBER == RL_VERSION_MAJOR * 10000 + RL_VERSION_MINOR * 100 + RL_VERSION_PATCH,
               "RL_VERSION_NUMBER");

const char *rl_version(void) { return RL_VERSION; }

const char *rl_version_string(void) { return "reclayer " RL_VERSION " (git " RL_BUILD_REV ")"; }
