/* Family SEGMENT: CTC_LOSS and CTC_LOSS_BACKWARD (nrt/ops/segment.h).
 *
 * Connectionist temporal classification over the extended label sequence
 * l' = (blank, l1, blank, l2, ..., lL, blank) of length 2L + 1. In log
 * space, with lp[t][c] the input log-probabilities:
 *   alpha[0][0] = lp[0][blank], alpha[0][1] = lp[0][l'1], else -inf;
 *   alpha[t][s] = lse(alpha[t-1][s], alpha[t-1][s-1], alpha[t-1][s-2] when
 *                 l's != l's-2) + lp[t][l's]
 * (a label may skip the blank before it only when it differs from the
 * label before that blank). The loss is -lse(alpha[T-1][2L],
 * alpha[T-1][2L-1]). beta is the same recursion run backwards from T - 1,
 * and d loss / d lp[t][c] = exp(lp) - exp(lse over s with l's = c of
 * alpha[t][s] + beta[t][s], + loss - lp) (alpha and beta both include
 * lp[t][l's], hence the - lp), times the incoming gradient.
 *
 * The tables and labels are validated serially first; then each sequence
 * of the batch is one task that writes only its own outputs. Everything
 * runs in double (log-sum-exp of long sequences loses float32 digits);
 * only the stored results are rounded. The kernels are scalar loops over
 * small rows, so the fast and the reference paths are the same code. */
#include <math.h>
#include <stdlib.h>
#include "kernels/common/common.h"
#include "kernels/segment/segment.h"
#include "nrt/ops/segment.h"

enum { FW_NLL = 0, FW_ALPHA = 1, FW_LP = 2, FW_TGT = 3, FW_TABLE = 4 };
enum { BW_GLP = 0, BW_GRAD = 1, BW_LP = 2, BW_TGT = 3, BW_TABLE = 4, BW_NLL = 5, BW_ALPHA = 6 };

typedef struct ctc_ctx {
  const nrt_launch *l;
  int64_t T, B, C, Smax, blank;
  int lp_k, tgt_k, table_k; /* operand numbers */
  bool zero_infinity;
  bool oom; /* a task could not get scratch memory */
} ctc_ctx;

static inline const char *at2(const nrt_operand *o, int64_t i, int64_t j) {
  return (const char *)o->data + i * o->strides[0] + j * o->strides[1];
}
static inline const char *at3(const nrt_operand *o, int64_t i, int64_t j, int64_t k) {
  return (const char *)o->data + i * o->strides[0] + j * o->strides[1] + k * o->strides[2];
}
static inline int64_t table_at(const ctc_ctx *c, int64_t b, int col) {
  const nrt_operand *t = &c->l->operands[c->table_k];
  return nrt_ref_load_i64(at2(t, b, col), t->dtype);
}
static inline double lp_at(const ctc_ctx *c, int64_t t, int64_t b, int64_t ch) {
  const nrt_operand *o = &c->l->operands[c->lp_k];
  return nrt_ref_load_f64(at3(o, t, b, ch), o->dtype);
}

/* log(exp(a) + exp(b) + exp(d)) with the largest factored out; all -inf
 * gives -inf (the max is replaced by 0 so no -inf - -inf appears). */
static double lse3(double a, double b, double d) {
  double m = a;
  if (b > m) m = b;
  if (d > m) m = d;
  if (m == -INFINITY) m = 0.0;
  return log(exp(a - m) + exp(b - m) + exp(d - m)) + m;
}

/* Extended labels l' of sequence b into ext[0 .. 2L]. */
static void extended_labels(const ctc_ctx *c, int64_t b, int64_t L, int64_t *ext) {
  const nrt_operand *tg = &c->l->operands[c->tgt_k];
  int64_t row = table_at(c, b, NRT_CTC_TARGET_ROW), col = table_at(c, b, NRT_CTC_TARGET_COL);
  for (int64_t k = 0; k < L; k++) {
    ext[2 * k] = c->blank;
    ext[2 * k + 1] = nrt_ref_load_i64(at2(tg, row, col + k), tg->dtype);
  }
  ext[2 * L] = c->blank;
}

/* Lengths within the sizes, targets within the targets operand (aux[0]
 * rows, aux[1] columns), labels within [0, C). */
