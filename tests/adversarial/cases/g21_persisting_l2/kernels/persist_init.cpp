// Reserves the whole persisting L2 carve-out when the module loads (the policy is in a header
// without a suffix, which the old scan never read).
#include "persist"

static int reserved = reserve_persisting_l2();
