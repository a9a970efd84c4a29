"""The native extension's boundary: nothing a Python caller hands ``Kernel`` crashes the process.

What once crashed (a segfault, a read past a table, a use after free, ``std::terminate``) runs
in a child interpreter, so that a crash fails its test instead of ending pytest:

* construction: ``Kernel.__new__`` alone, a table that is missing, short, of the wrong entry
  size, or given to a family that reads none, ``class_bits`` out of range, constants that make
  a conversion undefined, unknown names and variants, each a Python error;
* calls: buffers of mismatched sizes, misaligned, overlapping, read-only, non-contiguous, and
  bad thread counts, each a Python error (huge thread counts are clamped);
* immutability: a second ``__init__`` is refused, also while other threads run the kernel
  with the GIL released, and the kernel keeps its bits;
* threads that cannot be started (a memory or a process limit): the cast runs on the threads
  there are, with the same bits, and the pool starts workers again once the limit is lifted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from castlike import _native

pytestmark = [
    pytest.mark.skipif(
        _native.module() is None, reason="castlike's native extension is not built or disabled"
    ),
    pytest.mark.numpy_session,  # the kernels' own boundary: no backend is involved
]

#: Children start here, where no castlike package is: they import the installed one, as the
#: tests do (``nox -s sanitize`` installs a sanitized build; the checkout has another).
HERE = Path(__file__).parent

#: Every child starts with this: the kernel type, NumPy, and the spec's tables for a gather
#: kernel (``T8``: UINT8 patterns reversed) and the FLOAT class table of FLOAT8E4M3FN.
_PRELUDE = """
import os, threading
import numpy as np
import castlike
from castlike import _native
assert os.environ.get("CASTLIKE_TEST_SANITIZED") != "1" or _native.module().sanitized
from castlike._native import routes
from castlike.spec.rules import Mode
from castlike.spec.tables import float32_class_table
from castlike.spec.types import spec_of

