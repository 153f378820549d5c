/* core/owned_dir.h: folders named for the live process that made them, swept once it is gone.
 *
 * Some folders outlive a process killed before it could remove them: a rank's Open MPI
 * shared-memory folder in /dev/shm when its agent is SIGKILLed, mpirun's session folder when the
 * launcher is. Each such folder's name says who made it, PARENT/PREFIX n<pid namespace>-p<pid>-
 * s<start ticks>[-TAG]-XXXXXX, and whoever makes the next one under the same prefix first removes
 * those whose maker is gone: what a killed process leaves is gone once the next one is up. A pid
 * counts only in the namespace it was read in (a container sharing /dev/shm or /tmp is never
 * judged by this one's pids), its start time tells a reused pid from the maker, and only this
 * user's folders are touched, never through a link. */
#ifndef FTL_CORE_OWNED_DIR_H
#define FTL_CORE_OWNED_DIR_H

#include <stddef.h>
#include <sys/types.h>

#include "ftl/error.h"

/* A process's scheduler state ('R' running, 'S' sleeping, 'D' disk wait, 'T' stopped, 'Z' zombie)
 * and its start time (clock ticks since boot: with the pid, what names one process for good, since
 * pids are reused; start_ticks may be NULL), from /proc/PID/stat; '?' when it cannot be read. */
char core_proc_stat(pid_t pid, unsigned long long *start_ticks);

/* Removes PARENT's folders of this user named PREFIX... whose maker is gone. */
void core_owned_dir_sweep(const char *parent, const char *prefix);

/* Sweeps (core_owned_dir_sweep), then makes PARENT/PREFIXn<ns>-p<pid>-s<start>[-TAG]-XXXXXX for
 * this process, mode 0700; its path into out. tag may be NULL. The caller removes it with
 * core_fs_rm_tree. FTL_ERR_RANGE when the path does not fit, else what core_fs_mkdtemp says. */
ftl_err core_owned_dir_make(const char *parent, const char *prefix, const char *tag, char *out, size_t size,
                            ftl_diag *d);

#endif
