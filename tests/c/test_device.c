/* test_device.c -- device kind names, parsing, canonical form, access. */
#include <limits.h>

#include "test.h"

/* The DLPack 1.3 device types and their names, written out independently
 * of the library's table. */
static const struct {
  int type;
  const char *name;
  int host_type;
} kinds[] = {
    {1, "cpu", 1},       {2, "cuda", 0},          {3, "cuda_host", 1},
    {4, "opencl", 0},    {7, "vulkan", 0},        {8, "metal", 0},
    {9, "vpi", 0},       {10, "rocm", 0},         {11, "rocm_host", 1},
    {12, "ext_dev", 0},  {13, "cuda_managed", 1}, {14, "oneapi", 0},
    {15, "webgpu", 0},   {16, "hexagon", 0},      {17, "maia", 0},
    {18, "trn", 0},
};
#define NKINDS (sizeof kinds / sizeof kinds[0])

/* Values that are not DLPack 1.3 device types. */
static const int unknown_types[] = {0, 5, 6, 19, 20, 64, -1, INT_MIN, INT_MAX};
#define NUNKNOWN (sizeof unknown_types / sizeof unknown_types[0])

static DLDevice dev(int type, int32_t id) {
  DLDevice d;
  d.device_type = (DLDeviceType)type;
  d.device_id = id;
  return d;
}

static const DLDevice sentinel = {(DLDeviceType)99, 4242};

#define CHECK_UNTOUCHED(d)                         \
  do {                                             \
    CHECK_EQ_INT((d).device_type, sentinel.device_type); \
    CHECK_EQ_INT((d).device_id, sentinel.device_id);     \
  } while (0)

DLB_TEST(device_type_names_cover_dlpack_1_3) {
  CHECK_EQ_INT(NKINDS, 16);
  for (size_t i = 0; i < NKINDS; i++) {
    DLDeviceType t = (DLDeviceType)kinds[i].type;
    CHECK_STR(dlb_device_type_name(t), kinds[i].name);
    CHECK_EQ_INT(dlb_device_type_is_known(t), 1);
    DLDeviceType parsed = (DLDeviceType)0;
    CHECK_OK(dlb_device_type_parse(kinds[i].name, &parsed));
    CHECK_EQ_INT(parsed, kinds[i].type);
  }
  for (size_t i = 0; i < NUNKNOWN; i++) {
    DLDeviceType t = (DLDeviceType)unknown_types[i];
    CHECK(dlb_device_type_name(t) == NULL);
    CHECK_EQ_INT(dlb_device_type_is_known(t), 0);
    CHECK_EQ_INT(dlb_device_type_is_host_type(t), 0);
    CHECK_EQ_INT(dlb_device_type_cpu_accessible(t), 0);
  }
}

DLB_TEST(device_type_host_and_cpu_accessible_sets) {
  for (size_t i = 0; i < NKINDS; i++) {
    DLDeviceType t = (DLDeviceType)kinds[i].type;
    CHECK_EQ_INT(dlb_device_type_is_host_type(t), kinds[i].host_type);
    CHECK_EQ_INT(dlb_device_type_cpu_accessible(t), kinds[i].host_type);
  }
}

DLB_TEST(device_type_parse_rejects) {
  static const char *const bad[] = {
      "", "CPU", "Cuda", "gpu", " cpu", "cpu ", "cuda:0", "cuda_", "cud",
      "cudahost", "kDLCUDA", "2", "cpu\n",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    DLDeviceType t = (DLDeviceType)99;
    CHECK_STATUS(dlb_device_type_parse(bad[i], &t), DLB_E_DEVICE);
    CHECK_EQ_INT(t, 99);
  }
  CHECK_STATUS(dlb_device_type_parse("gpu", &(DLDeviceType){kDLCPU}),
               DLB_E_DEVICE);
  CHECK_ERROR_MENTIONS("\"gpu\"");
  DLDeviceType t = (DLDeviceType)99;
  CHECK_STATUS(dlb_device_type_parse(NULL, &t), DLB_E_INVAL);
  CHECK_ERROR_MENTIONS("name");
  CHECK_EQ_INT(t, 99);
  CHECK_STATUS(dlb_device_type_parse("cpu", NULL), DLB_E_INVAL);
  CHECK_ERROR_MENTIONS("out");
}

