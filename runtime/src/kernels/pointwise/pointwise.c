/* The pointwise engine: N-d strided iteration shared by every elementwise
 * op. The op families (unary_math.c, binary.c, activations.c, random.c)
 * only supply block functions over converted, contiguous buffers.
 *
 * Fast path: dims are ordered by stride (smallest innermost) and collapsed
 * where every operand's strides allow; the element range is split across
 * the kernel pool, and each row of the innermost dim is processed in
 * blocks of NRT_BLOCK: inputs are converted into small buffers (or used in
 * place when they already are unit-stride float32 / int64), the block
 * function runs, and the result is converted into the output. Transposed
 * operands are walked in square tiles instead of rows.
 *
 * Random ops number elements row-major over launch->sizes as given (the
 * last dim fastest); they keep the given dim order so that every element's
 * number, and so its value, does not depend on the traversal.
 *
 * The reference path walks one element at a time over the original shape
 * on the calling thread, converting through dtype.c. */
#pragma GCC optimize("O3,no-trapping-math,no-math-errno")
#include <stdatomic.h>
#include <stdlib.h>
#include "kernels/pointwise/pointwise.h"

/* Elements per parallel chunk: large enough to amortise the hand-off. */
#define PW_GRAIN 32768

typedef struct pw_plan {
  nrt_pw_row row; /* what a row needs: kernel, domain, dtypes, inner strides */
  const nrt_pw_kernel *k;
  bool copy;
  int nops;
  int ndim;
  int64_t sizes[NRT_MAX_DIMS];
  int64_t strides[NRT_MAX_OPERANDS][NRT_MAX_DIMS];
  char *data[NRT_MAX_OPERANDS];
  atomic_int failed;
} pw_plan;

const nrt_pw_kernel *nrt_pw_lookup(nrt_op op) {
  const nrt_pw_kernel *k = nrt_pw_unary_kernel(op);
  if (!k) k = nrt_pw_binary_kernel(op);
  if (!k) k = nrt_pw_activation_kernel(op);
  if (!k) k = nrt_pw_random_kernel(op);
  if (!k) k = nrt_pw_special_kernel(op);
  if (!k) k = nrt_pw_nn_kernel(op);
  if (!k) k = nrt_pw_distributions_kernel(op);
  return k;
}

/* Orders dims outermost-first by stride, the way TensorIterator does
 * (the glue hands us TensorIterator's fastest-first order; tests use
 * row-major): a dim goes inside another when its stride is smaller for
 * the first operand where both are nonzero. Ties keep the given order. */
static int order_dims(const nrt_launch *l, int nops, bool keep_order, int *perm) {
  int n = 0;
  for (int d = 0; d < l->ndim; d++)
    if (l->sizes[d] != 1) perm[n++] = d; /* size-1 strides are arbitrary */
  if (keep_order) return n;
  for (int i = 1; i < n; i++) {
    for (int j = i; j > 0; j--) {
      int outer = perm[j - 1], inner = perm[j];
      bool swap = false;
      for (int k = 0; k < nops; k++) {
        int64_t so = llabs(l->operands[k].strides[outer]), si = llabs(l->operands[k].strides[inner]);
        if (so == 0 || si == 0 || so == si) continue;
        swap = si > so;
        break;
      }
      if (!swap) break;
      perm[j - 1] = inner;
      perm[j] = outer;
    }
  }
  return n;
}

/* Merges a dim into its inner neighbour when, for every operand, stepping
 * the outer dim equals stepping over the whole inner one. Merging keeps
 * the row-major order of the ordered dims, so random ops (given order)
 * number elements exactly as the reference loop does. Returns the
 * collapsed ndim (>= 1). */
