/* checkpoint/ckpt_cli.h: `ftl ckpt ls|verify|show`, the checkpoint part of the ftl command.
 * Not here: argument parsing of the rest of `ftl` (launcher/main.c dispatches to this). */
#ifndef FTL_CKPT_CLI_H
#define FTL_CKPT_CLI_H

#ifdef __cplusplus
extern "C" {
#endif

/* argv[0] is "ckpt". Runs one subcommand and returns the process exit code: 0 success, 1 a
 * checkpoint failed verification (or none was found to verify), 2 usage or I/O error. Prints
 * results to stdout and diagnostics to stderr. Not thread-safe (uses stdio). */
int ck_ckpt_cli_main(int argc, char **argv);

#ifdef __cplusplus
}
#endif
#endif
