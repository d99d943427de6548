/*
 * files.c -- load_npy (a .npy file as a tensor, mapped without a copy or
 * read into a new one) and runtimes (what the GPU runtimes report).
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "dlbpy.h"

/* pin: False or None (0), True (the first runtime that loads), or a kind
 * name, 'cuda_host' or 'rocm_host'. */
static int dlbpy_pin_flags(PyObject *obj, unsigned *out) {
  if (obj == NULL || obj == Py_None || obj == Py_False) {
    *out = 0;
    return 0;
  }
  if (obj == Py_True) {
    *out = dlb_runtime_status(DLB_RUNTIME_CUDA) == DLB_OK ||
                   dlb_runtime_status(DLB_RUNTIME_HIP) != DLB_OK
               ? DLB_NPY_PIN_CUDA
               : DLB_NPY_PIN_ROCM;
    dlb_clear_error();
    return 0;
  }
  /* Another type is no unknown name: TypeError, as for mmap. */
  if (!PyUnicode_Check(obj)) {
    PyErr_Format(PyExc_TypeError,
                 "load_npy(): pin must be False, True, 'cuda_host' or "
                 "'rocm_host', not %.100s",
                 Py_TYPE(obj)->tp_name);
    return -1;
  }
  DLDevice kind;
  if (dlbpy_parse_device(obj, &kind) < 0 ||
      (kind.device_type != kDLCUDAHost && kind.device_type != kDLROCMHost)) {
    if (PyErr_Occurred() && !dlbpy_error_replaceable()) return -1;
    PyErr_Clear();
    PyErr_Format(PyExc_ValueError, "load_npy(): pin is %R; must be False, "
                 "True, 'cuda_host' or 'rocm_host'", obj);
    return -1;
  }
  *out = kind.device_type == kDLCUDAHost ? DLB_NPY_PIN_CUDA : DLB_NPY_PIN_ROCM;
  return 0;
}

static PyObject *dlbpy_npy_raise(dlb_status s) {
  PyObject *exc = s == DLB_E_NO_RUNTIME || s == DLB_E_NO_DEVICE ||
                          s == DLB_E_RUNTIME
                      ? PyExc_RuntimeError
                      : PyExc_ValueError;
  return dlbpy_raise(s, exc, "load_npy()");
}

PyObject *dlbpy_load_npy(PyObject *module, PyObject *const *args,
                         Py_ssize_t nargsf, PyObject *kwnames) {
  PyObject *path_arg = NULL, *mmap_arg = NULL, *pin_arg = NULL;
  const dlbpy_param params[] = {{"path", DLBPY_POSONLY, &path_arg},
                                {"mmap", DLBPY_OPTIONAL, &mmap_arg},
                                {"pin", DLBPY_OPTIONAL, &pin_arg}};
  if (dlbpy_parse_args("load_npy", args, nargsf, kwnames, params,
                       DLBPY_NPARAMS(params)) < 0)
    return NULL;
  int use_mmap = 1;
  if (mmap_arg != NULL) {
    /* Not truth: mmap="no" would map, and None would read a copy. */
    if (!PyBool_Check(mmap_arg)) {
      PyErr_Format(PyExc_TypeError,
                   "load_npy(): mmap must be True or False, not %.100s",
                   Py_TYPE(mmap_arg)->tp_name);
      return NULL;
    }
    use_mmap = mmap_arg == Py_True;
  }
  unsigned pin = 0;
  if (dlbpy_pin_flags(pin_arg, &pin) < 0) return NULL;
  /* A path of the wrong type is named as such: CPython's own message
   * names neither the call nor the parameter. */
  if (!PyUnicode_Check(path_arg) && !PyBytes_Check(path_arg) &&
      !PyObject_HasAttrString((PyObject *)Py_TYPE(path_arg), "__fspath__")) {
    PyErr_Format(PyExc_TypeError,
                 "load_npy(): path must be a str, bytes or os.PathLike "
                 "object, not %.100s",
                 Py_TYPE(path_arg)->tp_name);
    return NULL;
  }
  PyObject *bytes = NULL;
  if (!PyUnicode_FSConverter(path_arg, &bytes)) return NULL;
  const char *path = PyBytes_AS_STRING(bytes);
  /* The operating system's own error, as open() in Python raises it
   * (FileNotFoundError, PermissionError, ...). Without waiting, with the
   * GIL held, for a writer to open a FIFO: the core refuses it. */
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, path_arg);
    Py_DECREF(bytes);
    return NULL;
  }
  close(fd);
  DLManagedTensorVersioned *mapped = NULL, *out = NULL;
  dlb_status s;
  Py_BEGIN_ALLOW_THREADS
  s = dlb_tensor_map_npy(path, use_mmap ? pin : 0, &mapped);
  if (s == DLB_OK && !use_mmap) {
    /* A copy in ordinary memory, writable, then pinned when asked. */
    s = dlb_managed_copy(mapped, (DLDevice){kDLCPU, 0}, &out);
    dlb_tensor_release(mapped);
    mapped = NULL;
    if (s == DLB_OK && pin != 0) {
      DLManagedTensorVersioned *copy = out;
      out = NULL;
      s = dlb_tensor_pin(copy, pin == DLB_NPY_PIN_CUDA ? kDLCUDAHost
                                                       : kDLROCMHost,
                         &out);
      dlb_tensor_release(copy);
    }
  } else {
    out = mapped;
  }
  Py_END_ALLOW_THREADS
  Py_DECREF(bytes);
  if (s != DLB_OK) return dlbpy_npy_raise(s);
  return dlbpy_tensor_new(dlbpy_state_of_module(module), out);
}

