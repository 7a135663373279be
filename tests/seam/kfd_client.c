/* A native KFD client, as a runtime written in C talks to amdkfd: /dev/kfd, a render node, the topology in sysfs,
 * ioctls with the kernel's own structs (linux/kfd_ioctl.h of this machine), mmap. Run under `hwemu run`; prints
 * "ok <step>" per step and exits 0, or prints "FAIL <step>: ..." and exits 1.
 *
 *   kfd_client                      allocation, mapping, descriptors, the driver's errnos
 *   kfd_client CODE_OBJECT KERNEL   then also: load the code object, create an AQL queue, dispatch KERNEL
 *                                   (void KERNEL(global uint *out, uint add): out[i] = 3 * i + add, 64-wide
 *                                   workgroups) over GRID work-items with a completion signal and its KFD event,
 *                                   and check every result
 *   kfd_client CODE_OBJECT KERNEL HOW STATUS
 *                                   right after ringing the doorbell, leave with STATUS, the queue and descriptors
 *                                   still open: HOW is "return" (from main), "exit", "_exit", or "atexit" (return;
 *                                   an exit handler then waits for the dispatch and checks it, exiting 1 if wrong) */
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
#include <elf.h>
#include <unistd.h>

#define TOPOLOGY "/sys/devices/virtual/kfd/kfd/topology/nodes/1"
#define SIZE (2u << 20)

static int exiting; /* in an exit handler, where exit() may not be called again */