DLB_TEST(device_parse_accepts) {
  static const struct {
    const char *text;
    int type;
    int32_t id;
  } good[] = {
      {"cpu", kDLCPU, 0},
      {"cpu:0", kDLCPU, 0},
      {"cuda", kDLCUDA, 0},
      {"cuda:0", kDLCUDA, 0},
      {"cuda:1", kDLCUDA, 1},
      {"cuda:10", kDLCUDA, 10},
      {"cuda:9", kDLCUDA, 9},
      {"ext_dev:1234567890", kDLExtDev, 1234567890},
      {"cuda:2147483647", kDLCUDA, INT32_MAX},
      {"cuda_managed", kDLCUDAManaged, 0},
      {"cuda_host:0", kDLCUDAHost, 0},
      {"rocm_host:0", kDLROCMHost, 0},
      {"rocm:3", kDLROCM, 3},
      {"ext_dev:5", kDLExtDev, 5},
      {"trn:7", kDLTrn, 7},
      {"vulkan", kDLVulkan, 0},
  };
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
    DLDevice d = sentinel;
    CHECK_OK(dlb_device_parse(good[i].text, &d));
    CHECK_EQ_INT(d.device_type, good[i].type);
    CHECK_EQ_INT(d.device_id, good[i].id);
  }
}

DLB_TEST(device_parse_rejects_malformed_ids) {
  static const char *const bad[] = {
      "cuda:",        "cuda:-1",    "cuda:1x",      "cuda:99999999999",
      "cuda:2147483648", "cuda:+1", "cuda: 1",      "cuda:1 ",
      "cuda:01",      "cuda:00",    "cuda:1:2",     "cuda::1",
      "cuda:0x1",     "cuda:1.0",   "cuda:x",       "cuda:4294967297",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    DLDevice d = sentinel;
    CHECK_STATUS(dlb_device_parse(bad[i], &d), DLB_E_DEVICE);
    /* The message quotes the text after the first colon. */
    char id_text[64];
    snprintf(id_text, sizeof id_text, "device_id \"%s\"",
             strchr(bad[i], ':') + 1);
    CHECK_ERROR_MENTIONS(id_text);
    CHECK_UNTOUCHED(d);
  }
}

DLB_TEST(device_parse_rejects_unknown_kinds) {
  static const char *const bad[] = {
      "", ":0", ":", "CUDA:0", "foo:1", "cuda :1", " cuda", "gpu", "cuda0",
      "cuda_managed_", "cpux", "5", "kDLCPU",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    DLDevice d = sentinel;
    CHECK_STATUS(dlb_device_parse(bad[i], &d), DLB_E_DEVICE);
    CHECK_ERROR_MENTIONS(bad[i]);
    CHECK_ERROR_MENTIONS("kind");
    CHECK_UNTOUCHED(d);
  }
}

DLB_TEST(device_parse_host_types_take_only_id_0) {
  static const char *const bad[] = {
      "cpu:1", "cuda_host:2", "rocm_host:1", "cuda_managed:1",
      "cpu:2147483647",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    DLDevice d = sentinel;
    CHECK_STATUS(dlb_device_parse(bad[i], &d), DLB_E_DEVICE);
    char id_text[64];
    snprintf(id_text, sizeof id_text, "device_id is %s;",
             strchr(bad[i], ':') + 1);
    CHECK_ERROR_MENTIONS(id_text);
    CHECK_UNTOUCHED(d);
  }
}

