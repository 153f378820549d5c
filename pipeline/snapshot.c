/* pipeline/snapshot.c: the data snapshot of a run (see snapshot.h, docs/formats/snapshot.md).
 *
 * Map: hashing one file (pipeline/sha256.h, OpenSSL's EVP); the one folder digest of the tree
 * (pl_folder_digest: a snapshot's folder inputs, the gate's adapter folder); building the record
 * and its digest; parsing and checking a record; re-verifying the inputs and naming the first file
 * that changed.
 *
 * Every file is opened without blocking (a FIFO where a file belongs must not hang ftl), checked
 * with fstat to be a regular file, and read no further than the size fstat reported (a link to
 * /dev/zero must not be hashed forever); the recorded paths are opened with O_NOFOLLOW, because
 * they are already resolved: a link there now is a change. An input given through a symbolic link
 * records the link too, and verification checks it still resolves to the recorded file (the ranks
 * read the link).
 *
 * Deliberately not here: any cache of hashes keyed by mtime (every verification re-reads every
 * byte: an mtime can be restored with `touch -r`, and the inputs of a fine-tune are small next to
 * its run time), and the registry's own content addressing (pipeline/registry_store.c). */
#include "pipeline/snapshot.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/fs.h"
#include "core/jsonl.h"
#include "core/rundir.h"
#include "ftl/core.h"
#include "pipeline/sha256.h"

#define MAX_FOLDER_FILES 100000

/* Hashes an open regular file: exactly the size fstat reports, no further (a file that grows
 * while it is read is hashed as it was when opened; one that shrinks is an error). Size and mtime
 * come from the same descriptor. */
static ftl_err hash_fd(int fd, const char *path, char hex_out[65], uint64_t *size_out, int64_t *mtime_ns_out,
                       ftl_diag *d) {
  ftl_err rc = FTL_OK;
  pl_sha256 *ctx = NULL;
  unsigned char *buf = ftl_malloc(1 << 20);
  uint64_t total = 0;
  struct stat st;
  if (!buf || pl_sha256_begin(&ctx) != FTL_OK) {
    rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory hashing %s", path);
    goto out;
  }
  if (fstat(fd, &st) != 0) {
    rc = ftl_diag_fail(d, FTL_ERR_IO, "cannot stat %s: %s", path, strerror(errno));
    goto out;
  }
  if (!S_ISREG(st.st_mode)) {
    rc = ftl_diag_fail(d, FTL_ERR_INVAL, "%s is not a regular file (a FIFO, a device or a socket cannot be pinned)",
                       path);
    goto out;
  }
  uint64_t want = (uint64_t)st.st_size;
  while (total < want) {
    size_t chunk = want - total < (1u << 20) ? (size_t)(want - total) : (size_t)(1u << 20);
    ssize_t got = read(fd, buf, chunk);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      rc = ftl_diag_fail(d, FTL_ERR_IO, "cannot read %s: %s", path, strerror(errno));
      goto out;
    }
    if (got == 0) {
      rc = ftl_diag_fail(d, FTL_ERR_IO, "%s shrank while it was read (%" PRIu64 " of %" PRIu64 " bytes)", path, total,
                         want);
      goto out;
    }
    if ((rc = pl_sha256_update(ctx, buf, (size_t)got))) {
      ftl_diag_fail(d, rc, "SHA-256 of %s failed", path);
      goto out;
    }
    total += (uint64_t)got;
  }
  rc = pl_sha256_end(ctx, hex_out);
  ctx = NULL;
  if (rc) {
    ftl_diag_fail(d, rc, "SHA-256 of %s failed", path);
    goto out;
  }
  if (size_out) *size_out = total;
  if (mtime_ns_out) *mtime_ns_out = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
out:
  ftl_free(buf);
  pl_sha256_abort(ctx);
  return rc;
}

static ftl_err sha256_text(const char *text, size_t len, char hex[65], ftl_diag *d) {
  ftl_err rc = pl_sha256_hex(text, len, hex);
  return rc ? ftl_diag_fail(d, rc, "SHA-256 failed") : FTL_OK;
}

/* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever. nofollow:
 * the path is a recorded, resolved one, so a link there now is not the file that was pinned. */
