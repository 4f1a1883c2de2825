"""Timing with CUDA events: warm-up, L2 flushed before every repeat, median with p20/p80."""
import statistics
import time
from dataclasses import dataclass

import torch

_flush_buffers = {}


@dataclass
class Timing:
    median_ms: float
    p20_ms: float
    p80_ms: float
    reps: int

    def as_dict(self):
        return {"median_ms": self.median_ms, "p20_ms": self.p20_ms, "p80_ms": self.p80_ms, "reps": self.reps}


def flush_l2(device):
    """Overwrite a buffer twice the size of L2, so no repeat finds its inputs cached."""
    device = torch.device(device)
    buf = _flush_buffers.get(device)
    if buf is None:
        l2 = torch.cuda.get_device_properties(device).L2_cache_size
        buf = _flush_buffers[device] = torch.empty(max(2 * l2, 64 << 20) // 4, device=device)
    buf.zero_()


def quantile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def time_cuda(fn, device, warmup=5, reps=30):
    """Median, p20 and p80 milliseconds of `fn()` over `reps` runs, each after an L2 flush."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize(device)
    times = []
    for _ in range(reps):
        flush_l2(device)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return Timing(statistics.median(times), quantile(times, 0.2), quantile(times, 0.8), reps)


def time_host(fn):
    """Seconds of wall-clock time for one call of `fn` (builds, first compiles)."""
    t0 = time.perf_counter()
    result = fn()
    return time.perf_counter() - t0, result


def copy_bandwidth(device, nbytes=1 << 30, reps=10):
    """Device-to-device copy bandwidth in bytes/s, counting bytes read plus bytes written."""
    src = torch.empty(nbytes // 4, device=device)
    dst = torch.empty_like(src)
    t = time_cuda(lambda: dst.copy_(src), device, warmup=2, reps=reps)
    return 2 * nbytes / (t.median_ms * 1e-3)
