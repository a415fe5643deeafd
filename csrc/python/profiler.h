// Python bindings of the runtime's device profiler (nrt/profiler.h) for
// torch_neuronx.profiler, added to torch_neuronx._C by module.cpp.
#pragma once

#include <pybind11/pybind11.h>

namespace torch_neuronx {
namespace profiler {

void bind(pybind11::module_ &m);

}  // namespace profiler
}  // namespace torch_neuronx
