/* args.c — the strict command-line parser of the tools (see args.h for the syntax, the messages
 * and the ownership rules).
 *
 * Invariants:
 *   1. Every usage error prints exactly one line naming the argument (option "--name" or
 *      positional METAVAR) and the hint line, and makes the parse return 1 with RL_ARGS_USAGE.
 *   2. A value is stored only after it has been checked completely (syntax, then range).
 *   3. Values quoted in messages are shortened to QUOTE_MAX bytes and control bytes are shown as
 *      '?', so a message is always one short line.
 */
#include "app/args.h"
#include "base/bytes.h"

#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "reclayer/error.h"
#include "reclayer/version.h"

#define QUOTE_MAX 48   /* bytes of a value shown in a message */
#define HELP_WIDTH 100 /* help lines wrap here */
#define HELP_COL 26    /* option help text starts here */
#define MAX_ARGS 64    /* options per table (for the repeat check) */
#define NBSP '\x01'    /* a space help text never breaks at ("--name VALUE" in a usage line) */

/* ---- Messages ---------------------------------------------------------------------------- */

/* Copy s into buf for a message: at most QUOTE_MAX bytes (then "..."), control bytes as '?'. */
static const char *shown(const char *s, char *buf, size_t cap) {
    size_t n = 0, i = 0;
    for (; s[i] && i < QUOTE_MAX && n + 1 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        buf[n++] = c < 0x20 || c == 0x7f ? '?' : (char)c;
    }
    if (s[i] && n + 4 < cap) memcpy(buf + n, "...", 3), n += 3;
    buf[n] = 0;
    return buf;
}

/* ---- Value parsers ----------------------------------------------------------------------- */

/* Parse [-]DIGITS into a sign and a magnitude. Returns 0 on a syntax error; *out_overflow is set
 * when the magnitude does not fit 64 bits. */
static int parse_digits(const char *s, int *out_neg, uint64_t *out_mag, int *out_overflow) {
    const char *p = s;
    uint64_t m = 0;
    int ovf = 0;
    *out_neg = 0;
    if (*p == '-') *out_neg = 1, p++;
    if (*p < '0' || *p > '9') return 0;
    for (; *p; p++) {
        if (*p < '0' || *p > '9') return 0;
        unsigned d = (unsigned)(*p - '0');
        if (m > (UINT64_MAX - d) / 10) ovf = 1;
        else m = m * 10 + d;
    }
    *out_mag = m;
    *out_overflow = ovf;
    return 1;
}

int rl__args_int64(const char *s, int64_t min, int64_t max, int64_t *out, rl__errdetail *err) {
    char q[QUOTE_MAX + 8];
    int neg, ovf;
    uint64_t m;
    int64_t v;
    if (!s || !parse_digits(s, &neg, &m, &ovf)) {
        rl__errdetail_set(err, "'%s' is not an integer", shown(s ? s : "", q, sizeof q));
        return RL_E_INVALID_ARGUMENT;
    }
    if (!neg && (ovf || m > (uint64_t)INT64_MAX)) goto range;
    if (neg && (ovf || m > (uint64_t)INT64_MAX + 1)) goto range;
    v = neg ? (m == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)m) : (int64_t)m;
    if (v < min || v > max) goto range;
    *out = v;
    return RL_OK;
range:
    rl__errdetail_set(err, "%s is out of range [%lld, %lld]", shown(s, q, sizeof q), (long long)min, (long long)max);
    return RL_E_INVALID_ARGUMENT;
}

