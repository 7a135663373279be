/* hwemu's native seam: what the interposers (seam.c) and a transport (python.c: in-process) share. */
#ifndef HWEMU_SEAM_H
#define HWEMU_SEAM_H

/* The requests the interposers forward for mock device files. Arguments, by request:
 *   SEAM_OPEN   path; a[0] the descriptor the seam opened for it (of /dev/null), a[1] open's flags
 *   SEAM_CLOSE  a[0] the descriptor, before the seam closes it
 *   SEAM_IOCTL  a[0] descriptor, a[1] request, a[2] the argument (a user address)
 *   SEAM_MMAP   a[0] descriptor, a[1] address, a[2] length, a[3] prot, a[4] flags, a[5] offset
 *   SEAM_DUP    a[0] the mock descriptor, a[1] its new duplicate
 * The answer is the result (0, an address for SEAM_MMAP) or -errno. The numbers are emu/seam/serve.py's. */
#pragma GCC visibility push(hidden) /* the library exports only the interposers */

enum seam_request { SEAM_OPEN, SEAM_CLOSE, SEAM_IOCTL, SEAM_MMAP, SEAM_DUP };

typedef long (*seam_transport)(enum seam_request req, const char *path, const long a[6]);

/* the in-process transport: hwemu's Python in this process (python.c); seam_python_exit runs at the client's exit,
 * before anything of the process is torn down */
long seam_python(enum seam_request req, const char *path, const long a[6]);
void seam_python_exit(void);

/* whether HWEMU_SEAM_LOG asks for a line on stderr per mock-path call */
extern int seam_logging;

#pragma GCC visibility pop

#endif
