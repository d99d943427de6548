/*
 * dlbridge/common.h -- version and the export macro shared by every part of
 * the public API. Include <dlbridge.h> rather than this file.
 */
#ifndef DLBRIDGE_COMMON_H
#define DLBRIDGE_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "../dlpack/dlpack.h"
/* Written by the build (see version.h.in); the installed headers hold it. */
#include "dlbridge/version.h"

#define DLB_VERSION_NUMBER \
  (DLB_VERSION_MAJOR * 10000 + DLB_VERSION_MINOR * 100 + DLB_VERSION_PATCH)

/* DLB_API marks every exported symbol; everything else is hidden. Define
 * DLB_STATIC when linking the static library on Windows. */
#if defined(_WIN32) && !defined(DLB_STATIC)
#ifdef DLB_BUILDING
#define DLB_API __declspec(dllexport)
#else
#define DLB_API __declspec(dllimport)
#endif
#elif defined(__GNUC__)
#define DLB_API __attribute__((visibility("default")))
#else
#define DLB_API
#endif

#ifdef __cplusplus
#define DLB_BEGIN_DECLS extern "C" {
#define DLB_END_DECLS }
#else
#define DLB_BEGIN_DECLS
#define DLB_END_DECLS
#endif

DLB_BEGIN_DECLS

/* Returns the library's version as DLB_VERSION_NUMBER computed when it was
 * built (which may differ from the header's). */
DLB_API unsigned dlb_version_number(void);

/* Returns the version as a static string such as "0.1.0". */
DLB_API const char *dlb_version_string(void);

DLB_END_DECLS

#endif /* DLBRIDGE_COMMON_H */
