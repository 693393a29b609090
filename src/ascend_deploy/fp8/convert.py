"""Convert a block-FP8 checkpoint to BF16 (or FP16): streaming, parallel, atomic, idempotent.

Pipeline: plan from the headers (``plan``), check DST and free space, write into a
temporary sibling directory, dequantize FP8 weights tile row by tile row from a memory
map (``dequant``) and copy every other tensor with ``copy_file_range`` at precomputed
offsets from a thread pool (the source sha256s for the manifest run in the same pool,
between the tensors), start writeback of each finished range at once, fsync, optionally
verify, then rename into place. Any error, Ctrl-C or SIGTERM removes the temporary
directory; SRC is only ever opened read-only.

``dtype="float16"`` (Atlas 300I Duo / 310P, which has no BF16) writes FP16 instead: FP8
weights are rounded once from the exact product (``dequant``), BF16 tensors are rounded
once to FP16, and a value that would overflow FP16 is refused naming the tensor.
"""

from __future__ import annotations

import errno
import json
import os
import secrets
import shutil
import signal
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from typing import Any

from ..errors import AscendDeployError, CheckFailed, InputError, shown
from ..model.atomic_dir import fsync_dir, swap_into_place
from ..model.checksums import sha256_file
from ..model.files import INDEX_NAME, MODELSLIM_DESCRIPTION
from .files import MANIFEST_NAME, copy_file
from .manifest import build_manifest, dst_state, stat_entry
from .numeric import DEFAULT_DTYPE, DTYPE_LABELS, F16_MAX, output_dtype
from .plan import ConversionPlan, TensorJob, plan_conversion

ProgressFn = Callable[[int, int], None]
COPY_STEP = 64 << 20  # bytes per copy_file_range call (lets a stop request through)
READ_STEP = 16 << 20  # bytes per pread/pwrite where copy_file_range is unavailable
HASH_STEP = 4 << 20  # bytes per sha256 update of a source file
TMP_TAG = ".fp8conv-tmp-"
OLD_TAG = ".fp8conv-old-"


class ConversionInterrupted(AscendDeployError):
    """SIGTERM or SIGHUP arrived; the temporary output has been removed."""

    exit_code = 143


class _Stopped(Exception):
    """Raised inside workers once another worker failed or the run was interrupted."""


def conversion_status(src: str, dst: str, dtype: str = DEFAULT_DTYPE) -> str:
    """``needed``, ``up-to-date`` or ``not-needed``, from config, headers and manifest only.

    ``dtype`` is the wanted output (bfloat16 or float16): an output in the other dtype is
    ``needed`` (converted again).

    Standard library only (no numpy), for Ansible check mode. Raises InputError for
    input that ``convert_checkpoint`` would refuse. A ModelSlim checkpoint (W8A8/W4A8 with
    ``quant_model_description.json``) is ``not-needed``: it is served as it is, with
    ``--quantization ascend``.
    """
    if os.path.exists(os.path.join(src, MODELSLIM_DESCRIPTION)):
        return "not-needed"
    try:
        plan = plan_conversion(src, dtype)
        if not plan.needed:
            return "not-needed"
        state = dst_state(src, dst, plan.source_files, dtype)
    except OSError as exc:
        raise _os_error(exc) from None
    return "up-to-date" if state == "up-to-date" else "needed"


def convert_checkpoint(
    src: str,
    dst: str,
    workers: int | None = None,
    verify: bool = False,
    force: bool = False,
    progress: ProgressFn | None = None,
    dtype: str = DEFAULT_DTYPE,
) -> dict:
    """Convert the FP8 model in ``src`` into a BF16 (or, ``dtype="float16"``, FP16) model in
    ``dst``.

    Returns ``status`` (converted / up-to-date / not-needed), ``dtype``, ``tensors_in``,
    ``tensors_out``, ``total_size``, ``seconds``, ``bytes_written`` and details.
    Raises InputError (bad input, a value that overflows FP16, DST not ours without
    ``force``) or CheckFailed (not enough disk space, verification failed, I/O error).
    """
    output_dtype(dtype)  # InputError for an unknown dtype, before anything else
    try:
        return _convert(src, dst, workers, verify, force, progress, dtype)
    except OSError as exc:  # anything not already turned into an operator message
        raise _os_error(exc) from None


