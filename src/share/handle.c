/*
 * handle.c -- the share handle's byte format, and its decoder, which is
 * the first line of defence against hostile handles.
 *
 * Format version 1, every integer little-endian:
 *    0  8  magic "DLBSHARE"
 *    8  2  format version
 *   10  2  fixed part's size (208)
 *   12  4  whole handle's size: 208 + 16 * ndim
 *   16  1  kind (dlb__share_kind)
 *   17  1  dtype code, 18: 1 dtype bits, 19: 1 zero
 *   20  2  dtype lanes, 22: 2 zero
 *   24  4  ndim (signed)
 *   28  4  device_id (signed)
 *   32  8  DLPack flags
 *   40  8  size of the memory (host: whole file; device: allocation)
 *   48  8  data_offset (host: start of the data region in the file)
 *   56  8  byte_offset of element 0 from the region's start
 *   64 16  identity of the memory
 *   80 64  runtime IPC memory handle (device kinds; zero for host)
 *  144 64  runtime IPC event handle (device kinds; zero for host)
 *  208     shape[ndim], then strides[ndim] (signed 64-bit)
 * Readers refuse any other version: a newer writer changes the version.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "share/share_internal.h"

#define MAGIC "DLBSHARE"
#define FORMAT_VERSION 1u
#define FIXED 208u

size_t dlb__share_encoded_size(int32_t ndim) {
  return FIXED + 16u * (size_t)ndim;
}

static void put(uint8_t *p, uint64_t v, int n) {
  for (int i = 0; i < n; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get(const uint8_t *p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

void dlb__share_encode(const dlb__share_meta *m, uint8_t *b) {
  size_t total = dlb__share_encoded_size(m->ndim);
  memset(b, 0, total);
  memcpy(b, MAGIC, 8);
  put(b + 8, FORMAT_VERSION, 2);
  put(b + 10, FIXED, 2);
  put(b + 12, total, 4);
  b[16] = (uint8_t)m->kind;
  b[17] = m->dtype.code;
  b[18] = m->dtype.bits;
  put(b + 20, m->dtype.lanes, 2);
  put(b + 24, (uint32_t)m->ndim, 4);
  put(b + 28, (uint32_t)m->device_id, 4);
  put(b + 32, m->flags, 8);
  put(b + 40, m->size, 8);
  put(b + 48, m->data_offset, 8);
  put(b + 56, m->byte_offset, 8);
  memcpy(b + 64, m->id, DLB__SHARE_ID_BYTES);
  memcpy(b + 80, m->mem_handle, DLB__SHARE_IPC_BYTES);
  memcpy(b + 144, m->event_handle, DLB__SHARE_IPC_BYTES);
  for (int32_t d = 0; d < m->ndim; d++) {
    put(b + FIXED + 8 * (size_t)d, (uint64_t)m->shape[d], 8);
    put(b + FIXED + 8 * (size_t)(m->ndim + d), (uint64_t)m->strides[d], 8);
  }
}

#define BAD(...) dlb__fail(DLB_E_HANDLE, "share handle: " __VA_ARGS__)

/* The fixed part's fields that need nothing but the bytes. */
static dlb_status decode_fixed(const uint8_t *b, size_t len,
                               dlb__share_meta *m) {
  if (len < 16)
    return BAD("%zu bytes is truncated; a handle has at least %u", len, FIXED);
  if (memcmp(b, MAGIC, 8) != 0)
    return BAD("magic is not \"" MAGIC "\"; not a dlbridge handle");
  unsigned version = (unsigned)get(b + 8, 2);
  if (version != FORMAT_VERSION)
    return BAD("format version is %u; this library reads version %u",
               version, FORMAT_VERSION);
  unsigned fixed = (unsigned)get(b + 10, 2);
  if (fixed != FIXED)
    return BAD("fixed part is %u bytes; version %u has %u", fixed,
               FORMAT_VERSION, FIXED);
  uint64_t total = get(b + 12, 4);
  if (total != len)
    return BAD("handle says it is %llu bytes but %zu were given (%s)",
               (unsigned long long)total, len,
               total > len ? "truncated" : "oversized");
  if (len < FIXED || len > DLB_SHARE_HANDLE_MAX)
    return BAD("%zu bytes; a handle has %u to %d", len, FIXED,
               DLB_SHARE_HANDLE_MAX);
  unsigned kind = b[16];
  if (kind < DLB__SHARE_HOST || kind > DLB__SHARE_HIP)
    return BAD("kind is %u; known kinds are 1 (host), 2 (cuda), 3 (rocm)",
               kind);
  if (b[19] != 0 || get(b + 22, 2) != 0)
    return BAD("reserved bytes 19 and 22..23 are not zero");
  int32_t ndim = (int32_t)(uint32_t)get(b + 24, 4);
  if (ndim < 0 || ndim > DLB_MAX_NDIM)
    return BAD("ndim is %d; must be 0..%d", (int)ndim, DLB_MAX_NDIM);
  if (len != dlb__share_encoded_size(ndim))
    return BAD("%zu bytes with ndim %d; expected %zu", len, (int)ndim,
               dlb__share_encoded_size(ndim));
  m->kind = (dlb__share_kind)kind;
  m->dtype.code = b[17];
  m->dtype.bits = b[18];
  m->dtype.lanes = (uint16_t)get(b + 20, 2);
  m->ndim = ndim;
  m->device_id = (int32_t)(uint32_t)get(b + 28, 4);
  m->flags = get(b + 32, 8);
  m->size = get(b + 40, 8);
  m->data_offset = get(b + 48, 8);
  m->byte_offset = get(b + 56, 8);
  memcpy(m->id, b + 64, DLB__SHARE_ID_BYTES);
  memcpy(m->mem_handle, b + 80, DLB__SHARE_IPC_BYTES);
  memcpy(m->event_handle, b + 144, DLB__SHARE_IPC_BYTES);
  for (int32_t d = 0; d < ndim; d++) {
    m->shape[d] = (int64_t)get(b + FIXED + 8 * (size_t)d, 8);
    m->strides[d] = (int64_t)get(b + FIXED + 8 * (size_t)(ndim + d), 8);
  }
  return DLB_OK;
}

