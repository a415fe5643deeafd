/* Row launches: the last dim of `sizes` is a row processed as a whole and
 * the leading dims index independent rows (softmax and the cumulative ops
 * in reduce/row.c, layer norm, select's scans and order statistics). The
 * row geometry, the operand pointers of a row, and a runner that splits
 * the rows over the kernel pool with scratch per task. */
#ifndef NRT_KERNELS_COMMON_ROWS_H
#define NRT_KERNELS_COMMON_ROWS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include "kernels/common/convert.h"
#include "nrt/launch.h"

typedef struct nrt_rows {
  int64_t len;                  /* elements per row: the last size (1 for a 0-d launch) */
  int64_t count;                /* rows: the product of the leading sizes */
  int64_t st[NRT_MAX_OPERANDS]; /* each operand's byte stride along the row (0 for a 0-d launch) */
} nrt_rows;

void nrt_rows_init(nrt_rows *g, const nrt_launch *l);

/* ptr[k] = operand k (k < nops) at the first element of row r, rows
 * counted row-major over the leading dims. */
static inline void nrt_rows_start(const nrt_launch *l, int nops, int64_t r, char **ptr) {
  for (int k = 0; k < nops; k++) ptr[k] = l->operands[k].data;
  for (int d = l->ndim - 2; d >= 0; d--) {
    int64_t i = r % l->sizes[d];
    r /= l->sizes[d];
    for (int k = 0; k < nops; k++) ptr[k] += i * l->operands[k].strides[d];
  }
}

/* Element i of operand k in a row (ptr from nrt_rows_start), one element
 * at a time through dtype.c's conversions at float32 precision: the
 * reference paths' loads and stores. */
static inline float nrt_rows_ref_ld(const nrt_launch *l, const nrt_rows *g, char *const *ptr, int k, int64_t i) {
  return (float)nrt_ref_load_f64(ptr[k] + i * g->st[k], l->operands[k].dtype);
}
static inline void nrt_rows_ref_st(const nrt_launch *l, const nrt_rows *g, char *const *ptr, int k, int64_t i,
                                   float v) {
  nrt_ref_store_f64(ptr[k] + i * g->st[k], l->operands[k].dtype, v);
}

/* A job over the rows of g: a task gets `scratch` bytes and runs either
 * range (its rows at once, for state kept across them) or row (each row,
 * given the row pointers of operands [0, nops)). */
typedef struct nrt_rows_job nrt_rows_job;
struct nrt_rows_job {
  const nrt_launch *l;
  nrt_rows g;
  void *ctx; /* the caller's plan */
  int nops;
  size_t scratch;
  void (*range)(const nrt_rows_job *j, int64_t begin, int64_t end, void *scratch);
  void (*row)(const nrt_rows_job *j, int64_t r, char *const *ptr, void *scratch);
  atomic_int failed;
};

/* Runs every row: split over the kernel pool in tasks of at least
 * min_elems elements, or on the calling thread. False when a task could
 * not get its scratch (the caller reports it). */
bool nrt_rows_run(nrt_rows_job *j, int64_t min_elems, bool parallel);

#endif
