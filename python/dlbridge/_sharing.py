"""Tensors through multiprocessing: shared ones by handle, others by value.

multiprocessing (Queue, Pipe, Pool, ProcessPoolExecutor, and Process
arguments under spawn and forkserver) pickles with ForkingPickler. The
reducer registered here sends a tensor in shared memory (or in cuda/rocm
memory, by IPC handle) as its handle plus a descriptor that
multiprocessing passes itself (DupFd), so the receiver maps the same
memory: no data is copied, and writes on either side are seen by the
other. Any other tensor goes by value, as plain pickle sends it (the
receiver gets its own copy); call share_memory() first to share it.
"""

import errno as _errno
import os as _os
import threading as _threading
import weakref as _weakref
from multiprocessing import AuthenticationError as _AuthenticationError
from multiprocessing import reduction as _reduction
from multiprocessing.context import get_spawning_popen as _get_spawning_popen

# The extension's names are typed in __init__.pyi, which re-exports them.
from ._dlbridge import Tensor, empty, share_export, share_import  # type: ignore[import-not-found]

_pin = None
_pin_lock = _threading.Lock()
_PIN_KINDS = (None, "cuda_host", "rocm_host")


def _new_pin_lock_in_child():
    # A fork made while another thread held the lock would leave it held
    # in the child for good.
    global _pin_lock
    _pin_lock = _threading.Lock()


_os.register_at_fork(after_in_child=_new_pin_lock_in_child)


def set_sharing_pin(kind):
    """Pins every shared tensor this process receives through
    multiprocessing from now on for ``kind``'s runtime ('cuda_host' or
    'rocm_host'; None: leave them unpinned), and returns the previous
    setting. A host tensor arrives as ``kind`` memory, still shared (cuda
    and rocm tensors arrive as they are); a
    receipt fails (RuntimeError) when the runtime or GPU is missing. Give
    it as a worker's initializer:
    ``ProcessPoolExecutor(initializer=dlbridge.set_sharing_pin,
    initargs=("cuda_host",))``."""
    global _pin
    # Compared and kept as a plain str: a str subclass (NumPy's str_) may
    # compare as it likes, and an array compares element by element.
    name = str.__str__(kind) if isinstance(kind, str) else kind
    if name is not None and not (isinstance(name, str) and name in _PIN_KINDS):
        raise ValueError(f"set_sharing_pin(): kind is {kind!r}; it is None, 'cuda_host' or 'rocm_host'")
    with _pin_lock:
        previous, _pin = _pin, name
    return previous


def get_sharing_pin():
    """The kind set by set_sharing_pin() (None by default)."""
    return _pin


def _nofile_limit():
    try:
        import resource

        return str(resource.getrlimit(resource.RLIMIT_NOFILE)[0])
    except (ImportError, OSError, ValueError):
        return "unknown"


def _not_offered(e):
    # The resource sharer hands a descriptor over once, while the process
    # that pickled it runs; what it raises otherwise (EOFError,
    # FileNotFoundError, ConnectionRefusedError) says neither.
    cause = type(e).__name__ + (": %s" % e if str(e) else "")
    return OSError(
        "a shared dlbridge.Tensor could not be received: its sender no "
        "longer offers the memory's descriptor (%s); a pickle made for "
        "another process loads once, while the process that made it "
        "runs" % cause)


def _detach(dupfd):
    """The descriptor dupfd brings, or OSError naming why it did not come."""
    try:
        return dupfd.detach()
    except OSError as e:
        if e.errno not in (_errno.EMFILE, _errno.ENFILE):
            raise _not_offered(e) from e
        # Not the sender's doing: the connection to its resource sharer
        # needs a descriptor here, which the receiver has none left for.
        raise OSError(
            e.errno,
            "a shared dlbridge.Tensor could not be received: this process "
            "has no descriptor left for it (%s: %s; RLIMIT_NOFILE is %s)"
            % (type(e).__name__, e, _nofile_limit())) from e
    except EOFError as e:
        raise _not_offered(e) from e
    except RuntimeError as e:
        # multiprocessing.reduction.recvfds: the message came without its
        # descriptor, which the kernel drops (MSG_CTRUNC) when this
        # process's descriptor table is full. The sender has let it go.
        raise OSError(
            _errno.EMFILE,
            "a shared dlbridge.Tensor could not be received: its descriptor "
            "did not arrive (RuntimeError: %s); the kernel drops a received "
            "descriptor when this process's descriptor table is full "
            "(RLIMIT_NOFILE is %s)" % (e, _nofile_limit())) from e
    except _AuthenticationError as e:
        # The resource sharer hands descriptors only to processes holding
        # the sender's authentication key: those multiprocessing started.
        raise OSError(
            "a shared dlbridge.Tensor could not be received: this process "
            "does not hold the authentication key of the process that "
            "pickled it (%s); a pickle made for multiprocessing loads in a "
            "process that multiprocessing started from the sender. Send the "
            "data by value with plain pickle, or the handle with "
            "dlbridge.share_export() over a transport of your own" % e) from e


class _ReceivedFd:
    """A descriptor received once for every tensor over one memory in a
    message (see _MemoryFd); closed when the message is loaded."""

    def __init__(self, dupfd):
        self.fd = _detach(dupfd)
        _weakref.finalize(self, _os.close, self.fd)


