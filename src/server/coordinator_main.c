/* coordinator_main.c — `rlkvd coordinator`: placeholder until the coordinator role lands (issue 15); it refuses to
 * run rather than pretend to serve. */
#include <stdio.h>

#include "server/server.h"

int rl__rlkvd_coordinator_main(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "rlkvd coordinator: not built yet\n");
    return 1;
}