def _os_error(exc: OSError) -> AscendDeployError:
    where = exc.filename or "conversion"
    text = exc.strerror or str(exc)
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return CheckFailed(f"{where}: {text}; free space and convert again")
    if exc.errno in (
        errno.EACCES,
        errno.EPERM,
        errno.EROFS,
        errno.ENOENT,
        errno.ENOTDIR,
        errno.EEXIST,
        errno.EISDIR,
    ):
        return InputError(f"{where}: {text}; check the SRC and DST paths and permissions")
    return CheckFailed(f"{where}: {text}")


def _convert(
    src: str,
    dst: str,
    workers: int | None,
    verify: bool,
    force: bool,
    progress: ProgressFn | None,
    dtype: str,
) -> dict:
    started = time.monotonic()
    src = os.path.abspath(src)
    dst = os.path.abspath(dst.rstrip("/") or dst)
    _check_paths(src, dst)
    plan = plan_conversion(src, dtype)
    label = DTYPE_LABELS[plan.out_dtype]
    workers = max(1, workers or os.cpu_count() or 1)
    result: dict[str, Any] = {
        "status": "",
        "dtype": dtype,
        "src": src,
        "dst": dst,
        "tensors_in": plan.tensors_in if plan.needed else len(plan.layout.weight_map),
        "tensors_out": plan.tensors_out if plan.needed else len(plan.layout.weight_map),
        "fp8_tensors": plan.fp8_tensors,
        "total_size": plan.total_size if plan.needed else plan.layout.total_bytes,
        "bytes_written": 0,
        "seconds": 0.0,
        "workers": workers,
        "verified": False,
        "ignored_tensors": plan.ignored,
    }
    if not plan.needed:
        result["status"] = "not-needed"
        result["message"] = f"{src} has no FP8 weights (already BF16/float); nothing to convert"
        return _finish(result, started)
    state = dst_state(src, dst, plan.source_files, dtype)
    if state == "up-to-date":
        result["status"] = "up-to-date"
        result["message"] = f"{dst} is already the {label} conversion of {src}; nothing changed"
        if verify:
            from .verify import verify_output

            result["verify"] = verify_output(plan, dst)
            result["verified"] = True
        return _finish(result, started)
    if state == "foreign" and not force:
        raise InputError(
            f"{dst}: exists and is not an earlier conversion of {src}; choose another "
            "output directory or pass --force to replace it"
        )
    from .numeric import numpy_modules

    numpy_modules()  # fail before writing anything if numpy/ml_dtypes are missing
    result["replaced"] = state if state in ("stale", "foreign") else None
    parent = os.path.dirname(dst)
    os.makedirs(parent, exist_ok=True)
    _remove_abandoned(parent, os.path.basename(dst))
    _check_free_space(plan, parent)
    tmp = os.path.join(
        parent,
        f".{os.path.basename(dst)}{TMP_TAG}{os.getpid()}-{secrets.token_hex(3)}.{_HOST}",
    )
    with _TerminationAsInterrupt():
        try:
            os.mkdir(tmp)
            written = _write_output(plan, tmp, workers, progress)
            result["bytes_written"] = written
            if verify:
                from .verify import verify_output

                result["verify"] = verify_output(plan, tmp)
                result["verified"] = True
            fsync_dir(tmp)
            mask = _block_termination()
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    # Signals are held back while the complete output replaces DST and are delivered,
    # with the original handlers, once it is in place.
    try:
        _swap_into_place(tmp, dst)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        _restore_mask(mask)
    result["status"] = "converted"
    return _finish(result, started)


def _finish(result: dict, started: float) -> dict:
    result["seconds"] = round(time.monotonic() - started, 3)
    return result


def _check_paths(src: str, dst: str) -> None:
    rs, rd = os.path.realpath(src), os.path.realpath(dst)
    if rs == rd:
        raise InputError(f"{dst}: output directory is the source directory; choose another DST")
    if rd.startswith(rs + os.sep):
        raise InputError(f"{dst}: output directory is inside the source {src}; choose another DST")
    if rs.startswith(rd + os.sep):
        raise InputError(f"{dst}: output directory contains the source {src}; choose another DST")


