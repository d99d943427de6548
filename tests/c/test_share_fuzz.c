/* test_share_fuzz.c -- the share handle fuzz target
 * (tests/fuzz/fuzz_share_handle.c) run over its seed corpus, each seed
 * accepted by the decoder, then over many random mutations of each: the
 * target aborts on any decoder misbehaviour. */
#include <dirent.h>

#include "share/share_internal.h"
#include "test.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

DLB_TEST(share_fuzz_corpus_and_mutations) {
  DIR *d = opendir(DLB_SHARE_CORPUS);
  CHECK(d != NULL);
  int seeds = 0;
  uint64_t rng = 88172645463325252ULL;
  for (struct dirent *e = readdir(d); e != NULL; e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", DLB_SHARE_CORPUS, e->d_name);
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL);
    uint8_t seed[8 + DLB_SHARE_HANDLE_MAX];
    size_t n = fread(seed, 1, sizeof seed, f);
    fclose(f);
    CHECK(n > 8);
    uint64_t size = 0;
    for (int i = 0; i < 8; i++) size |= (uint64_t)seed[i] << (8 * i);
    dlb__share_meta m;
    if (dlb__share_decode(seed + 8, n - 8, size, &m) != DLB_OK)
      dlb_test_failed(__FILE__, __LINE__, "seed %s refused: %s", e->d_name,
                      dlb_last_error());
    seeds++;
    for (int iter = 0; iter < 20000; iter++) {
      uint8_t buf[sizeof seed + 16];
      memcpy(buf, seed, n);
      size_t len = n;
      rng ^= rng << 13;
      rng ^= rng >> 7;
      rng ^= rng << 17;
      int flips = 1 + (int)(rng % 3);
      for (int k = 0; k < flips; k++) {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        buf[(rng >> 8) % len] = (uint8_t)(rng >> 40);
      }
      if (iter % 7 == 0) len = (size_t)((rng >> 20) % (len + 16));
      LLVMFuzzerTestOneInput(buf, len);
    }
  }
  closedir(d);
  CHECK(seeds >= 6);
}
