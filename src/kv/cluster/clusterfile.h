/* clusterfile.h (internal) — the cluster file: how a client finds a cluster's coordinator, in
 * FoundationDB's form "description:id@IP:PORT" (one line; '#' starts a comment line), e.g.
 *
 *   reclayer:5f0c2a9e41d7b3c8@127.0.0.1:40123
 *
 * description and id are [A-Za-z0-9_]+ (FoundationDB's rule); IP is dotted IPv4 inside
 * 127.0.0.0/8 (reclayer's servers bind loopback only); PORT is 1..65535. Written by `rl cluster
 * up`, read by the cluster: backend (src/kv/cluster/) and rlkvd's storage role.
 */
#ifndef RL_KV_CLUSTER_CLUSTERFILE_H
#define RL_KV_CLUSTER_CLUSTERFILE_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/errdetail.h"

#define RL_CLUSTER_FIELD_MAX 64

typedef struct {
    char description[RL_CLUSTER_FIELD_MAX + 1];
    char id[RL_CLUSTER_FIELD_MAX + 1];
    char ip[16]; /* dotted IPv4, NUL-terminated */
    uint16_t port;
} rl__cluster_file;

/* Parse the text of a cluster file. RL_OK, or RL_E_CONNECTION_STRING_INVALID (2104) with a
 * message naming what is wrong appended to err (may be NULL). Pure. */
int rl__cluster_file_parse(const char *text, size_t len, rl__cluster_file *out, rl__errdetail *err);
/* Read and parse the file at path. Also RL_E_FILE_NOT_FOUND / RL_E_IO_ERROR (with strerror). */
int rl__cluster_file_read(const char *path, rl__cluster_file *out, rl__errdetail *err);
/* Format cf as the one-line text (with a trailing newline) into out. */
void rl__cluster_file_format(const rl__cluster_file *cf, rl_buf *out);
/* 1 if ip is dotted IPv4 text inside 127.0.0.0/8 (four decimal parts 0..255, no leading zeros). */
int rl__ip_is_loopback(const char *ip);

#endif