int rl__args_uint64(const char *s, uint64_t min, uint64_t max, uint64_t *out, rl__errdetail *err) {
    char q[QUOTE_MAX + 8];
    int neg, ovf;
    uint64_t m;
    if (!s || !parse_digits(s, &neg, &m, &ovf)) {
        rl__errdetail_set(err, "'%s' is not an integer", shown(s ? s : "", q, sizeof q));
        return RL_E_INVALID_ARGUMENT;
    }
    if (ovf || (neg && m != 0) || m < min || m > max) {
        rl__errdetail_set(err, "%s is out of range [%llu, %llu]", shown(s, q, sizeof q), (unsigned long long)min,
                          (unsigned long long)max);
        return RL_E_INVALID_ARGUMENT;
    }
    *out = m;
    return RL_OK;
}

int rl__args_ip_port(const char *s, int min_port, char ip[16], uint16_t *port, rl__errdetail *err) {
    char q[QUOTE_MAX + 8];
    const char *colon = s ? strrchr(s, ':') : NULL;
    if (!colon || colon == s) {
        rl__errdetail_set(err, "'%s' is not IP:PORT (e.g. 127.0.0.1:0)", shown(s ? s : "", q, sizeof q));
        return RL_E_INVALID_ARGUMENT;
    }
    size_t n = (size_t)(colon - s);
    char a[16];
    struct in_addr ia;
    if (n < sizeof a) {
        memcpy(a, s, n);
        a[n] = 0;
    }
    if (n >= sizeof a || inet_pton(AF_INET, a, &ia) != 1) {
        rl__errdetail_set(err, "'%s': the address is not dotted IPv4", shown(s, q, sizeof q));
        return RL_E_INVALID_ARGUMENT;
    }
    uint64_t p;
    if (rl__args_uint64(colon + 1, (uint64_t)(min_port < 0 ? 0 : min_port), 65535, &p, err) != RL_OK) {
        rl__errdetail_set(err, "'%s': port %s", shown(s, q, sizeof q), rl__errdetail_get(err));
        return RL_E_INVALID_ARGUMENT;
    }
    memcpy(ip, a, n + 1);
    *port = (uint16_t)p;
    return RL_OK;
}

/* 1 if s is [+-]DIGITS[.DIGITS][(e|E)[+-]DIGITS] with at least one mantissa digit. */
static int decimal_syntax(const char *s) {
    const char *p = s;
    int digits = 0;
    if (*p == '+' || *p == '-') p++;
    while (*p >= '0' && *p <= '9') p++, digits++;
    if (*p == '.') {
        p++;
        while (*p >= '0' && *p <= '9') p++, digits++;
    }
    if (!digits) return 0;
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-') p++;
        if (*p < '0' || *p > '9') return 0;
        while (*p >= '0' && *p <= '9') p++;
    }
    return *p == 0;
}

/* 1 if s names a NaN or an infinity the way strtod would read it. */
static int non_finite_word(const char *s) {
    if (*s == '+' || *s == '-') s++;
    return !strncasecmp(s, "nan", 3) || !strncasecmp(s, "inf", 3);
}

int rl__args_double(const char *s, double min, double max, double *out, rl__errdetail *err) {
    char q[QUOTE_MAX + 8];
    if (!s || !decimal_syntax(s)) {
        if (s && non_finite_word(s)) rl__errdetail_set(err, "'%s' is not a finite number", shown(s, q, sizeof q));
        else rl__errdetail_set(err, "'%s' is not a number", shown(s ? s : "", q, sizeof q));
        return RL_E_INVALID_ARGUMENT;
    }
    errno = 0;
    double v = strtod(s, NULL);
    /* ERANGE with a huge result is an overflow; an underflow gives a finite tiny value. */
    if ((errno == ERANGE && fabs(v) > 1.0) || !isfinite(v) || v < min || v > max) {
        rl__errdetail_set(err, "%s is out of range [%g, %g]", shown(s, q, sizeof q), min, max);
        return RL_E_INVALID_ARGUMENT;
    }
    *out = v;
    return RL_OK;
}

