/* COPY_ORDERED: a copy whose source and destination share memory (x[:, 1:]
 * = x[:, :-1], a circular pad's wrap copied from the output it fills,
 * x.copy_(x.t())). The result depends on the order the elements are read
 * and written, and PyTorch's CPU defines it by its loop: TensorIterator's
 * dimension order (the glue passes it as is, sizes[0] fastest), one element
 * at a time, except that along a row where both sides are contiguous its
 * vector loop loads two vectors (p0 bytes) before storing them, and a
 * broadcast source (stride 0) is loaded once per row for those vector
 * blocks. ATen refuses the overlaps it can prove partial before (dense
 * tensors), so what reaches here are the layouts it lets through.
 *
 * Serial by definition; only overlapping copies take it (the glue checks
 * the storage ranges), so ordinary copies keep the parallel COPY. */
#include <string.h>
#include "kernels/common/common.h"
#include "kernels/index/index.h"

/* One row of n elements: the CPU's vectorized_loop (blocks of `block`
 * bytes while at least one whole block is left, then basic_loop) when both
 * sides are contiguous or the source is a broadcast scalar; otherwise
 * basic_loop alone. */
static void copy_row(char *out, const char *in, int64_t n, int64_t so, int64_t si, size_t esz, int64_t block) {
  int64_t i = 0;
  int64_t per = block > 0 ? block / (int64_t)esz : 0;
  bool vec = per > 0 && so == (int64_t)esz && (si == (int64_t)esz || si == 0);
  if (vec) {
    unsigned char buf[256]; /* one block (64 bytes from the CPU's loop; 256 at most) */
    if (si == 0) {
      unsigned char one[16];
      memcpy(one, in, esz); /* the broadcast value, read once for the blocks */
      for (int64_t k = 0; k < per; k++) memcpy(buf + k * esz, one, esz);
      for (; i + per <= n; i += per) memcpy(out + i * so, buf, (size_t)block);
    } else {
      for (; i + per <= n; i += per) {
        memcpy(buf, in + i * si, (size_t)block); /* both loads before the stores */
        memcpy(out + i * so, buf, (size_t)block);
      }
    }
  }
  for (; i < n; i++) memmove(out + i * so, in + i * si, esz);
}

nrt_status nrt_index_copy_ordered(const nrt_launch *l) {
  const nrt_operand *o = &l->operands[0], *s = &l->operands[1];
  size_t esz = nrt_dtype_size(o->dtype);
  int64_t block = l->params[0];
  if (o->dtype != s->dtype || esz == 0 || esz > 16 || block < 0 || block > 256 || (block > 0 && block % esz))
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "COPY_ORDERED: one dtype and a block of at most 256 bytes");
  int64_t outer = 1;
  for (int d = 1; d < l->ndim; d++) outer *= l->sizes[d];
  int64_t n = l->ndim > 0 ? l->sizes[0] : 1;
  if (n == 0 || outer == 0) return NRT_SUCCESS;
  int64_t so = l->ndim > 0 ? o->strides[0] : 0, si = l->ndim > 0 ? s->strides[0] : 0;
  for (int64_t r = 0; r < outer; r++) {
    char *po = o->data;
    const char *ps = s->data;
    int64_t rem = r;
    for (int d = 1; d < l->ndim; d++) {
      int64_t i = rem % l->sizes[d];
      rem /= l->sizes[d];
      po += i * o->strides[d];
      ps += i * s->strides[d];
    }
    copy_row(po, ps, n, so, si, esz, block);
  }
  return NRT_SUCCESS;
}
