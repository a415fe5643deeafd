/* The program artifact (docs/graph-format.md, "Program artifact"): a
 * 40-byte header (magic, format version, header size, payload size, an
 * FNV-1a 64 checksum of the payload) and a payload of little-endian
 * fields. Loading checks the header, the size and the checksum before it
 * reads a field, and then bounds-checks every count and index anyway, so
 * a corrupted or truncated cache entry is reported, never run. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "compiler/compiler.h"

static const char MAGIC[8] = {'N', 'R', 'T', 'P', 'R', 'O', 'G', '\x1a'};
#define HEADER_BYTES 40

static uint64_t fnv1a(const unsigned char *p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; i++) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

/* ---- writing ---------------------------------------------------------------------- */

typedef struct writer {
  unsigned char *p;
  size_t len, cap;
  bool failed;
} writer;

static void put(writer *w, const void *data, size_t n) {
  if (w->failed) return;
  if (w->len + n > w->cap) {
    size_t cap = w->cap ? w->cap : 4096;
    while (cap < w->len + n) cap *= 2;
    unsigned char *q = realloc(w->p, cap);
    if (!q) {
      w->failed = true;
      return;
    }
    w->p = q;
    w->cap = cap;
  }
  if (n) memcpy(w->p + w->len, data, n);
  w->len += n;
}

static void put_i32(writer *w, int32_t v) { put(w, &v, 4); }
static void put_i64(writer *w, int64_t v) { put(w, &v, 8); }
static void put_u64(writer *w, uint64_t v) { put(w, &v, 8); }
static void put_str(writer *w, const char *s) {
  if (!s) {
    put_i32(w, -1);
    return;
  }
  int32_t n = (int32_t)strlen(s);
  put_i32(w, n);
  put(w, s, (size_t)n);
}

static void put_launch(writer *w, const nrt_launch *l) {
  put_i32(w, (int32_t)l->op);
  put_i32(w, l->ndim);
  for (int d = 0; d < l->ndim; d++) put_i64(w, l->sizes[d]);
  put_i32(w, l->noutputs);
  put_i32(w, l->ninputs);
  put_i32(w, (int32_t)l->compute_dtype);
  for (int k = 0; k < l->noutputs + l->ninputs; k++) {
    put_i32(w, (int32_t)l->operands[k].dtype);
    int ns = 0;
    for (int d = 0; d < NRT_MAX_DIMS; d++)
      if (l->operands[k].strides[d]) ns = d + 1;
    put_i32(w, ns);
    for (int d = 0; d < ns; d++) put_i64(w, l->operands[k].strides[d]);
  }
  for (int s = 0; s < NRT_MAX_SCALARS; s++) put_i64(w, l->scalars[s].i);
  for (int s = 0; s < NRT_MAX_PARAMS; s++) put_i64(w, l->params[s]);
  int na = 0;
  for (int a = 0; a < 2 * NRT_MAX_DIMS; a++)
    if (l->aux[a]) na = a + 1;
  put_i32(w, na);
  for (int a = 0; a < na; a++) put_i64(w, l->aux[a]);
}

static void put_ref(writer *w, nrt_ref r) {
  put_i32(w, r.kind);
  put_i32(w, r.index);
  put_i64(w, r.offset);
}

