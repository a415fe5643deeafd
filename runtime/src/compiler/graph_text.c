/* The graph text format, "nrt-graph 1" (docs/graph-format.md): writing and
 * parsing. Line based; the parser reports the first problem with its line
 * number and never trusts a count or an index it has not checked. Numbers
 * round-trip exactly: scalars are written as integers ("i:3"), as doubles
 * with 17 significant digits, or as raw bits ("x:7ff8000000000000") for a
 * NaN. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/compiler.h"

/* ---- writing ---------------------------------------------------------------------- */

typedef struct sbuf {
  char *s;
  size_t len, cap;
  bool failed;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...) {
  if (b->failed) return;
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b->s ? b->s + b->len : NULL, b->s ? b->cap - b->len : 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
      b->failed = true;
      return;
    }
    if (b->s && b->len + (size_t)n < b->cap) {
      b->len += (size_t)n;
      return;
    }
    size_t cap = b->cap ? b->cap * 2 : 4096;
    while (cap < b->len + (size_t)n + 1) cap *= 2;
    char *p = realloc(b->s, cap);
    if (!p) {
      b->failed = true;
      return;
    }
    b->s = p;
    b->cap = cap;
  }
}

static void write_list(sbuf *b, const int64_t *v, int n) {
  sb_printf(b, "[");
  for (int i = 0; i < n; i++) sb_printf(b, i ? " %" PRId64 : "%" PRId64, v[i]);
  sb_printf(b, "]");
}

static void write_scalar(sbuf *b, nrt_scalar s) {
  if (s.i > -((int64_t)1 << 40) && s.i < ((int64_t)1 << 40)) {
    sb_printf(b, " i:%" PRId64, s.i);
  } else if (s.f != s.f) {
    sb_printf(b, " x:%016" PRIx64, (uint64_t)s.i);
  } else {
    sb_printf(b, " %.17g", s.f);
  }
}

static void write_string(sbuf *b, const char *s) {
  sb_printf(b, "\"");
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') sb_printf(b, "\\%c", *s);
    else if (*s == '\n') sb_printf(b, "\\n");
    else if ((unsigned char)*s < 32) sb_printf(b, "\\x%02x", (unsigned char)*s);
    else sb_printf(b, "%c", *s);
  }
  sb_printf(b, "\"");
}

/* Strides are written up to the last nonzero one (at least ndim). */
static int stride_count(const nrt_graph_operand *o, int ndim) {
  int n = ndim;
  for (int d = NRT_MAX_DIMS - 1; d >= n; d--)
    if (o->strides[d]) {
      n = d + 1;
      break;
    }
  return n;
}

