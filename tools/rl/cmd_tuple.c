/* cmd_tuple.c — `rl tuple`: encode, decode and print FoundationDB tuples.
 *
 *   rl tuple decode HEX    the JSON array of the tuple (one compact line)
 *   rl tuple encode JSON   the encoding of a JSON array, lower-case hex
 *   rl tuple print HEX     the human form, e.g. (1, "a", b"\x00", None)
 *
 * Exit codes: 0 success, 1 invalid input (the error's name and message on stderr, with the
 * offending hex digit or the nesting limit when that is the reason), 2 usage. The logic lives
 * in src/tuple (tuple.h, tuple_json.h); this file only parses arguments.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "app/args.h"
#include "base/buf.h"
#include "base/bytes.h"
#include "reclayer/error.h"
#include "tuple/tuple.h"
#include "tuple/tuple_json.h"

/* Report rc on stderr (with the tuple layer's detail when it has one, e.g. the nesting limit;
 * detail may be NULL) and return the exit code for invalid input. */
static int fail(const char *what, int rc, const rl__errdetail *detail) {
    const char *d = rl__errdetail_get(detail);
    fprintf(stderr, "rl tuple %s: %s: %s%s%s\n", what, rl_error_name(rc), rl_error_message(rc), *d ? ": " : "", d);
    return 1;
}

static int do_decode(const char *hex, int as_json) {
    rl_buf in, out;
    json_t *j = NULL;
    char *s = NULL;
    int rc, code = 1;
    const char *what = as_json ? "decode" : "print";
    rl__errdetail detail;
    rl__errdetail_init(&detail, NULL);
    rl__buf_init(&in);
    rl__buf_init(&out);
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    rc = rl__args_unhex(hex, &in, &msg);
    if (rc) {
        fprintf(stderr, "rl tuple %s: %s: %s\n", what, rl_error_name(rc),
                rc == RL_E_INVALID_ARGUMENT ? rl__errdetail_get(&msg) : rl_error_message(rc));
        goto done;
    }
    if (as_json) {
        rc = rl__tuple_to_json(in.data, in.len, &j, &detail);
        if (rc) {
            code = fail(what, rc, &detail);
            goto done;
        }
        s = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
        if (!s) {
            code = fail(what, RL_E_OUT_OF_MEMORY, NULL);
            goto done;
        }
        printf("%s\n", s);
    } else {
        rc = rl__tuple_print(in.data, in.len, &out, &detail);
        if (rc) {
            code = fail(what, rc, &detail);
            goto done;
        }
        printf("%s\n", (const char *)out.data);
    }
    code = 0;
done:
    free(s);
    json_decref(j);
    rl__buf_release(&in);
    rl__buf_release(&out);
    return code;
}

static int do_encode(const char *text) {
    json_error_t err;
    rl_buf out, hex;
    int rc, code = 1;
    json_t *j = json_loads(text, JSON_ALLOW_NUL | JSON_DECODE_ANY, &err);
    rl__errdetail detail;
    rl__errdetail_init(&detail, NULL);
    rl__buf_init(&out);
    rl__buf_init(&hex);
    if (!j) {
        fprintf(stderr, "rl tuple encode: %s: bad JSON: %s (column %d)\n", rl_error_name(RL_E_INVALID_ARGUMENT),
                err.text, err.column);
        goto done;
    }
    if (!json_is_array(j)) {
        fprintf(stderr, "rl tuple encode: %s: expected a JSON array of elements\n",
                rl_error_name(RL_E_INVALID_ARGUMENT));
        goto done;
    }
    rc = rl__tuple_from_json(j, &out, &detail);
    if (rc) {
        code = fail("encode", rc, &detail);
        goto done;
    }
    rl__buf_append_hex(&hex, out.data, out.len);
    if ((rc = rl__buf_error(&hex))) {
        code = fail("encode", rc, NULL);
        goto done;
    }
    printf("%s\n", (const char *)hex.data);
    code = 0;
done:
    json_decref(j);
    rl__buf_release(&out);
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
