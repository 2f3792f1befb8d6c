/* buf.h (internal) — rl_buf, a growable byte buffer with strbuf-style invariants.
 *
 * Invariants:
 *   1. After rl__buf_init, data is never NULL and data[len] == 0 (always NUL-terminated), so a
 *      buffer of text can be used as a C string.
 *   2. cap is private: only these functions change it.
 *   3. Appends never return a new pointer. An allocation failure is recorded in the buffer (oom,
 *      sticky) and every later append is a no-op; check once with rl__buf_error at the end.
 *
 * Ownership: the buffer owns data. rl__buf_release frees it; rl__buf_detach hands it to the caller
 * (free it with rl__free).
 */
#ifndef RL_BASE_BUF_H
#define RL_BASE_BUF_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint8_t *data; /* never NULL after init; data[len] == 0 */
    size_t len;    /* bytes in use, excluding the terminating NUL */
    size_t cap;    /* private: bytes allocated (0 while data points at the shared empty string) */
    int oom;       /* sticky: an allocation failed */
} rl_buf;

void rl__buf_init(rl_buf *b);
void rl__buf_release(rl_buf *b);
/* Empty the buffer, keeping its memory (and clearing the sticky error). */
void rl__buf_reset(rl_buf *b);
/* Make room for n more bytes; returns 0, or RL_E_OUT_OF_MEMORY (also recorded). */
int rl__buf_reserve(rl_buf *b, size_t n);
void rl__buf_append(rl_buf *b, const void *p, size_t n);
void rl__buf_append_byte(rl_buf *b, uint8_t c);
void rl__buf_append_str(rl_buf *b, const char *s);
void rl__buf_printf(rl_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void rl__buf_vprintf(rl_buf *b, const char *fmt, va_list ap);
/* Big-endian fixed-width appends. */
void rl__buf_append_u16be(rl_buf *b, uint16_t v);
void rl__buf_append_u32be(rl_buf *b, uint32_t v);
void rl__buf_append_u64be(rl_buf *b, uint64_t v);
/* Append lower-case hex of p[0..n). */
void rl__buf_append_hex(rl_buf *b, const void *p, size_t n);
/* Append s[0..n) as a JSON string literal: quotes around it, '"' and '\\' backslash-escaped,
 * bytes below 0x20 and 0x7f as \u00XX, every other byte as it is (UTF-8 text stays itself;
 * bytes that are not UTF-8 give a literal that is not either). */
void rl__buf_append_json_str(rl_buf *b, const char *s, size_t n);
/* Shorten to len (len <= b->len). */
void rl__buf_truncate(rl_buf *b, size_t len);
/* RL_OK, or RL_E_OUT_OF_MEMORY if any append failed since init/reset. */
int rl__buf_error(const rl_buf *b);
/* Give the bytes to the caller (free with rl__free; NULL if the buffer never allocated, in which
 * case *out_len is 0) and re-initialise the buffer. */
uint8_t *rl__buf_detach(rl_buf *b, size_t *out_len);

#endif