/* Where the memory's region starts and how long it is, for its kind. */
static dlb_status region_of(const dlb__share_meta *m, uint64_t file_size,
                            uint64_t *region) {
  if (m->kind != DLB__SHARE_HOST) {
    if (m->data_offset != 0)
      return BAD("data_offset is %llu; device handles have 0",
                 (unsigned long long)m->data_offset);
    if (m->device_id < 0)
      return BAD("device_id is %d; must be >= 0", (int)m->device_id);
    if (m->size == 0 || m->size > (uint64_t)INT64_MAX)
      return BAD("allocation size is %llu; must be 1..2^63-1",
                 (unsigned long long)m->size);
    *region = m->size;
    return DLB_OK;
  }
  if (m->device_id != 0)
    return BAD("device_id is %d; host handles have 0", (int)m->device_id);
  static const uint8_t zero[DLB__SHARE_IPC_BYTES];
  if (memcmp(m->mem_handle, zero, sizeof zero) != 0 ||
      memcmp(m->event_handle, zero, sizeof zero) != 0)
    return BAD("bytes 80..207 (the runtime IPC handles) are not zero; host "
               "handles have none");
  if (m->size != file_size)
    return BAD("memory size is %llu but the memory received has %llu bytes",
               (unsigned long long)m->size, (unsigned long long)file_size);
  uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
  if (m->data_offset < DLB__SHM_HEADER_BYTES || m->data_offset % page != 0 ||
      m->data_offset > ((uint64_t)1 << 24))
    return BAD("data_offset is %llu; must be a multiple of the page size "
               "(%llu) of at most 16 MiB",
               (unsigned long long)m->data_offset, (unsigned long long)page);
  if (m->data_offset >= file_size || file_size > (uint64_t)INT64_MAX)
    return BAD("data_offset %llu leaves no data in %llu bytes of memory",
               (unsigned long long)m->data_offset,
               (unsigned long long)file_size);
  *region = file_size - m->data_offset;
  return DLB_OK;
}

dlb_status dlb__share_decode(const void *buf, size_t len, uint64_t file_size,
                             dlb__share_meta *out) {
  if (buf == NULL) return BAD("buf is NULL");
  dlb__share_meta m;
  memset(&m, 0, sizeof m);
  dlb_status st = decode_fixed(buf, len, &m);
  if (st != DLB_OK) return st;
  uint64_t region = 0;
  st = region_of(&m, file_size, &region);
  if (st != DLB_OK) return st;
  if (m.byte_offset > (uint64_t)INT64_MAX)
    return BAD("byte_offset is %llu; more than 2^63-1",
               (unsigned long long)m.byte_offset);
  /* The geometry against a stand-in address, page aligned and far from
   * both ends of the address space, so only the handle's own numbers can
   * overflow. */
  DLManagedTensorVersioned probe;
  memset(&probe, 0, sizeof probe);
  probe.version.major = DLPACK_MAJOR_VERSION;
  probe.flags = m.flags;
  probe.dl_tensor.data = (void *)((uintptr_t)1 << 40);
  probe.dl_tensor.device.device_type = kDLCPU;
  probe.dl_tensor.ndim = m.ndim;
  probe.dl_tensor.dtype = m.dtype;
  probe.dl_tensor.shape = m.shape;
  probe.dl_tensor.strides = m.strides;
  probe.dl_tensor.byte_offset = m.byte_offset;
  dlb__span span;
  st = dlb__managed_validate_span(&probe, &span);
  if (st != DLB_OK) return dlb__fail_within(DLB_E_HANDLE, "share handle");
  if (span.lo < 0 || (uint64_t)span.hi > region)
    return BAD("elements occupy bytes [%lld, %lld) of a %llu-byte region",
               (long long)span.lo, (long long)span.hi,
               (unsigned long long)region);
  *out = m;
  return DLB_OK;
}