DLB_TEST(device_parse_null_arguments) {
  DLDevice d = sentinel;
  CHECK_STATUS(dlb_device_parse(NULL, &d), DLB_E_INVAL);
  CHECK_ERROR_MENTIONS("text");
  CHECK_UNTOUCHED(d);
  CHECK_STATUS(dlb_device_parse("cuda:1", NULL), DLB_E_INVAL);
  CHECK_ERROR_MENTIONS("out");
}

DLB_TEST(device_parse_long_text_message_is_bounded) {
  char text[2000];
  memset(text, 'a', sizeof text - 1);
  text[sizeof text - 1] = '\0';
  DLDevice d = sentinel;
  CHECK_STATUS(dlb_device_parse(text, &d), DLB_E_DEVICE);
  CHECK(strlen(dlb_last_error()) < 200);
  CHECK_UNTOUCHED(d);
}

DLB_TEST(device_format_canonical_names) {
  char buf[DLB_DEVICE_NAME_MAX];
  CHECK_OK(dlb_device_format(dev(kDLCUDA, 3), buf, sizeof buf));
  CHECK_STR(buf, "cuda:3");
  CHECK_OK(dlb_device_format(dev(kDLCUDA, 0), buf, sizeof buf));
  CHECK_STR(buf, "cuda:0");
  CHECK_OK(dlb_device_format(dev(kDLCPU, 0), buf, sizeof buf));
  CHECK_STR(buf, "cpu");
  /* Host-type kinds drop a stray id, as normalisation does. */
  CHECK_OK(dlb_device_format(dev(kDLCUDAHost, 5), buf, sizeof buf));
  CHECK_STR(buf, "cuda_host");
  CHECK_OK(dlb_device_format(dev(kDLCUDAManaged, 0), buf, sizeof buf));
  CHECK_STR(buf, "cuda_managed");
  CHECK_OK(dlb_device_format(dev(kDLROCMHost, 1), buf, sizeof buf));
  CHECK_STR(buf, "rocm_host");
  CHECK_OK(dlb_device_format(dev(kDLExtDev, INT32_MAX), buf, sizeof buf));
  CHECK_STR(buf, "ext_dev:2147483647");
}

DLB_TEST(device_format_buffer_sizes) {
  char buf[16];
  /* "cuda:12" needs 8 bytes with its NUL, and writes no more. */
  memset(buf, 'z', sizeof buf);
  CHECK_OK(dlb_device_format(dev(kDLCUDA, 12), buf, 8));
  CHECK_STR(buf, "cuda:12");
  CHECK_EQ_INT(buf[8], 'z');
  memset(buf, 'z', sizeof buf);
  CHECK_STATUS(dlb_device_format(dev(kDLCUDA, 12), buf, 7), DLB_E_INVAL);
  CHECK_ERROR_MENTIONS("size is 7; \"cuda:12\" needs 8");
  CHECK_STR(buf, "");
  memset(buf, 'z', sizeof buf);
  CHECK_STATUS(dlb_device_format(dev(kDLCPU, 0), buf, 0), DLB_E_INVAL);
  CHECK_EQ_INT(buf[0], 'z');
  CHECK_STATUS(dlb_device_format(dev(kDLCPU, 0), NULL, 16), DLB_E_INVAL);
  CHECK_ERROR_MENTIONS("buf");
}

DLB_TEST(device_format_rejects_invalid_devices) {
  char buf[DLB_DEVICE_NAME_MAX];
  for (size_t i = 0; i < NUNKNOWN; i++) {
    memset(buf, 'z', sizeof buf);
    CHECK_STATUS(dlb_device_format(dev(unknown_types[i], 0), buf, sizeof buf),
                 DLB_E_DEVICE);
    CHECK_ERROR_MENTIONS("device_type");
    CHECK_EQ_INT(buf[0], 'z');
  }
  memset(buf, 'z', sizeof buf);
  CHECK_STATUS(dlb_device_format(dev(kDLCUDA, -1), buf, sizeof buf),
               DLB_E_DEVICE);
  CHECK_ERROR_MENTIONS("device_id is -1");
  CHECK_EQ_INT(buf[0], 'z');
}