static void check(int ok, const char *step, const char *why) {
    if (!ok) {
        printf("FAIL %s: %s (errno %d %s)\n", step, why, errno, strerror(errno));
        fflush(stdout);
        exiting ? _exit(1) : exit(1);
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

#define GRID 1024
#define ADD 17u

static int kfd, drm;
static uint32_t gpu;

/* `size` bytes of GTT memory mapped on the GPU and into this process at the same address */
static void *gpu_alloc(size_t size) {
    size = (size + 4095) & ~(size_t)4095;
    char *va = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    struct kfd_ioctl_alloc_memory_of_gpu_args a = {.va_addr = (uint64_t)va, .size = size, .gpu_id = gpu,
        .flags = KFD_IOC_ALLOC_MEM_FLAGS_GTT | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE | KFD_IOC_ALLOC_MEM_FLAGS_EXECUTABLE};
    uint32_t ids[1] = {gpu};
    struct kfd_ioctl_map_memory_to_gpu_args m = {.device_ids_array_ptr = (uint64_t)ids, .n_devices = 1};
    if (ioctl(kfd, AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, &a) || (m.handle = a.handle, ioctl(kfd, AMDKFD_IOC_MAP_MEMORY_TO_GPU, &m)))
        return NULL;
    void *p = mmap(va, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, drm, (off_t)a.mmap_offset);
    return p == MAP_FAILED ? NULL : memset(p, 0, size);
}

/* the code object's loadable segments in GPU memory; the address of KERNEL's descriptor (KERNEL.kd), or 0 */
static uint64_t load(const char *path, const char *kernel) {
    FILE *f = fopen(path, "rb");
    static char file[1 << 20];
    size_t n = f ? fread(file, 1, sizeof file, f) : 0;
    if (f)
        fclose(f);
    Elf64_Ehdr *eh = (Elf64_Ehdr *)file;
    if (n < sizeof *eh || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0)
        return 0;
    Elf64_Phdr *ph = (Elf64_Phdr *)(file + eh->e_phoff);
    uint64_t end = 0;
    for (int i = 0; i < eh->e_phnum; i++)
        if (ph[i].p_type == PT_LOAD && ph[i].p_vaddr + ph[i].p_memsz > end)
            end = ph[i].p_vaddr + ph[i].p_memsz;
    char *base = gpu_alloc(end);
    for (int i = 0; base && i < eh->e_phnum; i++)
        if (ph[i].p_type == PT_LOAD)
            memcpy(base + ph[i].p_vaddr, file + ph[i].p_offset, ph[i].p_filesz);
    char want[256];
    snprintf(want, sizeof want, "%s.kd", kernel);
    Elf64_Shdr *sh = (Elf64_Shdr *)(file + eh->e_shoff);
    for (int i = 0; base && i < eh->e_shnum; i++) {
        if (sh[i].sh_type != SHT_SYMTAB && sh[i].sh_type != SHT_DYNSYM)
            continue;
        Elf64_Sym *sym = (Elf64_Sym *)(file + sh[i].sh_offset);
        const char *names = file + sh[sh[i].sh_link].sh_offset;
        for (size_t j = 0; j < sh[i].sh_size / sizeof *sym; j++)
            if (strcmp(names + sym[j].st_name, want) == 0)
                return (uint64_t)base + sym[j].st_value;
    }
    return 0;
}

/* hsa_kernel_dispatch_packet_t (hsa.h) and the fields of amd_signal_t / amd_queue_t the packet processor uses */
struct dispatch {
    uint16_t header, setup, workgroup[3], reserved0;
    uint32_t grid[3], private_segment_size, group_segment_size;
    uint64_t kernel_object, kernarg_address, reserved2, completion_signal;
};
#define HEADER_KERNEL_DISPATCH (2 | 1 << 8 | 2 << 9 | 2 << 11) /* type, barrier, system acquire and release */
#define SIGNAL_KIND_USER 1
#define QUEUE_WRITE_DISPATCH_ID 56
#define QUEUE_READ_DISPATCH_ID 128

static struct launched {
    uint32_t *out, event, queue;
    uint64_t *signal;
} launched;

/* the dispatch of KERNEL, its doorbell rung */
static void launch(const char *path, const char *kernel) {
    uint64_t kd = load(path, kernel);
    check(kd != 0, "load code object", "no kernel descriptor");
    uint32_t *out = gpu_alloc(4 * GRID);
    uint64_t *args = gpu_alloc(4096), *signal = gpu_alloc(4096);
    char *ring = gpu_alloc(4096), *queue = gpu_alloc(4096);
    args[0] = (uint64_t)out;
    args[1] = ADD;
    struct kfd_ioctl_create_event_args ev = {.event_type = KFD_IOC_EVENT_SIGNAL, .auto_reset = 1};
    check(ioctl(kfd, AMDKFD_IOC_CREATE_EVENT, &ev) == 0, "CREATE_EVENT", "failed");
    signal[0] = SIGNAL_KIND_USER;
    signal[1] = 1;                     /* value: the dispatch decrements it */
    signal[2] = (uint64_t)&signal[32]; /* event mailbox: the event id is written there and its interrupt raised */
    signal[3] = ev.event_id;
    struct kfd_ioctl_create_queue_args q = {.ring_base_address = (uint64_t)ring, .ring_size = 4096, .gpu_id = gpu,
        .queue_type = KFD_IOC_QUEUE_TYPE_COMPUTE_AQL, .queue_percentage = 100, .queue_priority = 7,
        .write_pointer_address = (uint64_t)(queue + QUEUE_WRITE_DISPATCH_ID),
        .read_pointer_address = (uint64_t)(queue + QUEUE_READ_DISPATCH_ID)};
    check(ioctl(kfd, AMDKFD_IOC_CREATE_QUEUE, &q) == 0, "CREATE_QUEUE (AQL)", "failed");
    off_t page = (off_t)(q.doorbell_offset & ~(uint64_t)0x1FFF);
    char *bells = mmap(NULL, 0x2000, PROT_READ | PROT_WRITE, MAP_SHARED, kfd, page);
    check(bells != MAP_FAILED, "mmap doorbells", "failed");
    struct dispatch *p = (struct dispatch *)ring;
    *p = (struct dispatch){.workgroup = {64, 1, 1}, .grid = {GRID, 1, 1}, .kernel_object = kd,
                           .kernarg_address = (uint64_t)args, .completion_signal = (uint64_t)signal};
    __atomic_store_n((uint32_t *)p, HEADER_KERNEL_DISPATCH | 1u << 16, __ATOMIC_RELEASE); /* header, setup: 1 dim */
    __atomic_store_n((uint64_t *)(queue + QUEUE_WRITE_DISPATCH_ID), 1, __ATOMIC_RELEASE);
    __atomic_store_n((uint64_t *)(bells + (q.doorbell_offset - (uint64_t)page)), 0, __ATOMIC_RELEASE);
    launched = (struct launched){out, ev.event_id, q.queue_id, signal};
}

/* wait for the dispatch, check its results, destroy its queue */
static void finish(void) {
    uint64_t *signal = launched.signal;
    struct kfd_event_data data = {.event_id = launched.event};
    struct kfd_ioctl_wait_events_args w = {.events_ptr = (uint64_t)&data, .num_events = 1, .wait_for_all = 1,
                                           .timeout = 600000}; /* a guard against a hang, not a measure */
    check(ioctl(kfd, AMDKFD_IOC_WAIT_EVENTS, &w) == 0 && w.wait_result == KFD_IOC_WAIT_RESULT_COMPLETE,
          "WAIT_EVENTS (completion)", "the dispatch did not complete");
    check(__atomic_load_n((int64_t *)&signal[1], __ATOMIC_ACQUIRE) == 0, "completion signal decremented",
          "still 1");
    int right = 1;
    for (uint32_t i = 0; i < GRID; i++)
        right &= launched.out[i] == 3 * i + ADD;
    check(right, "kernel results", "wrong values in out[]");
    struct kfd_ioctl_destroy_queue_args d = {.queue_id = launched.queue};
    check(ioctl(kfd, AMDKFD_IOC_DESTROY_QUEUE, &d) == 0, "DESTROY_QUEUE", "failed");
}

static void finish_at_exit(void) {
    exiting = 1;
    finish();
    fflush(stdout);
}

/* leave the process with `status` the way `how` says, the dispatch just launched */
static int leave(const char *how, int status) {
    fflush(stdout);
    if (strcmp(how, "exit") == 0)
        exit(status);
    if (strcmp(how, "_exit") == 0)
        _exit(status);
    if (strcmp(how, "atexit") == 0)
        atexit(finish_at_exit);
    return status;
}

int main(int argc, char **argv) {
    kfd = open("/dev/kfd", O_RDWR | O_CLOEXEC);
    check(kfd >= 0, "open /dev/kfd", "open failed");
    struct stat st;
    check(fstat(kfd, &st) == 0 && S_ISCHR(st.st_mode), "fstat /dev/kfd", "not a character device");

    struct kfd_ioctl_get_version_args version = {0};
    check(ioctl(kfd, AMDKFD_IOC_GET_VERSION, &version) == 0 && version.major_version == KFD_IOCTL_MAJOR_VERSION,
          "GET_VERSION", "wrong major version");

    long gpu_id = 0;
    FILE *f = fopen(TOPOLOGY "/gpu_id", "r");
    check(f && fscanf(f, "%ld", &gpu_id) == 1 && gpu_id > 0, "topology gpu_id", "unreadable");
    fclose(f);
    char render[64];
    snprintf(render, sizeof render, "/dev/dri/renderD%ld", property(TOPOLOGY "/properties", "drm_render_minor"));
    drm = open(render, O_RDWR | O_CLOEXEC);
    check(drm >= 0, "open render node", render);

    struct kfd_ioctl_acquire_vm_args vm = {.drm_fd = drm, .gpu_id = (uint32_t)gpu_id};
    check(ioctl(kfd, AMDKFD_IOC_ACQUIRE_VM, &vm) == 0, "ACQUIRE_VM", "failed");
    gpu = (uint32_t)gpu_id;

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
    if (argc >= 3)
        launch(argv[1], argv[2]);
    if (argc == 5)
        return leave(argv[3], atoi(argv[4]));
    if (argc >= 3)
        finish();
    check(close(drm) == 0 && close(kfd) == 0, "close", "failed");
    return 0;
}