nrt_status nrt_graph_write(const nrt_graph *g, char **out_text, size_t *out_length) {
  if (!g || !out_text) return NRT_ERROR_INVALID_ARGUMENT;
  sbuf b = {0};
  sb_printf(&b, "nrt-graph %d\n", NRT_GRAPH_FORMAT_VERSION);
  sb_printf(&b, "rng seed %" PRIu64 " base %" PRIu64 " advance %" PRIu64 "\n", g->rng_seed,
            g->rng_base_offset, g->rng_advance);
  for (int i = 0; i < g->nbuffers; i++) {
    const nrt_graph_buffer *x = &g->buffers[i];
    sb_printf(&b, "buffer %d %s bytes %" PRId64, i, nrt_buffer_kind_name(x->kind), x->bytes);
    if (x->kind == NRT_BUFFER_INPUT || x->kind == NRT_BUFFER_OUTPUT) sb_printf(&b, " slot %d", x->slot);
    if (x->mutated) sb_printf(&b, " mutated");
    if (x->kind == NRT_BUFFER_CONSTANT && x->bytes > 0) {
      sb_printf(&b, " data ");
      const unsigned char *d = x->data;
      for (int64_t j = 0; j < x->bytes; j++) sb_printf(&b, "%02x", d[j]);
    }
    sb_printf(&b, "\n");
  }
  for (int i = 0; i < g->nnodes; i++) {
    const nrt_graph_node *n = &g->nodes[i];
    sb_printf(&b, "node %d %s compute %s sizes ", i, nrt_op_name(n->op), nrt_dtype_name(n->compute_dtype));
    write_list(&b, n->sizes, n->ndim);
    sb_printf(&b, " outputs %d inputs %d\n", n->noutputs, n->ninputs);
    int nops = n->noutputs + n->ninputs;
    for (int k = 0; k < nops && k < NRT_MAX_OPERANDS; k++) {
      const nrt_graph_operand *o = &n->operands[k];
      sb_printf(&b, "  %s ", k < n->noutputs ? "out" : "in");
      if (o->buffer < 0) sb_printf(&b, "none");
      else sb_printf(&b, "b%d", o->buffer);
      sb_printf(&b, " @%" PRId64 " %s ", o->offset, nrt_dtype_name(o->dtype));
      write_list(&b, o->strides, stride_count(o, n->ndim));
      sb_printf(&b, "\n");
    }
    bool any = false;
    for (int s = 0; s < NRT_MAX_SCALARS; s++) any |= n->scalars[s].i != 0;
    if (any) {
      sb_printf(&b, "  scalars");
      for (int s = 0; s < NRT_MAX_SCALARS; s++) write_scalar(&b, n->scalars[s]);
      sb_printf(&b, "\n");
    }
    any = false;
    for (int p = 0; p < NRT_MAX_PARAMS; p++) any |= n->params[p] != 0;
    if (any) {
      sb_printf(&b, "  params");
      for (int p = 0; p < NRT_MAX_PARAMS; p++) sb_printf(&b, " %" PRId64, n->params[p]);
      sb_printf(&b, "\n");
    }
    int naux = 0;
    for (int a = 0; a < 2 * NRT_MAX_DIMS; a++)
      if (n->aux[a]) naux = a + 1;
    if (naux) {
      sb_printf(&b, "  aux ");
      write_list(&b, n->aux, naux);
      sb_printf(&b, "\n");
    }
    if (n->rng_seed_param >= 0 || n->rng_offset_param >= 0)
      sb_printf(&b, "  rng %d %d\n", n->rng_seed_param, n->rng_offset_param);
    if (n->location) {
      sb_printf(&b, "  loc ");
      write_string(&b, n->location);
      sb_printf(&b, "\n");
    }
    sb_printf(&b, "end\n");
  }
  if (b.failed) {
    free(b.s);
    nrt_set_error_message("nrt_graph_write: host out of memory");
    return NRT_ERROR_OUT_OF_MEMORY;
  }
  *out_text = b.s;
  if (out_length) *out_length = b.len;
  return NRT_SUCCESS;
}

/* ---- parsing ---------------------------------------------------------------------- */

#define MAX_TOKENS 64

typedef struct tokens {
  int n;
  const char *t[MAX_TOKENS];
} tokens;

typedef struct parser {
  const char *text;
  size_t len, pos;
  int line;
  char *buf; /* current line, owned */
  size_t buf_cap;
  char *tok; /* its tokens, NUL-separated, owned */
  size_t tok_cap;
} parser;