def _check_free_space(plan: ConversionPlan, parent: str) -> None:
    others = sum(os.path.getsize(os.path.join(plan.src_dir, n)) for n in plan.other_files)
    need = plan.output_bytes + others + (1 << 20)
    free = shutil.disk_usage(parent).free
    if free < need:
        raise CheckFailed(
            f"{parent}: not enough free disk space for the "
            f"{DTYPE_LABELS[plan.out_dtype]} output: need {need} bytes "
            f"({need / 2**30:.2f} GiB), {free} bytes ({free / 2**30:.2f} GiB) free; free "
            "space or choose another DST"
        )


_HOST = socket.gethostname() or "localhost"


def _remove_abandoned(parent: str, base: str) -> None:
    """Remove temporary directories left by a killed (SIGKILL, power loss) earlier run.

    Names carry the PID and host name (``<pid>-<random>.<host>``); only directories of
    this host whose process is gone are removed, so a conversion running on another host
    into the same shared directory is left alone.
    """
    for tag in (TMP_TAG, OLD_TAG):
        prefix = f".{base}{tag}"
        for name in os.listdir(parent):
            if not name.startswith(prefix):
                continue
            pid_text, _, rest = name[len(prefix) :].partition("-")
            host = rest.partition(".")[2]
            if host == _HOST and pid_text.isdigit() and not _pid_alive(int(pid_text)):
                shutil.rmtree(os.path.join(parent, name), ignore_errors=True)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _swap_into_place(tmp: str, dst: str) -> None:
    old_name = f".{os.path.basename(dst)}{OLD_TAG}{os.getpid()}-{secrets.token_hex(3)}.{_HOST}"
    swap_into_place(tmp, dst, old_name)


_TERMINATION = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}


def _block_termination() -> set | None:
    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.pthread_sigmask(signal.SIG_BLOCK, _TERMINATION)


def _restore_mask(mask: set | None) -> None:
    if mask is not None:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)


class _TerminationAsInterrupt:
    """Turn SIGTERM/SIGHUP into ConversionInterrupted in the main thread while active."""

    SIGNALS = (signal.SIGTERM, signal.SIGHUP)

    def __enter__(self) -> _TerminationAsInterrupt:
        self.saved: dict[int, Any] = {}
        if threading.current_thread() is threading.main_thread():
            for sig in self.SIGNALS:
                self.saved[sig] = signal.signal(sig, self._raise)
        return self

    @staticmethod
    def _raise(signum: int, _frame: object) -> None:
        raise ConversionInterrupted(
            f"interrupted by {signal.Signals(signum).name}; the partial output was removed "
            "and the source is unchanged"
        )

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self.saved.items():
            signal.signal(sig, handler)


class _Progress:
    """Thread-safe byte counter reported from the main thread."""

    def __init__(self, total: int, callback: ProgressFn | None) -> None:
        self.total = total
        self.done = 0
        self.callback = callback
        self.lock = threading.Lock()

    def add(self, n: int) -> None:
        with self.lock:
            self.done += n

    def report(self) -> None:
        if self.callback is not None:
            self.callback(self.done, self.total)


