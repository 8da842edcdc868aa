/*
 * ompd51.h: the parts of the OMPD 5.1 API (OpenMP 5.1, chapter 5) that
 * ompd-inspect uses to host a runtime's OMPD library: scalar types, the
 * handle and context types (opaque), the structures exchanged with the
 * library, the callback table and the entry points' signatures. Written for
 * ompd-inspect from the names, types and enumeration values the standard
 * gives; the entry points are reached through dlsym, so they are declared
 * as function pointer types only.
 */
#ifndef OMPD_INSPECT_OMPD51_H
#define OMPD_INSPECT_OMPD51_H

#include <stdint.h>

typedef uint64_t ompd_size_t;
typedef uint64_t ompd_wait_id_t;
typedef uint64_t ompd_addr_t;
typedef int64_t ompd_word_t;
typedef uint64_t ompd_seg_t;
typedef uint64_t ompd_device_t;
typedef uint64_t ompd_thread_id_t;
typedef uint64_t ompd_icv_id_t;

/* Return codes (ompd_rc_t); the values are those of the standard. */
typedef int ompd_rc_t;
enum {
  OI_RC_OK = 0,
  OI_RC_UNAVAILABLE = 1,
  OI_RC_STALE_HANDLE = 2,
  OI_RC_BAD_INPUT = 3,
  OI_RC_ERROR = 4,
  OI_RC_UNSUPPORTED = 5,
  OI_RC_NEEDS_STATE_TRACKING = 6,
  OI_RC_INCOMPATIBLE = 7,
  OI_RC_DEVICE_READ_ERROR = 8,
  OI_RC_DEVICE_WRITE_ERROR = 9,
  OI_RC_NOMEM = 10,
  OI_RC_INCOMPLETE = 11,
  OI_RC_CALLBACK_ERROR = 12
};

/* ompd_scope_t is an enumeration: int-sized in the C ABI. */
typedef int ompd_scope_t;

typedef struct { ompd_seg_t segment; ompd_addr_t address; } ompd_address_t;
typedef struct { ompd_address_t frame_address; ompd_word_t frame_flag; } ompd_frame_info_t;
typedef struct {
  uint8_t sizeof_char, sizeof_short, sizeof_int, sizeof_long, sizeof_long_long, sizeof_pointer;
} ompd_device_type_sizes_t;

/* Contexts belong to the tool; handles to the library. */
typedef struct oi_as_context ompd_address_space_context_t;
typedef struct oi_thread_context ompd_thread_context_t;
typedef struct ompd_address_space_handle_s ompd_address_space_handle_t;
typedef struct ompd_thread_handle_s ompd_thread_handle_t;
typedef struct ompd_parallel_handle_s ompd_parallel_handle_t;
typedef struct ompd_task_handle_s ompd_task_handle_t;

/* The callback table, in the standard's member order. */
typedef struct {
  ompd_rc_t (*alloc_memory)(ompd_size_t nbytes, void **ptr);
  ompd_rc_t (*free_memory)(void *ptr);
  ompd_rc_t (*print_string)(const char *string, int category);
  ompd_rc_t (*sizeof_type)(ompd_address_space_context_t *, ompd_device_type_sizes_t *);
  ompd_rc_t (*symbol_addr_lookup)(ompd_address_space_context_t *, ompd_thread_context_t *,
                                  const char *name, ompd_address_t *addr, const char *file);
  ompd_rc_t (*read_memory)(ompd_address_space_context_t *, ompd_thread_context_t *,
                           const ompd_address_t *addr, ompd_size_t nbytes, void *buf);
  ompd_rc_t (*write_memory)(ompd_address_space_context_t *, ompd_thread_context_t *,
                            const ompd_address_t *addr, ompd_size_t nbytes, const void *buf);
  ompd_rc_t (*read_string)(ompd_address_space_context_t *, ompd_thread_context_t *,
                           const ompd_address_t *addr, ompd_size_t nbytes, void *buf);
  ompd_rc_t (*device_to_host)(ompd_address_space_context_t *, const void *in,
                              ompd_size_t unit_size, ompd_size_t count, void *out);
  ompd_rc_t (*host_to_device)(ompd_address_space_context_t *, const void *in,
                              ompd_size_t unit_size, ompd_size_t count, void *out);
  ompd_rc_t (*get_thread_context_for_thread_id)(ompd_address_space_context_t *,
                                                ompd_thread_id_t kind, ompd_size_t size,
                                                const void *id, ompd_thread_context_t **out);
} ompd_callbacks_t;

#endif
