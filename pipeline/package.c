/* pipeline/package.c: building a package and reading one back without trusting it (package.h,
 * docs/formats/package.md).
 *
 * Map: the manifest (text and strict parse); build; the reader shared by unpack, the memory check
 * and canonicalize (entry rules, streaming hash, bounded sizes, optionally streaming each verified
 * entry into ftl's writer); unpack's temporary folder, its final listing and the rename;
 * canonicalize (a package taken in is stored as the bytes ftl's writer makes of its entries). */
#include "pipeline/package.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fs.h"
#include "ftl/core.h"
#include "pipeline/archive_seam.h"
#include "pipeline/hf_base.h"
#include "pipeline/peft.h"
#include "pipeline/pl_util.h"

static const char *const required_files[] = {FTL_PEFT_CONFIG_NAME, FTL_PEFT_WEIGHTS_NAME, FTL_PACKAGE_PROVENANCE,
                                             FTL_PACKAGE_VERDICT};
#define N_REQUIRED (sizeof required_files / sizeof required_files[0])

/* The base model's folder (pipeline/hf_base.h), in byte order; a package holds all or none. */
const char *const pl_package_base_files[PL_PACKAGE_N_BASE] = {
    FTL_PACKAGE_BASE_DIR "/" PL_HF_CONFIG, FTL_PACKAGE_BASE_DIR "/" PL_HF_WEIGHTS,
    FTL_PACKAGE_BASE_DIR "/" PL_HF_SPECIAL_TOKENS, FTL_PACKAGE_BASE_DIR "/" PL_HF_TOKENIZER,
    FTL_PACKAGE_BASE_DIR "/" PL_HF_TOKENIZER_CONFIG};

int pl_package_is_base_file(const char *name) {
  for (size_t i = 0; name && i < PL_PACKAGE_N_BASE; i++)
    if (!strcmp(name, pl_package_base_files[i])) return 1;
  return 0;
}

/* The name a file has inside base/ ("config.json"), for a base file. */
static const char *base_leaf(const char *name) { return name + sizeof FTL_PACKAGE_BASE_DIR; }

static void limits_fill(const pl_package_limits *in, pl_package_limits *out) {
  out->max_total_bytes = in && in->max_total_bytes ? in->max_total_bytes : ((uint64_t)8 << 30);
  out->max_manifest_bytes = in && in->max_manifest_bytes ? in->max_manifest_bytes : (1u << 20);
  out->max_entries = in && in->max_entries ? in->max_entries : 64;
  /* Compressed, a package is smaller than its entries; incompressible data grows by well under
   * 1/64 in zstd, and the headers of 64 entries are a few KiB. */
  out->max_package_bytes = in && in->max_package_bytes
                               ? in->max_package_bytes
                               : out->max_total_bytes + out->max_total_bytes / 64 + ((uint64_t)64 << 20);
}

/* ---- manifest ------------------------------------------------------------------------------ */

void pl_package_manifest_free(pl_package_manifest *m) {
  if (!m) return;
  for (size_t i = 0; i < m->n_files; i++)
    ftl_free(m->files[i].name);
  ftl_free(m->files);
  ftl_free(m);
}

/* 1 when a and b name the same entry of the unpack folder on a file system that folds case or
 * drops trailing dots (Windows, macOS; a copy made there, or a reader that compares so): their top
 * components ("base" for a base file) compared without case and without trailing dots. */
static int names_fold_alike(const char *a, const char *b) {
  size_t na = strcspn(a, "/"), nb = strcspn(b, "/");
  while (na && a[na - 1] == '.')
    na--;
  while (nb && b[nb - 1] == '.')
    nb--;
  if (na != nb) return 0;
  for (size_t i = 0; i < na; i++)
    if (tolower((unsigned char)a[i]) != tolower((unsigned char)b[i])) return 0;
  return 1;
}

/* Refuses two declared names (MANIFEST.json's own among them) that fold alike: unpacked where
 * case is folded, one file would silently take the other's place. The base files share base/. */
static ftl_err check_folded_names(const pl_package_manifest *m, ftl_diag *d) {
  for (size_t i = 0; i <= m->n_files; i++) {
    const char *a = i < m->n_files ? m->files[i].name : FTL_PACKAGE_MANIFEST;
    for (size_t j = 0; j < i && j < m->n_files; j++) {
      const char *b = m->files[j].name;
      if (pl_package_is_base_file(a) && pl_package_is_base_file(b)) continue;
      if (names_fold_alike(a, b))
        return ftl_diag_fail(d, FTL_ERR_CORRUPT,
                             "%s declares \"%s\" and \"%s\", which differ only by case or trailing dots (one file "
                             "on a case-insensitive file system); refused",
                             FTL_PACKAGE_MANIFEST, b, a);
    }
  }
  return FTL_OK;
}

