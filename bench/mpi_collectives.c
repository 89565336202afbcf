/* The anchor for gpudiag bench on the host: Open MPI's MPI_Allreduce,
 * MPI_Allgather or MPI_Alltoall (float, out of place) timed the way
 * gpudiag bench times its own: per size, warm-up calls, a barrier, then
 * the mean of the timed calls, and the slowest rank's mean (gpudiag's
 * -a 3). Sizes as nccl-tests turns -b/-e bytes into counts. Prints
 * "bytes seconds" per size on rank 0.
 *
 *   mpi_collectives OP MIN MAX ITERS WARMUP     OP: allreduce | allgather | alltoall */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void call(const char* op, float* send, float* recv, long long count, long long per) {
  if (strcmp(op, "allreduce") == 0)
    MPI_Allreduce(send, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  else if (strcmp(op, "allgather") == 0)
    MPI_Allgather(send, (int)per, MPI_FLOAT, recv, (int)per, MPI_FLOAT, MPI_COMM_WORLD);
  else
    MPI_Alltoall(send, (int)per, MPI_FLOAT, recv, (int)per, MPI_FLOAT, MPI_COMM_WORLD);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  if (argc < 6) {
    if (rank == 0) fprintf(stderr, "usage: %s OP MIN MAX ITERS WARMUP\n", argv[0]);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const char* op = argv[1];
  long long min = atoll(argv[2]), max = atoll(argv[3]);
  int iters = atoi(argv[4]), warmup = atoi(argv[5]);
  float* send = malloc((size_t)max);
  float* recv = malloc((size_t)max);
  for (long long i = 0; i < max / 4; ++i) send[i] = recv[i] = 1.0f;
  for (long long bytes = min; bytes <= max; bytes *= 2) {
    long long count = bytes / 4, per = (count / n) & ~3LL; /* 16-byte blocks, as nccl-tests */
    long long shown = strcmp(op, "allreduce") == 0 ? count * 4 : per * n * 4;
    for (int i = 0; i < warmup; ++i) call(op, send, recv, count, per);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; ++i) call(op, send, recv, count, per);
    double mine = (MPI_Wtime() - t0) / iters, slowest = 0;
    MPI_Reduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) printf("%lld %.9f\n", shown, slowest);
  }
  free(send);
  free(recv);
  MPI_Finalize();
  return 0;
}