static ftl_err open_input(const char *path, int nofollow, int *fd_out, ftl_diag *d) {
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | (nofollow ? O_NOFOLLOW : 0));
  if (fd < 0) {
    if (errno == ELOOP && nofollow)
      return ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s is a symbolic link now; it was a file at submission", path);
    return ftl_diag_fail(d, errno == ENOENT ? FTL_ERR_NOTFOUND : FTL_ERR_IO, "cannot read %s: %s", path,
                         strerror(errno));
  }
  *fd_out = fd;
  return FTL_OK;
}

ftl_err pl_snapshot_hash_file(const char *path, char hex_out[65], uint64_t *size_out, ftl_diag *d) {
  int fd = -1;
  ftl_err rc = open_input(path, 0, &fd, d);
  if (rc) return rc;
  rc = hash_fd(fd, path, hex_out, size_out, NULL, d);
  close(fd);
  return rc;
}

/* ---- folders ------------------------------------------------------------------------------ */

typedef struct name_list {
  char **names; /* paths relative to the folder */
  size_t count, cap;
} name_list;

static void name_list_free(name_list *l) {
  for (size_t i = 0; i < l->count; i++)
    ftl_free(l->names[i]);
  ftl_free(l->names);
  memset(l, 0, sizeof *l);
}

static int cmp_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The files of a folder, by style (pl_folder_style): TREE, every regular file under root/rel,
 * recursively (symbolic links followed), anything else (a socket, a device) refused: its bytes
 * cannot be pinned; FLAT, the regular files at its top, hidden ones, folders and anything that is
 * not a file skipped. */
static ftl_err walk(const char *root, const char *rel, name_list *l, int depth, pl_folder_style style, ftl_diag *d) {
  char dir_path[PATH_MAX];
  if (ftl_fmt(dir_path, sizeof dir_path, "%s%s%s", root, rel[0] ? "/" : "", rel))
    return ftl_diag_fail(d, FTL_ERR_RANGE, "path too long under %s", root);
  if (depth > 64) return ftl_diag_fail(d, FTL_ERR_RANGE, "%s: folders nested deeper than 64 levels", dir_path);
  DIR *dir = opendir(dir_path);
  if (!dir)
    return ftl_diag_fail(d, style == PL_FOLDER_FLAT && errno == ENOENT ? FTL_ERR_NOTFOUND : FTL_ERR_IO,
                         "cannot list %s: %s", dir_path, strerror(errno));
  ftl_err rc = FTL_OK;
  struct dirent *e;
  while ((e = readdir(dir))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    if (style == PL_FOLDER_FLAT && e->d_name[0] == '.') continue;
    char child_rel[PATH_MAX], child[PATH_MAX];
    if (ftl_fmt(child_rel, sizeof child_rel, "%s%s%s", rel, rel[0] ? "/" : "", e->d_name) ||
        ftl_fmt(child, sizeof child, "%s/%s", root, child_rel)) {
      if (style == PL_FOLDER_FLAT) continue;
      rc = ftl_diag_fail(d, FTL_ERR_RANGE, "path too long under %s", root);
      break;
    }
    struct stat st;
    int got = stat(child, &st);
    if (style == PL_FOLDER_FLAT && (got != 0 || !S_ISREG(st.st_mode))) continue;
    if (got != 0) {
      rc = ftl_diag_fail(d, FTL_ERR_IO, "cannot stat %s: %s", child, strerror(errno));
      break;
    }
    if (S_ISDIR(st.st_mode)) {
      if ((rc = walk(root, child_rel, l, depth + 1, style, d))) break;
      continue;
    }
    if (!S_ISREG(st.st_mode)) {
      rc = ftl_diag_fail(d, FTL_ERR_INVAL, "%s is neither a file nor a folder", child);
      break;
    }
    if (l->count >= MAX_FOLDER_FILES) {
      rc = ftl_diag_fail(d, FTL_ERR_RANGE, "%s holds more than %d files", root, MAX_FOLDER_FILES);
      break;
    }
    if (l->count == l->cap) {
      size_t cap = l->cap ? l->cap * 2 : 64;
      char **grown = ftl_realloc(l->names, cap * sizeof *grown);
      if (!grown) {
        rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
        break;
      }
      l->names = grown;
      l->cap = cap;
    }
    if (!(l->names[l->count] = ftl_strdup(child_rel))) {
      rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
      break;
    }
    l->count++;
  }
  closedir(dir);
  return rc;
}