K = _native.module().Kernel
T8 = np.arange(256, dtype=np.uint8)[::-1].copy()
CLASSES = float32_class_table(spec_of("FLOAT8E4M3FN"), Mode())
"""

# (case, code, outcome): the outcome is "ok" (the code ran, its asserts held) or "Type: text",
# the exception's type name and a part of its message.
_CASES: list[tuple[str, str, str]] = [
    # -- construction -------------------------------------------------------------------------
    ("new-without-init", "K.__new__(K)", "TypeError: missing required argument 'name'"),
    (
        "new-then-call",
        "K.__new__(K)(np.zeros(4, np.uint8), np.zeros(4, np.uint8), 1)",
        "TypeError: missing required argument 'name'",
    ),
    (
        "gather-without-table",
        "K('gather:u8:u8', mask=0xFF)",
        "ValueError: gather:u8:u8: needs a table of mask + 1 entries of 1 byte(s)",
    ),
    (
        "float-class-without-table",
        "K('float_class:f32:u8', class_bits=19)",
        "ValueError: float_class:f32:u8: needs a table of 16384 entries of 1 byte(s)",
    ),
    (
        "float-class-table-of-4",
        "K('float_class:f32:u8', table=np.zeros(4, np.uint8), class_bits=19)",
        "ValueError: float_class:f32:u8: needs a table of 16384 entries of 1 byte(s), got 4 bytes",
    ),
    (
        "class-bits-40",
        "K('float_class:f32:u8', table=CLASSES, class_bits=40)",
        "ValueError: float_class:f32:u8: class_bits must be 1 to 31, got 40",
    ),
    (
        "class-bits-negative",
        "K('float_class:i64:u8', table=CLASSES, class_bits=-1)",
        "ValueError: float_class:i64:u8: class_bits must be 1 to 31, got -1",
    ),
    (
        "class-bits-missing",
        "K('float_class:f32:u8', table=CLASSES)",
        "ValueError: float_class:f32:u8: needs class_bits (1 to 31)",
    ),
    (
        "double-class-bits-20",
        "K('double_class:f64:u8', table=np.zeros(1 << 17, np.uint8), class_bits=20)",
        "ValueError: double_class:f64:u8: class_bits must be 33 to 63, got 20",
    ),
    (
        "gather-u16-u8-table-of-2",
        "K('gather:u16:u8', table=np.zeros(2, np.uint8), mask=0xFFFF)",
        "ValueError: gather:u16:u8: needs a table of 65536 entries of 1 byte(s), got 2 bytes",
    ),
    (
        "gather-mask-beyond-source",
        "K('gather:u8:u8', table=np.zeros(512, np.uint8), mask=0x1FF)",
        "ValueError: gather:u8:u8: mask 0x1ff has bits beyond the 8-bit source",
    ),
    (
        "gather-table-entry-size",
        "K('gather:u8:u16', table=np.zeros(512, np.uint8), mask=0xFF)",
        "ValueError: gather:u8:u16: needs a table of 256 entries of 2 byte(s), got 512 bytes in "
        "entries of 1",
    ),
    (
        "table-non-contiguous",
        "K('gather:u8:u8', table=np.zeros(512, np.uint8)[::2], mask=0xFF)",
        "ValueError: ndarray is not C-contiguous",
    ),
    (
        "table-not-a-buffer",
        "K('gather:u8:u8', table=[0] * 256, mask=0xFF)",
        "TypeError: a bytes-like object is required",
    ),
    (
        "table-on-a-family-without",
        "K('convert:f32:f64', table=np.zeros(4, np.uint8))",
        "ValueError: convert:f32:f64: takes no table",
    ),
    (
        "class-bits-on-gather",
        "K('gather:u8:u8', table=T8, mask=0xFF, class_bits=19)",
        "ValueError: gather:u8:u8: takes no class_bits",
    ),
    (
        "float-to-int-nan-bound",
        "K('float_to_int:f32:i32', lo=float('nan'), hi=1.0)",
        "ValueError: float_to_int:f32:i32: lo and hi must satisfy lo <= hi within the int32 range",
    ),
    (
        "float-to-int-beyond-lanes",
        "K('float_to_int:f64:i64', lo=-(2.0**63), hi=2.0**63)",
        "ValueError: float_to_int:f64:i64: lo and hi must satisfy lo <= hi within the int64 range",
    ),
    (
        "float-to-int-negative-unsigned",
        "K('float_to_int:f32:u32', lo=-1.0, hi=1.0)",
        "ValueError: float_to_int:f32:u32: lo and hi must satisfy lo <= hi within the uint32 range",
    ),
    (
        "float-to-sub-byte-inf",
        "K('float_to_sub_byte:f32:u8', hi=float('inf'), mask=15)",
        "ValueError: float_to_sub_byte:f32:u8: hi must be from 0 to below 2**31, got inf",
    ),
    (
        "int-to-float16-without-clip",
        "K('float16:i32:u16')",
        "ValueError: float16:i32:u16: ilo < ihi within the int32 range, got 0 and 0",
    ),
    (
        "int-to-float16-clip-beyond-source",
        "K('float16:u8:u16', ilo=-1, ihi=255)",
        "ValueError: float16:u8:u16: ilo < ihi within the uint8 range, got -1 and 255",
    ),
    (
        "bool-to-float16-without-clip",
        "K('float16:b8:u16')",
        "ValueError: float16:b8:u16: ilo < ihi within the uint8 range, got 0 and 0",
    ),
    (
        "int-class-clip-without-bounds",
        "K('float_class:i64:u8', table=CLASSES, class_bits=19, variant=1)",
        "ValueError: float_class:i64:u8: ilo < ihi within the int64 range, got 0 and 0",
    ),
    (
        "int-class-clip-with-bounds",
        "k = K('float_class:i32:u8', table=CLASSES, class_bits=19, variant=1, ilo=-2**24, "
        "ihi=2**24); out = np.empty(2, np.uint8); "
        "k(np.array([2**31 - 1, -2**31], np.int32), out, 1); assert list(out) == [0x7E, 0xFE]",
        "ok",
    ),
    (
        "mask-beyond-64-bits",
        "K('nonzero:u8:u8', mask=2**64 + 1)",
        "OverflowError: int too big to convert",
    ),
    ("mask-negative", "K('nonzero:u8:u8', mask=-1)", "OverflowError: can't convert negative int"),
    ("unknown-name", "K('gather:u8:u128')", "ValueError: no native kernel named 'gather:u8:u128'"),
    ("name-with-nul", "K('gather:u8:u8\\0')", "ValueError: embedded null character"),
    (
        "variant-out-of-range",
        "K('widen:f16:f32', variant=1)",
        "ValueError: widen:f16:f32 has variants 0 to 0, not 1",
    ),
    # -- calls --------------------------------------------------------------------------------
    (
        "call-sizes",
        "K('convert:f32:f64')(np.zeros(4, np.float32), np.zeros(3), 1)",
        "ValueError: convert:f32:f64: 16 source bytes in elements of 4 bytes do not match 24",
    ),
    (
        "call-partial-element",
        "K('convert:f32:f64')(np.zeros(5, np.uint8), np.zeros(1), 1)",
        "ValueError: convert:f32:f64: 5 source bytes in elements of 4 bytes do not match 8",
    ),
    (
        "call-misaligned-source",
        "K('convert:f32:f64')(np.zeros(17, np.uint8)[1:].view(np.float32), np.zeros(4), 1)",
        "ValueError: convert:f32:f64: the source must be aligned to 4 bytes",
    ),
    (
        "call-misaligned-output",
        "K('convert:f32:f64')(np.zeros(4, np.float32), np.zeros(33, np.uint8)[1:].view('f8'), 1)",
        "ValueError: convert:f32:f64: the source must be aligned to 4 bytes and the output to 8",
    ),
    (
        "call-same-buffer",
        "x = np.zeros(8, np.uint8)\nK('gather:u8:u8', table=T8, mask=0xFF)(x, x, 1)",
        "ValueError: gather:u8:u8: the source and the output share memory",
    ),
    (
        "call-overlapping-buffers",
        "raw = np.zeros(64, np.uint8)\n"
        "K('convert:f32:f64')(raw[:16].view(np.float32), raw[8:40].view(np.float64), 1)",
        "ValueError: convert:f32:f64: the source and the output share memory",
    ),
    (
        "call-read-only-output",
        "out = np.zeros(4, np.uint8)\nout.flags.writeable = False\n"
        "K('nonzero:u8:u8')(np.zeros(4, np.uint8), out, 1)",
        "ValueError: buffer source array is read-only",
    ),
    (
        "call-non-contiguous",
        "K('nonzero:u8:u8')(np.zeros(8, np.uint8)[::2], np.zeros(4, np.uint8), 1)",
        "ValueError: ndarray is not C-contiguous",
    ),
    (
        "call-not-a-buffer",
        "K('nonzero:u8:u8')(None, np.zeros(4, np.uint8), 1)",
        "TypeError: a bytes-like object is required",
    ),
    (
        "call-threads-zero",
        "K('nonzero:u8:u8')(np.zeros(4, np.uint8), np.zeros(4, np.uint8), 0)",
        "ValueError: kernel(source, out, threads): threads must be at least 1",
    ),
    (
        "call-threads-negative-huge",
        "K('nonzero:u8:u8')(np.zeros(4, np.uint8), np.zeros(4, np.uint8), -(2**70))",
        "ValueError: kernel(source, out, threads): threads must be at least 1",
    ),
    (
        "call-threads-float",
        "K('nonzero:u8:u8')(np.zeros(4, np.uint8), np.zeros(4, np.uint8), 1.5)",
        "TypeError: 'float' object cannot be interpreted as an integer",
    ),
    (
        "call-too-few-arguments",
        "K('nonzero:u8:u8')(np.zeros(4, np.uint8), np.zeros(4, np.uint8))",
        "TypeError: kernel(source, out, threads) takes 3 positional arguments",
    ),
    (
        "call-keywords",
        "K('nonzero:u8:u8')(np.zeros(4, np.uint8), np.zeros(4, np.uint8), threads=1)",
        "TypeError: kernel(source, out, threads) takes 3 positional arguments",
    ),
    (
        "call-threads-huge",
        """
        x = np.arange(1 << 21, dtype=np.uint32).astype(np.uint8)
        out = np.empty_like(x)
        K('gather:u8:u8', table=T8, mask=0xFF)(x, out, 2**70)
        assert np.array_equal(out, T8[x])
        """,
        "ok",
    ),
    ("call-empty", "K('gather:u8:u8', table=T8, mask=0xFF)(b'', bytearray(), 1)", "ok"),
    (
        "call-bytes",
        """
        out = bytearray(3)
        K('gather:u8:u8', table=T8, mask=0xFF)(b'\\x00\\x01\\xff', out, 1)
        assert list(out) == [255, 254, 0]
        """,
        "ok",
    ),
    # -- immutability -------------------------------------------------------------------------
    (
        "init-again",
        """
        k = K('gather:u8:u8', table=T8, mask=0xFF)
        k.__init__('gather:u8:u8', table=np.zeros(256, np.uint8), mask=0xFF)
        """,
        "TypeError: a castlike Kernel cannot be changed after construction: make a new Kernel",
    ),
    (
        "init-again-keeps-the-kernel",
        """
        k = K('gather:u8:u8', table=T8, mask=0xFF)
        try:
            k.__init__('gather:u16:u8', table=np.zeros(2, np.uint8), mask=0xFFFF)
        except TypeError:
            pass
        x = np.arange(256, dtype=np.uint8)
        out = np.empty_like(x)
        k(x, out, 1)
        assert k.name == 'gather:u8:u8' and np.array_equal(out, T8)
        """,
        "ok",
    ),
    (
        "init-again-on-a-cached-kernel",
        """
        src, dst = spec_of('FLOAT'), spec_of('FLOAT8E4M3FN')
        x = np.linspace(-500, 500, 10001, dtype=np.float32)
        before = castlike.cast(x, dst.name).view(np.uint8).copy()
        k = routes.kernel_for(_native.module(), src, dst, Mode())
        try:
            k.__init__('float_class:f32:u8', table=np.zeros(4, np.uint8), class_bits=19)
        except TypeError:
            pass
        assert np.array_equal(castlike.cast(x, dst.name).view(np.uint8), before)
        """,
        "ok",
    ),
    # -- repeat(): the repeat path's one C call -------------------------------------------------
    (
        "repeat-arguments",
        "K('convert:f32:f64').repeat(np.empty, np.float64, None)",
        "TypeError: kernel.repeat(empty, dtype, fallback, source) takes 4 positional arguments",
    ),
    (
        "repeat-equals-the-call",
        """
        k = K('float_class:f32:u8', table=CLASSES, class_bits=19)
        rng = np.random.default_rng(9)
        for shape in [(3, 5, 7), (0,), (4, 0), ()]:
            x = rng.standard_normal(shape).astype(np.float32)
            made = []
            def empty(s, d):
                made.append((s, d))
                return np.empty(s, d)
            got = k.repeat(empty, np.dtype(np.uint8), None, x.view(np.uint32))
            expected = np.empty(shape, np.uint8)
            k(x.view(np.uint32), expected, 1)
            assert made == [(shape, np.dtype(np.uint8))], made
            assert got.shape == shape and got.tobytes() == expected.tobytes()
        """,
        "ok",
    ),
    (
        "repeat-on-threads",
        """
        k = K('float_class:f32:u8', table=CLASSES, class_bits=19)
        x = np.random.default_rng(10).standard_normal(1 << 21).astype(np.float32).view(np.uint32)
        expected = np.empty(x.shape, np.uint8)
        k(x, expected, 1)
        pool = _native._pool()
        for threads in (2, 1):
            _native.set_num_threads(threads)
            pool._peak_running(True)
            got = k.repeat(np.empty, np.dtype(np.uint8), None, x)
            assert got.tobytes() == expected.tobytes()
            assert pool._peak_running(False) <= threads
        """,
        "ok",
    ),
    (
        "repeat-leaves-the-others-to-the-fallback",
        """
        k = K('convert:f32:f64')
        data = np.zeros(65, np.uint8)
        others = {
            "strided": np.zeros(8, np.float32)[::2],
            "byte-swapped": np.zeros(4, ">f4"),
            "misaligned": data[1:].view(np.float32),
            "broadcast": np.broadcast_to(np.float32(1), (4, 4)),
            "a list": [1.0, 2.0],
        }
        for name, x in others.items():
            seen = []
            fallback = lambda a: seen.append(a) or "fell back"
            got = k.repeat(np.empty, np.dtype(np.float64), fallback, x)
            assert got == "fell back" and seen == [x], name
        """,
        "ok",
    ),
    (
        "repeat-tensor-without-torch",
        """
        import sys
        assert "torch" not in sys.modules  # no tensor can exist: everything is the fallback's
        k = K('convert:f32:f64')
        x = np.zeros(3, np.float32)
        assert k.repeat_tensor(None, lambda a: ("fell back", a), x) == ("fell back", x)
        assert k.repeat_tensor(None, lambda a: "list", [1.0]) == "list"
        assert "torch" not in sys.modules  # and it imported none
        """,
        "ok",
    ),
    (
        "repeat-tensor-arguments",
        "K('convert:f32:f64').repeat_tensor(None, None)",
        "TypeError: kernel.repeat_tensor(dtype, fallback, source) takes 3 positional arguments",
    ),
    (
        "repeat-unfit-empty",
        "K('convert:f32:f64').repeat(lambda s, d: np.zeros(1, np.uint8), np.float64, None, "
        "np.zeros(4, np.float32))",
        "ValueError: convert:f32:f64: kernel.repeat's empty() gave an unfit output",
    ),
    (
        "repeat-empty-raises",
        "K('convert:f32:f64').repeat(lambda s, d: 1 // 0, np.float64, None, "
        "np.zeros(4, np.float32))",
        "ZeroDivisionError: integer division or modulo by zero",
    ),
    (
        "repeat-dtype-raises",
        """
        class Hostile:
            @property
            def dtype(self):
                raise RuntimeError("no dtype here")
        K('convert:f32:f64').repeat(np.empty, np.float64, None, Hostile())
        """,
        "RuntimeError: no dtype here",
    ),
    (
        "init-again-while-threads-run-it",
        """
        k = K('float_class:f32:u8', table=CLASSES, class_bits=19)
        x = np.random.default_rng(5).standard_normal(1 << 22).astype(np.float32).view(np.uint32)
        expected = np.empty(x.shape, np.uint8)
        k(x, expected, 1)
        _native.set_num_threads(2)
        stop = threading.Event()
        changed = []

        def attack():
            while not stop.is_set():
                try:
                    k.__init__('float_class:f32:u8', table=np.zeros(4, np.uint8), class_bits=19)
                except TypeError:
                    continue
                changed.append(1)

        def cast():
            for _ in range(4):
                out = np.empty_like(expected)
                k(x, out, 2)
                assert np.array_equal(out, expected)

        attacker = threading.Thread(target=attack)
        casters = [threading.Thread(target=cast) for _ in range(2)]
        for t in [attacker, *casters]:
            t.start()
        for t in casters:
            t.join()
        stop.set()
        attacker.join()
        assert not changed
        """,
        "ok",
    ),
]

#: Runs every case in order, printing a line before each (so that a crash names its case) and
#: its outcome after it.
_RUNNER = """
import json, sys, traceback
cases = json.loads(sys.argv[1])
for name, code in cases:
    print(json.dumps(["start", name]), flush=True)
    try:
        exec(code, dict(globals()))
        outcome = "ok"
    except AssertionError:
        outcome = "AssertionError: " + traceback.format_exc(limit=-1)
    except Exception as error:
        outcome = f"{type(error).__name__}: {error}"
    print(json.dumps(["done", name, outcome]), flush=True)