ftl_err pl_package_manifest_parse(const void *bytes, size_t size, const pl_package_limits *limits_in,
                                   pl_package_manifest **out, ftl_diag *d) {
  pl_package_limits lim;
  limits_fill(limits_in, &lim);
  ftl_err rc = FTL_ERR_CORRUPT;
  pl_package_manifest *m = NULL;
  json_t *j = NULL;
  *out = NULL;
  if (size > lim.max_manifest_bytes)
    return ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s is %zu bytes, over the limit of %llu", FTL_PACKAGE_MANIFEST, size,
                         (unsigned long long)lim.max_manifest_bytes);
  json_error_t jerr;
  j = json_loadb(bytes, size, JSON_REJECT_DUPLICATES, &jerr);
  if (!j) {
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s is not valid JSON: %s (line %d)", FTL_PACKAGE_MANIFEST, jerr.text,
                       jerr.line);
    goto out;
  }
  json_t *files = json_object_get(j, "files"), *fmt = json_object_get(j, "format"),
         *ver = json_object_get(j, "version");
  if (!json_is_object(j) || json_object_size(j) != 3 || !json_is_array(files) || !json_is_string(fmt) ||
      strcmp(json_string_value(fmt), FTL_PACKAGE_FORMAT) || !json_is_integer(ver)) {
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s is not exactly {\"files\", \"format\": \"%s\", \"version\"}",
                       FTL_PACKAGE_MANIFEST, FTL_PACKAGE_FORMAT);
    goto out;
  }
  if (json_integer_value(ver) != FTL_PACKAGE_VERSION && json_integer_value(ver) != FTL_PACKAGE_VERSION_NO_BASE) {
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s has version %lld; this ftl reads versions %d and %d",
                       FTL_PACKAGE_MANIFEST, (long long)json_integer_value(ver), FTL_PACKAGE_VERSION_NO_BASE,
                       FTL_PACKAGE_VERSION);
    goto out;
  }
  size_t n = json_array_size(files);
  if (n > lim.max_entries) {
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s lists %zu files, over the limit of %zu", FTL_PACKAGE_MANIFEST, n,
                       lim.max_entries);
    goto out;
  }
  m = ftl_calloc(1, sizeof *m);
  if (!m || !(m->files = ftl_calloc(n ? n : 1, sizeof *m->files))) {
    rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
    goto out;
  }
  uint64_t total = 0;
  for (size_t i = 0; i < n; i++) {
    json_t *e = json_array_get(files, i);
    json_t *nm = json_object_get(e, "name"), *sz = json_object_get(e, "size"), *sh = json_object_get(e, "sha256");
    if (!json_is_object(e) || json_object_size(e) != 3 || !json_is_string(nm) || !json_is_integer(sz) ||
        !json_is_string(sh)) {
      rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s: file %zu is not exactly {\"name\", \"sha256\", \"size\"}",
                         FTL_PACKAGE_MANIFEST, i);
      goto out;
    }
    const char *name = json_string_value(nm);
    int base = json_integer_value(ver) == FTL_PACKAGE_VERSION && pl_package_is_base_file(name);
    if ((!pl_safe_name(name, 0) && !base) || !strcmp(name, FTL_PACKAGE_MANIFEST)) {
      rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s: file %zu has a name that is not a plain file name or a base file",
                         FTL_PACKAGE_MANIFEST, i);
      goto out;
    }
    m->n_base += base;
    if (i && strcmp(m->files[i - 1].name, name) >= 0) {
      rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s: %s is out of order or repeated", FTL_PACKAGE_MANIFEST, name);
      goto out;
    }
    json_int_t s = json_integer_value(sz);
    if (s < 0 || (uint64_t)s > lim.max_total_bytes || total + (uint64_t)s > lim.max_total_bytes) {
      rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s: %s's size %lld takes the package over %llu bytes",
                         FTL_PACKAGE_MANIFEST, name, (long long)s, (unsigned long long)lim.max_total_bytes);
      goto out;
    }
    total += (uint64_t)s;
    if (!pl_sha256_is_hex(json_string_value(sh))) {
      rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s: %s's sha256 is not 64 lowercase hex digits", FTL_PACKAGE_MANIFEST,
                         name);
      goto out;
    }
    if (!(m->files[i].name = ftl_strdup(name))) {
      rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
      goto out;
    }
    m->n_files++;
    m->files[i].size = (uint64_t)s;
    memcpy(m->files[i].sha256, json_string_value(sh), FTL_SHA256_HEX_LEN + 1);
  }
  if (m->n_base != 0 && m->n_base != PL_PACKAGE_N_BASE) {
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s lists %zu of the %d base files; a package holds all or none",
                       FTL_PACKAGE_MANIFEST, m->n_base, PL_PACKAGE_N_BASE);
    goto out;
  }
  if ((rc = check_folded_names(m, d))) goto out;
  for (size_t k = 0; k < N_REQUIRED; k++) {
    size_t i = 0;
    while (i < m->n_files && strcmp(m->files[i].name, required_files[k]))
      i++;
    if (i == m->n_files) {
      rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s does not list %s", FTL_PACKAGE_MANIFEST, required_files[k]);
      goto out;
    }
  }
  if ((rc = pl_sha256_hex(bytes, size, m->id))) {
    ftl_diag_fail(d, rc, "cannot hash %s", FTL_PACKAGE_MANIFEST);
    goto out;
  }
  *out = m;
  m = NULL;
  rc = FTL_OK;
