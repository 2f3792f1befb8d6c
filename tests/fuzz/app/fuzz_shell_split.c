/* fuzz_shell_split.c — libFuzzer target: rl shell's line splitter (src/app/shell.h,
 * rl__shell_split) on arbitrary bytes.
 *
 * Checks, beyond "no crash, no out-of-bounds read": a failure says why and leaves no command; a
 * success gives non-empty commands whose words are followed by a NUL; every word quoted with
 * rl__shell_quote and the line rebuilt ("w1 w2; w1 ...") splits back to the same commands and
 * words, byte for byte.
 */
#include <stdlib.h>
#include <string.h>

#include "app/shell.h"
#include "reclayer/error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    rl__shell_line l, back;
    rl_buf msg, line;
    rl__shell_line_init(&l);
    rl__shell_line_init(&back);
    rl__buf_init(&msg);
    rl__buf_init(&line);
    int rc = rl__shell_split((const char *)data, size, &l, &msg);
    if (rc != RL_OK) {
        if (rc != RL_E_INVALID_ARGUMENT || msg.len == 0 || l.n_cmds != 0) abort();
        goto done;
    }
    for (size_t j = 0; j < l.n_cmds; j++) {
        if (l.cmds[j].n_words == 0) abort();
        if (j) rl__buf_append(&line, "; ", 2);
        for (size_t k = 0; k < l.cmds[j].n_words; k++) {
            const rl_slice *w = &l.cmds[j].words[k];
            if (w->data[w->len] != 0) abort();
            if (k) rl__buf_append_byte(&line, ' ');
            rl__shell_quote(&line, w->data, w->len);
        }
    }
    if (rl__shell_split((const char *)line.data, line.len, &back, &msg) != RL_OK || back.n_cmds != l.n_cmds) abort();
    for (size_t j = 0; j < l.n_cmds; j++) {
        if (back.cmds[j].n_words != l.cmds[j].n_words) abort();
        for (size_t k = 0; k < l.cmds[j].n_words; k++) {
            const rl_slice *a = &l.cmds[j].words[k], *b = &back.cmds[j].words[k];
            if (a->len != b->len || (a->len && memcmp(a->data, b->data, a->len) != 0)) abort();
        }
    }
done:
    rl__shell_line_release(&l);
    rl__shell_line_release(&back);
    rl__buf_release(&msg);
    rl__buf_release(&line);
    return 0;
}