static int collapse(const nrt_launch *l, int nops, const int *perm, int nperm, int64_t *sizes,
                    int64_t strides[][NRT_MAX_DIMS]) {
  int64_t rs[NRT_MAX_DIMS], rst[NRT_MAX_OPERANDS][NRT_MAX_DIMS]; /* innermost first */
  int n = 0;
  for (int i = nperm - 1; i >= 0; i--) {
    int d = perm[i];
    int64_t sz = l->sizes[d];
    bool merge = n > 0;
    for (int k = 0; merge && k < nops; k++)
      merge = l->operands[k].strides[d] == rst[k][n - 1] * rs[n - 1];
    if (merge) {
      rs[n - 1] *= sz;
    } else {
      rs[n] = sz;
      for (int k = 0; k < nops; k++) rst[k][n] = l->operands[k].strides[d];
      n++;
    }
  }
  if (n == 0) {
    rs[0] = 1;
    for (int k = 0; k < nops; k++) rst[k][0] = 0;
    n = 1;
  }
  for (int d = 0; d < n; d++) {
    sizes[d] = rs[n - 1 - d];
    for (int k = 0; k < nops; k++) strides[k][d] = rst[k][n - 1 - d];
  }
  return n;
}

/* ---- COPY: exact conversions between any two dtypes -------------------- */

static void copy_same(char *dst, int64_t ds, const char *src, int64_t ss, size_t esz, int64_t n) {
  if (ds == (int64_t)esz && ss == (int64_t)esz) {
    memmove(dst, src, esz * (size_t)n);
    return;
  }
  switch (esz) {
  case 1: for (int64_t i = 0; i < n; i++) dst[i * ds] = src[i * ss]; break;
  case 2: for (int64_t i = 0; i < n; i++) *(uint16_t *)(dst + i * ds) = *(const uint16_t *)(src + i * ss); break;
  case 4: for (int64_t i = 0; i < n; i++) *(uint32_t *)(dst + i * ds) = *(const uint32_t *)(src + i * ss); break;
  default: for (int64_t i = 0; i < n; i++) *(uint64_t *)(dst + i * ds) = *(const uint64_t *)(src + i * ss); break;
  }
}

/* Different dtypes go through the narrowest exact intermediate: int64 for
 * integer sources (no float rounding of large int64), double for float64
 * sources, float for the other floating sources; uint64 to floating
 * converts directly. */
static void copy_convert(char *dst, int64_t ds, nrt_dtype ddt, const char *src, int64_t ss,
                         nrt_dtype sdt, int64_t n) {
  union { float f[NRT_BLOCK]; double d[NRT_BLOCK]; int64_t i[NRT_BLOCK]; } buf;
  for (int64_t j = 0; j < n; j += NRT_BLOCK) {
    int64_t m = n - j < NRT_BLOCK ? n - j : NRT_BLOCK;
    const char *s = src + j * ss;
    char *d = dst + j * ds;
    if (sdt == NRT_UINT64 && nrt_dtype_is_floating(ddt)) {
      /* uint64 values of 2^63 and above have no int64 form: convert them
       * directly, rounding once as static_cast does. */
      if (ddt == NRT_FLOAT64) {
        nrt_load_f64(buf.d, s, ss, sdt, m);
        nrt_store_f64(d, ds, ddt, buf.d, m);
      } else {
        nrt_load_f32(buf.f, s, ss, sdt, m);
        nrt_store_f32(d, ds, ddt, buf.f, m);
      }
    } else if (nrt_dtype_is_integral(sdt)) {
      nrt_load_i64(buf.i, s, ss, sdt, m);
      nrt_store_i64(d, ds, ddt, buf.i, m);
    } else if (sdt == NRT_FLOAT64) {
      nrt_load_f64(buf.d, s, ss, sdt, m);
      nrt_store_f64(d, ds, ddt, buf.d, m);
    } else {
      nrt_load_f32(buf.f, s, ss, sdt, m);
      nrt_store_f32(d, ds, ddt, buf.f, m);
    }
  }
}

static void copy_row(const nrt_pw_row *r, char *const *ptr, int64_t n) {
  if (r->dt[0] == r->dt[1])
    copy_same(ptr[0], r->st[0], ptr[1], r->st[1], nrt_dtype_size(r->dt[0]), n);
  else
    copy_convert(ptr[0], r->st[0], r->dt[0], ptr[1], r->st[1], r->dt[1], n);
}

/* ---- compute rows --------------------------------------------------------- */

