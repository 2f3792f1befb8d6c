/* A known violation for layer_check_catches: a private header of another module. */
#include "record/record_int.h"
#include "record/layout.h"
