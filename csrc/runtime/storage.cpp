// Resizing a device storage (tensor.resize_ beyond its bytes, and
// PrivateUse1HooksInterface::resizePrivateUse1Bytes): a new block, the old
// bytes copied in stream order, never by the host thread.
#include <algorithm>

#include <c10/core/Storage.h>
#include <c10/core/StorageImpl.h>

#include "runtime/device.h"

namespace torch_neuronx {

void resize_storage_bytes(const c10::Storage &storage, size_t newsize) {
  c10::StorageImpl *impl = storage.unsafeGetStorageImpl();
  TORCH_CHECK(impl->resizable(), "Trying to resize storage that is not resizable");
  c10::DataPtr fresh = device_allocator()->allocate(newsize);
  size_t keep = std::min(newsize, impl->nbytes());
  if (keep > 0) {
    check(nrt_memcpy_async(fresh.get(), impl->data(), keep, NRT_MEMCPY_DEVICE_TO_DEVICE,
                           current_nrt_stream(-1)),
          "neuron storage resize");
  }
  impl->set_data_ptr_noswap(std::move(fresh));
  impl->set_nbytes(newsize);
}

}  // namespace torch_neuronx
