/*
 * device_types.c -- dlbridge.DLDeviceType, the IntEnum of DLPack's device
 * types. It is made here, not in Python, so that Tensor.__dlpack_device__
 * can answer with its members, as the array API standard asks (an Enum);
 * they compare equal to the plain ints other producers give.
 */
#include "dlbpy.h"

static const struct {
  const char *name;
  int value;
} dlbpy_device_types[] = {
    {"kDLCPU", kDLCPU},         {"kDLCUDA", kDLCUDA},
    {"kDLCUDAHost", kDLCUDAHost}, {"kDLOpenCL", kDLOpenCL},
    {"kDLVulkan", kDLVulkan},   {"kDLMetal", kDLMetal},
    {"kDLVPI", kDLVPI},         {"kDLROCM", kDLROCM},
    {"kDLROCMHost", kDLROCMHost}, {"kDLExtDev", kDLExtDev},
    {"kDLCUDAManaged", kDLCUDAManaged}, {"kDLOneAPI", kDLOneAPI},
    {"kDLWebGPU", kDLWebGPU},   {"kDLHexagon", kDLHexagon},
    {"kDLMAIA", kDLMAIA},       {"kDLTrn", kDLTrn},
};

#define DLBPY_DEVICE_TYPE_COUNT \
  (sizeof dlbpy_device_types / sizeof dlbpy_device_types[0])

/* IntEnum("DLDeviceType", [(name, value), ...], module="dlbridge"). */
static PyObject *dlbpy_device_type_enum(void) {
  PyObject *members = PyList_New((Py_ssize_t)DLBPY_DEVICE_TYPE_COUNT);
  if (members == NULL) return NULL;
  for (size_t i = 0; i < DLBPY_DEVICE_TYPE_COUNT; i++) {
    PyObject *pair = Py_BuildValue("(si)", dlbpy_device_types[i].name,
                                   dlbpy_device_types[i].value);
    if (pair == NULL) {
      Py_DECREF(members);
      return NULL;
    }
    PyList_SET_ITEM(members, (Py_ssize_t)i, pair);
  }
  PyObject *cls = NULL, *args = NULL, *kwargs = NULL;
  PyObject *enum_module = PyImport_ImportModule("enum");
  PyObject *int_enum = enum_module != NULL
                           ? PyObject_GetAttrString(enum_module, "IntEnum")
                           : NULL;
  Py_XDECREF(enum_module);
  if (int_enum != NULL) args = Py_BuildValue("(sO)", "DLDeviceType", members);
  if (args != NULL) kwargs = Py_BuildValue("{ss}", "module", "dlbridge");
  if (kwargs != NULL) cls = PyObject_Call(int_enum, args, kwargs);
  Py_XDECREF(kwargs);
  Py_XDECREF(args);
  Py_XDECREF(int_enum);
  Py_DECREF(members);
  PyObject *doc = cls != NULL ? PyUnicode_FromString(
                                    "DLPack device types, as "
                                    "Tensor.__dlpack_device__()[0] gives "
                                    "them.")
                              : NULL;
  if (doc == NULL || PyObject_SetAttrString(cls, "__doc__", doc) < 0)
    Py_CLEAR(cls);
  Py_XDECREF(doc);
  return cls;
}

int dlbpy_device_types_add(PyObject *module, dlbpy_state *st) {
  PyObject *cls = dlbpy_device_type_enum();
  if (cls == NULL) return -1;
  int last = 0;
  for (size_t i = 0; i < DLBPY_DEVICE_TYPE_COUNT; i++)
    if (dlbpy_device_types[i].value > last) last = dlbpy_device_types[i].value;
  /* Indexed by value; None where DLPack defines no type. */
  st->device_types = PyTuple_New(last + 1);
  for (int v = 0; st->device_types != NULL && v <= last; v++) {
    PyObject *member = Py_None;
    Py_INCREF(member);
    for (size_t i = 0; i < DLBPY_DEVICE_TYPE_COUNT; i++) {
      if (dlbpy_device_types[i].value != v) continue;
      Py_DECREF(member);
      member = PyObject_GetAttrString(cls, dlbpy_device_types[i].name);
      break;
    }
    if (member == NULL) Py_CLEAR(st->device_types);
    else PyTuple_SET_ITEM(st->device_types, v, member);
  }
  /* PyModule_AddObject steals the reference only when it succeeds. */
  if (st->device_types == NULL ||
      PyModule_AddObject(module, "DLDeviceType", cls) < 0) {
    Py_DECREF(cls);
    return -1;
  }
  return 0;
}

PyObject *dlbpy_device_type_object(dlbpy_state *st, DLDeviceType type) {
  if (st->device_types != NULL && (int)type >= 0 &&
      (Py_ssize_t)type < PyTuple_GET_SIZE(st->device_types)) {
    PyObject *member = PyTuple_GET_ITEM(st->device_types, (Py_ssize_t)type);
    if (member != Py_None) {
      Py_INCREF(member);
      return member;
    }
  }
  return PyLong_FromLong((long)type);
}