out:
  pl_package_manifest_free(m);
  json_decref(j);
  return rc;
}

/* ---- build --------------------------------------------------------------------------------- */

typedef struct pkg_file {
  const char *name;
  char *data;
  size_t size;
} pkg_file;

/* The files of a package built from export_dir, in byte order of their names: the adapter's two,
 * the base's five when export_dir holds base/, the provenance and the verdict. */
static size_t build_names(const char *export_dir, const char **names, int *with_base) {
  char path[4096];
  struct stat st;
  size_t n = 0;
  *with_base = !ftl_fmt(path, sizeof path, "%s/%s", export_dir, FTL_PACKAGE_BASE_DIR) && lstat(path, &st) == 0;
  names[n++] = required_files[0];
  names[n++] = required_files[1];
  for (size_t i = 0; *with_base && i < PL_PACKAGE_N_BASE; i++)
    names[n++] = pl_package_base_files[i];
  names[n++] = required_files[2];
  names[n++] = required_files[3];
  return n;
}

ftl_err pl_package_build(const char *export_dir, const char *verdict_path, const json_t *provenance,
                          const char *out_path, char id_out[FTL_SHA256_HEX_LEN + 1], ftl_diag *d) {
  enum { MAX_FILES = N_REQUIRED + PL_PACKAGE_N_BASE };
  pkg_file f[MAX_FILES] = {{0}};
  const char *names[MAX_FILES];
  char path[4096], hex[FTL_SHA256_HEX_LEN + 1];
  json_t *verdict = NULL, *man = NULL, *list = NULL;
  char *man_text = NULL;
  size_t man_len = 0;
  uint8_t *img = NULL;
  size_t img_size = 0;
  pl_archive_w *w = NULL;
  int with_base = 0;
  ftl_err rc;
  if (!json_is_object(provenance)) return ftl_diag_fail(d, FTL_ERR_INVAL, "the provenance record is not a JSON object");
  size_t n = build_names(export_dir, names, &with_base);
  pkg_file *prov = &f[n - 2], *verd = &f[n - 1];
  for (size_t i = 0; i < n; i++)
    f[i].name = names[i];
  for (size_t i = 0; i + 2 < n; i++) {
    if (ftl_fmt(path, sizeof path, "%s/%s", export_dir, f[i].name)) {
      rc = ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", export_dir);
      goto out;
    }
    if ((rc = core_fs_read_regular(path, (size_t)4 << 30, &f[i].data, &f[i].size, d))) goto out;
  }
  if ((rc = core_fs_read_regular(verdict_path, 16u << 20, &verd->data, &verd->size, d))) goto out;
  json_error_t jerr;
  verdict = json_loadb(verd->data, verd->size, JSON_REJECT_DUPLICATES, &jerr);
  json_t *vv = json_object_get(verdict, "version"), *passed = json_object_get(verdict, "passed");
  if (!json_is_object(verdict) || !json_is_integer(vv) || json_integer_value(vv) != 1) {
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s is not a verdict of version 1", verdict_path);
    goto out;
  }
  if (!json_is_true(passed)) {
    rc = ftl_diag_fail(d, FTL_ERR_STATE, "%s: the gate did not pass (\"passed\" is not true); nothing to package",
                       verdict_path);
    goto out;
  }
  if (!(prov->data = pl_json_text(provenance, 1, &prov->size))) {
    rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
    goto out;
  }
  man = json_object();
  list = json_array();
  for (size_t i = 0; i < n; i++) {
    if ((rc = pl_sha256_hex(f[i].data, f[i].size, hex))) goto out;
    json_t *e = json_object();
    json_object_set_new(e, "name", json_string(f[i].name));
    json_object_set_new(e, "sha256", json_string(hex));
    json_object_set_new(e, "size", json_integer((json_int_t)f[i].size));
    json_array_append_new(list, e);
  }
  json_object_set(man, "files", list);
  json_object_set_new(man, "format", json_string(FTL_PACKAGE_FORMAT));
  /* A package without the base keeps version 1: its bytes (and id) are what earlier ftl made. */
  json_object_set_new(man, "version", json_integer(with_base ? FTL_PACKAGE_VERSION : FTL_PACKAGE_VERSION_NO_BASE));
  if (!(man_text = pl_json_text(man, 1, &man_len))) {
    rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
    goto out;
  }
  if ((rc = pl_sha256_hex(man_text, man_len, id_out))) goto out;
  if ((rc = pl_aw_open(&w, d))) goto out;
  if ((rc = pl_aw_add(w, FTL_PACKAGE_MANIFEST, man_text, man_len, d))) goto out;
  for (size_t i = 0; i < n; i++)
    if ((rc = pl_aw_add(w, f[i].name, f[i].data, f[i].size, d))) goto out;
  rc = pl_aw_finish(w, &img, &img_size, d);
  w = NULL;
  if (rc) goto out;
  rc = core_fs_replace(out_path, img, img_size, CORE_TMP_UNPREDICTABLE, "package.write", -1, -1, d);
out:
  pl_aw_abort(w);
  ftl_free(img);
  ftl_free(man_text);
  json_decref(list);
  json_decref(man);
  json_decref(verdict);
  for (size_t i = 0; i < n; i++)
    ftl_free(f[i].data);
  return rc;
}

