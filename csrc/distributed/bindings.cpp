// torch_neuronx._C's distributed functions: the backend's creator, called by
// torch_neuronx/distributed (Backend.register_backend), and a reader for
// tests. The Store and Backend objects cross as torch's own pybind types
// (torch/csrc/utils/pybind.h declares their intrusive_ptr holder).
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/utils/pybind.h>

#include "distributed/backend.h"
#include "distributed/bindings.h"

namespace py = pybind11;

namespace torch_neuronx {
namespace distributed {

void bind(py::module_ &m) {
  m.def(
      "_dist_create_backend",
      [](const c10::intrusive_ptr<c10d::Store> &store, int rank, int size, int64_t timeout_ms,
         const std::string &group_name) {
        return create_backend(store, rank, size, std::chrono::milliseconds(timeout_ms), group_name);
      },
      py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout_ms"), py::arg("group_name"),
      py::call_guard<py::gil_scoped_release>());
  m.def("_dist_backend_info", [](const c10::intrusive_ptr<c10d::Backend> &backend) {
    BackendInfo i = backend_info(backend);
    py::dict d;
    d["comm_name"] = i.comm_name;
    d["device"] = i.device;
    d["stream"] = i.stream;
    d["operations"] = i.operations;
    return d;
  });
}

}  // namespace distributed
}  // namespace torch_neuronx
