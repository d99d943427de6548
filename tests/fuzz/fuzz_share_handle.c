/*
 * fuzz_share_handle.c -- libFuzzer target for the share handle decoder
 * (src/share/handle.c), the first code to see a handle from another
 * process. Input: 8 bytes of file size (little-endian; the size fstat
 * would report for the descriptor), then the handle. The decoder must
 * return a status for every input, and whatever it accepts must lie
 * inside the memory: checked here again from the decoded fields.
 * Seeds: tests/fuzz/corpus/share_handle/.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "share/share_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 8) return 0;
  uint64_t file_size = 0;
  for (int i = 0; i < 8; i++) file_size |= (uint64_t)data[i] << (8 * i);
  dlb__share_meta m;
  dlb_status st = dlb__share_decode(data + 8, size - 8, file_size, &m);
  if (st != DLB_OK) {
    if (st != DLB_E_HANDLE || dlb_last_error()[0] == '\0') abort();
    return 0;
  }
  /* Accepted: the elements lie in the region the handle names (measured
   * packed, which a padded sub-byte tensor only exceeds). */
  uint64_t region =
      m.kind == DLB__SHARE_HOST ? file_size - m.data_offset : m.size;
  DLTensor t;
  memset(&t, 0, sizeof t);
  t.data = (void *)((uintptr_t)1 << 40);
  t.device.device_type = kDLCPU;
  t.ndim = m.ndim;
  t.dtype = m.dtype;
  t.shape = m.shape;
  t.strides = m.strides;
  t.byte_offset = m.byte_offset;
  int64_t lo = 0, hi = 0;
  if (dlb_tensor_byte_span(&t, &lo, &hi) != DLB_OK) abort();
  int64_t numel = 0;
  if (dlb_tensor_numel(&t, &numel) != DLB_OK) abort();
  if (lo < 0 || (uint64_t)hi > region) abort();
  /* Encoding what was decoded gives the same bytes back. */
  uint8_t again[DLB_SHARE_HANDLE_MAX];
  dlb__share_encode(&m, again);
  if (dlb__share_encoded_size(m.ndim) != size - 8 ||
      memcmp(again, data + 8, size - 8) != 0)
    abort();
  return 0;
}
