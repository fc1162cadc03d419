/* vm_stalls: finds the moments a machine stops running its threads (a virtual machine's
 * host throttling it, say), which no timer inside the machine can tell from a busy CPU
 * unless it watches for them (issue 16: they set an ensemble's 4 x 64 mixed-phase p99
 * on the project's Firecracker VM).
 *
 *   vm_stalls probe SECONDS           sleeps 200 us in a loop; prints each wake-up more
 *                                     than 6 ms late as WALL_MS_WITHIN_SECOND:LATE_MS
 *   vm_stalls spin THREADS SECONDS    THREADS threads that spin; prints each gap above
 *                                     5 ms (both threads at once: the whole machine stopped)
 *   vm_stalls sync FILE COUNT         appends 4 KB to FILE (64 MB preallocated) COUNT times,
 *                                     each followed by fdatasync; prints syncs above 4 ms
 * Each mode ends with a summary line. build: gcc -O2 -pthread -o vm_stalls vm_stalls.c -lm
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double wall_ms(void) { struct timespec t; clock_gettime(CLOCK_REALTIME, &t); return t.tv_sec * 1e3 + t.tv_nsec / 1e6; }

static int probe(double seconds) {
  double end = wall_ms() + seconds * 1000; long loops = 0, late = 0;
  while (wall_ms() < end) {
    double a = wall_ms(); usleep(200); double d = wall_ms() - a; loops++;
    if (d > 6) { late++; printf("%.1f:%.1f ", fmod(a, 1000.0), d); }
  }
  printf("\nprobe: %ld sleeps, %ld woke more than 6 ms late\n", loops, late);
  return 0;
}

static double spin_seconds;
static void *spin(void *arg) {
  long id = (long)arg; double last = wall_ms(), end = last + spin_seconds * 1000; long gaps = 0;
  for (;;) {
    double t = wall_ms();
    if (t - last > 5) { gaps++; printf("thread %ld: %.1f ms at %.1f\n", id, t - last, fmod(last, 1000.0)); }
    last = t;
    if (t > end) break;
  }
  printf("thread %ld: %ld gaps above 5 ms\n", id, gaps);
  return NULL;
}

static int syncs(const char *path, long count) {
  int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) { perror(path); return 1; }
  char *zeros = calloc(1, 1 << 20), block[4096]; memset(block, 'x', sizeof block);
  for (long off = 0; off < 64L << 20; off += 1 << 20)
    if (pwrite(fd, zeros, 1 << 20, off) != 1 << 20) { perror("pwrite"); return 1; }
  if (fsync(fd)) { perror("fsync"); return 1; }
  double t0 = wall_ms(), sum = 0; long slow = 0;
  for (long i = 0; i < count; i++) {
    double a = wall_ms();
    if (pwrite(fd, block, sizeof block, (i * (long)sizeof block) % (64L << 20)) < 0 || fdatasync(fd)) { perror("write"); return 1; }
    double d = wall_ms() - a; sum += d;
    if (d > 4) { slow++; printf("%.1f:%.1f ", fmod(a, 1000.0), d); }
  }
  printf("\nsync: %ld syncs in %.0f ms, mean %.3f ms, %ld above 4 ms\n", count, wall_ms() - t0, sum / count, slow);
  close(fd); unlink(path); free(zeros);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[1], "probe")) return probe(atof(argv[2]));
  if (argc == 4 && !strcmp(argv[1], "spin")) {
    int n = atoi(argv[2]); spin_seconds = atof(argv[3]); pthread_t t[16];
    if (n < 1 || n > 16) return 2;
    for (long i = 0; i < n; i++) pthread_create(&t[i], NULL, spin, (void *)i);
    for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
    return 0;
  }
  if (argc == 4 && !strcmp(argv[1], "sync")) return syncs(argv[2], atol(argv[3]));
  fprintf(stderr, "usage: vm_stalls probe SECONDS | spin THREADS SECONDS | sync FILE COUNT\n");
  return 2;
}
