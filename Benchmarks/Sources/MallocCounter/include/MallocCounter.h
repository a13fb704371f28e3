// Counts the calls of the C allocator in this process (Linux/glibc only): `alloc-check` links this target, whose
// definitions of malloc, calloc, realloc, posix_memalign, aligned_alloc, memalign and free take precedence over
// glibc's for every library of the process, and forward to glibc's own implementations.
#ifndef MALLOC_COUNTER_H
#define MALLOC_COUNTER_H

#include <stdint.h>

/// Allocating calls so far (malloc, calloc, realloc, posix_memalign, aligned_alloc, memalign), every thread.
int64_t malloc_counter_allocations(void);

/// Calls of free with a non-null pointer so far, every thread.
int64_t malloc_counter_frees(void);

/// 1 if the counting definitions are the ones the process calls (checked with a malloc through the dynamic linker).
int malloc_counter_is_active(void);

#endif