static nrt_status fail(const parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static nrt_status fail(const parser *p, const char *fmt, ...) {
  char detail[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(detail, sizeof detail, fmt, ap);
  va_end(ap);
  nrt_set_error_message("nrt_graph_parse: line %d: %s", p->line, detail);
  return NRT_ERROR_INVALID_ARGUMENT;
}

/* Next line into p->buf; false at the end. */
static bool next_line(parser *p, nrt_status *st) {
  if (p->pos >= p->len) return false;
  size_t start = p->pos;
  while (p->pos < p->len && p->text[p->pos] != '\n') p->pos++;
  size_t n = p->pos - start;
  if (p->pos < p->len) p->pos++;
  p->line++;
  if (n + 1 > p->buf_cap) {
    size_t cap = n + 1 < 256 ? 256 : n + 1;
    char *b = realloc(p->buf, cap);
    if (!b) {
      *st = NRT_ERROR_OUT_OF_MEMORY;
      nrt_set_error_message("nrt_graph_parse: host out of memory");
      return false;
    }
    p->buf = b;
    p->buf_cap = cap;
  }
  memcpy(p->buf, p->text + start, n);
  p->buf[n] = '\0';
  if (memchr(p->buf, '\0', n)) {
    *st = fail(p, "NUL byte in the text");
    return false;
  }
  return true;
}

/* Splits p->buf into p->tok: whitespace separates, '[' and ']' are tokens
 * of their own, "..." is one token (kept with its quotes, unescaped
 * later), '#' starts a comment. */
static nrt_status tokenize(parser *p, tokens *tk) {
  tk->n = 0;
  size_t need = 2 * strlen(p->buf) + 2;
  if (need > p->tok_cap) {
    char *t = realloc(p->tok, need);
    if (!t) {
      nrt_set_error_message("nrt_graph_parse: host out of memory");
      return NRT_ERROR_OUT_OF_MEMORY;
    }
    p->tok = t;
    p->tok_cap = need;
  }
  const char *s = p->buf;
  char *w = p->tok;
  while (*s) {
    while (*s == ' ' || *s == '\t' || *s == '\r') s++;
    if (!*s || *s == '#') break;
    if (tk->n == MAX_TOKENS) return fail(p, "more than %d tokens", MAX_TOKENS);
    tk->t[tk->n++] = w;
    if (*s == '[' || *s == ']') {
      *w++ = *s++;
    } else if (*s == '"') {
      *w++ = *s++;
      while (*s && *s != '"') {
        if (*s == '\\' && s[1]) *w++ = *s++;
        *w++ = *s++;
      }
      if (*s != '"') return fail(p, "unterminated string");
      *w++ = *s++;
    } else {
      while (*s && *s != ' ' && *s != '\t' && *s != '\r' && *s != '[' && *s != ']' && *s != '#') *w++ = *s++;
    }
    *w++ = '\0';
  }
  return NRT_SUCCESS;
}

static bool parse_i64(const char *s, int64_t *out) {
  if (!s || !*s) return false;
  errno = 0;
  char *end;
  long long v = strtoll(s, &end, 10);
  if (errno || *end) return false;
  *out = v;
  return true;
}

static bool parse_u64(const char *s, uint64_t *out) {
  if (!s || !*s || *s == '-') return false;
  errno = 0;
  char *end;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || *end) return false;
  *out = v;
  return true;
}

static bool parse_int(const char *s, int lo, int hi, int *out) {
  int64_t v;
  if (!parse_i64(s, &v) || v < lo || v > hi) return false;
  *out = (int)v;
  return true;
}

static bool parse_scalar(const char *s, nrt_scalar *out) {
  if (!strncmp(s, "i:", 2)) return parse_i64(s + 2, &out->i);
  if (!strncmp(s, "x:", 2)) {
    if (!s[2] || strlen(s + 2) > 16) return false;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s + 2, &end, 16);
    if (errno || *end) return false;
    out->i = (int64_t)v;
    return true;
  }
  errno = 0;
  char *end;
  double v = strtod(s, &end);
  if (!*s || *end) return false;
  out->f = v;
  return true;
}

static bool parse_dtype(const char *s, nrt_dtype *out) {
  for (int d = 0; d < NRT_DTYPE_COUNT; d++)
    if (!strcmp(s, nrt_dtype_name((nrt_dtype)d))) {
      *out = (nrt_dtype)d;
      return true;
    }
  return false;
}

static bool parse_op(const char *s, nrt_op *out) {
  for (int id = 0; id < NRT_OP_ID_LIMIT; id++)
    if (nrt_op_valid((nrt_op)id) && !strcmp(s, nrt_op_name((nrt_op)id))) {
      *out = (nrt_op)id;
      return true;
    }
  return false;
}

/* A bracketed list starting at token *i: "[" v... "]". */
static nrt_status parse_list(const parser *p, const tokens *tk, int *i, int64_t *out, int max,
                             int *out_n, const char *what) {
  if (*i >= tk->n || strcmp(tk->t[*i], "[")) return fail(p, "expected '[' to start %s", what);
  (*i)++;
  int n = 0;
  while (*i < tk->n && strcmp(tk->t[*i], "]")) {
    if (n == max) return fail(p, "%s has more than %d entries", what, max);
    if (!parse_i64(tk->t[*i], &out[n])) return fail(p, "%s: '%s' is not an integer", what, tk->t[*i]);
    n++;
    (*i)++;
  }
  if (*i >= tk->n) return fail(p, "%s: missing ']'", what);
  (*i)++;
  *out_n = n;
  return NRT_SUCCESS;
}