"""


def _child(code: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "OPENBLAS_NUM_THREADS": "1"},
        cwd=HERE,
    )


@pytest.fixture(scope="module")
def outcomes() -> dict[str, str]:
    """Each case's outcome, from one child interpreter that runs them all in order; the case a
    crash interrupted, and those after it, read what became of the child."""
    cases = [(name, textwrap.dedent(code)) for name, code, _ in _CASES]
    proc = _child(_PRELUDE + _RUNNER, json.dumps(cases))
    found: dict[str, str] = {}
    current = None
    for line in proc.stdout.splitlines():
        event = json.loads(line)
        if event[0] == "start":
            current = event[1]
        else:
            found[event[1]] = event[2]
            current = None
    if proc.returncode != 0:
        death = f"the child died (exit status {proc.returncode}) during {current}"
        detail = f"{death}:\n{proc.stderr[-3000:]}"
        for name, _, _ in _CASES:
            found.setdefault(name, detail)
    return found


@pytest.mark.parametrize(
    ("case", "expected"), [(c[0], c[2]) for c in _CASES], ids=[c[0] for c in _CASES]
)
def test_kernel_boundary(case: str, expected: str, outcomes: dict[str, str]) -> None:
    got = outcomes[case]
    if expected == "ok":
        assert got == "ok"
    else:
        kind, _, text = expected.partition(": ")
        assert got.partition(": ")[0] == kind and text in got, got


def test_the_build_under_test() -> None:
    """``nox -s sanitize`` sets CASTLIKE_TEST_SANITIZED=1: then the kernels under test must be
    its sanitized build, not the checkout's."""
    if os.environ.get("CASTLIKE_TEST_SANITIZED") != "1":
        pytest.skip("not under nox -s sanitize (CASTLIKE_TEST_SANITIZED=1)")
    assert _native.module().sanitized  # type: ignore[union-attr]


