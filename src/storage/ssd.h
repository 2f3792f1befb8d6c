/* ssd.h (private to src/storage and its tests) — what the ssd engine (ssd.c) tells tests about
 * its range reads off LMDB's leaf pages, so they can check the walk was really used and never
 * turned itself off (a silent fall-back to the cursor would hide a bug). */
#ifndef RL_STORAGE_SSD_H
#define RL_STORAGE_SSD_H

#include <stdint.h>

#include "storage/storage.h"

/* 1 when st is an ssd store whose range reads walk LMDB's leaf pages (0: the cursor reads them:
 * RL_SSD_PAGE_WALK=0 at open, a page that was not laid out as expected, or not an ssd store);
 * *pages (may be NULL) the leaf pages walked since open. Takes no lock: for tests, between
 * reads. */
int rl__ssd_page_walk(rl__storage *st, uint64_t *pages);

#endif
