#!/bin/sh
# test_cli.sh BUILD_DIR -- checks the dlbridge command-line tool's answers,
# its JSON, its exit codes, and `dlbridge check` without a GPU runtime and
# against the emulated CUDA driver and HIP runtime (tests/emu).
set -u
build=$(cd "$1" && pwd)
tool="$build/tools/dlbridge"
emu="$build/tests/emu"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
pass=0
fail=0
# $with: NAME=VALUE words added to the tool's environment. Memory malloc
# hands out is filled with a pattern (MALLOC_PERTURB_), not left zero, so
# a field the tool forgets to set does not pass for 0.
with=
run_tool() {
  # shellcheck disable=SC2086
  env -u DLBRIDGE_CUDA_LIBRARY -u DLBRIDGE_HIP_LIBRARY -u DLBRIDGE_COPY_ISA \
    MALLOC_PERTURB_=165 $with "$tool" "$@"
}
expect() { # expect NAME EXIT_CODE PATTERN -- ARGS...
  name=$1 code=$2 pattern=$3
  shift 4
  out=$(run_tool "$@" 2>&1)
  rc=$?
  if [ "$rc" -eq "$code" ] && printf '%s\n' "$out" | grep -Eq -- "$pattern"; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1))
    printf 'FAIL %s: exit %s (wanted %s), output:\n%s\n' "$name" "$rc" "$code" "$out"
  fi
}
# expect_only NAME EXIT_CODE PATTERN UNWANTED -- ARGS...: as expect, and
# no line of the output matches UNWANTED.
expect_only() {
  name=$1 code=$2 pattern=$3 unwanted=$4
  shift 5
  out=$(run_tool "$@" 2>&1)
  rc=$?
  if [ "$rc" -eq "$code" ] && printf '%s\n' "$out" | grep -Eq -- "$pattern" &&
     ! printf '%s\n' "$out" | grep -Eq -- "$unwanted"; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1))
    printf 'FAIL %s: exit %s (wanted %s), output (wanted no line matching %s):\n%s\n' "$name" "$rc" "$code" "$unwanted" "$out"
  fi
}
# expect_json NAME EXIT_CODE PYTHON_EXPR -- ARGS...: stdout parses as JSON
# (python3 -m json.tool) and PYTHON_EXPR, about the parsed value j, holds.
expect_json() {
  name=$1 code=$2 cond=$3
  shift 4
  run_tool "$@" >"$scratch/out.json" 2>"$scratch/err"
  rc=$?
  if [ "$rc" -eq "$code" ] &&
     python3 -m json.tool "$scratch/out.json" >/dev/null 2>"$scratch/jerr" &&
     python3 -c "import json,os,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if ($cond) else 1)" "$scratch/out.json"; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1))
    printf 'FAIL %s: exit %s (wanted %s), condition %s, output:\n' "$name" "$rc" "$code" "$cond"
    cat "$scratch/out.json" "$scratch/err" "$scratch/jerr"
  fi
}

expect version 0 '^[0-9]+\.[0-9]+\.[0-9]+$' -- version
expect version-flag 0 '^[0-9]+\.[0-9]+\.[0-9]+$' -- --version
expect version-short 0 '^[0-9]+\.[0-9]+\.[0-9]+$' -- -V
expect_json version-json 0 'j["version"].count(".") == 2 and j["dlpack"] == "1.3"' -- version --json
# One JSON value, on one line that ends the output.
if [ "$(run_tool version --json | wc -l)" -eq 1 ] && [ "$(run_tool dtype --json int8 float32 | wc -l)" -eq 1 ]; then
  pass=$((pass + 1))
else
  fail=$((fail + 1))
  printf 'FAIL json-one-line: %s\n' "$(run_tool version --json | od -c | tail -2)"
fi
expect info 0 'DLPack 1\.3' -- info
# Where a driver is installed the default search finds it; elsewhere the
# line names the files it tried.
expect info-cuda-default 0 'cuda +(DLB_E_NO_RUNTIME: .*libcuda\.so\.1|[0-9]+ device\(s\), version [0-9]+, from )' -- info
expect info-rocm-default 0 'rocm +(DLB_E_NO_RUNTIME: .*libamdhip64\.so|[0-9]+ device\(s\), version [0-9]+, from )' -- info
expect info-kinds-cpu 0 '^kinds +cpu' -- info
thp=/sys/kernel/mm/transparent_hugepage/enabled
if [ -r "$thp" ]; then
  expect info-thp 0 "^ +transparent huge pages: $(sed 's/[][]/\\&/g' "$thp")$" -- info
  expect_json info-thp-json 0 'j["transparent_hugepages"] == open("'"$thp"'").read().strip()' -- info --json
