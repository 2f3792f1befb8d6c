/* storage_main.c — `rlkvd storage`: placeholder until the storage role lands (issue 15); it refuses to
 * run rather than pretend to serve. */
#include <stdio.h>

#include "server/server.h"

int rl__rlkvd_storage_main(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "rlkvd storage: not built yet\n");
    return 1;
}
