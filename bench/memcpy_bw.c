/*
 * memcpy_bw.c - the physical reference of bench/compare.sh: single-thread
 * memcpy bandwidth of this machine, copying a 256 MiB buffer into another
 * (both far larger than any cache). Prints bytes copied per second in GB/s
 * (1e9 B/s, as the collective benchmarks), the best and the median of the
 * repetitions, as one CSV line:
 *
 *   memcpy_bytes,reps,best_GBps,median_GBps
 *
 * Usage: memcpy_bw [MiB (default 256)] [reps (default 10)]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/** Seconds on a monotonic clock. */
static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/** qsort comparator for doubles, ascending. */
static int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

/** Entry point: allocate, touch, copy `reps` times, print best and median. */
int main(int argc, char** argv) {
  size_t mib = argc > 1 ? (size_t)strtoul(argv[1], NULL, 10) : 256;
  int reps = argc > 2 ? atoi(argv[2]) : 10;
  size_t bytes = mib << 20;
  char* src;
  char* dst;
  double* rates;
  int i;
  if (mib == 0 || reps < 1) {
    fprintf(stderr, "usage: memcpy_bw [MiB] [reps]\n");
    return 2;
  }
  src = (char*)aligned_alloc(4096, bytes);
  dst = (char*)aligned_alloc(4096, bytes);
  rates = (double*)calloc((size_t)reps, sizeof(double));
  if (!src || !dst || !rates) {
    fprintf(stderr, "memcpy_bw: out of memory\n");
    return 1;
  }
  /* Touch every page of both buffers so no page fault is timed. */
  memset(src, 1, bytes);
  memset(dst, 0, bytes);
  memcpy(dst, src, bytes); /* warm-up */
  for (i = 0; i < reps; ++i) {
    double t0 = now_s();
    memcpy(dst, src, bytes);
    rates[i] = (double)bytes / 1e9 / (now_s() - t0);
    /* Keep the copy observable so it is never optimised away. */
    if (dst[(size_t)i * 4096 % bytes] != 1) return 1;
  }
  qsort(rates, (size_t)reps, sizeof(double), cmp_double);
  printf("memcpy_bytes,reps,best_GBps,median_GBps\n");
  printf("%zu,%d,%.3f,%.3f\n", bytes, reps, rates[reps - 1], rates[reps / 2]);
  free(src);
  free(dst);
  free(rates);
  return 0;
}
