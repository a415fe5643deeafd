/* Grid sampling (GRID_SAMPLE, GRID_SAMPLE_BACKWARD; nrt/ops/resample.h):
 * torch.nn.functional.grid_sample's kernels, 2-d (bilinear, nearest,
 * bicubic) and 3-d (trilinear, nearest), padding zeros / border /
 * reflection, align_corners either way.
 *
 * Coordinate rules are ATen's (GridSampler.h), computed in float32: a grid
 * value is unnormalised to a pixel coordinate, then clipped or reflected
 * by the padding mode (bicubic applies padding per tap instead); taps
 * outside the input read 0. A 2-d launch is the 3-d computation with a
 * depth of one and a z coordinate of exactly 0, whose second depth taps
 * fall outside the input and so contribute nothing.
 *
 * The kernel is a plain scalar loop (there is no separate fast path to
 * check against a reference). Forward splits output points over threads;
 * backward gives each batch element to one task, which accumulates that
 * element's grad_input planes in a float32 buffer in point order and writes
 * each grad_grid entry from one sum over channels: deterministic at any
 * thread count. */
#pragma GCC optimize("O3,no-math-errno")
#include <stdlib.h>
#include "kernels/resample/resample.h"

typedef struct grid_job {
  const nrt_launch *l;
  nrt_resample_geom g;
  int interp, pad, nsp;
  bool align, want_gx;
  const nrt_operand *y, *x, *grid, *gx, *gg, *gy; /* NULL where absent */
  _Atomic int failed;
} grid_job;

/* ---- coordinates ----------------------------------------------------------- */

static float unnormalize(float c, int64_t size, bool align, float *mult) {
  if (align) {
    *mult = (float)(size - 1) / 2;
    return ((c + 1) / 2) * (float)(size - 1);
  }
  *mult = (float)size / 2;
  return ((c + 1) * (float)size - 1) / 2;
}

static float clip(float v, int64_t size, float *grad) {
  if (v <= 0.0f) { /* NaN lands here too: clipped to 0 as ATen's fmin/fmax do */
    *grad = 0.0f;
    return 0.0f;
  }
  float hi = (float)(size - 1);
  if (v >= hi) {
    *grad = 0.0f;
    return hi;
  }
  *grad = 1.0f;
  return v;
}

/* Reflects v into [twice_lo / 2, twice_hi / 2]; *grad is the sign of dv. */
static float reflect(float v, int64_t twice_lo, int64_t twice_hi, float *grad) {
  if (twice_lo == twice_hi) {
    *grad = 0.0f;
    return 0.0f;
  }
  float lo = (float)twice_lo / 2, span = (float)(twice_hi - twice_lo) / 2, sign = 1.0f;
  v -= lo;
  if (v < 0.0f) {
    sign = -1.0f;
    v = -v;
  }
  float extra = fmodf(v, span);
  int64_t flips = (int64_t)floorf(v / span);
  if (flips % 2 == 0) {
    *grad = sign;
    return extra + lo;
  }
  *grad = -sign;
  return span - extra + lo;
}

/* Padding applied to a pixel coordinate (and its derivative factor). */
static float apply_padding(float v, int64_t size, int pad, bool align, float *grad) {
  float g1 = 1.0f, g2 = 1.0f;
  if (pad == NRT_GRID_PAD_BORDER) {
    v = clip(v, size, &g1);
  } else if (pad == NRT_GRID_PAD_REFLECTION) {
    v = align ? reflect(v, 0, 2 * (size - 1), &g1) : reflect(v, -1, 2 * size - 1, &g1);
    v = clip(v, size, &g2);
  }
  *grad = g1 * g2;
  return v;
}

/* Source coordinate of a grid value along one axis, and d(source)/d(grid). */
static float source(float c, int64_t size, int pad, bool align, float *mult) {
  float m, g;
  float v = apply_padding(unnormalize(c, size, align, &m), size, pad, align, &g);
  *mult = m * g;
  return v;
}

static bool inside(int64_t v, int64_t size) { return v >= 0 && v < size; }

