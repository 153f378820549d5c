/* launcher/agent_main.c: `ftl-rank-agent`, the rank agent as a binary of its own (libexec beside
 * `ftl`). `ftl run` starts one per rank (through mpirun or srun), so its start-up is paid once per
 * rank on every launch and restart: this binary links only what the agent uses (core, the
 * rendezvous client, the relay, the GPU watch, jansson), not `ftl`'s HDF5, libarchive and YAML with
 * the ~40 libraries they pull in (8 ms of dynamic loading per start on the measuring machine).
 * `ftl rank-agent` stays the same code, for a launch without this binary beside `ftl`. */
#include "launcher/launcher.h"

int main(int argc, char **argv) { return ln_rank_agent_main(argc, argv); }
