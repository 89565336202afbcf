/* The anchor for gpudiag's link test: two ranks exchange a buffer in both
 * directions at once (MPI_Irecv + MPI_Isend, MPI_Waitall), timed the way
 * `gpudiag bench --links` times a pair: warm-up exchanges, then the median
 * of the timed ones. Prints "bytes seconds" per size on rank 0. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != 2) {
    if (rank == 0) fprintf(stderr, "mpi_pair: run with 2 ranks\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  long long min = argc > 1 ? atoll(argv[1]) : 1 << 20;
  long long max = argc > 2 ? atoll(argv[2]) : 64 << 20;
  int iters = argc > 3 ? atoi(argv[3]) : 20, warmup = argc > 4 ? atoi(argv[4]) : 2;
  float* out = malloc((size_t)max);
  float* in = malloc((size_t)max);
  double* times = malloc(sizeof(double) * (size_t)iters);
  for (long long i = 0; i < max / 4; ++i) out[i] = (float)rank;
  const int peer = 1 - rank;
  for (long long bytes = min; bytes <= max; bytes *= 2) {
    int n = (int)(bytes / 4);
    for (int i = 0; i < warmup + iters; ++i) {
      MPI_Request r[2];
      double t0 = MPI_Wtime();
      MPI_Irecv(in, n, MPI_FLOAT, peer, 1, MPI_COMM_WORLD, &r[0]);
      MPI_Isend(out, n, MPI_FLOAT, peer, 1, MPI_COMM_WORLD, &r[1]);
      MPI_Waitall(2, r, MPI_STATUSES_IGNORE);
      if (i >= warmup) times[i - warmup] = MPI_Wtime() - t0;
    }
    qsort(times, (size_t)iters, sizeof(double), cmp);
    double mine = times[iters / 2], best = 0;
    /* The faster end, as gpudiag takes it. */
    MPI_Reduce(&mine, &best, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
    if (rank == 0) printf("%lld %.9f\n", bytes, best);
  }
  free(out);
  free(in);
  free(times);
  MPI_Finalize();
  return 0;
}