fi
# The copy kernels: the best the machine has, lowered (never raised) by
# DLBRIDGE_COPY_ISA; an unknown name changes nothing.
expect info-kernels 0 '^cpu +copy threads [0-9]+, kernels (avx512|avx2|sse2|neon|portable)$' -- info
best=$(run_tool info --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["copy_kernels"])')
with="DLBRIDGE_COPY_ISA=portable"
expect info-kernels-portable 0 ', kernels portable$' -- info
with="DLBRIDGE_COPY_ISA=sse2"
expect_json info-kernels-sse2 0 'j["copy_kernels"] == ("'"$best"'" if "'"$best"'" in ("portable", "neon") else "sse2")' -- info --json
with="DLBRIDGE_COPY_ISA=avx2"
expect_json info-kernels-avx2 0 'j["copy_kernels"] == ("avx2" if "'"$best"'" == "avx512" else "'"$best"'")' -- info --json
with="DLBRIDGE_COPY_ISA=avx512"
expect_json info-kernels-avx512 0 'j["copy_kernels"] == "'"$best"'"' -- info --json
with="DLBRIDGE_COPY_ISA=avx"
expect_json info-kernels-unknown 0 'j["copy_kernels"] == "'"$best"'"' -- info --json
with="DLBRIDGE_CUDA_LIBRARY=/nonexistent/libcuda.so.1 DLBRIDGE_HIP_LIBRARY=/nonexistent/libamdhip64.so.6"
expect info-cuda-missing 0 'cuda +DLB_E_NO_RUNTIME: .*DLBRIDGE_CUDA_LIBRARY.*/nonexistent/libcuda\.so\.1' -- info
expect info-rocm-missing 0 'rocm +DLB_E_NO_RUNTIME: .*DLBRIDGE_HIP_LIBRARY.*/nonexistent/libamdhip64\.so\.6' -- info
expect info-only-cpu 0 '^kinds +cpu$' -- info
expect_json info-json-missing 0 'j["runtimes"][0]["status"] == "DLB_E_NO_RUNTIME" and "/nonexistent/libcuda.so.1" in j["runtimes"][0]["error"] and j["runtimes"][0]["devices"] == [] and j["kinds"] == ["cpu"]' -- info --json
expect check-cpu 0 '^2 of 2 checks passed$' -- check
expect check-cpu-table 0 '^cpu +ok$' -- check
# An empty name is refused wherever it stands.
for kinds in '' ',' ',cpu' 'cpu,' 'cpu,,cpu'; do
  expect "check-empty-kind-'$kinds'" 2 "^dlbridge check: --kinds '$kinds' has an empty name; usable here: cpu$" -- check --kinds "$kinds"
done
expect_only check-cpu-no-failures 0 '^2 of 2 checks passed$' '^FAIL' -- check
expect_json check-cpu-json 0 'j["passed"] and j["checks"] == 2 and j["copies"] == [{"from": "cpu", "to": "cpu", "ok": True, "error": None}]' -- check --json

