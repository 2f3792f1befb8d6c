/* resolver.c — the optimistic conflict checker: remembers the write conflict ranges of recent
 * commits and tells whether a transaction's read ranges intersect a write newer than its read
 * version.
 *
 * Data structure: a skiplist ordered by key, each node a *boundary*. A node with key k and version
 * v says "the newest commit that wrote any key of [k, next node's key) has version v" (0: none
 * remembered). The head node has the empty key, the smallest key of all, so the boundaries cover
 * the whole keyspace and every key has exactly one covering node (its floor).
 *
 *     head("")  ->  "b"  ->  "d"  ->  "x"  -> NULL
 *       v=0        v=17     v=0      v=12
 *     covers ["", "b"): 0, ["b", "d"): 17, ["d", "x"): 0, ["x", +inf): 12
 *
 * Invariants:
 *   1. Node keys strictly increase along level 0; the head's key is "" and is never removed.
 *   2. A node's version is >= the version of every remembered write that covers a key in its
 *      interval (it is exactly the maximum, except after collection, below).
 *   3. Versions are added in non-decreasing order (rl__resolver_add), so a new write [b, e) at
 *      version v simply overwrites [b, e): the boundaries strictly inside are deleted and b's node
 *      takes version v. A write therefore costs one O(log n) search plus the boundaries it
 *      swallows (the end is found by walking level 0 from the begin's floor), and the list never
 *      holds more than 2 boundaries per remembered write.
 *   5. Every node caches the first 8 bytes of its key as an integer (kp = rl__bytes_prefix64), so a
 *      search compares integers and reads key bytes only on a tie.
 *   4. oldest = max(floor, newest - window). A version <= oldest can never conflict with a read
 *      version that passes the too-old check (read_version >= oldest), so collection sets such
 *      versions to 0 and removes every node whose version equals its predecessor's (adjacent
 *      intervals with equal versions are one interval). Collection walks the whole list, so it
 *      runs only when the list has doubled since the last one: amortised O(1) per write.
 *
 * Checking a read [b, e): find b's floor node (O(log n)) and walk level 0 while keys are < e; a
 * conflict is any node visited with version > read_version. Empty ranges (b >= e) never conflict.
 *
 * Following FoundationDB's resolver, a transaction with no read conflict ranges is never too old
 * (a blind write commits whatever its read version).
 *
 * Threads: none inside; the committer serialises every call.
 */
#include "commit/commit.h"

#include <string.h>

#include "base/alloc.h"
#include "base/bytes.h"

#define RS_MAX_LEVEL 20 /* 4^20 boundaries before the list degrades: far beyond any window */
#define RS_DEFAULT_WINDOW 5000000ull
#define RS_MIN_COLLECT 64 /* never collect below this many boundaries */

typedef struct rs_node {
    rl__version v;          /* newest write version over [key, next key); 0 = none remembered */
    uint64_t kp;            /* rl__bytes_prefix64 of the key (invariant 5) */
    uint32_t key_len;       /* bytes of key */
    uint32_t level;         /* 1..RS_MAX_LEVEL: the number of forward pointers */
    uint8_t *key;           /* key bytes, stored after next[level] in the same allocation */
    struct rs_node *next[]; /* forward pointers, next[0] is the level-0 successor */
} rs_node;

struct rl__resolver {
    rs_node *head;      /* key "", level RS_MAX_LEVEL */
    int level;          /* highest level in use, 1..RS_MAX_LEVEL */
    size_t count;       /* boundaries, head included */
    size_t collect_at;  /* collect when count exceeds this */
    uint64_t window;    /* versions remembered behind newest */
    rl__version newest; /* newest version added */
    rl__version floor;  /* reads below this are too old whatever the window */
    uint64_t rng;       /* xorshift state for node levels */
};

/* ---- Nodes ----------------------------------------------------------------------------------- */

/* Allocate a node of the given level holding a copy of key. NULL on allocation failure. */
static rs_node *node_new(int level, const uint8_t *key, uint32_t key_len, rl__version v) {
    size_t ptrs = (size_t)level * sizeof(rs_node *);
    rs_node *n = rl__malloc(sizeof(rs_node) + ptrs + key_len);
    if (!n) return NULL;
    n->v = v;
    n->key_len = key_len;
    n->level = (uint32_t)level;
    n->key = (uint8_t *)n + sizeof(rs_node) + ptrs;
    if (key_len) memcpy(n->key, key, key_len);
    n->kp = rl__bytes_prefix64(n->key, key_len);
    for (int i = 0; i < level; i++) n->next[i] = NULL;
    return n;
}

