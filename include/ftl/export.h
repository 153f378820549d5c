/* ftl/export.h: FTL_API, the mark on every public declaration of include/ftl/. The library's own
 * objects are compiled with -fvisibility=hidden, so only what is marked here is exported from
 * libftl.so; the internal cross-file symbols (ck_, ftl_wire_, ftl_jsonl_, ftl_fs_, ...) stay
 * inside it (tests/install/install_test.sh checks `nm -D`).
 *
 * Not here: anything else. On ELF the same mark serves the shared and the static library. */
#ifndef FTL_EXPORT_H
#define FTL_EXPORT_H

#if defined(__GNUC__) || defined(__clang__)
#define FTL_API __attribute__((visibility("default")))
#else
#define FTL_API
#endif

#endif
