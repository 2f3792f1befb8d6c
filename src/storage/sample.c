/* sample.c — the byte sample (sample.h states the membership rule, the structure and its
 * invariants): membership and weights, the chunked ordered map of sampled keys, range sums and
 * split points. */
#include <string.h>

#include "base/alloc.h"
#include "base/bytes.h"
#include "base/hash.h"
#include "reclayer/error.h"
#include "storage/sample.h"

#define BS_CHUNK 64                   /* entries per chunk */
#define BS_SEED 0x62797465736d706cULL /* the hash seed of the sample's coin ("bytesmpl") */

typedef struct {
    int64_t w;     /* weight in bytes */
    uint32_t klen; /* key bytes */
    uint8_t key[];
} bs_ent;

struct bs_chunk {
    uint32_t n;          /* entries, 1..BS_CHUNK */
    int64_t sum;         /* sum of their weights */
    bs_ent *e[BS_CHUNK]; /* ascending keys */
};

void rl__bsample_init(rl__bsample *s) { memset(s, 0, sizeof *s); }

void rl__bsample_release(rl__bsample *s) {
    for (size_t i = 0; i < s->n; i++) {
        for (uint32_t j = 0; j < s->c[i]->n; j++) rl__free(s->c[i]->e[j]);
        rl__free(s->c[i]);
    }
    rl__free(s->c);
    memset(s, 0, sizeof *s);
}

/* ---- membership ------------------------------------------------------------------------- */

int64_t rl__bsample_weight(const uint8_t *k, uint32_t kl, uint64_t vl) {
    uint64_t size = kl + vl;
    uint64_t d = (uint64_t)RL_SAMPLE_FACTOR * (kl + RL_SAMPLE_OVERHEAD);
    if (size >= d) return (int64_t)size; /* p = 1 */
    /* In when h / 2^32 < size / d, in integers (h < 2^32, d < 2^22, size < 2^32: no overflow). */
    uint64_t h = rl__hash64(k, kl, BS_SEED) >> 32;
    return h * d < size << 32 ? (int64_t)d : 0;
}

/* ---- the ordered map -------------------------------------------------------------------- */

static int ent_cmp(const bs_ent *x, const uint8_t *k, uint32_t kl) { return rl__bytes_cmp(x->key, x->klen, k, kl); }

/* The position of the first entry with key >= k (or > k when strict): chunk *ci, index *pos.
 * *ci == s->n when there is none. Returns 1 when that entry's key equals k (never when strict). */
static int seek(const rl__bsample *s, const uint8_t *k, uint32_t kl, int strict, size_t *ci, uint32_t *pos) {
    /* The last chunk whose first key is <= k (chunk 0 when none is). */
    size_t lo = 0, hi = s->n;
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (ent_cmp(s->c[mid]->e[0], k, kl) <= 0) lo = mid;
        else hi = mid;
    }
    if (s->n == 0) {
        *ci = 0;
        *pos = 0;
        return 0;
    }
    const bs_chunk *c = s->c[lo];
    uint32_t a = 0, b = c->n;
    while (a < b) {
        uint32_t m = (a + b) / 2;
        int r = ent_cmp(c->e[m], k, kl);
        if (r < 0 || (strict && r == 0)) a = m + 1;
        else b = m;
    }
    int eq = !strict && a < c->n && ent_cmp(c->e[a], k, kl) == 0;
    if (a == c->n) { /* past this chunk: the next chunk's first entry */
        *ci = lo + 1;
        *pos = 0;
    } else {
        *ci = lo;
        *pos = a;
    }
    return eq;
}

/* Insert x at (ci, pos) (seek's answer). RL_E_OUT_OF_MEMORY leaves the sample unchanged. */
static int insert_at(rl__bsample *s, size_t ci, uint32_t pos, bs_ent *x) {
    if (s->n == 0) {
        if (RL_GROW(s->c, s->cap, 1, 16)) return RL_E_OUT_OF_MEMORY;
        bs_chunk *c = rl__malloc(sizeof *c);
        if (!c) return RL_E_OUT_OF_MEMORY;
        c->n = 0;
        c->sum = 0;
        s->c[0] = c;
        s->n = 1;
        ci = 0;
        pos = 0;
    } else if (ci == s->n) { /* after the last entry: append to the last chunk */
        ci = s->n - 1;
        pos = s->c[ci]->n;
    }
    bs_chunk *c = s->c[ci];
    if (c->n == BS_CHUNK) { /* split: the upper half moves to a new chunk after c */
        if (RL_GROW(s->c, s->cap, s->n + 1, 16)) return RL_E_OUT_OF_MEMORY;
        bs_chunk *d = rl__malloc(sizeof *d);
        if (!d) return RL_E_OUT_OF_MEMORY;
        uint32_t keep = pos == BS_CHUNK ? BS_CHUNK : BS_CHUNK / 2; /* appending: keep c full */
        d->n = BS_CHUNK - keep;
        d->sum = 0;
        memcpy(d->e, c->e + keep, d->n * sizeof c->e[0]);
        for (uint32_t j = 0; j < d->n; j++) d->sum += d->e[j]->w;
        c->n = keep;
        c->sum -= d->sum;
        memmove(s->c + ci + 2, s->c + ci + 1, (s->n - ci - 1) * sizeof s->c[0]);
        s->c[ci + 1] = d;
        s->n++;
        if (pos > keep) {
            c = d;
            pos -= keep;
        } else if (pos == keep && keep == BS_CHUNK) {
            c = d;
            pos = 0;
        }
    }
    memmove(c->e + pos + 1, c->e + pos, (c->n - pos) * sizeof c->e[0]);
    c->e[pos] = x;
    c->n++;
    c->sum += x->w;
    s->total += x->w;
    s->count++;
    return RL_OK;
}

