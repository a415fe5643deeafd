// torch.distributed backend "neuron": a c10d::Backend over the runtime's
// shared-memory transport (nrt/collectives.h), asynchronous like a GPU
// backend.
//
// - One communicator per process group and machine, joined in the
//   constructor through the group's c10d Store (the exchange below). When
//   the group spans machines (torch_neuronx/distributed says which rank runs
//   where and creates the Gloo groups), the runtime's hierarchical
//   communicator (nrt_hcomm) composes the machines' communicators with Gloo
//   among their leaders: all_reduce, reduce, broadcast, all_gather,
//   reduce_scatter and barrier reduce or move within each machine over shared
//   memory and cross between machines once. all_to_all, gather, scatter and
//   send/recv to another machine go to Gloo over all the group's ranks
//   (gloo.h); send/recv within the machine stay on shared memory.
// - One communication stream per device the group is used on, taken from
//   the runtime's stream pool. Each operation makes it wait for the caller's
//   current stream (an event), then runs as one task there
//   (nrt_stream_enqueue): the task calls the transport, which blocks that
//   worker thread until the ranks have met. The caller returns at once.
//   A small all_reduce that can start at once is tried on the caller's
//   thread first (nrt_comm_all_reduce_eager: bounded spins, never a
//   sleep); what a late peer leaves pending goes to the stream as usual.
// - Every rank of a communicator must issue the same operations in the same
//   order, so the group keeps one order across its streams: an operation on
//   another device's stream first waits for the last one enqueued.
// - Work::wait() makes the caller's current stream wait for the operation
//   (no host block), like CUDA's; getFuture() is a device Future completed
//   at enqueue time whose events are recorded on the communication stream,
//   so DDP's callbacks and Future::wait order themselves after it.
// - Tensors the transport reads or writes are kept by the backend until the
//   operation finished and are dropped by the next caller (never by the
//   stream worker: the last reference to a tensor may own a Python object,
//   and a worker taking the GIL could deadlock with a thread synchronising).
// - Non-contiguous tensors go through a contiguous copy made on the caller's
//   stream; results are copied back on the communication stream.
// - CPU tensors (object collectives, DTensor metadata) use the same transport
//   on host memory and the same stream order. Their operations are
//   asynchronous like Gloo's: a completer thread per backend copies results
//   back and completes the Future once the task ran; Work::wait() blocks
//   until then.
// - A failed operation (a timeout names the operation, the group and the
//   late ranks) breaks the communicator: the error is sticky on the
//   communication stream and poisons every stream that waits for it, so the
//   caller's next synchronising call raises it; Work::wait() raises it too
//   once known. An operation skipped because the work it waited for failed
//   aborts the communicator, so the peers fail at once instead of timing out.
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include <Python.h>

#include <ATen/core/ivalue.h>
#include <c10/core/StreamGuard.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "distributed/backend.h"
#include "distributed/gloo.h"
#include "nrt/collectives.h"
#include "runtime/device.h"

namespace torch_neuronx {
namespace distributed {
namespace {

using c10d::OpType;
struct CommShared;
// One transport call of an operation, run on the communication stream.
using Step = std::function<nrt_status(CommShared &)>;

[[noreturn]] void fail(const std::string &msg) { C10_THROW_ERROR(DistBackendError, msg); }

// ---- rendezvous: the transport's exchange over the c10d Store --------------------------
struct StoreExchange {
  c10::intrusive_ptr<c10d::Store> store;
};

nrt_status exchange_set(void *ctx, const char *key, const void *value, size_t size) {
  auto *x = static_cast<StoreExchange *>(ctx);
  try {
    const auto *p = static_cast<const uint8_t *>(value);
    x->store->set(key, std::vector<uint8_t>(p, p + size));
    return NRT_SUCCESS;
  } catch (const std::exception &e) {
    nrt_set_error_message("c10d store set(%s) failed: %s", key, e.what());
    return NRT_ERROR_INTERNAL;
  }
}

nrt_status exchange_get(void *ctx, const char *key, int64_t timeout_ms, void *value,
                        size_t capacity, size_t *out_size) {
  auto *x = static_cast<StoreExchange *>(ctx);
  try {
    if (timeout_ms <= 0) {
      if (!x->store->check({key})) return NRT_ERROR_TIMEOUT;
    } else {
      x->store->wait({key}, std::chrono::milliseconds(timeout_ms));
    }
    std::vector<uint8_t> v = x->store->get(key);
    std::memcpy(value, v.data(), std::min(capacity, v.size()));
    *out_size = v.size();
    return NRT_SUCCESS;
  } catch (const c10::DistStoreError &) {
    return NRT_ERROR_TIMEOUT;  // the transport names the ranks that did not come
  } catch (const std::exception &e) {
    nrt_set_error_message("c10d store get(%s) failed: %s", key, e.what());
    return NRT_ERROR_PEER_FAILED;
  }
}

// ---- dtypes and reductions ----------------------------------------------------------------
nrt_dtype to_nrt(at::ScalarType t) {
  switch (t) {
    case at::kBool: return NRT_BOOL;
    case at::kByte: return NRT_UINT8;
    case at::kChar: return NRT_INT8;
    case at::kShort: return NRT_INT16;
    case at::kInt: return NRT_INT32;
    case at::kLong: return NRT_INT64;
    case at::kHalf: return NRT_FLOAT16;
    case at::kBFloat16: return NRT_BFLOAT16;
    case at::kFloat: return NRT_FLOAT32;
    case at::kDouble: return NRT_FLOAT64;
    case at::kComplexHalf: return NRT_COMPLEX32;
    case at::kComplexFloat: return NRT_COMPLEX64;
    case at::kComplexDouble: return NRT_COMPLEX128;
    default: TORCH_CHECK(false, "neuron backend: reductions do not take dtype ", t);
  }
}

struct Reduction {
  nrt_dtype dtype;
  nrt_reduce_op op;
  double factor = 1.0;
};

Reduction to_reduction(const c10d::ReduceOp &r, at::ScalarType t, const char *what) {
  Reduction out{to_nrt(t), NRT_REDUCE_SUM};
  TORCH_CHECK(r.op_ < c10d::ReduceOp::UNUSED, "neuron backend: ", what, ": invalid reduce op ",
              static_cast<int>(r.op_));
  out.op = static_cast<nrt_reduce_op>(r.op_);  // c10d's order (the header's promise)
  if (r.op_ == c10d::ReduceOp::PREMUL_SUM) {
    auto *s = dynamic_cast<c10d::PreMulSumSupplement *>(r.supplement_.get());
    TORCH_CHECK(s, "neuron backend: ", what, ": PREMUL_SUM without its factor");
    out.factor = s->tensor_factor.defined() ? s->tensor_factor.item<double>() : s->double_factor;
  }
  TORCH_CHECK(nrt_reduce_supported(out.op, out.dtype), "neuron backend: ", what, " with ReduceOp.",
              c10::str(nrt_reduce_op_name(out.op)), " does not take dtype ", t);
  return out;
}

int64_t nbytes(const at::Tensor &t) { return static_cast<int64_t>(t.numel() * t.element_size()); }

// ---- what stream tasks share with the backend ------------------------------------------
struct CommShared {
  nrt_comm *comm = nullptr;   // the ranks of this machine
  nrt_hcomm *hier = nullptr;  // every rank: hierarchical across machines (comm's own ops on one)
  std::unique_ptr<GlooLink> gloo;  // between machines; null when the group is on one machine
  std::vector<int> local_of;  // a rank's rank in `comm`, -1 on another machine
  int64_t timeout_ms = 0;
  int64_t op_timeout_ms = 0;  // the running operation's (stream worker only)
  std::string label;  // "process group '0' (default_pg)"
  std::mutex mu;
  nrt_status failure_status = NRT_SUCCESS;
  std::string failure;  // the first failure's message

