// cuda_gym binding registry (infrastructure: read-only, do not edit).
//
// Each kernels/<name>_binding.cpp defines a function `void fn(pybind11::module_& m)` that adds its
// Python functions with m.def(...), then registers it once at file scope:
//
//     REGISTER_BINDING(my_op, bind_my_op);
//
// binding.cpp calls every registered function when Python imports the `cuda_extension` module.
#pragma once

#include <pybind11/pybind11.h>

#include <utility>
#include <vector>

// Hidden visibility: each extension module keeps its own registry even when several are loaded.
namespace __attribute__((visibility("hidden"))) cuda_gym {

using BindingFn = void (*)(pybind11::module_&);

// One list per shared library: an inline function's static local has a single instance across
// translation units, and it is built on first use, so registration order between files is safe.
inline std::vector<std::pair<const char*, BindingFn>>& binding_registry() {
  static std::vector<std::pair<const char*, BindingFn>> entries;
  return entries;
}

struct BindingRegistrar {
  BindingRegistrar(const char* name, BindingFn fn) { binding_registry().emplace_back(name, fn); }
};

}  // namespace cuda_gym

#define REGISTER_BINDING(name, fn) \
  static ::cuda_gym::BindingRegistrar cuda_gym_binding_registrar_##name(#name, fn)