/* One row of n elements, a block at a time: inputs are used in place when
 * they already hold the domain's type (float32 / int64) at unit stride,
 * else converted; so is the output. */
/* Integer results wrap in the compute dtype before they convert to an
 * output of another dtype: PyTorch computes an int32 op in int32 and casts
 * the result into a float32 out= (1 - 2147483646 * 3 is -2147483644 as
 * int32, then a float; bool True + True is True, 1.0); the int64 domain
 * only holds the values. Whether a
 * launch needs it: a compute dtype narrower than int64 and an output of
 * another dtype (a same-dtype store wraps by itself). */
static bool wraps_to_compute(const nrt_launch *l, nrt_dtype out) {
  switch (l->compute_dtype) {
  case NRT_BOOL: case NRT_INT8: case NRT_UINT8: case NRT_INT16: case NRT_UINT16: case NRT_INT32: case NRT_UINT32:
    return out != l->compute_dtype;
  default: return false;
  }
}

/* The same for float16/bfloat16 results: TensorIterator computes in the
 * common dtype and casts that into an out= of another dtype, so a bfloat16
 * add into a float32 out= gives bfloat16 values (1 + 0.005859375 is
 * 1.0078125, not 1.005859375). */
static bool rounds_to_compute(const nrt_launch *l, nrt_dtype out) {
  return (l->compute_dtype == NRT_FLOAT16 || l->compute_dtype == NRT_BFLOAT16) && out != l->compute_dtype;
}

static void wrap_to(int64_t *v, int64_t m, nrt_dtype dt) {
  switch (dt) {
  case NRT_BOOL: for (int64_t i = 0; i < m; i++) v[i] = v[i] != 0; break; /* True + True is True */
  case NRT_INT8: for (int64_t i = 0; i < m; i++) v[i] = (int8_t)(uint8_t)(uint64_t)v[i]; break;
  case NRT_UINT8: for (int64_t i = 0; i < m; i++) v[i] = (uint8_t)(uint64_t)v[i]; break;
  case NRT_INT16: for (int64_t i = 0; i < m; i++) v[i] = (int16_t)(uint16_t)(uint64_t)v[i]; break;
  case NRT_UINT16: for (int64_t i = 0; i < m; i++) v[i] = (uint16_t)(uint64_t)v[i]; break;
  case NRT_INT32: for (int64_t i = 0; i < m; i++) v[i] = (int32_t)(uint32_t)(uint64_t)v[i]; break;
  case NRT_UINT32: for (int64_t i = 0; i < m; i++) v[i] = (uint32_t)(uint64_t)v[i]; break;
  default: break;
  }
}

/* Whether every value of integer (or bool) dtype `in` is a value of `as`,
 * so that converting it into `as` changes nothing. Floating inputs of an
 * integer-domain launch keep their loaded value (no TensorIterator
 * promotion gives an integer common dtype over a floating input). */
static bool int_fits(nrt_dtype in, nrt_dtype as) {
  if (in == as || nrt_dtype_is_floating(in) || nrt_dtype_is_complex(in)) return true;
  if (in == NRT_BOOL) return true; /* 0 and 1 are values of every integer dtype and of bool */
  switch (as) {
  case NRT_BOOL: return false;
  case NRT_INT8: return false;
  case NRT_UINT8: return false;
  case NRT_INT16: return in == NRT_INT8 || in == NRT_UINT8;
  case NRT_UINT16: return in == NRT_UINT8;
  case NRT_INT32: return in == NRT_INT8 || in == NRT_UINT8 || in == NRT_INT16 || in == NRT_UINT16;
  case NRT_UINT32: return in == NRT_UINT8 || in == NRT_UINT16;
  default: return true; /* int64 / uint64: the domain holds every value as loaded */
  }
}

/* Whether every value of `in` is a float16 / bfloat16 value when the
 * compute dtype is one of those (the float32 and float64 domains hold
 * what they load). */
static bool float_fits(nrt_dtype in, nrt_dtype as) {
  if (as != NRT_FLOAT16 && as != NRT_BFLOAT16) return true;
  return in == as || in == NRT_BOOL || in == NRT_INT8 || in == NRT_UINT8 || nrt_dtype_is_complex(in);
}

