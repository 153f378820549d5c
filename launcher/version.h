/* launcher/version.h: `ftl version` (version.c): ftl's version and what the build compiled in. */
#ifndef FTL_LAUNCHER_VERSION_H
#define FTL_LAUNCHER_VERSION_H

extern const char ln_version_help[];
int ln_cmd_version(int argc, char **argv);

#endif