  void note_failure(nrt_status st, const std::string &msg) {
    std::lock_guard<std::mutex> g(mu);
    if (failure_status == NRT_SUCCESS) {
      failure_status = st;
      failure = msg;
    }
  }
};

// One operation's outcome. Written by the stream worker, read by callers
// after `done` (the mutex orders the two).
struct OpState {
  std::mutex mu;
  std::condition_variable cv;
  std::atomic<bool> done{false};
  bool ran = false;  // worker-only until done
  nrt_status status = NRT_SUCCESS;
  std::string message;

  void finish() {
    {
      std::lock_guard<std::mutex> g(mu);
      done.store(true, std::memory_order_release);
    }
    cv.notify_all();
  }
  // false if not done within `timeout` (<= 0: no limit).
  bool wait(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> l(mu);
    auto is_done = [&] { return done.load(std::memory_order_acquire); };
    if (timeout.count() <= 0) {
      cv.wait(l, is_done);
      return true;
    }
    return cv.wait_for(l, timeout, is_done);
  }
  bool failed() const { return done.load(std::memory_order_acquire) && status != NRT_SUCCESS; }
};

struct CommTask {
  std::shared_ptr<CommShared> shared;
  std::shared_ptr<OpState> state;
  const char *op;
  std::vector<Step> steps;
  int64_t timeout_ms = -1;  // the operation's own timeout, -1: the group's
  bool finishes = true;     // false: a marker task after the copy-backs finishes the op
};

nrt_status run_comm_task(void *arg) {
  auto *t = static_cast<CommTask *>(arg);
  t->state->ran = true;
  CommShared &c = *t->shared;
  if (t->timeout_ms > 0) nrt_hcomm_set_timeout(c.hier, t->timeout_ms);
  c.op_timeout_ms = t->timeout_ms > 0 ? t->timeout_ms : c.timeout_ms;
  nrt_status st = NRT_SUCCESS;
  for (const Step &step : t->steps) {
    st = step(c);
    if (st != NRT_SUCCESS) break;
  }
  std::string detail = st == NRT_SUCCESS ? std::string() : std::string(nrt_last_error_message());
  if (t->timeout_ms > 0) nrt_hcomm_set_timeout(c.hier, c.timeout_ms);
  if (st != NRT_SUCCESS) {
    std::string msg = c10::str("neuron backend: ", t->op, " on ", t->shared->label, " failed: ",
                               nrt_status_string(st), detail.empty() ? "" : ": ", detail);
    t->state->status = st;
    t->state->message = msg;
    t->shared->note_failure(st, msg);
    nrt_set_error_message("%s", msg.c_str());  // what the stream's sticky error says
  }
  return st;
}

void release_comm_task(void *arg) {
  auto *t = static_cast<CommTask *>(arg);
  if (!t->state->ran) {
    // Skipped: the stream had failed already, here or in work it waited for
    // on the caller's stream. The peers are waiting for this rank's part;
    // aborting tells them now instead of at their timeout.
    std::lock_guard<std::mutex> g(t->shared->mu);
    t->state->status =
        t->shared->failure_status != NRT_SUCCESS ? t->shared->failure_status : NRT_ERROR_KERNEL_FAILED;
    t->state->message =
        c10::str("neuron backend: ", t->op, " on ", t->shared->label, " did not run: ",
                 t->shared->failure.empty()
                     ? std::string("work it waited for on the caller's stream failed")
                     : "an earlier operation failed: " + t->shared->failure);
    if (t->shared->failure_status == NRT_SUCCESS) {
      t->shared->failure_status = t->state->status;
      t->shared->failure = t->state->message;
    }
    nrt_comm_abort(t->shared->comm);
  }
  if (t->finishes) t->state->finish();
  delete t;
}

nrt_status run_marker(void *) { return NRT_SUCCESS; }
void release_marker(void *arg) {
  auto *state = static_cast<std::shared_ptr<OpState> *>(arg);
  (*state)->finish();
  delete state;
}

// An operation before it is enqueued.
struct OpSpec {
  OpType type = OpType::UNKNOWN;
  const char *op = "";
  std::vector<at::Tensor> inputs, outputs;  // the caller's tensors (Work::result, the Future)
  std::vector<at::Tensor> temps;            // contiguous stand-ins, kept alive like the rest
  std::vector<std::pair<at::Tensor, at::Tensor>> copy_back;  // (caller's tensor, result)
  std::vector<Step> steps;
  // The operation tried on the caller's thread instead (run(): a small
  // all_reduce that can start at once); null for the others.
  std::function<nrt_status(CommShared &, nrt_comm_eager *)> eager;
  bool is_recv = false;
  bool waits_caller_stream = false;  // barrier: no tensors, yet after the caller's queued work
  std::chrono::milliseconds timeout = c10d::kUnsetTimeout;

  // A tensor the transport reads.
  at::Tensor readable(const at::Tensor &t) {
    if (t.is_contiguous()) return t;
    at::Tensor c = t.contiguous();
    temps.push_back(c);
    return c;
  }
  // A tensor the transport writes (and reads first when `read` is true).
  at::Tensor writable(const at::Tensor &t, bool read) {
    if (t.is_contiguous()) return t;
    at::Tensor c = read ? t.contiguous() : at::empty_like(t, at::MemoryFormat::Contiguous);
    temps.push_back(c);
    copy_back.emplace_back(t, c);
    return c;
  }
};

class NeuronWork;

struct DoneEvent {
  nrt_event *event = nullptr;
  DoneEvent() { check(nrt_event_create(NRT_EVENT_DEFAULT, &event), "neuron backend: event"); }
  ~DoneEvent() {
    if (event) nrt_event_destroy(event);
  }
};

class NeuronWork final : public c10d::Work {
 public:
  NeuronWork(int rank, OpType type, const char *op, std::shared_ptr<CommShared> shared,
             std::shared_ptr<OpState> state, std::shared_ptr<DoneEvent> done, int device,
             bool on_device, std::vector<at::Tensor> outputs)
      : c10d::Work(rank, type),
        op_(op),
        shared_(std::move(shared)),
        state_(std::move(state)),
        done_(std::move(done)),
        device_(device),
        on_device_(on_device),
        outputs_(std::move(outputs)) {
    std::vector<c10::Device> devices;
    if (on_device_) devices.emplace_back(kNeuron, static_cast<c10::DeviceIndex>(device_));
    future_ = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()),
                                                       devices);
  }

  // Host operations are complete once the completer thread copied their
  // results back and completed the Future (finish_host).
  bool isCompleted() override {
    return on_device_ ? state_->done.load(std::memory_order_acquire) : host_done_->done.load();
  }
  bool isSuccess() const override { return state_->done.load(std::memory_order_acquire) && state_->status == NRT_SUCCESS; }
  std::exception_ptr exception() const override {
    if (!state_->failed()) return nullptr;
    return std::make_exception_ptr(
        c10::DistBackendError({__func__, __FILE__, static_cast<uint32_t>(__LINE__)}, state_->message));
  }
  std::vector<at::Tensor> result() override { return outputs_; }