/* ATen's CPU mul and div kernels (mul_cpu_reduced_float,
 * div_cpu_reduced_float, div_trunc/div_floor_cpu_reduced_float) read a
 * broadcast one-element second input of a float16/bfloat16 op at its
 * original value in float32 (original_scalar_value<opmath_t>), not
 * converted to the op's dtype: float16 x * 0-d float32 2049 multiplies by
 * 2049, x - 0-d 2049 subtracts 2048. */
static bool opmath_scalar_operand(const nrt_launch *l, int o) {
  if (o != l->noutputs + 1 || (l->compute_dtype != NRT_FLOAT16 && l->compute_dtype != NRT_BFLOAT16)) return false;
  if (l->op != NRT_OP_MUL && l->op != NRT_OP_DIV && l->op != NRT_OP_DIV_TRUNC && l->op != NRT_OP_DIV_FLOOR)
    return false;
  return nrt_pw_broadcast_scalar(l, o);
}

static void round_to(float *v, int64_t m, nrt_dtype dt) {
  if (dt == NRT_FLOAT16)
    for (int64_t i = 0; i < m; i++) v[i] = nrt_k_f16_to_f32(nrt_k_f32_to_f16(v[i]));
  else if (dt == NRT_BFLOAT16)
    for (int64_t i = 0; i < m; i++) v[i] = nrt_k_bf16_to_f32(nrt_k_f32_to_bf16(v[i]));
}

static int compute_row(const nrt_pw_row *p, char *const *ptr, int64_t n, int64_t index) {
  union {
    float f[4][NRT_BLOCK];
    int64_t i[4][NRT_BLOCK];
  } buf;
  int nin = p->nops - 1;
  bool fl = p->fdomain;
  nrt_dtype own = fl ? NRT_FLOAT32 : NRT_INT64;
  int64_t es = fl ? 4 : 8;
  const int64_t *st = p->st;
  bool out_direct = p->dt[0] == own && st[0] == es;
  bool wrap = !fl && wraps_to_compute(p->l, p->dt[0]);
  bool round_out = fl && rounds_to_compute(p->l, p->dt[0]);
  for (int64_t j = 0; j < n; j += NRT_BLOCK) {
    int64_t m = n - j < NRT_BLOCK ? n - j : NRT_BLOCK;
    const void *in[3] = {NULL, NULL, NULL};
    for (int k = 1; k <= nin; k++) {
      const char *src = ptr[k] + j * st[k];
      if (p->dt[k] == own && st[k] == es && !p->cast_in[k]) {
        in[k - 1] = src;
      } else {
        if (fl) {
          nrt_load_f32(buf.f[k], src, st[k], p->dt[k], m);
          if (p->cast_in[k]) round_to(buf.f[k], m, p->l->compute_dtype);
        } else {
          nrt_load_i64(buf.i[k], src, st[k], p->dt[k], m);
          if (p->cast_in[k]) wrap_to(buf.i[k], m, p->l->compute_dtype);
        }
        in[k - 1] = fl ? (const void *)buf.f[k] : (const void *)buf.i[k];
      }
    }
    char *dst = ptr[0] + j * st[0];
    void *out = out_direct ? (void *)dst : fl ? (void *)buf.f[0] : (void *)buf.i[0];
    if (fl) {
      if (p->k->rng3_f32) p->k->rng3_f32(out, in[0], in[1], in[2], m, index + j, p->l);
      else if (p->k->rng_f32) p->k->rng_f32(out, in[0], m, index + j, p->l);
      else p->f32(out, in[0], in[1], in[2], m, p->l);
      if (round_out) round_to(out, m, p->l->compute_dtype);
      if (!out_direct) nrt_store_f32(dst, st[0], p->dt[0], out, m);
      continue;
    }
    if (p->k->rng_i64) {
      p->k->rng_i64(out, m, index + j, p->l);
    } else if (p->k->i64(out, in[0], in[1], in[2], m, p->l)) {
      return 1;
    }
    if (wrap) wrap_to(out, m, p->l->compute_dtype);
    if (!out_direct) nrt_store_i64(dst, st[0], p->dt[0], out, m);
  }
  return 0;
}

