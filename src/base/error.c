/* error.c — lookups into the one error table (include/reclayer/error.h). */
#include "reclayer/error.h"

#include "base/errdetail.h"

typedef struct {
    int code;
    const char *name;
    const char *message;
    int retryable;
} err_entry;

static const err_entry table[] = {
#define RL__ERR_ROW(suffix, code, name, msg, retry) {code, name, msg, retry},
    RL_ERR_MAP(RL__ERR_ROW)
#undef RL__ERR_ROW
};

#define TABLE_N ((int)(sizeof table / sizeof table[0]))

static const err_entry *find(int rc) {
    for (int i = 0; i < TABLE_N; i++)
        if (table[i].code == rc) return &table[i];
    return NULL;
}

const char *rl_error_name(int rc) {
    if (rc == RL_OK) return "success";
    const err_entry *e = find(rc);
    return e ? e->name : "unknown_error";
}

const char *rl_error_message(int rc) {
    if (rc == RL_OK) return "Success";
    const err_entry *e = find(rc);
    return e ? e->message : "Unknown error";
}

int rl_error_retryable(int rc) {
    const err_entry *e = find(rc);
    return e ? e->retryable : 0;
}

int rl_error_is_known(int rc) { return rc == RL_OK || find(rc) != NULL; }

int rl_error_count(void) { return TABLE_N; }

int rl_error_at(int i) { return (i >= 0 && i < TABLE_N) ? table[i].code : -1; }

/* The calls without a handle to leave their detail on (rl_db_open, the tuple functions of
 * reclayer/tuple.h) leave it here, one per thread (zeroed: "" and no mutex). */
static _Thread_local rl__errdetail thread_detail;

rl__errdetail *rl__thread_detail(void) { return &thread_detail; }

const char *rl_last_error_detail(void) { return rl__errdetail_get(&thread_detail); }
