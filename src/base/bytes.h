/* bytes.h (internal) — byte-string helpers: hex, FoundationDB's printable escape form, compare. */
#ifndef RL_BASE_BYTES_H
#define RL_BASE_BYTES_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"

/* Append FoundationDB's printable form of p[0..n): printable ASCII except backslash as is,
 * backslash as "\\\\", every other byte as "\\xNN" (lower-case hex). */
void rl__bytes_printable(rl_buf *out, const void *p, size_t n);
/* Parse the printable form back (accepts \xNN in either case and \\). Returns RL_OK or
 * RL_E_INVALID_ARGUMENT on a bad escape. */
int rl__bytes_unprintable(rl_buf *out, const char *s);
/* As rl__bytes_unprintable; on a bad escape, *bad_at (if not NULL) is the byte offset in s of its
 * backslash (out then holds the bytes before it). rl__args_unescape words the message. */
int rl__bytes_unprintable_at(rl_buf *out, const char *s, size_t *bad_at);
/* The value of the hex digit c (either case), or -1. */
int rl__hex_digit(int c);
/* Parse hex (even length, either case) into out. RL_OK or RL_E_INVALID_ARGUMENT. */
int rl__bytes_from_hex(rl_buf *out, const char *s, size_t n);
/* Lexicographic byte compare, shorter prefix first: <0, 0, >0. */
int rl__bytes_cmp(const void *a, size_t alen, const void *b, size_t blen);

#endif