/* The shared row entry (fused.c): the same loop the engine runs. */
int nrt_pw_row_run(const nrt_pw_row *row, char *const *ptr, int64_t n, int64_t index) {
  if (row->copy) {
    copy_row(row, ptr, n);
    return 0;
  }
  return compute_row(row, ptr, n, index);
}

static void row_run(pw_plan *p, char *const *ptr, int64_t n, int64_t index) {
  if (nrt_pw_row_run(&p->row, ptr, n, index))
    atomic_store_explicit(&p->failed, 1, memory_order_relaxed);
}

static void pw_range(void *ctx, int64_t begin, int64_t end) {
  pw_plan *p = ctx;
  int nd = p->ndim, nops = p->nops;
  int64_t idx[NRT_MAX_DIMS];
  int64_t rem = begin;
  for (int d = nd - 1; d >= 0; d--) {
    idx[d] = rem % p->sizes[d];
    rem /= p->sizes[d];
  }
  char *row[NRT_MAX_OPERANDS]; /* operand pointers at inner index 0 */
  for (int k = 0; k < nops; k++) {
    row[k] = p->data[k];
    for (int d = 0; d < nd - 1; d++) row[k] += idx[d] * p->strides[k][d];
  }
  int64_t inner = p->sizes[nd - 1], first = idx[nd - 1], pos = begin;
  while (pos < end) {
    int64_t n = inner - first < end - pos ? inner - first : end - pos;
    char *ptr[NRT_MAX_OPERANDS];
    for (int k = 0; k < nops; k++) ptr[k] = row[k] + first * p->strides[k][nd - 1];
    row_run(p, ptr, n, pos);
    if (atomic_load_explicit(&p->failed, memory_order_relaxed)) return;
    pos += n;
    first = 0;
    for (int d = nd - 2; d >= 0; d--) { /* odometer step over the outer dims */
      for (int k = 0; k < nops; k++) row[k] += p->strides[k][d];
      if (++idx[d] < p->sizes[d]) break;
      for (int k = 0; k < nops; k++) row[k] -= p->strides[k][d] * p->sizes[d];
      idx[d] = 0;
    }
  }
}

/* ---- transposes: tiles through an L1 buffer ------------------------------------
 * When an input's fastest dim is the output's second-fastest (x + y.t(),
 * a transposed copy), walking output rows reads that input one element per
 * cache line and page. Instead the launch runs in tiles of TILE x TILE over
 * the two inner dims: each transposed input's tile is first copied into a
 * buffer along its own rows, and the tile's rows then run as ordinary
 * unit-stride rows reading the buffer. A tile's operands (up to 4 x 256 KiB
 * of float32) stay in L2; what sets the speed is how long the runs of
 * consecutive memory are on both sides (TILE elements: 1 KiB of float32,
 * where 32 x 32 tiles had 128-byte runs, a TLB miss and a DRAM page per
 * run). Tiles advance along the output's rows. */
#ifndef TILE_R
#define TILE_R 256
#endif
#ifndef TILE_C
#define TILE_C 256
#endif

static bool transposed_operand(const pw_plan *p, int k) {
  int nd = p->ndim;
  int64_t inner = llabs(p->strides[k][nd - 1]), outer = llabs(p->strides[k][nd - 2]);
  return inner >= 256 && outer > 0 && outer <= 16;
}

static bool wants_tiles(const pw_plan *p) {
  int nd = p->ndim;
  if (nd < 2 || p->sizes[nd - 1] < 16 || p->sizes[nd - 2] < 16) return false;
  for (int k = 1; k < p->nops; k++)
    if (transposed_operand(p, k)) return true;
  return false;
}

/* buf[r][c] = element (r, c) of a rows x cols tile at src, whose rows step
 * by rs bytes and columns by cs (|rs| small: the input's own rows run down
 * the tile's columns, so each column is a run of consecutive memory).
 * Sixteen columns at a time: sixteen runs are read side by side, so their
 * cache misses overlap instead of one run's misses waiting in turn, and
 * each buffer row gets 16 consecutive elements per step. */
