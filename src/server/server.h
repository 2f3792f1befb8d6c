/* server.h (internal) — the entry points of rlkvd's roles (tools/rlkvd/main.c calls them).
 * Each parses its options with the shared parser (src/base/args.h), runs the role until SIGTERM
 * or SIGINT, and returns the process exit code (0 clean stop, 1 failure, 2 usage).
 * argv[0] is the role name. */
#ifndef RL_SERVER_SERVER_H
#define RL_SERVER_SERVER_H

int rl__rlkvd_coordinator_main(int argc, char **argv);
int rl__rlkvd_storage_main(int argc, char **argv);

#endif
