/* pipeline/pipeline_cli.h: the pipeline's `ftl` subcommands (docs/cli.md). Each handler gets the
 * arguments after `ftl` (argv[0] is the subcommand's name) and returns the process exit code:
 * 0 success, 1 failure (the reason on stderr), 2 a bad command line.
 *
 *   ftl export RUNDIR [-o DIR] [--base-name NAME]
 *   ftl registry ls [NAME] | routes [--channel C] | fetch NAME@VERSION|NAME@CHANNEL DIR | check NAME
 *   ftl promote NAME VERSION --to CHANNEL [--why TEXT]
 *   ftl rollback NAME --channel CHANNEL [--why TEXT]
 *   ftl registry publish NAME PACKAGE [--channel C] [--why TEXT] [--signature SIG | --unverified]
 *                                     (a package built elsewhere: a signed verdict, or marked unverified)
 *   ftl registry trust KEY.pub | keygen OUT | sign-verdict --key KEY VERDICT PACKAGE|ADAPTER_DIR [-o SIG]
 * The registry is --registry DIR or $FTL_REGISTRY (keygen and sign-verdict need none). */
#ifndef FTL_PIPELINE_CLI_H
#define FTL_PIPELINE_CLI_H

#ifdef __cplusplus
extern "C" {
#endif

/* `ftl help NAME` texts. */
extern const char pl_export_help[];
extern const char pl_registry_help[];
extern const char pl_promote_help[];
extern const char pl_rollback_help[];

int pl_cmd_export(int argc, char **argv);
int pl_cmd_registry(int argc, char **argv);
int pl_cmd_promote(int argc, char **argv);
int pl_cmd_rollback(int argc, char **argv);

#ifdef __cplusplus
}
#endif
#endif
