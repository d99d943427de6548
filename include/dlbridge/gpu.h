/*
 * dlbridge/gpu.h -- GPU runtimes, loaded at run time: availability, pointer
 * classification, pinning host memory, managed memory, streams, and copies
 * between every kind of memory.
 *
 * Building and running need no GPU SDK. The CUDA driver (libcuda.so.1) and
 * the HIP runtime (libamdhip64.so.7, .6, .5, then libamdhip64.so) are
 * opened on first use, once per process, with every entry point resolved
 * then. The environment variables DLBRIDGE_CUDA_LIBRARY and
 * DLBRIDGE_HIP_LIBRARY, read at that first use, name another library file
 * to open instead. A machine without the runtime or without a GPU gets
 * DLB_E_NO_RUNTIME or DLB_E_NO_DEVICE with a message naming what was
 * looked for.
 *
 * All work happens in each device's primary context, the one the CUDA
 * runtime uses, so memory, streams and events are shared with PyTorch, CuPy
 * and JAX. A primary context dlbridge retains stays retained until the
 * process exits, as the CUDA runtime's do.
 *
 * Streams are the runtime's native handles (CUstream, hipStream_t) passed
 * as void *. For CUDA, NULL and DLB_CUDA_STREAM_LEGACY are the legacy
 * default stream and DLB_CUDA_STREAM_PER_THREAD the per-thread one; for
 * HIP, NULL is the default stream. dlb_stream_from_dlpack() turns the
 * stream argument of __dlpack__ into a handle.
 */
#ifndef DLBRIDGE_GPU_H
#define DLBRIDGE_GPU_H

#include "common.h"
#include "status.h"

DLB_BEGIN_DECLS

/* The runtimes dlbridge loads. */
typedef enum dlb_runtime {
  DLB_RUNTIME_CUDA = 1, /* the CUDA driver API: cuda, cuda_host, cuda_managed */
  DLB_RUNTIME_HIP = 2,  /* HIP: rocm, rocm_host */
} dlb_runtime;

/* CUDA's special stream handles (CU_STREAM_LEGACY, CU_STREAM_PER_THREAD). */
#define DLB_CUDA_STREAM_LEGACY ((void *)0x1)
#define DLB_CUDA_STREAM_PER_THREAD ((void *)0x2)

/*
 * Loads runtime if this is the first use and returns whether it can be
 * used: DLB_OK; DLB_E_NO_RUNTIME when the library is missing, is not that
 * runtime or lacks an entry point; DLB_E_NO_DEVICE when it finds no GPU;
 * DLB_E_RUNTIME when its initialisation fails. Every later call returns
 * the same status and message. DLB_E_INVAL for an unknown runtime.
 */
DLB_API dlb_status dlb_runtime_status(dlb_runtime runtime);

/* Stores the number of devices of runtime in *out: at least 1, at most
 * 64 (a runtime reporting more has its devices from ordinal 64 on left
 * out, here and everywhere else in dlbridge). Fails as
 * dlb_runtime_status() does. */
DLB_API dlb_status dlb_runtime_device_count(dlb_runtime runtime, int *out);

/* Stores the runtime's version in *out: cuDriverGetVersion's
 * (1000 * major + 10 * minor) for CUDA, hipRuntimeGetVersion's
 * (10^7 * major + 10^5 * minor + patch) for HIP. */
DLB_API dlb_status dlb_runtime_version(dlb_runtime runtime, int *out);

/* Returns the file name or path the runtime was opened from (a static
 * string), or NULL when it is not loaded or not usable. */
DLB_API const char *dlb_runtime_library(dlb_runtime runtime);

/* Longest GPU name dlb_gpu_get_info() stores, with its terminating NUL. */
#define DLB_GPU_NAME_MAX 256

/* What a runtime says about one GPU. Each capability is 1 (yes), 0 (no) or
 * -1 (the runtime could not say). */
typedef struct dlb_gpu_info {
  char name[DLB_GPU_NAME_MAX]; /* the runtime's name for the GPU */
  uint64_t total_memory;       /* bytes of device memory */
  int managed_memory;          /* can allocate managed memory */
  int concurrent_managed;      /* GPU and CPU may use managed memory at once */
  int host_register;           /* can pin ordinary host memory in place */
  /* can hand memory to other processes (cuIpcGetMemHandle,
   * hipIpcGetMemHandle), which needs unified addressing */
  int ipc;
} dlb_gpu_info;

/*
 * Stores what the runtime says about the GPU device (cuda:N or rocm:N) in
 * *out (written only on success). DLB_E_INVAL for NULL out, DLB_E_DEVICE
 * for another kind of device, the runtime's load status when it is
 * missing, DLB_E_NO_DEVICE for an ordinal it does not have, DLB_E_RUNTIME
 * when the name or memory query fails. Creates no GPU context.
 */
