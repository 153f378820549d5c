/* tests/ckpt/ckpt_cli_tool.c: `ftl ckpt ...` as a standalone program for the tests, so they do
 * not depend on the launcher binary: `ckpt_cli_tool ckpt ls RUNDIR` runs `ftl ckpt ls RUNDIR`. */
#include "checkpoint/door.h"

int main(int argc, char **argv) { return argc < 2 ? 2 : ck_ckpt_cli_main(argc - 1, argv + 1); }
