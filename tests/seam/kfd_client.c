/* A native KFD client, as a runtime written in C talks to amdkfd: /dev/kfd, a render node, the topology in sysfs,
 * ioctls with the kernel's own structs (linux/kfd_ioctl.h of this machine), mmap. Run under `hwemu run`; prints
 * "ok <step>" per step and exits 0, or prints "FAIL <step>: ..." and exits 1. */
#include <errno.h>
#include <fcntl.h>
#include <linux/kfd_ioctl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <termios.h>
#include <unistd.h>

#define TOPOLOGY "/sys/devices/virtual/kfd/kfd/topology/nodes/1"
#define SIZE (2u << 20)

static void check(int ok, const char *step, const char *why) {
    if (!ok) {
        printf("FAIL %s: %s (errno %d %s)\n", step, why, errno, strerror(errno));
        exit(1);
    }
    printf("ok %s\n", step);
}

/* the ioctl fails with `want` */
static void fails(int fd, unsigned long req, void *arg, int want, const char *step) {
    errno = 0;
    int r = ioctl(fd, req, arg);
    check(r == -1 && errno == want, step, "expected a different errno");
}

static long property(const char *file, const char *name) {
    char line[256], key[128];
    long value = -1, v;
    FILE *f = fopen(file, "r");
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "%127s %ld", key, &v) == 2 && strcmp(key, name) == 0)
            value = v;
    if (f)
        fclose(f);
    return value;
}

