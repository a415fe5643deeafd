// The minimal op set every PrivateUse1 backend needs: factories, views,
// resize/set_, copies between host and device, scalar reads, fill/zero.
// Views only rewrite metadata; every byte moved goes through the runtime
// (stream-ordered memcpy or the COPY kernel).
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include <ATen/EmptyTensor.h>
#include <ATen/ExpandUtils.h>
#include <ATen/Dispatch.h>
#include <ATen/TensorIterator.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/view_native.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/StorageImpl.h>

#include "launch/iter.h"
#include "launch/launch.h"
#include "launch/scalar.h"
#include "registry/variants.h"

namespace torch_neuronx {
namespace {

using at::Tensor;

Tensor empty_memory_format(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                           std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                           std::optional<bool> pin_memory, std::optional<c10::MemoryFormat> memory_format) {
  c10::Device dev = c10::device_or_default(device);
  TORCH_CHECK(c10::layout_or_default(layout) == c10::Layout::Strided,
              "neuron tensors support only the strided layout, got ", c10::layout_or_default(layout));
  TORCH_CHECK(!c10::pinned_memory_or_default(pin_memory), "pin_memory is only for CPU tensors");
  if (dev.has_index()) check_device_index(dev.index());
  c10::DeviceGuard guard(dev);
  return at::detail::empty_generic(size, device_allocator(), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                   c10::dtype_or_default(dtype), memory_format);
}

Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<c10::ScalarType> dtype,
                     std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                     std::optional<bool> pin_memory) {
  c10::Device dev = c10::device_or_default(device);
  TORCH_CHECK(c10::layout_or_default(layout) == c10::Layout::Strided,
              "neuron tensors support only the strided layout");
  TORCH_CHECK(!c10::pinned_memory_or_default(pin_memory), "pin_memory is only for CPU tensors");
  if (dev.has_index()) check_device_index(dev.index());
  c10::DeviceGuard guard(dev);
  return at::detail::empty_strided_generic(size, stride, device_allocator(),
                                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                           c10::dtype_or_default(dtype));
}

Tensor as_strided(const Tensor &self, c10::IntArrayRef size, c10::IntArrayRef stride,
                  std::optional<int64_t> storage_offset) {
  return at::native::as_strided_tensorimpl(self, size, stride, storage_offset);
}

Tensor view(const Tensor &self, c10::IntArrayRef size) { return at::native::view(self, size); }

Tensor unfold(const Tensor &self, int64_t dim, int64_t size, int64_t step) {
  return at::native::unfold(self, dim, size, step);  // a view: metadata only
}

Tensor reshape_alias(const Tensor &self, c10::IntArrayRef size, c10::IntArrayRef stride) {
  return at::native::_reshape_alias(self, size, stride);
}

void ensure_storage_bytes(const Tensor &self, size_t nbytes) {
  const c10::Storage &storage = self.unsafeGetTensorImpl()->unsafe_storage();
  if (nbytes > storage.nbytes()) resize_storage_bytes(storage, nbytes);
}

const Tensor &resize_(const Tensor &self, c10::IntArrayRef size, std::optional<c10::MemoryFormat> format) {
  for (auto s : size) TORCH_CHECK(s >= 0, "Trying to create tensor with negative dimension ", s, ": ", size);
  c10::DeviceGuard guard(self.device());
  auto *impl = self.unsafeGetTensorImpl();
  if (impl->sizes() != size) {
    impl->set_sizes_contiguous(size);
    size_t nbytes = at::detail::computeStorageNbytesContiguous(size, self.dtype().itemsize(),
                                                               impl->storage_offset());
    ensure_storage_bytes(self, nbytes);
  }
  if (format && *format != c10::MemoryFormat::Preserve) impl->empty_tensor_restride(*format);
  return self;
}

Tensor &set_storage_offset_(Tensor &self, c10::Storage storage, int64_t offset, c10::IntArrayRef size,
                            c10::IntArrayRef stride) {
  at::native::checkSetStorage(self, storage, offset, size, stride);
  auto *impl = self.unsafeGetTensorImpl();
  impl->set_storage_offset(offset);
  impl->set_sizes_and_strides(size, stride);
  size_t nbytes = at::detail::computeStorageNbytes(size, stride, self.dtype().itemsize(), offset);
  if (self.numel() > 0) ensure_storage_bytes(self, nbytes);
  return self;
}

Tensor &set_storage_(Tensor &self, c10::Storage storage) {
  int64_t n = static_cast<int64_t>(storage.nbytes() / self.dtype().itemsize());
  return set_storage_offset_(self, std::move(storage), 0, {n}, {1});
}

Tensor &set_tensor_(Tensor &self, const Tensor &src) {
  TORCH_CHECK(self.dtype() == src.dtype(), "Could not set tensor of type ", src.dtype(),
              " to a tensor of type ", self.dtype());
  if (self.unsafeGetTensorImpl() != src.unsafeGetTensorImpl()) {
    set_storage_offset_(self, src.storage(), src.storage_offset(), src.sizes(), src.strides());
  }
  return self;
}

Tensor &set_empty_(Tensor &self) {
  c10::Storage storage(c10::Storage::use_byte_size_t(), 0, device_allocator(), /*resizable=*/true);
  return set_storage_offset_(self, storage, 0, {0}, {});
}

// ---- copies ------------------------------------------------------------

// Same dtype, same sizes and strides, no gaps or overlap, the same
// conjugate/negative bits: one byte copy.
bool same_dense_layout(const Tensor &a, const Tensor &b) {
  return a.dtype() == b.dtype() && a.sizes() == b.sizes() && a.strides() == b.strides() &&
         a.is_conj() == b.is_conj() && a.is_neg() == b.is_neg() && a.is_non_overlapping_and_dense();
}

// A staging tensor holding `like`'s physical bytes means what `like` means
// only with the same conjugate/negative bits (the device copy applies them).
void keep_math_bits(const Tensor &staging, const Tensor &like) {
  staging._set_conj(like.is_conj());
  staging._set_neg(like.is_neg());
}

// The bytes [first, last] a tensor's elements span (no negative strides in
// PyTorch).
std::pair<uintptr_t, uintptr_t> byte_span(const Tensor &t) {
  uintptr_t first = reinterpret_cast<uintptr_t>(t.const_data_ptr());
  uintptr_t last = first + t.itemsize() - 1;
  for (int64_t d = 0; d < t.dim(); ++d) last += static_cast<uintptr_t>((t.size(d) - 1) * t.stride(d)) * t.itemsize();
  return {first, last};
}

// Whether a copy reads memory it writes: then its result depends on the
// order of the element copies.
bool copy_overlaps(const Tensor &dst, const Tensor &src) {
  if (!dst.storage().is_alias_of(src.storage())) return false;
  auto [a0, a1] = byte_span(dst);
  auto [b0, b1] = byte_span(src);
  return a0 <= b1 && b0 <= a1;
}

// The bytes ATen's CPU copy loop moves at once along a contiguous row: two
// 32-byte vectors, loaded before they are stored (its copy kernel has no
// AVX-512 build, so 64 bytes under every CPU capability, measured);
// ComplexHalf copies element by element.
int64_t cpu_copy_block(const Tensor &t) { return t.scalar_type() == at::kComplexHalf ? 0 : 64; }

// Device-side copy with broadcasting and dtype conversion (both on one device).
// TensorIterator refuses the overlaps it can prove partial, as on the CPU;
// an overlap it lets through (strided views of one buffer) is copied in the
// CPU's element order (COPY_ORDERED), so x[:, 1:] = x[:, :-1] smears as
// there.
void device_copy(const Tensor &dst, const Tensor &src) {
  auto iter = at::TensorIteratorConfig()
                  .add_output(dst)
                  .add_const_input(src)
                  .resize_outputs(false)
                  .check_all_same_dtype(false)
                  .set_check_mem_overlap(true)
                  .build();
  if (iter.numel() > 0 && src.device() == dst.device() && dst.scalar_type() == src.scalar_type() &&
      dst.is_conj() == src.is_conj() && dst.is_neg() == src.is_neg() && copy_overlaps(dst, src)) {
    c10::DeviceGuard guard(dst.device());
    nrt_launch d = iter_desc(iter, NRT_OP(COPY_ORDERED));
    d.compute_dtype = to_nrt_dtype(dst.scalar_type());
    set_iter_operand(d.operands[0], iter, 0);
    set_iter_operand(d.operands[1], iter, 1);
    d.params[0] = cpu_copy_block(dst);
    return enqueue(dst.device().index(), d);
  }
  launch_iter(iter, NRT_OP_COPY);
}

struct HostStaging {
  void *buffer;
  c10::Storage keep_alive;  // pinned source/destination kept until the copy ran
};

void release_staging(void *arg) {
  auto *s = static_cast<HostStaging *>(arg);
  std::free(s->buffer);
  delete s;
}

// Host -> device byte copy of a dense CPU tensor into a dense device tensor.
void upload_bytes(void *dst, const Tensor &cpu_src, size_t nbytes, bool non_blocking, nrt_stream *stream) {
  if (nbytes == 0) return;
  const void *src = cpu_src.const_data_ptr();
  if (non_blocking && nrt_host_is_pinned(src)) {
    check(nrt_memcpy_async(dst, src, nbytes, NRT_MEMCPY_HOST_TO_DEVICE, stream), "neuron copy to device");
    auto *hold = new HostStaging{nullptr, cpu_src.storage()};
    check(nrt_stream_launch_host_func(stream, release_staging, hold), "neuron copy to device");
    return;
  }
  // Pageable memory: stage a private copy so the caller's buffer may change
  // as soon as we return, and the device copy still runs asynchronously.
  void *staging = std::malloc(nbytes);
  TORCH_CHECK_WITH(OutOfMemoryError, staging, "host out of memory staging a ", nbytes, "-byte copy");
  std::memcpy(staging, src, nbytes);
  check(nrt_memcpy_async(dst, staging, nbytes, NRT_MEMCPY_HOST_TO_DEVICE, stream), "neuron copy to device");
  auto *hold = new HostStaging{staging, c10::Storage()};
  check(nrt_stream_launch_host_func(stream, release_staging, hold), "neuron copy to device");
}

void copy_host_to_device(const Tensor &src, const Tensor &dst, bool non_blocking) {
  c10::DeviceGuard guard(dst.device());
  nrt_stream *stream = current_nrt_stream(dst.device().index());
  if (same_dense_layout(src, dst)) {
    upload_bytes(dst.data_ptr(), src, src.nbytes(), non_blocking, stream);
    return;
  }
  // Upload as is (contiguous, source dtype), then convert/broadcast/stride on the device.
  Tensor src_c = src.contiguous();
  Tensor tmp = at::empty(src_c.sizes(), src_c.options().device(dst.device()));
  upload_bytes(tmp.data_ptr(), src_c, src_c.nbytes(), non_blocking, stream);
  keep_math_bits(tmp, src_c);
  device_copy(dst, tmp);
}

void copy_device_to_host(const Tensor &src, const Tensor &dst, bool non_blocking) {
  c10::DeviceGuard guard(src.device());
  nrt_stream *stream = current_nrt_stream(src.device().index());
  Tensor dev = src;
  if (!same_dense_layout(src, dst) || !dst.is_contiguous()) {
    // Convert/broadcast on the device into a contiguous tensor of dst's dtype.
    dev = at::empty(dst.sizes(), src.options().dtype(dst.scalar_type()));
    device_copy(dev, src);
  }
  bool direct = same_dense_layout(dev, dst);
  Tensor host = direct ? dst : at::empty(dst.sizes(), dst.options().memory_format(c10::MemoryFormat::Contiguous));
  size_t nbytes = dev.nbytes();
  if (nbytes > 0) {
    void *hp = host.data_ptr();
    if (non_blocking && direct && nrt_host_is_pinned(hp)) {
      check(nrt_memcpy_async(hp, dev.const_data_ptr(), nbytes, NRT_MEMCPY_DEVICE_TO_HOST, stream),
            "neuron copy to host");
      auto *hold = new HostStaging{nullptr, host.storage()};
      check(nrt_stream_launch_host_func(stream, release_staging, hold), "neuron copy to host");
      return;
    }
    check(nrt_memcpy(hp, dev.const_data_ptr(), nbytes, NRT_MEMCPY_DEVICE_TO_HOST, stream),
          "neuron copy to host");
  }
  if (!direct) dst.copy_(host);  // host-side scatter into a strided CPU destination
}

void copy_device_to_device(const Tensor &src, const Tensor &dst) {
  if (src.device() == dst.device()) {
    c10::DeviceGuard guard(dst.device());
    device_copy(dst, src);
    return;
  }
  // Across logical cores: order after src's pending work, then copy bytes.
  Tensor src_c;
  {
    c10::DeviceGuard guard(src.device());
    src_c = src.contiguous();
    check(nrt_stream_synchronize(current_nrt_stream(src.device().index())), "neuron copy across devices");
  }
  c10::DeviceGuard guard(dst.device());
  Tensor tmp = at::empty(src_c.sizes(), src_c.options().device(dst.device()));
  if (tmp.nbytes() > 0) {
    check(nrt_memcpy_async(tmp.data_ptr(), src_c.const_data_ptr(), tmp.nbytes(), NRT_MEMCPY_DEVICE_TO_DEVICE,
                           current_nrt_stream(dst.device().index())),
          "neuron copy across devices");
    // src_c's block must outlive the copy on the other device's stream.
    check(nrt_record_stream(src_c.data_ptr(), current_nrt_stream(dst.device().index())), "record_stream");
  }
  keep_math_bits(tmp, src_c);
  device_copy(dst, tmp);
}

// copy_ reaches _copy_from before ATen's copy builds its TensorIterator (a
// PrivateUse1 tensor on either side), so the source must be checked to
// broadcast to the destination here, with that iterator's messages: an empty
// copy returns early below and would otherwise accept any source.
void check_copy_shapes(const Tensor &dst, const Tensor &src) {
  if (dst.sizes() == src.sizes()) return;
  at::DimVector shape = at::infer_size_dimvector(dst.sizes(), src.sizes());
  TORCH_CHECK(dst.sizes() == c10::IntArrayRef(shape), "output with shape ", dst.sizes(),
              " doesn't match the broadcast shape ", c10::IntArrayRef(shape));
}

Tensor copy_from(const Tensor &self, const Tensor &dst, bool non_blocking) {
  TORCH_CHECK(self.defined() && dst.defined(), "copy_: tensors must be defined");
  check_copy_shapes(dst, self);
  // Conjugate/negative bits reach here (ops_complex.cpp lets _copy_from
  // fall through those keys): copies compare the bits of source and
  // destination and the device copy conjugates/negates as needed.
  if (self.is_complex() && !dst.is_complex() && dst.scalar_type() != at::kBool)
    TORCH_WARN_ONCE("Casting complex values to real discards the imaginary part");
  if (self.numel() == 0 || dst.numel() == 0) return dst;
  bool src_dev = self.device().type() == kNeuron, dst_dev = dst.device().type() == kNeuron;
  if (src_dev && dst_dev) {
    copy_device_to_device(self, dst);
  } else if (dst_dev) {
    TORCH_CHECK(self.is_cpu(), "copy to neuron supports CPU sources only, got ", self.device());
    copy_host_to_device(self, dst, non_blocking);
  } else {
    TORCH_CHECK(dst.is_cpu(), "copy from neuron supports CPU destinations only, got ", dst.device());
    copy_device_to_host(self, dst, non_blocking);
  }
  return dst;
}

Tensor copy_from_and_resize(const Tensor &self, const Tensor &dst) {
  if (dst.device().type() == kNeuron) {
    resize_(dst, self.sizes(), std::nullopt);
  } else {
    dst.resize_(self.sizes());
  }
  return copy_from(self, dst, false);
}

c10::Scalar local_scalar_dense(const Tensor &self) {
  TORCH_CHECK(self.numel() == 1, "a Tensor with ", self.numel(), " elements cannot be converted to Scalar");
  c10::DeviceGuard guard(self.device());
  alignas(16) unsigned char buf[16] = {0};
  check(nrt_memcpy(buf, self.const_data_ptr(), self.dtype().itemsize(), NRT_MEMCPY_DEVICE_TO_HOST,
                   current_nrt_stream(self.device().index())),
        "neuron item()");
  switch (self.scalar_type()) {
#define NEURON_SCALAR_CASE(type, name) \
  case c10::ScalarType::name: {        \
    type v;                            \
    std::memcpy(&v, buf, sizeof v);    \
    return c10::Scalar(v);             \
  }
    AT_FORALL_SCALAR_TYPES(NEURON_SCALAR_CASE)
    NEURON_SCALAR_CASE(bool, Bool)
    NEURON_SCALAR_CASE(c10::BFloat16, BFloat16)
    NEURON_SCALAR_CASE(c10::Half, Half)
    NEURON_SCALAR_CASE(c10::complex<c10::Half>, ComplexHalf)
    NEURON_SCALAR_CASE(c10::complex<float>, ComplexFloat)
    NEURON_SCALAR_CASE(c10::complex<double>, ComplexDouble)
#undef NEURON_SCALAR_CASE
    default:
      TORCH_CHECK(false, "item(): unsupported dtype ", self.scalar_type(), " on neuron");
  }
}

Tensor &fill_scalar_(Tensor &self, const c10::Scalar &value) {
  // The value converted to the tensor's type on the host exactly as ATen's
  // fill does (Scalar::to<T>: nonzero is true for bool, truncation for
  // integers, an error for a value the type cannot hold), and before
  // anything else, as the CPU converts it for an empty tensor too; so every
  // fill (full, fill_, masked_fill, index_fill, scatter value=) agrees with
  // the CPU. A complex value's imaginary part goes to the COMPLEX family's
  // fill (s0 + i s1).
  // One exception, the CPU's: its fill of a one-element tensor (scalar_fill,
  // which also makes every 0-d at::scalar_tensor, as where(cond, x, 3.5e38)
  // does) rounds a real value into float16/bfloat16 without the range check
  // (1e30 becomes inf), where its fill of more elements raises. Ops whose
  // CPU kernels check the value pass it through converted_scalar first.
  at::ScalarType st = self.scalar_type();
  nrt_scalar im, s;
  if (self.numel() == 1 && (st == at::kHalf || st == at::kBFloat16) && !value.isComplex()) {
    double v = value.toDouble();
    s.f = st == at::kHalf ? static_cast<double>(static_cast<at::Half>(v)) : static_cast<double>(static_cast<at::BFloat16>(v));
  } else {
    s = checked_scalar(value, st, &im);
  }
  if (self.numel() == 0) return self;
  c10::DeviceGuard guard(self.device());
  // Fill is idempotent: an expanded self (aliased elements) is allowed, as
  // ATen's fill_ skips the overlap check; every alias gets the same value.
  auto iter = at::TensorIteratorConfig()
                  .set_check_mem_overlap(false)
                  .add_output(self)
                  .resize_outputs(false)
                  .check_all_same_dtype(false)
                  .build();
  if (self.is_complex()) {
    launch_iter(iter, NRT_OP_FILL, {s, im});
  } else {
    launch_iter(iter, NRT_OP_FILL, {s});
  }
  return self;
}

Tensor &fill_tensor_(Tensor &self, const Tensor &value) {
  TORCH_CHECK(value.dim() == 0, "fill_ only supports 0-dimension value tensor but got tensor with ",
              value.dim(), " dimensions.");
  // A 0-d CPU value: the CPU's fill_ with a value tensor is a copy_, so it
  // converts as a cast does (float64 1e30 into float16 is inf, -1.0 into
  // uint8 is 255, a complex value loses its imaginary part) where a Scalar
  // fill would refuse the value. The cast is the CPU's own, of a host value.
  if (value.device().type() != kNeuron) return fill_scalar_(self, value.to(self.scalar_type()).item());
  if (self.numel() == 0) return self;
  c10::DeviceGuard guard(self.device());
  device_copy(self, value);
  return self;
}

Tensor &zero_(Tensor &self) { return fill_scalar_(self, 0); }

// param.data = neuron_tensor (what Module.to() does) must keep the Parameter
// object, or weights tied by sharing one Parameter (embeddings and LM heads)
// come apart on the device. c10 only knows CUDA-like dense backends, so say
// that dense CPU and neuron tensors can be shallow-copied into each other.
bool has_compatible_shallow_copy_type(const Tensor &self, const Tensor &from) {
  auto dense = [](const Tensor &t) {
    return t.layout() == c10::kStrided && (t.is_cpu() || t.device().type() == kNeuron);
  };
  if (dense(self) && dense(from)) return true;
  return self.unsafeGetTensorImpl()->key_set() == from.unsafeGetTensorImpl()->key_set();
}

// The side-stream idiom: a tensor used on another stream keeps its block
// from being reused until that stream's work enqueued so far has run.
void record_stream_fn(Tensor &self, c10::Stream stream) {
  TORCH_CHECK(stream.device_type() == kNeuron, "record_stream: expected a neuron stream, got ", stream);
  if (!self.storage().data()) return;  // nothing allocated
  check(nrt_record_stream(self.storage().mutable_data(), to_nrt_stream(stream)), "record_stream");
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  NEURON_IMPL(m, "record_stream", record_stream_fn);
  NEURON_IMPL(m, "empty.memory_format", empty_memory_format);
  NEURON_IMPL(m, "empty_strided", empty_strided);
  NEURON_IMPL(m, "as_strided", as_strided);
  NEURON_IMPL(m, "view", view);
  NEURON_IMPL(m, "unfold", unfold);
  NEURON_IMPL(m, "_reshape_alias", reshape_alias);
  NEURON_IMPL(m, "resize_", resize_);
  NEURON_IMPL(m, "set_.source_Storage_storage_offset", set_storage_offset_);
  NEURON_IMPL(m, "set_.source_Storage", set_storage_);
  NEURON_IMPL(m, "set_.source_Tensor", set_tensor_);
  NEURON_IMPL(m, "set_", set_empty_);
  NEURON_IMPL(m, "_copy_from", copy_from);
  NEURON_IMPL(m, "_copy_from_and_resize", copy_from_and_resize);
  NEURON_IMPL(m, "_local_scalar_dense", local_scalar_dense);
  NEURON_IMPL(m, "fill_.Scalar", fill_scalar_);
  NEURON_IMPL(m, "fill_.Tensor", fill_tensor_);
  NEURON_IMPL(m, "zero_", zero_);
  NEURON_IMPL(m, "_has_compatible_shallow_copy_type", has_compatible_shallow_copy_type);
}

}  // namespace torch_neuronx