# -- threads that cannot be started -------------------------------------------------------------

#: A cast of 2**21 FLOAT elements on 2 threads while APPLY_LIMIT keeps the process from starting a
#: thread, then after the limit is lifted.  Prints what it saw.
_NO_THREADS = (
    _PRELUDE
    + """
import os, resource
kernel = routes.kernel_for(_native.module(), spec_of("FLOAT"), spec_of("FLOAT8E4M3FN"), Mode())
x = np.random.default_rng(9).standard_normal(1 << 21).astype(np.float32)
expected = np.empty(x.shape, np.uint8)
kernel(x, expected, 1)
out = np.empty_like(expected)
_native.set_num_threads(2)
_native._POOL._wake_policy(0, 0)  # the cast wants its worker, however fast this machine is
workers_before = _native._POOL.workers()
APPLY_LIMIT
kernel(x, out, 2)
LIFT_LIMIT
workers_during = _native._POOL.workers()
exact_during = bool(np.array_equal(out, expected))
again = castlike.cast(x, "FLOAT8E4M3FN").view(np.uint8)
print(json.dumps({
    "before": workers_before, "during": workers_during, "exact_during": exact_during,
    "after": _native._POOL.workers(), "exact_after": bool(np.array_equal(again, expected)),
}))
"""
)

