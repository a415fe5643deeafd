/* What the allocator reports about itself: the segment/block snapshot
 * behind torch.neuron.memory_snapshot() and the pinned host statistics
 * behind torch.neuron.host_memory_stats(), checked against the allocations
 * the test made. */
#include <string.h>

#include "testing.h"

#define MiB ((size_t)1 << 20)

static void snapshot(int device, nrt_memory_segment_info *segs, size_t nseg_cap,
                     nrt_memory_block_info *blocks, size_t nblock_cap, size_t *nsegs, size_t *nblocks) {
  CHECK_OK(nrt_memory_snapshot(device, segs, nseg_cap, blocks, nblock_cap, nsegs, nblocks));
}

static void test_snapshot_matches_allocations(void) {
  nrt_stream *s = NULL;
  CHECK_OK(nrt_stream_get(1, 0, &s));
  CHECK_OK(nrt_empty_cache(1));
  size_t nsegs = 99, nblocks = 99;
  snapshot(1, NULL, 0, NULL, 0, &nsegs, &nblocks);
  CHECK(nsegs == 0 && nblocks == 0);

  void *a = NULL, *b = NULL, *big = NULL;
  CHECK_OK(nrt_malloc(1000, s, &a));      /* small pool: a 2 MiB segment, split */
  CHECK_OK(nrt_malloc(3000, s, &b));
  CHECK_OK(nrt_malloc(30 * MiB, s, &big)); /* large pool: its own segment */
  CHECK_OK(nrt_free(b));
  snapshot(1, NULL, 0, NULL, 0, &nsegs, &nblocks);
  CHECK(nsegs == 2);
  nrt_memory_segment_info segs[2];
  nrt_memory_block_info blocks[16];
  CHECK(nblocks <= 16);
  size_t n2 = 0, nb2 = 0;
  snapshot(1, segs, 2, blocks, 16, &n2, &nb2);
  CHECK(n2 == nsegs && nb2 == nblocks);

  uint64_t reserved = 0, allocated = 0;
  size_t seen_blocks = 0;
  for (size_t i = 0; i < n2; i++) {
    CHECK(segs[i].first_block == seen_blocks);
    uint64_t sum = 0, addr = segs[i].address;
    for (size_t j = 0; j < segs[i].nblocks; j++) {
      const nrt_memory_block_info *bl = &blocks[segs[i].first_block + j];
      CHECK(bl->address == addr); /* blocks tile their segment in address order */
      addr += bl->size;
      sum += bl->size;
      if (bl->state == NRT_BLOCK_ALLOCATED) allocated += bl->size;
      else CHECK(bl->requested == 0);
    }
    CHECK(sum == segs[i].size);
    CHECK(segs[i].stream_index == 0);
    seen_blocks += segs[i].nblocks;
    reserved += segs[i].size;
  }
  CHECK(seen_blocks == nb2);
  nrt_memory_stats st;
  CHECK_OK(nrt_memory_get_stats(1, &st));
  CHECK(reserved == (uint64_t)st.reserved_bytes[NRT_POOL_ALL].current);
  CHECK(allocated == (uint64_t)st.allocated_bytes[NRT_POOL_ALL].current);
  int small = segs[0].pool == NRT_POOL_SMALL ? 0 : 1;
  CHECK(segs[small].pool == NRT_POOL_SMALL && segs[1 - small].pool == NRT_POOL_LARGE);

  /* Short arrays get what fits and the full counts. */
  size_t n3 = 0, nb3 = 0;
  snapshot(1, segs, 1, blocks, 1, &n3, &nb3);
  CHECK(n3 == nsegs && nb3 == nblocks);
  CHECK_STATUS(nrt_memory_snapshot(1, NULL, 1, NULL, 0, &n3, &nb3), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(nrt_memory_snapshot(99, NULL, 0, NULL, 0, &n3, &nb3), NRT_ERROR_INVALID_DEVICE);
  CHECK_OK(nrt_free(a));
  CHECK_OK(nrt_free(big));
  CHECK_OK(nrt_empty_cache(1));
}

static void test_host_memory_stats(void) {
  nrt_host_memory_stats before, st;
  CHECK_OK(nrt_host_memory_get_stats(&before));
  void *p = NULL, *q = NULL;
  CHECK_OK(nrt_host_alloc(10000, &p));
  CHECK_OK(nrt_host_alloc(5000, &q));
  CHECK_OK(nrt_host_memory_get_stats(&st));
  CHECK(st.allocations.current == before.allocations.current + 2);
  CHECK(st.allocated_bytes.current == before.allocated_bytes.current + 15000);
  CHECK(st.allocated_bytes.peak >= st.allocated_bytes.current);
  CHECK_OK(nrt_host_free(p));
  CHECK_OK(nrt_host_free(q));
  CHECK_OK(nrt_host_memory_get_stats(&st));
  CHECK(st.allocations.current == before.allocations.current);
  CHECK(st.allocated_bytes.freed == before.allocated_bytes.freed + 15000);
  CHECK_STATUS(nrt_host_memory_get_stats(NULL), NRT_ERROR_INVALID_ARGUMENT);
}

int main(void) {
  RUN_TEST(test_snapshot_matches_allocations);
  RUN_TEST(test_host_memory_stats);
  return TEST_RESULT();
}
