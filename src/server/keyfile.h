/* keyfile.h (internal) — the cluster's key file: the secrets a cluster's own processes and its
 * operator hold (docs/design.md §8.2 "Access", docs/file-format.md "Key file").
 *
 *   # reclayer key file: ... (comment lines start with '#')
 *   cluster reclayer:<ID>          the cluster name, as in the cluster file before '@'
 *   secret <64 hex digits>         the member secret (32 random bytes)
 *
 * `rl cluster up` creates it as DIR/cluster.key with mode 0600 (rl__keyfile_create); every rlkvd
 * process reads it (--key-file), and so do `rl cluster` and `rl placement` (from --dir, or
 * --key-file). A key file that group or others may read is refused: whoever reads it can serve as
 * a storage server, read and drop the commit log, and administer the cluster.
 *
 * Thread rules: none (no shared state).
 */
#ifndef RL_SERVER_KEYFILE_H
#define RL_SERVER_KEYFILE_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/errdetail.h"
#include "net/auth.h"

#define RL_KEYFILE_NAME "cluster.key" /* the key file's name in a cluster directory */
#define RL_KEYFILE_NAME_MAX 130       /* bytes of a cluster name "description:ID", NUL included */

typedef struct {
    char name[RL_KEYFILE_NAME_MAX];     /* "description:ID" */
    uint8_t secret[RL_AUTH_SECRET_LEN]; /* the member secret */
    rl__net_auth auth;                  /* the keys derived from both (member key included) */
} rl__keyfile;

/* rl__keyfile_create — make a new cluster's secrets and write them to path (mode 0600, synced;
 * the file must not exist): the name "<description>:<RL_AUTH_ID_MIN random letters and digits>"
 * and a random member secret.
 * [in] description  [A-Za-z0-9_]+, at most 64 characters ("reclayer").
 * [out] out         the new key file's contents (may be NULL).
 * Returns RL_OK, RL_E_ALREADY_EXISTS (path exists: nothing written), RL_E_INVALID_ARGUMENT (a bad
 * description), RL_E_INTERNAL_ERROR (no random bytes), or the write's error; err (may be NULL)
 * gets a one-line reason. */
int rl__keyfile_create(const char *path, const char *description, rl__keyfile *out, rl__errdetail *err);

/* rl__keyfile_read — read and check the key file at path: its mode (no permission for group or
 * others), its two lines, an ID of at least RL_AUTH_ID_MIN letters and digits, a secret of 64 hex
 * digits. [out] out filled on RL_OK (zeroed otherwise).
 * Returns RL_OK, RL_E_FILE_NOT_FOUND, RL_E_PERMISSION_DENIED (we may not read it),
 * RL_E_INVALID_ARGUMENT (malformed, or open to group or others: "chmod 600" says the message),
 * RL_E_IO_ERROR; err gets a one-line reason naming the file. */
int rl__keyfile_read(const char *path, rl__keyfile *out, rl__errdetail *err);

/* rl__keyfile_parse — parse the text of a key file (n bytes, not NUL-terminated) into *out (zeroed
 * on failure): the lines and checks of rl__keyfile_read without the file. path only names the
 * file in messages. Pure but for libcrypto's HMAC. RL_OK, RL_E_INVALID_ARGUMENT,
 * RL_E_INTERNAL_ERROR. */
int rl__keyfile_parse(const char *path, const char *text, size_t n, rl__keyfile *out, rl__errdetail *err);

/* rl__keyfile_format — the text rl__keyfile_create writes for k's name and secret, into out. */
void rl__keyfile_format(const rl__keyfile *k, rl_buf *out);

/* rl__keyfile_in_dir — "DIR/cluster.key" into out (cap bytes). Returns RL_OK or
 * RL_E_INVALID_ARGUMENT (too long). */
int rl__keyfile_in_dir(const char *dir, char *out, size_t cap);

/* rl__keyfile_next_to — the key file beside a cluster file: "cluster.key" in the directory of
 * cluster_file, into out (cap bytes). Returns RL_OK or RL_E_INVALID_ARGUMENT (too long). */
int rl__keyfile_next_to(const char *cluster_file, char *out, size_t cap);

#endif
