/* MPI_Comm_spawn from a direct-launched world (t0060): every rank calls it
 * collectively, rank 0 the root, spawning one copy of this program. Each
 * rank prints what it got, then finalizes; a spawned child (should spawn
 * ever work) prints a line and finalizes at once.
 *
 * mpi_spawn [return] [ignore]
 *   return: MPI_ERRORS_RETURN on MPI_COMM_WORLD, so that a refused spawn
 *           comes back as an error code (else the default: the MPI library
 *           aborts the world);
 *   ignore: MPI_ERRCODES_IGNORE for the spawned processes' codes. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm parent;
  MPI_Comm_get_parent(&parent);
  if (parent != MPI_COMM_NULL) {
    printf("spawned child\n");
    fflush(stdout);
    MPI_Finalize();
    return 0;
  }
  int errors_return = 0, ignore_codes = 0;
  for (int i = 1; i < argc; ++i) {
    errors_return = errors_return || strcmp(argv[i], "return") == 0;
    ignore_codes = ignore_codes || strcmp(argv[i], "ignore") == 0;
  }
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (errors_return) MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  printf("rank %d of %d spawning\n", rank, size);
  fflush(stdout);
  MPI_Comm children = MPI_COMM_NULL;
  int codes[1] = {0};
  const int rc = MPI_Comm_spawn(argv[0], MPI_ARGV_NULL, 1, MPI_INFO_NULL, 0, MPI_COMM_WORLD,
                                &children, ignore_codes ? MPI_ERRCODES_IGNORE : codes);
  if (rc == MPI_SUCCESS) {
    printf("rank %d spawn succeeded\n", rank);
  } else {
    char text[MPI_MAX_ERROR_STRING];
    int length = 0;
    MPI_Error_string(rc, text, &length);
    printf("rank %d spawn failed: %s\n", rank, text);
  }
  fflush(stdout);
  MPI_Finalize();
  return rc == MPI_SUCCESS ? 0 : 3;
}
