// The layout pins of capi/abi/layout.c, compiled as C++ in the build.
#include "../../capi/abi/layout.c"