nrt_status nrt_program_serialize(const nrt_program *p, void **out_data, size_t *out_size) {
  if (!p || !out_data || !out_size) return NRT_ERROR_INVALID_ARGUMENT;
  writer w = {0};
  unsigned char header[HEADER_BYTES] = {0};
  put(&w, header, sizeof header); /* filled in below */
  put_str(&w, p->name);
  put_str(&w, p->compiler);
  put_str(&w, p->flags);
  put_str(&w, p->cpu_features);
  put_i64(&w, p->arena_bytes);
  put_u64(&w, p->rng_capture_base);
  put_u64(&w, p->rng_advance);
  put_i32(&w, p->uses_rng);
  put_i32(&w, p->nslots);
  for (int s = 0; s < p->nslots; s++) {
    put_i32(&w, (int32_t)p->slots[s].kind);
    put_i64(&w, p->slots[s].bytes);
    put_i32(&w, p->slots[s].mutated);
  }
  put_i32(&w, p->nconstants);
  for (int c = 0; c < p->nconstants; c++) {
    put_i64(&w, p->constant_bytes[c]);
    put(&w, p->constant_data[c], (size_t)p->constant_bytes[c]);
  }
  put_i32(&w, p->nsteps);
  for (int s = 0; s < p->nsteps; s++) {
    const nrt_step *st = &p->steps[s];
    put_i32(&w, st->type);
    put_i32(&w, st->node);
    put_str(&w, st->location);
    if (st->type == NRT_STEP_LAUNCH) {
      put_launch(&w, &st->launch);
      for (int k = 0; k < st->launch.noutputs + st->launch.ninputs; k++) put_ref(&w, st->refs[k]);
      put_i32(&w, st->rng_seed_param);
      put_i32(&w, st->rng_offset_param);
    } else {
      const nrt_fused_chain *c = &st->chain;
      put_i32(&w, c->ndim);
      for (int d = 0; d < c->ndim; d++) put_i64(&w, c->sizes[d]);
      put_i32(&w, c->nmembers);
      put_i32(&w, c->ntiles);
      put_i32(&w, c->nexternal);
      for (int e = 0; e < c->nexternal; e++) put_ref(&w, st->external[e]);
      for (int m = 0; m < c->nmembers; m++) {
        const nrt_fused_member *fm = &c->members[m];
        put_launch(&w, &fm->launch);
        for (int k = 0; k < fm->launch.noutputs + fm->launch.ninputs; k++) {
          put_i32(&w, fm->tile[k]);
          put_i32(&w, fm->external[k]);
        }
      }
    }
  }
  if (w.failed) {
    free(w.p);
    nrt_set_error_message("nrt_program_serialize: host out of memory");
    return NRT_ERROR_OUT_OF_MEMORY;
  }
  uint32_t version = NRT_PROGRAM_FORMAT_VERSION, hbytes = HEADER_BYTES;
  uint64_t payload = w.len - HEADER_BYTES, sum = fnv1a(w.p + HEADER_BYTES, payload), reserved = 0;
  memcpy(w.p, MAGIC, 8);
  memcpy(w.p + 8, &version, 4);
  memcpy(w.p + 12, &hbytes, 4);
  memcpy(w.p + 16, &payload, 8);
  memcpy(w.p + 24, &sum, 8);
  memcpy(w.p + 32, &reserved, 8);
  *out_data = w.p;
  *out_size = w.len;
  return NRT_SUCCESS;
}

/* ---- reading ---------------------------------------------------------------------- */

typedef struct reader {
  const unsigned char *p;
  size_t len, pos;
  bool bad;
  const char *why; /* the first problem */
} reader;

static bool take(reader *r, void *out, size_t n) {
  if (r->bad || n > r->len - r->pos) {
    if (!r->bad) r->why = "a field runs past the end of the payload";
    r->bad = true;
    if (out) memset(out, 0, n);
    return false;
  }
  if (out) memcpy(out, r->p + r->pos, n);
  r->pos += n;
  return true;
}

static int32_t get_i32(reader *r) {
  int32_t v;
  take(r, &v, 4);
  return v;
}
static int64_t get_i64(reader *r) {
  int64_t v;
  take(r, &v, 8);
  return v;
}

static void invalid(reader *r, const char *why) {
  if (!r->bad) r->why = why;
  r->bad = true;
}

/* A count in [lo, hi]; 0 (and the reader marked bad) outside. */
static int32_t get_count(reader *r, int32_t lo, int32_t hi, const char *what) {
  int32_t v = get_i32(r);
  if (v < lo || v > hi) {
    invalid(r, what);
    return lo > 0 ? lo : 0;
  }
  return v;
}

