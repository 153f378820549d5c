/* core/flock.h: ftl's one wait for a flock, with a deadline, and the holder's note.
 *
 * flock itself cannot time out, so every lock ftl takes on a shared file (a JSON-lines log's
 * appends, the attempt fence, the run directory's lock, the gate's and the registry's locks) is
 * tried with LOCK_NB until a deadline, at once and then every few milliseconds (1 ms, doubling to
 * 20 ms: a short hold costs little, a long one little CPU).
 *
 * The holder's note is one line a lock's holder writes at the start of its lock file once it has
 * it, "LABEL: pid P on HOST since ISO-TIME", for a waiter that gives up to name. The lock is the
 * flock, never the note: a note left by a holder that died says only who held it last. */
#ifndef FTL_CORE_FLOCK_H
#define FTL_CORE_FLOCK_H

#include <stddef.h>
#include <stdint.h>

#include "ftl/error.h"

/* flock(fd, op) (LOCK_SH or LOCK_EX) by deadline_ms (ftl_deadline_after_ms; a deadline already past
 * tries once). FTL_ERR_TIMEOUT: "WHAT stayed locked by another process for S s" (with the holder's
 * note when note is set and the file has one); FTL_ERR_IO when flock fails otherwise, naming what. */
ftl_err core_flock_until(int fd, int op, int64_t deadline_ms, int note, const char *what, ftl_diag *d);

/* Writes the holder's note (label: pid, host, time) over the file's contents; best effort. */
void core_flock_note_write(int fd, const char *label);

/* The holder's note in the file, without its newline ("" when there is none). */
void core_flock_note_read(int fd, char *out, size_t size);

#endif