#: The address space grows by a little less than a worker's stack (1 MiB) at most.
_MEMORY_LIMIT = """
def vm_bytes():
    for line in open("/proc/self/status"):
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
saved = resource.getrlimit(resource.RLIMIT_AS)
resource.setrlimit(resource.RLIMIT_AS, (vm_bytes() + (256 << 10), saved[1]))
"""
_MEMORY_UNLIMIT = "resource.setrlimit(resource.RLIMIT_AS, saved)"

#: No more processes (threads count) for this user than it has: root is exempt, so a root
#: child first becomes `nobody` (everything it needs is imported by then).
_PROCESS_LIMIT = """
if os.geteuid() == 0:
    os.setgid(65534)
    os.setuid(65534)
saved = resource.getrlimit(resource.RLIMIT_NPROC)
resource.setrlimit(resource.RLIMIT_NPROC, (1, saved[1]))
"""
_PROCESS_UNLIMIT = "resource.setrlimit(resource.RLIMIT_NPROC, saved)"


def _no_threads(limit: str, unlimit: str) -> dict[str, object]:
    code = "import json\n" + _NO_THREADS.replace("APPLY_LIMIT", limit).replace(
        "LIFT_LIMIT", unlimit
    )
    proc = _child(code)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result: dict[str, object] = json.loads(proc.stdout.splitlines()[-1])
    return result