def _write_output(plan: ConversionPlan, tmp: str, workers: int, callback: ProgressFn | None) -> int:
    """Write shards, index, config, other files and manifest into ``tmp``; bytes written."""
    src = plan.src_dir
    before = {n: stat_entry(os.path.join(src, n)) for n in plan.source_files}
    progress = _Progress(sum(s.out_size for s in plan.shards), callback)
    stop = threading.Event()
    hashes: dict[str, str] = {}
    src_fds: dict[str, int] = {}
    out_fds: dict[str, int] = {}
    try:
        for shard in plan.layout.shards:
            src_fds[shard] = os.open(os.path.join(src, shard), os.O_RDONLY)
        for sp in plan.shards:
            out_path = os.path.join(tmp, sp.name)
            fd = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            out_fds[sp.name] = fd
            _reserve(fd, sp.out_size, out_path)
            _pwrite_all(fd, sp.header, 0, out_path)
            progress.add(len(sp.header))
        ctx = _Context(plan, tmp, src_fds, out_fds, progress, stop)
        pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="fp8conv")
        futures: list[Future] = []
        try:
            hash_futures: dict[str, Future] = {}
            for task in _schedule(plan, {name: st["size"] for name, st in before.items()}):
                if isinstance(task, str):
                    hash_futures[task] = pool.submit(_hash, src, task, stop)
                    futures.append(hash_futures[task])
                else:
                    futures.append(pool.submit(ctx.run, task))
            _wait_all(futures, progress)
            hashes = {name: fut.result() for name, fut in hash_futures.items()}
            for sp in plan.shards:  # most of it is on disk already (start_writeback)
                try:
                    os.fsync(out_fds[sp.name])
                except OSError as exc:
                    raise _io_error(exc, os.path.join(tmp, sp.name)) from None
        except BaseException:
            stop.set()
            for fut in futures:
                fut.cancel()
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
    finally:
        for fd in [*src_fds.values(), *out_fds.values()]:
            os.close(fd)
    outputs = {s.name: s.out_size for s in plan.shards}
    if plan.layout.index is not None:
        outputs[INDEX_NAME] = _write_json(os.path.join(tmp, INDEX_NAME), _output_index(plan))
    config = output_config(plan.config, plan.dtype)
    outputs["config.json"] = _write_json(os.path.join(tmp, "config.json"), config)
    for rel in plan.other_files:
        outputs[rel] = copy_file(os.path.join(src, rel), os.path.join(tmp, rel))
        shutil.copymode(os.path.join(src, rel), os.path.join(tmp, rel))
    source: dict[str, dict] = {}
    for name in plan.source_files:
        now = stat_entry(os.path.join(src, name))
        if now != before[name]:
            raise InputError(
                f"{os.path.join(src, name)}: the source changed during conversion; "
                "wait for the download or copy to finish and convert again"
            )
        source[name] = {**now, "sha256": hashes[name]}
    written = sum(outputs.values())
    manifest = build_manifest(
        src,
        source,
        outputs,
        plan.dtype,
        tensors_in=plan.tensors_in,
        tensors_out=plan.tensors_out,
        total_size=plan.total_size,
        weight_block_size=list(plan.block),
    )
    _write_json(os.path.join(tmp, MANIFEST_NAME), manifest)
    progress.report()
    return written


def _wait_all(futures: list[Future], progress: _Progress) -> None:
    """Wait for every future, reporting progress; re-raise the first real failure."""
    pending = set(futures)
    while pending:
        done, pending = wait(pending, timeout=0.25, return_when=FIRST_EXCEPTION)
        progress.report()
        for fut in done:
            exc = fut.exception()
            if exc is not None and not isinstance(exc, _Stopped):
                raise exc


def _schedule(plan: ConversionPlan, sizes: dict[str, int]) -> list[TensorJob | str]:
    """Every tensor job in file order, with the source files (``sizes``) to hash among them.

    A file's sha256 (for the manifest) goes where the midpoint of its share of all hashed
    bytes falls in the job list, so hashing overlaps the conversion and the disk writes
    instead of running alone at the end.
    """
    jobs: list[TensorJob | str] = [job for sp in plan.shards for job in sp.jobs]
    total = sum(sizes.values()) or 1
    placed: list[tuple[float, int, TensorJob | str]] = [
        (i / max(len(jobs), 1), 1, job) for i, job in enumerate(jobs)
    ]
    done = 0
    for name, size in sizes.items():
        placed.append(((done + size / 2) / total, 0, name))
        done += size
    return [task for *_, task in sorted(placed, key=lambda t: t[:2])]


def _hash(src: str, name: str, stop: threading.Event) -> str:
    """sha256 of a source file; gives up with ``_Stopped`` once the run is stopped."""

    def check() -> None:
        if stop.is_set():
            raise _Stopped

    return sha256_file(os.path.join(src, name), HASH_STEP, check)