static nrt_status parse_string(const parser *p, const char *tok, char **out) {
  size_t n = strlen(tok);
  if (n < 2 || tok[0] != '"' || tok[n - 1] != '"') return fail(p, "expected a quoted string");
  char *s = malloc(n);
  if (!s) return NRT_ERROR_OUT_OF_MEMORY;
  size_t w = 0;
  for (size_t r = 1; r + 1 < n; r++) {
    char c = tok[r];
    if (c == '\\') {
      char e = tok[++r];
      if (e == 'n') c = '\n';
      else if (e == '"' || e == '\\') c = e;
      else if (e == 'x' && r + 2 < n - 1) {
        char hex[3] = {tok[r + 1], tok[r + 2], 0};
        char *end;
        long v = strtol(hex, &end, 16);
        if (*end || v == 0) {
          free(s);
          return fail(p, "bad escape in string");
        }
        c = (char)v;
        r += 2;
      } else {
        free(s);
        return fail(p, "bad escape in string");
      }
    }
    s[w++] = c;
  }
  s[w] = '\0';
  *out = s;
  return NRT_SUCCESS;
}

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

static nrt_status parse_buffer(parser *p, const tokens *tk, nrt_graph *g) {
  /* buffer <id> <kind> bytes <n> [slot <s>] [mutated] [data <hex>] */
  int id;
  if (tk->n < 5 || !parse_int(tk->t[1], 0, INT32_MAX, &id)) return fail(p, "expected 'buffer <id> <kind> bytes <n>'");
  if (id != g->nbuffers) return fail(p, "buffer %d out of order (expected %d)", id, g->nbuffers);
  nrt_graph_buffer b = {.slot = -1};
  int kind = -1;
  for (int k = 0; k < NRT_BUFFER_KIND_COUNT; k++)
    if (!strcmp(tk->t[2], nrt_buffer_kind_name((nrt_buffer_kind)k))) kind = k;
  if (kind < 0) return fail(p, "unknown buffer kind '%s'", tk->t[2]);
  b.kind = (nrt_buffer_kind)kind;
  if (strcmp(tk->t[3], "bytes") || !parse_i64(tk->t[4], &b.bytes) || b.bytes < 0)
    return fail(p, "expected 'bytes <n>' with n >= 0");
  unsigned char *data = NULL;
  for (int i = 5; i < tk->n; i++) {
    if (!strcmp(tk->t[i], "slot") && i + 1 < tk->n) {
      if (!parse_int(tk->t[++i], 0, INT32_MAX, &b.slot)) return fail(p, "bad slot '%s'", tk->t[i]);
    } else if (!strcmp(tk->t[i], "mutated")) {
      b.mutated = true;
    } else if (!strcmp(tk->t[i], "data") && i + 1 < tk->n) {
      const char *hex = tk->t[++i];
      if (b.kind != NRT_BUFFER_CONSTANT) return fail(p, "only constants have data");
      if ((int64_t)strlen(hex) != 2 * b.bytes) {
        free(data);
        return fail(p, "constant data has %zu hex digits, expected %lld", strlen(hex), (long long)(2 * b.bytes));
      }
      free(data);
      data = malloc((size_t)b.bytes);
      if (!data) return NRT_ERROR_OUT_OF_MEMORY;
      for (int64_t j = 0; j < b.bytes; j++) {
        int hi = hexval(hex[2 * j]), lo = hexval(hex[2 * j + 1]);
        if (hi < 0 || lo < 0) {
          free(data);
          return fail(p, "constant data is not hex");
        }
        data[j] = (unsigned char)(hi << 4 | lo);
      }
    } else {
      free(data);
      return fail(p, "unexpected '%s' in a buffer line", tk->t[i]);
    }
  }
  bool slotted = b.kind == NRT_BUFFER_INPUT || b.kind == NRT_BUFFER_OUTPUT;
  if (slotted != (b.slot >= 0)) {
    free(data);
    return fail(p, "%s buffers %s a slot", nrt_buffer_kind_name(b.kind), slotted ? "need" : "have no");
  }
  if (b.mutated && b.kind != NRT_BUFFER_INPUT) {
    free(data);
    return fail(p, "only inputs are 'mutated'");
  }
  if (b.kind == NRT_BUFFER_CONSTANT && b.bytes > 0 && !data) return fail(p, "constant without data");
  b.data = data;
  nrt_status st = nrt_graph_add_buffer(g, &b, NULL);
  free(data);
  return st;
}