int rl__args_unescape(const char *s, rl_buf *out, rl__errdetail *err) {
    size_t i = 0;
    int rc = rl__bytes_unprintable_at(out, s, &i);
    if (rc != RL_E_INVALID_ARGUMENT) return rc;
    /* Show the escape as far as it goes: the backslash and up to 3 more bytes. */
    char q[QUOTE_MAX + 8], raw[5], esc[8];
    size_t n = 1;
    raw[0] = '\\';
    while (n < 4 && s[i + n] && (n < 2 || s[i + 1] == 'x')) {
        raw[n] = s[i + n];
        n++;
    }
    raw[n] = 0;
    if (!s[i + 1])
        rl__errdetail_set(err, "'%s': a lone backslash at offset %zu ends it (use \\\\ for a backslash)",
                          shown(s, q, sizeof q), i);
    else
        rl__errdetail_set(err, "'%s': bad escape '%s' at offset %zu (use \\\\ or \\xNN with two hex digits)",
                          shown(s, q, sizeof q), shown(raw, esc, sizeof esc), i);
    return rc;
}

int rl__args_unhex(const char *s, rl_buf *out, rl__errdetail *err) {
    char q[QUOTE_MAX + 8];
    size_t n = strlen(s);
    for (size_t i = 0; i < n; i++) {
        if (rl__hex_digit(s[i]) < 0) {
            unsigned char c = (unsigned char)s[i];
            if (c >= 0x20 && c < 0x7f)
                rl__errdetail_set(err, "'%s' is not hex: '%c' at offset %zu", shown(s, q, sizeof q), c, i);
            else rl__errdetail_set(err, "'%s' is not hex: byte 0x%02x at offset %zu", shown(s, q, sizeof q), c, i);
            return RL_E_INVALID_ARGUMENT;
        }
    }
    if (n % 2) {
        rl__errdetail_set(err, "'%s' has an odd number of hex digits (%zu)", shown(s, q, sizeof q), n);
        return RL_E_INVALID_ARGUMENT;
    }
    return rl__bytes_from_hex(out, s, n);
}

/* ---- Ranges and help text ------------------------------------------------------------------ */

static void int_range(const rl__arg *a, int64_t *lo, int64_t *hi) {
    if (a->min == 0 && a->max == 0) {
        *lo = a->kind == RL_ARG_INT ? INT_MIN : INT64_MIN;
        *hi = a->kind == RL_ARG_INT ? INT_MAX : INT64_MAX;
    } else {
        *lo = a->min, *hi = a->max;
    }
    assert(*lo <= *hi);
    assert(a->kind != RL_ARG_INT || (*lo >= INT_MIN && *hi <= INT_MAX));
}

static void uint_range(const rl__arg *a, uint64_t *lo, uint64_t *hi) {
    if (a->umin == 0 && a->umax == 0) *lo = 0, *hi = UINT64_MAX;
    else *lo = a->umin, *hi = a->umax;
    assert(*lo <= *hi);
}

static void double_range(const rl__arg *a, double *lo, double *hi) {
    if (a->dmin == 0 && a->dmax == 0) *lo = -DBL_MAX, *hi = DBL_MAX;
    else *lo = a->dmin, *hi = a->dmax;
    assert(*lo <= *hi);
}

static const char *default_metavar(const rl__arg *a) {
    switch (a->kind) {
    case RL_ARG_INT:
    case RL_ARG_INT64:
    case RL_ARG_UINT64: return "N";
    case RL_ARG_DOUBLE: return "X";
    case RL_ARG_ENUM: return "NAME";
    default: return "VALUE";
    }
}

static const char *metavar(const rl__arg *a) { return a->metavar ? a->metavar : default_metavar(a); }

/* Append the choices of an enum as "a, b, c". */
static void append_choices(rl_buf *b, const rl__arg_choice *c) {
    for (int i = 0; c && c[i].name; i++) rl__buf_printf(b, "%s%s", i ? ", " : "", c[i].name);
}

