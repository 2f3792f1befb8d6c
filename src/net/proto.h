/* proto.h (internal) — the message codecs of reclayer's wire protocol (docs/protocol.md): one C
 * struct per request and reply payload, an encoder and a decoder for each, and a dispatcher over
 * all of them. The messages themselves — number, name, payloads, flags — are listed once, in
 * net/messages.def; the enum, the names, the union and the dispatch table are made from it.
 *
 * A frame (frame.h) is a 16-byte header — payload_len, type, flags, request id — and a payload.
 * This header defines the payloads. Encoding rules (all little-endian, no padding, no optional
 * fields; the layouts are tabulated in docs/protocol.md and pinned by tests/unit/net/test_proto.c):
 *
 *   u8 u16 u32 u64 i32 i64   fixed width; booleans are u8 0 or 1
 *   bytes                    u32 length, then the bytes; each field has a maximum length
 *   selector                 bytes key, u8 or_equal (0/1), i32 offset (never INT32_MIN)
 *   kv                       bytes key, bytes value
 *   range                    bytes begin, bytes end, begin <= end
 *   mutation                 u8 type (rl__mutation_type), bytes p1, bytes p2
 *   T x n                    u32 count, then count elements
 *
 * Invariants of every codec:
 *   1. Pure: no I/O, no globals, no locks; a decoder reads only payload[0..len), an encoder only
 *      appends to its rl_buf (and, to undo a failure, truncates it back).
 *   2. Strict and canonical: a decoder accepts exactly the bytes its encoder produces for some
 *      valid struct, so decode-then-encode gives back the input byte for byte. Every enum and
 *      boolean is range-checked, every length limit enforced, cross-field rules (shards sorted and
 *      contiguous, peek versions increasing, …) checked, and bytes after the last field refused.
 *   3. Cheap to refuse: every count is checked against the bytes left (count x the smallest
 *      encoding of one element) before anything is allocated, so a decoder's allocations are a
 *      small multiple of len whatever the counts say.
 *   4. Encoders validate the same rules as decoders: a struct the peer would refuse is refused
 *      at the sender with RL_E_INVALID_ARGUMENT, so a bug shows up where it is.
 *
 * Zero-copy decoding: byte strings of a decoded struct (keys, values, labels, …) point into the
 * payload; arrays (rows, mutations, servers, …) are allocated from the caller's arena. A decoded
 * struct therefore borrows both: it is valid while the payload bytes are unchanged and the arena
 * is neither reset nor released. Copy what must outlive them.
 *
 * The common contract of the per-message functions below (each is declared with its struct):
 *
 *   int rl__msg_<name>_encode(rl_buf *out, const rl_msg_<name> *m, rl__errdetail *err);
 *     Append m's payload to out. [in] m: borrowed for the call; never written. [out] err: may be
 *     NULL; emptied, then on failure set to a message naming the field. Returns RL_OK; RL_E_INVALID_ARGUMENT when m
 *     breaks a rule of its struct (out is truncated back to its length before the call);
 *     RL_E_OUT_OF_MEMORY when out's sticky error is set (before or during the call).
 *
 *   int rl__msg_<name>_decode(const uint8_t *payload, size_t len, rl_arena *a,
 *                             rl_msg_<name> *out, rl__errdetail *err);
 *     Decode payload[0..len) into *out. [in] payload: may be NULL when len is 0; borrowed by
 *     *out (see above). [in] a: arrays of *out come from it; may be NULL for payloads without
 *     arrays. [out] out: filled on RL_OK, zeroed otherwise (but see rl__msg_hello_req: the
 *     handshake messages keep magic and version when they are foreign). [out] err:
 *     may be NULL; emptied, then on failure set to a message such as "COMMIT request: mutations[3].type is 99, not a
 *     mutation type". Returns RL_OK; RL_E_MALFORMED_FRAME (the receiver logs err and closes the
 *     connection); RL_E_OUT_OF_MEMORY (the arena failed); RL_E_INVALID_ARGUMENT (payload NULL with
 *     len > 0, or a NULL but needed). The HELLO, AUTH_CHALLENGE and AUTH request decoders also
 *     return RL_E_INCOMPATIBLE_PROTOCOL_VERSION (see rl__msg_hello_req).
 *
 * Thread rules: none; every function is reentrant.
 */
#ifndef RL_NET_PROTO_H
#define RL_NET_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "base/arena.h"
#include "base/buf.h"
#include "base/errdetail.h"
#include "base/kvtypes.h"
#include "net/auth.h"
#include "net/frame.h"
#include "reclayer/kv.h"

/* ---- Protocol constants ------------------------------------------------------------------ */

#define RL_PROTOCOL_MAGIC 0x564B4C52u /* "RLKV" in wire order (52 4C 4B 56) */
#define RL_PROTOCOL_VERSION 2u        /* 2: the AUTH handshake before HELLO */

/* Maximum lengths of bytes fields (checked by encoders and decoders). */
#define RL_PROTO_MAX_KEY (RL_KEY_SIZE_LIMIT + 1)         /* 10,001: end keys such as key + "\x00" */
#define RL_PROTO_MAX_VALUE RL_VALUE_SIZE_LIMIT           /* 100,000 */
#define RL_PROTO_MAX_MUT_KEY (RL_PROTO_MAX_KEY + 4)      /* SET_VERSIONSTAMPED_KEY p1: key + offset */
#define RL_PROTO_MAX_MUT_PARAM (RL_VALUE_SIZE_LIMIT + 4) /* mutation p2: value (+ 4-byte offset) */
#define RL_PROTO_MAX_MAPPER 10000
#define RL_PROTO_MAX_STRING 4096      /* host labels, addresses, error messages, ping payloads */
#define RL_PROTO_MAX_JSON (16u << 20) /* STATUS reply */
#define RL_PROTO_MAX_TEAM 16          /* storage servers per shard */
#define RL_PROTO_MAX_BATCH 10000      /* GET_MAPPED_RANGE batch */
#define RL_PROTO_MAX_PEER_STATS 64    /* per-peer entries of a GET_MAPPED_RANGE reply's stats */
/* A COMMIT's mutations (p1 + p2) plus its conflict ranges (begin + end), in bytes. */
#define RL_PROTO_MAX_COMMIT_BYTES RL_TXN_SIZE_LIMIT

/* What a message is (the FLAGS column of messages.def):
 *   HANDSHAKE     the handshake's (docs/protocol.md §2): the connection runtime's, never a role's
 *   COORD         the coordinator answers it
 *   STORAGE       storage servers answer it
 *   ADMIN         only on an admin connection (HELLO role 3): unauthorized_attempt (6001)
 *                 otherwise, and the connection stays open
 *   FROM_STORAGE  only from the storage server the request names (HELLO role 2 with that id):
 *                 client_invalid_operation (2000) otherwise, and the connection stays open
 *   READ          carries a read version (a storage server checks it before anything else) */
