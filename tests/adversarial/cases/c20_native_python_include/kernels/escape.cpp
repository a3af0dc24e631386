// A second translation unit whose only work is a static initialiser: it runs when the module loads.
#include "detail/escape.ipp"
