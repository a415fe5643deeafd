// Read side of op accounting, for the Python bindings.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace torch_neuronx {

std::vector<std::string> native_op_names();           // every registered native op
std::map<std::string, int64_t> executed_ops();         // op -> calls (native and fallback)
std::map<std::string, int64_t> fallback_ops();         // op -> calls that ran on the CPU
void clear_op_tracking();

}  // namespace torch_neuronx