#define RL_MSGF_HANDSHAKE 0x01
#define RL_MSGF_COORD 0x02
#define RL_MSGF_STORAGE 0x04
#define RL_MSGF_ADMIN 0x08
#define RL_MSGF_FROM_STORAGE 0x10
#define RL_MSGF_READ 0x20

/* Message types: the frame's type field, one per line of messages.def. Part of the protocol:
 * never renumber. */
typedef enum {
#define RL_MSG(NAME, TYPE, FLAGS, REQ, REQ_X, REP, REP_X) RL_MSG_##NAME = (TYPE),
#define RL_MSG_ONE_WAY(NAME, TYPE, FLAGS, REQ, REQ_X) RL_MSG_##NAME = (TYPE),
#include "net/messages.def"
#undef RL_MSG
#undef RL_MSG_ONE_WAY
} rl__msg_type;

/* Each message's flags as a constant, RL_MSGF_OF_<NAME> (for compile-time checks of the roles'
 * tables). */
enum {
#define RL_MSG(NAME, TYPE, FLAGS, REQ, REQ_X, REP, REP_X) RL_MSGF_OF_##NAME = (FLAGS),
#define RL_MSG_ONE_WAY(NAME, TYPE, FLAGS, REQ, REQ_X) RL_MSGF_OF_##NAME = (FLAGS),
#include "net/messages.def"
#undef RL_MSG
#undef RL_MSG_ONE_WAY
};

/* Every type number is below this (tables indexed by type have this many entries). */
#define RL_MSG_TYPE_LIMIT 50
#define RL_MSG_RESERVED_ADMIN_FIRST 30
#define RL_MSG_RESERVED_ADMIN_LAST 39
#define RL_MSG_RESERVED_DELAY_FIRST 40
#define RL_MSG_RESERVED_DELAY_LAST 49

/* The role of a process (HELLO, server list). */
typedef enum {
    RL_ROLE_CLIENT = 0,
    RL_ROLE_COORDINATOR = 1,
    RL_ROLE_STORAGE = 2,
    RL_ROLE_ADMIN = 3, /* the rl tool's admin commands */
} rl__proto_role;

/* GET_RANGE / GET_MAPPED_RANGE reply status. */
typedef enum {
    RL_RANGE_OK = 0,
    RL_RANGE_SELECTOR_UNRESOLVED = 1, /* a selector left this server's shard: no rows; the client
                                         resolves the selectors itself and asks again */
} rl__range_status;

/* GET_MAPPED_RANGE strategy for secondaries on other storage servers (docs/design.md §8.4). */
typedef enum {
    RL_FETCH_DEFAULT = 0,    /* the database's setting */
    RL_FETCH_INDIVIDUAL = 1, /* FoundationDB's: batches of separate reads */
    RL_FETCH_GROUPED = 2,    /* one GET_MULTI per owning server per page */
} rl__fetch_strategy;

/* PEEK shard ownership change kinds. */
typedef enum {
    RL_SHARD_ASSIGN = 1, /* the server owns the range from this version on */
    RL_SHARD_REMOVE = 2, /* the server no longer owns it after this version */
} rl__shard_change_kind;

/* ---- Message types ----------------------------------------------------------------------- */

/* rl__msg_type_name — the name of a message type for logs ("GET_RANGE"), reserved types
 * included ("SPLIT_SHARD", "ADMIN_RESERVED", "DELAY_RESERVED"); "UNKNOWN" otherwise. Static. */
const char *rl__msg_type_name(int type);
/* rl__msg_type_known — 1 if type is a message of this protocol version (has codecs), else 0
 * (reserved types included). */
int rl__msg_type_known(int type);
/* rl__msg_type_flags — the RL_MSGF_* of a message of this protocol version; 0 for any other
 * type. */
unsigned rl__msg_type_flags(int type);

/* ---- Payloads ---------------------------------------------------------------------------- */
/* Each struct lists its fields in wire order. Byte strings are (pointer, length) pairs: the
 * pointer may be NULL only when the length is 0. Counts are element counts. */

/* RL_PROTO_CODECS(name) declares rl__msg_<name>_encode and rl__msg_<name>_decode (the contract
 * at the top of this file) for the struct rl_msg_<name>; proto.c defines them from its payload
 * table (every payload of messages.def). */
#define RL_PROTO_CODECS(name)                                                                         \
    int rl__msg_##name##_encode(rl_buf *out, const rl__msg_##name *m, rl__errdetail *err);            \
    int rl__msg_##name##_decode(const uint8_t *payload, size_t len, rl_arena *a, rl__msg_##name *out, \
                                rl__errdetail *err)

/* A payload without fields (STATUS request, POP reply): len must be 0. */
typedef struct {
    uint8_t unused_; /* C has no empty structs; not encoded */
} rl__msg_empty;

/* AUTH_CHALLENGE (type 3): the accepting side's first frame (flags 0, id 0), sent as soon as it
 * accepts; no reply — the connecting side answers with an AUTH request. A decoder that finds magic
 * or version other than RL_PROTOCOL_MAGIC / RL_PROTOCOL_VERSION returns
 * RL_E_INCOMPATIBLE_PROTOCOL_VERSION with both fields set, as HELLO's. */
typedef struct {
    uint32_t magic;                   /* RL_PROTOCOL_MAGIC */
    uint32_t protocol_version;        /* RL_PROTOCOL_VERSION */
    uint8_t nonce[RL_AUTH_NONCE_LEN]; /* fresh random bytes of the accepting side */
} rl__msg_auth_challenge;
int rl__msg_auth_challenge_encode(rl_buf *out, const rl__msg_auth_challenge *m, rl__errdetail *err);
int rl__msg_auth_challenge_decode(const uint8_t *payload, size_t len, rl_arena *a, rl__msg_auth_challenge *out,
                                  rl__errdetail *err);

/* AUTH request (type 4): the connecting side's first frame (flags 0, id 0), after the challenge.
 * Magic and version as AUTH_CHALLENGE's. */
typedef struct {
    uint32_t magic;                   /* RL_PROTOCOL_MAGIC */
    uint32_t protocol_version;        /* RL_PROTOCOL_VERSION */
    uint8_t auth_class;               /* rl__auth_class claimed: RL_AUTH_CLIENT or RL_AUTH_MEMBER */
    uint8_t nonce[RL_AUTH_NONCE_LEN]; /* fresh random bytes of the connecting side */
    uint8_t proof[RL_AUTH_PROOF_LEN]; /* rl__auth_proof(class, 'C', challenge nonce, nonce) */
} rl__msg_auth_req;
int rl__msg_auth_req_encode(rl_buf *out, const rl__msg_auth_req *m, rl__errdetail *err);
/* rl__msg_auth_req_make — the connecting side's AUTH answering a challenge with snonce: magic,
 * version, the class a proves when it connects (rl__auth_connect_class), a fresh nonce and the
 * proof (src/net/auth.c; not pure: it draws the nonce). RL_OK or rl__auth_random / rl__auth_proof's
 * error (*out then unusable). */