/* Taps of one output point: up to 16 (bicubic) input offsets with weights
 * and, for the backward, the weights' derivatives along x, y, z. */
typedef struct point_taps {
  int n;
  int64_t off[16]; /* plane offset d*IH*IW + h*IW + w */
  float w[16], dx[16], dy[16], dz[16];
  float mx, my, mz; /* chain factors d(source)/d(grid) */
} point_taps;

static float cubic1(float x, float a) { return ((a + 2) * x - (a + 3)) * x * x + 1; }
static float cubic2(float x, float a) { return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a; }
static float cubic1_d(float x, float a) { return (3 * (a + 2) * x - 2 * (a + 3)) * x; }
static float cubic2_d(float x, float a) { return (3 * a * x - 10 * a) * x + 8 * a; }

static void cubic_weights(float t, float w[4], float d[4]) {
  const float a = -0.75f;
  w[0] = cubic2(t + 1, a);
  w[1] = cubic1(t, a);
  w[2] = cubic1(1 - t, a);
  w[3] = cubic2(2 - t, a);
  d[0] = cubic2_d(t + 1, a);
  d[1] = cubic1_d(t, a);
  d[2] = -cubic1_d(1 - t, a);
  d[3] = -cubic2_d(2 - t, a);
}

static void point_taps_build(const grid_job *j, const float c[3], point_taps *p) {
  const nrt_resample_geom *g = &j->g;
  const int64_t ID = g->I[0], IH = g->I[1], IW = g->I[2];
  p->n = 0;
  if (j->interp == NRT_GRID_BICUBIC) { /* 2-d only */
    float ux = unnormalize(c[0], IW, j->align, &p->mx), uy = unnormalize(c[1], IH, j->align, &p->my);
    p->mz = 0.0f;
    float fx = floorf(ux), fy = floorf(uy);
    float wx[4], dxw[4], wy[4], dyw[4];
    cubic_weights(ux - fx, wx, dxw);
    cubic_weights(uy - fy, wy, dyw);
    for (int a = 0; a < 4; a++)
      for (int b = 0; b < 4; b++) {
        float gdummy;
        float sx = apply_padding(fx - 1 + (float)b, IW, j->pad, j->align, &gdummy);
        float sy = apply_padding(fy - 1 + (float)a, IH, j->pad, j->align, &gdummy);
        if (!(sx >= 0 && sy >= 0 && sx < (float)IW && sy < (float)IH)) continue; /* NaN too */
        int64_t xi = (int64_t)sx, yi = (int64_t)sy;
        if (!inside(xi, IW) || !inside(yi, IH)) continue;
        int k = p->n++;
        p->off[k] = yi * IW + xi;
        p->w[k] = wy[a] * wx[b];
        p->dx[k] = wy[a] * dxw[b];
        p->dy[k] = dyw[a] * wx[b];
        p->dz[k] = 0.0f;
      }
    return;
  }
  float sx = source(c[0], IW, j->pad, j->align, &p->mx), sy = source(c[1], IH, j->pad, j->align, &p->my);
  float sz = j->nsp == 3 ? source(c[2], ID, j->pad, j->align, &p->mz) : 0.0f;
  if (j->nsp == 2) p->mz = 0.0f;
  if (j->interp == NRT_GRID_NEAREST) {
    float rx = nearbyintf(sx), ry = nearbyintf(sy), rz = nearbyintf(sz);
    if (!(rx >= 0 && ry >= 0 && rz >= 0 && rx < (float)IW && ry < (float)IH && rz < (float)ID)) return;
    p->off[0] = ((int64_t)rz * IH + (int64_t)ry) * IW + (int64_t)rx;
    p->w[0] = 1.0f;
    p->dx[0] = p->dy[0] = p->dz[0] = 0.0f;
    p->n = 1;
    return;
  }
  float fx = floorf(sx), fy = floorf(sy), fz = floorf(sz);
  /* NaN and far-away coordinates read nothing (and must not reach an
   * integer conversion) */
  const float far = 0x1p60f;
  if (!(fabsf(fx) < far && fabsf(fy) < far && fabsf(fz) < far)) return;
  float tx = sx - fx, ty = sy - fy, tz = sz - fz;
  int64_t x0 = (int64_t)fx, y0 = (int64_t)fy, z0 = (int64_t)fz;
  for (int dz = 0; dz < 2; dz++)
    for (int dy = 0; dy < 2; dy++)
      for (int dx = 0; dx < 2; dx++) {
        int64_t xi = x0 + dx, yi = y0 + dy, zi = z0 + dz;
        if (!inside(xi, IW) || !inside(yi, IH) || !inside(zi, ID)) continue;
        float wx = dx ? tx : 1 - tx, wy = dy ? ty : 1 - ty, wz = dz ? tz : 1 - tz;
        float sxg = dx ? 1.0f : -1.0f, syg = dy ? 1.0f : -1.0f, szg = dz ? 1.0f : -1.0f;
        int k = p->n++;
        p->off[k] = (zi * IH + yi) * IW + xi;
        p->w[k] = wx * wy * wz;
        p->dx[k] = sxg * wy * wz;
        p->dy[k] = wx * syg * wz;
        p->dz[k] = wx * wy * szg;
      }
}

