/* launcher/hostfile.h: the Open MPI hostfile as ftl accepts it, read strictly before anything
 * starts: a line is a host name or address with optional `slots=N` and `max_slots=N`, a comment
 * (`#` to the end of the line), or blank. Anything else is refused naming the file, the line and
 * the text (mpirun's own reader has crashed on garbage). The format is documented in
 * docs/formats/hostfile.md.
 *
 * Deliberately not here: resolving names, deciding which hosts an attempt uses (launcher/policy.c)
 * and writing an attempt's hostfile (launcher/run.c). Pure: no I/O except ln_hostfile_read. */
#ifndef FTL_LAUNCHER_HOSTFILE_H
#define FTL_LAUNCHER_HOSTFILE_H

#include <stddef.h>

#include "ftl/error.h"

#define FTL_HOSTFILE_MAX_BYTES ((size_t)1 << 20) /* 1 MiB: tens of thousands of hosts */
#define FTL_HOSTFILE_LINE_MAX 1023              /* bytes of one line, without its newline */
#define FTL_HOSTFILE_NAME_MAX 255               /* a DNS name's limit */
#define FTL_HOSTFILE_SLOTS_MAX 1048576          /* slots= and max_slots= of one host */

typedef struct ln_hostfile_host {
  char name[FTL_HOSTFILE_NAME_MAX + 1]; /* as written */
  char line[FTL_HOSTFILE_LINE_MAX + 1]; /* the host's text: surrounding blanks and the comment dropped */
  int slots;                            /* slots=N; 1 when not given, as Open MPI counts it */
  int max_slots;                        /* max_slots=N; 0 when not given */
  int line_no;                          /* from 1 */
} ln_hostfile_host;

/* Parses size bytes of a hostfile (file names it in messages) into a new array (*hosts_out, freed
 * with ftl_free) of *count_out >= 1 hosts. Errors (FTL_ERR_SPEC), each one line:
 *   "hostfile hosts.txt:3: expected a host name or address, got '!!'"
 *   "hostfile hosts.txt:2: unknown option 'cpus=4' (expected slots=N or max_slots=N)"
 *   "hostfile hosts.txt: names no host (only blank lines and comments)"
 * FTL_ERR_NOMEM when out of memory. */
ftl_err ln_hostfile_parse(const char *data, size_t size, const char *file, ln_hostfile_host **hosts_out,
                           size_t *count_out, ftl_diag *d);

/* The same for the file at path: FTL_ERR_NOTFOUND / FTL_ERR_IO "cannot read hostfile PATH: why",
 * FTL_ERR_SPEC for a file over FTL_HOSTFILE_MAX_BYTES. */
ftl_err ln_hostfile_read(const char *path, ln_hostfile_host **hosts_out, size_t *count_out, ftl_diag *d);

/* text (len bytes) for a message, as this reader quotes what it refuses: control and non-ASCII
 * bytes as \xNN, a quote or backslash escaped, cut after 60 bytes ("..."); size >= 8. Also used for
 * Slurm's variables (launcher/slurm_alloc.c). */
void ln_hostfile_quote(const char *text, size_t len, char *out, size_t size);

/* The slots of all hosts together (saturating at INT_MAX). */
int ln_hostfile_total_slots(const ln_hostfile_host *hosts, size_t count);

#endif