class _Context:
    """Shared state of the worker threads: open files, progress, stop flag."""

    def __init__(
        self,
        plan: ConversionPlan,
        tmp: str,
        src_fds: dict[str, int],
        out_fds: dict[str, int],
        progress: _Progress,
        stop: threading.Event,
    ) -> None:
        self.plan = plan
        self.tmp = tmp
        self.src_fds = src_fds
        self.out_fds = out_fds
        self.progress = progress
        self.stop = stop

    def run(self, job: TensorJob) -> None:
        if self.stop.is_set():
            raise _Stopped
        if job.scale is not None:
            self._dequantize(job)
        elif job.cast:
            self._cast(job)
        else:
            self._copy(job)

    def _src_offset(self, shard: str, begin: int) -> int:
        return self.plan.layout.headers[shard].data_offset + begin

    def _copy(self, job: TensorJob) -> None:
        src_path = os.path.join(self.plan.src_dir, job.shard)
        out_path = os.path.join(self.tmp, job.shard)
        copy_range(
            self.src_fds[job.shard],
            self._src_offset(job.shard, job.src.begin),
            self.out_fds[job.shard],
            job.out_begin,
            job.src.nbytes,
            (src_path, out_path),
            self.stop,
            self.progress.add,
        )

    def _cast(self, job: TensorJob) -> None:
        """A BF16 tensor to F16 (one rounding), chunk by chunk; refuses an overflow."""
        from .dequant import CHUNK_ELEMENTS, bf16_to_f16_bits, f16_overflow, largest_finite_bf16
        from .numeric import numpy_modules

        np, _ = numpy_modules()
        src_path = os.path.join(self.plan.src_dir, job.shard)
        out_path = os.path.join(self.tmp, job.shard)
        base = self._src_offset(job.shard, job.src.begin)
        n = job.src.numel
        step = CHUNK_ELEMENTS * 4
        buf = np.empty(min(step, n), dtype=np.dtype("<u2"))
        for e0 in range(0, n, step):
            if self.stop.is_set():
                raise _Stopped
            chunk = buf[: min(step, n - e0)]
            _pread_into(self.src_fds[job.shard], chunk, base + e0 * 2, src_path)
            out = bf16_to_f16_bits(chunk)
            if f16_overflow(chunk, out):
                largest = 0.0
                for f0 in range(0, n, step):
                    part = buf[: min(step, n - f0)]
                    _pread_into(self.src_fds[job.shard], part, base + f0 * 2, src_path)
                    largest = max(largest, largest_finite_bf16(part))
                raise _overflow_error(src_path, job.src.name, largest)
            _pwrite_all(self.out_fds[job.shard], out, job.out_begin + e0 * 2, out_path)
            self.progress.add(chunk.nbytes)
        start_writeback(self.out_fds[job.shard], job.out_begin, job.out_nbytes)

    def _largest(self, job: TensorJob, scales: Any, codes: Any, src_path: str) -> float:
        """Largest ``|fp8 * scale|`` of the whole FP8 weight (for the overflow message)."""
        from .dequant import largest_magnitude

        rows, cols = job.src.shape
        bm, bn = self.plan.block
        base = self._src_offset(job.shard, job.src.begin)
        largest = 0.0
        for i, r0 in enumerate(range(0, rows, bm)):
            tile = codes[: min(rows, r0 + bm) - r0]
            _pread_into(self.src_fds[job.shard], tile, base + r0 * cols, src_path)
            largest = max(largest, largest_magnitude(tile, scales[i], bn))
        return largest

    def _dequantize(self, job: TensorJob) -> None:
        from .dequant import TileRowDequantizer, count_nan_codes, scales_to_f32
        from .numeric import numpy_modules

        np, _ = numpy_modules()
        src_path = os.path.join(self.plan.src_dir, job.shard)
        out_path = os.path.join(self.tmp, job.shard)
        scale = job.scale
        scale_path = os.path.join(self.plan.src_dir, job.scale_shard)
        raw = _pread_all(
            self.src_fds[job.scale_shard],
            scale.nbytes,
            self._src_offset(job.scale_shard, scale.begin),
            scale_path,
        )
        scales = scales_to_f32(raw, scale.dtype, scale.shape)
        if not np.isfinite(scales).all():
            raise InputError(
                f"{scale_path}: tensor {shown(scale.name)}: scale contains NaN or infinity; "
                "the checkpoint is corrupt - download it again"
            )
        rows, cols = job.src.shape
        bm = self.plan.block[0]
        base = self._src_offset(job.shard, job.src.begin)
        deq = TileRowDequantizer(cols, self.plan.block, scales, job.out_dtype)
        step = deq.chunk_rows
        buf = np.empty((step, cols), dtype=np.uint16)
        # One tile row of codes at a time, read with pread (not a memory map: a shard cut
        # short under a map kills the process with SIGBUS; pread sees the end of the file).
        codes = np.empty((min(bm, rows), cols), dtype=np.uint8)
        scratch = np.empty_like(codes)
        out_fd = self.out_fds[job.shard]
        for i, r0 in enumerate(range(0, rows, bm)):
            if self.stop.is_set():
                raise _Stopped
            r1 = min(rows, r0 + bm)
            tile = codes[: r1 - r0]
            _pread_into(self.src_fds[job.shard], tile, base + r0 * cols, src_path)
            nan = count_nan_codes(tile, scratch[: r1 - r0])
            if nan:
                raise InputError(
                    f"{src_path}: tensor {shown(job.src.name)}: {nan} FP8 NaN codes (0x7F/0xFF) in "
                    f"rows {r0}-{r1 - 1}; the weights are corrupt - download the model again"
                )
            if deq.overflows(i, tile):
                largest = self._largest(job, scales, codes, src_path)
                raise _overflow_error(src_path, job.src.name, largest)
            # Row chunks small enough to stay in cache from the gather through the copy
            # into the page cache.
            for c0 in range(r0, r1, step):
                c1 = min(r1, c0 + step)
                out = deq.rows(i, tile[c0 - r0 : c1 - r0], buf[: c1 - c0])
                _pwrite_all(out_fd, out, job.out_begin + c0 * cols * 2, out_path)
            self.progress.add((r1 - r0) * cols * 2)
        start_writeback(out_fd, job.out_begin, job.out_nbytes)