DLB_API dlb_status dlb_gpu_get_info(DLDevice device, dlb_gpu_info *out);

/*
 * Tells which kind of memory ptr points into, asking each runtime that is
 * usable: cuda:N, cuda_host (allocated pinned or registered), cuda_managed,
 * rocm:N, rocm_host (pinned, registered, or HIP managed memory), and cpu
 * for everything else, including every address when no runtime is usable.
 * Creates no GPU context: with none active, no CUDA memory can exist.
 * DLB_E_INVAL for NULL ptr or out; DLB_E_RUNTIME when a runtime's query
 * fails.
 */
DLB_API dlb_status dlb_device_of_pointer(const void *ptr, DLDevice *out);

/* Flag for dlb_tensor_check_device(): replace a known mislabel. */
#define DLB_LABEL_CORRECT 1u

/*
 * Checks the producer's label t->device against what the runtimes say
 * about t->data and stores the device to use in *out:
 *  - the label when it agrees with the memory (after normalisation), or
 *    when no usable runtime can tell (a label of another device type, or
 *    a cuda or rocm label while that runtime is missing);
 *  - for a known, harmless mislabel (pinned or managed memory labelled
 *    cpu, managed memory labelled cuda:N or cuda_host, HIP managed memory
 *    labelled rocm:N): the label, or with DLB_LABEL_CORRECT the memory's
 *    true kind;
 *  - DLB_E_DEVICE for a contradiction, whatever the flags: a label the
 *    memory cannot honour, such as cuda or cuda_host on ordinary host
 *    memory, cpu on device memory, or the wrong device ordinal.
 * A tensor with NULL data keeps its label. t is borrowed; DLB_E_INVAL for
 * NULL t or out or unknown flags.
 */
DLB_API dlb_status dlb_tensor_check_device(const DLTensor *t, unsigned flags,
                                           DLDevice *out);

/*
 * Pins t's memory in place (cuMemHostRegister / hipHostRegister, portable
 * and mapped) and returns a new tensor for the same data labelled
 * host_type (kDLCUDAHost or kDLROCMHost, device_id 0), with t's flags. The
 * new tensor shares t's owner, so the data lives as long as either; the
 * registration lives until the new tensor and every view or share of it
 * are released, then it is unregistered. Memory pinned already, by
 * dlbridge (pinning it again counts a reference) or by anyone else
 * (allocated pinned, or registered), is accepted and left as it is; shared
 * memory mapped from another process can be pinned like any other, and
 * so can memory this process may only read (a read-only share, a file
 * mapped for reading): CUDA registers it read-only for the devices where
 * they support that (READ_ONLY_HOST_REGISTER_SUPPORTED). Where
 * t's memory overlaps what dlbridge registered for other tensors without
 * lying inside one registration (the whole tensor pinned after a view of
 * it, views that overlap in part), only the parts not registered yet are
 * registered, and the new tensor keeps every registration its memory
 * uses, each unregistered when the last pinned tensor using it goes.
 * t must be a cpu tensor made by dlbridge (DLB_E_DEVICE, DLB_E_INVAL);
 * t is borrowed. DLB_E_INVAL for another host_type; the runtime's load
 * status when it is missing; DLB_E_RUNTIME (or DLB_E_UNSUPPORTED) when the
 * runtime refuses, or when part of the range is pinned already by someone
 * else and part is not. New; release with dlb_tensor_release().
 */
DLB_API dlb_status dlb_tensor_pin(const DLManagedTensorVersioned *t,
                                  DLDeviceType host_type,
                                  DLManagedTensorVersioned **out);

/* Memory advice for dlb_managed_advise(); the values are CUmem_advise's. */
typedef enum dlb_advice {
  DLB_ADVISE_SET_READ_MOSTLY = 1,
  DLB_ADVISE_UNSET_READ_MOSTLY = 2,
  DLB_ADVISE_SET_PREFERRED_LOCATION = 3,
  DLB_ADVISE_UNSET_PREFERRED_LOCATION = 4,
  DLB_ADVISE_SET_ACCESSED_BY = 5,
  DLB_ADVISE_UNSET_ACCESSED_BY = 6,
} dlb_advice;

/*
 * Queues on stream (a CUDA stream) the migration of the pages t's elements
 * occupy to target: cuda:N, or the host for any host-type kind or cpu.
 * t's memory must be CUDA managed memory whatever its label says (CuPy
 * labels it cuda:N): DLB_E_DEVICE otherwise, and when the first or the
 * last byte of its elements is not managed. DLB_E_UNSUPPORTED when target
 * is a GPU that cannot access managed memory concurrently with the CPU, or
 * the driver cannot prefetch. DLB_E_NO_DEVICE for an unknown GPU, the
 * CUDA load status when the driver is missing. A tensor without elements
 * needs nothing. t is borrowed.
 */