/* ---- reading ------------------------------------------------------------------------------- */

static const char *type_name(pl_ar_type t) {
  switch (t) {
  case PL_AR_REGULAR: return "a regular file";
  case PL_AR_DIR: return "a folder";
  case PL_AR_SYMLINK: return "a symbolic link";
  case PL_AR_HARDLINK: return "a hard link";
  default: return "a device, FIFO or other special file";
  }
}

/* Refuses an entry that is not a plain regular file named `want` of exactly `size` bytes. */
static ftl_err check_entry(const pl_ar_entry *e, const char *want, uint64_t size, ftl_diag *d) {
  if (e->name[0] == '/' || strstr(e->name, "..") || (strchr(e->name, '/') && !pl_package_is_base_file(e->name)))
    return ftl_diag_fail(d, FTL_ERR_CORRUPT, "entry \"%.200s\" has an absolute, '..' or nested path; refused", e->name);
  if (e->type != PL_AR_REGULAR)
    return ftl_diag_fail(d, FTL_ERR_CORRUPT, "entry \"%.200s\" is %s, not a regular file; refused", e->name,
                         type_name(e->type));
  if (strcmp(e->name, want))
    return ftl_diag_fail(d, FTL_ERR_CORRUPT, "entry \"%.200s\" found where \"%s\" was expected (the order of %s)",
                         e->name, want, FTL_PACKAGE_MANIFEST);
  if (e->sparse) return ftl_diag_fail(d, FTL_ERR_CORRUPT, "entry %s is a sparse file; refused", e->name);
  if (!e->size_set || e->size < 0 || (uint64_t)e->size != size)
    return ftl_diag_fail(d, FTL_ERR_CORRUPT, "entry %s is %lld bytes, %s declares %llu; refused", e->name,
                         (long long)e->size, FTL_PACKAGE_MANIFEST, (unsigned long long)size);
  return FTL_OK;
}

/* Streams the current entry (exactly `size` bytes) into fd (when >= 0) and into w's current entry
 * (when not NULL), hashing it. */
static ftl_err copy_entry(pl_archive_r *r, const char *name, uint64_t size, int fd, pl_archive_w *w,
                          char hex[FTL_SHA256_HEX_LEN + 1], ftl_diag *d) {
  static __thread unsigned char buf[1 << 16];
  pl_sha256 *h = NULL;
  uint64_t total = 0;
  ftl_err rc = pl_sha256_begin(&h);
  if (rc) return ftl_diag_fail(d, rc, "out of memory");
  for (;;) {
    size_t got = 0;
    if ((rc = pl_ar_read(r, buf, sizeof buf, &got, d))) goto out;
    if (!got) break;
    if (got > size - total) {
      rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "entry %s holds more than the %llu bytes declared; refused", name,
                         (unsigned long long)size);
      goto out;
    }
    if (fd >= 0 && (rc = core_fs_pwrite_all(fd, buf, got, total))) {
      ftl_diag_fail(d, rc, "cannot write %s: %s", name, strerror(errno));
      goto out;
    }
    if (w && (rc = pl_aw_data(w, buf, got, d))) goto out;
    pl_sha256_update(h, buf, got);
    total += got;
  }
  if (total != size) {
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "entry %s holds %llu bytes, %llu declared", name, (unsigned long long)total,
                       (unsigned long long)size);
    goto out;
  }
  rc = pl_sha256_end(h, hex);
  h = NULL;
