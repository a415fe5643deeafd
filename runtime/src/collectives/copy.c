/* The copies of the collectives: into the staging slots (read by the peers
 * soon after, so they stay cached) and out of them into a large result
 * buffer (written once, not read again by this operation, so they stream
 * past the caches).
 *
 * Why not memcpy alone: glibc's memcpy moves mid-size blocks with `rep
 * movsb`, which on the AMD hosts measured here runs at a third of its speed
 * when source and destination differ in alignment (a 16-byte-offset malloc
 * buffer into a page-aligned slot: a 64 MiB all_reduce on 4 ranks took
 * 100-140 ms instead of 45); and a plain store first reads the line it
 * writes, a third more memory traffic on a buffer that is only written. The
 * loops below align the destination and load unaligned, and the streaming
 * form uses non-temporal stores. SSE2 is the x86-64 baseline, so no ISA
 * switch is needed; 16-byte accesses already saturate memory. */
#include <string.h>

#include "collectives/collectives.h"
#include "kernels/common/isa.h"

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

/* d[0..body) = s[0..body), 64 bytes at a time: unaligned loads, stores
 * (aligned: d is) by STORE. */
#define COPY_LINES(STORE)                                                   \
  for (size_t i = 0; i < body; i += 64) {                                   \
    __m128i a = _mm_loadu_si128((const __m128i *)(s + i));                  \
    __m128i b = _mm_loadu_si128((const __m128i *)(s + i + 16));             \
    __m128i c = _mm_loadu_si128((const __m128i *)(s + i + 32));             \
    __m128i e = _mm_loadu_si128((const __m128i *)(s + i + 48));             \
    STORE((__m128i *)(d + i), a);                                           \
    STORE((__m128i *)(d + i + 16), b);                                      \
    STORE((__m128i *)(d + i + 32), c);                                      \
    STORE((__m128i *)(d + i + 48), e);                                      \
  }

/* Below this a copy is cheap whatever its alignment. */
#define SMALL_COPY 4096

void nrt_coll_copy(void *dst, const void *src, size_t bytes, bool stream) {
#if defined(__x86_64__)
  /* Equal alignment: memcpy's own path is the fastest measured. */
  if (bytes >= SMALL_COPY && !nrt_kernels_reference() && (stream || (((uintptr_t)dst ^ (uintptr_t)src) & 63))) {
    char *d = dst;
    const char *s = src;
    size_t head = (size_t)(-(uintptr_t)d & 63);
    memcpy(d, s, head);
    d += head, s += head, bytes -= head;
    size_t body = bytes & ~(size_t)63;
    if (stream) {
      COPY_LINES(_mm_stream_si128);
      _mm_sfence(); /* the streamed lines are visible before the step is published */
    } else {
      COPY_LINES(_mm_store_si128);
    }
    memcpy(d + body, s + body, bytes - body);
    return;
  }
#endif
  /* The reference: the plain copy (same bytes; only the speed differs). */
  (void)stream;
  memcpy(dst, src, bytes);
}
