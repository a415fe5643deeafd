// torch_neuronx._C's distributed functions: the backend's creator, called by
// torch_neuronx/distributed (Backend.register_backend), and a reader for
// tests. The Store and Backend objects cross as torch's own pybind types
// (torch/csrc/utils/pybind.h declares their intrusive_ptr holder).
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/utils/pybind.h>

#include <pybind11/stl.h>

#include "distributed/backend.h"
#include "distributed/bindings.h"

namespace py = pybind11;

namespace torch_neuronx {
namespace distributed {

void bind(py::module_ &m) {
  m.def(
      "_dist_create_backend",
      [](const c10::intrusive_ptr<c10d::Store> &store, int rank, int size, int64_t timeout_ms,
         const std::string &group_name, std::vector<int> machine_of_rank, py::object world_gloo,
         py::object leaders_gloo, const std::string &transport) {
        Machines machines;
        machines.machine_of_rank = std::move(machine_of_rank);
        if (!world_gloo.is_none()) machines.world_gloo = world_gloo.cast<c10::intrusive_ptr<c10d::Backend>>();
        if (!leaders_gloo.is_none())
          machines.leaders_gloo = leaders_gloo.cast<c10::intrusive_ptr<c10d::Backend>>();
        machines.transport = transport;
        py::gil_scoped_release no_gil;  // joining blocks until every rank came
        return create_backend(store, rank, size, std::chrono::milliseconds(timeout_ms), group_name, machines);
      },
      py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout_ms"), py::arg("group_name"),
      py::arg("machine_of_rank"), py::arg("world_gloo"), py::arg("leaders_gloo"), py::arg("transport"));
  m.def("_dist_backend_info", [](const c10::intrusive_ptr<c10d::Backend> &backend) {
    BackendInfo i = backend_info(backend);
    py::dict d;
    d["comm_name"] = i.comm_name;
    d["device"] = i.device;
    d["stream"] = i.stream;
    d["operations"] = i.operations;
    d["transport"] = i.transport;
    d["machines"] = i.machines;
    d["local_size"] = i.local_size;
    return d;
  });
}

}  // namespace distributed
}  // namespace torch_neuronx