static char *get_str(reader *r) {
  int32_t n = get_i32(r);
  if (n == -1 || r->bad) return NULL;
  if (n < 0 || (size_t)n > r->len - r->pos) {
    invalid(r, "a string runs past the end of the payload");
    return NULL;
  }
  char *s = malloc((size_t)n + 1);
  if (!s) {
    invalid(r, "host out of memory");
    return NULL;
  }
  take(r, s, (size_t)n);
  s[n] = '\0';
  return s;
}

static void get_launch(reader *r, nrt_launch *l) {
  memset(l, 0, sizeof *l);
  l->op = (nrt_op)get_i32(r);
  if (!nrt_op_valid(l->op)) invalid(r, "an invalid op id");
  l->ndim = get_count(r, 0, NRT_MAX_DIMS, "ndim out of range");
  for (int d = 0; d < l->ndim; d++) l->sizes[d] = get_i64(r);
  l->noutputs = get_count(r, 1, NRT_MAX_OPERANDS, "output count out of range");
  l->ninputs = get_count(r, 0, NRT_MAX_OPERANDS - l->noutputs, "input count out of range");
  l->compute_dtype = (nrt_dtype)get_count(r, 0, NRT_DTYPE_COUNT - 1, "an invalid dtype");
  for (int k = 0; k < l->noutputs + l->ninputs; k++) {
    l->operands[k].dtype = (nrt_dtype)get_count(r, 0, NRT_DTYPE_COUNT - 1, "an invalid dtype");
    int ns = get_count(r, 0, NRT_MAX_DIMS, "stride count out of range");
    for (int d = 0; d < ns; d++) l->operands[k].strides[d] = get_i64(r);
  }
  for (int s = 0; s < NRT_MAX_SCALARS; s++) l->scalars[s].i = get_i64(r);
  for (int s = 0; s < NRT_MAX_PARAMS; s++) l->params[s] = get_i64(r);
  int na = get_count(r, 0, 2 * NRT_MAX_DIMS, "aux count out of range");
  for (int a = 0; a < na; a++) l->aux[a] = get_i64(r);
}

static nrt_ref get_ref(reader *r, const nrt_program *p) {
  nrt_ref x;
  x.kind = get_i32(r);
  x.index = get_i32(r);
  x.offset = get_i64(r);
  bool ok = x.offset >= 0;
  switch (x.kind) {
  case NRT_REF_NONE: break;
  case NRT_REF_SLOT: ok = ok && x.index >= 0 && x.index < p->nslots && x.offset <= p->slots[x.index].bytes; break;
  case NRT_REF_ARENA: ok = ok && x.offset <= p->arena_bytes; break;
  case NRT_REF_CONSTANT:
    ok = ok && x.index >= 0 && x.index < p->nconstants && x.offset <= p->constant_bytes[x.index];
    break;
  default: ok = false;
  }
  if (!ok) invalid(r, "an operand reference outside its slot, arena or constant");
  return x;
}

static void get_step(reader *r, nrt_program *p, nrt_step *st) {
  st->type = get_count(r, NRT_STEP_LAUNCH, NRT_STEP_FUSED, "an unknown step type");
  st->node = get_i32(r);
  st->location = get_str(r);
  st->rng_seed_param = st->rng_offset_param = -1;
  if (r->bad) return;
  if (st->type == NRT_STEP_LAUNCH) {
    get_launch(r, &st->launch);
    for (int k = 0; k < st->launch.noutputs + st->launch.ninputs && !r->bad; k++) st->refs[k] = get_ref(r, p);
    st->rng_seed_param = get_count(r, -1, NRT_MAX_PARAMS - 1, "an rng param out of range");
    st->rng_offset_param = get_count(r, -1, NRT_MAX_PARAMS - 1, "an rng param out of range");
    return;
  }
  nrt_fused_chain *c = &st->chain;
  c->ndim = get_count(r, 0, NRT_MAX_DIMS, "chain ndim out of range");
  for (int d = 0; d < c->ndim; d++) c->sizes[d] = get_i64(r);
  c->nmembers = get_count(r, 2, NRT_FUSED_MAX_MEMBERS, "member count out of range");
  c->ntiles = get_count(r, 0, NRT_FUSED_MAX_TILES, "tile count out of range");
  c->nexternal = get_count(r, 0, NRT_FUSED_MAX_MEMBERS * NRT_MAX_OPERANDS, "external count out of range");
  if (r->bad) return;
  st->external = malloc(sizeof(nrt_ref) * (size_t)(c->nexternal ? c->nexternal : 1));
  nrt_fused_member *members = calloc((size_t)c->nmembers, sizeof *members);
  c->members = members;
  if (!st->external || !members) {
    invalid(r, "host out of memory");
    return;
  }
  for (int e = 0; e < c->nexternal && !r->bad; e++) st->external[e] = get_ref(r, p);
  for (int m = 0; m < c->nmembers && !r->bad; m++) {
    nrt_fused_member *fm = &members[m];
    get_launch(r, &fm->launch);
    if (fm->launch.ndim != c->ndim) invalid(r, "a member's ndim differs from its chain's");
    for (int k = 0; k < fm->launch.noutputs + fm->launch.ninputs && !r->bad; k++) {
      fm->tile[k] = (int16_t)get_count(r, -1, c->ntiles - 1, "a tile slot out of range");
      fm->external[k] = (int16_t)get_count(r, -1, c->nexternal - 1, "an external index out of range");
      if ((fm->tile[k] < 0) == (fm->external[k] < 0)) invalid(r, "an operand is neither tile nor external");
    }
  }
}