DLB_TEST(device_round_trip_every_kind) {
  static const int32_t ids[] = {0, 1, 2, 7, 12345, INT32_MAX, -1, INT32_MIN};
  int valid = 0;
  for (int type = -2; type <= 25; type++) {
    for (size_t j = 0; j < sizeof ids / sizeof ids[0]; j++) {
      DLDevice d = dev(type, ids[j]);
      char buf[DLB_DEVICE_NAME_MAX];
      if (dlb_device_normalize(&d) != DLB_OK) {
        CHECK_STATUS(dlb_device_format(dev(type, ids[j]), buf, sizeof buf),
                     DLB_E_DEVICE);
        continue;
      }
      valid++;
      CHECK_OK(dlb_device_format(dev(type, ids[j]), buf, sizeof buf));
      DLDevice back = sentinel;
      CHECK_OK(dlb_device_parse(buf, &back));
      CHECK_EQ_INT(back.device_type, d.device_type);
      CHECK_EQ_INT(back.device_id, d.device_id);
      CHECK(dlb_device_equal(back, dev(type, ids[j])));
    }
  }
  /* 16 kinds times the 6 non-negative ids. */
  CHECK_EQ_INT(valid, 16 * 6);
}

DLB_TEST(device_normalize) {
  for (size_t i = 0; i < NKINDS; i++) {
    DLDevice d = dev(kinds[i].type, 3);
    CHECK_OK(dlb_device_normalize(&d));
    CHECK_EQ_INT(d.device_type, kinds[i].type);
    CHECK_EQ_INT(d.device_id, kinds[i].host_type ? 0 : 3);
  }
  for (size_t i = 0; i < NUNKNOWN; i++) {
    DLDevice d = dev(unknown_types[i], 0);
    CHECK_STATUS(dlb_device_normalize(&d), DLB_E_DEVICE);
    CHECK_ERROR_MENTIONS("device_type");
    CHECK_EQ_INT((int)d.device_type, unknown_types[i]);
  }
  DLDevice d = dev(kDLCUDA, -4);
  CHECK_STATUS(dlb_device_normalize(&d), DLB_E_DEVICE);
  CHECK_ERROR_MENTIONS("device_id is -4");
  CHECK_EQ_INT(d.device_id, -4);
  /* A negative id is refused on host types too, not silently zeroed. */
  d = dev(kDLCUDAHost, -1);
  CHECK_STATUS(dlb_device_normalize(&d), DLB_E_DEVICE);
  CHECK_EQ_INT(d.device_id, -1);
  CHECK_STATUS(dlb_device_normalize(NULL), DLB_E_INVAL);
}

DLB_TEST(device_equal) {
  CHECK(dlb_device_equal(dev(kDLCUDA, 1), dev(kDLCUDA, 1)));
  CHECK(!dlb_device_equal(dev(kDLCUDA, 0), dev(kDLCUDA, 1)));
  CHECK(!dlb_device_equal(dev(kDLCUDA, 0), dev(kDLROCM, 0)));
  CHECK(!dlb_device_equal(dev(kDLCPU, 0), dev(kDLCUDAHost, 0)));
  CHECK(dlb_device_equal(dev(kDLCUDAHost, 0), dev(kDLCUDAHost, 5)));
  CHECK(dlb_device_equal(dev(kDLCPU, 3), dev(kDLCPU, 0)));
  CHECK(dlb_device_equal(dev(kDLCUDAManaged, 2), dev(kDLCUDAManaged, 1)));
  /* Invalid devices name no memory, so not even the same one. */
  dlb_clear_error();
  CHECK(!dlb_device_equal(dev(5, 0), dev(5, 0)));
  CHECK(!dlb_device_equal(dev(kDLCUDA, -1), dev(kDLCUDA, -1)));
  CHECK_STR(dlb_last_error(), "");
}

