/*
 * fcore.c: frecord.c whose finit() passes the program's own arguments to
 * fx_init(), so that fteams.f90 linked with this file instead of
 * frecord.c aborts right after READY when run with "abort" (for a kernel
 * core of the same state).
 */
#define finit finit_without_arguments
#include "frecord.c"
#undef finit

void finit(void) {
  static char buf[4096];
  char *argv[8];
  int argc = 0;
  FILE *f = fopen("/proc/self/cmdline", "r");
  if (!f)
    fx_fail("opening /proc/self/cmdline: %s", strerror(errno));
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  for (size_t i = 0; i < n && argc < 7; i += strlen(buf + i) + 1)
    argv[argc++] = buf + i;
  argv[argc] = NULL;
  fx_init(argc, argv);
  fx_begin(&line);
}