int rl__msg_auth_req_make(const rl__net_auth *a, const uint8_t snonce[RL_AUTH_NONCE_LEN], rl__msg_auth_req *out);
int rl__msg_auth_req_decode(const uint8_t *payload, size_t len, rl_arena *a, rl__msg_auth_req *out, rl__errdetail *err);

/* AUTH reply: the accepting side's proof (or an error reply: invalid_cluster_id,
 * unauthorized_attempt, incompatible_protocol_version; then it closes). */
typedef struct {
    uint8_t proof[RL_AUTH_PROOF_LEN]; /* rl__auth_proof(class, 'S', challenge nonce, request nonce) */
} rl__msg_auth_reply;
int rl__msg_auth_reply_encode(rl_buf *out, const rl__msg_auth_reply *m, rl__errdetail *err);
int rl__msg_auth_reply_decode(const uint8_t *payload, size_t len, rl_arena *a, rl__msg_auth_reply *out,
                              rl__errdetail *err);

/* HELLO request (type 1): the first frame after the handshake, sent by the connecting side.
 * The first 8 bytes (magic, version) are fixed for every protocol version: a decoder that finds
 * them different from RL_PROTOCOL_MAGIC / RL_PROTOCOL_VERSION returns
 * RL_E_INCOMPATIBLE_PROTOCOL_VERSION with both fields set (and nothing else decoded), and the
 * receiver answers an error reply with that code and closes. Encoders write magic and version
 * as given (tests send bad handshakes). */
typedef struct {
    uint32_t magic;            /* RL_PROTOCOL_MAGIC */
    uint32_t protocol_version; /* RL_PROTOCOL_VERSION */
    uint8_t role;              /* rl__proto_role of the sender */
    uint32_t id;               /* the sender's server id; 0 for RL_ROLE_CLIENT */
    const uint8_t *host;       /* host label, <= RL_PROTO_MAX_STRING */
    uint32_t host_len;
} rl__msg_hello_req;
int rl__msg_hello_req_encode(rl_buf *out, const rl__msg_hello_req *m, rl__errdetail *err);
int rl__msg_hello_req_decode(const uint8_t *payload, size_t len, rl_arena *a, rl__msg_hello_req *out,
                             rl__errdetail *err);

/* HELLO reply. A version other than RL_PROTOCOL_VERSION decodes as
 * RL_E_INCOMPATIBLE_PROTOCOL_VERSION (protocol_version set). */
typedef struct {
    uint32_t protocol_version; /* RL_PROTOCOL_VERSION */
    uint8_t role;              /* rl__proto_role of the replier */
    uint32_t id;               /* its server id; 0 for RL_ROLE_CLIENT */
    const uint8_t *host;       /* <= RL_PROTO_MAX_STRING */
    uint32_t host_len;
} rl__msg_hello_reply;
int rl__msg_hello_reply_encode(rl_buf *out, const rl__msg_hello_reply *m, rl__errdetail *err);
int rl__msg_hello_reply_decode(const uint8_t *payload, size_t len, rl_arena *a, rl__msg_hello_reply *out,
                               rl__errdetail *err);

/* PING request (type 2): the payload is echoed. */
typedef struct {
    const uint8_t *payload; /* <= RL_PROTO_MAX_STRING */
    uint32_t payload_len;
} rl__msg_ping_req;
int rl__msg_ping_req_encode(rl_buf *out, const rl__msg_ping_req *m, rl__errdetail *err);
int rl__msg_ping_req_decode(const uint8_t *payload, size_t len, rl_arena *a, rl__msg_ping_req *out, rl__errdetail *err);

/* PING reply. */
typedef struct {
    const uint8_t *payload; /* the request's, <= RL_PROTO_MAX_STRING */
    uint32_t payload_len;
    uint64_t server_mono_ns; /* the replier's monotonic clock when it answered */
} rl__msg_ping_reply;
int rl__msg_ping_reply_encode(rl_buf *out, const rl__msg_ping_reply *m, rl__errdetail *err);
int rl__msg_ping_reply_decode(const uint8_t *payload, size_t len, rl_arena *a, rl__msg_ping_reply *out,
                              rl__errdetail *err);

/* Error reply: the payload of any reply with flags RL_FRAME_REPLY | RL_FRAME_ERROR. */
typedef struct {
    int32_t code;           /* an rl error code, > 0 (1001 wrong_shard_server, 1009, 2100, …) */
    const uint8_t *message; /* detail for logs, <= RL_PROTO_MAX_STRING; may be empty */
    uint32_t message_len;
} rl__msg_error;
int rl__msg_error_encode(rl_buf *out, const rl__msg_error *m, rl__errdetail *err);
int rl__msg_error_decode(const uint8_t *payload, size_t len, rl_arena *a, rl__msg_error *out, rl__errdetail *err);

/* GET_READ_VERSION request (type 10). */
typedef struct {
    uint32_t flags; /* none defined yet: must be 0 */
} rl__msg_get_read_version_req;
int rl__msg_get_read_version_req_encode(rl_buf *out, const rl__msg_get_read_version_req *m, rl__errdetail *err);
int rl__msg_get_read_version_req_decode(const uint8_t *payload, size_t len, rl_arena *a,
                                        rl__msg_get_read_version_req *out, rl__errdetail *err);

/* GET_READ_VERSION reply. */
typedef struct {
    rl__version version; /* the newest durable commit batch */
} rl__msg_get_read_version_reply;
int rl__msg_get_read_version_reply_encode(rl_buf *out, const rl__msg_get_read_version_reply *m, rl__errdetail *err);
int rl__msg_get_read_version_reply_decode(const uint8_t *payload, size_t len, rl_arena *a,
                                          rl__msg_get_read_version_reply *out, rl__errdetail *err);

/* COMMIT request (type 11). Ranges are rl__keyrange (begin <= end, keys <= RL_PROTO_MAX_KEY);
 * mutations are any rl__mutation_type, versionstamped ones included, with p1 <= RL_PROTO_MAX_KEY
 * (SET_VERSIONSTAMPED_KEY: RL_PROTO_MAX_MUT_KEY) and p2 <= RL_PROTO_MAX_MUT_PARAM (CLEAR_RANGE:
 * an end key, <= RL_PROTO_MAX_KEY and >= p1; CLEAR: empty). The sum of every mutation's
 * len1 + len2 and every range's begin_len + end_len is at most RL_PROTO_MAX_COMMIT_BYTES (the
 * transaction size rule of include/reclayer/kv.h). The arrays have the shapes of
 * rl__commit_request, so the coordinator passes them on without copying. */