/* Append the generated part of an argument's help: kind and range, choices, default. */
static void append_details(rl_buf *b, const rl__arg *a, int is_pos) {
    int show_default = !(a->flags & (RL_ARG_REQUIRED | RL_ARG_NO_DEFAULT | RL_ARG_MULTI)) && !is_pos;
    size_t start = b->len;
    rl__buf_append_str(b, " (");
    size_t open = b->len;
    switch (a->kind) {
    case RL_ARG_INT:
    case RL_ARG_INT64: {
        int64_t lo, hi;
        int_range(a, &lo, &hi);
        rl__buf_printf(b, "integer in [%lld, %lld]", (long long)lo, (long long)hi);
        if (show_default)
            rl__buf_printf(b, ", default %lld",
                           a->kind == RL_ARG_INT ? (long long)*(int *)a->dest : (long long)*(int64_t *)a->dest);
        break;
    }
    case RL_ARG_UINT64: {
        uint64_t lo, hi;
        uint_range(a, &lo, &hi);
        rl__buf_printf(b, "integer in [%llu, %llu]", (unsigned long long)lo, (unsigned long long)hi);
        if (show_default) rl__buf_printf(b, ", default %llu", (unsigned long long)*(uint64_t *)a->dest);
        break;
    }
    case RL_ARG_DOUBLE: {
        double lo, hi;
        double_range(a, &lo, &hi);
        if (a->dmin == 0 && a->dmax == 0) rl__buf_append_str(b, "a finite number");
        else rl__buf_printf(b, "number in [%g, %g]", lo, hi);
        if (show_default) rl__buf_printf(b, ", default %g", *(double *)a->dest);
        break;
    }
    case RL_ARG_ENUM: {
        rl__buf_append_str(b, "one of ");
        append_choices(b, a->choices);
        if (show_default)
            for (int i = 0; a->choices && a->choices[i].name; i++)
                if (a->choices[i].value == *(int *)a->dest) {
                    rl__buf_printf(b, "; default %s", a->choices[i].name);
                    break;
                }
        break;
    }
    case RL_ARG_STRING:
        if (a->flags & RL_ARG_NONEMPTY) rl__buf_append_str(b, "not empty");
        if (show_default && *(const char *const *)a->dest)
            rl__buf_printf(b, "%sdefault %s", b->len > open ? ", " : "", *(const char *const *)a->dest);
        if (a->flags & RL_ARG_MULTI)
            rl__buf_printf(b, "%s%s up to %d times", b->len > open ? ", " : "", is_pos ? "given" : "may be given",
                           a->max_count);
        break;
    default: break;
    }
    if ((a->flags & RL_ARG_REQUIRED) && !is_pos) rl__buf_printf(b, "%srequired", b->len > open ? ", " : "");
    if ((a->flags & RL_ARG_OPTIONAL) && is_pos) rl__buf_printf(b, "%soptional", b->len > open ? ", " : "");
    if (b->len == open) rl__buf_truncate(b, start);
    else rl__buf_append_byte(b, ')');
}

/* Print text (words separated by spaces; NBSP joins words and prints as a space) from column
 * col, wrapping at HELP_WIDTH with continuation lines indented to indent; ends with a newline. */
static void print_wrapped(FILE *f, const char *text, int col, int indent) {
    const char *p = text;
    int first = 1;
    for (;;) {
        while (*p == ' ') p++;
        if (!*p) break;
        const char *e = p;
        while (*e && *e != ' ') e++;
        int wl = (int)(e - p);
        if (!first) {
            if (col + 1 + wl > HELP_WIDTH) {
                fprintf(f, "\n%*s", indent, "");
                col = indent;
            } else {
                fputc(' ', f);
                col++;
            }
        }
        for (int i = 0; i < wl; i++) fputc(p[i] == NBSP ? ' ' : p[i], f);
        col += wl;
        first = 0;
        p = e;
    }
    fputc('\n', f);
}