/* One file's entry: {path, size, mtime_ns, sha256}. */
static ftl_err file_entry(const char *path, const char *label, int nofollow, json_t **out, ftl_diag *d) {
  int fd = -1;
  char hex[65];
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  ftl_err rc = open_input(path, nofollow, &fd, d);
  if (rc) return rc;
  rc = hash_fd(fd, path, hex, &size, &mtime_ns, d);
  close(fd);
  if (rc) return rc;
  *out = json_pack("{s:s, s:I, s:I, s:s}", "path", label, "size", (json_int_t)size, "mtime_ns", (json_int_t)mtime_ns,
                   "sha256", hex);
  return *out ? FTL_OK : ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
}

/* A FLAT entry: {path, size, sha256}, the file opened as core's one reader does (pl_sha256_file). */
static ftl_err flat_entry(const char *path, const char *label, json_t **out, ftl_diag *d) {
  char hex[FTL_SHA256_HEX_LEN + 1];
  uint64_t size = 0;
  ftl_err rc = pl_sha256_file(path, UINT64_MAX, hex, &size, d);
  if (rc) return rc;
  *out = json_pack("{s:s, s:I, s:s}", "path", label, "size", (json_int_t)size, "sha256", hex);
  return *out ? FTL_OK : ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
}

/* The digest of the listed files (see pl_folder_style): sha256sum's text, or the canonical JSON. */
static ftl_err list_digest(const json_t *files, pl_folder_style style, char hex[65], ftl_diag *d) {
  if (style == PL_FOLDER_FLAT) {
    char *text = pl_snapshot_canonical(files);
    if (!text) return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
    ftl_err rc = sha256_text(text, strlen(text), hex, d);
    free(text);
    return rc;
  }
  char *text = NULL;
  size_t text_len = 0;
  FILE *mem = open_memstream(&text, &text_len);
  if (!mem) return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
  for (size_t i = 0; i < json_array_size(files); i++) {
    const json_t *f = json_array_get(files, i);
    fprintf(mem, "%s  %s\n", json_string_value(json_object_get(f, "sha256")),
            json_string_value(json_object_get(f, "path")));
  }
  fclose(mem);
  ftl_err rc = text ? sha256_text(text, text_len, hex, d) : ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
  free(text);
  return rc;
}

ftl_err pl_folder_digest(const char *dir, pl_folder_style style, json_t **files_out, char hex_out[65], ftl_diag *d) {
  name_list l = {0};
  json_t *files = json_array();
  ftl_err rc = FTL_OK;
  *files_out = NULL;
  if (!files) return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
  if ((rc = walk(dir, "", &l, 0, style, d))) goto out;
  qsort(l.names, l.count, sizeof *l.names, cmp_names);
  for (size_t i = 0; i < l.count; i++) {
    char full[PATH_MAX];
    json_t *f = NULL;
    if (ftl_fmt(full, sizeof full, "%s/%s", dir, l.names[i])) {
      rc = ftl_diag_fail(d, FTL_ERR_RANGE, "path too long under %s", dir);
      goto out;
    }
    rc = style == PL_FOLDER_FLAT ? flat_entry(full, l.names[i], &f, d) : file_entry(full, l.names[i], 0, &f, d);
    if (rc) goto out;
    if (json_array_append_new(files, f)) {
      rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
      goto out;
    }
  }
  if ((rc = list_digest(files, style, hex_out, d))) goto out;
  *files_out = files;
  files = NULL;
out:
  json_decref(files);
  name_list_free(&l);
  return rc;
}

/* A folder input: its files and digest (pl_folder_digest, TREE), their total size and newest mtime. */
static ftl_err folder_entry(const char *path, json_t *entry, ftl_diag *d) {
  json_t *files = NULL;
  char hex[65];
  ftl_err rc = pl_folder_digest(path, PL_FOLDER_TREE, &files, hex, d);
  if (rc) return rc;
  uint64_t total = 0;
  int64_t newest = 0;
  for (size_t i = 0; i < json_array_size(files); i++) {
    const json_t *f = json_array_get(files, i);
    total += (uint64_t)json_integer_value(json_object_get(f, "size"));
    json_int_t m = json_integer_value(json_object_get(f, "mtime_ns"));
    if (m > newest) newest = m;
  }
  json_object_set_new(entry, "kind", json_string("folder"));
  json_object_set_new(entry, "size", json_integer((json_int_t)total));
  json_object_set_new(entry, "mtime_ns", json_integer(newest));
  json_object_set_new(entry, "sha256", json_string(hex));
  json_object_set_new(entry, "files", files);
  return FTL_OK;
}

/* The absolute form of a path as written (against the current folder), with "." components and
 * repeated slashes dropped, links not resolved. */
