// The c10d backend "neuron" (backend.cpp) as the Python bindings
// (bindings.cpp) see it. Only forward declarations: the c10d headers pull in
// all of ATen, and only the .cpp files of this folder include them.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <c10/util/intrusive_ptr.h>

namespace c10d {
class Backend;
class Store;
}  // namespace c10d

namespace torch_neuronx {
namespace distributed {

// Where the group's ranks run (torch_neuronx/distributed decides it from the
// hosts and TORCH_NEURONX_DIST_TRANSPORT, and creates the Gloo groups).
struct Machines {
  // machine_of_rank[p]: rank p's machine, numbered 0, 1, ... in the order of
  // their lowest rank; empty: all on one machine.
  std::vector<int> machine_of_rank;
  // With several machines: Gloo over every rank of the group, and Gloo among
  // the machines' leaders if this rank leads one (else null).
  c10::intrusive_ptr<c10d::Backend> world_gloo, leaders_gloo;
  std::string transport = "hierarchical";  // or "shm", "gloo": what was asked, for backend_info
};

// Joins the group's communicators (blocks until every rank of the group has
// joined, at most `timeout`) and returns the backend: one shared-memory
// communicator per machine, composed across machines with Gloo. `group_name`
// is c10d's group name; the communicator is named after it plus a
// per-process counter of backends created under that name (and the machine),
// so a group re-created after destroy_process_group does not meet the old
// one's records in the store.
c10::intrusive_ptr<c10d::Backend> create_backend(const c10::intrusive_ptr<c10d::Store> &store,
                                                 int rank, int size,
                                                 std::chrono::milliseconds timeout,
                                                 const std::string &group_name, const Machines &machines);

// What a test may ask about a backend created here: its communicator name,
// the device and stream index of its communication stream (-1 before first
// use), operations enqueued so far and how its ranks are spread over
// machines. Throws if `backend` is not ours.
struct BackendInfo {
  std::string comm_name;
  int device = -1;
  int stream = -1;
  int64_t operations = 0;
  std::string transport;  // Machines::transport
  int machines = 1;       // machines the group spans
  int local_size = 1;     // ranks of the group on this rank's machine
};
BackendInfo backend_info(const c10::intrusive_ptr<c10d::Backend> &backend);

}  // namespace distributed
}  // namespace torch_neuronx