typedef struct {
    rl__version read_version;
    const rl__keyrange *reads; /* read conflict ranges */
    uint32_t n_reads;
    const rl__keyrange *writes; /* write conflict ranges */
    uint32_t n_writes;
    const rl__mutation *muts; /* in issue order */
    uint32_t n_muts;
} rl__msg_commit_req;
int rl__msg_commit_req_encode(rl_buf *out, const rl__msg_commit_req *m, rl__errdetail *err);
int rl__msg_commit_req_decode(const uint8_t *payload, size_t len, rl_arena *a, rl__msg_commit_req *out,
                              rl__errdetail *err);

/* COMMIT reply: the committer's outcome (a conflict is a reply, not an error reply). */
typedef struct {
    int32_t result;             /* RL_OK or an rl error code (>= 0) */
    rl__version commit_version; /* the batch's version; 0 if read-only or not committed */
    uint16_t batch_order;       /* the transaction's order in its batch (versionstamps) */
} rl__msg_commit_reply;
int rl__msg_commit_reply_encode(rl_buf *out, const rl__msg_commit_reply *m, rl__errdetail *err);
int rl__msg_commit_reply_decode(const uint8_t *payload, size_t len, rl_arena *a, rl__msg_commit_reply *out,
                                rl__errdetail *err);

/* GET_SHARD_MAP request (type 12). */
typedef struct {
    rl__version min_version; /* answer with a map at least this new; 0: any */
} rl__msg_get_shard_map_req;
int rl__msg_get_shard_map_req_encode(rl_buf *out, const rl__msg_get_shard_map_req *m, rl__errdetail *err);
int rl__msg_get_shard_map_req_decode(const uint8_t *payload, size_t len, rl_arena *a, rl__msg_get_shard_map_req *out,
                                     rl__errdetail *err);

/* One process of the server list. */
typedef struct {
    uint32_t id;            /* ids strictly increase along the list */
    uint8_t role;           /* RL_ROLE_COORDINATOR or RL_ROLE_STORAGE */
    const uint8_t *address; /* dotted IPv4 text ("127.0.0.1": four decimal parts 0-255, no
                               leading zeros), not NUL-terminated */
    uint32_t address_len;
    uint16_t port;       /* not 0 */
    const uint8_t *host; /* host label, <= RL_PROTO_MAX_STRING */
    uint32_t host_len;
    uint8_t healthy; /* 0 or 1: the coordinator's view */
} rl__msg_server;

/* One shard: [begin, end) and the team that holds it. */
typedef struct {
    const uint8_t *begin; /* begin < end; begin == the previous shard's end */
    uint32_t begin_len;
    const uint8_t *end;
    uint32_t end_len;
    const uint32_t *team; /* storage ids, 1..RL_PROTO_MAX_TEAM, all different */
    uint32_t n_team;
} rl__msg_shard;

/* GET_SHARD_MAP reply: the server list and the shards, sorted, non-overlapping and contiguous.
 * The codec does not check that team ids appear in the server list (the map's writer does). */
typedef struct {
    rl__version version; /* the version of the map */
    const rl__msg_server *servers;
    uint32_t n_servers;
    const rl__msg_shard *shards;
    uint32_t n_shards;
    uint32_t delay_us;  /* the cluster's injected one-way delay between hosts, µs (any u32; the
                           servers keep it <= 10,000,000) — the client applies it to its links */
    uint32_t jitter_us; /* and its jitter, µs */
} rl__msg_get_shard_map_reply;
int rl__msg_get_shard_map_reply_encode(rl_buf *out, const rl__msg_get_shard_map_reply *m, rl__errdetail *err);
int rl__msg_get_shard_map_reply_decode(const uint8_t *payload, size_t len, rl_arena *a,
                                       rl__msg_get_shard_map_reply *out, rl__errdetail *err);

/* REGISTER_STORAGE request (type 13): a storage server announces itself to the coordinator. */
typedef struct {
    uint32_t id;
    const uint8_t *address; /* dotted IPv4, as rl__msg_server */
    uint32_t address_len;
    uint16_t port; /* not 0 */
    const uint8_t *host;
    uint32_t host_len;
    rl__version durable_version; /* the newest version its engine has durably */
} rl__msg_register_storage_req;
int rl__msg_register_storage_req_encode(rl_buf *out, const rl__msg_register_storage_req *m, rl__errdetail *err);
int rl__msg_register_storage_req_decode(const uint8_t *payload, size_t len, rl_arena *a,
                                        rl__msg_register_storage_req *out, rl__errdetail *err);

/* REGISTER_STORAGE reply. */
typedef struct {
    rl__version start_version;  /* PEEK from after this version */
    const rl__keyrange *ranges; /* the ranges the server owns now: each non-empty, sorted,
                                  non-overlapping (adjacent allowed) */
    uint32_t n_ranges;
} rl__msg_register_storage_reply;
int rl__msg_register_storage_reply_encode(rl_buf *out, const rl__msg_register_storage_reply *m, rl__errdetail *err);
int rl__msg_register_storage_reply_decode(const uint8_t *payload, size_t len, rl_arena *a,
                                          rl__msg_register_storage_reply *out, rl__errdetail *err);

/* PEEK request (type 14): a storage server asks the coordinator's log for mutations. */
typedef struct {
    uint32_t storage_id;
    rl__version after_version; /* send versions > this */
    uint32_t max_bytes;        /* about this many mutation bytes per reply; 0: server default */
    uint32_t max_wait_ms;      /* hold the request this long when nothing is new; 0: answer now */
} rl__msg_peek_req;
int rl__msg_peek_req_encode(rl_buf *out, const rl__msg_peek_req *m, rl__errdetail *err);
int rl__msg_peek_req_decode(const uint8_t *payload, size_t len, rl_arena *a, rl__msg_peek_req *out, rl__errdetail *err);

/* One version of a PEEK reply: its mutations for the server's shards (storage types only: no
 * versionstamped mutation reaches a storage server). */
typedef struct {
    rl__version version;
    const rl__mutation *muts;
    uint32_t n_muts;
} rl__msg_peek_version;

/* A shard ownership change, effective at version. */
typedef struct {
    rl__version version;
    uint8_t kind;       /* rl__shard_change_kind */
    rl__keyrange range; /* begin < end */
} rl__msg_shard_change;

/* PEEK reply: after applying it the server has every mutation of its shards with version <=
 * end_version. Versions strictly increase and are <= end_version; change versions do not
 * decrease and are <= end_version. That they are also > the request's after_version is checked
 * by rl__msg_peek_reply_check (the reply alone does not carry it). */