static ftl_err absolute_as_written(const char *path, char *out, size_t size, ftl_diag *d) {
  char joined[PATH_MAX], cwd[PATH_MAX];
  if (path[0] == '/')
    snprintf(joined, sizeof joined, "%s", path);
  else if (!getcwd(cwd, sizeof cwd) || ftl_fmt(joined, sizeof joined, "%s/%s", cwd, path))
    return ftl_diag_fail(d, FTL_ERR_RANGE, "cannot make %s absolute", path);
  size_t o = 0;
  for (const char *p = joined; *p;) {
    while (*p == '/') p++;
    const char *end = strchr(p, '/');
    size_t n = end ? (size_t)(end - p) : strlen(p);
    if (n == 0) break;
    if (!(n == 1 && p[0] == '.')) {
      if (o + n + 2 > size) return ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", path);
      out[o++] = '/';
      memcpy(out + o, p, n);
      o += n;
    }
    p += n;
  }
  if (o == 0) out[o++] = '/';
  out[o] = '\0';
  return FTL_OK;
}

/* The entry of one input: {name, kind, path, size, mtime_ns, sha256[, files][, link]}. */
static ftl_err input_entry(const char *name, const char *path, json_t **out, ftl_diag *d) {
  char abs[PATH_MAX];
  struct stat st;
  if (stat(path, &st) != 0)
    return ftl_diag_fail(d, errno == ENOENT ? FTL_ERR_NOTFOUND : FTL_ERR_IO, "input '%s': cannot read %s: %s", name,
                         path, strerror(errno));
  if (!realpath(path, abs))
    return ftl_diag_fail(d, FTL_ERR_IO, "input '%s': cannot resolve %s: %s", name, path, strerror(errno));
  ftl_err rc = FTL_OK;
  json_t *e = NULL;
  char given[PATH_MAX];
  if ((rc = absolute_as_written(path, given, sizeof given, d))) return rc;
  if (S_ISDIR(st.st_mode)) {
    e = json_pack("{s:s, s:s}", "name", name, "path", abs);
    if (!e) return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
    rc = folder_entry(abs, e, d);
  } else if (S_ISREG(st.st_mode)) {
    rc = file_entry(abs, abs, 1, &e, d);
    if (!rc) {
      json_object_set_new(e, "name", json_string(name));
      json_object_set_new(e, "kind", json_string("file"));
    }
  } else {
    rc = ftl_diag_fail(d, FTL_ERR_INVAL, "input '%s': %s is neither a file nor a folder", name, path);
  }
  /* The ranks open the path as written; when a link on the way makes it differ from the file
   * that was hashed, the link is recorded so that a retargeted link is noticed. */
  if (!rc && strcmp(given, abs) != 0 && json_object_set_new(e, "link", json_string(given)))
    rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
  if (rc) {
    json_decref(e);
    if (strncmp(d ? d->msg : "", "input '", 7) != 0) ftl_diag_prefix(d, rc, "input '%s'", name);
    return rc;
  }
  *out = e;
  return FTL_OK;
}

char *pl_snapshot_canonical(const json_t *j) {
  return json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENSURE_ASCII);
}

/* The digest of a record: SHA-256 of its canonical form without the "digest" member. */
static ftl_err record_digest(const json_t *snap, char hex[65], ftl_diag *d) {
  json_t *copy = json_deep_copy(snap);
  if (!copy) return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
  json_object_del(copy, "digest");
  char *text = pl_snapshot_canonical(copy);
  json_decref(copy);
  if (!text) return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
  ftl_err rc = sha256_text(text, strlen(text), hex, d);
  free(text);
  return rc;
}

/* SHA-256 of the canonical form of the gate spec: what gate_sha256 must be. */
static ftl_err gate_digest(const json_t *gate, char hex[65], ftl_diag *d) {
  char *text = pl_snapshot_canonical(gate);
  if (!text) return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
  ftl_err rc = sha256_text(text, strlen(text), hex, d);
  free(text);
  return rc;
}

