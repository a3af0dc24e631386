/* cuda_gym judge: a CUDA allocator whose every segment is a VMM allocation exportable as a POSIX fd.
 *
 * Loaded by torch.cuda.memory.CUDAPluggableAllocator behind a torch.cuda.MemPool, in the trusted
 * driver (inputs) and in the candidate server (outputs). The other side imports a segment from its
 * file descriptor (passed over a Unix socket), so both processes see the same bytes even across PID
 * namespaces, where legacy CUDA IPC handles do not work. Segment ids are never reused.
 * Built by cuda_gym.judge.transport with the host C compiler; no CUDA headers are needed.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <unistd.h>

typedef unsigned long long cg_ptr;
typedef unsigned long long cg_handle;
typedef struct { int type; int id; } cg_loc;
typedef struct { unsigned char compression, rdma; unsigned short usage; unsigned char reserved[4]; } cg_flags;
typedef struct { int type; int handle_types; cg_loc location; void *win32; cg_flags flags; } cg_prop;
typedef struct { cg_loc location; int flags; } cg_access;

static int (*p_create)(cg_handle *, size_t, const cg_prop *, unsigned long long);
static int (*p_reserve)(cg_ptr *, size_t, size_t, cg_ptr, unsigned long long);
static int (*p_map)(cg_ptr, size_t, size_t, cg_handle, unsigned long long);
static int (*p_access)(cg_ptr, size_t, const cg_access *, size_t);
static int (*p_unmap)(cg_ptr, size_t);
static int (*p_release)(cg_handle);
static int (*p_free)(cg_ptr, size_t);
static int (*p_gran)(size_t *, const cg_prop *, int);
static int (*p_export)(void *, cg_handle, int, unsigned long long);

#define CG_MAX_SEGMENTS 65536
static struct { cg_ptr ptr; size_t size; cg_handle handle; int fd; int live; } segs[CG_MAX_SEGMENTS];
static int nsegs;
static int loaded;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static int load(void) {
    if (loaded) return loaded > 0;
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (!lib) { loaded = -1; return 0; }
    p_create = dlsym(lib, "cuMemCreate");
    p_reserve = dlsym(lib, "cuMemAddressReserve");
    p_map = dlsym(lib, "cuMemMap");
    p_access = dlsym(lib, "cuMemSetAccess");
    p_unmap = dlsym(lib, "cuMemUnmap");
    p_release = dlsym(lib, "cuMemRelease");
    p_free = dlsym(lib, "cuMemAddressFree");
    p_gran = dlsym(lib, "cuMemGetAllocationGranularity");
    p_export = dlsym(lib, "cuMemExportToShareableHandle");
    loaded = (p_create && p_reserve && p_map && p_access && p_unmap && p_release && p_free && p_gran && p_export) ? 1 : -1;
    return loaded > 0;
}

static cg_prop prop_for(int device) {
    cg_prop p = {0};
    p.type = 1;          /* CU_MEM_ALLOCATION_TYPE_PINNED */
    p.handle_types = 1;  /* CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR */
    p.location.type = 1; /* CU_MEM_LOCATION_TYPE_DEVICE */
    p.location.id = device;
    return p;
}

void *cg_alloc(ssize_t size, int device, void *stream) {
    (void)stream;
    pthread_mutex_lock(&mu);
    void *out = NULL;
    if (load() && nsegs < CG_MAX_SEGMENTS && size > 0) {
        cg_prop prop = prop_for(device);
        size_t gran = 0;
        if (p_gran(&gran, &prop, 0) == 0 && gran > 0) {
            size_t rounded = ((size_t)size + gran - 1) / gran * gran;
            cg_handle h = 0;
            cg_ptr ptr = 0;
            if (p_create(&h, rounded, &prop, 0) == 0) {
                if (p_reserve(&ptr, rounded, 0, 0, 0) == 0) {
                    cg_access acc = {{1, device}, 3}; /* read-write */
                    if (p_map(ptr, rounded, 0, h, 0) == 0 && p_access(ptr, rounded, &acc, 1) == 0) {
                        segs[nsegs].ptr = ptr;
                        segs[nsegs].size = rounded;
                        segs[nsegs].handle = h;
                        segs[nsegs].fd = -1;
                        segs[nsegs].live = 1;
                        nsegs++;
                        out = (void *)ptr;
                    } else {
                        p_free(ptr, rounded);
                        p_release(h);
                    }
                } else {
                    p_release(h);
                }
            }
        }
    }
    pthread_mutex_unlock(&mu);
    return out;
}

void cg_free(void *ptr, ssize_t size, int device, void *stream) {
    (void)size; (void)device; (void)stream;
    pthread_mutex_lock(&mu);
    for (int i = nsegs - 1; i >= 0; i--) {
        if (segs[i].live && segs[i].ptr == (cg_ptr)ptr) {
            p_unmap(segs[i].ptr, segs[i].size);
            p_free(segs[i].ptr, segs[i].size);
            p_release(segs[i].handle);
            if (segs[i].fd >= 0) close(segs[i].fd);
            segs[i].live = 0;
            segs[i].fd = -1;
            break;
        }
    }
    pthread_mutex_unlock(&mu);
}

/* The live segment holding [ptr, ptr + nbytes): its id, and its base address and size; -1 if none. */
int cg_lookup(uint64_t ptr, uint64_t nbytes, uint64_t *base, uint64_t *size) {
    int found = -1;
    pthread_mutex_lock(&mu);
    for (int i = nsegs - 1; i >= 0; i--) {
        if (segs[i].live && ptr >= segs[i].ptr && ptr + nbytes <= segs[i].ptr + segs[i].size) {
            *base = segs[i].ptr;
            *size = segs[i].size;
            found = i;
            break;
        }
    }
    pthread_mutex_unlock(&mu);
    return found;
}

/* A POSIX fd for segment ``id`` (exported once; the caller must not close it); -1 on failure. */
int cg_export(int id) {
    int fd = -1;
    pthread_mutex_lock(&mu);
    if (id >= 0 && id < nsegs && segs[id].live) {
        if (segs[id].fd < 0) {
            int out = -1;
            if (p_export(&out, segs[id].handle, 1, 0) == 0) segs[id].fd = out;
        }
        fd = segs[id].fd;
    }
    pthread_mutex_unlock(&mu);
    return fd;
}
