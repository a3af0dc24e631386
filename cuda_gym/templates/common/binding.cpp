// cuda_gym extension entry point (infrastructure: read-only, do not edit).
// Defines the one Python module, `cuda_extension`, and runs every function registered with
// REGISTER_BINDING in kernels/*_binding.cpp. Import torch before importing this module.
#include "binding_registry.h"

PYBIND11_MODULE(cuda_extension, m) {
  m.doc() = "Kernels written in this workspace (see SKILL.md).";
  for (const auto& entry : cuda_gym::binding_registry()) {
    entry.second(m);
  }
}