int main(void) {
    int kfd = open("/dev/kfd", O_RDWR | O_CLOEXEC);
    check(kfd >= 0, "open /dev/kfd", "open failed");
    struct stat st;
    check(fstat(kfd, &st) == 0 && S_ISCHR(st.st_mode), "fstat /dev/kfd", "not a character device");

    struct kfd_ioctl_get_version_args version = {0};
    check(ioctl(kfd, AMDKFD_IOC_GET_VERSION, &version) == 0 && version.major_version == KFD_IOCTL_MAJOR_VERSION,
          "GET_VERSION", "wrong major version");

    long gpu_id = property(TOPOLOGY "/properties", "drm_render_minor") > 0 ? 0 : -1;
    FILE *f = fopen(TOPOLOGY "/gpu_id", "r");
    check(f && fscanf(f, "%ld", &gpu_id) == 1 && gpu_id > 0, "topology gpu_id", "unreadable");
    fclose(f);
    char render[64];
    snprintf(render, sizeof render, "/dev/dri/renderD%ld", property(TOPOLOGY "/properties", "drm_render_minor"));
    int drm = open(render, O_RDWR | O_CLOEXEC);
    check(drm >= 0, "open render node", render);

    struct kfd_ioctl_acquire_vm_args vm = {.drm_fd = drm, .gpu_id = (uint32_t)gpu_id};
    check(ioctl(kfd, AMDKFD_IOC_ACQUIRE_VM, &vm) == 0, "ACQUIRE_VM", "failed");

    /* GPU VA = host VA: reserve the range, allocate there, map the buffer over the reservation */
    char *va = mmap(NULL, SIZE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    struct kfd_ioctl_alloc_memory_of_gpu_args alloc = {.va_addr = (uint64_t)va, .size = SIZE, .gpu_id = (uint32_t)gpu_id,
        .flags = KFD_IOC_ALLOC_MEM_FLAGS_GTT | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE | KFD_IOC_ALLOC_MEM_FLAGS_EXECUTABLE};
    check(ioctl(kfd, AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, &alloc) == 0 && alloc.handle, "ALLOC_MEMORY_OF_GPU", "failed");
    uint32_t ids[1] = {(uint32_t)gpu_id};
    struct kfd_ioctl_map_memory_to_gpu_args map = {.handle = alloc.handle, .device_ids_array_ptr = (uint64_t)ids,
                                                  .n_devices = 1};
    check(ioctl(kfd, AMDKFD_IOC_MAP_MEMORY_TO_GPU, &map) == 0 && map.n_success == 1, "MAP_MEMORY_TO_GPU", "failed");
    uint32_t *mem = mmap(va, SIZE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, drm, (off_t)alloc.mmap_offset);
    check(mem == (uint32_t *)va, "mmap buffer", "not at its VA");
    for (uint32_t i = 0; i < SIZE / 4; i++)
        mem[i] = i * 2654435761u;
    /* a second mapping of the same buffer sees the same pages: they are the device's memory */
    uint32_t *again = mmap(NULL, SIZE, PROT_READ, MAP_SHARED, drm, (off_t)alloc.mmap_offset);
    int same = again != MAP_FAILED;
    for (uint32_t i = 0; same && i < SIZE / 4; i++)
        same = again[i] == i * 2654435761u;
    check(same, "buffer memory shared", "a second mapping reads other bytes");
    munmap(again, SIZE);

    /* a duplicate descriptor is the same open file; the original may be closed */
    int kfd2 = dup(kfd);
    int kfd3 = fcntl(kfd2, F_DUPFD_CLOEXEC, 100);
    close(kfd2);
    memset(&version, 0, sizeof version);
    check(kfd3 >= 100 && ioctl(kfd3, AMDKFD_IOC_GET_VERSION, &version) == 0 && version.major_version,
          "dup, F_DUPFD_CLOEXEC", "the duplicate is not /dev/kfd");
    close(kfd3);

    /* the errnos amdkfd gives */
    fails(kfd, AMDKFD_IOC_GET_VERSION, NULL, EFAULT, "EFAULT: NULL argument");
    char *ro = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    fails(kfd, AMDKFD_IOC_GET_VERSION, ro, EFAULT, "EFAULT: read-only argument of a read request");
    char *gone = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    munmap(gone, 4096);
    fails(kfd, AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, gone, EFAULT, "EFAULT: unmapped argument");
    struct kfd_ioctl_map_memory_to_gpu_args badmap = {.handle = alloc.handle, .device_ids_array_ptr = (uint64_t)gone,
                                                     .n_devices = 1};
    fails(kfd, AMDKFD_IOC_MAP_MEMORY_TO_GPU, &badmap, EFAULT, "EFAULT: unmapped device_ids_array_ptr");
    fails(kfd, _IOWR('K', 0x7F, struct kfd_ioctl_get_version_args), &version, EINVAL, "EINVAL: unknown command");
    struct winsize ws;
    fails(kfd, TIOCGWINSZ, &ws, ENOTTY, "ENOTTY: not a KFD request");
    struct kfd_ioctl_acquire_vm_args badvm = {.drm_fd = drm, .gpu_id = (uint32_t)gpu_id ^ 0xFFFF};
    fails(kfd, AMDKFD_IOC_ACQUIRE_VM, &badvm, EINVAL, "EINVAL: unknown gpu_id");
    errno = 0;
    check(mmap(NULL, 4096, PROT_READ, MAP_SHARED, kfd, 0x123000) == MAP_FAILED && errno == EINVAL,
          "EINVAL: mmap of /dev/kfd at an offset naming nothing", "mapped");

    /* other files are the operating system's */
    int null = open("/dev/null", O_RDONLY);
    check(null >= 0 && fstat(null, &st) == 0 && S_ISCHR(st.st_mode) && major(st.st_rdev) == 1, "/dev/null untouched",
          "not the real /dev/null");
    fails(null, TIOCGWINSZ, &ws, ENOTTY, "ioctl of another file reaches the kernel");
    close(null);

    struct kfd_ioctl_unmap_memory_from_gpu_args unmap = {.handle = alloc.handle, .device_ids_array_ptr = (uint64_t)ids,
                                                        .n_devices = 1};
    struct kfd_ioctl_free_memory_of_gpu_args free_ = {.handle = alloc.handle};
    check(ioctl(kfd, AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU, &unmap) == 0 &&
          ioctl(kfd, AMDKFD_IOC_FREE_MEMORY_OF_GPU, &free_) == 0, "UNMAP, FREE", "failed");
    check(close(drm) == 0 && close(kfd) == 0, "close", "failed");
    return 0;
}
