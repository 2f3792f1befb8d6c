/* bytes.c — byte-string helpers (see bytes.h). */
#include "base/bytes.h"

#include <string.h>

#include "reclayer/error.h"

void rl__bytes_printable(rl_buf *out, const void *p, size_t n) {
    const uint8_t *s = p;
    for (size_t i = 0; i < n; i++) {
        uint8_t c = s[i];
        if (c == '\\') rl__buf_append(out, "\\\\", 2);
        else if (c >= 32 && c < 127) rl__buf_append_byte(out, c);
        else rl__buf_printf(out, "\\x%02x", c);
    }
}

int rl__hex_digit(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

int rl__bytes_unprintable_at(rl_buf *out, const char *s, size_t *bad_at) {
    for (size_t i = 0; s[i];) {
        if (s[i] != '\\') {
            rl__buf_append_byte(out, (uint8_t)s[i++]);
            continue;
        }
        if (s[i + 1] == '\\') {
            rl__buf_append_byte(out, '\\');
            i += 2;
        } else if (s[i + 1] == 'x' && s[i + 2] && s[i + 3] && rl__hex_digit(s[i + 2]) >= 0 &&
                   rl__hex_digit(s[i + 3]) >= 0) {
            rl__buf_append_byte(out, (uint8_t)(rl__hex_digit(s[i + 2]) * 16 + rl__hex_digit(s[i + 3])));
            i += 4;
        } else {
            if (bad_at) *bad_at = i;
            return RL_E_INVALID_ARGUMENT;
        }
    }
    return rl__buf_error(out);
}

int rl__bytes_unprintable(rl_buf *out, const char *s) { return rl__bytes_unprintable_at(out, s, NULL); }

int rl__bytes_from_hex(rl_buf *out, const char *s, size_t n) {
    if (n % 2) return RL_E_INVALID_ARGUMENT;
    for (size_t i = 0; i < n; i += 2) {
        int h = rl__hex_digit(s[i]), l = rl__hex_digit(s[i + 1]);
        if (h < 0 || l < 0) return RL_E_INVALID_ARGUMENT;
        rl__buf_append_byte(out, (uint8_t)(h * 16 + l));
    }
    return rl__buf_error(out);
}

int rl__bytes_cmp(const void *a, size_t alen, const void *b, size_t blen) {
    size_t n = alen < blen ? alen : blen;
    int c = n ? memcmp(a, b, n) : 0;
    if (c) return c;
    return alen < blen ? -1 : alen > blen ? 1 : 0;
}