typedef struct {
    rl__version end_version;
    const rl__msg_peek_version *versions;
    uint32_t n_versions;
    const rl__msg_shard_change *changes;
    uint32_t n_changes;
} rl__msg_peek_reply;
int rl__msg_peek_reply_encode(rl_buf *out, const rl__msg_peek_reply *m, rl__errdetail *err);
int rl__msg_peek_reply_decode(const uint8_t *payload, size_t len, rl_arena *a, rl__msg_peek_reply *out,
                              rl__errdetail *err);
/* rl__msg_peek_reply_check — the rules of a PEEK reply that need its request: end_version >=
 * after_version, and every version and change version > after_version. [in] r: a decoded
 * reply. Returns RL_OK or RL_E_MALFORMED_FRAME (err says which). */
int rl__msg_peek_reply_check(const rl__msg_peek_reply *r, rl__version after_version, rl__errdetail *err);

/* POP request (type 15): the server has made everything <= durable_version durable; the log
 * may drop it once every server of its shards has. */
typedef struct {
    uint32_t storage_id;
    rl__version durable_version;
} rl__msg_pop_req;
int rl__msg_pop_req_encode(rl_buf *out, const rl__msg_pop_req *m, rl__errdetail *err);
int rl__msg_pop_req_decode(const uint8_t *payload, size_t len, rl_arena *a, rl__msg_pop_req *out, rl__errdetail *err);

/* POP reply: empty. */
typedef rl__msg_empty rl__msg_pop_reply;
int rl__msg_pop_reply_encode(rl_buf *out, const rl__msg_pop_reply *m, rl__errdetail *err);
int rl__msg_pop_reply_decode(const uint8_t *payload, size_t len, rl_arena *a, rl__msg_pop_reply *out,
                             rl__errdetail *err);

/* STATUS request (type 16): empty. */
typedef rl__msg_empty rl__msg_status_req;
int rl__msg_status_req_encode(rl_buf *out, const rl__msg_status_req *m, rl__errdetail *err);
int rl__msg_status_req_decode(const uint8_t *payload, size_t len, rl_arena *a, rl__msg_status_req *out,
                              rl__errdetail *err);

/* STATUS reply. */
typedef struct {
    const uint8_t *json; /* a JSON document (not parsed by the codec), <= RL_PROTO_MAX_JSON */
    uint32_t json_len;
} rl__msg_status_reply;
int rl__msg_status_reply_encode(rl_buf *out, const rl__msg_status_reply *m, rl__errdetail *err);
int rl__msg_status_reply_decode(const uint8_t *payload, size_t len, rl_arena *a, rl__msg_status_reply *out,
                                rl__errdetail *err);

/* GET request (type 20). */
typedef struct {
    rl__version version;
    const uint8_t *key; /* <= RL_PROTO_MAX_KEY */
    uint32_t key_len;
} rl__msg_get_req;
int rl__msg_get_req_encode(rl_buf *out, const rl__msg_get_req *m, rl__errdetail *err);
int rl__msg_get_req_decode(const uint8_t *payload, size_t len, rl_arena *a, rl__msg_get_req *out, rl__errdetail *err);

/* GET reply. */
typedef struct {
    uint8_t present;      /* 0 or 1 */
    const uint8_t *value; /* <= RL_PROTO_MAX_VALUE; empty when absent */
    uint32_t value_len;
} rl__msg_get_reply;

/* The fixed fields that start a GET request's payload (version, key length) and a GET reply's
 * (present, value length): the payload is this head followed by the key (the value). Each writes
 * the head of a valid m and returns 1, or returns 0 (nothing written) when m breaks a rule — the
 * caller then encodes m with rl__msg_encode, which names the rule. For senders that gather the
 * head and the bytes into one frame without a buffer (rl__conn_send2). */
#define RL_MSG_GET_REQ_HEAD 12
#define RL_MSG_GET_REPLY_HEAD 5
int rl__msg_get_req_head(const rl__msg_get_req *m, uint8_t out[RL_MSG_GET_REQ_HEAD]);
int rl__msg_get_reply_head(const rl__msg_get_reply *m, uint8_t out[RL_MSG_GET_REPLY_HEAD]);
int rl__msg_get_reply_encode(rl_buf *out, const rl__msg_get_reply *m, rl__errdetail *err);
int rl__msg_get_reply_decode(const uint8_t *payload, size_t len, rl_arena *a, rl__msg_get_reply *out,
                             rl__errdetail *err);

/* GET_KEY request (type 21). Selector keys are <= RL_PROTO_MAX_KEY, or_equal is 0 or 1 and
 * offset is not INT32_MIN (in every message). */
typedef struct {
    rl__version version;
    rl_key_selector sel;
} rl__msg_get_key_req;
int rl__msg_get_key_req_encode(rl_buf *out, const rl__msg_get_key_req *m, rl__errdetail *err);
int rl__msg_get_key_req_decode(const uint8_t *payload, size_t len, rl_arena *a, rl__msg_get_key_req *out,
                               rl__errdetail *err);

/* GET_KEY reply. */
typedef struct {
    uint8_t resolved; /* 1: sel.key is the answer (or_equal 0, offset 1); 0: the selector
                            ran past this server's shard: continue with sel on the next one */
    rl_key_selector sel;
} rl__msg_get_key_reply;
int rl__msg_get_key_reply_encode(rl_buf *out, const rl__msg_get_key_reply *m, rl__errdetail *err);
int rl__msg_get_key_reply_decode(const uint8_t *payload, size_t len, rl_arena *a, rl__msg_get_key_reply *out,
                                 rl__errdetail *err);

/* GET_RANGE request (type 22). */
typedef struct {
    rl__version version;
    rl_key_selector begin;
    rl_key_selector end;
    int32_t limit;        /* rows, >= 0; 0 = no limit */
    int64_t target_bytes; /* >= 0; 0 = no limit */
    uint8_t reverse;      /* 0 or 1 */
} rl__msg_get_range_req;
int rl__msg_get_range_req_encode(rl_buf *out, const rl__msg_get_range_req *m, rl__errdetail *err);
int rl__msg_get_range_req_decode(const uint8_t *payload, size_t len, rl_arena *a, rl__msg_get_range_req *out,
                                 rl__errdetail *err);

/* GET_RANGE reply. With status RL_RANGE_SELECTOR_UNRESOLVED there are no rows and more is 0.
 * Keys <= RL_PROTO_MAX_KEY, values <= RL_PROTO_MAX_VALUE. The codec does not check row order
 * (it does not know the request's direction); the client does. */