out:
  pl_sha256_abort(h);
  return rc;
}

/* Refuses a folder that holds anything but MANIFEST.json and m's files, each a regular file with
 * one link (the base's inside the one folder base/, a real folder): the unpack folder must hold
 * what the package declares and nothing else, whoever else can reach it. in_base: dirfd is base/. */
static ftl_err check_folder_at(int dirfd, const pl_package_manifest *m, int in_base, ftl_diag *d) {
  int fd = dup(dirfd);
  DIR *dp = fd >= 0 ? fdopendir(fd) : NULL;
  size_t seen = 0, want = in_base ? m->n_base : m->n_files - m->n_base + 1 + (m->n_base ? 1 : 0);
  ftl_err rc = FTL_OK;
  if (!dp) {
    if (fd >= 0) close(fd);
    return ftl_diag_fail(d, FTL_ERR_IO, "cannot list the unpack folder: %s", strerror(errno));
  }
  rewinddir(dp);
  struct dirent *e;
  while ((e = readdir(dp))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    struct stat st;
    int known = !in_base && !strcmp(e->d_name, FTL_PACKAGE_MANIFEST);
    int is_dir = !in_base && m->n_base && !strcmp(e->d_name, FTL_PACKAGE_BASE_DIR);
    for (size_t i = 0; !known && !is_dir && i < m->n_files; i++) {
      int base = pl_package_is_base_file(m->files[i].name);
      known = base == in_base && !strcmp(e->d_name, base ? base_leaf(m->files[i].name) : m->files[i].name);
    }
    int bad = fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW);
    if (!bad && is_dir) bad = !S_ISDIR(st.st_mode);
    else if (!bad) bad = !known || !S_ISREG(st.st_mode) || st.st_nlink != 1;
    if (bad) {
      rc = ftl_diag_fail(d, FTL_ERR_CORRUPT,
                         "the unpack folder holds \"%s%.200s\", which is not a file the package "
                         "declares; refused",
                         in_base ? FTL_PACKAGE_BASE_DIR "/" : "", e->d_name);
      goto out;
    }
    if (is_dir) {
      int bfd = core_fs_table.openat(dirfd, FTL_PACKAGE_BASE_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0);
      if (bfd < 0) {
        rc = ftl_diag_fail(d, FTL_ERR_IO, "cannot open the unpack folder's base/: %s", strerror(errno));
        goto out;
      }
      rc = check_folder_at(bfd, m, 1, d);
      core_fs_table.close(bfd);
      if (rc) goto out;
    }
    seen++;
  }
  if (seen != want)
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "the unpack folder%s holds %zu entries, the package declares %zu; refused",
                       in_base ? "'s base/" : "", seen, want);
out:
  closedir(dp);
  return rc;
}

static ftl_err check_folder(int dirfd, const pl_package_manifest *m, ftl_diag *d) {
  return check_folder_at(dirfd, m, 0, d);
}

/* The folder base/ made in the unpack folder dir_path (dirfd), opened into *basefd, once. */
static ftl_err open_base_dir(const char *dir_path, int dirfd, int *basefd, ftl_diag *d) {
  char path[4096];
  if (*basefd >= 0) return FTL_OK;
  if (!dir_path || ftl_fmt(path, sizeof path, "%s/%s", dir_path, FTL_PACKAGE_BASE_DIR))
    return ftl_diag_fail(d, FTL_ERR_RANGE, "no or too long a path for the unpack folder's base/");
  if (core_fs_table.mkdir(path, 0755))
    return ftl_diag_fail(d, core_errno_to_err(errno), "cannot create %s: %s", path, strerror(errno));
  *basefd = core_fs_table.openat(dirfd, FTL_PACKAGE_BASE_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0);
  if (*basefd < 0) return ftl_diag_fail(d, core_errno_to_err(errno), "cannot open %s: %s", path, strerror(errno));
  return FTL_OK;
}

/* Reads a whole package from r: MANIFEST.json first, then exactly its files, in its order. With
 * dirfd >= 0 the files (and the manifest) are created in that folder; with w, each entry is
 * written into w as it is read (w's bytes are only good once this returned FTL_OK). */
