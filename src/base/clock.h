/* clock.h (internal) — monotonic and wall clocks. */
#ifndef RL_BASE_CLOCK_H
#define RL_BASE_CLOCK_H

#include <stdint.h>

/* Nanoseconds from an arbitrary fixed point; never goes backwards. */
uint64_t rl__clock_mono_ns(void);
/* Microseconds since the Unix epoch (wall time; may jump). */
uint64_t rl__clock_wall_us(void);
/* Sleep for the given microseconds (restarts after signals). */
void rl__clock_sleep_us(uint64_t us);

#endif
