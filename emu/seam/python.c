/* The seam's in-process transport: hwemu's Python in the client's own process serves the mock nodes
 * (emu/seam/serve.py's `call`). A process that is already that Python (tinygrad with DEV=AMD, say) is served by
 * its interpreter; any other process starts one on its first mock open, from the libpython hwemu was built against
 * (HWEMU_LIBPYTHON, named when the seam is built), which is loaded only then. The engine threads of the mock GPUs
 * run in that interpreter; each call takes the GIL for its duration. */
#include <Python.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>

#include "seam.h"

#define PYFUNCS(X) X(Py_IsInitialized) X(PyConfig_InitPythonConfig) X(PyConfig_SetBytesString) X(PyConfig_Clear) \
    X(Py_InitializeFromConfig) X(PyStatus_Exception) X(PyEval_SaveThread) X(PyGILState_Ensure) X(PyGILState_Release) \
    X(PyImport_ImportModule) X(PyObject_GetAttrString) X(PyObject_CallFunction) X(PyLong_AsLong) X(PyErr_Print) \
    X(Py_DecRef) X(PyRun_SimpleString)
#define POINTER(f) static __typeof__(f) *p_##f;
PYFUNCS(POINTER)

static pthread_once_t once = PTHREAD_ONCE_INIT;
static PyObject *call;  /* serve.call, or NULL when Python could not be started */
static int owned;       /* the seam started the interpreter */

static int load(void *lib) {
#define LOAD(f)                                                                                                      \
    if (!(p_##f = (__typeof__(p_##f))dlsym(lib, #f))) {                                                             \
        fprintf(stderr, "hwemu seam: %s has no %s\n", HWEMU_LIBPYTHON, #f);                                         \
        return -1;                                                                                                   \
    }
    PYFUNCS(LOAD)
    return 0;
}

static int initialize(void) {
    PyConfig config;
    p_PyConfig_InitPythonConfig(&config);
    config.install_signal_handlers = 0; /* the client's signals stay the client's */
    config.parse_argv = 0;
    /* the interpreter hwemu is installed in (a venv's python finds its site-packages) */
    PyStatus s = p_PyConfig_SetBytesString(&config, &config.program_name, HWEMU_PYTHON);
    if (!p_PyStatus_Exception(s))
        s = p_Py_InitializeFromConfig(&config);
    p_PyConfig_Clear(&config);
    if (p_PyStatus_Exception(s)) {
        fprintf(stderr, "hwemu seam: cannot start Python (%s): %s\n", HWEMU_PYTHON, s.err_msg ? s.err_msg : "?");
        return -1;
    }
    owned = 1;
    return 0;
}

/* at the client's exit, before any library's exit handler or destructor runs (LLVM's C++ destructors among them):
 * serve.at_exit ends hwemu's threads (the mock GPUs' engine, the compile thread), so none is inside a library while
 * it is torn down, and runs what hwemu's Python registered to run at exit (HWEMU_STATS's report, closing the JIT) */
void seam_python_exit(void) {
    if (!owned || !call)
        return; /* a Python client runs its own at its exit */
    p_PyGILState_Ensure();
    p_PyRun_SimpleString("from emu.seam import serve; serve.at_exit()");
    /* the GIL stays taken: the client's own exit handlers that reach the seam run on this thread, which holds it */
}

static void start(void) {
    int (*running)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "Py_IsInitialized");
    void *lib = RTLD_DEFAULT;
    if (!running || !running()) {
        lib = dlopen(HWEMU_LIBPYTHON, RTLD_NOW | RTLD_GLOBAL);
        if (!lib) {
            fprintf(stderr, "hwemu seam: cannot load %s: %s\n", HWEMU_LIBPYTHON, dlerror());
            return;
        }
    }
    if (load(lib) || (!p_Py_IsInitialized() && initialize()))
        return;
    PyGILState_STATE g = p_PyGILState_Ensure();
    PyObject *serve = p_PyImport_ImportModule("emu.seam.serve");
    call = serve ? p_PyObject_GetAttrString(serve, "call") : NULL;
    if (!call) {
        fprintf(stderr, "hwemu seam: cannot import hwemu's emu.seam.serve (is hwemu on PYTHONPATH?):\n");
        p_PyErr_Print();
    }
    if (serve)
        p_Py_DecRef(serve);
    p_PyGILState_Release(g);
    if (owned)
        p_PyEval_SaveThread(); /* let the engine threads run while the client does */
}

long seam_python(enum seam_request req, const char *path, const long a[6]) {
    pthread_once(&once, start);
    if (!call)
        return -ENODEV; /* as without the driver */
    PyGILState_STATE g = p_PyGILState_Ensure();
    PyObject *r = p_PyObject_CallFunction(call, "izllllll", (int)req, path, a[0], a[1], a[2], a[3], a[4], a[5]);
    long out = -EIO;
    if (r) {
        out = p_PyLong_AsLong(r);
        p_Py_DecRef(r);
    } else {
        p_PyErr_Print(); /* serve.call answers every error with -errno: this is a bug in it */
    }
    p_PyGILState_Release(g);
    return out;
}