nrt_status nrt_program_deserialize(const void *data, size_t size, nrt_program **out_program) {
  if (!data || !out_program) return NRT_ERROR_INVALID_ARGUMENT;
  *out_program = NULL;
  const unsigned char *b = data;
  if (size < HEADER_BYTES) {
    nrt_set_error_message("nrt_program_deserialize: truncated: %zu bytes, shorter than the %d-byte header", size,
                          HEADER_BYTES);
    return NRT_ERROR_INVALID_ARGUMENT;
  }
  if (memcmp(b, MAGIC, 8)) {
    nrt_set_error_message("nrt_program_deserialize: bad magic: not a TorchNeuron program artifact");
    return NRT_ERROR_INVALID_ARGUMENT;
  }
  uint32_t version, hbytes;
  uint64_t payload, sum, reserved;
  memcpy(&version, b + 8, 4);
  memcpy(&hbytes, b + 12, 4);
  memcpy(&payload, b + 16, 8);
  memcpy(&sum, b + 24, 8);
  memcpy(&reserved, b + 32, 8);
  if (version != NRT_PROGRAM_FORMAT_VERSION || hbytes != HEADER_BYTES || reserved != 0) {
    nrt_set_error_message("nrt_program_deserialize: format version %u (header %u bytes); this runtime reads "
                          "version %d: recompile the graph",
                          version, hbytes, NRT_PROGRAM_FORMAT_VERSION);
    return NRT_ERROR_INVALID_ARGUMENT;
  }
  if (payload != size - HEADER_BYTES) {
    nrt_set_error_message("nrt_program_deserialize: truncated or padded: the header says %llu payload bytes, "
                          "%zu are there",
                          (unsigned long long)payload, size - HEADER_BYTES);
    return NRT_ERROR_INVALID_ARGUMENT;
  }
  if (fnv1a(b + HEADER_BYTES, payload) != sum) {
    nrt_set_error_message("nrt_program_deserialize: checksum mismatch: the artifact is corrupted");
    return NRT_ERROR_INVALID_ARGUMENT;
  }
  nrt_program *p = nrt_program_alloc();
  if (!p) return NRT_ERROR_OUT_OF_MEMORY;
  reader r = {b + HEADER_BYTES, (size_t)payload, 0, false, NULL};
  p->name = get_str(&r);
  p->compiler = get_str(&r);
  p->flags = get_str(&r);
  p->cpu_features = get_str(&r);
  p->arena_bytes = get_i64(&r);
  p->rng_capture_base = (uint64_t)get_i64(&r);
  p->rng_advance = (uint64_t)get_i64(&r);
  p->uses_rng = get_i32(&r) != 0;
  if (!p->name || !p->compiler || !p->flags || !p->cpu_features || p->arena_bytes < 0)
    invalid(&r, "a missing name or a negative arena");
  p->nslots = get_count(&r, 0, INT32_MAX / 64, "slot count out of range");
  if (!r.bad) p->slots = calloc((size_t)(p->nslots ? p->nslots : 1), sizeof *p->slots);
  for (int s = 0; s < p->nslots && !r.bad && p->slots; s++) {
    p->slots[s].kind = (nrt_buffer_kind)get_count(&r, NRT_BUFFER_INPUT, NRT_BUFFER_OUTPUT, "a bad slot kind");
    p->slots[s].bytes = get_i64(&r);
    p->slots[s].mutated = get_i32(&r) != 0;
    if (p->slots[s].bytes < 0) invalid(&r, "a negative slot size");
  }
  int nconst = get_count(&r, 0, INT32_MAX / 64, "constant count out of range");
  if (!r.bad) {
    p->constant_bytes = calloc((size_t)(nconst ? nconst : 1), sizeof *p->constant_bytes);
    p->constant_data = calloc((size_t)(nconst ? nconst : 1), sizeof *p->constant_data);
    if (!p->constant_bytes || !p->constant_data) invalid(&r, "host out of memory");
  }
  for (int c = 0; c < nconst && !r.bad; c++) {
    int64_t n = get_i64(&r);
    if (n < 0 || (uint64_t)n > r.len - r.pos) {
      invalid(&r, "a constant runs past the end of the payload");
      break;
    }
    p->constant_bytes[c] = n;
    p->constant_data[c] = aligned_alloc(64, (size_t)((n + 63) / 64 * 64 + 64));
    p->nconstants = c + 1;
    if (!p->constant_data[c]) invalid(&r, "host out of memory");
    else take(&r, p->constant_data[c], (size_t)n);
  }
  int nsteps = get_count(&r, 0, INT32_MAX / 64, "step count out of range");
  if (!r.bad && !(p->steps = calloc((size_t)(nsteps ? nsteps : 1), sizeof *p->steps))) invalid(&r, "host out of memory");
  for (int s = 0; s < nsteps && !r.bad; s++) {
    p->nsteps = s + 1;
    get_step(&r, p, &p->steps[s]);
  }
  if (!r.bad && r.pos != r.len) invalid(&r, "bytes after the last step");
  if (r.bad) {
    nrt_set_error_message("nrt_program_deserialize: malformed payload: %s", r.why ? r.why : "?");
    nrt_program_free(p);
    return NRT_ERROR_INVALID_ARGUMENT;
  }
  *out_program = p;
  return NRT_SUCCESS;
}

