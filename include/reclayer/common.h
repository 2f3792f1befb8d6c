/* common.h — visibility macro and the small value types shared by every public header. */
#ifndef RECLAYER_COMMON_H
#define RECLAYER_COMMON_H

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define RL_API __attribute__((visibility("default")))
#else
#define RL_API
#endif

/* A borrowed byte string. Owner and lifetime are stated by the function that hands it out. */
typedef struct {
    const uint8_t *data; /* may be NULL only when len == 0 */
    size_t len;          /* bytes */
} rl_slice;

#endif