/* Print one help row: "  LEFT" padded to HELP_COL, then the help text wrapped. */
static void print_row(FILE *f, const char *left, const char *text) {
    int col = fprintf(f, "  %s", left);
    if (col + 2 > HELP_COL) {
        fprintf(f, "\n%*s", HELP_COL, "");
    } else {
        fprintf(f, "%*s", HELP_COL - col, "");
    }
    print_wrapped(f, text, HELP_COL, HELP_COL);
}

static void print_arg_rows(FILE *f, const rl__arg *t, int is_pos) {
    rl_buf left, text;
    rl__buf_init(&left);
    rl__buf_init(&text);
    for (int i = 0; t && t[i].name; i++) {
        rl__buf_reset(&left);
        rl__buf_reset(&text);
        if (is_pos) rl__buf_append_str(&left, t[i].name);
        else if (t[i].kind == RL_ARG_FLAG) rl__buf_printf(&left, "--%s", t[i].name);
        else rl__buf_printf(&left, "--%s %s", t[i].name, metavar(&t[i]));
        rl__buf_append_str(&text, t[i].help ? t[i].help : "");
        append_details(&text, &t[i], is_pos);
        print_row(f, (const char *)left.data, (const char *)text.data);
    }
    rl__buf_release(&left);
    rl__buf_release(&text);
}

/* Append the synopsis words of an option table and a positional table. */
static void append_synopsis(rl_buf *b, const rl__arg *opts, const rl__arg *pos) {
    for (int i = 0; opts && opts[i].name; i++) {
        const rl__arg *a = &opts[i];
        int req = a->flags & RL_ARG_REQUIRED;
        rl__buf_printf(b, " %s--%s", req ? "" : "[", a->name);
        if (a->kind != RL_ARG_FLAG) rl__buf_printf(b, "%c%s", NBSP, metavar(a));
        if (!req) rl__buf_append_byte(b, ']');
        if (a->flags & RL_ARG_MULTI) rl__buf_append_str(b, "...");
    }
    for (int i = 0; pos && pos[i].name; i++) {
        const rl__arg *a = &pos[i];
        if (a->flags & RL_ARG_OPTIONAL) rl__buf_printf(b, " [%s]", a->name);
        else rl__buf_printf(b, " %s", a->name);
        if (a->flags & RL_ARG_MULTI) rl__buf_append_str(b, "...");
    }
}

/* The subcommand's word: its name after the parent's ("rl kv get" -> "get"). */
static const char *sub_word(const rl__args_cmd *sub) {
    const char *s = strrchr(sub->name, ' ');
    return s ? s + 1 : sub->name;
}

void rl__args_help(const rl__args_cmd *cmd, const rl__args_cmd *parent, FILE *f) {
    rl_buf syn;
    rl__buf_init(&syn);
    rl__buf_printf(&syn, "usage: %s", cmd->name);
    append_synopsis(&syn, cmd->opts, NULL);
    if (parent) append_synopsis(&syn, parent->opts, NULL);
    append_synopsis(&syn, NULL, cmd->pos);
    if (cmd->subs) rl__buf_append_str(&syn, " COMMAND [ARGS...]");
    print_wrapped(f, (const char *)syn.data + 0, 0, (int)strlen(cmd->name) + 8);
    if (cmd->summary) fprintf(f, "\n%s\n", cmd->summary);
    if (cmd->subs) {
        fprintf(f, "\ncommands:\n");
        for (int i = 0; cmd->subs[i]; i++) {
            rl__buf_reset(&syn);
            rl__buf_append_str(&syn, sub_word(cmd->subs[i]));
            append_synopsis(&syn, NULL, cmd->subs[i]->pos);
            print_row(f, (const char *)syn.data, cmd->subs[i]->brief ? cmd->subs[i]->brief : "");
        }
    }
    if (cmd->pos && cmd->pos[0].name) {
        fprintf(f, "\narguments:\n");
        print_arg_rows(f, cmd->pos, 1);
    }
    fprintf(f, "\noptions:\n");
    print_arg_rows(f, cmd->opts, 0);
    fprintf(f, "  %-*s%s\n", HELP_COL - 2, "--help, -h", "print this help and exit");
    fprintf(f, "  %-*s%s\n", HELP_COL - 2, "--version", "print the version (release and git revision) and exit");
    if (parent && parent->opts && parent->opts[0].name) {
        fprintf(f, "\noptions of %s:\n", parent->name);
        print_arg_rows(f, parent->opts, 0);
    }
    if (cmd->epilog) fprintf(f, "\n%s\n", cmd->epilog);
    if (cmd->subs) fprintf(f, "\nRun '%s COMMAND --help' for the arguments of one command.\n", cmd->name);
    rl__buf_release(&syn);
}