typedef struct {
    const rl_keyvalue *kvs; /* in the request's direction */
    uint32_t n_kvs;
    uint8_t more;                /* 0 or 1: rows remain in the range on this shard beyond those returned */
    uint8_t status;              /* rl__range_status */
    const uint8_t *read_through; /* empty, or the shard boundary where this server stopped
                                    because the range continues on another shard */
    uint32_t read_through_len;
    const uint8_t *resolved_begin; /* the selectors as resolved (conflict ranges) */
    uint32_t resolved_begin_len;
    const uint8_t *resolved_end;
    uint32_t resolved_end_len;
} rl__msg_get_range_reply;
int rl__msg_get_range_reply_encode(rl_buf *out, const rl__msg_get_range_reply *m, rl__errdetail *err);
int rl__msg_get_range_reply_decode(const uint8_t *payload, size_t len, rl_arena *a, rl__msg_get_range_reply *out,
                                   rl__errdetail *err);

/* GET_MAPPED_RANGE request (type 23). */
typedef struct {
    rl__version version;
    rl_key_selector begin;
    rl_key_selector end;
    const uint8_t *mapper; /* a packed tuple (not parsed by the codec), <= RL_PROTO_MAX_MAPPER */
    uint32_t mapper_len;
    int32_t limit;                /* index entries, >= 0; 0 = no limit */
    int64_t target_bytes;         /* >= 0; 0 = no limit */
    uint8_t reverse;              /* 0 or 1 */
    int32_t secondary_row_limit;  /* >= 0; 0 = the server's default */
    int64_t secondary_byte_limit; /* >= 0; 0 = the server's default */
    uint8_t strategy;             /* rl__fetch_strategy */
    uint32_t batch;               /* secondaries per batch, <= RL_PROTO_MAX_BATCH; 0: default */
    uint8_t omit_index;           /* 0 or 1: RL_MAPPED_OMIT_INDEX (on the wire: bit 1 of reverse's
                                     byte, so a request without it is unchanged) */
    uint8_t defer_remote;         /* 0 or 1: RL_MAPPED_DEFER_REMOTE (bit 2 of the same byte) */
} rl__msg_get_mapped_range_req;
int rl__msg_get_mapped_range_req_encode(rl_buf *out, const rl__msg_get_mapped_range_req *m, rl__errdetail *err);
int rl__msg_get_mapped_range_req_decode(const uint8_t *payload, size_t len, rl_arena *a,
                                        rl__msg_get_mapped_range_req *out, rl__errdetail *err);

/* What one mapped read sent one peer storage server (the reply's per-peer stats). */
typedef struct {
    uint32_t server_id;      /* the peer */
    uint32_t requests;       /* GET_MULTI requests sent to it */
    uint32_t items;          /* the reads (pieces) they carried */
    uint64_t bytes_sent;     /* their request frames, headers included */
    uint64_t bytes_received; /* their reply frames (the replies that came in time) */
} rl__msg_s2s_peer;

/* Counters of one mapped read at the storage server (the tracing of docs/design.md §7). */
typedef struct {
    uint32_t secondaries_local;  /* secondary reads served from this server's shards */
    uint32_t secondaries_remote; /* ... by other storage servers */
    uint32_t s2s_requests;       /* storage-to-storage requests sent */
    uint32_t s2s_round_trips;    /* ... waited for one after another */
    uint64_t server_ns;          /* time the server spent on the request */
    /* Appended for tracing: */
    uint64_t s2s_bytes_sent;     /* GET_MULTI request frames sent, headers included */
    uint64_t s2s_bytes_received; /* ... their reply frames received */
    uint32_t s2s_peers;          /* distinct storage servers read from */
    /* Per peer (the first RL_PROTO_MAX_PEER_STATS of them, in first-use order; server ids
     * distinct and non-zero). Decoding allocates the array from the arena. */
    uint32_t n_peer_stats;
    const rl__msg_s2s_peer *peer_stats;
} rl__msg_mapped_stats;

/* GET_MAPPED_RANGE reply. Entries are the public rl_mapped_keyvalue: is_range, more,
 * served_locally and index_omitted are 0 or 1, a point entry (is_range 0) has at most one kv,
 * n_kvs >= 0, an omitted entry's index key and value are empty (index_omitted_len is carried; a
 * whole entry's is not, and decodes as 0); each entry's kvs array comes from the arena. Status as
 * GET_RANGE. */
typedef struct {
    const rl_mapped_keyvalue *entries;
    uint32_t n_entries;
    uint8_t more;   /* 0 or 1: index entries remain on this shard */
    uint8_t status; /* rl__range_status */
    const uint8_t *read_through;
    uint32_t read_through_len;
    const uint8_t *resolved_begin;
    uint32_t resolved_begin_len;
    const uint8_t *resolved_end;
    uint32_t resolved_end_len;
    rl__msg_mapped_stats stats;
} rl__msg_get_mapped_range_reply;
int rl__msg_get_mapped_range_reply_encode(rl_buf *out, const rl__msg_get_mapped_range_reply *m, rl__errdetail *err);
int rl__msg_get_mapped_range_reply_decode(const uint8_t *payload, size_t len, rl_arena *a,
                                          rl__msg_get_mapped_range_reply *out, rl__errdetail *err);
/* The same codec with the entries taken field by field (the generic walk) instead of the fast
 * paths (proto.c): identical bytes, structs and errors; for tests that compare the two. */
int rl__msg_get_mapped_range_reply_encode_walk(rl_buf *out, const rl__msg_get_mapped_range_reply *m,
                                               rl__errdetail *err);
int rl__msg_get_mapped_range_reply_decode_walk(const uint8_t *payload, size_t len, rl_arena *a,
                                               rl__msg_get_mapped_range_reply *out, rl__errdetail *err);

/* GET_MAPPED_STREAM request (type 25): a GET_MAPPED_RANGE request whose reply is streamed. The
 * server sends the entries in MAPPED_CHUNK frames of about chunk_bytes each, never more than
 * window_bytes of chunk payload that the client has not credited back (MAPPED_CREDIT) — except one
 * chunk when nothing is outstanding, so an entry larger than the window still goes —, then the
 * final reply (rl__msg_get_mapped_stream_reply), or an error reply at any point (the chunks
 * before it are void). */
typedef struct {
    rl__msg_get_mapped_range_req r; /* the read, as GET_MAPPED_RANGE's (same fields, same rules) */
    uint32_t chunk_bytes;           /* entries per chunk until this many payload bytes; 0: 256 KiB */
    uint32_t window_bytes;          /* chunk bytes outstanding at most (the initial credit); 0: 4 MiB;
                                       a server caps it at 64 MiB */
} rl__msg_get_mapped_stream_req;
RL_PROTO_CODECS(get_mapped_stream_req);

