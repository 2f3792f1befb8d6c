/* Allowed: a tool may use any module's interface. */
#include "server/cluster_admin.h"