  // Device operations: the current stream waits for the operation (the host
  // does not) unless a timeout is given. Host operations: blocks until done.
  bool wait(std::chrono::milliseconds timeout) override {
    if (!on_device_) {
      if (!host_done_->wait(timeout)) timed_out(timeout);
    } else if (timeout != kNoTimeout) {
      if (!state_->wait(timeout)) timed_out(timeout);
    } else if (small_) {
      // A small operation that could start at once is usually done within
      // microseconds: polling for that long spares the current stream a task
      // that would wait for the communication stream (two thread wake-ups),
      // which is most of a small collective's latency. The host never waits
      // longer than this.
      auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(kSmallSpinUs);
      while (!state_->done.load(std::memory_order_acquire) && std::chrono::steady_clock::now() < until)
        std::this_thread::yield();
    }
    // A failure already known is raised here, without making the current
    // stream wait on it too: that wait would fail again, later, at an
    // unrelated synchronising call (the flaky second error of a group whose
    // peer left before the operation ran). One not known yet surfaces at
    // the current stream's next synchronising call, once.
    if (state_->failed()) fail(state_->message);
    if (on_device_) blockCurrentStream();
    return true;
  }
  void synchronize() override { blockCurrentStream(); }
  void blockCurrentStream() override {
    if (!on_device_) return;
    check(nrt_stream_wait_event(current_nrt_stream(static_cast<c10::DeviceIndex>(device_)), done_->event),
          "neuron backend: wait");
  }
  void abort() override {
    if (shared_->comm) nrt_comm_abort(shared_->comm);
  }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

  // Small operations (see wait) are at most this many bytes.
  static constexpr int64_t kSmallBytes = 64 << 10;
  static constexpr int kSmallSpinUs = 30;
  // How long an eager all_reduce (run()) spins for its peers.
  static constexpr uint64_t kEagerSpinNs = 50000;
  void set_small(bool small) { small_ = small; }

  // A Work handed out inside a coalescing block takes the batch's outcome.
  void bind(std::shared_ptr<OpState> state, std::shared_ptr<DoneEvent> done) {
    state_ = std::move(state);
    done_ = std::move(done);
  }

  // Device operations: the Future completes at once, in stream order (its
  // events are recorded on the communication stream).
  void complete_device_future(nrt_stream *stream) {
    c10::StreamGuard g(c10::Stream(c10::Stream::UNSAFE,
                                   c10::Device(kNeuron, static_cast<c10::DeviceIndex>(device_)),
                                   nrt_stream_index(stream)));
    future_->markCompleted(c10::IValue(outputs_));
  }

  // Host operations, on the backend's completer thread (never the stream
  // worker: copies and Future callbacks may need the GIL): waits for the
  // operation, copies results into non-contiguous outputs, completes the
  // Future (running its callbacks) and then wait().
  void set_host_copy_back(std::vector<std::pair<at::Tensor, at::Tensor>> cb) { host_copy_back_ = std::move(cb); }
  void finish_host() {
    state_->wait(std::chrono::milliseconds(0));
    if (!state_->failed()) {
      try {
        for (auto &cb : host_copy_back_) cb.first.copy_(cb.second);
      } catch (const std::exception &e) {
        state_->status = NRT_ERROR_INTERNAL;
        state_->message = c10::str("neuron backend: ", op_, ": copying the result back failed: ", e.what());
      }
    }
    host_copy_back_.clear();
    host_done_->finish();  // before the callbacks, which may wait() on this Work
    if (state_->failed())
      future_->setError(exception());
    else
      future_->markCompleted(c10::IValue(outputs_));
  }

 private:
  const char *op_;
  std::shared_ptr<CommShared> shared_;
  std::shared_ptr<OpState> state_;
  std::shared_ptr<DoneEvent> done_;
  int device_;
  bool on_device_;
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::shared_ptr<OpState> host_done_ = std::make_shared<OpState>();
  bool small_ = false;
  std::vector<std::pair<at::Tensor, at::Tensor>> host_copy_back_;

  [[noreturn]] void timed_out(std::chrono::milliseconds timeout) {
    fail(c10::str("neuron backend: ", op_, " on ", shared_->label, " did not complete within ",
                  timeout.count(), " ms (Work.wait timeout)"));
  }
};

// Backends created per group name in this process (see create_backend).
std::mutex generations_mu;
std::map<std::string, int> generations;

class NeuronBackend final : public c10d::Backend {
 public:
  NeuronBackend(const c10::intrusive_ptr<c10d::Store> &store, int rank, int size,
                std::chrono::milliseconds timeout, const std::string &group_name, const Machines &machines)
      : c10d::Backend(rank, size),
        timeout_(timeout),
        group_name_(group_name),
        transport_(machines.transport) {
    shared_ = std::make_shared<CommShared>();
    shared_->timeout_ms = std::max<int64_t>(1, timeout.count());
    shared_->label = "process group '" + group_name + "'";
    int generation;
    {
      std::lock_guard<std::mutex> g(generations_mu);
      generation = generations[group_name]++;
    }
    std::string name = c10::str("pg", group_name, ".", generation);
    if (name.size() > 100) name = c10::str("pg", std::hash<std::string>{}(group_name), ".", generation);

    // This machine's ranks: its communicator's, in rank order.
    std::vector<int> machine_of = machines.machine_of_rank;
    if (machine_of.empty()) machine_of.assign(size, 0);
    TORCH_CHECK(static_cast<int>(machine_of.size()) == size, "neuron backend: ", machine_of.size(),
                " machine ids for a group of ", size);
    const int machine = machine_of[rank];
    shared_->local_of.assign(size, -1);
    for (int p = 0; p < size; ++p) {
      machines_ = std::max(machines_, machine_of[p] + 1);
      if (machine_of[p] == machine) shared_->local_of[p] = local_size_++;
    }
    if (machines_ > 1) {
      // Each machine's communicator has its own records in the shared store.
      name += c10::str(".m", machine);
      TORCH_CHECK(machines.world_gloo, "neuron backend: ", shared_->label, " spans ", machines_,
                  " machines but has no Gloo group between them");
      shared_->gloo = std::make_unique<GlooLink>(machines.world_gloo, machines.leaders_gloo);
      shared_->gloo->set_drain_timeout(shared_->timeout_ms);
    }

    StoreExchange ex{store};
    nrt_comm_exchange exchange{&ex, exchange_set, exchange_get};
    nrt_comm *comm = nullptr;
    nrt_status st = nrt_comm_create(shared_->local_of[rank], local_size_, name.c_str(),
                                    local_size_ > 1 ? &exchange : nullptr, shared_->timeout_ms, nullptr,
                                    &comm);
    if (st != NRT_SUCCESS)
      fail(c10::str("neuron backend: joining ", shared_->label, " (rank ", rank, " of ", size,
                    ") failed: ", nrt_status_string(st), ": ", nrt_last_error_message()));
    shared_->comm = comm;
    nrt_comm_bridge bridge{};
    if (shared_->gloo && shared_->gloo->leads()) bridge = shared_->gloo->bridge();
    st = nrt_hcomm_create(rank, size, machine_of.data(), comm, bridge.all_reduce ? &bridge : nullptr,
                          shared_->timeout_ms, &shared_->hier);
    if (st != NRT_SUCCESS) {
      std::string why = nrt_last_error_message();
      nrt_comm_destroy(comm);
      shared_->comm = nullptr;
      fail(c10::str("neuron backend: ", shared_->label, " (rank ", rank, " of ", size, "): ", why));
    }
    comm_name_ = name;
    check(nrt_event_create(NRT_EVENT_DEFAULT, &ready_), "neuron backend: event");
  }

