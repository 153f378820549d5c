/* tests/fuzz/replay_main.c: runs a libFuzzer harness over every file of a corpus folder (or the
 * files named), so each build replays the corpus without needing clang's libFuzzer. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "cannot open %s\n", path);
    return 1;
  }
  uint8_t *buf = NULL;
  size_t len = 0, cap = 0;
  for (;;) {
    if (len == cap) {
      cap = cap ? cap * 2 : 4096;
      uint8_t *nbuf = realloc(buf, cap);
      if (!nbuf) {
        fclose(f);
        free(buf);
        return 1;
      }
      buf = nbuf;
    }
    size_t n = fread(buf + len, 1, cap - len, f);
    if (n == 0) break;
    len += n;
  }
  fclose(f);
  LLVMFuzzerTestOneInput(buf, len);
  free(buf);
  return 0;
}

int main(int argc, char **argv) {
  int files = 0;
  for (int i = 1; i < argc; i++) {
    struct stat st;
    if (stat(argv[i], &st) != 0) {
      fprintf(stderr, "cannot stat %s\n", argv[i]);
      return 1;
    }
    if (!S_ISDIR(st.st_mode)) {
      if (replay_file(argv[i])) return 1;
      files++;
      continue;
    }
    DIR *dir = opendir(argv[i]);
    if (!dir) return 1;
    struct dirent *e;
    while ((e = readdir(dir))) {
      if (e->d_name[0] == '.') continue;
      char path[4096];
      snprintf(path, sizeof path, "%s/%s", argv[i], e->d_name);
      if (replay_file(path)) {
        closedir(dir);
        return 1;
      }
      files++;
    }
    closedir(dir);
  }
  if (files == 0) {
    fprintf(stderr, "no corpus files replayed\n");
    return 1;
  }
  printf("replayed %d inputs\n", files);
  return 0;
}
