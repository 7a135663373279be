/* linux/kfd_ioctl.h includes <drm/drm.h> (libdrm-dev's) only for the kernel's integer types and ioctl macros */
#include <linux/ioctl.h>
#include <linux/types.h>