/* ---- files ---------------------------------------------------------------------- */

nrt_status nrt_program_save(const nrt_program *p, const char *path) {
  void *data;
  size_t size;
  nrt_status st = nrt_program_serialize(p, &data, &size);
  if (st != NRT_SUCCESS) return st;
  /* Written next to the target and renamed over it, so a reader (another
   * process hitting the cache) never sees a torn file. */
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
  FILE *f = fopen(tmp, "wb");
  bool ok = f && fwrite(data, 1, size, f) == size;
  if (f && fclose(f) != 0) ok = false;
  free(data);
  if (ok && rename(tmp, path) != 0) ok = false;
  if (!ok) {
    nrt_set_error_message("nrt_program_save: cannot write %s: %s", path, strerror(errno));
    remove(tmp);
    return NRT_ERROR_INVALID_ARGUMENT;
  }
  return NRT_SUCCESS;
}

nrt_status nrt_program_load(const char *path, nrt_program **out_program) {
  char *data;
  size_t size;
  nrt_status st = nrt_read_file("nrt_program_load", path, &data, &size);
  if (st != NRT_SUCCESS) return st;
  st = nrt_program_deserialize(data, size, out_program);
  if (st != NRT_SUCCESS) {
    char msg[NRT_ERROR_MESSAGE_MAX];
    snprintf(msg, sizeof msg, "%s", nrt_last_error_message());
    nrt_set_error_message("%s: %s", path, msg);
  }
  free(data);
  return st;
}
