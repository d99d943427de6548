import enum
import os
import sys
from typing import (
    Any,
    Dict,
    Iterator,
    List,
    Literal,
    Optional,
    Sequence,
    SupportsIndex,
    Tuple,
    Union,
    final,
    overload,
)

DLPACK_MAJOR_VERSION: int
DLPACK_MINOR_VERSION: int
__version__: str
__all__ = [
    "DLDeviceType",
    "DLPACK_MAJOR_VERSION",
    "DLPACK_MINOR_VERSION",
    "StreamError",
    "Tensor",
    "advise",
    "arange",
    "asarray",
    "device_of",
    "empty",
    "from_dlpack",
    "full",
    "get_include",
    "get_sharing_pin",
    "load_npy",
    "pin",
    "prefetch",
    "runtimes",
    "set_sharing_pin",
    "share_export",
    "share_import",
    "synchronize",
    "zeros",
]

_Shape = Union[int, Sequence[int]]
# A name ("cpu", "cuda:1") or a (device_type, device_id) pair; host-type
# kinds (cpu, cuda_host, rocm_host, cuda_managed) take device_id 0 only.
_Device = Union[str, Tuple[int, int]]
_DType = Union[str, Any]
_HostKind = Union[Literal["cuda_host", "rocm_host"], Tuple[int, int]]
# set_sharing_pin takes the names only.
_PinName = Literal["cuda_host", "rocm_host"]
_Advice = Literal[
    "set_read_mostly",
    "unset_read_mostly",
    "set_preferred_location",
    "unset_preferred_location",
    "set_accessed_by",
    "unset_accessed_by",
]

class DLDeviceType(enum.IntEnum):
    kDLCPU = 1
    kDLCUDA = 2
    kDLCUDAHost = 3
    kDLOpenCL = 4
    kDLVulkan = 7
    kDLMetal = 8
    kDLVPI = 9
    kDLROCM = 10
    kDLROCMHost = 11
    kDLExtDev = 12
    kDLCUDAManaged = 13
    kDLOneAPI = 14
    kDLWebGPU = 15
    kDLHexagon = 16
    kDLMAIA = 17
    kDLTrn = 18

class StreamError(ValueError, RuntimeError): ...

@final
class Tensor:
    __dlpack_c_exchange_api__: Any
    __c_dlpack_exchange_api__: int
    @property
    def shape(self) -> Tuple[int, ...]: ...
    @property
    def strides(self) -> Tuple[int, ...]: ...
    @property
    def dtype(self) -> str: ...
    @property
    def device(self) -> str: ...
    @property
    def ndim(self) -> int: ...
    @property
    def size(self) -> int: ...
    @property
    def nbytes(self) -> int: ...
    @property
    def itemsize(self) -> int: ...
    @property
    def readonly(self) -> bool: ...
    @property
    def data_ptr(self) -> int: ...
    @property
    def byte_offset(self) -> int: ...
    @property
    def T(self) -> "Tensor": ...
    @property
    def __cuda_array_interface__(self) -> Dict[str, Any]: ...
    def __dlpack__(
        self,
        *,
        stream: Optional[int] = None,
        max_version: Optional[Tuple[int, int]] = None,
        dl_device: Optional[Tuple[int, int]] = None,
        copy: Optional[bool] = None,
    ) -> Any: ...
    def __dlpack_device__(self) -> Tuple[DLDeviceType, int]: ...
    def __array__(self, dtype: Any = None, copy: Optional[bool] = None) -> Any: ...
    def __len__(self) -> int: ...
    def __getitem__(self, key: Any, /) -> "Tensor": ...
    def __setitem__(self, key: Any, value: Any, /) -> None: ...
    def __delitem__(self, key: Any, /) -> None: ...
    if sys.version_info >= (3, 12):
        def __buffer__(self, flags: int, /) -> memoryview: ...
    @property
    def is_shared(self) -> bool: ...
    def share_memory(self) -> "Tensor": ...
    def __reduce_ex__(self, protocol: SupportsIndex, /) -> Tuple[Any, ...]: ...
    def __copy__(self) -> "Tensor": ...
    def __deepcopy__(self, memo: Any, /) -> "Tensor": ...
    def copy(self) -> "Tensor": ...
    def to(self, device: _Device, *, copy: Optional[bool] = None) -> "Tensor": ...
    def permute(self, *axes: Union[int, Sequence[int]]) -> "Tensor": ...
    def reshape(self, *shape: Union[int, Sequence[int]]) -> "Tensor": ...
    def tolist(self) -> Any: ...
    def element_size(self) -> int: ...
    def numel(self) -> int: ...
    def dim(self) -> int: ...
    def is_contiguous(self) -> bool: ...
    @overload
    def stride(self, dim: None = None) -> Tuple[int, ...]: ...
    @overload
    def stride(self, dim: SupportsIndex) -> int: ...
    def item(self) -> Union[bool, int, float, complex]: ...
    def __iter__(self) -> Iterator["Tensor"]: ...
    def __contains__(self, key: Any, /) -> bool: ...
    def __bool__(self) -> bool: ...
    def __int__(self) -> int: ...
    def __float__(self) -> float: ...
    def __complex__(self) -> complex: ...

def from_dlpack(
    x: Any,
    /,
    *,
    device: Optional[_Device] = None,
    copy: Optional[bool] = None,
    in_place: bool = False,
) -> Tensor: ...
def asarray(
    obj: Any,
    /,
    *,
    dtype: Optional[_DType] = None,
    device: Optional[_Device] = None,
    copy: Optional[bool] = None,
) -> Tensor: ...
def empty(
    shape: _Shape, dtype: _DType = "float32", device: _Device = "cpu", *, shared: bool = False
) -> Tensor: ...
def zeros(
    shape: _Shape, dtype: _DType = "float32", device: _Device = "cpu", *, shared: bool = False
) -> Tensor: ...
def full(
    shape: _Shape,
    fill_value: Any,
    dtype: Optional[_DType] = None,
    device: _Device = "cpu",
    *,
    shared: bool = False,
) -> Tensor: ...
def arange(
    start: Union[int, float],
    stop: Optional[Union[int, float]] = None,
    step: Optional[Union[int, float]] = None,
    *,
    dtype: Optional[_DType] = None,
    device: _Device = "cpu",
) -> Tensor: ...
def pin(obj: Any, /, kind: _HostKind = "cuda_host") -> Tensor: ...
def device_of(x: Any, /) -> str: ...
def prefetch(t: Any, /, device: _Device, stream: Optional[int] = None) -> None: ...
def advise(t: Any, /, advice: _Advice, device: Optional[_Device] = None) -> None: ...
def synchronize(x: Any, /) -> None: ...
def get_include() -> str: ...
def share_export(t: Tensor, /) -> Tuple[bytes, int]: ...
def share_import(handle: Any, fd: int, /, *, pin: Optional[_HostKind] = None) -> Tensor: ...
def set_sharing_pin(kind: Optional[_PinName]) -> Optional[_PinName]: ...
def get_sharing_pin() -> Optional[_PinName]: ...
def load_npy(
    path: Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"],
    /,
    mmap: bool = True,
    pin: Union[bool, Literal["cuda_host", "rocm_host"]] = False,
) -> Tensor: ...
def runtimes() -> List[Dict[str, Any]]: ...