_copy_file_range_ok = hasattr(os, "copy_file_range")


def copy_range(
    src_fd: int,
    src_off: int,
    out_fd: int,
    out_off: int,
    nbytes: int,
    paths: tuple[str, str],
    stop: threading.Event,
    add: Callable[[int], None],
) -> None:
    """Copy bytes between files at explicit offsets (thread-safe; in-kernel when possible)."""
    global _copy_file_range_ok
    while nbytes > 0:
        if stop.is_set():
            raise _Stopped
        step = min(nbytes, COPY_STEP)
        n = 0
        if _copy_file_range_ok:
            try:
                n = os.copy_file_range(src_fd, out_fd, step, src_off, out_off)
            except OSError as exc:
                if exc.errno not in (errno.EXDEV, errno.ENOSYS, errno.EOPNOTSUPP, errno.EINVAL):
                    raise _io_error(exc, paths[1]) from None
                _copy_file_range_ok = False
                continue
        else:
            data = _pread_all(src_fd, min(step, READ_STEP), src_off, paths[0])
            _pwrite_all(out_fd, data, out_off, paths[1])
            n = len(data)
        if n == 0:
            raise _truncated(src_fd, src_off, paths[0])
        start_writeback(out_fd, out_off, n)
        src_off += n
        out_off += n
        nbytes -= n
        add(n)


def _truncated(fd: int, offset: int, path: str) -> InputError:
    try:
        now = f" (it now has {os.fstat(fd).st_size} bytes)"
    except OSError:
        now = ""
    return InputError(
        f"{path}: unexpected end of file at byte {offset}{now}; the shard is truncated or "
        "was cut short during conversion (a copy or download still running?): let it "
        "finish and convert again"
    )


def _pread_into(fd: int, array: Any, offset: int, path: str) -> None:
    """Fill ``array`` (contiguous) from ``fd`` at ``offset``; InputError at end of file."""
    view = memoryview(array).cast("B")
    while len(view):
        try:
            n = os.preadv(fd, [view], offset)
        except OSError as exc:
            raise _io_error(exc, path) from None
        if n == 0:
            raise _truncated(fd, offset, path)
        view = view[n:]
        offset += n