# Against the emulated runtimes: every GPU, its properties, every kind.
with="DLBRIDGE_CUDA_LIBRARY=$emu/libcuda.so.1 DLBRIDGE_HIP_LIBRARY=$emu/libamdhip64.so.6 EMU_CUDA_DEVICE_MEMORY=2147483648 EMU_CUDA_CONCURRENT_MANAGED=0"
expect info-emu-cuda 0 '^  cuda:1  Emulated CUDA GPU 1, 2\.0 GiB; managed memory yes \(concurrent no\), host registration yes, IPC yes$' -- info
expect info-emu-rocm 0 '^  rocm:0  Emulated HIP GPU 0, 1\.0 GiB; managed memory yes \(concurrent no\), host registration unknown, IPC yes$' -- info
expect info-emu-kinds 0 '^kinds +cpu cuda:0 cuda:1 cuda_host cuda_managed cuda_host\(reg\) rocm:0 rocm:1 rocm_host rocm_host\(reg\)$' -- info
expect_json info-emu-json 0 'j["runtimes"][0]["devices"][1] == {"device": "cuda:1", "name": "Emulated CUDA GPU 1", "total_memory": 2147483648, "managed_memory": True, "concurrent_managed": False, "host_register": True, "ipc": True} and j["runtimes"][1]["devices"][0]["host_register"] is None and len(j["kinds"]) == 10' -- info --json
expect check-emu 0 '^110 of 110 checks passed$' -- check
expect check-emu-table 0 '^rocm_host\(reg\) +(ok +){9}ok$' -- check
expect_json check-emu-json 0 'j["passed"] and j["failures"] == 0 and len(j["copies"]) == 100 and {c["from"] for c in j["copies"]} == set(k["kind"] for k in j["kinds"])' -- check --json
expect check-emu-some 0 '^6 of 6 checks passed$' -- check --kinds cuda:1,rocm_host
# A kind named twice is checked once, in the order first named.
expect check-emu-twice 0 '^6 of 6 checks passed$' -- check --kinds rocm_host,cuda:1,rocm_host
expect_json check-emu-twice-json 0 '[k["kind"] for k in j["kinds"]] == ["rocm_host", "cuda:1"]' -- check --json --kinds rocm_host,cuda:1,rocm_host
expect check-bad-kind 2 "unknown or unusable kind 'cuda:7'; usable here: cpu cuda:0 cuda:1 cuda_host" -- check --kinds cpu,cuda:7
# A GPU's name comes from the runtime: text output escapes it as it
# escapes file names, JSON as JSON does.
with="DLBRIDGE_CUDA_LIBRARY=$emu/libcuda.so.1 EMU_CUDA_NAME=$(printf 'G\033c"\\\001\377')"
expect info-gpu-name-escaped 0 '^  cuda:0  G\\x1bc"\\\\\\x01\\xff, 1\.0 GiB;' -- info
expect_json info-gpu-name-json 0 'j["runtimes"][0]["devices"][1]["name"] == "G\x1bc\"\\\x01\ufffd"' -- info --json
# Many GPUs: every one of them and every host kind is listed and usable.
with="DLBRIDGE_CUDA_LIBRARY=$emu/libcuda.so.1 DLBRIDGE_HIP_LIBRARY=$emu/libamdhip64.so.6 EMU_CUDA_DEVICES=16 EMU_HIP_DEVICES=16"
expect info-many-gpus 0 '^kinds +cpu cuda:0 .* cuda:15 cuda_host cuda_managed cuda_host\(reg\) rocm:0 .* rocm:15 rocm_host rocm_host\(reg\)$' -- info
expect_json info-many-gpus-json 0 'len(j["kinds"]) == 38 and j["kinds"][-1] == "rocm_host(reg)"' -- info --json
expect check-many-gpus 0 '^6 of 6 checks passed$' -- check --kinds 'rocm:15,rocm_host(reg)'
# GPUs too small for the test tensors: allocation fails, the run fails.
with="DLBRIDGE_CUDA_LIBRARY=$emu/libcuda.so.1 EMU_CUDA_DEVICE_MEMORY=16"
expect check-emu-fails 1 '^FAIL cuda:0 -> cpu: allocate: .*cuMemAlloc' -- check
expect_json check-emu-fails-json 1 'not j["passed"] and j["failures"] > 0 and any(c["to"] == "cuda:1" and not c["ok"] and "allocate" in c["error"] for c in j["copies"])' -- check --json
# One page of memory per GPU: a copy to the GPU its source is on fails at
# the second allocation, with its own reason, and only those copies fail.
with="DLBRIDGE_CUDA_LIBRARY=$emu/libcuda.so.1 EMU_CUDA_DEVICE_MEMORY=4096"
expect check-emu-one-page 1 '^4 of 6 checks passed$' -- check --kinds cuda:0,cuda:1
expect check-emu-one-page-table 1 '^cuda:0 {11}FAIL {12}ok$' -- check --kinds cuda:0,cuda:1
expect check-emu-one-page-columns 1 '^ {17}cuda:0 {10}cuda:1$' -- check --kinds cuda:0,cuda:1
expect_only check-emu-one-page-reasons 1 '^FAIL cuda:1 -> cuda:1: allocate: cuMemAlloc_v2\(48 bytes\) on cuda:1: CUDA_ERROR_OUT_OF_MEMORY' '^FAIL cuda:(0 -> cuda:1|1 -> cuda:0|[01]:)' -- check --kinds cuda:0,cuda:1
# A copy, or its reading back, that the driver refuses fails that check
# alone, with the driver's reason.
with="DLBRIDGE_CUDA_LIBRARY=$emu/libcuda.so.1 EMU_CUDA_FAIL=cuMemcpy2DAsync_v2:1"
expect_only check-emu-copy-fails 1 '^FAIL cpu -> cuda:0: copy: cuMemcpy2DAsync_v2\(12 x 4 bytes, pitches 8 and 4\) on cuda:0: CUDA_ERROR_INVALID_VALUE' '^FAIL (cuda:0|cpu:|cpu -> cpu)' -- check --kinds cpu,cuda:0
with="DLBRIDGE_CUDA_LIBRARY=$emu/libcuda.so.1 EMU_CUDA_FAIL=cuMemcpyAsync:1"
expect check-emu-read-back-fails 1 '^FAIL cpu -> cuda:0: read back: cuMemcpyAsync\(48 bytes\) on cuda:0: CUDA_ERROR_INVALID_VALUE' -- check --kinds cpu,cuda:0
# The driver's description of an error is printed escaped, as names are.
with="DLBRIDGE_CUDA_LIBRARY=$emu/libcuda.so.1 EMU_CUDA_FAIL=cuMemcpyAsync:1 EMU_CUDA_ERROR_TEXT=$(printf 'bad\033\\')"
expect check-emu-reason-escaped 1 '^FAIL cpu -> cuda:0: read back: cuMemcpyAsync\(48 bytes\) on cuda:0: CUDA_ERROR_INVALID_VALUE \(1\): bad\\x1b\\\\$' -- check --kinds cpu,cuda:0
with=

