/* main.c — `rlkvd`, reclayer's server: one binary, two roles (docs/design.md §8).
 *   rlkvd coordinator ...   read versions, commits, the commit log, the shard map
 *   rlkvd storage ...       shards, reads at a version, mapped reads
 * Each role parses its own options (src/server/ROLE_main.c, with the shared parser) and runs until
 * SIGTERM or SIGINT. Exit codes: 0 clean stop, 1 failure, 2 usage. */
#include <stdio.h>
#include <string.h>

#include "reclayer/version.h"

#include "app/rlkvd.h"

static void usage(FILE *f) {
    fprintf(f, "usage: rlkvd ROLE [OPTIONS]\n\nreclayer's server.\n\nroles:\n"
               "  coordinator    read versions, commits, the durable commit log, the shard map\n"
               "  storage        holds shards, serves reads at a version and mapped reads\n"
               "\n`rlkvd ROLE --help` lists a role's options.\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("%s\n", rl_version_string());
        return 0;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "coordinator")) return rl__rlkvd_coordinator_main(argc - 1, argv + 1);
    if (!strcmp(argv[1], "storage")) return rl__rlkvd_storage_main(argc - 1, argv + 1);
    fprintf(stderr, "rlkvd: unknown role '%s' (coordinator or storage)\n", argv[1]);
    usage(stderr);
    return 2;
}
