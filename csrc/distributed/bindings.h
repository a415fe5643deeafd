// Python bindings of the distributed backend (bindings.cpp), added to
// torch_neuronx._C by python/module.cpp.
#pragma once

#include <pybind11/pybind11.h>

namespace torch_neuronx {
namespace distributed {

void bind(pybind11::module_ &m);

}  // namespace distributed
}  // namespace torch_neuronx