expect dtype 0 'float32: code 2, bits 32, lanes 1.*itemsize 4' -- dtype float32
expect dtype-subbyte 0 'float4_e2m1fn: code 17, bits 4.*sub-byte' -- dtype float4_e2m1fn
expect dtype-bad 1 'bogus' -- dtype bogus
expect_json dtype-json 0 'j == [{"name": "bfloat16", "code": 4, "bits": 16, "lanes": 1, "subbyte": False, "itemsize": 2}]' -- dtype --json bfloat16
expect device 0 'cuda:1: device_type 2, device_id 1, device memory' -- device cuda:1
expect device-host 0 'cuda_managed: device_type 13, device_id 0, host-type.*CPU-readable' -- device cuda_managed
expect device-bad 1 'cuda_host' -- device cuda_host:1
expect device-cpu 0 '^cpu: device_type 1, device_id 0, host-type.*, CPU-readable$' -- device cpu
expect device-not-readable 0 '^cuda:1: .*, not CPU-readable$' -- device cuda:1
expect_json device-json 0 'j == [{"name": "rocm:3", "device_type": 10, "device_id": 3, "host_type": False, "cpu_readable": False}]' -- device rocm:3 --json
# A refused name is followed by the valid ones, once, and every name listed
# is accepted.
expect dtype-bad-lists 1 '^valid dtypes: int1 .* float32 .* handle bfloat16 .* bool .* float4_e2m1fn; a vector type appends xN \(float32x4\)$' -- dtype bogus
expect device-bad-lists 1 '^valid kinds: cpu cuda cuda_host .* cuda_managed .* trn; a device memory kind takes an index \(cuda:1\), a host kind none$' -- device nope
expect dtype-json-bad-lists 1 '^valid dtypes: int1 ' -- dtype --json bogus
for what in dtype device; do
  names=$(run_tool "$what" bogus 2>&1 >/dev/null | sed -n 's/^valid [a-z]*: \([^;]*\);.*/\1/p')
  # shellcheck disable=SC2086
  described=$(run_tool "$what" $names | wc -l)
  count=$(printf '%s\n' $names | wc -l)
  if [ "$count" -gt 10 ] && [ "$described" -eq "$count" ] &&
     [ "$(run_tool "$what" bogus nope 2>&1 | grep -c '^valid ')" -eq 1 ]; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1))
    printf 'FAIL %s-listed-names: %s of %s listed names described: %s\n' "$what" "$described" "$count" "$names"
  fi
done
# A bad name fails the run but the other names are still described.
expect dtype-mixed 1 '^int4: code 0, bits 4' -- dtype bogus int4
expect device-mixed 1 '^rocm_host: device_type 11' -- device nope rocm_host