static int random_level(rl__resolver *r) {
    int level = 1;
    for (;;) {
        r->rng ^= r->rng << 13;
        r->rng ^= r->rng >> 7;
        r->rng ^= r->rng << 17;
        if ((r->rng & 3) != 0 || level >= RS_MAX_LEVEL) break;
        level++;
    }
    return level;
}

/* Node n's key against key, whose prefix is kp (invariant 5). */
static inline int node_cmp_p(const rs_node *n, uint64_t kp, const uint8_t *key, uint32_t key_len) {
    if (n->kp != kp) return n->kp < kp ? -1 : 1;
    return rl__bytes_cmp(n->key, n->key_len, key, key_len);
}

static int node_cmp(const rs_node *n, const uint8_t *key, uint32_t key_len) {
    return node_cmp_p(n, rl__bytes_prefix64(key, key_len), key, key_len);
}

/* The last node whose key is <= key (its floor: the node whose interval holds key). When pred is
 * not NULL it receives, per level, the last node at that level with key <= key. */
static rs_node *find_floor(rl__resolver *r, const uint8_t *key, uint32_t key_len, rs_node **pred) {
    rs_node *x = r->head;
    uint64_t kp = rl__bytes_prefix64(key, key_len);
    for (int l = r->level - 1; l >= 0; l--) {
        while (x->next[l] && node_cmp_p(x->next[l], kp, key, key_len) <= 0) x = x->next[l];
        if (pred) pred[l] = x;
    }
    if (pred)
        for (int l = r->level; l < RS_MAX_LEVEL; l++) pred[l] = r->head;
    return x;
}

/* Link n (of n->level levels) after pred[l] at each of its levels, and make it pred[l] there. */
static void link_after(rl__resolver *r, rs_node *n, rs_node **pred) {
    if ((int)n->level > r->level) r->level = (int)n->level;
    for (uint32_t l = 0; l < n->level; l++) {
        n->next[l] = pred[l]->next[l];
        pred[l]->next[l] = n;
        pred[l] = n;
    }
    r->count++;
}

/* Overwrite [b, e) (b < e) with version v: invariant 3, with one search.
 * The nodes it needs are allocated before anything changes, so on RL_E_OUT_OF_MEMORY the list
 * is unchanged. */
static int add_range(rl__resolver *r, rl__version v, const rl__keyrange *w) {
    rs_node *pred[RS_MAX_LEVEL];
    rs_node *f = find_floor(r, w->begin, w->begin_len, pred); /* pred[l] <= b at every level */
    /* The first node at or after e, and the version that covers the keys just below e. */
    uint64_t ekp = rl__bytes_prefix64(w->end, w->end_len);
    rs_node *x = f->next[0];
    rl__version below = f->v;
    while (x && node_cmp_p(x, ekp, w->end, w->end_len) < 0) {
        below = x->v;
        x = x->next[0];
    }
    int have_b = node_cmp(f, w->begin, w->begin_len) == 0;
    int have_e = x && node_cmp_p(x, ekp, w->end, w->end_len) == 0;
    rs_node *nb = have_b ? f : node_new(random_level(r), w->begin, w->begin_len, v);
    rs_node *ne = have_e ? x : node_new(random_level(r), w->end, w->end_len, below);
    if (!nb || !ne) {
        if (!have_b) rl__free(nb);
        if (!have_e) rl__free(ne);
        return RL_E_OUT_OF_MEMORY;
    }
    rs_node *inside = f->next[0]; /* the boundaries strictly inside (b, e): inside .. x */
    if (inside != x) {
        for (int l = 0; l < r->level; l++) { /* unlink them at every level */
            rs_node *y = pred[l]->next[l];
            while (y && node_cmp_p(y, ekp, w->end, w->end_len) < 0) y = y->next[l];
            pred[l]->next[l] = y;
        }
        while (inside != x) { /* level 0 held them all; nothing links to them any more */
            rs_node *nx = inside->next[0];
            rl__free(inside);
            r->count--;
            inside = nx;
        }
    }
    if (!have_b) link_after(r, nb, pred);
    if (!have_e) link_after(r, ne, pred);
    nb->v = v;
    return RL_OK;
}

