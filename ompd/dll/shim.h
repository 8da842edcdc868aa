/*
 * shim.h: ompd-inspect's C side of the dll backend: a loaded OMPD library
 * (its entry points found with dlsym), the tool's context structures, the
 * callback table served by Go, and one call function per entry point (Go
 * cannot call C function pointers directly). Declarations only: the Go
 * files that export callbacks include it.
 */
#ifndef OMPD_INSPECT_SHIM_H
#define OMPD_INSPECT_SHIM_H

#include <stddef.h>
#include "ompd51.h"

/* The address space context ompd-inspect passes to the library: the
 * session's cgo handle. */
struct oi_as_context { uintptr_t session; };
/* A thread context: the session and the thread's index in it (from 1). */
struct oi_thread_context { uintptr_t session; uintptr_t index; };

/* X-macro of the entry points ompd-inspect calls, after ompd_initialize
 * (OI_INIT_POINT, called with ompd-inspect's callback table): whether a
 * library must define it (1; otherwise its call returns
 * OI_RC_UNSUPPORTED), its name without "ompd_", its parameters and its
 * arguments. */
#define OI_INIT_POINT(X) \
  X(1, initialize, (ompd_word_t v, const ompd_callbacks_t *t), (v, t))
#define OI_ENTRY_POINTS(X) \
  X(1, get_api_version, (ompd_word_t *v), (v)) \
  X(1, get_version_string, (const char **s), (s)) \
  X(1, process_initialize, (ompd_address_space_context_t *c, ompd_address_space_handle_t **h), (c, h)) \
  X(1, rel_address_space_handle, (ompd_address_space_handle_t *h), (h)) \
  X(1, get_thread_handle, (ompd_address_space_handle_t *h, ompd_thread_id_t k, ompd_size_t n, const void *id, ompd_thread_handle_t **t), (h, k, n, id, t)) \
  X(1, rel_thread_handle, (ompd_thread_handle_t *t), (t)) \
  X(1, thread_handle_compare, (ompd_thread_handle_t *a, ompd_thread_handle_t *b, int *c), (a, b, c)) \
  X(1, get_thread_id, (ompd_thread_handle_t *t, ompd_thread_id_t k, ompd_size_t n, void *id), (t, k, n, id)) \
  X(1, get_curr_parallel_handle, (ompd_thread_handle_t *t, ompd_parallel_handle_t **p), (t, p)) \
  X(1, get_enclosing_parallel_handle, (ompd_parallel_handle_t *p, ompd_parallel_handle_t **e), (p, e)) \
  X(1, get_task_parallel_handle, (ompd_task_handle_t *k, ompd_parallel_handle_t **p), (k, p)) \
  X(1, rel_parallel_handle, (ompd_parallel_handle_t *p), (p)) \
  X(1, parallel_handle_compare, (ompd_parallel_handle_t *a, ompd_parallel_handle_t *b, int *c), (a, b, c)) \
  X(1, get_thread_in_parallel, (ompd_parallel_handle_t *p, int n, ompd_thread_handle_t **t), (p, n, t)) \
  X(1, get_curr_task_handle, (ompd_thread_handle_t *t, ompd_task_handle_t **k), (t, k)) \
  X(1, get_generating_task_handle, (ompd_task_handle_t *k, ompd_task_handle_t **g), (k, g)) \
  X(1, get_scheduling_task_handle, (ompd_task_handle_t *k, ompd_task_handle_t **s), (k, s)) \
  X(1, get_task_in_parallel, (ompd_parallel_handle_t *p, int n, ompd_task_handle_t **k), (p, n, k)) \
  X(1, rel_task_handle, (ompd_task_handle_t *k), (k)) \
  X(1, task_handle_compare, (ompd_task_handle_t *a, ompd_task_handle_t *b, int *c), (a, b, c)) \
  X(1, get_task_function, (ompd_task_handle_t *k, ompd_address_t *f), (k, f)) \
  X(1, get_task_frame, (ompd_task_handle_t *k, ompd_frame_info_t *x, ompd_frame_info_t *e), (k, x, e)) \
  X(1, get_state, (ompd_thread_handle_t *t, ompd_word_t *s, ompd_wait_id_t *w), (t, s, w)) \
  X(1, enumerate_icvs, (ompd_address_space_handle_t *h, ompd_icv_id_t cur, ompd_icv_id_t *next, const char **name, ompd_scope_t *scope, int *more), (h, cur, next, name, scope, more)) \
  X(1, get_icv_from_scope, (void *h, ompd_scope_t s, ompd_icv_id_t id, ompd_word_t *v), (h, s, id, v)) \
  X(1, get_omp_version, (ompd_address_space_handle_t *h, ompd_word_t *v), (h, v)) \
  X(0, get_omp_version_string, (ompd_address_space_handle_t *h, const char **s), (h, s)) \
  X(0, get_icv_string_from_scope, (void *h, ompd_scope_t s, ompd_icv_id_t id, const char **v), (h, s, id, v)) \
  X(0, get_display_control_vars, (ompd_address_space_handle_t *h, const char *const **v), (h, v)) \
  X(0, rel_display_control_vars, (const char *const **v), (v))

#define OI_FIELD(req, name, params, args) ompd_rc_t(*name) params;
typedef struct oi_lib {
  void *dl;
  OI_INIT_POINT(OI_FIELD)
  OI_ENTRY_POINTS(OI_FIELD)
} oi_lib;
#undef OI_FIELD

#define OI_PARAMS(...) __VA_ARGS__

/* Call functions: oi_NAME(lib, args...) calls the library's ompd_NAME, or
 * returns OI_RC_UNSUPPORTED when the library lacks it. */
#define OI_DECL(req, name, params, args) ompd_rc_t oi_##name(const oi_lib *l, OI_PARAMS params);
OI_ENTRY_POINTS(OI_DECL)
#undef OI_DECL

/* oi_initialize calls ompd_initialize with ompd-inspect's callback table. */
ompd_rc_t oi_initialize(const oi_lib *l, ompd_word_t v);

/* oi_load dlopens path and finds the entry points. It returns 0, or -1
 * with a message in err (the dlopen error, or the first missing required
 * entry point). */
int oi_load(const char *path, oi_lib *lib, char *err, size_t errlen);

/* oi_unload dlcloses a library that failed to initialize. */
void oi_unload(oi_lib *lib);

/* oi_new_as_context and oi_new_thread_context allocate contexts. Address
 * space contexts are never freed: a library may key caches by them. */
ompd_address_space_context_t *oi_new_as_context(uintptr_t session);
ompd_thread_context_t *oi_new_thread_context(uintptr_t session, uintptr_t index);
void oi_free(void *p);

#endif
