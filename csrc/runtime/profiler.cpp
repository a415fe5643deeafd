// torch.profiler's device activity for neuron: a Kineto activity-profiler
// plugin (PyTorch's PrivateUse1 profiler registry) over the runtime's
// device profiler (nrt/profiler.h). With ProfilerActivity.PrivateUse1 the
// session turns the runtime's record on, forwards the CPU ops' correlation
// ids to it, and at the end hands Kineto one kernel / memcpy activity per
// device task, linked to the op that launched it: key_averages() then
// shows NEURON time per op and the Chrome trace has a row per stream.
//
// Kineto's headers are only consumed here; USE_KINETO is what the wheel
// was built with (torch.autograd.kineto_available()).
#define USE_KINETO 1
#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>

#include <IActivityProfiler.h>
#include <libkineto.h>
#include <output_base.h>

#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "nrt/profiler.h"
#include "nrt/status.h"

namespace torch_neuronx {
namespace {

using libkineto::ActivityType;

// The runtime stamps CLOCK_MONOTONIC; Kineto's events are nanoseconds of
// the system clock. One offset, taken when the session starts, maps one to
// the other (the two clocks do not drift apart measurably within a trace).
int64_t system_minus_device_ns() {
  auto now = std::chrono::system_clock::now().time_since_epoch();
  uint64_t device = nrt_clock_ns();
  return std::chrono::duration_cast<std::chrono::nanoseconds>(now).count() - static_cast<int64_t>(device);
}

std::string to_string(uint64_t v) { return std::to_string(v); }

class NeuronSession final : public libkineto::IActivityProfilerSession {
 public:
  void start() override {
    offset_ns_ = system_minus_device_ns();
    if (nrt_profiler_start() != NRT_SUCCESS) {
      errors_.push_back(std::string("neuron device activity not recorded: ") + nrt_last_error_message() +
                        " (torch_neuronx.profiler and torch.profiler cannot record at the same time)");
      return;
    }
    recording_ = true;
    status_ = libkineto::TraceStatus::RECORDING;
  }

  void stop() override {
    if (!recording_) return;
    nrt_profiler_stop();
    recording_ = false;
    status_ = libkineto::TraceStatus::PROCESSING;
    read_records();
  }

  std::vector<std::string> errors() override { return errors_; }

  void pushCorrelationId(uint64_t id) override { nrt_profiler_push_correlation(id); }
  void popCorrelationId() override { nrt_profiler_pop_correlation(); }

  void processTrace(libkineto::ActivityLogger &logger) override {
    processTrace(logger, [](int32_t) -> const libkineto::ITraceActivity * { return nullptr; }, 0, 0);
  }

  void processTrace(libkineto::ActivityLogger &logger, libkineto::getLinkedActivityCallback linked,
                    int64_t start_time, int64_t end_time) override {
    buffer_ = std::make_unique<libkineto::CpuTraceBuffer>();
    buffer_->span = libkineto::TraceSpan(start_time, end_time, "neuron");
    for (const nrt_activity &r : records_) {
      // Event markers take no device time of their own.
      if (r.kind == NRT_ACTIVITY_SYNC) continue;
      ActivityType type = r.kind == NRT_ACTIVITY_COPY ? ActivityType::GPU_MEMCPY : ActivityType::CONCURRENT_KERNEL;
      buffer_->emplace_activity(buffer_->span, type, std::string(r.name));
      libkineto::GenericTraceActivity &a = *buffer_->activities.back();
      a.startTime = static_cast<int64_t>(r.start_ns) + offset_ns_;
      a.endTime = static_cast<int64_t>(r.end_ns) + offset_ns_;
      a.id = static_cast<int32_t>(r.correlation);
      a.device = r.device;
      a.resource = r.stream;
      a.linked = r.correlation ? linked(static_cast<int32_t>(r.correlation)) : nullptr;
      // Quoted values: the numeric form needs fmt, which the wheel keeps private.
      a.addMetadataQuoted("device", "neuron:" + std::to_string(r.device));
      a.addMetadataQuoted("stream", std::to_string(r.stream));
      if (r.bytes) a.addMetadataQuoted("bytes", to_string(r.bytes));
      if (r.flops) a.addMetadataQuoted("flops", to_string(r.flops));
      if (r.failed) a.addMetadataQuoted("failed", "true");
      a.log(logger);
    }
  }

  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override {
    return std::make_unique<libkineto::DeviceInfo>(libkineto::DeviceInfo{0, 0, "neuron", "neuron"});
  }

  std::vector<libkineto::ResourceInfo> getResourceInfos() override {
    std::set<std::pair<int, int>> seen;
    for (const nrt_activity &r : records_) seen.insert({r.device, r.stream});
    std::vector<libkineto::ResourceInfo> out;
    for (auto [d, s] : seen)
      out.push_back(libkineto::ResourceInfo{s, s, d, "neuron:" + std::to_string(d) + " stream " + std::to_string(s)});
    return out;
  }

  // Kineto keeps the activities alive through this buffer after the
  // session is gone (the logged events point into it).
  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override { return std::move(buffer_); }

  ~NeuronSession() override {
    if (recording_) nrt_profiler_stop();
  }

 private:
  void read_records() {
    size_t n = 0;
    uint64_t dropped = 0;
    if (nrt_profiler_count(&n, &dropped) != NRT_SUCCESS) return;
    records_.resize(n);
    size_t got = 0;
    if (n && nrt_profiler_read(0, n, records_.data(), &got) == NRT_SUCCESS) records_.resize(got);
    if (dropped)
      errors_.push_back("neuron profiler buffer full: " + std::to_string(dropped) + " device activities dropped");
  }

  bool recording_ = false;
  int64_t offset_ns_ = 0;
  std::vector<nrt_activity> records_;
  std::vector<std::string> errors_;
  std::unique_ptr<libkineto::CpuTraceBuffer> buffer_;
};

class NeuronActivityProfiler final : public libkineto::IActivityProfiler {
 public:
  const std::string &name() const override { return name_; }
  const std::set<ActivityType> &availableActivities() const override { return activities_; }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(const std::set<ActivityType> &,
                                                                 const libkineto::Config &) override {
    return std::make_unique<NeuronSession>();
  }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(int64_t, int64_t,
                                                                 const std::set<ActivityType> &types,
                                                                 const libkineto::Config &config) override {
    return configure(types, config);
  }

 private:
  std::string name_{"neuron"};
  std::set<ActivityType> activities_{ActivityType::CONCURRENT_KERNEL, ActivityType::GPU_MEMCPY};
};

REGISTER_PRIVATEUSE1_PROFILER(NeuronActivityProfiler);

}  // namespace
}  // namespace torch_neuronx