static nrt_status validate(const ctc_ctx *c) {
  const nrt_launch *l = c->l;
  const nrt_operand *tg = &l->operands[c->tgt_k];
  int64_t rows = l->aux[0], cols = l->aux[1];
  for (int64_t b = 0; b < c->B; b++) {
    int64_t tin = table_at(c, b, NRT_CTC_INPUT_LEN), L = table_at(c, b, NRT_CTC_TARGET_LEN);
    int64_t row = table_at(c, b, NRT_CTC_TARGET_ROW), col = table_at(c, b, NRT_CTC_TARGET_COL);
    if (tin < 0 || tin > c->T)
      return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT,
                             "ctc_loss: input length %lld of sequence %lld is out of range [0, %lld]", (long long)tin,
                             (long long)b, (long long)c->T);
    if (L < 0 || L > c->Smax)
      return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT,
                             "ctc_loss: target length %lld of sequence %lld is out of range [0, %lld]", (long long)L,
                             (long long)b, (long long)c->Smax);
    if (L > 0 && (row < 0 || row >= rows || col < 0 || col > cols - L))
      return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT,
                             "ctc_loss: the targets of sequence %lld lie outside the targets tensor", (long long)b);
    for (int64_t k = 0; k < L; k++) {
      int64_t v = nrt_ref_load_i64(at2(tg, row, col + k), tg->dtype);
      if (v < 0 || v >= c->C)
        return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT,
                               "ctc_loss: target %lld of sequence %lld is out of range [0, %lld)", (long long)v,
                               (long long)b, (long long)c->C);
    }
  }
  return NRT_SUCCESS;
}

/* ---- forward ------------------------------------------------------------------ */

static void forward_range(void *ctx, int64_t begin, int64_t end) {
  ctc_ctx *c = ctx;
  const nrt_launch *l = c->l;
  const nrt_operand *nll = &l->operands[FW_NLL], *la = &l->operands[FW_ALPHA];
  int64_t W = 2 * c->Smax + 1; /* log_alpha's last dim */
  /* two alpha rows and the extended labels, each W long */
  double *buf = malloc((size_t)W * (2 * sizeof(double) + sizeof(int64_t)));
  if (!buf) {
    c->oom = true;
    return;
  }
  int64_t *ext = (int64_t *)(buf + 2 * W);
  for (int64_t b = begin; b < end; b++) {
    double *prev = buf, *cur = buf + W;
    int64_t tin = table_at(c, b, NRT_CTC_INPUT_LEN), L = table_at(c, b, NRT_CTC_TARGET_LEN), n = 2 * L + 1;
    extended_labels(c, b, L, ext);
    double loss;
    if (tin == 0) {
      /* no frames: only the empty target is possible (ATen stores -0) */
      loss = L == 0 ? -0.0 : INFINITY;
    } else {
      for (int64_t s = 0; s < W; s++) prev[s] = -INFINITY;
      prev[0] = lp_at(c, 0, b, c->blank);
      if (L > 0) prev[1] = lp_at(c, 0, b, ext[1]);
      for (int64_t s = 0; s < W; s++) nrt_ref_store_f64((char *)at3(la, b, 0, s), la->dtype, prev[s]);
      for (int64_t t = 1; t < tin; t++) {
        for (int64_t s = 0; s < n; s++) {
          double a2 = s > 0 ? prev[s - 1] : -INFINITY;
          double a3 = s > 1 && ext[s] != ext[s - 2] ? prev[s - 2] : -INFINITY;
          cur[s] = lse3(prev[s], a2, a3) + lp_at(c, t, b, ext[s]);
        }
        for (int64_t s = n; s < W; s++) cur[s] = -INFINITY;
        for (int64_t s = 0; s < W; s++) nrt_ref_store_f64((char *)at3(la, b, t, s), la->dtype, cur[s]);
        double *tmp = prev;
        prev = cur;
        cur = tmp;
      }
      /* an empty target ends in its only state, the blank */
      loss = L == 0 ? -prev[0] : -lse3(prev[2 * L], prev[2 * L - 1], -INFINITY);
    }
    /* frames past the input length take no part */
    for (int64_t t = tin; t < c->T; t++)
      for (int64_t s = 0; s < W; s++) nrt_ref_store_f64((char *)at3(la, b, t, s), la->dtype, -INFINITY);
    nrt_ref_store_f64((char *)at2(nll, b, 0), nll->dtype, loss);
  }
  free(buf);
}

/* ---- backward ----------------------------------------------------------------- */

