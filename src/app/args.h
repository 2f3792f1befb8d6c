/* args.h (internal) — the strict command-line parser shared by the tools (rl, rlbench, rlkvd).
 *
 * A command declares its arguments in a table (rl__arg: name, value kind, destination, range, a
 * help line) and calls rl__args_parse once; the parser checks every value fully, fills the
 * destinations, and prints the generated help or a usage error that names the argument. It lives
 * in the library so that unit tests reach it (tests/unit/base/test_args.c).
 *
 *   int64_t count = 0;
 *   const char *url = NULL;
 *   const rl__arg opts[] = {
 *       {.name = "db", .kind = RL_ARG_STRING, .dest = &url, .metavar = "URL",
 *        .help = "the database", .flags = RL_ARG_REQUIRED},
 *       {.name = "count", .kind = RL_ARG_INT64, .dest = &count, .min = 0, .max = 100000000,
 *        .help = "records to load"},
 *       {0}};
 *   const rl__args_cmd cmd = {.name = "rl load", .summary = "Load records.", .opts = opts};
 *   int code;
 *   if (rl__args_parse(&cmd, argc, argv, &code)) return code;   // --help: 0, usage error: 2
 *
 * Syntax (the same for every command):
 *   1. An option is a word beginning with "--": "--name VALUE" or "--name=VALUE"; a flag takes no
 *      value ("--flag=x" is an error). In the "--name VALUE" form a following word that begins
 *      with "--" is not taken as the value (the option "needs a value"); use "--name=--x".
 *   2. Every other word is a positional argument, including words beginning with a single "-"
 *      (so "-5" is a number); after a word "--" every word is positional.
 *   3. "--help" or "-h" anywhere (before "--") prints the generated help to stdout; the command
 *      then exits 0.
 *   4. An option may be given once, unless it is RL_ARG_MULTI.
 *   5. Numbers are decimal: integers [-]DIGITS (no sign for unsigned kinds, no spaces, no
 *      trailing characters, no empty string), doubles in decimal or exponent notation (finite:
 *      "nan" and "inf" are refused); each must lie in the option's inclusive range, and a value
 *      that overflows the type is out of range. Every range appears in the help.
 *   6. A command with subcommands (rl__args_cmd.subs) takes the subcommand as its first positional
 *      word; the parent's options are accepted before and after it, the subcommand's own options
 *      and positionals after it ("rl kv --db URL get KEY", "rl kv get KEY --db URL").
 *
 * Messages (stderr, one line, prefixed with the command name, then a hint to run --help):
 *   rl load: unknown option --frob
 *   rl load: option --db needs a value
 *   rl load: option --allow-defects takes no value
 *   rl load: option --count given twice
 *   rl load: option --count is required
 *   rl load: --count: '12abc' is not an integer
 *   rl load: --count: 99999999999999999999 is out of range [0, 100000000]
 *   rl load: --seconds: 'nan' is not a finite number
 *   rl query: --fetch: 'fast' is not one of scan, remote, remote-fallback, adaptive
 *   rl kv get: missing argument KEY
 *   rl kv get: unexpected argument 'x'
 *   rl kv: unknown command 'frob' (one of get, set, ...)
 * The exit code of every usage error is 2 (RL_ARGS_USAGE).
 *
 * Ownership: the parser allocates nothing. String values point into argv (borrowed; argv outlives
 * the command). Tables and the rl__args_cmd are the caller's and are only read.
 * Thread rules: none (no global state).
 */
#ifndef RL_APP_ARGS_H
#define RL_APP_ARGS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/buf.h"
#include "base/errdetail.h"

/* Exit codes of the tools. */
#define RL_ARGS_HELP 0  /* --help (or --version) printed */
#define RL_ARGS_USAGE 2 /* a usage error was printed */

/* Value kinds; the type of *dest is given for each. */
typedef enum {
    RL_ARG_FLAG = 1, /* int: set to 1 when given; takes no value */
    RL_ARG_STRING,   /* const char *: the value, borrowed from argv */
    RL_ARG_INT,      /* int: an integer in [min, max] (both within int's range) */
    RL_ARG_INT64,    /* int64_t: an integer in [min, max] */
    RL_ARG_UINT64,   /* uint64_t: a non-negative integer in [umin, umax] */
    RL_ARG_DOUBLE,   /* double: a finite number in [dmin, dmax] */
    RL_ARG_ENUM,     /* int: the value of the choice named (choices) */
} rl__arg_kind;

/* Flags of an rl__arg. */
#define RL_ARG_REQUIRED 0x1 /* option: must be given (positionals are required by default) */
#define RL_ARG_OPTIONAL 0x2 /* positional: may be left out; only trailing positionals */
#define RL_ARG_MULTI \
    0x4                        /* STRING: may be given up to max_count times; dest is a
                               * const char *[max_count], *count the number stored. A MULTI
                               * positional must be the last and takes every remaining word. */
#define RL_ARG_NONEMPTY 0x8    /* STRING: the empty string is refused */
#define RL_ARG_NO_DEFAULT 0x10 /* help shows no default (the initial *dest is not meaningful) */

/* One named value of an RL_ARG_ENUM. Tables end with {NULL, 0}. */
typedef struct {
    const char *name;
    int value;
} rl__arg_choice;

/* One option or positional argument. Tables end with an entry whose name is NULL ({0}).
 * Ranges are inclusive. A range left at zero (min == max == 0, umin == umax == 0, dmin == dmax
 * == 0) means the whole range of the type (every finite double). The initial value of *dest is
 * the default, and help shows it (unless RL_ARG_REQUIRED or RL_ARG_NO_DEFAULT). */
