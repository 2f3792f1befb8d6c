/* log.h (internal) — leveled logging to stderr, and the corruption marker.
 *
 * RL_CORRUPT(code) logs "corruption detected at FILE:LINE" and evaluates to code, so corruption is
 * reported where it is found (SQLite's _BKPT) and never asserted.
 */
#ifndef RL_BASE_LOG_H
#define RL_BASE_LOG_H

enum { RL_LOG_DEBUG = 0, RL_LOG_INFO = 1, RL_LOG_WARN = 2, RL_LOG_ERROR = 3, RL_LOG_OFF = 4 };

/* Set the minimum level printed (default: RL_LOG_WARN, or the RL_LOG environment variable:
 * debug|info|warn|error|off). */
void rl__log_set_level(int level);
int rl__log_level(void);
void rl__log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int rl__corrupt_at(int code, const char *file, int line);

#define RL_CORRUPT(code) rl__corrupt_at((code), __FILE__, __LINE__)

#endif