/* GET_MAPPED_STREAM final reply: GET_MAPPED_RANGE's reply (the same codec); its entries follow
 * those of the chunks (a server may send them all in chunks and none here), and more, status,
 * read_through, resolved bounds and stats describe the whole read. */
typedef rl__msg_get_mapped_range_reply rl__msg_get_mapped_stream_reply;
RL_PROTO_CODECS(get_mapped_stream_reply);

/* MAPPED_CHUNK (type 26, one-way, storage server to client, flags 0, the GET_MAPPED_STREAM
 * request's id): the next entries of the stream, in order. Entries as the mapped reply's. */
typedef struct {
    const rl_mapped_keyvalue *entries;
    uint32_t n_entries; /* a server sends none empty */
} rl__msg_mapped_chunk;
RL_PROTO_CODECS(mapped_chunk);
/* rl__msg_mapped_entries_append — append the encoding of ev[0..n) as a MAPPED_CHUNK carries
 * them, without the count before them: a sender gathers the entries of several batches in one
 * buffer and sends the count as the frame's head (rl__conn_send2). Returns as the encoders. */
int rl__msg_mapped_entries_append(rl_buf *out, const rl_mapped_keyvalue *ev, uint32_t n, rl__errdetail *err);

/* MAPPED_CREDIT (type 27, one-way, client to storage server, the GET_MAPPED_STREAM request's id):
 * the client consumed bytes more of chunk payload; or, with cancel 1, the client wants no more
 * (the server stops at its next chunk and answers operation_cancelled). A credit for a stream
 * that has ended is ignored. */
typedef struct {
    uint32_t bytes; /* chunk payload bytes credited back */
    uint8_t cancel; /* 0 or 1 */
} rl__msg_mapped_credit;
RL_PROTO_CODECS(mapped_credit);

/* One read of a GET_MULTI request. */
typedef struct {
    uint8_t is_range;     /* 1: [begin, end), begin <= end; 0: a point read of begin (end is
                             carried unchanged, e.g. begin + "\x00" as in rl_mapped_keyvalue) */
    const uint8_t *begin; /* <= RL_PROTO_MAX_KEY */
    uint32_t begin_len;
    const uint8_t *end; /* <= RL_PROTO_MAX_KEY */
    uint32_t end_len;
    int32_t row_limit;  /* >= 0; 0 = no limit */
    int64_t byte_limit; /* >= 0; 0 = no limit */
} rl__msg_read_item;

/* GET_MULTI request (type 24): storage-to-storage secondary reads at one version. */
typedef struct {
    rl__version version;
    const rl__msg_read_item *items;
    uint32_t n_items;
    uint64_t max_bytes; /* key + value bytes of the reply at most (the row that crosses it
                         * included); 0: the server's default (32 MiB). Items the budget does not
                         * reach come back unread: no rows and more 1 */
} rl__msg_get_multi_req;
int rl__msg_get_multi_req_encode(rl_buf *out, const rl__msg_get_multi_req *m, rl__errdetail *err);
int rl__msg_get_multi_req_decode(const uint8_t *payload, size_t len, rl_arena *a, rl__msg_get_multi_req *out,
                                 rl__errdetail *err);

/* The result of one read item: an error (then no rows, more 0), or its rows. */
typedef struct {
    int32_t error; /* RL_OK or an rl error code (>= 0) */
    const rl_keyvalue *kvs;
    uint32_t n_kvs;
    uint8_t more; /* 0 or 1: cut off by the item's limits */
} rl__msg_read_result;

/* GET_MULTI reply: one result per item, in the request's order (the codec cannot check the
 * count against the request; the caller does). */
typedef struct {
    const rl__msg_read_result *results;
    uint32_t n_results;
} rl__msg_get_multi_reply;
int rl__msg_get_multi_reply_encode(rl_buf *out, const rl__msg_get_multi_reply *m, rl__errdetail *err);
int rl__msg_get_multi_reply_decode(const uint8_t *payload, size_t len, rl_arena *a, rl__msg_get_multi_reply *out,
                                   rl__errdetail *err);

/* GET_METRICS request (type 28): size estimates from a storage server's byte sample at its
 * latest state (no read version; docs/design.md §4, "Size estimates"). The server answers for
 * range clipped to the end of the shard it owns that holds range.begin, and says where it stopped
 * (read_through). */
typedef enum {
    RL_METRICS_ESTIMATE = 1, /* the estimated bytes of the range */
    RL_METRICS_SPLIT = 2,    /* the cuts of the range for chunks of about chunk bytes */
} rl__metrics_op;
typedef struct {
    uint8_t op;         /* rl__metrics_op */
    rl__keyrange range; /* begin < end (not empty), keys <= RL_PROTO_MAX_KEY */
    int64_t chunk;      /* RL_METRICS_SPLIT: > 0; RL_METRICS_ESTIMATE: 0 */
} rl__msg_get_metrics_req;
int rl__msg_get_metrics_req_encode(rl_buf *out, const rl__msg_get_metrics_req *m, rl__errdetail *err);
int rl__msg_get_metrics_req_decode(const uint8_t *payload, size_t len, rl_arena *a, rl__msg_get_metrics_req *out,
                                   rl__errdetail *err);

/* GET_METRICS reply. */
typedef struct {
    int64_t bytes;        /* ESTIMATE: the estimate (>= 0); SPLIT: 0 */
    const rl_slice *cuts; /* SPLIT: strictly ascending keys (<= RL_PROTO_MAX_KEY), strictly inside
                           * the part of the range answered for; ESTIMATE: none */
    uint32_t n_cuts;
    const uint8_t *read_through; /* empty, or the end of the server's shard, where it stopped
                                    because the range continues on another shard */
    uint32_t read_through_len;
} rl__msg_get_metrics_reply;
int rl__msg_get_metrics_reply_encode(rl_buf *out, const rl__msg_get_metrics_reply *m, rl__errdetail *err);
int rl__msg_get_metrics_reply_decode(const uint8_t *payload, size_t len, rl_arena *a, rl__msg_get_metrics_reply *out,
                                     rl__errdetail *err);

/* SET_DELAY request (type 40): the process's new injected delay, applied to every connection
 * whose peer has another host label (admin connections excepted) and to later ones. The codec
 * accepts any u32; a server answers invalid_argument above 10,000,000 (RL_NETEM_MAX_US, netem.h). */
typedef struct {
    uint32_t delay_us;  /* one-way delay, µs */
    uint32_t jitter_us; /* uniform jitter added to each frame's delay, µs */
} rl__msg_set_delay_req;
int rl__msg_set_delay_req_encode(rl_buf *out, const rl__msg_set_delay_req *m, rl__errdetail *err);
int rl__msg_set_delay_req_decode(const uint8_t *payload, size_t len, rl_arena *a, rl__msg_set_delay_req *out,
                                 rl__errdetail *err);

