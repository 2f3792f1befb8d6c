/* cmd_tuple.c — `rl tuple`: encode, decode and print FoundationDB tuples.
 *
 *   rl tuple decode HEX    the JSON array of the tuple (one compact line)
 *   rl tuple encode JSON   the encoding of a JSON array, lower-case hex
 *   rl tuple print HEX     the human form, e.g. (1, "a", b"\x00", None)
 *
 * Exit codes: 0 success, 1 invalid input (the error's name and message on stderr), 2 usage.
 * The logic lives in src/tuple (tuple.h, tuple_json.h); this file only parses arguments.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "base/buf.h"
#include "base/bytes.h"
#include "reclayer/error.h"
#include "tuple/tuple.h"
#include "tuple/tuple_json.h"

static void help(FILE *f) {
    fprintf(f,
            "usage: rl tuple decode HEX\n"
            "       rl tuple encode JSON\n"
            "       rl tuple print HEX\n"
            "\n"
            "Convert FoundationDB tuple encodings (the tuple layer's bytes, as hex).\n"
            "\n"
            "  decode HEX    print the tuple as one line of JSON: an array of elements\n"
            "                {\"null\":true} {\"bool\":true} {\"int\":\"-12\"} (decimal, any size)\n"
            "                {\"bytes\":HEX} {\"string\":TEXT} {\"float\":HEX} {\"double\":HEX}\n"
            "                (IEEE bits, big-endian) {\"uuid\":HEX} {\"versionstamp\":HEX}\n"
            "                (12 bytes) {\"tuple\":[...]} (nested)\n"
            "  encode JSON   the reverse: print the encoding of such an array as lower-case hex\n"
            "  print HEX     print the tuple in FoundationDB's Python-like human form,\n"
            "                e.g. (1, \"a\", b\"\\x00\", None)\n"
            "\n"
            "Invalid input prints the error's name and message on stderr and exits 1.\n"
            "\n"
            "examples:\n"
            "  rl tuple encode '[{\"int\":\"1\"},{\"string\":\"a\"}]'    -> 1501026100\n"
            "  rl tuple decode 1501026100\n"
            "  rl tuple print 1501026100                        -> (1, \"a\")\n");
}

/* Report rc on stderr and return the exit code for invalid input. */
static int fail(const char *what, int rc) {
    fprintf(stderr, "rl tuple %s: %s: %s\n", what, rl_error_name(rc), rl_error_message(rc));
    return 1;
}

static int do_decode(const char *hex, int as_json) {
    rl_buf in, out;
    json_t *j = NULL;
    char *s = NULL;
    int rc, code = 1;
    const char *what = as_json ? "decode" : "print";
    rl__buf_init(&in);
    rl__buf_init(&out);
    rc = rl__bytes_from_hex(&in, hex, strlen(hex));
    if (rc) {
        fprintf(stderr, "rl tuple %s: %s: not an even-length hex string\n", what, rl_error_name(rc));
        goto done;
    }
    if (as_json) {
        rc = rl__tuple_to_json(in.data, in.len, &j);
        if (rc) {
            code = fail(what, rc);
            goto done;
        }
        s = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
        if (!s) {
            code = fail(what, RL_E_OUT_OF_MEMORY);
            goto done;
        }
        printf("%s\n", s);
    } else {
        rc = rl__tuple_print(in.data, in.len, &out);
        if (rc) {
            code = fail(what, rc);
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
    rl__buf_init(&out);
    rl__buf_init(&hex);
    if (!j) {
        fprintf(stderr, "rl tuple encode: %s: bad JSON: %s (column %d)\n",
                rl_error_name(RL_E_INVALID_ARGUMENT), err.text, err.column);
        goto done;
    }
    if (!json_is_array(j)) {
        fprintf(stderr, "rl tuple encode: %s: expected a JSON array of elements\n",
                rl_error_name(RL_E_INVALID_ARGUMENT));
        goto done;
    }
    rc = rl__tuple_from_json(j, &out);
    if (rc) {
        code = fail("encode", rc);
        goto done;
    }
    rl__buf_append_hex(&hex, out.data, out.len);
    if ((rc = rl__buf_error(&hex))) {
        code = fail("encode", rc);
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
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help"))) {
        help(stdout);
        return 0;
    }
    if (argc != 3) {
        help(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "decode")) return do_decode(argv[2], 1);
    if (!strcmp(argv[1], "print")) return do_decode(argv[2], 0);
    if (!strcmp(argv[1], "encode")) return do_encode(argv[2]);
    fprintf(stderr, "rl tuple: unknown subcommand '%s'\n", argv[1]);
    help(stderr);
    return 2;
}
