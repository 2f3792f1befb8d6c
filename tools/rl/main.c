/* main.c — `rl`, the reclayer command line: a table of subcommands (commands.def). */
#include <stdio.h>
#include <string.h>

#include "reclayer/version.h"

#define RL_COMMAND(name, fn, summary) int fn(int argc, char **argv);
#include "commands.def"
#undef RL_COMMAND

typedef struct {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *summary;
} command;

static const command commands[] = {
#define RL_COMMAND(name, fn, summary) {name, fn, summary},
#include "commands.def"
#undef RL_COMMAND
};

static void usage(FILE *f) {
    fprintf(f, "usage: rl COMMAND [ARGS...]\n\nreclayer, a record layer in C, on the command line.\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-14s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\n`rl COMMAND --help` describes one command.\n");
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
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "rl: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