/* Grid coordinates of output point (n, pt). */
static void load_coords(const grid_job *j, int64_t n, int64_t pt, float c[3]) {
  const nrt_resample_geom *g = &j->g;
  int64_t w = pt % g->O[2], h = (pt / g->O[2]) % g->O[1], d = pt / (g->O[2] * g->O[1]);
  const char *base = (const char *)j->grid->data + n * j->grid->strides[0] + d * j->grid->strides[1] +
                     h * j->grid->strides[2] + w * j->grid->strides[3];
  c[2] = 0.0f;
  for (int k = 0; k < j->nsp; k++) c[k] = (float)nrt_ref_load_f64(base + k * j->grid->strides[4], j->grid->dtype);
}

static const char *act_at(const nrt_operand *o, int64_t n, int64_t c, const int64_t sz[3], int64_t off) {
  int64_t w = off % sz[2], h = (off / sz[2]) % sz[1], d = off / (sz[2] * sz[1]);
  return (const char *)o->data + n * o->strides[0] + c * o->strides[1] + d * o->strides[2] + h * o->strides[3] +
         w * o->strides[4];
}

static void forward_points(void *ctx, int64_t begin, int64_t end) {
  grid_job *j = ctx;
  const nrt_resample_geom *g = &j->g;
  for (int64_t i = begin; i < end; i++) {
    int64_t n = i / g->OL, pt = i % g->OL;
    float c[3];
    point_taps p;
    load_coords(j, n, pt, c);
    point_taps_build(j, c, &p);
    for (int64_t ch = 0; ch < g->C; ch++) {
      float s = 0.0f;
      for (int k = 0; k < p.n; k++) s += p.w[k] * (float)nrt_ref_load_f64(act_at(j->x, n, ch, g->I, p.off[k]), j->x->dtype);
      nrt_ref_store_f64((char *)act_at(j->y, n, ch, g->O, pt), j->y->dtype, s);
    }
  }
}

