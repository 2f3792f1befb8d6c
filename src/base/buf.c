/* buf.c — rl_buf implementation (see buf.h for the invariants). */
#include "base/buf.h"

#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "reclayer/error.h"

static uint8_t empty_str[1];

void rl__buf_init(rl_buf *b) {
    b->data = empty_str;
    b->len = 0;
    b->cap = 0;
    b->oom = 0;
}

void rl__buf_release(rl_buf *b) {
    if (b->cap) rl__free(b->data);
    rl__buf_init(b);
}

void rl__buf_reset(rl_buf *b) {
    b->len = 0;
    b->oom = 0;
    if (b->cap) b->data[0] = 0;
}

int rl__buf_reserve(rl_buf *b, size_t n) {
    if (b->oom) return RL_E_OUT_OF_MEMORY;
    if (n > SIZE_MAX - b->len - 1) goto fail;
    size_t need = b->len + n + 1;
    if (need <= b->cap) return RL_OK;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need) cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    uint8_t *p = rl__realloc(b->cap ? b->data : NULL, cap);
    if (!p) goto fail;
    if (!b->cap) p[0] = 0;
    b->data = p;
    b->cap = cap;
    return RL_OK;
fail:
    b->oom = 1;
    return RL_E_OUT_OF_MEMORY;
}

void rl__buf_append(rl_buf *b, const void *p, size_t n) {
    if (rl__buf_reserve(b, n)) return;
    if (n) memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = 0;
}

void rl__buf_append_byte(rl_buf *b, uint8_t c) { rl__buf_append(b, &c, 1); }

void rl__buf_append_str(rl_buf *b, const char *s) { rl__buf_append(b, s, strlen(s)); }

void rl__buf_vprintf(rl_buf *b, const char *fmt, va_list ap) {
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0 || rl__buf_reserve(b, (size_t)n)) return;
    vsnprintf((char *)b->data + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
}

void rl__buf_printf(rl_buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    rl__buf_vprintf(b, fmt, ap);
    va_end(ap);
}

void rl__buf_append_u16be(rl_buf *b, uint16_t v) {
    uint8_t x[2] = {(uint8_t)(v >> 8), (uint8_t)v};
    rl__buf_append(b, x, 2);
}

void rl__buf_append_u32be(rl_buf *b, uint32_t v) {
    uint8_t x[4];
    for (int i = 0; i < 4; i++) x[i] = (uint8_t)(v >> (24 - 8 * i));
    rl__buf_append(b, x, 4);
}

void rl__buf_append_u64be(rl_buf *b, uint64_t v) {
    uint8_t x[8];
    for (int i = 0; i < 8; i++) x[i] = (uint8_t)(v >> (56 - 8 * i));
    rl__buf_append(b, x, 8);
}

void rl__buf_append_hex(rl_buf *b, const void *p, size_t n) {
    static const char hex[] = "0123456789abcdef";
    const uint8_t *s = p;
    if (n > SIZE_MAX / 2 || rl__buf_reserve(b, 2 * n)) return;
    for (size_t i = 0; i < n; i++) {
        b->data[b->len++] = (uint8_t)hex[s[i] >> 4];
        b->data[b->len++] = (uint8_t)hex[s[i] & 15];
    }
    b->data[b->len] = 0;
}

void rl__buf_append_json_str(rl_buf *b, const char *s, size_t n) {
    rl__buf_append_byte(b, '"');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') rl__buf_printf(b, "\\%c", c);
        else if (c < 0x20 || c == 0x7f) rl__buf_printf(b, "\\u%04x", c);
        else rl__buf_append_byte(b, c);
    }
    rl__buf_append_byte(b, '"');
}

void rl__buf_truncate(rl_buf *b, size_t len) {
    if (len >= b->len) return;
    b->len = len;
    b->data[len] = 0;
}

int rl__buf_error(const rl_buf *b) { return b->oom ? RL_E_OUT_OF_MEMORY : RL_OK; }

uint8_t *rl__buf_detach(rl_buf *b, size_t *out_len) {
    uint8_t *p = b->cap ? b->data : NULL;
    *out_len = b->cap ? b->len : 0;
    rl__buf_init(b);
    return p;
}