DLB_TEST(device_can_access_from_host) {
  /* A consumer on any host-type kind is code on the CPU. */
  static const int host_consumers[] = {kDLCPU, kDLCUDAHost, kDLROCMHost,
                                       kDLCUDAManaged};
  for (size_t c = 0; c < 4; c++) {
    DLDevice consumer = dev(host_consumers[c], 0);
    for (size_t i = 0; i < NKINDS; i++) {
      for (int32_t id = 0; id < 3; id++) {
        CHECK_EQ_INT(dlb_device_can_access(consumer, dev(kinds[i].type, id)),
                     kinds[i].host_type);
      }
    }
    /* A stray id on a host consumer changes nothing. */
    CHECK(dlb_device_can_access(dev(host_consumers[c], 7), dev(kDLCPU, 0)));
  }
}

DLB_TEST(device_can_access_from_cuda) {
  DLDevice c1 = dev(kDLCUDA, 1);
  CHECK(dlb_device_can_access(c1, dev(kDLCUDA, 1)));
  CHECK(!dlb_device_can_access(c1, dev(kDLCUDA, 0)));
  CHECK(dlb_device_can_access(c1, dev(kDLCUDAHost, 0)));
  CHECK(dlb_device_can_access(c1, dev(kDLCUDAManaged, 0)));
  CHECK(!dlb_device_can_access(c1, dev(kDLCPU, 0)));
  CHECK(!dlb_device_can_access(c1, dev(kDLROCMHost, 0)));
  CHECK(!dlb_device_can_access(c1, dev(kDLROCM, 1)));
  CHECK(!dlb_device_can_access(c1, dev(kDLOpenCL, 1)));
}

DLB_TEST(device_can_access_from_rocm) {
  DLDevice r2 = dev(kDLROCM, 2);
  CHECK(dlb_device_can_access(r2, dev(kDLROCM, 2)));
  CHECK(!dlb_device_can_access(r2, dev(kDLROCM, 0)));
  CHECK(dlb_device_can_access(r2, dev(kDLROCMHost, 0)));
  CHECK(!dlb_device_can_access(r2, dev(kDLCUDAHost, 0)));
  CHECK(!dlb_device_can_access(r2, dev(kDLCUDAManaged, 0)));
  CHECK(!dlb_device_can_access(r2, dev(kDLCPU, 0)));
  CHECK(!dlb_device_can_access(r2, dev(kDLCUDA, 2)));
}

DLB_TEST(device_can_access_other_kinds_only_their_own) {
  for (size_t i = 0; i < NKINDS; i++) {
    int t = kinds[i].type;
    if (kinds[i].host_type || t == kDLCUDA || t == kDLROCM) continue;
    for (size_t j = 0; j < NKINDS; j++) {
      for (int32_t id = 0; id < 3; id++) {
        CHECK_EQ_INT(dlb_device_can_access(dev(t, 1), dev(kinds[j].type, id)),
                     kinds[j].type == t && id == 1);
      }
    }
  }
}

DLB_TEST(device_can_access_is_reflexive_and_refuses_invalid) {
  for (size_t i = 0; i < NKINDS; i++) {
    for (int32_t id = 0; id < 3; id++) {
      DLDevice d = dev(kinds[i].type, id);
      CHECK(dlb_device_can_access(d, d));
    }
  }
  dlb_clear_error();
  for (size_t i = 0; i < NUNKNOWN; i++) {
    DLDevice bad = dev(unknown_types[i], 0);
    CHECK(!dlb_device_can_access(bad, bad));
    CHECK(!dlb_device_can_access(bad, dev(kDLCPU, 0)));
    CHECK(!dlb_device_can_access(dev(kDLCPU, 0), bad));
  }
  CHECK(!dlb_device_can_access(dev(kDLCUDA, -1), dev(kDLCUDA, -1)));
  CHECK(!dlb_device_can_access(dev(kDLCUDA, 0), dev(kDLCUDA, -1)));
  CHECK_STR(dlb_last_error(), "");
}
