// Gloo as the transport between machines (gloo.h): the runtime's pointers
// as CPU tensors over the same bytes, handed to c10d's ProcessGroupGloo.
#include <cstring>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>

#include "distributed/gloo.h"

namespace torch_neuronx {
namespace distributed {
namespace {

using std::chrono::milliseconds;

// A buffer the runtime owns, seen by Gloo as a CPU tensor (never freed by
// it). Gloo wants a real pointer even for no bytes.
at::Tensor bytes_view(const void *p, int64_t bytes) {
  static char nothing;
  return at::from_blob(const_cast<void *>(p ? p : &nothing), {bytes}, at::TensorOptions().dtype(at::kByte));
}

at::ScalarType scalar_type(nrt_dtype dt) {
  switch (dt) {
    case NRT_FLOAT16: return at::kHalf;
    case NRT_BFLOAT16: return at::kBFloat16;
    case NRT_FLOAT32: return at::kFloat;
    case NRT_FLOAT64: return at::kDouble;
    case NRT_UINT8: return at::kByte;
    case NRT_INT8: return at::kChar;
    case NRT_INT32: return at::kInt;
    case NRT_INT64: return at::kLong;
    default:
      TORCH_CHECK(false, "Gloo bridge: dtype ", nrt_dtype_name(dt), " is not one nrt_hcomm hands over");
  }
}

// Runs a Gloo call; an exception becomes a status with the message set.
template <typename F>
nrt_status guarded(const char *what, F &&call) {
  std::string why;
  try {
    call();
    return NRT_SUCCESS;
  } catch (const c10::Error &e) {
    why = e.what_without_backtrace();
  } catch (const std::exception &e) {
    why = e.what();
  }
  nrt_set_error_message("Gloo %s failed: %s", what, why.c_str());
  return why.find("imed out") != std::string::npos || why.find("imeout") != std::string::npos
             ? NRT_ERROR_TIMEOUT
             : NRT_ERROR_PEER_FAILED;
}

// The pieces of one buffer per rank, if they lie one after the other in
// rank order (all_to_all_single): its start, else null.
const char *one_buffer(const void *const *bufs, const int64_t *bytes, int n, int64_t *total) {
  const char *base = nullptr;
  bool together = true;
  *total = 0;
  for (int p = 0; p < n; p++) {
    if (bytes[p]) {
      const char *b = static_cast<const char *>(bufs[p]) - *total;
      if (!base) base = b;
      together = together && b == base;
    }
    *total += bytes[p];
  }
  return together ? base : nullptr;
}

// The link's callbacks for nrt_hcomm, over the leaders' group.
struct BridgeCalls {
  static c10d::Backend &leaders(void *ctx) { return *static_cast<c10d::Backend *>(ctx); }