/* ---- Parsing ----------------------------------------------------------------------------- */

typedef struct {
    const rl__args_cmd *root; /* the command parsed */
    const rl__args_cmd *cur;  /* root, or the subcommand once its word was seen */
    FILE *out, *err;
    unsigned char seen_root[MAX_ARGS], seen_sub[MAX_ARGS];
    int npos; /* positionals of cur stored so far */
} pstate;

static int usage(pstate *ps, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int usage(pstate *ps, const char *fmt, ...) {
    va_list ap;
    fprintf(ps->err, "%s: ", ps->cur->name);
    va_start(ap, fmt);
    vfprintf(ps->err, fmt, ap);
    va_end(ap);
    fprintf(ps->err, "\nRun '%s --help' for usage.\n", ps->cur->name);
    return RL_ARGS_USAGE;
}

int rl__args_usage_error(const rl__args_cmd *cmd, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "%s: ", cmd->name);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nRun '%s --help' for usage.\n", cmd->name);
    return RL_ARGS_USAGE;
}

static int table_len(const rl__arg *t) {
    int n = 0;
    while (t && t[n].name) n++;
    assert(n <= MAX_ARGS);
    return n;
}

/* Reset the MULTI counters of a table. */
static void reset_counts(const rl__arg *t) {
    for (int i = 0; t && t[i].name; i++)
        if ((t[i].flags & RL_ARG_MULTI) && t[i].count) *t[i].count = 0;
}

/* Check value v of argument a (label: "--name" or METAVAR) and store it. 0 or RL_ARGS_USAGE. */
static int store(pstate *ps, const rl__arg *a, const char *label, const char *v) {
    char q[QUOTE_MAX + 8];
    rl__errdetail err;
    rl__errdetail_init(&err, NULL);
    switch (a->kind) {
    case RL_ARG_FLAG: *(int *)a->dest = 1; return 0;
    case RL_ARG_STRING:
        if ((a->flags & RL_ARG_NONEMPTY) && !*v) return usage(ps, "%s must not be empty", label);
        if (a->flags & RL_ARG_MULTI) {
            assert(a->count && a->max_count > 0);
            if (*a->count >= a->max_count) return usage(ps, "%s given more than %d times", label, a->max_count);
            ((const char **)a->dest)[(*a->count)++] = v;
        } else {
            *(const char **)a->dest = v;
        }
        return 0;
    case RL_ARG_INT:
    case RL_ARG_INT64: {
        int64_t lo, hi, x;
        int_range(a, &lo, &hi);
        if (rl__args_int64(v, lo, hi, &x, &err)) return usage(ps, "%s: %s", label, rl__errdetail_get(&err));
        if (a->kind == RL_ARG_INT) *(int *)a->dest = (int)x;
        else *(int64_t *)a->dest = x;
        return 0;
    }
    case RL_ARG_UINT64: {
        uint64_t lo, hi, x;
        uint_range(a, &lo, &hi);
        if (rl__args_uint64(v, lo, hi, &x, &err)) return usage(ps, "%s: %s", label, rl__errdetail_get(&err));
        *(uint64_t *)a->dest = x;
        return 0;
    }
    case RL_ARG_DOUBLE: {
        double lo, hi, x;
        double_range(a, &lo, &hi);
        if (rl__args_double(v, lo, hi, &x, &err)) return usage(ps, "%s: %s", label, rl__errdetail_get(&err));
        *(double *)a->dest = x;
        return 0;
    }
    case RL_ARG_ENUM:
        for (int i = 0; a->choices && a->choices[i].name; i++)
            if (!strcmp(v, a->choices[i].name)) {
                *(int *)a->dest = a->choices[i].value;
                return 0;
            }
        {
            rl_buf b;
            rl__buf_init(&b);
            append_choices(&b, a->choices);
            int rc = usage(ps, "%s: '%s' is not one of %s", label, shown(v, q, sizeof q), (const char *)b.data);
            rl__buf_release(&b);
            return rc;
        }
    }
    assert(!"unknown argument kind");
    return usage(ps, "%s: internal error: unknown kind", label);
}