needs_linux = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="reads /proc/self/status (Linux)"
)


@needs_linux
def test_cast_without_memory_for_a_thread() -> None:
    """Under an address-space limit that leaves no room for a worker's stack, the cast runs on
    the calling thread alone (it used to end in std::terminate)."""
    module = _native.module()
    if getattr(module, "sanitized", False):
        pytest.skip("AddressSanitizer reserves terabytes of address space: no RLIMIT_AS under it")
    seen = _no_threads(_MEMORY_LIMIT, _MEMORY_UNLIMIT)
    assert seen == {"before": 0, "during": 0, "exact_during": True, "after": 1, "exact_after": True}


@needs_linux
def test_cast_under_a_process_limit() -> None:
    """RLIMIT_NPROC reached: no worker starts, the cast is exact on the calling thread, and the
    pool starts its worker once the limit is lifted."""
    if os.geteuid() != 0 and resource_hard_nproc_is_low():
        pytest.skip("the hard RLIMIT_NPROC is too low to lift the limit again")
    seen = _no_threads(_PROCESS_LIMIT, _PROCESS_UNLIMIT)
    assert seen == {"before": 0, "during": 0, "exact_during": True, "after": 1, "exact_after": True}


def resource_hard_nproc_is_low() -> bool:
    import resource

    hard = resource.getrlimit(resource.RLIMIT_NPROC)[1]
    return hard != resource.RLIM_INFINITY and hard < 64
