/* hpcq's MPI sample: rank and size, the time MPI_Init took, an
 * MPI_Allreduce of the ranks, and a token passed once around a ring of
 * MPI_Sendrecv (rank r to r+1), so that it crosses every node boundary.
 * Rank 0 prints one summary line; every rank prints where it ran.
 * Build: mpicc.mpich -O2 -o mpi_ring mpi_ring.c (MPICH: direct launch by hpcq;
 *        mpicc.openmpi for Open MPI, run with mpirun through hpcq-rsh)
 * Arguments: [late RANK SECONDS] makes task RANK wait before MPI_Init;
 *            [early RANK CODE] makes task RANK exit with CODE before it;
 *            [fail RANK CODE] makes RANK exit with CODE after MPI_Init;
 *            [abort RANK CODE] makes RANK call MPI_Abort with CODE while
 *              the others wait (a rank whose peer is gone may abort too,
 *              with its MPI's own error code, after it);
 *            [sleep SECONDS] makes every rank sleep before MPI_Finalize. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The CPUs this process may run on, as the kernel lists them. */
static void allowed_cpus(char* out, size_t size) {
  snprintf(out, size, "?");
  FILE* f = fopen("/proc/self/status", "r");
  if (!f) return;
  char line[512];
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "Cpus_allowed_list:", 18) == 0) {
      snprintf(out, size, "%s", line + 18 + strspn(line + 18, " \t"));
      out[strcspn(out, "\n")] = '\0';
    }
  }
  fclose(f);
}

static double now_seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char** argv) {
  /* Before MPI_Init the rank is the launcher's: hpcq's (or PMI's) variable. */
  const char* task = getenv("HPCQ_TASK_RANK") ? getenv("HPCQ_TASK_RANK") : getenv("PMI_RANK");
  if (argc == 4 && task && atoi(task) == atoi(argv[2])) {
    if (strcmp(argv[1], "late") == 0) sleep((unsigned)atoi(argv[3]));
    if (strcmp(argv[1], "early") == 0) exit(atoi(argv[3]));
  }
  const double before = now_seconds();
  MPI_Init(&argc, &argv);
  const double after = now_seconds();
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc == 4 && atoi(argv[2]) == rank) {
    if (strcmp(argv[1], "fail") == 0) exit(atoi(argv[3]));
    if (strcmp(argv[1], "abort") == 0) MPI_Abort(MPI_COMM_WORLD, atoi(argv[3]));
  } else if (argc == 4 && strcmp(argv[1], "abort") == 0) {
    sleep(120); /* until the abort ends this rank */
  }

  long sum = 0, mine = rank;
  MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);

  /* The ring: each rank sends the token it holds to rank + 1 and takes the
   * one of rank - 1; after one step rank r holds r - 1's token. */
  const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  int token = rank, received = -1;
  MPI_Sendrecv(&token, 1, MPI_INT, next, 7, &received, 1, MPI_INT, prev, 7, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
  const int ring_ok = received == prev;
  int all_ok = 0;
  MPI_Allreduce(&ring_ok, &all_ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);

  /* The latest MPI_Init end over the ranks, from the earliest start; and how
   * far the latest start was behind the earliest (the launch's stagger). */
  double first_start = before, last_start = before, last_end = after;
  MPI_Reduce(&before, &first_start, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
  MPI_Reduce(&before, &last_start, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  MPI_Reduce(&after, &last_end, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);

  const char* node = getenv("HPCQ_NODENAME");
  char cpus[256];
  allowed_cpus(cpus, sizeof cpus);
  printf("rank %d of %d on %s cpus %s\n", rank, size, node ? node : "?", cpus);
  fflush(stdout);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) {
    printf(
        "world %d sum %ld expected %ld ring %s init_end %.6f init_seconds %.3f "
        "start_spread %.3f\n",
        size, sum, (long)size * (size - 1) / 2, all_ok ? "ok" : "broken", last_end,
        last_end - first_start, last_start - first_start);
    fflush(stdout);
  }
  if (argc == 3 && strcmp(argv[1], "sleep") == 0) sleep((unsigned)atoi(argv[2]));
  MPI_Finalize();
  return 0;
}