/* Find option name[0..n) in table t; its index or -1. */
static int find_opt(const rl__arg *t, const char *name, size_t n) {
    for (int i = 0; t && t[i].name; i++)
        if (strlen(t[i].name) == n && !memcmp(t[i].name, name, n)) return i;
    return -1;
}

/* Handle the option word argv[*i] (it begins with "--"); may consume the next word. */
static int option(pstate *ps, int argc, char **argv, int *i) {
    const char *a = argv[*i] + 2, *eq = strchr(a, '=');
    size_t n = eq ? (size_t)(eq - a) : strlen(a);
    char q[QUOTE_MAX + 8], label[QUOTE_MAX + 8];
    const rl__arg *t = ps->cur->opts;
    unsigned char *seen = ps->cur == ps->root ? ps->seen_root : ps->seen_sub;
    int k = find_opt(t, a, n);
    if (k < 0 && ps->cur != ps->root) {
        t = ps->root->opts;
        seen = ps->seen_root;
        k = find_opt(t, a, n);
    }
    snprintf(label, sizeof label, "--%.*s", (int)(n < QUOTE_MAX ? n : QUOTE_MAX), a);
    if (k < 0) {
        if (ps->cur == ps->root && ps->root->subs)
            for (int s = 0; ps->root->subs[s]; s++)
                if (find_opt(ps->root->subs[s]->opts, a, n) >= 0)
                    return usage(ps, "option %s belongs after the command word (%s %s ... %s)", label, ps->root->name,
                                 sub_word(ps->root->subs[s]), label);
        return usage(ps, "unknown option %s", shown(label, q, sizeof q));
    }
    const rl__arg *o = &t[k];
    const char *v = NULL;
    if (o->kind == RL_ARG_FLAG) {
        if (eq) return usage(ps, "option %s takes no value", label);
    } else if (eq) {
        v = eq + 1;
    } else if (*i + 1 < argc && strncmp(argv[*i + 1], "--", 2) != 0) {
        v = argv[++*i];
    } else {
        return usage(ps, "option %s needs a value", label);
    }
    if (seen[k] && !(o->flags & RL_ARG_MULTI)) return usage(ps, "option %s given twice", label);
    seen[k] = 1;
    return store(ps, o, label, v);
}

