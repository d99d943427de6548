#!/bin/sh
# test_cli.sh BUILD_DIR -- checks the dlbridge command-line tool's answers.
set -u
tool="$1/tools/dlbridge"
pass=0
fail=0
# $with: NAME=VALUE words added to the tool's environment.
with=
expect() { # expect NAME EXIT_CODE PATTERN -- ARGS...
  name=$1 code=$2 pattern=$3
  shift 4
  # shellcheck disable=SC2086
  out=$(env -u DLBRIDGE_CUDA_LIBRARY -u DLBRIDGE_HIP_LIBRARY $with "$tool" "$@" 2>&1)
  rc=$?
  if [ "$rc" -eq "$code" ] && printf '%s\n' "$out" | grep -Eq -- "$pattern"; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1))
    printf 'FAIL %s: exit %s (wanted %s), output:\n%s\n' "$name" "$rc" "$code" "$out"
  fi
}
expect version 0 '^[0-9]+\.[0-9]+\.[0-9]+$' -- version
expect info 0 'DLPack 1\.3' -- info
# Where a driver is installed the default search finds it; elsewhere the
# line names the files it tried.
expect info-cuda-default 0 'cuda +(DLB_E_NO_RUNTIME: .*libcuda\.so\.1|[0-9]+ device\(s\), version [0-9]+, from )' -- info
expect info-rocm-default 0 'rocm +(DLB_E_NO_RUNTIME: .*libamdhip64\.so|[0-9]+ device\(s\), version [0-9]+, from )' -- info
with="DLBRIDGE_CUDA_LIBRARY=/nonexistent/libcuda.so.1 DLBRIDGE_HIP_LIBRARY=/nonexistent/libamdhip64.so.6"
expect info-cuda-missing 0 'cuda +DLB_E_NO_RUNTIME: .*DLBRIDGE_CUDA_LIBRARY.*/nonexistent/libcuda\.so\.1' -- info
expect info-rocm-missing 0 'rocm +DLB_E_NO_RUNTIME: .*DLBRIDGE_HIP_LIBRARY.*/nonexistent/libamdhip64\.so\.6' -- info
with=
expect dtype 0 'float32: code 2, bits 32, lanes 1.*itemsize 4' -- dtype float32
expect dtype-subbyte 0 'float4_e2m1fn: code 17, bits 4.*sub-byte' -- dtype float4_e2m1fn
expect dtype-bad 1 'bogus' -- dtype bogus
expect device 0 'cuda:1: device_type 2, device_id 1, device memory' -- device cuda:1
expect device-host 0 'cuda_managed: device_type 13, device_id 0, host-type.*CPU-readable' -- device cuda_managed
expect device-bad 1 'cuda_host' -- device cuda_host:1
expect device-cpu 0 '^cpu: device_type 1, device_id 0, host-type.*, CPU-readable$' -- device cpu
expect device-not-readable 0 '^cuda:1: .*, not CPU-readable$' -- device cuda:1
# A bad name fails the run but the other names are still described.
expect dtype-mixed 1 '^int4: code 0, bits 4' -- dtype bogus int4
expect device-mixed 1 '^rocm_host: device_type 11' -- device nope rocm_host
expect help 0 '^usage: dlbridge' -- --help
expect help-word 0 '^  version ' -- help
expect help-short 0 '^  dtype NAME' -- -h
expect unknown-command 2 'unknown command' -- frobnicate
expect no-command 2 'usage' --
echo "cli: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