static void iso_time(int64_t wall_us, char out[32]) {
  time_t t = (time_t)(wall_us / 1000000);
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

ftl_err pl_snapshot_build(const pl_snapshot_input *inputs, size_t count, const char *job_name,
                           const char *job_spec_hash, const json_t *gate_spec, json_t **out, ftl_diag *d) {
  char when[32], hex[65];
  ftl_err rc = FTL_OK;
  iso_time(ftl_wall_us(), when);
  /* The run's identity in the registry's gate lock (pipeline/gate_lock.h): random, so that two
   * submissions of one job in one second are two runs. */
  unsigned char raw[16];
  char run_id[33];
  for (size_t got = 0; got < sizeof raw;) {
    ssize_t n = getrandom(raw + got, sizeof raw - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ftl_diag_fail(d, FTL_ERR_IO, "getrandom: %s", strerror(errno));
    got += (size_t)n;
  }
  for (size_t i = 0; i < sizeof raw; i++)
    snprintf(run_id + 2 * i, 3, "%02x", raw[i]);
  json_t *snap = json_pack("{s:i, s:s, s:s, s:s, s:s, s:[]}", "version", FTL_SNAPSHOT_VERSION, "created_at", when,
                           "run_id", run_id, "job", job_name ? job_name : "", "job_spec_hash",
                           job_spec_hash ? job_spec_hash : "", "inputs");
  if (!snap) return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
  json_t *arr = json_object_get(snap, "inputs");
  for (size_t i = 0; i < count; i++) {
    json_t *e = NULL;
    if ((rc = input_entry(inputs[i].name, inputs[i].path, &e, d))) goto out;
    json_array_append_new(arr, e);
  }
  if (gate_spec) {
    if ((rc = gate_digest(gate_spec, hex, d))) goto out;
    json_object_set_new(snap, "gate", json_deep_copy(gate_spec));
    json_object_set_new(snap, "gate_sha256", json_string(hex));
  } else {
    json_object_set_new(snap, "gate", json_null());
    json_object_set_new(snap, "gate_sha256", json_string(""));
  }
  if ((rc = record_digest(snap, hex, d))) goto out;
  json_object_set_new(snap, "digest", json_string(hex));
  *out = snap;
  snap = NULL;
out:
  json_decref(snap);
  return rc;
}

ftl_err pl_snapshot_pin_evaluator(json_t *snap, const char *abs_path, ftl_diag *d) {
  char hex[65];
  uint64_t size = 0;
  if (!abs_path || abs_path[0] != '/')
    return ftl_diag_fail(d, FTL_ERR_INVAL, "the evaluator's path must be absolute: %s", abs_path ? abs_path : "");
  ftl_err rc = pl_snapshot_hash_file(abs_path, hex, &size, d);
  if (rc) return ftl_diag_prefix(d, rc, "the evaluator (field 'eval.program')");
  json_t *ev = json_pack("{s:s, s:s, s:I}", "path", abs_path, "sha256", hex, "size", (json_int_t)size);
  if (!ev || json_object_set_new(snap, "evaluator", ev)) return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
  if ((rc = record_digest(snap, hex, d))) return rc;
  json_object_set_new(snap, "digest", json_string(hex));
  return FTL_OK;
}

ftl_err pl_snapshot_write(const char *run_dir, const json_t *snap, ftl_diag *d) {
  char path[PATH_MAX];
  if (core_rundir_path(path, sizeof path, run_dir, FTL_RUNDIR_SNAPSHOT))
    return ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", run_dir);
  char *text = json_dumps(snap, JSON_INDENT(2) | JSON_SORT_KEYS | JSON_ENSURE_ASCII);
  if (!text) return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
  size_t n = strlen(text);
  text[n] = '\n'; /* json_dumps leaves room for the NUL this replaces */
  ftl_err rc = core_fs_write_atomic(path, text, n + 1, "snapshot_write", -1, -1, d);
  free(text);
  return rc;
}

/* ---- reading ------------------------------------------------------------------------------ */

static int is_hex64(const json_t *v) {
  const char *s = json_string_value(v);
  if (!s || strlen(s) != 64) return 0;
  for (const char *p = s; *p; p++)
    if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'))) return 0;
  return 1;
}

static ftl_err check_file_entry(const json_t *f, const char *where, int top, ftl_diag *d) {
  if (!json_is_object(f)) return ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s: not an object", where);
  const char *path = json_string_value(json_object_get(f, "path"));
  if (!path || !path[0]) return ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s: 'path' is not a string", where);
  if (!top && (path[0] == '/' || strstr(path, "..")))
    return ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s: 'path' must be relative to its folder", where);
  if (!json_is_integer(json_object_get(f, "size")) || json_integer_value(json_object_get(f, "size")) < 0)
    return ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s: 'size' is not an integer >= 0", where);
  if (!json_is_integer(json_object_get(f, "mtime_ns")))
    return ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s: 'mtime_ns' is not an integer", where);
  if (!is_hex64(json_object_get(f, "sha256")))
    return ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s: 'sha256' is not 64 lowercase hex digits", where);
  return FTL_OK;
}

ftl_err pl_snapshot_parse(const char *data, size_t size, json_t **out, ftl_diag *d) {
  json_t *snap = NULL;
  ftl_err rc = core_jsonl_load_object(data, size, FTL_SNAPSHOT_MAX_BYTES, FTL_SNAPSHOT_VERSION, "", &snap, d);
  if (rc) return rc;
  static const char *const strings[] = {"created_at", "job", "job_spec_hash", "gate_sha256", "digest"};
  for (size_t i = 0; i < sizeof strings / sizeof *strings; i++)
    if (!json_is_string(json_object_get(snap, strings[i]))) {
      rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "'%s' is not a string", strings[i]);
      goto out;
    }
  json_t *gate = json_object_get(snap, "gate");
  if (!json_is_null(gate) && !json_is_object(gate)) {
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "'gate' is neither null nor an object");
    goto out;
  }
  if (json_is_object(gate) && !is_hex64(json_object_get(snap, "gate_sha256"))) {
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "'gate_sha256' is not 64 lowercase hex digits");
    goto out;
  }
  const json_t *run_id = json_object_get(snap, "run_id");
  if (run_id) {
    const char *r = json_string_value(run_id);
    int ok = r && strlen(r) == 32;
    for (const char *q = r; ok && *q; q++)
      ok = (*q >= '0' && *q <= '9') || (*q >= 'a' && *q <= 'f');
    if (!ok) {
      rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "'run_id' is not 32 lowercase hex digits");
      goto out;
    }
  }
  const json_t *ev = json_object_get(snap, "evaluator");
  if (ev && !json_is_null(ev)) {
    const char *ep = json_string_value(json_object_get(ev, "path"));
    if (!json_is_object(ev) || !ep || ep[0] != '/' || !is_hex64(json_object_get(ev, "sha256")) ||
        !json_is_integer(json_object_get(ev, "size")) || json_integer_value(json_object_get(ev, "size")) < 0) {
      rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "'evaluator' is not {path (absolute), sha256, size}");
      goto out;
    }
  }
  json_t *inputs = json_object_get(snap, "inputs");
  if (!json_is_array(inputs)) {
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "'inputs' is not an array");
    goto out;
  }
  for (size_t i = 0; i < json_array_size(inputs); i++) {
    json_t *e = json_array_get(inputs, i);
    char where[64];
    snprintf(where, sizeof where, "inputs[%zu]", i);
    if ((rc = check_file_entry(e, where, 1, d))) goto out;
    const char *name = json_string_value(json_object_get(e, "name"));
    const char *kind = json_string_value(json_object_get(e, "kind"));
    if (!name || !name[0] || !kind || (strcmp(kind, "file") && strcmp(kind, "folder"))) {
      rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s: needs a 'name' and a 'kind' (file or folder)", where);
      goto out;
    }
    const json_t *link = json_object_get(e, "link");
    if (link && (!json_is_string(link) || json_string_value(link)[0] != '/')) {
      rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s: 'link' is not an absolute path", where);
      goto out;
    }
    for (size_t k = 0; k < i; k++)
      if (!strcmp(name, json_string_value(json_object_get(json_array_get(inputs, k), "name")))) {
        rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s: input '%s' twice", where, name);
        goto out;
      }
    if (!strcmp(kind, "folder")) {
      json_t *files = json_object_get(e, "files");
      if (!json_is_array(files)) {
        rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s: a folder needs 'files'", where);
        goto out;
      }
      for (size_t k = 0; k < json_array_size(files); k++) {
        char fwhere[96];
        snprintf(fwhere, sizeof fwhere, "%s.files[%zu]", where, k);
        if ((rc = check_file_entry(json_array_get(files, k), fwhere, 0, d))) goto out;
      }
    }
  }
  char hex[65];
  if ((rc = record_digest(snap, hex, d))) goto out;
  if (strcmp(hex, json_string_value(json_object_get(snap, "digest"))) != 0) {
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "its digest does not match its content (edited after submission?)");
    goto out;
  }
  if (json_is_object(gate)) {
    /* The record's digest only says the record is whole; gate_sha256 is what verdicts and
     * provenance quote, so it must be the hash of this gate object and no other. */
    char ghex[65];
    if ((rc = gate_digest(gate, ghex, d))) goto out;
    if (strcmp(ghex, json_string_value(json_object_get(snap, "gate_sha256"))) != 0) {
      rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "'gate_sha256' is not the SHA-256 of its 'gate' (the gate was edited)");
      goto out;
    }
  } else if (json_string_value(json_object_get(snap, "gate_sha256"))[0]) {
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "'gate_sha256' is set without a 'gate'");
    goto out;
  }
  *out = snap;
  snap = NULL;
