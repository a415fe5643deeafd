// The c10d backend "neuron" (backend.cpp) as the Python bindings
// (bindings.cpp) see it. Only forward declarations: the c10d headers pull in
// all of ATen, and only the two files of this folder include them.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include <c10/util/intrusive_ptr.h>

namespace c10d {
class Backend;
class Store;
}  // namespace c10d

namespace torch_neuronx {
namespace distributed {

// Joins the group's communicator (blocks until every rank of the group has
// joined, at most `timeout`) and returns the backend. `group_name` is c10d's
// group name; the communicator is named after it plus a per-process counter
// of backends created under that name, so a group re-created after
// destroy_process_group does not meet the old one's records in the store.
c10::intrusive_ptr<c10d::Backend> create_backend(const c10::intrusive_ptr<c10d::Store> &store,
                                                 int rank, int size,
                                                 std::chrono::milliseconds timeout,
                                                 const std::string &group_name);

// What a test may ask about a backend created here: its communicator name,
// the device and stream index of its communication stream (-1 before first
// use), and operations enqueued so far. Throws if `backend` is not ours.
struct BackendInfo {
  std::string comm_name;
  int device = -1;
  int stream = -1;
  int64_t operations = 0;
};
BackendInfo backend_info(const c10::intrusive_ptr<c10d::Backend> &backend);

}  // namespace distributed
}  // namespace torch_neuronx
