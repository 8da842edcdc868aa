/* frecord.c: record.h for fteams.f90 (C entry points Fortran calls). */
#include "record.h"

static struct fx_line line;

void finit(void) {
  char *argv[] = {"fteams", NULL};
  fx_init(1, argv);
  fx_begin(&line);
}

/* frec_park records the calling thread and parks it in user code. */
void frec_park(void) {
  rec_me();
  rec_park();
}

/* fannounce records the caller, waits for n records in all, prints READY
 * and parks. */
void fannounce(int n) {
  struct fx_slot *self = rec_me();
  rec_announce(&line, n, self);
  rec_park();
}