/* A new reference (Py_NewRef needs Python 3.10). */
static PyObject *dlbpy_ref(PyObject *o) {
  Py_INCREF(o);
  return o;
}

/* Sets d[key] to value (stolen); -1 on failure. */
static int dlbpy_set(PyObject *d, const char *key, PyObject *value) {
  if (value == NULL) return -1;
  int rc = PyDict_SetItemString(d, key, value);
  Py_DECREF(value);
  return rc;
}

static PyObject *dlbpy_capability(int v) {
  return dlbpy_ref(v == 1 ? Py_True : v == 0 ? Py_False : Py_None);
}

static PyObject *dlbpy_gpu_dict(DLDevice dev) {
  char name[DLB_DEVICE_NAME_MAX];
  if (dlb_device_format(dev, name, sizeof name) != DLB_OK)
    return dlbpy_raise(DLB_E_DEVICE, PyExc_ValueError, "runtimes()");
  PyObject *d = PyDict_New();
  if (d == NULL) return NULL;
  dlb_gpu_info g;
  dlb_status s = dlb_gpu_get_info(dev, &g);
  if (dlbpy_set(d, "device", PyUnicode_FromString(name)) < 0) goto fail;
  if (s != DLB_OK) {
    if (dlbpy_set(d, "error", PyUnicode_FromString(dlb_last_error())) < 0)
      goto fail;
    dlb_clear_error();
    return d;
  }
  if (dlbpy_set(d, "name", PyUnicode_DecodeUTF8(g.name, (Py_ssize_t)strlen(
                                                            g.name),
                                                "replace")) < 0 ||
      dlbpy_set(d, "total_memory",
                PyLong_FromUnsignedLongLong(g.total_memory)) < 0 ||
      dlbpy_set(d, "managed_memory", dlbpy_capability(g.managed_memory)) < 0 ||
      dlbpy_set(d, "concurrent_managed",
                dlbpy_capability(g.concurrent_managed)) < 0 ||
      dlbpy_set(d, "host_register", dlbpy_capability(g.host_register)) < 0 ||
      dlbpy_set(d, "ipc", dlbpy_capability(g.ipc)) < 0)
    goto fail;
  return d;
fail:
  Py_DECREF(d);
  return NULL;
}

static PyObject *dlbpy_runtime_dict(dlb_runtime rt, const char *label,
                                    DLDeviceType type) {
  PyObject *d = PyDict_New();
  if (d == NULL) return NULL;
  dlb_status s = dlb_runtime_status(rt);
  int count = 0, version = 0;
  if (s == DLB_OK) {
    (void)dlb_runtime_device_count(rt, &count);
    (void)dlb_runtime_version(rt, &version);
  }
  const char *lib = dlb_runtime_library(rt);
  PyObject *devices = PyList_New(0);
  if (devices == NULL) goto fail;
  if (dlbpy_set(d, "name", PyUnicode_FromString(label)) < 0 ||
      dlbpy_set(d, "available", PyBool_FromLong(s == DLB_OK)) < 0 ||
      dlbpy_set(d, "status", PyUnicode_FromString(dlb_status_name(s))) < 0 ||
      dlbpy_set(d, "error", s == DLB_OK ? dlbpy_ref(Py_None)
                                        : PyUnicode_FromString(
                                              dlb_last_error())) < 0 ||
      dlbpy_set(d, "version", s == DLB_OK ? PyLong_FromLong(version)
                                          : dlbpy_ref(Py_None)) < 0 ||
      dlbpy_set(d, "library", lib != NULL ? PyUnicode_DecodeFSDefault(lib)
                                          : dlbpy_ref(Py_None)) < 0) {
    Py_DECREF(devices);
    goto fail;
  }
  if (s != DLB_OK) dlb_clear_error();
  for (int i = 0; i < count; i++) {
    PyObject *g = dlbpy_gpu_dict((DLDevice){type, i});
    if (g == NULL || PyList_Append(devices, g) < 0) {
      Py_XDECREF(g);
      Py_DECREF(devices);
      goto fail;
    }
    Py_DECREF(g);
  }
  if (dlbpy_set(d, "devices", devices) < 0) goto fail;
  return d;
fail:
  Py_DECREF(d);
  return NULL;
}

PyObject *dlbpy_runtimes(PyObject *module, PyObject *unused) {
  (void)module;
  (void)unused;
  PyObject *cuda = dlbpy_runtime_dict(DLB_RUNTIME_CUDA, "cuda", kDLCUDA);
  if (cuda == NULL) return NULL;
  PyObject *rocm = dlbpy_runtime_dict(DLB_RUNTIME_HIP, "rocm", kDLROCM);
  if (rocm == NULL) {
    Py_DECREF(cuda);
    return NULL;
  }
  PyObject *list = PyList_New(2);
  if (list == NULL) {
    Py_DECREF(cuda);
    Py_DECREF(rocm);
    return NULL;
  }
  PyList_SET_ITEM(list, 0, cuda);
  PyList_SET_ITEM(list, 1, rocm);
  return list;
}
