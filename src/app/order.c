/* order.c — the benchmark's metadata (docs/design.md §8.7): record type reclayer.Order of
 * proto/order.proto, primary key order_id, VALUE index price_idx on price, metadata version 1.
 * Shared by the CLI (`rl load/get/check`), the benchmark and the tests. */
#include "order.pb-c.h"
#include "reclayer/record.h"
#include "app/tool.h"

int rl__order_metadata(rl_metadata **out) {
    static const char *const pk[] = {"order_id"};
    static const char *const price[] = {"price"};
    rl_metadata *md = NULL;
    int rc = rl_metadata_new(&md);
    if (rc) goto fail;
    if ((rc = rl_metadata_add_type(md, &reclayer__order__descriptor, pk, 1))) goto fail;
    if ((rc = rl_metadata_add_value_index(md, "reclayer.Order", "price_idx", price, 1, NULL))) goto fail;
    rl_metadata_set_version(md, 1);
    if ((rc = rl_metadata_build(md))) goto fail;
    *out = md;
    return RL_OK;
fail:
    rl_metadata_free(md);
    *out = NULL;
    /* The definitions above are valid, so only allocation can fail. */
    return rc == RL_E_RECORD_METADATA_INVALID ? RL_E_INTERNAL_ERROR : rc;
}