/* SET_DELAY reply: empty. */
typedef rl__msg_empty rl__msg_set_delay_reply;
int rl__msg_set_delay_reply_encode(rl_buf *out, const rl__msg_set_delay_reply *m, rl__errdetail *err);
int rl__msg_set_delay_reply_decode(const uint8_t *payload, size_t len, rl_arena *a, rl__msg_set_delay_reply *out,
                                   rl__errdetail *err);

/* ---- Placement (admin) --------------------------------------------------------- */

/* SPLIT_SHARD request (type 30, admin tool -> coordinator): split the shard holding key at key
 * (both halves keep the team). key is below "\xff" and not "" (the keyspace's start is always a
 * boundary). */
typedef struct {
    const uint8_t *key;
    uint32_t key_len;
} rl__msg_split_shard_req;
RL_PROTO_CODECS(split_shard_req);

/* SPLIT_SHARD reply: the version the map holds the boundary at (the split's commit version, or
 * the durable version when key already was a boundary: split 0). */
typedef struct {
    rl__version version;
    uint8_t split; /* 1 a boundary was added, 0 it was one already */
} rl__msg_split_shard_reply;
RL_PROTO_CODECS(split_shard_reply);

/* ASSIGN_SHARD request (type 31, admin tool -> coordinator): make [begin, end) whole shards and
 * move them to team. The reply comes when every shard of the range is on the team (or with an
 * error; a timed_out error leaves the move running). */
typedef struct {
    rl__keyrange range;   /* begin < end (checked by the codec); end <= "\xff" (by the server) */
    const uint32_t *team; /* storage ids, 1..RL_PROTO_MAX_TEAM, all different */
    uint32_t n_team;
    uint32_t timeout_ms; /* 0: the coordinator's default (60 s) */
} rl__msg_assign_shard_req;
RL_PROTO_CODECS(assign_shard_req);

/* ASSIGN_SHARD reply. */
typedef struct {
    rl__version version; /* the last switch's commit version (the durable version if nothing
                           had to move) */
    uint32_t moved;      /* shards whose team changed */
} rl__msg_assign_shard_reply;
RL_PROTO_CODECS(assign_shard_reply);

/* MOVE_SHARD request (type 32, storage -> coordinator, "fetch complete"): the storage server holds
 * range (assigned to it by a PEEK change) completely and durably from version on. */
typedef struct {
    uint32_t storage_id;
    rl__keyrange range; /* begin < end */
    rl__version version;
} rl__msg_move_shard_req;
RL_PROTO_CODECS(move_shard_req);

/* WATCH_VALUE request (type 29): report a change of key after `version` from (present, value).
 * The server answers when the key's value at a version after `version` differs (the history in
 * its window included: a change away and back counts) or after hold_ms without one. */
#define RL_PROTO_MAX_WATCH_HOLD_MS 60000
typedef struct {
    rl__version version;
    const uint8_t *key; /* <= RL_PROTO_MAX_KEY */
    uint32_t key_len;
    uint8_t present;      /* 0 or 1 */
    const uint8_t *value; /* <= RL_PROTO_MAX_VALUE; empty when absent */
    uint32_t value_len;
    uint32_t hold_ms; /* 1 .. RL_PROTO_MAX_WATCH_HOLD_MS */
} rl__msg_watch_value_req;
RL_PROTO_CODECS(watch_value_req);

/* WATCH_VALUE reply: changed 1, or 0 when the hold time passed; version: through which version
 * the server looked (changed: the version it saw the change at, at the latest). */
typedef struct {
    uint8_t changed; /* 0 or 1 */
    rl__version version;
} rl__msg_watch_value_reply;
RL_PROTO_CODECS(watch_value_reply);

/* MOVE_SHARD reply: empty. */
typedef rl__msg_empty rl__msg_move_shard_reply;
RL_PROTO_CODECS(move_shard_reply);

/* ---- Any message ------------------------------------------------------------------------- */

/* A message of any type and direction: what a frame's (type, flags, payload) decode to. */
typedef struct {
    uint16_t type;  /* rl__msg_type */
    uint16_t flags; /* 0 (request), RL_FRAME_REPLY, or RL_FRAME_REPLY | RL_FRAME_ERROR */
    union {
        rl__msg_error error; /* any type, flags RL_FRAME_REPLY | RL_FRAME_ERROR */
                             /* Then every payload of messages.def: u.<REQ> and u.<REP>. */
#define RL_MSG(NAME, TYPE, FLAGS, REQ, REQ_X, REP, REP_X) \
    rl__msg_##REQ REQ;                                    \
    rl__msg_##REP REP;
#define RL_MSG_ONE_WAY(NAME, TYPE, FLAGS, REQ, REQ_X) rl__msg_##REQ REQ;
#include "net/messages.def"
#undef RL_MSG
#undef RL_MSG_ONE_WAY
    } u;
} rl__msg;

/* rl__msg_decode — decode the payload of a frame with this type and flags into out->u's member
 * for them (out->type and out->flags are set too). Beyond the per-message decoders: flags must be
 * 0, RL_FRAME_REPLY or RL_FRAME_REPLY | RL_FRAME_ERROR, and the type known
 * (rl__msg_type_known) unless the frame is an error reply (whose payload does not depend on the
 * type). Ownership, lifetimes and return codes as the per-message decoders. */
int rl__msg_decode(uint16_t type, uint16_t flags, const uint8_t *payload, size_t len, rl_arena *a, rl__msg *out,
                   rl__errdetail *err);
/* rl__msg_encode — append the payload of m (the member of m->u that m->type and m->flags name).
 * Returns as the per-message encoders; RL_E_INVALID_ARGUMENT also for an unknown type or bad
 * flags. */
int rl__msg_encode(rl_buf *out, const rl__msg *m, rl__errdetail *err);
/* rl__msg_decode and rl__msg_encode without their fast paths (the GET request and reply are
 * coded by hand when well formed, proto.c): identical results, bytes and errors; for tests. */
int rl__msg_decode_walk(uint16_t type, uint16_t flags, const uint8_t *payload, size_t len, rl_arena *a, rl__msg *out,
                        rl__errdetail *err);
int rl__msg_encode_walk(rl_buf *out, const rl__msg *m, rl__errdetail *err);
/* rl__msg_frame_encode — append a whole frame: the 16-byte header (m->type, m->flags, id, the
 * payload's length) and m's payload. RL_E_INVALID_ARGUMENT also when the payload exceeds
 * RL_NET_MAX_PAYLOAD (nothing appended). Otherwise as rl__msg_encode. */
int rl__msg_frame_encode(rl_buf *out, uint64_t id, const rl__msg *m, rl__errdetail *err);

#endif