typedef struct {
    const char *name; /* option: long name without "--"; positional: its metavar */
    rl__arg_kind kind;
    void *dest;                    /* where the value goes; type per kind (never NULL) */
    const char *metavar;           /* option: its value's name in help ("N", "URL"); NULL: from
                                   * the kind */
    const char *help;              /* one line; the range, choices and default are appended */
    unsigned flags;                /* RL_ARG_* */
    int64_t min, max;              /* RL_ARG_INT, RL_ARG_INT64 */
    uint64_t umin, umax;           /* RL_ARG_UINT64 */
    double dmin, dmax;             /* RL_ARG_DOUBLE */
    const rl__arg_choice *choices; /* RL_ARG_ENUM */
    int max_count;                 /* RL_ARG_MULTI: capacity of dest */
    int *count;                    /* RL_ARG_MULTI: values stored (set to 0 by the parse) */
} rl__arg;

typedef struct rl__args_cmd rl__args_cmd;

/* A command: its name, help text, option and positional tables, and maybe subcommands. */
struct rl__args_cmd {
    const char *name;                /* as typed, for messages and help: "rl load", "rl kv get" */
    const char *brief;               /* one line, listed by a parent's help */
    const char *summary;             /* help paragraphs after the usage line (may be NULL) */
    const char *epilog;              /* help text after the options (may be NULL) */
    const rl__arg *opts;             /* options (NULL: none) */
    const rl__arg *pos;              /* positionals in order (NULL: none) */
    const rl__args_cmd *const *subs; /* subcommands, NULL-terminated (NULL: none) */
    int *sub_dest;                   /* with subs: the index of the subcommand chosen */
};

/* rl__args_parse — parse argv[1..argc) (argv[0] is the command's own word) against cmd, storing
 * values into the destinations. Returns 0 when the command should go on, or 1 when it must return
 * *out_code now: RL_ARGS_HELP (0) after printing the help of cmd (or of the subcommand given) to
 * stdout, RL_ARGS_USAGE (2) after printing a usage error (see the file comment) to stderr.
 * Destinations of arguments not given keep their values; after a usage error some destinations
 * may have been written. */
int rl__args_parse(const rl__args_cmd *cmd, int argc, char **argv, int *out_code);

/* rl__args_parse_to — rl__args_parse printing the help to out and errors to err (for tests). */
int rl__args_parse_to(const rl__args_cmd *cmd, int argc, char **argv, FILE *out, FILE *err, int *out_code);

/* rl__args_help — print the generated help of cmd to f: the usage line, the summary, the
 * subcommands, the positionals and options (each with its range, choices and default), then the
 * epilog. For a subcommand, parent (may be NULL) adds the parent's options. */
void rl__args_help(const rl__args_cmd *cmd, const rl__args_cmd *parent, FILE *f);

/* rl__args_usage_error — print "NAME: MESSAGE" and the --help hint to stderr, for the checks a
 * command makes after parsing (e.g. two options that exclude each other). Returns RL_ARGS_USAGE. */
int rl__args_usage_error(const rl__args_cmd *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- Value parsers (what the table kinds use), for values that are not options ------------
 * Each returns RL_OK, or RL_E_INVALID_ARGUMENT with a one-line reason set in err (may be NULL;
 * e.g. "'12abc' is not an integer", "70000 is out of range [0, 65535]").
 * Nothing is written to *out on error. Ranges are inclusive. */
int rl__args_int64(const char *s, int64_t min, int64_t max, int64_t *out, rl__errdetail *err);
int rl__args_uint64(const char *s, uint64_t min, uint64_t max, uint64_t *out, rl__errdetail *err);
int rl__args_double(const char *s, double min, double max, double *out, rl__errdetail *err);

/* rl__args_ip_port — parse "IP:PORT" (dotted IPv4, port in [min_port, 65535]) into ip
 * (NUL-terminated) and *port, e.g. "127.0.0.1:0". Whether the address may be used (127.0.0.0/8
 * only) is the caller's check. RL_OK, or RL_E_INVALID_ARGUMENT with the reason in err ("'x' is
 * not IP:PORT (e.g. 127.0.0.1:0)", "'x:1': the address is not dotted IPv4", "'...:70000': port
 * 70000 is out of range [0, 65535]"). */
int rl__args_ip_port(const char *s, int min_port, char ip[16], uint16_t *port, rl__errdetail *err);

/* rl__args_unescape — parse FoundationDB's printable form (printable bytes as they are, "\\\\"
 * for a backslash, "\\xNN" for any byte, either case) of s, appending the bytes to out. On a bad
 * escape: RL_E_INVALID_ARGUMENT and err says which escape at which byte offset of s, e.g.
 * "bad escape '\\xZZ' at offset 3 (use \\\\ or \\xNN)"; out may hold a prefix. RL_E_OUT_OF_MEMORY
 * if out failed. */
int rl__args_unescape(const char *s, rl_buf *out, rl__errdetail *err);

/* rl__args_unhex — parse s as hex digits (either case, even count), appending the bytes to out.
 * On error RL_E_INVALID_ARGUMENT and err says why: "'zz' is not hex: 'z' at offset 0" or
 * "'abc' has an odd number of hex digits (3)". RL_E_OUT_OF_MEMORY if out failed. */
int rl__args_unhex(const char *s, rl_buf *out, rl__errdetail *err);

#endif