#define GATHER_COLS 16
#define GATHER(T)                                                                   \
  do {                                                                              \
    T *d = (T *)buf;                                                                \
    int64_t c = 0;                                                                  \
    for (; c + GATHER_COLS <= cols; c += GATHER_COLS) {                             \
      const char *s = src + c * cs;                                                 \
      for (int64_t r = 0; r < rows; r++)                                            \
        for (int k = 0; k < GATHER_COLS; k++)                                       \
          d[r * TILE_C + c + k] = *(const T *)(s + k * cs + r * rs);                \
    }                                                                               \
    for (; c < cols; c++)                                                           \
      for (int64_t r = 0; r < rows; r++) d[r * TILE_C + c] = *(const T *)(src + c * cs + r * rs); \
  } while (0)
static void tile_gather(char *buf, const char *src, int64_t rs, int64_t cs, int64_t rows, int64_t cols,
                        size_t es) {
  switch (es) {
  case 1: GATHER(uint8_t); break;
  case 2: GATHER(uint16_t); break;
  case 4: GATHER(uint32_t); break;
  default: GATHER(uint64_t); break;
  }
}

static void pw_tiles(void *ctx, int64_t begin, int64_t end) {
  pw_plan *p = ctx;
  int nd = p->ndim, nops = p->nops;
  int64_t rows = p->sizes[nd - 2], cols = p->sizes[nd - 1];
  int64_t rt = nrt_cdiv(rows, TILE_R), ct = nrt_cdiv(cols, TILE_C);
  nrt_pw_row row = p->row; /* transposed inputs read their buffer at unit stride */
  bool gathered[NRT_MAX_OPERANDS] = {false};
  char *tbuf[NRT_MAX_OPERANDS] = {NULL};
  for (int k = 1; k < nops; k++) {
    if (!transposed_operand(p, k)) continue;
    size_t es = nrt_dtype_size(row.dt[k]);
    tbuf[k] = malloc((size_t)TILE_R * TILE_C * es);
    if (!tbuf[k]) continue; /* out of memory: this input is read in place, strided */
    gathered[k] = true;
    row.st[k] = (int64_t)es;
  }
  for (int64_t t = begin; t < end; t++) {
    int64_t tj = t % ct, ti = (t / ct) % rt, outer = t / ct / rt;
    char *base[NRT_MAX_OPERANDS];
    for (int k = 0; k < nops; k++) base[k] = p->data[k];
    for (int d = nd - 3; d >= 0; d--) {
      int64_t i = outer % p->sizes[d];
      outer /= p->sizes[d];
      for (int k = 0; k < nops; k++) base[k] += i * p->strides[k][d];
    }
    int64_t r0 = ti * TILE_R, c0 = tj * TILE_C;
    int64_t nr = rows - r0 < TILE_R ? rows - r0 : TILE_R, nc = cols - c0 < TILE_C ? cols - c0 : TILE_C;
    for (int k = 1; k < nops; k++)
      if (gathered[k])
        tile_gather(tbuf[k], base[k] + r0 * p->strides[k][nd - 2] + c0 * p->strides[k][nd - 1],
                    p->strides[k][nd - 2], p->strides[k][nd - 1], nr, nc, nrt_dtype_size(row.dt[k]));
    for (int64_t r = 0; r < nr; r++) {
      char *ptr[NRT_MAX_OPERANDS];
      for (int k = 0; k < nops; k++)
        ptr[k] = gathered[k] ? tbuf[k] + r * TILE_C * row.st[k]
                             : base[k] + (r0 + r) * p->strides[k][nd - 2] + c0 * p->strides[k][nd - 1];
      if (nrt_pw_row_run(&row, ptr, nc, 0)) {
        atomic_store_explicit(&p->failed, 1, memory_order_relaxed);
        goto done;
      }
    }
  }
done:
  for (int k = 1; k < nops; k++) free(tbuf[k]);
}

/* ---- reference: one element at a time ------------------------------------ */