# inspect: .npy headers as NumPy writes them, and a refused one.
python3 - "$scratch" <<'PY'
import struct, sys
def npy(path, major, d, data):
    head = 10 if major == 1 else 12
    text = d.encode()
    total = (head + len(text) + 1 + 63) // 64 * 64
    text += b" " * (total - head - len(text) - 1) + b"\n"
    size = struct.pack("<H" if major == 1 else "<I", len(text))
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY" + bytes([major, 0]) + size + text + data)
d = sys.argv[1]
npy(d + "/c.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", bytes(24))
npy(d + "/f.npy", 3, "{'descr': '<c16', 'fortran_order': True, 'shape': (5,), }", bytes(80))
npy(d + "/big.npy", 1, "{'descr': '>f8', 'fortran_order': False, 'shape': (1,), }", bytes(8))
npy(d + "/one.npy", 1, "{'descr': '|i1', 'fortran_order': False, 'shape': (), }", bytes(1))
PY
expect inspect 0 "c\.npy: dtype float32 \('<f4'\), shape \(2, 3\), order C, format 1\.0, data at byte 128 \(24 bytes\)$" -- inspect "$scratch/c.npy"
expect_only inspect-text-only 0 "c\.npy: dtype float32" '^[][]' -- inspect "$scratch/c.npy"
expect inspect-f 0 "f\.npy: dtype complex128 \('<c16'\), shape \(5,\), order F, format 3\.0, data at byte 128 \(80 bytes\)$" -- inspect "$scratch/f.npy"
expect inspect-one-byte 0 "one\.npy: dtype int8 \('\|i1'\), shape \(\), order C, format 1\.0, data at byte 128 \(1 byte\)$" -- inspect "$scratch/one.npy"
expect_json inspect-json 0 'j[0]["shape"] == [2, 3] and j[0]["order"] == "C" and j[0]["version"] == "1.0" and j[0]["data_offset"] == 128 and j[0]["dtype"] == "float32" and j[1]["order"] == "F" and j[1]["version"] == "3.0"' -- inspect --json "$scratch/c.npy" "$scratch/f.npy"
# File names are bytes: what is not UTF-8 comes out as U+FFFD, so the
# output stays JSON; UTF-8 comes out as it is.
bad=$(printf '%s/bad\377\300\355\240\200.npy' "$scratch")
good=$(printf '%s/caf\303\251.npy' "$scratch")
cp "$scratch/c.npy" "$bad" && cp "$scratch/c.npy" "$good"
expect_json inspect-json-names 0 'j[0]["file"].endswith("/bad\ufffd\ufffd\ufffd\ufffd\ufffd.npy") and j[1]["file"].endswith("/caf\u00e9.npy")' -- inspect --json "$bad" "$good"
# Quotes, backslashes and control bytes in a name are escaped as JSON
# escapes them; DEL and the C1 controls are valid JSON as they are.
odd_json=$(printf '%s/q"\\\001\037\177\302\233.npy' "$scratch")
cp "$scratch/c.npy" "$odd_json"
expect_json inspect-json-escapes 0 'j[0]["file"].endswith("/q\"\\\x01\x1f\x7f\x9b.npy")' -- inspect --json "$odd_json"
# Text output escapes what could steer a terminal: control bytes (C0, DEL,
# the C1 controls), bytes that are not UTF-8, and backslashes; other UTF-8
# comes out as it is. The same holds for messages quoting a file name or
# a name given on the command line, and a name past 16 KiB is cut.
odd=$(printf '%s/o\033[2J\n\t\r\\\302\233\177\377\303\251.npy' "$scratch")
cp "$scratch/c.npy" "$odd"
expect inspect-odd-name 0 '/o\\x1b\[2J\\n\\t\\r\\\\\\xc2\\x9b\\x7f\\xffé\.npy: dtype float32' -- inspect "$odd"
expect inspect-escaped-message 1 'nope\\x1b\.npy: cannot open .*nope\\x1b\.npy' -- inspect "$(printf '%s/nope\033.npy' "$scratch")"
expect dtype-escaped 1 'dlbridge dtype: .*a\\x1b\[2J' -- dtype "$(printf 'a\033[2J')"
expect command-escaped 2 "unknown command 'x\\\\x1b\[2J'" -- "$(printf 'x\033[2J')"
long=$(python3 -c 'print("\x01" * 5000)')
expect command-cut 2 "unknown command '(\\\\x01)+\.\.\.'; valid commands" -- "$long"
# Every edge of UTF-8: the first and last character of each length (the
# first after the C1 controls for two bytes), a continuation byte at each
# end of its range; then what is not UTF-8: a C1 control (shown escaped,
# valid JSON), overlong forms of each length, a surrogate, past U+10FFFF,
# a lead byte past F4, continuation bytes out of range.
edges='a\302\240\337\277\340\240\200\341\200\200\355\237\277\357\277\277\360\220\200\200\361\220\200\200\364\217\277\277'
refused='\302\237\301\200\340\237\277\355\240\200\360\217\277\277\364\220\200\200\365\200\200\200\341\177\341\300'
utf8=$(printf "$edges|$refused")
shown=$(printf "$edges|%s" '\xc2\x9f\xc1\x80\xe0\x9f\xbf\xed\xa0\x80\xf0\x8f\xbf\xbf\xf4\x90\x80\x80\xf5\x80\x80\x80\xe1\x7f\xe1\xc0')
out=$(run_tool "$utf8" 2>&1)
if [ $? -eq 2 ] && [ "$out" = "dlbridge: unknown command '$shown'; valid commands: info check bench inspect dtype device version" ]; then
  pass=$((pass + 1))
else
  fail=$((fail + 1))
  printf 'FAIL utf8-edges-shown: wanted %s, output:\n%s\n' "$shown" "$out"