/* The package's first entry, MANIFEST.json, read whole (within its limit and to exactly its
 * declared size) into *man_out (NUL-terminated, ftl_free). */
static ftl_err read_manifest_entry(pl_archive_r *r, int require_zstd, const pl_package_limits *lim, char **man_out,
                                   size_t *man_size_out, ftl_diag *d) {
  pl_ar_entry e;
  int eof = 0;
  char *man = NULL;
  size_t man_size = 0;
  ftl_err rc;
  if ((rc = pl_ar_next(r, &e, &eof, d))) goto out;
  if (eof) {
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "the package is empty");
    goto out;
  }
  if (require_zstd && !pl_ar_is_zstd(r)) {
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "the package is not zstd-compressed");
    goto out;
  }
  if (e.size_set && e.size >= 0 && (uint64_t)e.size > lim->max_manifest_bytes) {
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s is %lld bytes, over the limit of %llu", FTL_PACKAGE_MANIFEST,
                       (long long)e.size, (unsigned long long)lim->max_manifest_bytes);
    goto out;
  }
  if ((rc = check_entry(&e, FTL_PACKAGE_MANIFEST, e.size_set && e.size >= 0 ? (uint64_t)e.size : 0, d))) goto out;
  man_size = (size_t)e.size;
  if (!(man = ftl_malloc(man_size + 1))) {
    rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
    goto out;
  }
  for (size_t at = 0;;) {
    size_t got = 0;
    char extra;
    if ((rc = pl_ar_read(r, at < man_size ? man + at : &extra, at < man_size ? man_size - at : 1, &got, d))) goto out;
    if (!got) {
      if (at != man_size) {
        rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s is cut short", FTL_PACKAGE_MANIFEST);
        goto out;
      }
      break;
    }
    if (at >= man_size) {
      rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s holds more than its declared size", FTL_PACKAGE_MANIFEST);
      goto out;
    }
    at += got;
  }
  man[man_size] = '\0';
  *man_out = man;
  *man_size_out = man_size;
  man = NULL;
out:
  ftl_free(man);
  return rc;
}

/* One file the manifest lists, entry e of the package: checked against its listing, copied into
 * the unpack folder (dirfd >= 0; a base file into base/, opened once into *basefd) and/or the
 * writer w, its SHA-256 compared, and made durable. */
static ftl_err take_file(pl_archive_r *r, const pl_ar_entry *e, const pl_package_file *pf, int dirfd,
                         const char *dir_path, int *basefd, pl_archive_w *w, ftl_diag *d) {
  char hex[FTL_SHA256_HEX_LEN + 1];
  int fd = -1;
  ftl_err rc;
  if ((rc = check_entry(e, pf->name, pf->size, d))) goto out;
  if (dirfd >= 0) {
    int base = pl_package_is_base_file(pf->name);
    /* A base file is created in base/ by its leaf name: no path with a slash reaches openat. */
    if (base && (rc = open_base_dir(dir_path, dirfd, basefd, d))) goto out;
    fd = core_fs_table.openat(base ? *basefd : dirfd, base ? base_leaf(pf->name) : pf->name,
                              O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0644);
    if (fd < 0) {
      rc = ftl_diag_fail(d, core_errno_to_err(errno), "cannot create %s: %s", pf->name, strerror(errno));
      goto out;
    }
  }
  if (w && (rc = pl_aw_begin(w, pf->name, pf->size, d))) goto out;
  if ((rc = copy_entry(r, pf->name, pf->size, fd, w, hex, d))) goto out;
  if (w && (rc = pl_aw_end(w, d))) goto out;
  if (strcmp(hex, pf->sha256)) {
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s's SHA-256 is %s, %s says %s: the package was altered", pf->name, hex,
                       FTL_PACKAGE_MANIFEST, pf->sha256);
    goto out;
  }
  if (fd >= 0 && core_fs_table.fsync(fd)) rc = ftl_diag_fail(d, FTL_ERR_IO, "cannot fsync %s: %s", pf->name, strerror(errno));
out:
  if (fd >= 0) core_fs_table.close(fd);
  return rc;
}

