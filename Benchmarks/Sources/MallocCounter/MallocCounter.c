// See include/MallocCounter.h. Forwards to glibc's __libc_* entry points, so no dlsym (which itself allocates) is
// needed. On other platforms the counters stay at zero and malloc_counter_is_active() returns 0.
#include "MallocCounter.h"

#if defined(__linux__) && defined(__GLIBC__)

#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>

extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t count, size_t size);
extern void *__libc_realloc(void *pointer, size_t size);
extern void *__libc_memalign(size_t alignment, size_t size);
extern void __libc_free(void *pointer);

static int64_t allocations = 0;
static int64_t frees = 0;

static inline void count_allocation(void) { __atomic_fetch_add(&allocations, 1, __ATOMIC_RELAXED); }

void *malloc(size_t size) {
    count_allocation();
    return __libc_malloc(size);
}

void *calloc(size_t count, size_t size) {
    count_allocation();
    return __libc_calloc(count, size);
}

void *realloc(void *pointer, size_t size) {
    count_allocation();
    return __libc_realloc(pointer, size);
}

void *memalign(size_t alignment, size_t size) {
    count_allocation();
    return __libc_memalign(alignment, size);
}

void *aligned_alloc(size_t alignment, size_t size) {
    count_allocation();
    return __libc_memalign(alignment, size);
}

int posix_memalign(void **result, size_t alignment, size_t size) {
    if (alignment < sizeof(void *) || (alignment & (alignment - 1)) != 0) return EINVAL;
    count_allocation();
    void *pointer = __libc_memalign(alignment, size);
    if (pointer == NULL && size != 0) return ENOMEM;
    *result = pointer;
    return 0;
}

void free(void *pointer) {
    if (pointer != NULL) __atomic_fetch_add(&frees, 1, __ATOMIC_RELAXED);
    __libc_free(pointer);
}

int64_t malloc_counter_allocations(void) { return __atomic_load_n(&allocations, __ATOMIC_RELAXED); }

int64_t malloc_counter_frees(void) { return __atomic_load_n(&frees, __ATOMIC_RELAXED); }

int malloc_counter_is_active(void) {
    // Call malloc the way a shared library does (resolved by the dynamic linker), and see whether it was counted.
    void *(*resolved)(size_t) = (void *(*)(size_t))dlsym(RTLD_DEFAULT, "malloc");
    if (resolved == NULL) return 0;
    int64_t before = malloc_counter_allocations();
    void *pointer = resolved(16);
    int64_t after = malloc_counter_allocations();
    __libc_free(pointer);
    return after > before;
}

#else

int64_t malloc_counter_allocations(void) { return 0; }
int64_t malloc_counter_frees(void) { return 0; }
int malloc_counter_is_active(void) { return 0; }

#endif