static void backward_batches(void *ctx, int64_t begin, int64_t end) {
  grid_job *j = ctx;
  const nrt_resample_geom *g = &j->g;
  float *buf = NULL;
  if (j->want_gx) {
    buf = malloc(sizeof(float) * (size_t)(g->C * g->IL + 1));
    if (!buf) {
      j->failed = 1;
      return;
    }
  }
  for (int64_t n = begin; n < end; n++) {
    if (buf)
      for (int64_t i = 0; i < g->C * g->IL; i++) buf[i] = 0.0f;
    for (int64_t pt = 0; pt < g->OL; pt++) {
      float c[3];
      point_taps p;
      load_coords(j, n, pt, c);
      point_taps_build(j, c, &p);
      float sx = 0.0f, sy = 0.0f, sz = 0.0f;
      for (int64_t ch = 0; ch < g->C; ch++) {
        float go = (float)nrt_ref_load_f64(act_at(j->gy, n, ch, g->O, pt), j->gy->dtype);
        for (int k = 0; k < p.n; k++) {
          if (buf) buf[ch * g->IL + p.off[k]] += p.w[k] * go;
          if (j->interp != NRT_GRID_NEAREST) {
            float v = (float)nrt_ref_load_f64(act_at(j->x, n, ch, g->I, p.off[k]), j->x->dtype) * go;
            sx += v * p.dx[k];
            sy += v * p.dy[k];
            sz += v * p.dz[k];
          }
        }
      }
      int64_t w = pt % g->O[2], h = (pt / g->O[2]) % g->O[1], d = pt / (g->O[2] * g->O[1]);
      char *gp = (char *)j->gg->data + n * j->gg->strides[0] + d * j->gg->strides[1] + h * j->gg->strides[2] +
                 w * j->gg->strides[3];
      float out[3] = {sx * p.mx, sy * p.my, sz * p.mz};
      for (int k = 0; k < j->nsp; k++) nrt_ref_store_f64(gp + k * j->gg->strides[4], j->gg->dtype, out[k]);
    }
    if (buf)
      for (int64_t ch = 0; ch < g->C; ch++)
        for (int64_t i = 0; i < g->IL; i++)
          nrt_ref_store_f64((char *)act_at(j->gx, n, ch, g->I, i), j->gx->dtype, buf[ch * g->IL + i]);
  }
  free(buf);
}

nrt_status nrt_resample_grid(const nrt_launch *l) {
  const char *op = nrt_op_name(l->op);
  grid_job j = {.l = l};
  nrt_status st = nrt_resample_geom_init(l, &j.g);
  if (st != NRT_SUCCESS) return st;
  j.interp = (int)l->params[0];
  j.pad = (int)l->params[1];
  j.align = l->params[2] != 0;
  j.nsp = (int)l->params[3];
  bool fwd = (int)l->op == NRT_OP(GRID_SAMPLE);
  if ((j.nsp != 2 && j.nsp != 3) || j.interp < 0 || j.interp > 2 || j.pad < 0 || j.pad > 2 ||
      (j.nsp == 3 && j.interp == NRT_GRID_BICUBIC) || (j.nsp == 2 && (j.g.I[0] != 1 || j.g.O[0] != 1))) {
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: bad mode (interpolation %d, padding %d, %d spatial dims)",
                           op, j.interp, j.pad, j.nsp);
  }
  if (!nrt_dtype_is_floating(l->compute_dtype))
    return nrt_kernel_fail(NRT_ERROR_UNSUPPORTED, "%s: not implemented for %s", op, nrt_dtype_name(l->compute_dtype));
  if (fwd) {
    if (l->noutputs != 1) return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expected 1 output", op);
    j.y = &l->operands[0];
    j.x = &l->operands[1];
    j.grid = &l->operands[2];
    int64_t pts = j.g.N * j.g.OL;
    if (pts == 0 || j.g.C == 0) return NRT_SUCCESS;
    nrt_parallel_for(pts, 1 + 1024 / (j.g.C + 1), forward_points, &j);
    return NRT_SUCCESS;
  }
  if (l->noutputs != 1 && l->noutputs != 2)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expected outputs (grad_x,) grad_grid", op);
  j.want_gx = l->noutputs == 2;
  j.gx = j.want_gx ? &l->operands[0] : NULL;
  j.gg = &l->operands[l->noutputs - 1];
  j.gy = &l->operands[l->noutputs];
  j.x = &l->operands[l->noutputs + 1];
  j.grid = &l->operands[l->noutputs + 2];
  if (j.g.N == 0) return NRT_SUCCESS;
  if (j.g.OL == 0 && !j.want_gx) return NRT_SUCCESS;
  nrt_parallel_for(j.g.N, 1, backward_batches, &j);
  if (j.failed) return nrt_kernel_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of memory for work buffers", op);
  return NRT_SUCCESS;
}