DLB_API dlb_status dlb_managed_prefetch(const DLTensor *t, DLDevice target,
                                        void *stream);

/*
 * Gives the driver advice about the pages t's elements occupy, for target
 * (cuda:N, or the host as for dlb_managed_prefetch; read-mostly advice
 * ignores it). The same memory rules and errors as dlb_managed_prefetch();
 * DLB_E_INVAL for an advice value outside dlb_advice.
 */
DLB_API dlb_status dlb_managed_advise(const DLTensor *t, dlb_advice advice,
                                      DLDevice target);

/* Stands for Python's None in dlb_stream_from_dlpack(). */
#define DLB_STREAM_NONE INT64_MIN

/*
 * Turns the stream argument of __dlpack__ for memory of device type type
 * into a native handle, following the array API standard: -1 means no
 * synchronisation (*sync = 0, *out = NULL); otherwise *sync = 1 and, for
 * CUDA kinds (cuda, cuda_host, cuda_managed), DLB_STREAM_NONE and 1 give
 * DLB_CUDA_STREAM_LEGACY, 2 DLB_CUDA_STREAM_PER_THREAD, values above 2 the
 * handle itself, and 0 is refused; for ROCm kinds DLB_STREAM_NONE and 0
 * give the default stream (NULL), values above 2 the handle, and 1 and 2
 * are refused; cpu accepts DLB_STREAM_NONE only (*sync = 0). Refusals and
 * other negative values: DLB_E_INVAL. Other device types: DLB_E_DEVICE.
 */
DLB_API dlb_status dlb_stream_from_dlpack(DLDeviceType type, int64_t stream,
                                          void **out, int *sync);

/*
 * Makes consumer wait, on the device and without blocking the host, for
 * the work queued on producer so far: an event recorded on producer, then
 * waited on by consumer. device names the runtime and the GPU whose
 * context the producer stream belongs to (cuda:N or rocm:N; a host-type
 * kind means device 0). Nothing happens when the two are the same stream.
 */
DLB_API dlb_status dlb_stream_wait(DLDevice device, void *consumer,
                                   void *producer);

/*
 * The host waits until the work queued on stream so far is done. For
 * cuda:N and rocm:N, on that device. For a host-type kind (cuda_host,
 * cuda_managed, rocm_host), whose producer may have used any GPU, a
 * special handle (NULL, or CUDA's legacy and per-thread handles) is
 * synchronised on every device the process has used, and any other handle
 * once. This makes host reads of pinned or managed memory safe after the
 * producer made that stream wait for its work (as __dlpack__(stream=s)
 * does).
 */
DLB_API dlb_status dlb_stream_synchronize(DLDevice device, void *stream);

/* The host waits until all work on the device is done: cuda:N or rocm:N,
 * or every device the process has used for a host-type kind. */
DLB_API dlb_status dlb_device_synchronize(DLDevice device);

/*
 * Copies every element of src into dst (same shape and dtype, any strides)
 * between any two kinds of memory, queued on stream of the runtime of the
 * non-cpu side(s): one cuMemcpy / 2D / 3D (or the HIP equivalent) when the
 * layouts allow it, otherwise through host staging buffers and the CPU
 * copy engine, which completes before returning. A one-copy layout between
 * device memory and 1 MiB or more of pageable cpu memory (not pinned,
 * registered or managed, whatever the label says) goes through a pinned
 * staging buffer in chunks, the CPU's part of each chunk overlapping the
 * DMA of a neighbour, and also completes before returning; the buffer
 * (16 MiB per runtime) is kept for the process's lifetime. Copies between
 * CUDA and ROCm memory always stage and need stream NULL. Plain cpu to cpu
 * copies run on the CPU. Host memory in a queued copy must stay valid, and
 * unread if written, until the stream is done (dlb_copy_sync() waits for
 * it).
 * DLB_E_LAYOUT and DLB_E_DTYPE as dlb_copy() (packed sub-byte tensors must
 * be compact); DLB_E_UNSUPPORTED for device types no runtime handles;
 * DLB_E_NO_RUNTIME or DLB_E_NO_DEVICE when a runtime or a device is
 * missing; DLB_E_RUNTIME (DLB_E_NOMEM for out of memory) when a runtime
 * call fails. Both tensors are borrowed.
 */
DLB_API dlb_status dlb_copy_async(const DLTensor *src, const DLTensor *dst,
                                  void *stream);

/* dlb_copy_async(), then the host waits until stream is done, so the
 * result may be read at once. (dlb_tensor_copy() of a GPU tensor goes
 * this way, on the default stream.) */
DLB_API dlb_status dlb_copy_sync(const DLTensor *src, const DLTensor *dst,
                                 void *stream);

DLB_END_DECLS

#endif /* DLBRIDGE_GPU_H */
