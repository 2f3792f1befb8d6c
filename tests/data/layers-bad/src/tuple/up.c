/* Known violations for layer_check_catches: the tuple layer may not use the kv or server layers. */
#include "kv/kv_int.h"
#include "base/buf.h"
#include "server/cluster_admin.h"