static float ref_load_f32(const char *src, nrt_dtype dt) {
  /* Integers convert straight to float (no double rounding of int64). */
  return nrt_dtype_is_integral(dt) ? (float)nrt_ref_load_i64(src, dt)
                                   : (float)nrt_ref_load_f64(src, dt);
}

/* One element of a launch whose operand pointers are ptr (what the
 * reference loop and the fused engine's reference path both run). */
nrt_status nrt_pw_ref_element(const nrt_pw_row *r, char *const *ptr, int64_t lin) {
  const nrt_launch *l = r->l;
  const nrt_pw_kernel *k = r->k;
  int nops = r->nops;
  nrt_dtype odt = r->dt[0];
  if (r->copy) {
    nrt_dtype sdt = r->dt[1];
    if (sdt == odt) memcpy(ptr[0], ptr[1], nrt_dtype_size(sdt));
    else if (nrt_dtype_is_integral(sdt)) nrt_ref_store_i64(ptr[0], odt, nrt_ref_load_i64(ptr[1], sdt));
    else nrt_ref_store_f64(ptr[0], odt, nrt_ref_load_f64(ptr[1], sdt));
  } else if (r->fdomain) {
    nrt_pw_f32_fn f32 = k->f32_ref ? k->f32_ref : k->f32;
    float in[3] = {0, 0, 0}, out = 0;
    for (int o = 1; o < nops; o++) {
      in[o - 1] = ref_load_f32(ptr[o], r->dt[o]);
      if (r->cast_in[o]) round_to(&in[o - 1], 1, l->compute_dtype);
    }
    if (k->rng3_f32) k->rng3_f32(&out, &in[0], &in[1], &in[2], 1, lin, l);
    else if (k->rng_f32) k->rng_f32(&out, &in[0], 1, lin, l);
    else f32(&out, &in[0], &in[1], &in[2], 1, l);
    if (rounds_to_compute(l, odt)) round_to(&out, 1, l->compute_dtype);
    nrt_ref_store_f64(ptr[0], odt, out);
  } else {
    int64_t in[3] = {0, 0, 0}, out = 0;
    for (int o = 1; o < nops; o++) {
      in[o - 1] = nrt_ref_load_i64(ptr[o], r->dt[o]);
      if (r->cast_in[o]) wrap_to(&in[o - 1], 1, l->compute_dtype);
    }
    if (k->rng_i64) k->rng_i64(&out, 1, lin, l);
    else if (k->i64(&out, &in[0], &in[1], &in[2], 1, l)) return NRT_ERROR_INVALID_ARGUMENT;
    if (wraps_to_compute(l, odt)) wrap_to(&out, 1, l->compute_dtype);
    nrt_ref_store_i64(ptr[0], odt, out);
  }
  return NRT_SUCCESS;
}

static nrt_status pw_reference(const nrt_pw_row *r, int64_t numel) {
  const nrt_launch *l = r->l;
  int nops = r->nops;
  for (int64_t lin = 0; lin < numel; lin++) {
    char *ptr[NRT_MAX_OPERANDS];
    for (int o = 0; o < nops; o++) ptr[o] = l->operands[o].data;
    int64_t rem = lin;
    for (int d = l->ndim - 1; d >= 0; d--) {
      int64_t i = rem % l->sizes[d];
      rem /= l->sizes[d];
      for (int o = 0; o < nops; o++) ptr[o] += i * l->operands[o].strides[d];
    }
    nrt_status st = nrt_pw_ref_element(r, ptr, lin);
    if (st != NRT_SUCCESS) return st;
  }
  return NRT_SUCCESS;
}

/* ---- entry ----------------------------------------------------------------- */

nrt_status nrt_pw_prepare(const nrt_launch *l, const nrt_pw_kernel **out_kernel) {
  bool copy = l->op == NRT_OP_COPY;
  bool fdomain = nrt_dtype_is_floating(l->compute_dtype);
  const nrt_pw_kernel *k = copy ? NULL : nrt_pw_lookup(l->op);
  *out_kernel = k;
  if (l->noutputs != 1 || (!copy && !k))
    return nrt_kernel_fail(NRT_ERROR_UNSUPPORTED,
                           "%s: no pointwise kernel with %d outputs", nrt_op_name(l->op), l->noutputs);
  if (!copy && (fdomain ? !(k->f32 || k->rng_f32 || k->rng3_f32) : !(k->i64 || k->rng_i64)))
    return nrt_kernel_fail(NRT_ERROR_UNSUPPORTED, "%s: not supported for %s", nrt_op_name(l->op),
                           nrt_dtype_name(l->compute_dtype));
  return NRT_SUCCESS;
}

