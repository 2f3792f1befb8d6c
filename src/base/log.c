/* log.c — leveled logging to stderr. */
#include "base/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reclayer/error.h"

static int level = -1;

static int env_level(void) {
    const char *e = getenv("RL_LOG");
    if (!e) return RL_LOG_WARN;
    if (!strcmp(e, "debug")) return RL_LOG_DEBUG;
    if (!strcmp(e, "info")) return RL_LOG_INFO;
    if (!strcmp(e, "error")) return RL_LOG_ERROR;
    if (!strcmp(e, "off")) return RL_LOG_OFF;
    return RL_LOG_WARN;
}

void rl__log_set_level(int l) { level = l; }

int rl__log_level(void) {
    if (level < 0) level = env_level();
    return level;
}

void rl__log(int l, const char *fmt, ...) {
    static const char *names[] = {"debug", "info", "warn", "error"};
    if (l < rl__log_level() || l >= RL_LOG_OFF) return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "reclayer %s: ", names[l]);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

int rl__corrupt_at(int code, const char *file, int line) {
    rl__log(RL_LOG_ERROR, "%s detected at %s:%d", rl_error_name(code), file, line);
    return code;
}