/* Remove the entry at (ci, pos), which exists; frees it and an emptied chunk. */
static void remove_at(rl__bsample *s, size_t ci, uint32_t pos) {
    bs_chunk *c = s->c[ci];
    bs_ent *x = c->e[pos];
    c->sum -= x->w;
    s->total -= x->w;
    s->count--;
    rl__free(x);
    memmove(c->e + pos, c->e + pos + 1, (c->n - pos - 1) * sizeof c->e[0]);
    if (--c->n == 0) {
        rl__free(c);
        memmove(s->c + ci, s->c + ci + 1, (s->n - ci - 1) * sizeof s->c[0]);
        s->n--;
    }
}

int rl__bsample_put(rl__bsample *s, const uint8_t *k, uint32_t kl, int64_t w) {
    size_t ci;
    uint32_t pos;
    if (seek(s, k, kl, 0, &ci, &pos)) { /* present already: reweigh */
        bs_ent *x = s->c[ci]->e[pos];
        s->c[ci]->sum += w - x->w;
        s->total += w - x->w;
        x->w = w;
        return RL_OK;
    }
    bs_ent *x = rl__malloc(sizeof *x + kl);
    if (!x) return RL_E_OUT_OF_MEMORY;
    x->w = w;
    x->klen = kl;
    if (kl) memcpy(x->key, k, kl);
    int rc = insert_at(s, ci, pos, x);
    if (rc != RL_OK) rl__free(x);
    return rc;
}

int rl__bsample_note(rl__bsample *s, const uint8_t *k, uint32_t kl, int old_present, uint32_t old_len, int new_present,
                     uint32_t new_len) {
    int64_t was = old_present ? rl__bsample_weight(k, kl, old_len) : 0;
    int64_t now = new_present ? rl__bsample_weight(k, kl, new_len) : 0;
    if (was == 0 && now == 0) return RL_OK; /* the common case: one hash (or two) */
    if (now) return rl__bsample_put(s, k, kl, now);
    size_t ci;
    uint32_t pos;
    if (seek(s, k, kl, 0, &ci, &pos)) remove_at(s, ci, pos);
    return RL_OK;
}

void rl__bsample_clear_range(rl__bsample *s, const uint8_t *b, uint32_t bl, const uint8_t *e, uint32_t el) {
    if (rl__bytes_cmp(b, bl, e, el) >= 0) return;
    size_t ci;
    uint32_t pos;
    seek(s, b, bl, 0, &ci, &pos);
    while (ci < s->n && ent_cmp(s->c[ci]->e[pos], e, el) < 0) {
        size_t before = s->n;
        remove_at(s, ci, pos);
        if (s->n < before) pos = 0; /* the chunk went: (ci, 0) is the next one's first */
        else if (pos == s->c[ci]->n) {
            ci++;
            pos = 0;
        }
    }
}

/* ---- queries ---------------------------------------------------------------------------- */

int64_t rl__bsample_sum(const rl__bsample *s, const uint8_t *b, uint32_t bl, const uint8_t *e, uint32_t el) {
    if (e && rl__bytes_cmp(b, bl, e, el) >= 0) return 0;
    size_t ci;
    uint32_t pos;
    seek(s, b, bl, 0, &ci, &pos);
    int64_t sum = 0;
    for (; ci < s->n; ci++, pos = 0) {
        const bs_chunk *c = s->c[ci];
        const bs_ent *last = c->e[c->n - 1];
        if (pos == 0 && (!e || ent_cmp(last, e, el) < 0)) { /* the whole chunk is inside */
            sum += c->sum;
            continue;
        }
        for (; pos < c->n; pos++) {
            if (e && ent_cmp(c->e[pos], e, el) >= 0) return sum;
            sum += c->e[pos]->w;
        }
    }
    return sum;
}

int rl__bsample_split(const rl__bsample *s, const uint8_t *b, uint32_t bl, const uint8_t *e, uint32_t el, int64_t chunk,
                      rl_arena *a, rl_slice **out, int *out_n) {
    *out = NULL;
    *out_n = 0;
    if (chunk <= 0 || rl__bytes_cmp(b, bl, e, el) >= 0) return RL_OK;
    size_t ci;
    uint32_t pos;
    seek(s, b, bl, 0, &ci, &pos);
    /* First pass counts the cuts, the second writes them. */
    for (int pass = 0; pass < 2; pass++) {
        int n = 0;
        int64_t acc = 0;
        const bs_ent *cut = NULL; /* the last cut (NULL: b) */
        size_t i = ci;
        uint32_t p = pos;
        for (; i < s->n; i++, p = 0) {
            const bs_chunk *c = s->c[i];
            for (; p < c->n; p++) {
                const bs_ent *x = c->e[p];
                if (ent_cmp(x, e, el) >= 0) goto done;
                int at_begin = !cut && ent_cmp(x, b, bl) == 0; /* a cut is never at b */
                if (acc + x->w > chunk && !at_begin) {
                    if (pass == 1) {
                        uint8_t *k = x->klen ? rl__arena_memdup(a, x->key, x->klen) : NULL;
                        if (x->klen && !k) return RL_E_OUT_OF_MEMORY;
                        (*out)[n].data = k;
                        (*out)[n].len = x->klen;
                    }
                    n++;
                    cut = x;
                    acc = 0;
                }
                acc += x->w;
            }
        }
    done:
        if (pass == 0) {
            if (n == 0) return RL_OK;
            *out = rl__arena_alloc(a, (size_t)n * sizeof **out);
            if (!*out) return RL_E_OUT_OF_MEMORY;
        } else {
            *out_n = n;
        }
    }
    return RL_OK;
}