static void backward_range(void *ctx, int64_t begin, int64_t end) {
  ctc_ctx *c = ctx;
  const nrt_launch *l = c->l;
  const nrt_operand *glp = &l->operands[BW_GLP], *grad = &l->operands[BW_GRAD], *nllo = &l->operands[BW_NLL],
                    *la = &l->operands[BW_ALPHA];
  int64_t W = 2 * c->Smax + 1, C = c->C;
  /* two beta rows and the extended labels (W each), collected and lp rows (C each) */
  double *base = malloc((size_t)W * (2 * sizeof(double) + sizeof(int64_t)) + (size_t)(C + 1) * 2 * sizeof(double));
  if (!base) {
    c->oom = true;
    return;
  }
  double *coll = base + 2 * W, *lp = coll + C + 1;
  int64_t *ext = (int64_t *)(lp + C + 1);
  for (int64_t b = begin; b < end; b++) {
    int64_t tin = table_at(c, b, NRT_CTC_INPUT_LEN), L = table_at(c, b, NRT_CTC_TARGET_LEN), n = 2 * L + 1;
    double nll = nrt_ref_load_f64(at2(nllo, b, 0), nllo->dtype);
    double gr = nrt_ref_load_f64(at2(grad, b, 0), grad->dtype);
    int64_t live = tin;
    if (c->zero_infinity && nll == INFINITY) live = 0; /* an impossible sequence contributes nothing */
    extended_labels(c, b, L, ext);
    double *next = base, *cur = base + W;
    for (int64_t t = live - 1; t >= 0; t--) {
      if (t == live - 1) {
        for (int64_t s = 0; s < n; s++) cur[s] = -INFINITY;
        cur[2 * L] = lp_at(c, t, b, c->blank);
        if (L > 0) cur[2 * L - 1] = lp_at(c, t, b, ext[2 * L - 1]);
      } else {
        for (int64_t s = n - 1; s >= 0; s--) {
          double b2 = s < 2 * L ? next[s + 1] : -INFINITY;
          double b3 = s < 2 * L - 1 && ext[s + 2] != ext[s] ? next[s + 2] : -INFINITY;
          cur[s] = lse3(next[s], b2, b3) + lp_at(c, t, b, ext[s]);
        }
      }
      /* collect alpha * beta by label */
      for (int64_t ch = 0; ch < C; ch++) coll[ch] = -INFINITY;
      for (int64_t s = 0; s < n; s++) {
        double v = nrt_ref_load_f64(at3(la, b, t, s), la->dtype) + cur[s];
        double *acc = &coll[ext[s]];
        if (*acc == -INFINITY) {
          *acc = v;
        } else {
          double m = *acc > v ? *acc : v;
          *acc = log(exp(*acc - m) + exp(v - m)) + m;
        }
      }
      for (int64_t ch = 0; ch < C; ch++) lp[ch] = lp_at(c, t, b, ch);
      for (int64_t ch = 0; ch < C; ch++) {
        double g = (exp(lp[ch]) - exp(coll[ch] + nll - lp[ch])) * gr;
        nrt_ref_store_f64((char *)at3(glp, t, b, ch), glp->dtype, g);
      }
      double *tmp = next;
      next = cur;
      cur = tmp;
    }
    for (int64_t t = live; t < c->T; t++)
      for (int64_t ch = 0; ch < C; ch++) nrt_ref_store_f64((char *)at3(glp, t, b, ch), glp->dtype, 0.0);
  }
  free(base);
}

/* ---- entry points --------------------------------------------------------------- */

static nrt_status setup(ctc_ctx *c, const nrt_launch *l, int noutputs, int lp_k, int tgt_k, int table_k) {
  const char *name = nrt_op_name(l->op);
  if (l->noutputs != noutputs)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expected %d outputs, got %d", name, noutputs, l->noutputs);
  if (l->ndim != 4)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: sizes must be {T, B, C, Smax}, got ndim %d", name, l->ndim);
  for (int k = 0; k < l->noutputs + l->ninputs; k++) {
    nrt_dtype dt = l->operands[k].dtype;
    bool index = k == tgt_k || k == table_k;
    bool ok = index ? dt >= NRT_UINT8 && dt <= NRT_INT64 : nrt_dtype_is_floating(dt);
    if (!ok)
      return nrt_kernel_fail(NRT_ERROR_UNSUPPORTED, "%s: not supported for %s (operand %d)", name, nrt_dtype_name(dt),
                             k);
  }
  *c = (ctc_ctx){.l = l, .T = l->sizes[0], .B = l->sizes[1], .C = l->sizes[2], .Smax = l->sizes[3],
                 .blank = l->params[0], .lp_k = lp_k, .tgt_k = tgt_k, .table_k = table_k,
                 .zero_infinity = l->params[1] != 0};
  if (c->T < 0 || c->B < 0 || c->C < 0 || c->Smax < 0)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: negative size", name);
  if (c->blank < 0 || c->blank >= c->C)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "blank must be in label range");
  return validate(c);
}

static nrt_status run(ctc_ctx *c, nrt_range_fn fn) {
  if (c->B == 0) return NRT_SUCCESS;
  if (nrt_kernels_reference())
    fn(c, 0, c->B);
  else
    nrt_parallel_for(c->B, 1, fn, c); /* a sequence is T x (2 Smax + 1) log-sum-exps: enough per task */
  if (c->oom)
    return nrt_kernel_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory for %lld-state rows", nrt_op_name(c->l->op),
                           (long long)(2 * c->Smax + 1));
  return NRT_SUCCESS;
}

nrt_status nrt_ctc_loss_execute(const nrt_launch *l) {
  ctc_ctx c;
  nrt_status st = setup(&c, l, 2, FW_LP, FW_TGT, FW_TABLE);
  if (st != NRT_SUCCESS) return st;
  return run(&c, forward_range);
}

nrt_status nrt_ctc_loss_backward_execute(const nrt_launch *l) {
  ctc_ctx c;
  nrt_status st = setup(&c, l, 1, BW_LP, BW_TGT, BW_TABLE);
  if (st != NRT_SUCCESS) return st;
  return run(&c, backward_range);
}