out:
  json_decref(snap);
  return rc;
}

ftl_err pl_rundir_load_record(const char *run_dir, core_rundir_item item, size_t max_bytes, pl_record_parse_fn parse,
                              int name_path, json_t **out, ftl_diag *d) {
  char path[PATH_MAX];
  char *data = NULL;
  size_t size = 0;
  if (core_rundir_path(path, sizeof path, run_dir, item))
    return ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", run_dir);
  ftl_err rc = core_fs_read_regular(path, max_bytes, &data, &size, d);
  if (rc) return rc;
  rc = parse(data, size, out, d);
  ftl_free(data);
  if (rc && name_path) ftl_diag_prefix(d, rc, "%s", path);
  return rc;
}

ftl_err pl_snapshot_load(const char *run_dir, json_t **out, ftl_diag *d) {
  return pl_rundir_load_record(run_dir, FTL_RUNDIR_SNAPSHOT, FTL_SNAPSHOT_MAX_BYTES, pl_snapshot_parse, 1, out, d);
}

/* ---- verification ------------------------------------------------------------------------- */

static ftl_err changed(ftl_diag *d, const char *input, const char *file, const char *what) {
  return ftl_diag_fail(d, FTL_ERR_CORRUPT, "input '%s' changed after submission: %s: %s", input, file, what);
}