/* Invariant 4: forget versions <= oldest and merge equal neighbours. */
static void collect(rl__resolver *r) {
    rl__version oldest = rl__resolver_oldest(r);
    rs_node *last[RS_MAX_LEVEL];
    for (int l = 0; l < RS_MAX_LEVEL; l++) last[l] = r->head;
    if (r->head->v <= oldest) r->head->v = 0;
    rs_node *prev = r->head;
    rs_node *x = r->head->next[0];
    while (x) {
        rs_node *nx = x->next[0];
        if (x->v <= oldest) x->v = 0;
        if (x->v == prev->v) {
            for (uint32_t l = 0; l < x->level; l++) last[l]->next[l] = x->next[l];
            rl__free(x);
            r->count--;
        } else {
            for (uint32_t l = 0; l < x->level; l++) last[l] = x;
            prev = x;
        }
        x = nx;
    }
    while (r->level > 1 && r->head->next[r->level - 1] == NULL) r->level--;
    r->collect_at = r->count * 2 > RS_MIN_COLLECT ? r->count * 2 : RS_MIN_COLLECT;
}

/* ---- API ------------------------------------------------------------------------------------- */

/* Create an empty resolver remembering window_versions (0 = 5,000,000) behind the newest write.
 * *out is set only on RL_OK; free with rl__resolver_free. Errors: RL_E_OUT_OF_MEMORY. */
int rl__resolver_new(uint64_t window_versions, rl__resolver **out) {
    rl__resolver *r = rl__calloc(1, sizeof *r);
    if (!r) return RL_E_OUT_OF_MEMORY;
    r->head = node_new(RS_MAX_LEVEL, NULL, 0, 0);
    if (!r->head) {
        rl__free(r);
        return RL_E_OUT_OF_MEMORY;
    }
    r->level = 1;
    r->count = 1;
    r->collect_at = RS_MIN_COLLECT;
    r->window = window_versions ? window_versions : RS_DEFAULT_WINDOW;
    r->rng = 0x9e3779b97f4a7c15ull;
    *out = r;
    return RL_OK;
}

/* Free the resolver and every boundary. NULL is a no-op. */
void rl__resolver_free(rl__resolver *r) {
    if (!r) return;
    rs_node *x = r->head;
    while (x) {
        rs_node *nx = x->next[0];
        rl__free(x);
        x = nx;
    }
    rl__free(r);
}

/* Reads below v are too old from now on (the resolver knows nothing committed before v, e.g.
 * after recovery at v). Never lowers the floor. */
void rl__resolver_set_floor(rl__resolver *r, rl__version v) {
    if (v > r->floor) r->floor = v;
}

rl__version rl__resolver_oldest(const rl__resolver *r) {
    rl__version w = r->newest > r->window ? r->newest - r->window : 0;
    return w > r->floor ? w : r->floor;
}

size_t rl__resolver_size(const rl__resolver *r) { return r->count; }

/* See commit.h. Borrowed: reads, only during the call. */
int rl__resolver_check(rl__resolver *r, rl__version read_version, const rl__keyrange *reads, size_t n) {
    if (n == 0) return RL_OK;
    if (read_version < rl__resolver_oldest(r)) return RL_E_TRANSACTION_TOO_OLD;
    for (size_t i = 0; i < n; i++) {
        const rl__keyrange *k = &reads[i];
        if (rl__bytes_cmp(k->begin, k->begin_len, k->end, k->end_len) >= 0) continue;
        rs_node *x = find_floor(r, k->begin, k->begin_len, NULL);
        while (x && node_cmp(x, k->end, k->end_len) < 0) {
            if (x->v > read_version) return RL_E_NOT_COMMITTED;
            x = x->next[0];
        }
    }
    return RL_OK;
}

/* See commit.h. Versions must not decrease (a smaller v is raised to newest: never remembering a
 * write as older than it is keeps the check conservative). Borrowed: writes, during the call
 * (keys are copied). On RL_E_OUT_OF_MEMORY some ranges may be remembered and others not; the
 * boundaries added meanwhile change no answer. */
int rl__resolver_add(rl__resolver *r, rl__version v, const rl__keyrange *writes, size_t n) {
    if (v < r->newest) v = r->newest;
    r->newest = v;
    for (size_t i = 0; i < n; i++) {
        const rl__keyrange *w = &writes[i];
        if (rl__bytes_cmp(w->begin, w->begin_len, w->end, w->end_len) >= 0) continue;
        int rc = add_range(r, v, w);
        if (rc != RL_OK) return rc;
    }
    if (r->count > r->collect_at) collect(r);
    return RL_OK;
}