fi
cp "$scratch/c.npy" "$scratch/$utf8.npy"
expect_json utf8-edges-json 0 'j[0]["file"].endswith("/a\u00a0\u07ff\u0800\u1000\ud7ff\uffff\U00010000\U00050000\U0010ffff|\u009f" + "\ufffd" * 21 + "\x7f" + "\ufffd" * 2 + ".npy")' -- inspect --json "$scratch/$utf8.npy"
# A name is shown whole up to 16 KiB and 4 bytes; past that, cut there.
for n in 16388 16389; do
  out=$(run_tool "$(python3 -c "print('x' * $n)")" 2>&1)
  shown=$(printf '%s\n' "$out" | sed -n "s/^dlbridge: unknown command '\(x*\)\(\.\.\.\)\{0,1\}'.*/\1 \2/p")
  if [ "$n" -eq 16388 ]; then want="$(python3 -c "print('x' * 16388)") "; else want="$(python3 -c "print('x' * 16388)") ..."; fi
  if [ "$shown" = "$want" ]; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1))
    printf 'FAIL shown-cut-%s: %s\n' "$n" "$(printf '%s' "$shown" | wc -c)"
  fi
done
expect inspect-big-endian 1 "big\.npy: .*'>f8', big-endian" -- inspect "$scratch/big.npy"
# The library's own reasons come out as they are (only what they quote
# is escaped).
printf 'not a .npy file\n' >"$scratch/text.npy"
expect inspect-not-npy 1 'text\.npy: \.npy file: the magic string \(byte 0x93, then NUMPY\) is missing$' -- inspect "$scratch/text.npy"
expect inspect-missing 1 'nope\.npy: cannot open .*No such file' -- inspect "$scratch/nope.npy"
expect inspect-no-file 2 '^dlbridge inspect: missing arguments: FILE\.npy\.\.\.$' -- inspect
expect dtype-no-name 2 '^dlbridge dtype: missing arguments: NAME\.\.\.$' -- dtype
# A file cut shorter just after it was sized (as by another process) is
# refused, not a crash: the header is read, not mapped. A header over two
# pages, cut inside it, then cut to nothing.
python3 - "$scratch" <<'PY'
import struct, sys
text = b"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"
text += b" " * (8192 - 12 - len(text) - 1) + b"\n"
with open(sys.argv[1] + "/long.npy", "wb") as f:
    f.write(b"\x93NUMPY\x02\x00" + struct.pack("<I", len(text)) + text + bytes(24))
PY
shrink="$build/tests/cli/libshrink_on_fstat.so"
if [ -e "$shrink" ]; then
  expect inspect-long 0 'long\.npy: dtype float32 .* data at byte 8192 \(24 bytes\)$' -- inspect "$scratch/long.npy"
  for size in 4096 0; do
    cp "$scratch/long.npy" "$scratch/shrinks.npy"
    with="LD_PRELOAD=$shrink DLB_SHRINK_PATH=$scratch/shrinks.npy DLB_SHRINK_SIZE=$size"
    expect "inspect-shrinks-to-$size" 1 "shrinks\.npy: .*shorter than when it was opened \(it changed while read\)$" -- inspect "$scratch/shrinks.npy"
  done
  with=
else
  echo "cli: $shrink not built: skipped the file cut while read"
fi

# Every command answers --help; unknown options name the valid ones.
for c in info check bench inspect dtype device version; do
  expect "help-$c" 0 "^usage: dlbridge $c " -- "$c" --help
  expect "help-word-$c" 0 "^usage: dlbridge $c " -- help "$c"
  expect "bad-option-$c" 2 "dlbridge $c: unknown option '--frob'; valid options: .*--help" -- "$c" --frob
done
# --help prints the help and runs nothing, wherever it stands; after --
# everything is an argument.
expect_only help-runs-nothing 0 '^usage: dlbridge dtype ' '^float32:' -- dtype float32 --help
expect dtype-after-dashes 1 'dtype "--json" is not a known type name' -- dtype -- --json
expect bad-option-lists 2 "valid options: --json --kinds --help" -- check --frob
expect json-takes-no-value 2 "^dlbridge info: --json takes no value; given 'yes'$" -- info --json=yes
# --reps stops where bench_copy does, which refuses more (a stand-in
# Python that succeeds at once runs the rest, and would run in place of
# the benchmarks should a bad value be let through).
with="DLBRIDGE_PYTHON=true"
expect bench-reps-bad 2 "--reps is 'x'" -- bench --reps x
expect bench-reps-missing 2 '--reps needs a value' -- bench --reps
expect bench-reps-least 0 '' -- bench --reps 1
expect bench-reps-none 2 "--reps is '0'; must be 1 to 101" -- bench --reps 0
expect bench-reps-most 0 '' -- bench --reps 101
expect bench-reps-too-many 2 "--reps is '102'; must be 1 to 101" -- bench --reps 102
expect bench-reps-blank 2 "--reps is ' 5'; must be 1 to 101" -- bench --reps ' 5'
expect bench-reps-sign 2 "--reps is '[+]5'; must be 1 to 101" -- bench --reps +5
with=
# A stand-in for the benchmarks and their Python: it says how it was run,
# on standard output as a benchmark's table, and writes that as the
# results where asked (--out DIR of run_bench.py, --json FILE of
# bench_copy); $STAND_IN_STATUS is its exit status.
stand_in="$scratch/stand-in"
cat >"$stand_in" <<'SH'
#!/bin/sh
args="$*" json=
echo "stand-in: $args"
while [ $# -gt 0 ]; do
  case $1 in
    --out) json=$2/latest.json; shift ;;
    --json) json=$2; shift ;;
  esac
  shift