static nrt_status parse_operand(const parser *p, const tokens *tk, nrt_graph_node *n, int k) {
  /* out|in b<id>|none @<offset> <dtype> [strides] */
  if (tk->n < 4) return fail(p, "expected '%s b<id> @<offset> <dtype> [strides]'", tk->t[0]);
  nrt_graph_operand *o = &n->operands[k];
  if (!strcmp(tk->t[1], "none")) o->buffer = -1;
  else if (tk->t[1][0] != 'b' || !parse_int(tk->t[1] + 1, 0, INT32_MAX, &o->buffer))
    return fail(p, "bad buffer reference '%s'", tk->t[1]);
  if (tk->t[2][0] != '@' || !parse_i64(tk->t[2] + 1, &o->offset)) return fail(p, "bad offset '%s'", tk->t[2]);
  if (!parse_dtype(tk->t[3], &o->dtype)) return fail(p, "unknown dtype '%s'", tk->t[3]);
  int i = 4, ns;
  nrt_status st = parse_list(p, tk, &i, o->strides, NRT_MAX_DIMS, &ns, "strides");
  if (st != NRT_SUCCESS) return st;
  if (i != tk->n) return fail(p, "unexpected '%s' after strides", tk->t[i]);
  return NRT_SUCCESS;
}

static nrt_status parse_node(parser *p, const tokens *tk, nrt_graph *g) {
  /* node <id> <OP> compute <dtype> sizes [..] outputs <n> inputs <m> */
  int id;
  if (tk->n < 2 || !parse_int(tk->t[1], 0, INT32_MAX, &id)) return fail(p, "expected 'node <id> <OP> ...'");
  if (id != g->nnodes) return fail(p, "node %d out of order (expected %d)", id, g->nnodes);
  nrt_graph_node n;
  nrt_graph_node_init(&n, NRT_OP_COPY, NRT_FLOAT32, 0, NULL, 1, 1);
  if (tk->n < 3 || !parse_op(tk->t[2], &n.op)) return fail(p, "unknown op '%s'", tk->n > 2 ? tk->t[2] : "");
  int i = 3;
  bool have_out = false, have_in = false;
  while (i < tk->n) {
    const char *key = tk->t[i++];
    if (!strcmp(key, "compute") && i < tk->n) {
      if (!parse_dtype(tk->t[i++], &n.compute_dtype)) return fail(p, "unknown dtype '%s'", tk->t[i - 1]);
    } else if (!strcmp(key, "sizes")) {
      nrt_status st = parse_list(p, tk, &i, n.sizes, NRT_MAX_DIMS, &n.ndim, "sizes");
      if (st != NRT_SUCCESS) return st;
    } else if (!strcmp(key, "outputs") && i < tk->n) {
      if (!parse_int(tk->t[i++], 1, NRT_MAX_OPERANDS, &n.noutputs)) return fail(p, "outputs outside 1..%d", NRT_MAX_OPERANDS);
      have_out = true;
    } else if (!strcmp(key, "inputs") && i < tk->n) {
      if (!parse_int(tk->t[i++], 0, NRT_MAX_OPERANDS, &n.ninputs)) return fail(p, "inputs outside 0..%d", NRT_MAX_OPERANDS);
      have_in = true;
    } else {
      return fail(p, "unexpected '%s' in a node line", key);
    }
  }
  if (!have_out || !have_in) return fail(p, "a node needs 'outputs <n> inputs <m>'");
  if (n.noutputs + n.ninputs > NRT_MAX_OPERANDS) return fail(p, "more than %d operands", NRT_MAX_OPERANDS);
  int nops = n.noutputs + n.ninputs, seen = 0;
  char *location = NULL;
  nrt_status st = NRT_SUCCESS;
  tokens sub;
  for (;;) {
    if (!next_line(p, &st)) {
      if (st == NRT_SUCCESS) st = fail(p, "node %d has no 'end'", id);
      break;
    }
    if ((st = tokenize(p, &sub)) != NRT_SUCCESS) break;
    if (sub.n == 0) continue;
    const char *key = sub.t[0];
    if (!strcmp(key, "end")) {
      if (seen != nops) st = fail(p, "node %d has %d operands, expected %d", id, seen, nops);
      break;
    }
    if (!strcmp(key, "out") || !strcmp(key, "in")) {
      bool want_out = seen < n.noutputs;
      if (seen == nops) {
        st = fail(p, "more than %d operands", nops);
        break;
      }
      if (want_out != !strcmp(key, "out")) {
        st = fail(p, "operand %d must be '%s'", seen, want_out ? "out" : "in");
        break;
      }
      if ((st = parse_operand(p, &sub, &n, seen)) != NRT_SUCCESS) break;
      seen++;
    } else if (!strcmp(key, "scalars")) {
      if (sub.n != 1 + NRT_MAX_SCALARS) {
        st = fail(p, "scalars takes %d values", NRT_MAX_SCALARS);
        break;
      }
      for (int s = 0; s < NRT_MAX_SCALARS && st == NRT_SUCCESS; s++)
        if (!parse_scalar(sub.t[1 + s], &n.scalars[s])) st = fail(p, "bad scalar '%s'", sub.t[1 + s]);
      if (st != NRT_SUCCESS) break;
    } else if (!strcmp(key, "params")) {
      if (sub.n != 1 + NRT_MAX_PARAMS) {
        st = fail(p, "params takes %d values", NRT_MAX_PARAMS);
        break;
      }
      for (int s = 0; s < NRT_MAX_PARAMS && st == NRT_SUCCESS; s++)
        if (!parse_i64(sub.t[1 + s], &n.params[s])) st = fail(p, "bad param '%s'", sub.t[1 + s]);
      if (st != NRT_SUCCESS) break;
    } else if (!strcmp(key, "aux")) {
      int j = 1, na;
      if ((st = parse_list(p, &sub, &j, n.aux, 2 * NRT_MAX_DIMS, &na, "aux")) != NRT_SUCCESS) break;
    } else if (!strcmp(key, "rng")) {
      if (sub.n != 3 || !parse_int(sub.t[1], -1, NRT_MAX_PARAMS - 1, &n.rng_seed_param) ||
          !parse_int(sub.t[2], -1, NRT_MAX_PARAMS - 1, &n.rng_offset_param)) {
        st = fail(p, "expected 'rng <seed param> <offset param>' (each -1..%d)", NRT_MAX_PARAMS - 1);
        break;
      }
    } else if (!strcmp(key, "loc")) {
      if (sub.n != 2) {
        st = fail(p, "expected 'loc \"...\"'");
        break;
      }
      free(location);
      location = NULL;
      if ((st = parse_string(p, sub.t[1], &location)) != NRT_SUCCESS) break;
    } else {
      st = fail(p, "unexpected '%s' inside node %d", key, id);
      break;
    }
  }
  if (st == NRT_SUCCESS) {
    n.location = location;
    st = nrt_graph_add_node(g, &n, NULL);
  }
  free(location);
  return st;
}

