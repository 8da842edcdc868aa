/*
 * late.c: a program without OpenMP that loads libwork.so (which uses
 * OpenMP, and so brings in libomp) with dlopen after start-up, and calls
 * its work(): LOOP (4) regions of 2 threads (LINE:work in libwork.c). It
 * prints "work=<n>" and exits with status 0.
 */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv) {
  const char *lib = argc > 1 ? argv[1] : "libwork.so";
  void *h = dlopen(lib, RTLD_NOW);
  if (!h) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return 2;
  }
  long (*work)(int) = (long (*)(int))dlsym(h, "work");
  if (!work) {
    fprintf(stderr, "dlsym: %s\n", dlerror());
    return 2;
  }
  printf("work=%ld\n", work(4));
  return 0;
}
