/* cmd_tuple.c — `rl tuple`: encode, decode and print FoundationDB tuples.
 *
 *   rl tuple decode HEX    the JSON array of the tuple (one compact line)
 *   rl tuple encode JSON   the encoding of a JSON array, lower-case hex
 *   rl tuple print HEX     the human form, e.g. (1, "a", b"\x00", None)
 *
 * Exit codes: 0 success, 1 invalid input (the error's name and message on stderr, with the
 * offending hex digit or the nesting limit when that is the reason), 2 usage. The logic is the
 * public tuple API (reclayer/tuple.h); this file only parses arguments.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/args.h"
#include "base/buf.h"
#include "reclayer/error.h"
#include "reclayer/tuple.h"

/* Report rc on stderr, with the tuple functions' detail when they left one (e.g. the nesting
 * limit), and return the exit code for invalid input. */
static int fail(const char *what, int rc) {
    const char *d = rl_last_error_detail();
    fprintf(stderr, "rl tuple %s: %s: %s%s%s\n", what, rl_error_name(rc), rl_error_message(rc), *d ? ": " : "", d);
    return 1;
}

static int do_decode(const char *hex, int as_json) {
    rl_buf in;
    char *s = NULL;
    int rc, code = 1;
    const char *what = as_json ? "decode" : "print";
    rl__buf_init(&in);
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    rc = rl__args_unhex(hex, &in, &msg);
    if (rc) {
        fprintf(stderr, "rl tuple %s: %s: %s\n", what, rl_error_name(rc),
                rc == RL_E_INVALID_ARGUMENT ? rl__errdetail_get(&msg) : rl_error_message(rc));
        goto done;
    }
    rc = as_json ? rl_tuple_to_json(in.data, in.len, &s) : rl_tuple_print(in.data, in.len, &s);
    if (rc) {
        code = fail(what, rc);
        goto done;
    }
    printf("%s\n", s);
    code = 0;
done:
    rl_free(s);
    rl__buf_release(&in);
    return code;
}

static int do_encode(const char *text) {
    uint8_t *enc = NULL;
    size_t n = 0;
    rl_buf hex;
    int rc, code = 1;
    rl__buf_init(&hex);
    rc = rl_tuple_from_json(text, &enc, &n);
    if (rc) {
        code = fail("encode", rc);
        goto done;
    }
    rl__buf_append_hex(&hex, enc, n);
    if ((rc = rl__buf_error(&hex))) {
        code = fail("encode", rc);
        goto done;
    }
    printf("%s\n", (const char *)hex.data);
    code = 0;
done:
    rl_free(enc);
    rl__buf_release(&hex);
    return code;
}

int rl_cmd_tuple(int argc, char **argv) {
    const char *hex = NULL, *json = NULL;
    int which = -1, code;
    const rl__arg hex_pos[] = {
        {.name = "HEX", .kind = RL_ARG_STRING, .dest = &hex, .help = "a tuple's encoding as hex digits"}, {0}};
    const rl__arg json_pos[] = {{.name = "JSON",
                                 .kind = RL_ARG_STRING,
                                 .dest = &json,
                                 .help = "a JSON array of elements, e.g. '[{\"int\":\"1\"},{\"string\":\"a\"}]'"},
                                {0}};
    const rl__args_cmd decode = {
        .name = "rl tuple decode",
        .brief = "print the tuple as one line of JSON",
        .summary = "Print the tuple as one line of JSON: an array of elements\n"
                   "  {\"null\":true} {\"bool\":true} {\"int\":\"-12\"} (decimal, any size)\n"
                   "  {\"bytes\":HEX} {\"string\":TEXT} {\"float\":HEX} {\"double\":HEX} (IEEE bits, big-endian)\n"
                   "  {\"uuid\":HEX} {\"versionstamp\":HEX} (12 bytes) {\"tuple\":[...]} (nested, at most 1000 deep)",
        .pos = hex_pos};
    const rl__args_cmd encode = {
        .name = "rl tuple encode",
        .brief = "the reverse: print the encoding of such an array as lower-case hex",
        .summary = "Print the encoding of a JSON array of elements (see `rl tuple decode --help`) as\n"
                   "lower-case hex.",
        .pos = json_pos};
    const rl__args_cmd print = {
        .name = "rl tuple print",
        .brief = "print the tuple in FoundationDB's Python-like form, e.g. (1, \"a\", b\"\\x00\", None)",
        .summary = "Print the tuple in FoundationDB's Python-like human form.",
        .pos = hex_pos};
    const rl__args_cmd *subs[] = {&decode, &encode, &print, NULL};
    const rl__args_cmd cmd = {
        .name = "rl tuple",
        .summary = "Convert FoundationDB tuple encodings (the tuple layer's bytes, as hex).",
        .epilog = "Invalid input prints the error's name and message on stderr and exits 1; usage errors exit 2.\n"
                  "\n"
                  "examples:\n"
                  "  rl tuple encode '[{\"int\":\"1\"},{\"string\":\"a\"}]'    -> 1501026100\n"
                  "  rl tuple decode 1501026100\n"
                  "  rl tuple print 1501026100                        -> (1, \"a\")",
        .subs = subs,
        .sub_dest = &which};
    if (rl__args_parse(&cmd, argc, argv, &code)) return code;
    if (which == 0) return do_decode(hex, 1);
    if (which == 2) return do_decode(hex, 0);
    return do_encode(json);
}