  static nrt_status all_reduce(void *ctx, void *buf, int64_t count, nrt_dtype dt, nrt_reduce_op op,
                               int64_t timeout_ms) {
    return guarded("all_reduce between machines", [&] {
      std::vector<at::Tensor> t{at::from_blob(buf, {count}, at::TensorOptions().dtype(scalar_type(dt)))};
      c10d::AllreduceOptions o;
      // nrt_reduce_op lists c10d's ReduceOp in its order (nrt/collectives.h).
      o.reduceOp = c10d::ReduceOp(static_cast<c10d::ReduceOp::RedOpType>(op));
      o.timeout = milliseconds(timeout_ms);
      leaders(ctx).allreduce(t, o)->wait();
    });
  }
  static nrt_status broadcast(void *ctx, void *buf, int64_t bytes, int root, int64_t timeout_ms) {
    return guarded("broadcast between machines", [&] {
      std::vector<at::Tensor> t{bytes_view(buf, bytes)};
      c10d::BroadcastOptions o;
      o.rootRank = root;
      o.timeout = milliseconds(timeout_ms);
      leaders(ctx).broadcast(t, o)->wait();
    });
  }
  static nrt_status all_gather(void *ctx, const void *send, void *recv, int64_t bytes, int64_t timeout_ms) {
    return guarded("all_gather between machines", [&] {
      c10d::Backend &g = leaders(ctx);
      at::Tensor in = bytes_view(send, bytes), out = bytes_view(recv, bytes * g.getSize());
      c10d::AllgatherOptions o;
      o.timeout = milliseconds(timeout_ms);
      g._allgather_base(out, in, o)->wait();
    });
  }
  static nrt_status barrier(void *ctx, int64_t timeout_ms) {
    return guarded("barrier between machines", [&] {
      c10d::BarrierOptions o;
      o.timeout = milliseconds(timeout_ms);
      leaders(ctx).barrier(o)->wait();
    });
  }
};

}  // namespace

GlooLink::GlooLink(c10::intrusive_ptr<c10d::Backend> world, c10::intrusive_ptr<c10d::Backend> leaders)
    : world_(std::move(world)), leaders_(std::move(leaders)), size_(world_->getSize()) {}

GlooLink::~GlooLink() {
  {
    std::lock_guard<std::mutex> g(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (completer_.joinable()) completer_.join();
}

nrt_comm_bridge GlooLink::bridge() {
  return nrt_comm_bridge{leaders_.get(), BridgeCalls::all_reduce, BridgeCalls::broadcast,
                         BridgeCalls::all_gather, BridgeCalls::barrier};
}

nrt_status GlooLink::earlier_send_failed(const char *what) {
  std::lock_guard<std::mutex> g(mu_);
  if (send_failure_.empty()) return NRT_SUCCESS;
  nrt_set_error_message("Gloo %s: an earlier send failed: %s", what, send_failure_.c_str());
  return NRT_ERROR_PEER_FAILED;
}

void GlooLink::complete_sends() {
  for (;;) {
    c10::intrusive_ptr<c10d::Work> w;
    {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait(l, [&] { return stop_ || !in_flight_.empty(); });
      if (in_flight_.empty()) return;
      w = in_flight_.front();
    }
    std::string why;
    try {
      w->wait(milliseconds(drain_timeout_ms_));
    } catch (const c10::Error &e) {
      why = e.what_without_backtrace();
    } catch (const std::exception &e) {
      why = e.what();
    }
    if (!why.empty()) {
      try {
        w->abort();  // frees Gloo's hold on the staged copy
      } catch (...) {
      }
    }
    std::lock_guard<std::mutex> g(mu_);
    if (!why.empty() && send_failure_.empty()) send_failure_ = why;
    in_flight_.pop_front();
  }
}

nrt_status GlooLink::send(const void *buf, int64_t bytes, int peer, int tag, int64_t timeout_ms) {
  nrt_status st = earlier_send_failed("send");
  if (st != NRT_SUCCESS) return st;
  return guarded("send", [&] {
    at::Tensor staged = at::empty({bytes}, at::TensorOptions().dtype(at::kByte));
    if (bytes) std::memcpy(staged.data_ptr(), buf, static_cast<size_t>(bytes));
    std::vector<at::Tensor> t{staged};
    c10::intrusive_ptr<c10d::Work> w = world_->send(t, peer, tag);
    {
      std::lock_guard<std::mutex> g(mu_);
      in_flight_.push_back(std::move(w));
      if (!completer_.joinable()) completer_ = std::thread([this] { complete_sends(); });
    }
    cv_.notify_one();
  });
}

nrt_status GlooLink::recv(void *buf, int64_t bytes, int peer, int tag, int64_t timeout_ms) {
  nrt_status st = earlier_send_failed("recv");
  if (st != NRT_SUCCESS) return st;
  return guarded("recv", [&] {
    std::vector<at::Tensor> t{bytes_view(buf, bytes)};
    world_->recv(t, peer, tag)->wait(milliseconds(timeout_ms));
  });
}

nrt_status GlooLink::all_to_all(const void *const *send_bufs, const int64_t *send_bytes,
                                void *const *recv_bufs, const int64_t *recv_bytes, int64_t timeout_ms) {
  nrt_status st = earlier_send_failed("all_to_all");
  if (st != NRT_SUCCESS) return st;
  return guarded("all_to_all", [&] {
    // Gloo takes one buffer each way, split per rank: the caller's when its
    // pieces lie in rank order (all_to_all_single), else a staged copy.
    int64_t in_total = 0, out_total = 0;
    const char *in_base = one_buffer(send_bufs, send_bytes, size_, &in_total);
    const char *out_base =
        one_buffer(const_cast<const void *const *>(recv_bufs), recv_bytes, size_, &out_total);
    at::Tensor in = in_base ? bytes_view(in_base, in_total) : at::empty({in_total}, at::kByte);
    at::Tensor out = out_base ? bytes_view(out_base, out_total) : at::empty({out_total}, at::kByte);
    std::vector<int64_t> in_splits(send_bytes, send_bytes + size_);
    std::vector<int64_t> out_splits(recv_bytes, recv_bytes + size_);
    if (!in_base) {
      char *p = static_cast<char *>(in.data_ptr());
      for (int q = 0; q < size_; p += send_bytes[q], q++)
        if (send_bytes[q]) std::memcpy(p, send_bufs[q], static_cast<size_t>(send_bytes[q]));
    }
    c10d::AllToAllOptions o;
    o.timeout = milliseconds(timeout_ms);
    world_->alltoall_base(out, in, out_splits, in_splits, o)->wait();
    if (!out_base) {
      const char *p = static_cast<const char *>(out.data_ptr());
      for (int q = 0; q < size_; p += recv_bytes[q], q++)
        if (recv_bytes[q]) std::memcpy(recv_bufs[q], p, static_cast<size_t>(recv_bytes[q]));
    }
  });
}

nrt_status GlooLink::gather(const void *send, void *recv, int64_t bytes, int root, int64_t timeout_ms) {
  nrt_status st = earlier_send_failed("gather");
  if (st != NRT_SUCCESS) return st;
  return guarded("gather", [&] {
    std::vector<at::Tensor> in{bytes_view(send, bytes)};
    std::vector<std::vector<at::Tensor>> outs;
    if (world_->getRank() == root) {
      outs.emplace_back();
      for (int p = 0; p < size_; p++)
        outs[0].push_back(bytes_view(static_cast<char *>(recv) + p * bytes, bytes));
    }
    c10d::GatherOptions o;
    o.rootRank = root;
    o.timeout = milliseconds(timeout_ms);
    world_->gather(outs, in, o)->wait();
  });
}

nrt_status GlooLink::scatter(const void *send, void *recv, int64_t bytes, int root, int64_t timeout_ms) {
  nrt_status st = earlier_send_failed("scatter");
  if (st != NRT_SUCCESS) return st;
  return guarded("scatter", [&] {
    std::vector<at::Tensor> out{bytes_view(recv, bytes)};
    std::vector<std::vector<at::Tensor>> ins;
    if (world_->getRank() == root) {
      ins.emplace_back();
      for (int p = 0; p < size_; p++)
        ins[0].push_back(bytes_view(static_cast<const char *>(send) + p * bytes, bytes));
    }
    c10d::ScatterOptions o;
    o.rootRank = root;
    o.timeout = milliseconds(timeout_ms);
    world_->scatter(out, ins, o)->wait();
  });
}

}  // namespace distributed
}  // namespace torch_neuronx