/* Handle the positional word w. */
static int positional(pstate *ps, const char *w) {
    char q[QUOTE_MAX + 8];
    if (ps->cur == ps->root && ps->root->subs) {
        for (int s = 0; ps->root->subs[s]; s++)
            if (!strcmp(w, sub_word(ps->root->subs[s]))) {
                ps->cur = ps->root->subs[s];
                if (ps->root->sub_dest) *ps->root->sub_dest = s;
                reset_counts(ps->cur->opts);
                reset_counts(ps->cur->pos);
                (void)table_len(ps->cur->opts);
                return 0;
            }
        rl_buf b;
        rl__buf_init(&b);
        for (int s = 0; ps->root->subs[s]; s++) rl__buf_printf(&b, "%s%s", s ? ", " : "", sub_word(ps->root->subs[s]));
        int rc = usage(ps, "unknown command '%s' (one of %s)", shown(w, q, sizeof q), (const char *)b.data);
        rl__buf_release(&b);
        return rc;
    }
    const rl__arg *pos = ps->cur->pos;
    int n = table_len(pos);
    if (ps->npos < n) {
        const rl__arg *a = &pos[ps->npos];
        if (!(a->flags & RL_ARG_MULTI)) ps->npos++;
        return store(ps, a, a->name, w);
    }
    return usage(ps, "unexpected argument '%s'", shown(w, q, sizeof q));
}

/* After the words: a subcommand chosen, required options given, required positionals given. */
static int finish(pstate *ps) {
    if (ps->root->subs && ps->cur == ps->root) {
        rl_buf b;
        rl__buf_init(&b);
        for (int s = 0; ps->root->subs[s]; s++) rl__buf_printf(&b, "%s%s", s ? ", " : "", sub_word(ps->root->subs[s]));
        int rc = usage(ps, "missing command (one of %s)", (const char *)b.data);
        rl__buf_release(&b);
        return rc;
    }
    const rl__arg *tabs[2] = {ps->root->opts, ps->cur != ps->root ? ps->cur->opts : NULL};
    const unsigned char *seen[2] = {ps->seen_root, ps->seen_sub};
    for (int t = 0; t < 2; t++)
        for (int i = 0; tabs[t] && tabs[t][i].name; i++)
            if ((tabs[t][i].flags & RL_ARG_REQUIRED) && !seen[t][i])
                return usage(ps, "option --%s is required", tabs[t][i].name);
    const rl__arg *pos = ps->cur->pos;
    for (int i = ps->npos; pos && pos[i].name; i++) {
        if (pos[i].flags & RL_ARG_OPTIONAL) continue;
        if ((pos[i].flags & RL_ARG_MULTI) && *pos[i].count > 0) continue;
        return usage(ps, "missing argument %s", pos[i].name);
    }
    return 0;
}

int rl__args_parse_to(const rl__args_cmd *cmd, int argc, char **argv, FILE *out, FILE *err, int *out_code) {
    pstate ps;
    int only_pos = 0, rc = 0;
    memset(&ps, 0, sizeof ps);
    ps.root = ps.cur = cmd;
    ps.out = out;
    ps.err = err;
    assert(!(cmd->subs && cmd->pos && cmd->pos[0].name));
    (void)table_len(cmd->opts);
    reset_counts(cmd->opts);
    reset_counts(cmd->pos);
    for (int i = 1; i < argc && !rc; i++) {
        const char *a = argv[i];
        if (!only_pos && !strcmp(a, "--")) {
            only_pos = 1;
        } else if (!only_pos && (!strcmp(a, "--help") || !strcmp(a, "-h"))) {
            rl__args_help(ps.cur, ps.cur != ps.root ? ps.root : NULL, out);
            *out_code = RL_ARGS_HELP;
            return 1;
        } else if (!only_pos && !strcmp(a, "--version")) {
            fprintf(out, "%s\n", rl_version_string());
            *out_code = RL_ARGS_HELP;
            return 1;
        } else if (!only_pos && !strncmp(a, "--", 2)) {
            rc = option(&ps, argc, argv, &i);
        } else {
            rc = positional(&ps, a);
        }
    }
    if (!rc) rc = finish(&ps);
    if (rc) {
        *out_code = rc;
        return 1;
    }
    return 0;
}

int rl__args_parse(const rl__args_cmd *cmd, int argc, char **argv, int *out_code) {
    return rl__args_parse_to(cmd, argc, argv, stdout, stderr, out_code);
}