done
[ -z "$json" ] || printf '{"args": "%s"}\n' "$args" >"$json"
exit "${STAND_IN_STATUS:-0}"
SH
chmod +x "$stand_in"
# With --json, the results alone on stdout (tables to stderr), from a
# scratch folder removed afterwards; the options passed on.
with="DLBRIDGE_PYTHON=$stand_in"
expect_json bench-json 0 'j["args"].endswith("--quick --reps 3 --out " + j["args"].split()[-1]) and not os.path.exists(j["args"].split()[-1])' -- bench --json --quick --reps 3
with="DLBRIDGE_PYTHON=$stand_in TMPDIR=$scratch/none"
expect bench-json-no-scratch 1 '^dlbridge bench: cannot make a scratch folder: No such file' -- bench --json
# Installed: bench_copy from ../libexec/dlbridge, then the Python module's
# benchmark when dlbridge.bench imports.
mkdir -p "$scratch/inst/bin" "$scratch/inst/libexec/dlbridge"
cp "$tool" "$scratch/inst/bin/dlbridge"
cp "$stand_in" "$scratch/inst/libexec/dlbridge/bench_copy"
build_tool=$tool
tool="$scratch/inst/bin/dlbridge"
with="LD_LIBRARY_PATH=$build/src DLBRIDGE_PYTHON=$stand_in"
expect_json bench-installed-json 0 'j["args"].startswith("--quick --reps 3 --json ")' -- bench --json --reps 3 --quick
expect_only bench-installed-python 0 '^stand-in: -m dlbridge\.bench$' 'cannot import' -- bench --json
with="LD_LIBRARY_PATH=$build/src DLBRIDGE_PYTHON=$stand_in TMPDIR=$scratch/none"
expect_only bench-installed-no-scratch 1 '^dlbridge bench: cannot make a scratch folder: No such file' '^stand-in' -- bench --json
with="LD_LIBRARY_PATH=$build/src DLBRIDGE_PYTHON=false"
expect bench-installed-no-python 0 '^dlbridge bench: false cannot import dlbridge\.bench \(set DLBRIDGE_PYTHON\); skipped the exchange benchmark$' -- bench
with="LD_LIBRARY_PATH=$build/src DLBRIDGE_PYTHON=$stand_in STAND_IN_STATUS=1"
expect_only bench-installed-fails 1 '^stand-in: --quick$' 'dlbridge\.bench' -- bench --quick
# Each stage is announced on a terminal, and only there.
with="LD_LIBRARY_PATH=$build/src DLBRIDGE_PYTHON=$stand_in"
expect_only bench-installed-no-terminal 0 '^stand-in: -m dlbridge\.bench$' '\[[12]/2\]' -- bench
if command -v script >/dev/null; then
  out=$(LD_LIBRARY_PATH=$build/src DLBRIDGE_PYTHON=$stand_in script -qec "$tool bench" /dev/null 2>&1)
  if printf '%s\n' "$out" | grep -q '\[2/2\] exchange through the Python module'; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1))
    printf 'FAIL bench-installed-terminal: output:\n%s\n' "$out"
  fi
fi
# Neither a build tree nor an install around it (the command installed
# with the Python module): the message says where to look instead.
mkdir -p "$scratch/alone/bin"
cp "$build_tool" "$scratch/alone/bin/dlbridge"
tool="$scratch/alone/bin/dlbridge"
with="LD_LIBRARY_PATH=$build/src DLBRIDGE_PYTHON=$stand_in"
expect_only bench-alone 1 '^dlbridge bench: neither \.\./bench/run_bench .* `python -m dlbridge\.bench` runs the exchange benchmark$' '^stand-in' -- bench --quick
with=
tool=$build_tool
fail_fork="$build/tests/cli/libfail_fork.so"
if [ -e "$fail_fork" ]; then
  # A benchmark that cannot be started is named, with the reason.
  with="LD_PRELOAD=$fail_fork DLBRIDGE_PYTHON=true"
  expect bench-fork-fails 1 'dlbridge bench: cannot start .*: Resource temporarily unavailable$' -- bench --quick
  with=
else
  echo "cli: $fail_fork not built: skipped the failing fork"