static ftl_err compare_file(const char *input, const json_t *rec, const json_t *now, const char *file, ftl_diag *d) {
  char what[256];
  json_int_t s0 = json_integer_value(json_object_get(rec, "size")),
             s1 = json_integer_value(json_object_get(now, "size"));
  const char *h0 = json_string_value(json_object_get(rec, "sha256")),
             *h1 = json_string_value(json_object_get(now, "sha256"));
  if (s0 != s1) {
    snprintf(what, sizeof what, "size %" JSON_INTEGER_FORMAT " bytes at submission, %" JSON_INTEGER_FORMAT " now", s0,
             s1);
    return changed(d, input, file, what);
  }
  if (strcmp(h0, h1) != 0) {
    snprintf(what, sizeof what, "sha256 %.12s... at submission, %.12s... now", h0, h1);
    return changed(d, input, file, what);
  }
  return FTL_OK;
}

ftl_err pl_snapshot_verify(const json_t *snap, ftl_diag *d) {
  const json_t *inputs = json_object_get(snap, "inputs");
  for (size_t i = 0; i < json_array_size(inputs); i++) {
    const json_t *rec = json_array_get(inputs, i);
    const char *name = json_string_value(json_object_get(rec, "name"));
    const char *path = json_string_value(json_object_get(rec, "path"));
    const char *kind = json_string_value(json_object_get(rec, "kind"));
    const char *link = json_string_value(json_object_get(rec, "link"));
    struct stat st;
    /* Not FTL_ERR_NOTFOUND: that code means "this run has no snapshot" to a relaunch, and an
     * input that vanished must stop it. */
    if (link) {
      char now_at[PATH_MAX];
      if (!realpath(link, now_at))
        return ftl_diag_fail(d, FTL_ERR_CORRUPT, "input '%s' changed after submission: %s: %s (it resolved to %s)",
                             name, link, strerror(errno), path);
      if (strcmp(now_at, path) != 0)
        return ftl_diag_fail(d, FTL_ERR_CORRUPT,
                             "input '%s' changed after submission: %s: the link resolves to %s now, to %s at "
                             "submission",
                             name, link, now_at, path);
    }
    if (lstat(path, &st) != 0)
      return ftl_diag_fail(d, FTL_ERR_CORRUPT, "input '%s' changed after submission: %s: %s", name, path,
                           strerror(errno));
    if (S_ISLNK(st.st_mode))
      return changed(d, name, path, "is a symbolic link now; the resolved file was pinned at submission");
    int is_folder = !strcmp(kind, "folder");
    if (is_folder != !!S_ISDIR(st.st_mode))
      return changed(d, name, path, is_folder ? "was a folder, is not one now" : "was a file, is a folder now");
    json_t *now = NULL;
    ftl_err rc;
    if (!is_folder) {
      rc = file_entry(path, path, 1, &now, d);
      if (rc) return ftl_diag_prefix(d, (rc == FTL_ERR_NOTFOUND || rc == FTL_ERR_INVAL) ? FTL_ERR_CORRUPT : rc,
                                     "input '%s' changed after submission", name);
      rc = compare_file(name, rec, now, path, d);
      json_decref(now);
      if (rc) return rc;
      continue;
    }
    now = json_object();
    if (!now) return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
    if ((rc = folder_entry(path, now, d))) {
      json_decref(now);
      return ftl_diag_prefix(d, (rc == FTL_ERR_NOTFOUND || rc == FTL_ERR_INVAL) ? FTL_ERR_CORRUPT : rc,
                             "input '%s' changed after submission", name);
    }
    /* Both lists are sorted: walk them together and name the first difference. */
    const json_t *a = json_object_get(rec, "files"), *b = json_object_get(now, "files");
    size_t ia = 0, ib = 0;
    while (!rc && (ia < json_array_size(a) || ib < json_array_size(b))) {
      const json_t *fa = json_array_get(a, ia), *fb = json_array_get(b, ib);
      const char *pa = fa ? json_string_value(json_object_get(fa, "path")) : NULL;
      const char *pb = fb ? json_string_value(json_object_get(fb, "path")) : NULL;
      int c = !pa ? 1 : !pb ? -1 : strcmp(pa, pb);
      char full[PATH_MAX];
      const char *which = c <= 0 ? pa : pb;
      snprintf(full, sizeof full, "%s/%s", path, which ? which : "");
      if (c < 0)
        rc = changed(d, name, full, "removed from the folder");
      else if (c > 0)
        rc = changed(d, name, full, "added to the folder");
      else
        rc = compare_file(name, fa, fb, full, d);
      ia += c <= 0;
      ib += c >= 0;
    }
    if (!rc &&
        strcmp(json_string_value(json_object_get(rec, "sha256")), json_string_value(json_object_get(now, "sha256"))))
      rc = changed(d, name, path, "the folder's digest differs");
    json_decref(now);
    if (rc) return rc;
  }
  return FTL_OK;
}

