/* core/log.c: human log lines on stderr. Each line carries wall time, rank/world, host and
 * module, written with one write() so lines from threads and ranks do not interleave.
 * Machine-readable events are separate (launcher/events.c). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "ftl/core.h"

int ftl_log_threshold = FTL_LOG_INFO;
static int log_rank = -1;
static int log_world = -1;

void ftl_log_set_level(ftl_log_level level) { ftl_log_threshold = (int)level; }

void ftl_log_init_from_env(void) {
  const char *v = getenv("FTL_LOG_LEVEL");
  if (!v) return;
  if (!strcasecmp(v, "error")) ftl_log_set_level(FTL_LOG_ERROR);
  else if (!strcasecmp(v, "warn")) ftl_log_set_level(FTL_LOG_WARN);
  else if (!strcasecmp(v, "info")) ftl_log_set_level(FTL_LOG_INFO);
  else if (!strcasecmp(v, "debug")) ftl_log_set_level(FTL_LOG_DEBUG);
}

void ftl_log_set_identity(int rank, int world_size) {
  log_rank = rank;
  log_world = world_size;
}

static const char *level_name(ftl_log_level level) {
  switch (level) {
    case FTL_LOG_ERROR: return "error";
    case FTL_LOG_WARN: return "warn";
    case FTL_LOG_INFO: return "info";
    case FTL_LOG_DEBUG: return "debug";
  }
  return "?";
}

void ftl_log_write(ftl_log_level level, const char *module, const char *fmt, ...) {
  char line[2048];
  int64_t us = ftl_wall_us();
  time_t secs = (time_t)(us / 1000000);
  struct tm tm;
  gmtime_r(&secs, &tm);
  char who[64];
  if (log_rank >= 0) snprintf(who, sizeof who, "%d/%d", log_rank, log_world);
  else snprintf(who, sizeof who, "ftl");
  int n = snprintf(line, sizeof line, "%02d:%02d:%02d.%03d %s %s %s %s: ", tm.tm_hour, tm.tm_min,
                   tm.tm_sec, (int)(us / 1000 % 1000), who, ftl_hostname(), module,
                   level_name(level));
  if (n < 0) return;
  size_t used = (size_t)n < sizeof line ? (size_t)n : sizeof line - 1;
  va_list ap;
  va_start(ap, fmt);
  int m = vsnprintf(line + used, sizeof line - used, fmt, ap);
  va_end(ap);
  if (m > 0) used += (size_t)m < sizeof line - used ? (size_t)m : sizeof line - used - 1;
  if (used >= sizeof line - 1) used = sizeof line - 2;
  line[used++] = '\n';
  ssize_t ignored = write(STDERR_FILENO, line, used);
  (void)ignored;
}