fi
# A surplus argument is named, the first one past what the command takes.
expect info-extra 2 "^dlbridge info: too many arguments: 'extra' \\(it takes 0\\)$" -- info extra
expect info-extras 2 "^dlbridge info: too many arguments: 'a' " -- info a b
expect check-extra-escaped 2 "^dlbridge check: too many arguments: 'x\\\\x1b' " -- check "$(printf 'x\033')"
# bench waits for the benchmarks even with SIGCHLD ignored (inherited
# through exec), here a stand-in Python that exits at once, 0 or 1.
for code in 0 1; do
  if [ "$code" -eq 0 ]; then stand_in=true; else stand_in=false; fi
  out=$(DLBRIDGE_PYTHON=$stand_in timeout 20 python3 -c 'import os, signal, sys
signal.signal(signal.SIGCHLD, signal.SIG_IGN)
os.execv(sys.argv[1], sys.argv[1:])' "$tool" bench --quick 2>&1)
  rc=$?
  if [ "$rc" -eq "$code" ]; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1))
    printf 'FAIL bench-sigchld-ignored-%s: exit %s (wanted %s), output:\n%s\n' "$code" "$rc" "$code" "$out"
  fi
done
expect help 0 '^usage: dlbridge' -- --help
expect help-word 0 '^  version ' -- help
expect help-short 0 '^  dtype NAME' -- -h
expect help-exit-codes 0 'Exit status: 0 success, 1 failure, 2 bad command line' -- --help
expect unknown-command 2 "unknown command 'frobnicate'; valid commands: info check bench inspect dtype device version" -- frobnicate
expect unknown-help 2 "unknown command 'frob'" -- help frob
expect unknown-global 2 "unknown option '--frob'; valid before a command: --help -h --version -V" -- --frob
expect help-lists-version 0 '^       dlbridge --version \| -V \| --help \| -h \| help \[command\]$' -- --help
expect no-command 2 'usage' --
# --version and help take no more than the synopsis says; --help, as a
# command's --help, prints the help whatever follows.
expect version-flag-extra 2 "^dlbridge --version: too many arguments: 'extra'$" -- --version extra
expect version-short-extra 2 "^dlbridge -V: too many arguments: 'extra'$" -- -V extra
expect help-word-extra 2 "^dlbridge help: too many arguments: 'extra'$" -- help info extra
expect help-extra 0 '^usage: dlbridge' -- --help extra

# Output that cannot be written (a full disk) fails the run, which says so;
# a run that failed already keeps its status.
expect_unwritten() { # expect_unwritten NAME EXIT_CODE -- ARGS...
  name=$1 code=$2
  shift 3
  err=$(run_tool "$@" 2>&1 >/dev/full)
  rc=$?
  if [ "$rc" -eq "$code" ] &&
     printf '%s\n' "$err" | grep -q '^dlbridge: cannot write to standard output: '; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1))
    printf 'FAIL %s: exit %s (wanted %s) with stdout on /dev/full:\n%s\n' "$name" "$rc" "$code" "$err"
  fi
}
if [ -w /dev/full ]; then
  expect_unwritten full-version 1 -- version
  expect_unwritten full-version-flag 1 -- --version
  expect_unwritten full-help 1 -- --help
  expect_unwritten full-command-help 1 -- info --help
  expect_unwritten full-info-json 1 -- info --json
  expect_unwritten full-dtype-json 1 -- dtype --json float32
  expect_unwritten full-inspect 1 -- inspect "$scratch/c.npy"
  expect_unwritten full-failed 1 -- dtype float32 bogus
fi

# The man page describes every command the tool lists, and its options.
man="$(cd "$(dirname "$0")/../.." && pwd)/docs/dlbridge.1"
listed=$(run_tool help | sed -n 's/^  \([a-z]*\) .*/\1/p')
for c in $listed --version -V --help -h; do
  case $c in
    -*) pattern="^\\.B.* $(printf '%s' "$c" | sed 's/-/\\\\-/g')\\b" ;;
    *) pattern="^\\.B[IR]? \"?$c\\b" ;;
  esac
  if [ -n "$listed" ] && grep -Eq -- "$pattern" "$man"; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1))
    printf 'FAIL man-%s: docs/dlbridge.1 does not describe %s\n' "$c" "$c"
  fi
done
# ... and every option a command's help lists.
for c in $listed; do
  for o in $(run_tool help "$c" | sed -n 's/^  \(--[a-z-]*\).*/\1/p'); do
    if grep -qF -- "$(printf '%s' "$o" | sed 's/-/\\-/g')" "$man"; then
      pass=$((pass + 1))
    else
      fail=$((fail + 1))
      printf 'FAIL man-%s-%s: docs/dlbridge.1 does not describe %s %s\n' "$c" "$o" "$c" "$o"
    fi
  done
done
echo "cli: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