ftl_err pl_snapshot_verify_run_dir(const char *run_dir, ftl_diag *d) {
  json_t *snap = NULL;
  ftl_err rc = pl_snapshot_load(run_dir, &snap, d);
  if (rc) return rc;
  rc = pl_snapshot_verify(snap, d);
  json_decref(snap);
  return rc;
}

const json_t *pl_snapshot_find_input(const json_t *snap, const char *name) {
  const json_t *inputs = json_object_get(snap, "inputs");
  for (size_t i = 0; name && i < json_array_size(inputs); i++) {
    const json_t *e = json_array_get(inputs, i);
    const char *n = json_string_value(json_object_get(e, "name"));
    if (n && !strcmp(n, name)) return e;
  }
  return NULL;
}

const char *pl_snapshot_input_path(const json_t *snap, const char *name) {
  return json_string_value(json_object_get(pl_snapshot_find_input(snap, name), "path"));
}

const char *pl_snapshot_input_sha256(const json_t *snap, const char *name) {
  return json_string_value(json_object_get(pl_snapshot_find_input(snap, name), "sha256"));
}

void pl_snapshot_input_var(const json_t *input, char *out, size_t size) {
  const char *name = json_string_value(json_object_get(input, "name"));
  snprintf(out, size, "FTL_INPUT_%s", name ? name : "");
  for (char *p = out; *p; p++)
    if (*p >= 'a' && *p <= 'z') *p = (char)(*p - 'a' + 'A');
}

const char *pl_snapshot_digest(const json_t *snap) { return json_string_value(json_object_get(snap, "digest")); }

const json_t *pl_snapshot_gate(const json_t *snap) {
  const json_t *g = json_object_get(snap, "gate");
  return json_is_object(g) ? g : NULL;
}

const char *pl_snapshot_gate_sha256(const json_t *snap) {
  return json_string_value(json_object_get(snap, "gate_sha256"));
}

const char *pl_snapshot_run_id(const json_t *snap) { return json_string_value(json_object_get(snap, "run_id")); }

const json_t *pl_snapshot_evaluator(const json_t *snap) {
  const json_t *e = json_object_get(snap, "evaluator");
  return json_is_object(e) ? e : NULL;
}
