//go:build cgo

/*
 * shim.c: loading an OMPD library, calling its entry points, and the
 * callback table that forwards the library's requests to Go (see
 * callbacks.go).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shim.h"
#include "_cgo_export.h"

/* ---- callbacks ---------------------------------------------------------- */

static ompd_rc_t cb_alloc(ompd_size_t n, void **p) {
  if (!p)
    return OI_RC_BAD_INPUT;
  *p = malloc(n ? n : 1);
  return *p ? OI_RC_OK : OI_RC_NOMEM;
}

static ompd_rc_t cb_free(void *p) {
  free(p);
  return OI_RC_OK;
}

static ompd_rc_t cb_print(const char *s, int category) {
  if (!s)
    return OI_RC_BAD_INPUT;
  return oiGoPrint((char *)s, category);
}

static ompd_rc_t cb_sizeof(ompd_address_space_context_t *c, ompd_device_type_sizes_t *out) {
  if (!c || !out)
    return OI_RC_BAD_INPUT;
  return oiGoSizes(c->session, out);
}

static ompd_rc_t cb_symbol(ompd_address_space_context_t *c, ompd_thread_context_t *t,
                           const char *name, ompd_address_t *addr, const char *file) {
  if (!c || !name || !addr)
    return OI_RC_BAD_INPUT;
  if (t && t->session != c->session)
    return OI_RC_BAD_INPUT;
  addr->segment = 0;
  return oiGoSymbol(c->session, t ? t->index : 0, (char *)name, (char *)file, &addr->address);
}

static ompd_rc_t cb_read(ompd_address_space_context_t *c, ompd_thread_context_t *t,
                         const ompd_address_t *addr, ompd_size_t n, void *buf) {
  (void)t;
  if (!c || !addr || (!buf && n))
    return OI_RC_BAD_INPUT;
  return oiGoRead(c->session, addr->address, n, buf);
}

/* ompd-inspect never writes to its target. */
static ompd_rc_t cb_write(ompd_address_space_context_t *c, ompd_thread_context_t *t,
                          const ompd_address_t *addr, ompd_size_t n, const void *buf) {
  (void)c, (void)t, (void)addr, (void)n, (void)buf;
  return OI_RC_UNSUPPORTED;
}

static ompd_rc_t cb_read_string(ompd_address_space_context_t *c, ompd_thread_context_t *t,
                                const ompd_address_t *addr, ompd_size_t n, void *buf) {
  (void)t;
  if (!c || !addr || !buf)
    return OI_RC_BAD_INPUT;
  return oiGoReadString(c->session, addr->address, n, buf);
}

/* The target is the host: same byte order, so conversion is a copy. */
static ompd_rc_t cb_convert(ompd_address_space_context_t *c, const void *in,
                            ompd_size_t unit, ompd_size_t count, void *out) {
  (void)c;
  if (!in || !out)
    return OI_RC_BAD_INPUT;
  memmove(out, in, unit * count);
  return OI_RC_OK;
}

static ompd_rc_t cb_thread_context(ompd_address_space_context_t *c, ompd_thread_id_t kind,
                                   ompd_size_t size, const void *id,
                                   ompd_thread_context_t **out) {
  if (!c || !id || !out)
    return OI_RC_BAD_INPUT;
  return oiGoThreadContext(c->session, kind, size, (void *)id, (void **)out);
}

static const ompd_callbacks_t oi_callbacks = {
    cb_alloc, cb_free,  cb_print,       cb_sizeof,  cb_symbol,        cb_read,
    cb_write, cb_read_string, cb_convert, cb_convert, cb_thread_context,
};

/* ---- loading ------------------------------------------------------------ */

int oi_load(const char *path, oi_lib *lib, char *err, size_t errlen) {
  memset(lib, 0, sizeof *lib);
  dlerror();
  lib->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib->dl) {
    const char *e = dlerror();
    snprintf(err, errlen, "%s", e ? e : "dlopen failed");
    return -1;
  }
#define OI_SYM(req, name, params, args)                                        \
  lib->name = (ompd_rc_t(*) params)dlsym(lib->dl, "ompd_" #name);              \
  if (!lib->name && req) {                                                     \
    snprintf(err, errlen, "%s defines no ompd_" #name, path);                  \
    dlclose(lib->dl);                                                          \
    lib->dl = NULL;                                                            \
    return -1;                                                                 \
  }
  OI_INIT_POINT(OI_SYM)
  OI_ENTRY_POINTS(OI_SYM)
#undef OI_SYM
  return 0;
}

void oi_unload(oi_lib *lib) {
  if (lib->dl)
    dlclose(lib->dl);
  lib->dl = NULL;
}

ompd_address_space_context_t *oi_new_as_context(uintptr_t session) {
  ompd_address_space_context_t *c = malloc(sizeof *c);
  if (c)
    c->session = session;
  return c;
}

ompd_thread_context_t *oi_new_thread_context(uintptr_t session, uintptr_t index) {
  ompd_thread_context_t *c = malloc(sizeof *c);
  if (c) {
    c->session = session;
    c->index = index;
  }
  return c;
}

void oi_free(void *p) { free(p); }

/* ---- calls -------------------------------------------------------------- */

ompd_rc_t oi_initialize(const oi_lib *l, ompd_word_t v) {
  return l->initialize(v, &oi_callbacks);
}

#define OI_CALL(req, name, params, args)                                       \
  ompd_rc_t oi_##name(const oi_lib *l, OI_PARAMS params) {                     \
    return l->name ? l->name args : OI_RC_UNSUPPORTED;                         \
  }
OI_ENTRY_POINTS(OI_CALL)
#undef OI_CALL
