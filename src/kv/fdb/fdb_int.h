/* fdb_int.h (internal to src/kv/fdb) — FoundationDB's C API as the fdb: backend consumes it: the
 * documented types and struct layouts, the numbers it uses, and the table of functions resolved
 * from the client library with dlsym (fdb_client.c). Written from FoundationDB's API
 * documentation for API versions 710-730 (every function used here has the same signature in all
 * of them); no FoundationDB header is included or copied.
 *
 * The types and struct layouts (and the offsets of FDBMappedKeyValue's opaque bytes the backend
 * reads, defensively: fdb_backend.c, docs/design.md §8.8.2) are base/fdb_api.h's, shared with
 * src/fdbc and the tests.
 */
#ifndef RL_KV_FDB_INT_H
#define RL_KV_FDB_INT_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/errdetail.h"
#include "base/fdb_api.h"

/* Numbers (fdb.options). */
enum {
    RL_FDB_STREAMING_WANT_ALL = -2,
    RL_FDB_STREAMING_EXACT = 0,
    RL_FDB_CONFLICT_READ = 0,
    RL_FDB_CONFLICT_WRITE = 1,
    RL_FDB_TR_NEXT_WRITE_NO_WRITE_CONFLICT_RANGE = 30,
    RL_FDB_TR_READ_YOUR_WRITES_DISABLE = 51,
    RL_FDB_TR_ACCESS_SYSTEM_KEYS = 301,
    RL_FDB_TR_READ_SYSTEM_KEYS = 302,
    RL_FDB_TR_TIMEOUT = 500, /* Int parameter: milliseconds */
};

/* The API versions the backend accepts: the highest the library offers, capped at 730. */
#define RL_FDB_API_MIN 710
#define RL_FDB_API_MAX 730

/* The client library's functions (fdb_client.c resolves every one that base/fdb_api.h's table
 * marks needed, or refuses the library; the others stay NULL). */
typedef struct {
    int api_version; /* selected */
    char path[512];  /* what was loaded */
    RL_FDB_FUNCTIONS(RL__FDB_FN_MEMBER)
} rl__fdb_api;

/* fdb_client.c: the process's client (loaded, API version selected, network thread running),
 * loading it on the first call. Thread-safe. On failure, RL_E_FILE_NOT_FOUND (no library),
 * RL_E_UNSUPPORTED_OPERATION (too old, a missing function, another library already loaded) or
 * FoundationDB's code, with a message appended to err; a library that could not be loaded is
 * tried again by the next call (RL_FDB_LIBRARY may have changed), one whose API version was
 * selected is not. */
int rl__fdb_client(const rl__fdb_api **out, rl__errdetail *err);

#endif