def _pread_all(fd: int, n: int, offset: int, path: str) -> bytes:
    parts = []
    while n > 0:
        try:
            chunk = os.pread(fd, n, offset)
        except OSError as exc:
            raise _io_error(exc, path) from None
        if not chunk:
            raise _truncated(fd, offset, path)
        parts.append(chunk)
        n -= len(chunk)
        offset += len(chunk)
    return b"".join(parts)


def _pwrite_all(fd: int, data: Any, offset: int, path: str) -> None:
    view = memoryview(data).cast("B")
    while len(view):
        try:
            n = os.pwrite(fd, view, offset)
        except OSError as exc:
            raise _io_error(exc, path) from None
        view = view[n:]
        offset += n


def _sync_file_range() -> Callable[[int, int, int, int], int] | None:
    """libc's ``sync_file_range`` (Linux; not in the ``os`` module), or None."""
    try:
        import ctypes

        fn = ctypes.CDLL(None).sync_file_range
    except (ImportError, OSError, AttributeError):  # not Linux: writeback starts later
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


_writeback = _sync_file_range()
SYNC_FILE_RANGE_WRITE = 2


def start_writeback(fd: int, offset: int, nbytes: int) -> None:
    """Start writing a finished output range to disk now (``sync_file_range``, async).

    Otherwise the kernel starts only once a tenth of memory is dirty, and the final
    fsync waits for all that: the disk is the bottleneck here, so it should never idle.
    Errors are ignored (the final fsync reports them).
    """
    if _writeback is not None and nbytes > 0:
        _writeback(fd, offset, nbytes, SYNC_FILE_RANGE_WRITE)


def _reserve(fd: int, size: int, path: str) -> None:
    """Give the output file its final size (sparse) so workers can write at any offset.

    Not ``posix_fallocate``: measured here it costs about 15% more kernel time for the
    same writes (unwritten-extent conversion on ext4); free space is checked up front and
    a full disk mid-run still ends in a clean error and removal of the partial output.
    """
    try:
        os.ftruncate(fd, size)
    except OSError as exc:
        raise _io_error(exc, path) from None


def _overflow_error(path: str, name: str, largest: float) -> InputError:
    return InputError(
        f"{path}: tensor {shown(name)}: largest absolute value {largest:.9g} overflows float16 "
        f"(largest finite value {F16_MAX:.0f}; it would become infinity); this checkpoint "
        "cannot be converted to float16 - serve the bfloat16 conversion on hardware with "
        "BF16 (Atlas A2/A3) instead"
    )


def _io_error(exc: OSError, path: str) -> CheckFailed:
    if exc.errno == errno.ENOSPC:
        return CheckFailed(f"{path}: disk full while writing the BF16 output; free space and retry")
    return CheckFailed(f"{path}: {exc.strerror or exc}")


def _output_index(plan: ConversionPlan) -> dict:
    index = dict(plan.layout.index or {})
    metadata = dict(index.get("metadata") or {})
    metadata["total_size"] = plan.total_size
    if "total_parameters" in metadata:
        metadata["total_parameters"] = sum(j.src.numel for s in plan.shards for j in s.jobs)
    index["metadata"] = metadata
    index["weight_map"] = dict(plan.weight_map)
    return index


def bf16_config(config: dict) -> dict:
    """``config.json`` for the BF16 output: no quantization_config, dtype bfloat16."""
    return output_config(config, "bfloat16")


def output_config(config: dict, dtype: str) -> dict:
    """``config.json`` for the output: no quantization_config, ``dtype`` (a torch name).

    Sets ``torch_dtype`` and ``dtype`` where present (adds ``torch_dtype`` if neither is),
    also inside nested sub-configs such as ``text_config``.
    """
    out = dict(config)
    out.pop("quantization_config", None)
    present = [k for k in ("torch_dtype", "dtype") if k in out]
    for key in present or ["torch_dtype"]:
        out[key] = dtype
    for key, value in list(out.items()):
        if isinstance(value, dict) and key.endswith("_config"):
            nested = dict(value)
            nested.pop("quantization_config", None)
            for dkey in ("torch_dtype", "dtype"):
                if dkey in nested:
                    nested[dkey] = dtype
            out[key] = nested
    return out


def _write_json(path: str, doc: dict) -> int:
    data = (json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    with open(path, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    return len(data)