nrt_status nrt_graph_parse(const char *text, size_t length, nrt_graph **out_graph) {
  if (!text || !out_graph) return NRT_ERROR_INVALID_ARGUMENT;
  *out_graph = NULL;
  nrt_graph *g;
  nrt_status st = nrt_graph_create(&g);
  if (st != NRT_SUCCESS) return st;
  parser p = {.text = text, .len = length};
  tokens tk;
  bool header = false;
  while (st == NRT_SUCCESS && next_line(&p, &st)) {
    if ((st = tokenize(&p, &tk)) != NRT_SUCCESS) break;
    if (tk.n == 0) continue;
    if (!header) {
      int version;
      if (tk.n != 2 || strcmp(tk.t[0], "nrt-graph") || !parse_int(tk.t[1], 0, INT32_MAX, &version)) {
        st = fail(&p, "expected the header 'nrt-graph %d'", NRT_GRAPH_FORMAT_VERSION);
      } else if (version != NRT_GRAPH_FORMAT_VERSION) {
        st = fail(&p, "format version %d, this runtime reads %d", version, NRT_GRAPH_FORMAT_VERSION);
      }
      header = true;
      continue;
    }
    if (!strcmp(tk.t[0], "buffer")) {
      st = parse_buffer(&p, &tk, g);
    } else if (!strcmp(tk.t[0], "node")) {
      st = parse_node(&p, &tk, g);
    } else if (!strcmp(tk.t[0], "rng")) {
      if (tk.n != 7 || strcmp(tk.t[1], "seed") || !parse_u64(tk.t[2], &g->rng_seed) || strcmp(tk.t[3], "base") ||
          !parse_u64(tk.t[4], &g->rng_base_offset) || strcmp(tk.t[5], "advance") ||
          !parse_u64(tk.t[6], &g->rng_advance))
        st = fail(&p, "expected 'rng seed <n> base <n> advance <n>'");
    } else {
      st = fail(&p, "unexpected '%s'", tk.t[0]);
    }
  }
  if (st == NRT_SUCCESS && !header) {
    p.line = p.line ? p.line : 1;
    st = fail(&p, "empty input: expected the header 'nrt-graph %d'", NRT_GRAPH_FORMAT_VERSION);
  }
  free(p.buf);
  free(p.tok);
  if (st != NRT_SUCCESS) {
    nrt_graph_destroy(g);
    return st;
  }
  *out_graph = g;
  return NRT_SUCCESS;
}