void nrt_pw_row_init(nrt_pw_row *r, const nrt_launch *l, const nrt_pw_kernel *k,
                     const int64_t *inner_strides) {
  memset(r, 0, sizeof *r);
  r->l = l;
  r->k = k;
  r->copy = l->op == NRT_OP_COPY;
  r->fdomain = nrt_dtype_is_floating(l->compute_dtype);
  r->nops = l->noutputs + l->ninputs;
  if (k) r->f32 = (k->f32_avx512 && nrt_kernels_isa() >= NRT_ISA_AVX512) ? k->f32_avx512 : k->f32;
  for (int o = 0; o < r->nops; o++) {
    r->dt[o] = l->operands[o].dtype;
    r->st[o] = inner_strides ? inner_strides[o] : 0;
    /* Not for CPU scalars carried inline (the glue stores them in the
     * op's math type on purpose: float32 for a float16 op), nor for random
     * ops (a bernoulli probability is read in its own dtype), nor where the
     * CPU's kernel reads the operand in float32 (opmath_scalar_operand). */
    r->cast_in[o] = !r->copy && o >= l->noutputs && l->operands[o].inline_slot == 0 && !nrt_pw_is_random(k) &&
                    !(r->fdomain ? float_fits(r->dt[o], l->compute_dtype) || opmath_scalar_operand(l, o)
                                 : int_fits(r->dt[o], l->compute_dtype));
  }
}

nrt_status nrt_pointwise_execute(const nrt_launch *l) {
  const nrt_pw_kernel *k;
  nrt_status st = nrt_pw_prepare(l, &k);
  if (st != NRT_SUCCESS) return st;
  int64_t numel = 1;
  for (int d = 0; d < l->ndim; d++) numel *= l->sizes[d];
  if (numel == 0) return NRT_SUCCESS;

  if (nrt_kernels_reference()) {
    nrt_pw_row r;
    nrt_pw_row_init(&r, l, k, NULL);
    st = pw_reference(&r, numel);
  } else {
    pw_plan p = {.k = k, .copy = l->op == NRT_OP_COPY, .nops = l->noutputs + l->ninputs};
    for (int o = 0; o < p.nops; o++) p.data[o] = l->operands[o].data;
    atomic_init(&p.failed, 0);
    int perm[NRT_MAX_DIMS];
    bool random = nrt_pw_is_random(k);
    /* Random ops number elements row-major over the given shape. */
    int nperm = order_dims(l, p.nops, random, perm);
    p.ndim = collapse(l, p.nops, perm, nperm, p.sizes, p.strides);
    int64_t inner[NRT_MAX_OPERANDS];
    for (int o = 0; o < p.nops; o++) inner[o] = p.strides[o][p.ndim - 1];
    nrt_pw_row_init(&p.row, l, k, inner);
    if (!random && wants_tiles(&p)) {
      int64_t ntiles = numel / (p.sizes[p.ndim - 2] * p.sizes[p.ndim - 1]) *
                       nrt_cdiv(p.sizes[p.ndim - 2], TILE_R) * nrt_cdiv(p.sizes[p.ndim - 1], TILE_C);
      nrt_parallel_for(ntiles, 1, pw_tiles, &p); /* a tile is 64K elements */
    } else {
      nrt_parallel_for(numel, PW_GRAIN, pw_range, &p);
    }
    if (atomic_load(&p.failed)) st = NRT_ERROR_INVALID_ARGUMENT;
  }
  /* The only failure a block reports is integer division by zero; the
   * message is PyTorch's, so the glue can raise the same error. */
  if (st != NRT_SUCCESS) return nrt_kernel_fail(st, "ZeroDivisionError");
  return NRT_SUCCESS;
}
