// Gloo as the neuron backend's transport between machines (backend.cpp):
// c10d Backends (ProcessGroupGloo, created by torch_neuronx/distributed over
// the group's store) driven through the runtime's interfaces. Device memory
// is host memory, so every buffer crosses as a CPU tensor over the same bytes
// (no copy), and Gloo does the TCP and its own reductions; everything
// reduced on this side is reduced by the runtime's collectives.
//
// - bridge(): the nrt_comm_bridge the hierarchical communicator
//   (nrt_hcomm) calls on a machine's leader, over the Gloo group of the
//   machines' leaders.
// - send/recv, all_to_all, gather, scatter: the operations nrt_hcomm leaves
//   to the caller, over the Gloo group of all the process group's ranks.
//
// Every call blocks the calling thread (a communication stream's worker)
// until Gloo is done, except send: Gloo sends only once the receiver asked
// for the message, and the backend runs a rank's operations in order, so a
// blocking send could wait on a recv queued behind it on the peer (two ranks
// sending to each other before receiving, as the shared-memory transport
// allows). A send therefore stages the message in a private copy, leaves it
// in flight and returns; a completer thread waits for it, and a send that
// failed fails the link's next operation. Failures return an nrt_status with
// the message set (nrt_set_error_message), like the runtime's own calls.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

#include <c10/util/intrusive_ptr.h>

#include "nrt/collectives.h"

namespace c10d {
class Backend;
class Work;
}  // namespace c10d

namespace torch_neuronx {
namespace distributed {

class GlooLink {
 public:
  // world: Gloo over every rank of the group; leaders: Gloo among the
  // machines' leaders when this rank leads one (else null; may be `world`
  // itself when every rank is its own machine).
  GlooLink(c10::intrusive_ptr<c10d::Backend> world, c10::intrusive_ptr<c10d::Backend> leaders);
  // Waits for the sends in flight (each at most `drain_timeout_ms`).
  ~GlooLink();
  void set_drain_timeout(int64_t ms) { drain_timeout_ms_ = ms; }

  bool leads() const { return static_cast<bool>(leaders_); }
  nrt_comm_bridge bridge();

  // Bytes to / from rank `peer` of the group, matched by tag.
  nrt_status send(const void *buf, int64_t bytes, int peer, int tag, int64_t timeout_ms);
  nrt_status recv(void *buf, int64_t bytes, int peer, int tag, int64_t timeout_ms);
  // recv_bufs[p] (recv_bytes[p]) = what rank p sent this rank.
  nrt_status all_to_all(const void *const *send_bufs, const int64_t *send_bytes, void *const *recv_bufs,
                        const int64_t *recv_bytes, int64_t timeout_ms);
  // recv of root [p*bytes ...] = send of rank p.
  nrt_status gather(const void *send, void *recv, int64_t bytes, int root, int64_t timeout_ms);
  // recv of rank p = send of root [p*bytes ...].
  nrt_status scatter(const void *send, void *recv, int64_t bytes, int root, int64_t timeout_ms);

 private:
  c10::intrusive_ptr<c10d::Backend> world_, leaders_;
  int size_;
  std::atomic<int64_t> drain_timeout_ms_{60000};

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<c10::intrusive_ptr<c10d::Work>> in_flight_;  // staged sends, oldest first
  bool stop_ = false;
  std::string send_failure_;  // the first failed send's message
  std::thread completer_;

  void complete_sends();
  nrt_status earlier_send_failed(const char *what);
};

}  // namespace distributed
}  // namespace torch_neuronx
