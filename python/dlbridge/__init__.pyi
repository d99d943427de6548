import enum
from typing import Any, Dict, Optional, Sequence, Tuple, Union

DLPACK_MAJOR_VERSION: int
DLPACK_MINOR_VERSION: int
__version__: str

_Shape = Union[int, Sequence[int]]
_Device = Union[str, Tuple[int, int]]
_DType = Union[str, Any]

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
    def __dlpack_device__(self) -> Tuple[int, int]: ...
    def __len__(self) -> int: ...
    def __getitem__(self, key: Any) -> "Tensor": ...
    def __buffer__(self, flags: int) -> memoryview: ...
    def copy(self) -> "Tensor": ...
    def to(self, device: _Device, *, copy: Optional[bool] = False) -> "Tensor": ...
    def permute(self, *axes: Union[int, Sequence[int]]) -> "Tensor": ...
    def reshape(self, *shape: Union[int, Sequence[int]]) -> "Tensor": ...
    def tolist(self) -> Any: ...

def from_dlpack(
    x: Any, /, *, device: Optional[_Device] = None, copy: Optional[bool] = None
) -> Tensor: ...
def asarray(
    obj: Any,
    /,
    *,
    dtype: Optional[_DType] = None,
    device: Optional[_Device] = None,
    copy: Optional[bool] = None,
) -> Tensor: ...
def empty(shape: _Shape, dtype: _DType = "float32", device: _Device = "cpu") -> Tensor: ...
def zeros(shape: _Shape, dtype: _DType = "float32", device: _Device = "cpu") -> Tensor: ...
def full(
    shape: _Shape, fill_value: Any, dtype: Optional[_DType] = None, device: _Device = "cpu"
) -> Tensor: ...
def arange(
    start: Union[int, float],
    stop: Optional[Union[int, float]] = None,
    step: Optional[Union[int, float]] = None,
    *,
    dtype: Optional[_DType] = None,
    device: _Device = "cpu",
) -> Tensor: ...
def get_include() -> str: ...