static ftl_err read_package(pl_archive_r *r, int require_zstd, const pl_package_limits *lim, const char *expected_id,
                            int dirfd, const char *dir_path, pl_archive_w *w, char id_out[FTL_SHA256_HEX_LEN + 1],
                            char **man_out, size_t *man_size_out, ftl_diag *d) {
  pl_ar_entry e;
  int eof = 0, basefd = -1;
  char *man = NULL;
  size_t man_size = 0;
  pl_package_manifest *m = NULL;
  ftl_err rc;
  if ((rc = read_manifest_entry(r, require_zstd, lim, &man, &man_size, d))) goto out;
  if ((rc = pl_package_manifest_parse(man, man_size, lim, &m, d))) goto out;
  if (expected_id && strcmp(expected_id, m->id)) {
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "the package's manifest hashes to %s, not the expected %s", m->id,
                       expected_id);
    goto out;
  }
  if (w && (rc = pl_aw_add(w, FTL_PACKAGE_MANIFEST, man, man_size, d))) goto out;
  if (dirfd >= 0) {
    if ((rc = core_fs_write_new_at(dirfd, NULL, FTL_PACKAGE_MANIFEST, man, man_size, 0644, d))) goto out;
    pl_crash_point("package.unpack.write");
  }
  for (size_t i = 0; i < m->n_files; i++) {
    const pl_package_file *pf = &m->files[i];
    if ((rc = pl_ar_next(r, &e, &eof, d))) goto out;
    if (eof) {
      rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "the package ends before %s, which %s lists", pf->name,
                         FTL_PACKAGE_MANIFEST);
      goto out;
    }
    if ((rc = take_file(r, &e, pf, dirfd, dir_path, &basefd, w, d))) goto out;
  }
  if ((rc = pl_ar_next(r, &e, &eof, d))) goto out;
  if (!eof) {
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT,
                       "the package holds an entry \"%.200s\" beyond the %zu files %s declares; "
                       "refused",
                       e.name, m->n_files, FTL_PACKAGE_MANIFEST);
    goto out;
  }
  if (basefd >= 0 && core_fs_table.fsync(basefd)) {
    rc = ftl_diag_fail(d, FTL_ERR_IO, "cannot fsync the unpack folder's base/: %s", strerror(errno));
    goto out;
  }
  if (dirfd >= 0 && (rc = check_folder(dirfd, m, d))) goto out;
  if (id_out) memcpy(id_out, m->id, FTL_SHA256_HEX_LEN + 1);
  if (man_out) {
    *man_out = man;
    man = NULL;
  }
  if (man_size_out) *man_size_out = man_size;
  rc = FTL_OK;
out:
  if (basefd >= 0) core_fs_table.close(basefd);
  pl_package_manifest_free(m);
  ftl_free(man);
  return rc;
}

ftl_err pl_package_unpack(const char *pkg_path, const char *target_dir, const char *expected_id,
                           const pl_package_limits *limits_in, char id_out[FTL_SHA256_HEX_LEN + 1],
                           char **manifest_out, size_t *manifest_size_out, ftl_diag *d) {
  pl_package_limits lim;
  limits_fill(limits_in, &lim);
  pl_archive_r *r = NULL;
  char tmp[4096] = "", parent[4096];
  int dirfd = -1;
  ftl_err rc;
  ftl_diag rd;
  if (manifest_out) *manifest_out = NULL;
  if (target_dir) {
    struct stat st;
    if (lstat(target_dir, &st) == 0)
      return ftl_diag_fail(d, FTL_ERR_STATE, "%s already exists; a package is unpacked into a new folder", target_dir);
    if (ftl_fmt(tmp, sizeof tmp, "%s.tmp-XXXXXX", target_dir) || ftl_fmt(parent, sizeof parent, "%s", target_dir))
      return ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", target_dir);
    /* 0755, not mkdtemp's 0700: servers must read the adapter. */
    if ((rc = core_fs_mkdtemp(tmp, 0755, &dirfd, d))) goto out;
  }
  if ((rc = pl_ar_open_file(pkg_path, lim.max_package_bytes, &r, d))) goto out;
  rc = read_package(r, 1, &lim, expected_id, dirfd, target_dir ? tmp : NULL, NULL, id_out, manifest_out,
                    manifest_size_out, &rd);
  if (rc) {
    ftl_diag_fail(d, rc, "%s: %s", pkg_path, rd.msg);
    goto out;
  }
  if (target_dir) {
    if (core_fs_table.fsync(dirfd)) {
      rc = ftl_diag_fail(d, FTL_ERR_IO, "cannot fsync %s: %s", tmp, strerror(errno));
      goto out;
    }
    pl_crash_point("package.unpack.rename");
    /* A rename that never replaces: a folder that appeared meanwhile is not overwritten. */
    if (core_fs_table.rename_noreplace(tmp, target_dir)) {
      int e = errno;
      rc = ftl_diag_fail(d, e == EEXIST || e == ENOTEMPTY ? FTL_ERR_STATE : FTL_ERR_IO, "cannot rename %s to %s: %s",
                         tmp, target_dir, strerror(e));
      goto out;
    }
    tmp[0] = '\0';
    char *slash = strrchr(parent, '/');
    if (slash == parent)
      parent[1] = '\0';
    else if (slash)
      *slash = '\0';
    else
      snprintf(parent, sizeof parent, ".");
    rc = core_fs_fsync_dir(parent, d);
  }
out:
  pl_ar_close(r);
  if (dirfd >= 0) core_fs_table.close(dirfd);
  if (tmp[0]) core_fs_rm_tree(tmp);
  if (rc && manifest_out && *manifest_out) {
    ftl_free(*manifest_out);
    *manifest_out = NULL;
  }
  return rc;
}

