/* What the streams report for torch.cuda-style APIs: device busy time
 * (torch.neuron.utilization; work run by a device's streams is counted,
 * idle time is not) and the lookup behind torch.neuron.ExternalStream. */
#include <time.h>

#include "testing.h"

static nrt_status sleep_task(void *arg) {
  struct timespec ts = {0, *(long *)arg};
  nanosleep(&ts, NULL);
  return NRT_SUCCESS;
}

static void test_busy_time_counts_work(void) {
  nrt_stream *s = NULL;
  CHECK_OK(nrt_stream_get(0, 2, &s));
  uint64_t busy0, now0, busy1, now1;
  CHECK_OK(nrt_device_busy_time(0, &busy0, &now0));
  long ns = 30 * 1000 * 1000;
  CHECK_OK(nrt_stream_enqueue(s, "sleep", sleep_task, &ns, NULL));
  CHECK_OK(nrt_stream_synchronize(s));
  CHECK_OK(nrt_device_busy_time(0, &busy1, &now1));
  CHECK(busy1 - busy0 >= 25ull * 1000 * 1000); /* the 30 ms task */
  CHECK(busy1 - busy0 <= now1 - now0);         /* one stream: never more than wall time */

  /* Idle time is not busy time. */
  struct timespec idle = {0, 30 * 1000 * 1000};
  nanosleep(&idle, NULL);
  uint64_t busy2, now2;
  CHECK_OK(nrt_device_busy_time(0, &busy2, &now2));
  CHECK(busy2 - busy1 < 10ull * 1000 * 1000);
  CHECK(now2 - now1 >= 25ull * 1000 * 1000);

  /* Another device's counter did not move. */
  uint64_t other0, t0;
  CHECK_OK(nrt_device_busy_time(1, &other0, &t0));
  CHECK(other0 == 0);
  CHECK_STATUS(nrt_device_busy_time(99, &busy2, &now2), NRT_ERROR_INVALID_DEVICE);
  CHECK_STATUS(nrt_device_busy_time(0, NULL, &now2), NRT_ERROR_INVALID_ARGUMENT);
}

/* ExternalStream's lookup: a stream's own address maps back to it; any
 * other address is refused without being read. */
static void test_stream_lookup(void) {
  nrt_stream *s = NULL;
  CHECK_OK(nrt_stream_get(1, 5, &s));
  int dev = -1, idx = -1;
  CHECK_OK(nrt_stream_lookup(s, &dev, &idx));
  CHECK(dev == 1 && idx == 5);
  CHECK_STATUS(nrt_stream_lookup((char *)s + 1, &dev, &idx), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(nrt_stream_lookup(&dev, &dev, &idx), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(nrt_stream_lookup(NULL, &dev, &idx), NRT_ERROR_INVALID_ARGUMENT);
}

int main(void) {
  RUN_TEST(test_busy_time_counts_work);
  RUN_TEST(test_stream_lookup);
  return TEST_RESULT();
}
