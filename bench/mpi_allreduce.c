/* The anchor for gpudiag's host all-reduce: MPI_Allreduce (float sum, in
 * place) timed the same way gpudiag bench times its own: per size, warm-up
 * iterations, a barrier, then the mean of the timed ones, and the slowest
 * rank's time. Prints "bytes seconds" per size on rank 0. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  long long min = argc > 1 ? atoll(argv[1]) : 1 << 20;
  long long max = argc > 2 ? atoll(argv[2]) : 256 << 20;
  int iters = argc > 3 ? atoi(argv[3]) : 20, warmup = argc > 4 ? atoi(argv[4]) : 2;
  float* buf = malloc((size_t)max);
  for (long long i = 0; i < max / 4; ++i) buf[i] = 1.0f;
  for (long long bytes = min; bytes <= max; bytes *= 2) {
    int n = (int)(bytes / 4);
    for (int i = 0; i < warmup; ++i)
      MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; ++i)
      MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double mine = (MPI_Wtime() - t0) / iters, slowest = 0;
    MPI_Reduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) printf("%lld %.9f\n", bytes, slowest);
  }
  free(buf);
  MPI_Finalize();
  return 0;
}
