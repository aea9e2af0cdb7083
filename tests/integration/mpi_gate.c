/* An MPI world that holds until a gate file appears (t0065): each rank
 * records its start once (argv[2]), waits for argv[1], then the world
 * communicates (a barrier and an allreduce over MPI's own wire) and
 * finalizes (a PMI fence across the nodes). */
#include <mpi.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: mpi_gate GATE STARTS\n");
    return 2;
  }
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  FILE* starts = fopen(argv[2], "a");
  if (starts != NULL) {
    fprintf(starts, "%d\n", rank);
    fclose(starts);
  }
  printf("rank %d of %d begins\n", rank, size);
  fflush(stdout);
  struct stat st;
  while (stat(argv[1], &st) != 0) usleep(50 * 1000);
  MPI_Barrier(MPI_COMM_WORLD);
  int sum = 0;
  MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  printf("rank %d: sum %d\n", rank, sum);
  fflush(stdout);
  MPI_Finalize();
  return 0;
}
