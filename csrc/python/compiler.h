// Python bindings of the graph compiler (compiler.cpp): capture, compile,
// program artifacts and runs, added to torch_neuronx._C by module.cpp.
#pragma once

#include <pybind11/pybind11.h>

namespace torch_neuronx {
namespace compiler {

void bind(pybind11::module_ &m);

}  // namespace compiler
}  // namespace torch_neuronx
