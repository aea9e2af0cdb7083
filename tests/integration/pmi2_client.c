/* A PMI-2 client on Slurm's libpmi2 (Debian's libpmi2-0-dev), run as a task
 * of an hpcq job by t0038_mpi.py: it finds the job shell's server through
 * PMI_FD and PMI_RANK as it would srun's, puts a key of its own (a value with
 * ';' and '=' in it, which PMI-2 escapes on the wire), fences, reads the key
 * of a rank half the world away (on another node in a block layout) and the
 * world's PMI_process_mapping, and prints one line:
 *
 *   pmi2 rank R of N job JOBID node NODE peer P value VALUE mapping MAP ok
 *
 * "pmi2_client abort R" makes rank R call PMI2_Abort before the fence,
 * while the others wait in it. Any failed call prints "pmi2 rank R: ..." on
 * stderr and exits 3. */
#include <slurm/pmi2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank = -1;

static void check(int rc, const char* what) {
  if (rc != PMI2_SUCCESS) {
    fprintf(stderr, "pmi2 rank %d: %s failed: %d\n", rank, what, rc);
    exit(3);
  }
}

int main(int argc, char** argv) {
  int spawned = -1, size = 0, appnum = -1;
  check(PMI2_Init(&spawned, &size, &rank, &appnum), "PMI2_Init");
  if (spawned != 0 || appnum != 0 || size < 1 || rank < 0 || rank >= size) {
    fprintf(stderr, "pmi2 rank %d: PMI2_Init: spawned %d size %d appnum %d\n", rank, spawned, size,
            appnum);
    return 3;
  }
  char jobid[256];
  check(PMI2_Job_GetId(jobid, sizeof jobid), "PMI2_Job_GetId");

  const char* node = getenv("HPCQ_NODENAME");
  if (node == NULL) node = "?";
  char key[PMI2_MAX_KEYLEN], value[PMI2_MAX_VALLEN];
  snprintf(key, sizeof key, "card-%d", rank);
  snprintf(value, sizeof value, "rank=%d;node=%s;", rank, node);
  check(PMI2_KVS_Put(key, value), "PMI2_KVS_Put");

  if (argc == 3 && strcmp(argv[1], "abort") == 0 && atoi(argv[2]) == rank) {
    char msg[64];
    snprintf(msg, sizeof msg, "rank %d gives up", rank);
    PMI2_Abort(1, msg); /* does not return */
  }
  check(PMI2_KVS_Fence(), "PMI2_KVS_Fence");

  const int peer = (rank + size / 2) % size;
  char peer_key[PMI2_MAX_KEYLEN], peer_value[PMI2_MAX_VALLEN], expected[PMI2_MAX_VALLEN];
  int length = 0;
  snprintf(peer_key, sizeof peer_key, "card-%d", peer);
  check(PMI2_KVS_Get(jobid, peer, peer_key, peer_value, sizeof peer_value, &length),
        "PMI2_KVS_Get");
  snprintf(expected, sizeof expected, "rank=%d;node=", peer);
  if (strncmp(peer_value, expected, strlen(expected)) != 0 || length != (int)strlen(peer_value)) {
    fprintf(stderr, "pmi2 rank %d: key %s is '%s' (%d bytes)\n", rank, peer_key, peer_value,
            length);
    return 3;
  }

  char mapping[PMI2_MAX_VALLEN], universe[32];
  int found = 0;
  check(PMI2_Info_GetJobAttr("PMI_process_mapping", mapping, sizeof mapping, &found),
        "PMI2_Info_GetJobAttr(PMI_process_mapping)");
  if (!found) strcpy(mapping, "(none)");
  check(PMI2_Info_GetJobAttr("universeSize", universe, sizeof universe, &found),
        "PMI2_Info_GetJobAttr(universeSize)");
  if (!found || atoi(universe) != size) {
    fprintf(stderr, "pmi2 rank %d: universeSize %s\n", rank, found ? universe : "not found");
    return 3;
  }
  check(PMI2_Finalize(), "PMI2_Finalize");
  printf("pmi2 rank %d of %d job %s node %s peer %d value %s mapping %s ok\n", rank, size, jobid,
         node, peer, peer_value, mapping);
  return 0;
}