/* ---- files ----------------------------------------------------------------------- */

nrt_status nrt_graph_save(const nrt_graph *g, const char *path) {
  char *text;
  size_t len;
  nrt_status st = nrt_graph_write(g, &text, &len);
  if (st != NRT_SUCCESS) return st;
  FILE *f = fopen(path, "wb");
  bool ok = f && fwrite(text, 1, len, f) == len;
  if (f && fclose(f) != 0) ok = false;
  free(text);
  if (!ok) {
    nrt_set_error_message("nrt_graph_save: cannot write %s: %s", path, strerror(errno));
    return NRT_ERROR_INVALID_ARGUMENT;
  }
  return NRT_SUCCESS;
}

nrt_status nrt_graph_load(const char *path, nrt_graph **out_graph) {
  char *text;
  size_t len;
  nrt_status st = nrt_read_file("nrt_graph_load", path, &text, &len);
  if (st != NRT_SUCCESS) return st;
  st = nrt_graph_parse(text, len, out_graph);
  free(text);
  return st;
}

/* Reads a whole file (graph text or a program artifact). */
nrt_status nrt_read_file(const char *fn, const char *path, char **out_data, size_t *out_size) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    nrt_set_error_message("%s: cannot open %s: %s", fn, path, strerror(errno));
    return NRT_ERROR_INVALID_ARGUMENT;
  }
  size_t cap = 1 << 16, len = 0;
  char *data = malloc(cap + 1);
  while (data) {
    size_t n = fread(data + len, 1, cap - len, f);
    len += n;
    if (len < cap) break;
    cap *= 2;
    char *grown = realloc(data, cap + 1);
    if (!grown) {
      free(data);
      data = NULL;
    } else {
      data = grown;
    }
  }
  bool err = ferror(f);
  fclose(f);
  if (!data || err) {
    free(data);
    nrt_set_error_message("%s: cannot read %s", fn, path);
    return data ? NRT_ERROR_INVALID_ARGUMENT : NRT_ERROR_OUT_OF_MEMORY;
  }
  data[len] = '\0';
  *out_data = data;
  *out_size = len;
  return NRT_SUCCESS;
}