def _rebuild_shared(handle, dupfd):
    if dupfd is None:
        # Device memory (no descriptor): the pin setting is for host memory.
        return share_import(handle, -1)
    if isinstance(dupfd, _ReceivedFd):
        return share_import(handle, dupfd.fd, pin=_pin)
    fd = _detach(dupfd)
    try:
        return share_import(handle, fd, pin=_pin)
    finally:
        _os.close(fd)


class _MemoryFd:
    """A descriptor of one memory for the tensors over it in the pickles
    being made: a pickle saves it once (its memo), so a message with many
    views of one base hands one descriptor over (one resource sharer
    connection), not one each. Found again by the memory's identity while
    a pickle holds it; each pickle that saves it offers a new duplicate."""

    def __init__(self, fd):
        self._fd = fd
        self._children = _weakref.WeakKeyDictionary()  # Popen -> (DupFd, closer)
        _weakref.finalize(self, _os.close, fd)

    def for_child(self, popen):
        """The DupFd and closer of the duplicate the child popen is starting
        inherits, made once per child: it stays open until the Popen goes
        (or a tensor over the memory does once the child has it)."""
        c = self._children.get(popen)
        if c is None:
            dup = _os.dup(self._fd)
            closer = _OnceClosed(dup)
            try:
                c = (_reduction.DupFd(dup), closer)
                _weakref.finalize(popen, closer)
            except BaseException:
                closer()
                raise
            self._children[popen] = c
        return c

    def __reduce__(self):
        popen = _get_spawning_popen()
        if popen is not None:
            return _ReceivedFd, (self.for_child(popen)[0],)
        return _ReceivedFd, (_reduction.DupFd(self._fd),)


# Where a share handle keeps what names its memory (src/share/handle.c lays
# the handle out): the identity of the memory, 16 bytes, and the DLPack
# flags, whose lowest bit is READ_ONLY.
_HANDLE_IDENTITY = slice(64, 80)
_HANDLE_FLAGS = 32
_FLAG_READ_ONLY = 1

# (identity, read-only) of a memory -> its _MemoryFd, while one is alive.
_memory_fds: "_weakref.WeakValueDictionary[tuple[bytes, int], _MemoryFd]" = _weakref.WeakValueDictionary()
_memory_fds_lock = _threading.Lock()


def _memory_fd(handle, fd):
    """The _MemoryFd of the memory of handle, made from fd (taken) unless
    one is alive; a read-only descriptor serves read-only handles only."""
    key = (bytes(handle[_HANDLE_IDENTITY]), handle[_HANDLE_FLAGS] & _FLAG_READ_ONLY)
    with _memory_fds_lock:
        m = _memory_fds.get(key)
        if m is None:
            m = _memory_fds[key] = _MemoryFd(fd)
            return m
    _os.close(fd)
    return m


def _rebuild_empty(shape, dtype, device):
    return empty(shape, dtype=dtype, device=device)


def _device_memory(t):
    return t.device.startswith(("cuda:", "rocm:"))


class _OnceClosed:
    """Closes a descriptor at its first call only: a second close could
    close an unrelated descriptor that reused the number."""

    def __init__(self, fd):
        self._fds = [fd]

    def __call__(self):
        try:
            fd = self._fds.pop()  # atomic: finalizers may race in threads
        except IndexError:
            return
        _os.close(fd)


class _ClosedOnceStarted:
    """The tensor's finalizer for a descriptor a child inherits: closes it
    once the child has it. A tensor made while the child's arguments are
    pickled (a view a __reduce__ returns) goes before the child is
    launched: the descriptor must stay open for the launch (its number
    would be reused, and the child would take another file for the
    memory), so the Popen's finalizer closes it then."""

    def __init__(self, closer, popen):
        self._closer = closer
        self._popen = _weakref.ref(popen)

    def __call__(self):
        popen = self._popen()
        # Popen objects set pid once the child has its descriptors (spawn:
        # after the exec; forkserver: after sending them to the server).
        if popen is not None and getattr(popen, "pid", None) is None:
            return
        self._closer()


def _reduce_tensor(t):
    if not (t.is_shared or _device_memory(t)):
        # Protocol 4's form: the pickler's protocol is not known here.
        return t.__reduce_ex__(4)
    if _device_memory(t) and t.numel() == 0:
        # No elements, so no allocation to open by IPC handle: the
        # receiver makes its own empty tensor on that device.
        return _rebuild_empty, (t.shape, t.dtype, t.device)
    handle, fd = share_export(t)
    if fd < 0:
        return _rebuild_shared, (handle, None)
    m = _memory_fd(handle, fd)
    popen = _get_spawning_popen()
    if popen is not None:
        # A child being started (spawn, forkserver) inherits a duplicate
        # itself after the pickle is written, one per memory: it stays open
        # until the child's Popen object goes, or a tensor object over the
        # memory once the child has it, whichever comes first
        # (Process.start() drops its arguments once the child has it; a
        # parent that keeps the tensor may start any number of children
        # with it).
        _, closer = m.for_child(popen)
        _weakref.finalize(t, _ClosedOnceStarted(closer, popen))
    # Else a duplicate waits for the receiver in the resource sharer, one
    # per memory and pickle.
    return _rebuild_shared, (handle, m)


_reduction.ForkingPickler.register(Tensor, _reduce_tensor)