ftl_err pl_package_verify_memory(const void *bytes, size_t size, const pl_package_limits *limits_in,
                                  char id_out[FTL_SHA256_HEX_LEN + 1], ftl_diag *d) {
  pl_package_limits lim;
  limits_fill(limits_in, &lim);
  pl_archive_r *r = NULL;
  if (size > lim.max_package_bytes)
    return ftl_diag_fail(d, FTL_ERR_CORRUPT, "the package is %zu bytes, over the limit of %llu", size,
                         (unsigned long long)lim.max_package_bytes);
  ftl_err rc = pl_ar_open_memory(bytes, size, &r, d);
  if (rc) return rc;
  /* An uncompressed tar is accepted here (the fuzzer reaches the entry rules that way). */
  rc = read_package(r, 0, &lim, NULL, -1, NULL, NULL, id_out, NULL, NULL, d);
  pl_ar_close(r);
  return rc;
}

/* ---- canonicalize -------------------------------------------------------------------------- */

void pl_package_info_release(pl_package_info *info) {
  if (!info) return;
  ftl_free(info->manifest);
  info->manifest = NULL;
  info->manifest_size = 0;
}

ftl_err pl_package_canonicalize(const char *offered_path, int out_fd, const char *expected_id,
                                 const pl_package_limits *limits_in, const char *crash_name, pl_package_info *info,
                                 ftl_diag *d) {
  pl_package_limits lim;
  limits_fill(limits_in, &lim);
  pl_archive_r *r = NULL;
  pl_archive_w *w = NULL;
  char offered_hex[FTL_SHA256_HEX_LEN + 1], canon_hex[FTL_SHA256_HEX_LEN + 1];
  ftl_diag rd;
  ftl_err rc;
  memset(info, 0, sizeof *info);
  if ((rc = pl_ar_open_file(offered_path, lim.max_package_bytes, &r, d))) goto out;
  if ((rc = pl_aw_open_fd(out_fd, crash_name, &w, d))) goto out;
  rc = read_package(r, 1, &lim, expected_id, -1, NULL, w, info->id, &info->manifest, &info->manifest_size, &rd);
  if (!rc) rc = pl_ar_input_digest(r, &info->offered_bytes, offered_hex, &rd);
  if (rc) {
    ftl_diag_fail(d, rc, "%s: %s", offered_path, rd.msg);
    goto out;
  }
  rc = pl_aw_finish_fd(w, &info->canonical_bytes, canon_hex, d);
  w = NULL;
  if (rc) goto out;
  if (core_fs_table.fsync(out_fd)) {
    rc = ftl_diag_fail(d, FTL_ERR_IO, "cannot fsync the canonical package: %s", strerror(errno));
    goto out;
  }
  info->identical = info->offered_bytes == info->canonical_bytes && !strcmp(offered_hex, canon_hex);
out:
  pl_aw_abort(w);
  pl_ar_close(r);
  if (rc) pl_package_info_release(info);
  return rc;
}

ftl_err pl_package_canonicalize_to(const char *offered_path, const char *out_path, const char *expected_id,
                                    const pl_package_limits *limits, pl_package_info *info, ftl_diag *d) {
  char tmp[4096];
  int fd = -1;
  bool renamed = false;
  ftl_err rc;
  memset(info, 0, sizeof *info);
  /* An unpredictable temporary name, created exclusively: nobody can have put a file or a link
   * there first. */
  if ((rc = core_fs_create_tmp(out_path, CORE_TMP_UNPREDICTABLE, tmp, sizeof tmp, &fd, d))) return rc;
  if ((rc = pl_package_canonicalize(offered_path, fd, expected_id, limits, "package.canonicalize.write", info, d)))
    goto out;
  rc = core_fs_commit_tmp(&fd, tmp, out_path, false, &renamed, d);
out:
  if (fd >= 0) core_fs_table.close(fd);
  if (rc && !renamed) core_fs_table.unlink(tmp);
  if (rc) pl_package_info_release(info);
  return rc;
}