  ~NeuronBackend() override {
    try {
      close();
    } catch (...) {
    }
    if (ready_) nrt_event_destroy(ready_);
  }

  const std::string getBackendName() const override { return "neuron"; }
  c10::intrusive_ptr<Options> getBackendOptions() override {
    auto o = c10::make_intrusive<Options>("neuron", timeout_);
    o->group_name = group_name_;
    return o;
  }
  bool supportsCoalescing() const override { return true; }
  void setTimeout(std::chrono::milliseconds timeout) override {
    timeout_ = timeout;
    int64_t ms = std::max<int64_t>(1, timeout.count());
    // In stream order, so that an operation already enqueued keeps its timeout.
    OpSpec s;
    s.op = "set_timeout";
    s.steps.push_back([ms](CommShared &c) {
      c.timeout_ms = ms;
      if (c.gloo) c.gloo->set_drain_timeout(ms);
      return nrt_hcomm_set_timeout(c.hier, ms);
    });
    run(std::move(s));
  }
  void setSequenceNumberForGroup() override {}
  uint64_t getSequenceNumberForGroup() override { return seq_; }
  void abort() override {
    if (shared_->comm) nrt_comm_abort(shared_->comm);
  }
  void shutdown() override { close(); }

  // ---- collectives ----------------------------------------------------------------------
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor> &tensors,
                                           const c10d::AllreduceOptions &opts) override {
    OpSpec s = spec(OpType::ALLREDUCE, "all_reduce", opts.timeout);
    const at::Tensor &t = single(tensors, "all_reduce");
    add_all_reduce(s, t, opts.reduceOp);
    s.inputs = s.outputs = tensors;
    return run(std::move(s));
  }

  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor> &tensors, const c10d::AllreduceCoalescedOptions &opts) override {
    OpSpec s = spec(OpType::ALLREDUCE_COALESCED, "all_reduce_coalesced", opts.timeout);
    for (const at::Tensor &t : tensors) add_all_reduce(s, t, opts.reduceOp);
    s.inputs = s.outputs = tensors;
    return run(std::move(s));
  }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor> &tensors,
                                           const c10d::BroadcastOptions &opts) override {
    OpSpec s = spec(OpType::BROADCAST, "broadcast", opts.timeout);
    const at::Tensor &t = single(tensors, "broadcast");
    int root = check_root(opts.rootRank, "broadcast");
    at::Tensor w = s.writable(t, getRank() == root);
    void *p = w.data_ptr();
    int64_t n = nbytes(w);
    s.steps.push_back([=](CommShared &c) { return nrt_hcomm_broadcast(c.hier, p, n, NRT_UINT8, root); });
    s.inputs = s.outputs = tensors;
    return run(std::move(s));
  }

  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor> &tensors,
                                        const c10d::ReduceOptions &opts) override {
    OpSpec s = spec(OpType::REDUCE, "reduce", opts.timeout);
    const at::Tensor &t = single(tensors, "reduce");
    int root = check_root(opts.rootRank, "reduce");
    Reduction r = to_reduction(opts.reduceOp, t.scalar_type(), "reduce");
    at::Tensor w = getRank() == root ? s.writable(t, true) : s.readable(t);
    void *p = w.data_ptr();
    void *recv = getRank() == root ? p : nullptr;
    int64_t n = w.numel();
    s.steps.push_back(
        [=](CommShared &c) { return nrt_hcomm_reduce(c.hier, p, recv, n, r.dtype, r.op, r.factor, root); });
    s.inputs = s.outputs = tensors;
    return run(std::move(s));
  }

  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>> &outputs,
                                           std::vector<at::Tensor> &inputs,
                                           const c10d::AllgatherOptions &opts) override {
    OpSpec s = spec(OpType::ALLGATHER, "all_gather", opts.timeout);
    const at::Tensor &in = single(inputs, "all_gather");
    TORCH_CHECK(outputs.size() == 1, "neuron backend: all_gather takes one output list");
    add_all_gatherv(s, in, outputs[0], "all_gather");
    s.inputs = inputs;
    s.outputs = outputs[0];
    return run(std::move(s));
  }

  c10::intrusive_ptr<c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>> &output_lists, std::vector<at::Tensor> &inputs,
      const c10d::AllgatherOptions &opts) override {
    // output_lists[p][j] receives rank p's inputs[j].
    OpSpec s = spec(OpType::ALLGATHER_COALESCED, "all_gather_coalesced", opts.timeout);
    TORCH_CHECK(static_cast<int>(output_lists.size()) == getSize(),
                "neuron backend: all_gather_coalesced needs one output list per rank");
    for (size_t j = 0; j < inputs.size(); ++j) {
      std::vector<at::Tensor> outs;
      for (auto &list : output_lists) {
        TORCH_CHECK(list.size() == inputs.size(),
                    "neuron backend: all_gather_coalesced: each output list needs one tensor per input");
        outs.push_back(list[j]);
        s.outputs.push_back(list[j]);
      }
      add_all_gatherv(s, inputs[j], outs, "all_gather_coalesced");
    }
    s.inputs = inputs;
    return run(std::move(s));
  }

  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor &output, at::Tensor &input,
                                                 const c10d::AllgatherOptions &opts) override {
    OpSpec s = spec(OpType::_ALLGATHER_BASE, "all_gather_into_tensor", opts.timeout);
    add_all_gather(s, output, input, "all_gather_into_tensor");
    s.inputs = {input};
    s.outputs = {output};
    return run(std::move(s));
  }

  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor> &outputs, std::vector<at::Tensor> &inputs,
      const c10d::AllgatherOptions &opts) override {
    OpSpec s = spec(OpType::COALESCED, "all_gather_into_tensor_coalesced", opts.timeout);
    TORCH_CHECK(outputs.size() == inputs.size(),
                "neuron backend: all_gather_into_tensor_coalesced: as many outputs as inputs");
    for (size_t i = 0; i < inputs.size(); ++i)
      add_all_gather(s, outputs[i], inputs[i], "all_gather_into_tensor_coalesced");
    s.inputs = inputs;
    s.outputs = outputs;
    return run(std::move(s));
  }

  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor> &outputs,
                                                std::vector<std::vector<at::Tensor>> &inputs,
                                                const c10d::ReduceScatterOptions &opts) override {
    OpSpec s = spec(OpType::REDUCE_SCATTER, "reduce_scatter", opts.timeout);
    const at::Tensor &out = single(outputs, "reduce_scatter");
    TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == getSize(),
                "neuron backend: reduce_scatter needs one input per rank");
    Reduction r = to_reduction(opts.reduceOp, out.scalar_type(), "reduce_scatter");
    std::vector<const void *> sends;
    std::vector<int64_t> counts;
    for (const at::Tensor &in : inputs[0]) {
      check_same_dtype(in, out, "reduce_scatter");
      sends.push_back(s.readable(in).data_ptr());
      counts.push_back(in.numel());
    }
    TORCH_CHECK(out.numel() == counts[getRank()], "neuron backend: reduce_scatter: the output has ",
                out.numel(), " elements, this rank's input ", counts[getRank()]);
    void *recv = s.writable(out, false).data_ptr();
    s.steps.push_back([=](CommShared &c) {
      return nrt_hcomm_reduce_scatterv(c.hier, sends.data(), recv, counts.data(), r.dtype, r.op, r.factor);
    });
    s.inputs = inputs[0];
    s.outputs = outputs;
    return run(std::move(s));
  }

  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor &output, at::Tensor &input,
                                                      const c10d::ReduceScatterOptions &opts) override {
    OpSpec s = spec(OpType::_REDUCE_SCATTER_BASE, "reduce_scatter_tensor", opts.timeout);
    add_reduce_scatter(s, output, input, opts.reduceOp, "reduce_scatter_tensor");
    s.inputs = {input};
    s.outputs = {output};
    return run(std::move(s));
  }

  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor> &outputs, std::vector<at::Tensor> &inputs,
      const c10d::ReduceScatterOptions &opts) override {
    OpSpec s = spec(OpType::REDUCE_SCATTER_TENSOR_COALESCED, "reduce_scatter_tensor_coalesced",
                    opts.timeout);
    TORCH_CHECK(outputs.size() == inputs.size(),
                "neuron backend: reduce_scatter_tensor_coalesced: as many outputs as inputs");
    for (size_t i = 0; i < inputs.size(); ++i)
      add_reduce_scatter(s, outputs[i], inputs[i], opts.reduceOp, "reduce_scatter_tensor_coalesced");
    s.inputs = inputs;
    s.outputs = outputs;
    return run(std::move(s));
  }

  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor &output, at::Tensor &input,
                                               std::vector<int64_t> &output_splits,
                                               std::vector<int64_t> &input_splits,
                                               const c10d::AllToAllOptions &opts) override {
    OpSpec s = spec(OpType::ALLTOALL_BASE, "all_to_all_single", opts.timeout);
    check_tensor(output);
    check_tensor(input);
    check_same_dtype(input, output, "all_to_all_single");
    at::Tensor in = s.readable(input);
    at::Tensor out = s.writable(output, false);
    std::vector<const void *> sends;
    std::vector<void *> recvs;
    std::vector<int64_t> send_counts, recv_counts;
    split_rows(in, input_splits, "input", [&](int64_t offset, int64_t bytes) {
      sends.push_back(static_cast<const char *>(in.data_ptr()) + offset);
      send_counts.push_back(bytes);
    });
    split_rows(out, output_splits, "output", [&](int64_t offset, int64_t bytes) {
      recvs.push_back(static_cast<char *>(out.data_ptr()) + offset);
      recv_counts.push_back(bytes);
    });
    s.steps.push_back([=](CommShared &c) {
      return all_to_all(c, sends.data(), send_counts.data(), recvs.data(), recv_counts.data());
    });
    s.inputs = {input};
    s.outputs = {output};
    return run(std::move(s));
  }

  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor> &outputs,
                                          std::vector<at::Tensor> &inputs,
                                          const c10d::AllToAllOptions &opts) override {
    OpSpec s = spec(OpType::ALLTOALL, "all_to_all", opts.timeout);
    TORCH_CHECK(static_cast<int>(outputs.size()) == getSize() &&
                    static_cast<int>(inputs.size()) == getSize(),
                "neuron backend: all_to_all needs one input and one output tensor per rank");
    std::vector<const void *> sends;
    std::vector<void *> recvs;
    std::vector<int64_t> send_counts, recv_counts;
    for (int p = 0; p < getSize(); ++p) {
      check_tensor(inputs[p]);
      check_tensor(outputs[p]);
      check_same_dtype(inputs[p], outputs[0], "all_to_all");
      check_same_dtype(outputs[p], outputs[0], "all_to_all");
      sends.push_back(s.readable(inputs[p]).data_ptr());
      send_counts.push_back(nbytes(inputs[p]));
      recvs.push_back(s.writable(outputs[p], false).data_ptr());
      recv_counts.push_back(nbytes(outputs[p]));
    }
    s.steps.push_back([=](CommShared &c) {
      return all_to_all(c, sends.data(), send_counts.data(), recvs.data(), recv_counts.data());
    });
    s.inputs = inputs;
    s.outputs = outputs;
    return run(std::move(s));
  }

  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>> &outputs,
                                        std::vector<at::Tensor> &inputs,
                                        const c10d::GatherOptions &opts) override {
    OpSpec s = spec(OpType::GATHER, "gather", opts.timeout);
    const at::Tensor &in = single(inputs, "gather");
    int root = check_root(opts.rootRank, "gather");
    at::Tensor src = s.readable(in);
    void *send = src.data_ptr();
    void *recv = nullptr;
    int64_t n = nbytes(in);
    if (getRank() == root) {
      TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == getSize(),
                  "neuron backend: gather: the root needs one output tensor per rank");
      // The transport gathers into one buffer; each output is copied from
      // its slice after the operation.
      at::Tensor flat = at::empty({getSize() * in.numel()}, in.options());
      s.temps.push_back(flat);
      for (int p = 0; p < getSize(); ++p) {
        const at::Tensor &o = outputs[0][p];
        check_tensor(o);
        check_same_dtype(o, in, "gather");
        TORCH_CHECK(o.numel() == in.numel(), "neuron backend: gather: output ", p, " has ", o.numel(),
                    " elements, the input ", in.numel());
        s.copy_back.emplace_back(o, flat.narrow(0, p * in.numel(), in.numel()).view(o.sizes()));
        s.outputs.push_back(o);
      }
      recv = flat.data_ptr();
    } else {
      TORCH_CHECK(outputs.empty() || (outputs.size() == 1 && outputs[0].empty()),
                  "neuron backend: gather: only the root takes output tensors");
    }
    s.steps.push_back([=](CommShared &c) {
      return c.gloo ? c.gloo->gather(send, recv, n, root, c.op_timeout_ms)
                    : nrt_comm_gather(c.comm, send, recv, n, NRT_UINT8, root);
    });
    s.inputs = inputs;
    return run(std::move(s));
  }

  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor> &outputs,
                                         std::vector<std::vector<at::Tensor>> &inputs,
                                         const c10d::ScatterOptions &opts) override {
    OpSpec s = spec(OpType::SCATTER, "scatter", opts.timeout);
    const at::Tensor &out = single(outputs, "scatter");
    int root = check_root(opts.rootRank, "scatter");
    void *send = nullptr;
    if (getRank() == root) {
      TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == getSize(),
                  "neuron backend: scatter: the root needs one input tensor per rank");
      at::Tensor flat = at::empty({getSize() * out.numel()}, out.options());
      for (int p = 0; p < getSize(); ++p) {
        const at::Tensor &in = inputs[0][p];
        check_tensor(in);
        check_same_dtype(in, out, "scatter");
        TORCH_CHECK(in.numel() == out.numel(), "neuron backend: scatter: input ", p, " has ",
                    in.numel(), " elements, the output ", out.numel());
        flat.narrow(0, p * out.numel(), out.numel()).view(in.sizes()).copy_(in);
        s.inputs.push_back(in);
      }
      s.temps.push_back(flat);
      send = flat.data_ptr();
    } else {
      TORCH_CHECK(inputs.empty() || (inputs.size() == 1 && inputs[0].empty()),
                  "neuron backend: scatter: only the root takes input tensors");
    }
    void *recv = s.writable(out, false).data_ptr();
    int64_t n = nbytes(out);
    s.steps.push_back([=](CommShared &c) {
      return c.gloo ? c.gloo->scatter(send, recv, n, root, c.op_timeout_ms)
                    : nrt_comm_scatter(c.comm, send, recv, n, NRT_UINT8, root);
    });
    s.outputs = outputs;
    return run(std::move(s));
  }

  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions &opts) override {
    OpSpec s = spec(OpType::BARRIER, "barrier", opts.timeout);
    s.waits_caller_stream = true;
    s.steps.push_back([](CommShared &c) { return nrt_hcomm_barrier(c.hier); });
    return run(std::move(s));
  }

  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor> &tensors, int dst, int tag) override {
    OpSpec s = spec(OpType::SEND, "send", c10d::kUnsetTimeout);
    const at::Tensor &t = single(tensors, "send");
    check_peer(dst, "send");
    const void *p = s.readable(t).data_ptr();
    int64_t n = nbytes(t);
    // A peer on this machine through shared memory, on another through Gloo.
    s.steps.push_back([=](CommShared &c) {
      int local = c.local_of[dst];
      return local < 0 ? c.gloo->send(p, n, dst, tag, c.op_timeout_ms)
                       : nrt_comm_send(c.comm, p, n, NRT_UINT8, local, tag);
    });
    s.inputs = tensors;
    return run(std::move(s));
  }

  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor> &tensors, int src, int tag) override {
    OpSpec s = spec(OpType::RECV, "recv", c10d::kUnsetTimeout);
    const at::Tensor &t = single(tensors, "recv");
    check_peer(src, "recv");
    void *p = s.writable(t, false).data_ptr();
    int64_t n = nbytes(t);
    s.steps.push_back([=](CommShared &c) {
      int local = c.local_of[src];
      return local < 0 ? c.gloo->recv(p, n, src, tag, c.op_timeout_ms)
                       : nrt_comm_recv(c.comm, p, n, NRT_UINT8, local, tag);
    });
    s.is_recv = true;
    s.outputs = tensors;
    return run(std::move(s));
  }

  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor> &, int) override {
    TORCH_CHECK(false,
                "neuron backend: recv without a source rank is not supported (the transport matches "
                "messages per sender); pass src=");
  }

  // Coalescing (batch_isend_irecv, _coalescing_manager): operations issued
  // between start and end are held and run as one task, point-to-point
  // sends before receives, so a batch's order never deadlocks.
  void startCoalescing() override {
    std::lock_guard<std::mutex> g(mu_);
    TORCH_CHECK(!coalescing_, "neuron backend: startCoalescing called twice without endCoalescing");
    coalescing_ = true;
  }

  c10::intrusive_ptr<c10d::Work> endCoalescing() override {
    std::vector<OpSpec> specs;
    std::vector<c10::intrusive_ptr<NeuronWork>> works;
    {
      std::lock_guard<std::mutex> g(mu_);
      TORCH_CHECK(coalescing_, "neuron backend: endCoalescing without startCoalescing");
      coalescing_ = false;
      specs.swap(coalesced_);
      works.swap(coalesced_works_);
    }
    OpSpec all = spec(OpType::COALESCED, "coalesced", c10d::kUnsetTimeout);
    for (int pass = 0; pass < 2; ++pass)
      for (OpSpec &s : specs) {
        if (s.is_recv != (pass == 1)) continue;
        for (auto &st : s.steps) all.steps.push_back(std::move(st));
      }
    for (OpSpec &s : specs) {
      append(all.inputs, s.inputs);
      append(all.outputs, s.outputs);
      append(all.temps, s.temps);
      for (auto &cb : s.copy_back) all.copy_back.push_back(std::move(cb));
    }
    auto work = run(std::move(all), &works);
    return work;
  }

  BackendInfo info() {
    std::lock_guard<std::mutex> g(mu_);
    BackendInfo i;
    i.comm_name = comm_name_;
    i.device = last_device_;
    i.stream = last_device_ >= 0 ? nrt_stream_index(streams_[last_device_]) : -1;
    i.operations = operations_;
    i.transport = transport_;
    i.machines = machines_;
    i.local_size = local_size_;
    return i;
  }

 private:
  struct Pending {
    std::shared_ptr<OpState> state;
    std::vector<at::Tensor> keep;
  };

  template <typename T>
  static void append(std::vector<T> &dst, std::vector<T> &src) {
    for (auto &x : src) dst.push_back(std::move(x));
  }

  OpSpec spec(OpType type, const char *op, std::chrono::milliseconds timeout) {
    OpSpec s;
    s.type = type;
    s.op = op;
    s.timeout = timeout;
    return s;
  }

  static void check_tensor(const at::Tensor &t) {
    TORCH_CHECK(t.defined(), "neuron backend: undefined tensor");
    TORCH_CHECK(t.layout() == at::kStrided, "neuron backend: only dense (strided) tensors, got ",
                t.layout());
    TORCH_CHECK(t.device().is_cpu() || t.device().type() == kNeuron,
                "neuron backend: tensors must be on neuron or the CPU, got ", t.device());
  }
  static void check_same_dtype(const at::Tensor &a, const at::Tensor &b, const char *what) {
    TORCH_CHECK(a.scalar_type() == b.scalar_type(), "neuron backend: ", what, ": mixed dtypes ",
                a.scalar_type(), " and ", b.scalar_type());
  }
  const at::Tensor &single(const std::vector<at::Tensor> &ts, const char *what) {
    TORCH_CHECK(ts.size() == 1, "neuron backend: ", what, " takes one tensor per process, got ",
                ts.size());
    check_tensor(ts[0]);
    return ts[0];
  }
  int check_root(int64_t root, const char *what) {
    TORCH_CHECK(root >= 0 && root < getSize(), "neuron backend: ", what, ": invalid root rank ", root,
                " for a group of ", getSize());
    return static_cast<int>(root);
  }
  void check_peer(int peer, const char *what) {
    TORCH_CHECK(peer >= 0 && peer < getSize() && peer != getRank(), "neuron backend: ", what,
                ": invalid peer rank ", peer, " (this is rank ", getRank(), " of ", getSize(), ")");
  }

  // all_to_all has no hierarchical form: between machines it is Gloo's.
  static nrt_status all_to_all(CommShared &c, const void *const *sends, const int64_t *send_counts,
                               void *const *recvs, const int64_t *recv_counts) {
    if (c.gloo) return c.gloo->all_to_all(sends, send_counts, recvs, recv_counts, c.op_timeout_ms);
    return nrt_comm_all_to_all(c.comm, sends, send_counts, recvs, recv_counts, NRT_UINT8);
  }

  void add_all_reduce(OpSpec &s, const at::Tensor &t, const c10d::ReduceOp &op) {
    check_tensor(t);
    Reduction r = to_reduction(op, t.scalar_type(), "all_reduce");
    void *p = s.writable(t, true).data_ptr();
    int64_t n = t.numel();
    s.steps.push_back(
        [=](CommShared &c) { return nrt_hcomm_all_reduce(c.hier, p, p, n, r.dtype, r.op, r.factor); });
    if (s.steps.size() == 1)
      s.eager = [=](CommShared &c, nrt_comm_eager *state) {
        return nrt_comm_all_reduce_eager(c.comm, p, p, n, r.dtype, r.op, r.factor, NeuronWork::kEagerSpinNs, state);
      };
    else
      s.eager = nullptr;  // coalesced: one task for the list
  }

  void add_all_gather(OpSpec &s, const at::Tensor &output, const at::Tensor &input, const char *what) {
    check_tensor(output);
    check_tensor(input);
    check_same_dtype(input, output, what);
    TORCH_CHECK(output.numel() == input.numel() * getSize(), "neuron backend: ", what, ": the output has ",
                output.numel(), " elements, not world size (", getSize(), ") x input (", input.numel(), ")");
    at::Tensor out = s.writable(output, false);
    const void *send = s.readable(input).data_ptr();
    void *recv = out.data_ptr();
    int64_t n = nbytes(input);
    s.steps.push_back([=](CommShared &c) { return nrt_hcomm_all_gather(c.hier, send, recv, n, NRT_UINT8); });
  }

  void add_all_gatherv(OpSpec &s, const at::Tensor &input, const std::vector<at::Tensor> &outputs,
                       const char *what) {
    check_tensor(input);
    TORCH_CHECK(static_cast<int>(outputs.size()) == getSize(), "neuron backend: ", what,
                " needs one output tensor per rank, got ", outputs.size());
    std::vector<void *> recvs;
    std::vector<int64_t> counts;
    for (const at::Tensor &o : outputs) {
      check_tensor(o);
      check_same_dtype(o, input, what);
      recvs.push_back(s.writable(o, false).data_ptr());
      counts.push_back(nbytes(o));
    }
    TORCH_CHECK(counts[getRank()] == nbytes(input), "neuron backend: ", what, ": this rank's output (",
                outputs[getRank()].numel(), " elements) does not match its input (", input.numel(), ")");
    const void *send = s.readable(input).data_ptr();
    int64_t n = nbytes(input);
    s.steps.push_back([=](CommShared &c) {
      return nrt_hcomm_all_gatherv(c.hier, send, n, recvs.data(), counts.data(), NRT_UINT8);
    });
  }

  void add_reduce_scatter(OpSpec &s, const at::Tensor &output, const at::Tensor &input,
                          const c10d::ReduceOp &op, const char *what) {
    check_tensor(output);
    check_tensor(input);
    check_same_dtype(input, output, what);
    TORCH_CHECK(input.numel() == output.numel() * getSize(), "neuron backend: ", what, ": the input has ",
                input.numel(), " elements, not world size (", getSize(), ") x output (", output.numel(), ")");
    Reduction r = to_reduction(op, input.scalar_type(), what);
    const void *send = s.readable(input).data_ptr();
    void *recv = s.writable(output, false).data_ptr();
    int64_t n = output.numel();
    s.steps.push_back([=](CommShared &c) {
      return nrt_hcomm_reduce_scatter(c.hier, send, recv, n, r.dtype, r.op, r.factor);
    });
  }

  // Byte offset and size of each rank's rows of `t` (dim 0); no splits: equal.
  template <typename F>
  void split_rows(const at::Tensor &t, const std::vector<int64_t> &splits, const char *which, F &&emit) {
    int64_t rows = t.dim() == 0 ? 1 : t.size(0);
    int64_t row_bytes = rows == 0 ? 0 : nbytes(t) / rows;
    if (splits.empty()) {
      TORCH_CHECK(rows % getSize() == 0, "neuron backend: all_to_all_single: the ", which, " has ", rows,
                  " rows, not divisible by the world size ", getSize(), "; pass split sizes");
      for (int p = 0; p < getSize(); ++p) emit(p * (rows / getSize()) * row_bytes, rows / getSize() * row_bytes);
      return;
    }
    TORCH_CHECK(static_cast<int>(splits.size()) == getSize(), "neuron backend: all_to_all_single: ",
                splits.size(), " ", which, " splits for a group of ", getSize());
    int64_t offset = 0;
    for (int64_t n : splits) {
      TORCH_CHECK(n >= 0, "neuron backend: all_to_all_single: negative split ", n);
      emit(offset * row_bytes, n * row_bytes);
      offset += n;
    }
    TORCH_CHECK(offset == rows, "neuron backend: all_to_all_single: the ", which, " splits sum to ", offset,
                ", the tensor has ", rows, " rows");
  }

  // Drops the tensors of finished operations (outside the lock: the last
  // reference may free a Python object).
  void reap_locked(std::vector<Pending> &out) {
    auto it = std::stable_partition(pending_.begin(), pending_.end(), [](const Pending &p) {
      return !p.state->done.load(std::memory_order_acquire);
    });
    for (auto j = it; j != pending_.end(); ++j) out.push_back(std::move(*j));
    pending_.erase(it, pending_.end());
  }

  nrt_stream *stream_for(int device) {
    if (!streams_[device]) check(nrt_stream_acquire(device, &streams_[device]), "neuron backend: stream");
    return streams_[device];
  }

  // Enqueues `s` (or holds it while coalescing). `members`: the Works of a
  // coalesced batch, which share its outcome.
  c10::intrusive_ptr<c10d::Work> run(OpSpec &&s,
                                     std::vector<c10::intrusive_ptr<NeuronWork>> *members = nullptr) {
    // Where it runs: the device of its tensors, or for host tensors (and
    // barriers) the stream of the group's last operation.
    int tensor_device = -1;
    bool host = false;
    auto classify = [&](const at::Tensor &t) {
      if (t.device().is_cpu()) {
        host = true;
      } else {
        TORCH_CHECK(tensor_device < 0 || tensor_device == t.device().index(),
                    "neuron backend: ", s.op, ": tensors on two devices (neuron:", tensor_device,
                    " and ", t.device(), ")");
        tensor_device = t.device().index();
      }
    };
    for (const auto &t : s.inputs) classify(t);
    for (const auto &t : s.outputs) classify(t);
    TORCH_CHECK(!(host && tensor_device >= 0), "neuron backend: ", s.op,
                ": mixes CPU and neuron tensors");
    bool waits_caller = tensor_device >= 0 || s.waits_caller_stream;

    std::vector<Pending> reaped;
    std::unique_lock<std::mutex> lock(mu_);
    TORCH_CHECK(!closed_, "neuron backend: ", shared_->label, " was shut down");
    if (coalescing_ && !members) {
      // The batch's state and event are bound when it is enqueued.
      auto w = c10::make_intrusive<NeuronWork>(getRank(), s.type, s.op, shared_,
                                               std::make_shared<OpState>(), std::make_shared<DoneEvent>(),
                                               tensor_device, tensor_device >= 0, s.outputs);
      coalesced_.push_back(std::move(s));
      coalesced_works_.push_back(w);
      return w;
    }
    if (shared_->label.find('(') == std::string::npos && !getGroupDesc().empty())
      shared_->label += " (" + getGroupDesc() + ")";
    reap_locked(reaped);

    int device = tensor_device >= 0 ? tensor_device
                                    : (last_device_ >= 0 ? last_device_ : static_cast<int>(current_device()));
    nrt_stream *stream = stream_for(device);
    bool device_switch_ok = last_device_ < 0 || last_device_ == device;
    if (last_device_ >= 0 && last_device_ != device) {
      // Keep the group's one order across its streams.
      check(nrt_event_record(ready_, streams_[last_device_]), "neuron backend: event record");
      check(nrt_stream_wait_event(stream, ready_), "neuron backend: stream wait");
    }
    last_device_ = device;
    // Whether this operation can start at once: nothing of the group's
    // before it, nothing queued on the caller's stream (see NeuronWork::wait).
    bool starts_now = pending_.empty() && device_switch_ok;
    if (waits_caller) {
      nrt_stream *caller = current_nrt_stream(static_cast<c10::DeviceIndex>(device));
      starts_now = starts_now && nrt_stream_query(caller) == NRT_SUCCESS;
      check(nrt_event_record(ready_, caller), "neuron backend: event record");
      check(nrt_stream_wait_event(stream, ready_), "neuron backend: stream wait");
    }

    auto state = std::make_shared<OpState>();
    // A small all_reduce that can start at once runs on this thread: the
    // stream worker's two wake-ups (start, done) are most of its latency.
    // It spins a bounded time for the peers; a late peer leaves it started
    // and the stream task below finishes it, so the caller never blocks
    // for long and the group's order is kept. Only on one machine (the
    // hierarchical path has its own steps) and with the group's timeout.
    if (s.eager && starts_now && !members && tensor_device >= 0 && s.copy_back.empty() && !shared_->gloo &&
        s.timeout.count() <= 0 && nbytes(s.outputs.at(0)) <= NeuronWork::kSmallBytes) {
      nrt_comm_eager how = NRT_COMM_EAGER_DECLINED;
      nrt_status est = s.eager(*shared_, &how);
      if (est != NRT_SUCCESS) {
        // Failed like the stream task would have: the task reports it, in order.
        std::string why = nrt_last_error_message();
        s.steps.assign(1, [est, why](CommShared &) {
          nrt_set_error_message("%s", why.c_str());
          return est;
        });
      } else if (how == NRT_COMM_EAGER_DONE) {
        state->finish();
        ++operations_;
        ++seq_;
        auto work = c10::make_intrusive<NeuronWork>(getRank(), s.type, s.op, shared_, state,
                                                    std::make_shared<DoneEvent>(), device, true, s.outputs);
        lock.unlock();
        reaped.clear();
        work->complete_device_future(stream);
        return work;
      } else if (how == NRT_COMM_EAGER_STARTED) {
        s.steps.assign(1, [](CommShared &c) { return nrt_comm_finish(c.comm); });
      }
    }
    bool device_copy_back = tensor_device >= 0 && !s.copy_back.empty();
    auto *task = new CommTask{shared_, state, s.op, std::move(s.steps),
                              s.timeout.count() > 0 ? static_cast<int64_t>(s.timeout.count()) : -1,
                              !device_copy_back};
    nrt_status st = nrt_stream_enqueue(stream, s.op, run_comm_task, task, release_comm_task);
    if (st != NRT_SUCCESS) {
      // release ran (the task was never queued): the op is finished, failed.
      throw_status(st, "neuron backend: enqueue");
    }
    if (device_copy_back) {
      c10::StreamGuard g(c10::Stream(c10::Stream::UNSAFE, c10::Device(kNeuron, static_cast<c10::DeviceIndex>(device)),
                                     nrt_stream_index(stream)));
      for (auto &cb : s.copy_back) cb.first.copy_(cb.second);
      check(nrt_stream_enqueue(stream, "c10d done", run_marker, new std::shared_ptr<OpState>(state),
                               release_marker),
            "neuron backend: enqueue");
    }
    auto done = std::make_shared<DoneEvent>();
    check(nrt_event_record(done->event, stream), "neuron backend: event record");
    ++operations_;
    ++seq_;

    Pending p{state, {}};
    append(p.keep, s.inputs);
    append(p.keep, s.temps);
    for (const auto &t : s.outputs) p.keep.push_back(t);
    for (const auto &cb : s.copy_back) p.keep.push_back(cb.second);
    pending_.push_back(std::move(p));

    auto work = c10::make_intrusive<NeuronWork>(getRank(), s.type, s.op, shared_, state, done, device,
                                                tensor_device >= 0, s.outputs);
    if (members)
      for (auto &m : *members) m->bind(state, done);
    int64_t bytes = 0;
    for (const auto &t : s.outputs) bytes += nbytes(t);
    work->set_small(starts_now && bytes <= NeuronWork::kSmallBytes);
    lock.unlock();
    reaped.clear();

    if (tensor_device < 0) {
      // Host tensors (and barriers): asynchronous like Gloo's, completed by
      // the completer thread; wait() blocks until then.
      work->set_host_copy_back(std::move(s.copy_back));
      complete_later(work);
      if (members)
        for (auto &m : *members) complete_later(m);
    } else {
      work->complete_device_future(stream);
      if (members)
        for (auto &m : *members) m->complete_device_future(stream);
    }
    return work;
  }

  void complete_later(const c10::intrusive_ptr<NeuronWork> &w) {
    std::lock_guard<std::mutex> g(completer_mu_);
    if (!completer_.joinable()) completer_ = std::thread([this] { completer_loop(); });
    completer_queue_.push_back(w);
    completer_cv_.notify_one();
  }

  void completer_loop() {
    for (;;) {
      c10::intrusive_ptr<NeuronWork> w;
      {
        std::unique_lock<std::mutex> l(completer_mu_);
        completer_cv_.wait(l, [&] { return completer_stop_ || !completer_queue_.empty(); });
        if (completer_queue_.empty()) return;
        w = std::move(completer_queue_.front());
        completer_queue_.pop_front();
      }
      w->finish_host();
    }
  }

  void close() {
    std::vector<Pending> reaped;
    std::unique_lock<std::mutex> lock(mu_);
    if (closed_) return;
    closed_ = true;
    for (nrt_stream *s : streams_)
      if (s) nrt_stream_wait_until(s, nrt_stream_enqueued(s));  // the comm's timeout bounds it
    reap_locked(reaped);
    lock.unlock();
    {
      std::lock_guard<std::mutex> g(completer_mu_);
      completer_stop_ = true;
      completer_cv_.notify_one();
    }
    if (completer_.joinable()) {
      if (completer_.get_id() == std::this_thread::get_id()) {
        completer_.detach();  // the last reference went on that thread
      } else {
        // A Future callback still to run there may need the GIL, which a
        // Python thread dropping the last reference holds.
        PyThreadState *ts = Py_IsInitialized() && PyGILState_Check() ? PyEval_SaveThread() : nullptr;
        completer_.join();
        if (ts) PyEval_RestoreThread(ts);
      }
    }
    nrt_hcomm_destroy(shared_->hier);
    shared_->hier = nullptr;
    nrt_comm_destroy(shared_->comm);
    shared_->comm = nullptr;
    shared_->gloo.reset();  // after the sends still in flight
  }

  std::shared_ptr<CommShared> shared_;
  std::chrono::milliseconds timeout_;
  std::string group_name_;
  std::string transport_;
  int machines_ = 1, local_size_ = 0;
  std::string comm_name_;
  std::mutex mu_;
  nrt_stream *streams_[NRT_MAX_DEVICES] = {};
  int last_device_ = -1;
  nrt_event *ready_ = nullptr;  // caller's stream -> communication stream
  std::vector<Pending> pending_;
  bool coalescing_ = false;
  std::vector<OpSpec> coalesced_;
  std::vector<c10::intrusive_ptr<NeuronWork>> coalesced_works_;
  int64_t operations_ = 0;
  uint64_t seq_ = 0;
  bool closed_ = false;
  std::thread completer_;  // completes host operations (complete_later)
  std::mutex completer_mu_;
  std::condition_variable completer_cv_;
  std::deque<c10::intrusive_ptr<NeuronWork>> completer_queue_;
  bool completer_stop_ = false;
};

}  // namespace

c10::intrusive_ptr<c10d::Backend> create_backend(const c10::intrusive_ptr<c10d::Store> &store, int rank,
                                                 int size, std::chrono::milliseconds timeout,
                                                 const std::string &group_name, const Machines &machines) {
  TORCH_CHECK(size >= 1 && size <= NRT_COMM_MAX_RANKS, "neuron backend: world size ", size,
              " is out of range (1..", NRT_COMM_MAX_RANKS, ")");
  TORCH_CHECK(rank >= 0 && rank < size, "neuron backend: rank ", rank, " is out of range for size ", size);
  return c10::make_intrusive<NeuronBackend>(store, rank, size, timeout, group_name, machines);
}

BackendInfo backend_info(const c10::intrusive_ptr<c10d::Backend> &backend) {
  auto *b = dynamic_cast<NeuronBackend *>(backend.get());
  TORCH_CHECK(b, "not a neuron backend");
  return b->info();
}

}  // namespace distributed
}  // namespace torch_neuronx
