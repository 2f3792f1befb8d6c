/* fuzz_keyfile.c — libFuzzer target: the cluster's key file parser (src/server/keyfile.h) on
 * arbitrary bytes.
 *
 * Checks, beyond "no crash, no out-of-bounds read": what parses has a name "description:ID" with
 * an ID of at least RL_AUTH_ID_MIN letters and digits and the member key derived; its canonical
 * text (rl__keyfile_format) parses back to the same name, secret and keys; a failure leaves the
 * output zeroed and says why.
 */
#include <stdlib.h>
#include <string.h>

#include "reclayer/error.h"
#include "server/keyfile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    rl__keyfile k, back;
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    int rc = rl__keyfile_parse("fuzz", (const char *)data, size, &k, &msg);
    if (rc != RL_OK) {
        static const rl__keyfile zero;
        if (memcmp(&k, &zero, sizeof k) != 0 || rl__errdetail_len(&msg) == 0) abort();
        return 0;
    }
    const char *colon = strchr(k.name, ':');
    if (!colon || !rl__auth_id_ok(colon + 1, strlen(colon + 1)) || !k.auth.has_member_key) abort();
    rl_buf text;
    rl__buf_init(&text);
    rl__keyfile_format(&k, &text);
    if (rl__keyfile_parse("fuzz", (const char *)text.data, text.len, &back, &msg) != RL_OK) abort();
    if (strcmp(back.name, k.name) != 0 || memcmp(back.secret, k.secret, sizeof k.secret) != 0 ||
        memcmp(&back.auth, &k.auth, sizeof k.auth) != 0)
        abort();
    rl__buf_release(&text);
    return 0;
}
