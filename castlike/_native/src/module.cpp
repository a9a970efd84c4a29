// The Python face of the native kernels: a `Kernel` object binds one family instantiation to
// its Params (tables and constants from castlike.spec, computed once per cast plan in
// castlike._native.routes) and runs it on contiguous buffers, split across threads with the
// GIL released.  The same source is compiled once per CPU level (CASTLIKE_VARIANT); Python
// imports the best level this CPU supports.
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "fpenv.hpp"
#include "kernels.hpp"

#ifndef CASTLIKE_VARIANT
#error "CASTLIKE_VARIANT must name the CPU level this module is compiled for"
#endif
#define CASTLIKE_STR2(x) #x
#define CASTLIKE_STR(x) CASTLIKE_STR2(x)
#define CASTLIKE_MODULE_INIT2(v) PyInit__##v
#define CASTLIKE_MODULE_INIT(v) CASTLIKE_MODULE_INIT2(v)

namespace castlike {
namespace {

using KernelFn = void (*)(const void*, void*, size_t, size_t, const Params&);

struct Entry {
  const char* name;
  KernelFn fn;
  int in_size;
  int out_size;
  int variants;
};

//: A kernel whose Variant 0, 1, ... are `Op, Ops...` (one Op: a family without variants).
template <class Op, class... Ops>
constexpr Entry entry(const char* name) {
  return Entry{name, &map_variant<Op, Ops...>, int(sizeof(typename Op::InT)),
               int(sizeof(typename Op::OutT)), int(1 + sizeof...(Ops))};
}

//: Every family that takes an integer source, for the integer type I named `k` (BOOL to the
//: integers takes the uint8 ones, clamped to [0, 1]; to the floats, the "b8" entries below).
#define CASTLIKE_INTEGER_SOURCE(I, k)                                                       \
  entry<FloatClass<Integer<I>, 0>, FloatClass<Integer<I>, 1>>("float_class:" k ":u8"),      \
      entry<IntToFloat16<I>>("float16:" k ":u16"),                                          \
      entry<IntToBFloat16<I, 0>, IntToBFloat16<I, 1>, IntToBFloat16<I, 2>>("bfloat16:" k  \
                                                                             ":u16"),       \
      entry<Convert<I, float>>("convert:" k ":f32"),                                        \
      entry<Convert<I, double>>("convert:" k ":f64"),                                       \
      entry<IntToInt<I, uint8_t, 0>, IntToInt<I, uint8_t, 1>>("int_to_int:" k ":u8"),      \
      entry<IntToInt<I, uint16_t, 0>, IntToInt<I, uint16_t, 1>>("int_to_int:" k ":u16"),   \
      entry<IntToInt<I, uint32_t, 0>, IntToInt<I, uint32_t, 1>>("int_to_int:" k ":u32"),   \
      entry<IntToInt<I, uint64_t, 0>, IntToInt<I, uint64_t, 1>>("int_to_int:" k ":u64")

// Names read "<family>:<source storage>:<target storage>"; castlike._native.routes builds them.
const Entry kEntries[] = {
    CASTLIKE_INTEGER_SOURCE(int8_t, "i8"),
    CASTLIKE_INTEGER_SOURCE(uint8_t, "u8"),
    CASTLIKE_INTEGER_SOURCE(int16_t, "i16"),
    CASTLIKE_INTEGER_SOURCE(uint16_t, "u16"),
    CASTLIKE_INTEGER_SOURCE(int32_t, "i32"),
    CASTLIKE_INTEGER_SOURCE(uint32_t, "u32"),
    CASTLIKE_INTEGER_SOURCE(int64_t, "i64"),
    CASTLIKE_INTEGER_SOURCE(uint64_t, "u64"),
    // BOOL ("b8") to the floats whose kernels read the byte as a number; to BOOL, integers and
    // the small floats, routes picks kernels that read any byte as R8 says.  0 and 1 are exact
    // in every float: BFLOAT16 takes the integer kernel's fastest variant (through FLOAT).
    entry<FromBool<Convert<uint8_t, float>>>("convert:b8:f32"),
    entry<FromBool<Convert<uint8_t, double>>>("convert:b8:f64"),
    entry<FromBool<IntToFloat16<uint8_t>>>("float16:b8:u16"),
    entry<FromBool<IntToBFloat16<uint8_t, 1>>>("bfloat16:b8:u16"),
    entry<Gather<uint8_t, uint8_t>>("gather:u8:u8"),
    entry<Gather<uint8_t, uint16_t>>("gather:u8:u16"),
    entry<Gather<uint8_t, uint32_t>>("gather:u8:u32"),
    entry<Gather<uint8_t, uint64_t>>("gather:u8:u64"),
    entry<Gather<uint16_t, uint8_t>>("gather:u16:u8"),
    entry<Gather<uint16_t, uint16_t>>("gather:u16:u16"),
    entry<Gather<uint16_t, uint32_t>>("gather:u16:u32"),
    entry<Gather<uint16_t, uint64_t>>("gather:u16:u64"),
    entry<FloatClass<FloatBits>>("float_class:f32:u8"),
    entry<FloatClass<DoubleBits, 0>, FloatClass<DoubleBits, 1>>("float_class:f64:u8"),
    entry<DoubleClass>("double_class:f64:u8"),
    entry<Float32ToFloat16>("float16:f32:u16"),
    entry<DoubleToHalf<Float16>>("float16:f64:u16"),
    entry<Float32ToBFloat16<0>, Float32ToBFloat16<0>, Float32ToBFloat16<2>>("bfloat16:f32:u16"),
    entry<DoubleToHalf<BFloat16, 0>, DoubleToHalf<BFloat16, 1>, DoubleToHalf<BFloat16, 2>>(
        "bfloat16:f64:u16"),
    entry<Widen<Float16, float>>("widen:f16:f32"),
    entry<Widen<Float16, double>>("widen:f16:f64"),
    entry<Widen<BFloat16, float>>("widen:bf16:f32"),
    entry<Widen<BFloat16, double>>("widen:bf16:f64"),
    entry<Convert<double, float>>("convert:f64:f32"),
    entry<Convert<float, double>>("convert:f32:f64"),
    entry<FloatToInt<float, int8_t>>("float_to_int:f32:i8"),
    entry<FloatToInt<float, uint8_t>>("float_to_int:f32:u8"),
    entry<FloatToInt<float, int16_t>>("float_to_int:f32:i16"),
    entry<FloatToInt<float, uint16_t>>("float_to_int:f32:u16"),
    entry<FloatToInt<float, int32_t>>("float_to_int:f32:i32"),
    entry<FloatToInt<float, uint32_t>>("float_to_int:f32:u32"),
    entry<FloatToInt<float, int64_t>>("float_to_int:f32:i64"),
    entry<FloatToInt<float, uint64_t>>("float_to_int:f32:u64"),
    entry<FloatToInt<double, int8_t>>("float_to_int:f64:i8"),
    entry<FloatToInt<double, uint8_t>>("float_to_int:f64:u8"),
    entry<FloatToInt<double, int16_t>>("float_to_int:f64:i16"),
    entry<FloatToInt<double, uint16_t>>("float_to_int:f64:u16"),
    entry<FloatToInt<double, int32_t>>("float_to_int:f64:i32"),
    entry<FloatToInt<double, uint32_t>>("float_to_int:f64:u32"),
    entry<FloatToInt<double, int64_t>>("float_to_int:f64:i64"),
    entry<FloatToInt<double, uint64_t>>("float_to_int:f64:u64"),
    entry<FloatToSubByte<float, 0>, FloatToSubByte<float, 1>>("float_to_sub_byte:f32:u8"),
    entry<FloatToSubByte<double, 0>, FloatToSubByte<double, 1>>("float_to_sub_byte:f64:u8"),
    entry<NonZero<uint8_t>>("nonzero:u8:u8"),
    entry<NonZero<uint16_t>>("nonzero:u16:u8"),
    entry<NonZero<uint32_t>>("nonzero:u32:u8"),
    entry<NonZero<uint64_t>>("nonzero:u64:u8"),
};

#undef CASTLIKE_INTEGER_SOURCE

constexpr size_t kEntryCount = sizeof(kEntries) / sizeof(kEntries[0]);

//: Elements below which a cast stays on the calling thread (starting threads costs more), and
//: the fewest elements a thread is given.
//: (Measured: below 2**20 elements the fastest kernels finish before a thread starts.)
constexpr Py_ssize_t kMinParallel = Py_ssize_t{1} << 20;
constexpr Py_ssize_t kMinPerThread = Py_ssize_t{1} << 18;

void run_range(const Entry& e, const void* in, void* out, size_t begin, size_t end,
               const Params& p) {
  const FpEnvGuard guard;  // per thread: each has its own floating-point environment
  e.fn(in, out, begin, end, p);
}

void run_parallel(const Entry& e, const void* in, void* out, size_t n, const Params& p,
                  int threads) {
  const size_t per = ((n + size_t(threads) - 1) / size_t(threads) + 63) & ~size_t{63};
  std::vector<std::thread> workers;
  workers.reserve(size_t(threads) - 1);
  for (int t = 1; t < threads; ++t) {
    const size_t begin = std::min(n, per * size_t(t));
    const size_t end = std::min(n, begin + per);
    if (begin < end) workers.emplace_back(run_range, std::cref(e), in, out, begin, end, std::cref(p));
  }
  run_range(e, in, out, 0, std::min(n, per), p);
  for (auto& w : workers) w.join();
}

// -- the Kernel type -------------------------------------------------------------------------

struct KernelObject {
  PyObject_HEAD
  vectorcallfunc vectorcall;  // calls skip tuple building: a small cast is mostly overhead
  const Entry* entry;
  Params params;
  unsigned char* table;  // the kernel's own padded copy of its table (NULL when there is none)
};

//: Bytes after every table (zeros): room for a wider read at the last entry.
constexpr size_t kTablePadding = 64;

void Kernel_dealloc(PyObject* self) {
  auto* k = reinterpret_cast<KernelObject*>(self);
  PyMem_Free(k->table);
  PyTypeObject* type = Py_TYPE(self);
  type->tp_free(self);
  Py_DECREF(type);  // instances of heap types own a reference to their type
}

int Kernel_init(PyObject* self, PyObject* args, PyObject* kwargs) {
  auto* k = reinterpret_cast<KernelObject*>(self);
  static const char* keywords[] = {"name",  "table", "mask",   "class_bits", "variant",
                                   "lo",    "hi",    "limit",  "pre_lo",     "pre_hi",
                                   "ilo",   "ihi",   "nan_result", "hi_result", nullptr};
  const char* name = nullptr;
  PyObject* table = Py_None;
  unsigned long long mask = ~0ULL, nan_result = 0, hi_result = 0;
  int class_bits = 0, variant = 0;
  double lo = 0, hi = 0, limit = 0;
  double pre_lo = -std::numeric_limits<double>::infinity();
  double pre_hi = std::numeric_limits<double>::infinity();
  long long ilo = 0, ihi = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "s|$OKiidddddLLKK", const_cast<char**>(keywords),
                                   &name, &table, &mask, &class_bits, &variant, &lo, &hi, &limit,
                                   &pre_lo, &pre_hi, &ilo, &ihi, &nan_result, &hi_result)) {
    return -1;
  }
  k->entry = nullptr;
  for (size_t i = 0; i < kEntryCount; ++i) {
    if (std::strcmp(kEntries[i].name, name) == 0) k->entry = &kEntries[i];
  }
  if (k->entry == nullptr) {
    PyErr_Format(PyExc_ValueError, "no native kernel named %s", name);
    return -1;
  }
  if (variant < 0 || variant >= k->entry->variants) {
    PyErr_Format(PyExc_ValueError, "%s has no variant %d", name, variant);
    return -1;
  }
  PyMem_Free(k->table);
  k->table = nullptr;
  Params p;
  if (table != Py_None) {
    Py_buffer view;
    if (PyObject_GetBuffer(table, &view, PyBUF_C_CONTIGUOUS) < 0) return -1;
    k->table = static_cast<unsigned char*>(PyMem_Calloc(size_t(view.len) + kTablePadding, 1));
    if (k->table == nullptr) {
      PyBuffer_Release(&view);
      PyErr_NoMemory();
      return -1;
    }
    std::memcpy(k->table, view.buf, size_t(view.len));
    PyBuffer_Release(&view);
    p.table = k->table;
  }
  p.mask = mask;
  p.class_bits = class_bits;
  p.variant = variant;
  p.lo = lo;
  p.hi = hi;
  p.limit = limit;
  p.pre_lo = pre_lo;
  p.pre_hi = pre_hi;
  p.ilo = ilo;
  p.ihi = ihi;
  p.nan_result = nan_result;
  p.hi_result = hi_result;
  k->params = p;
  return 0;
}

//: kernel(source, out, threads): cast the contiguous buffer `source` into `out`.
PyObject* Kernel_call(PyObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  auto* k = reinterpret_cast<KernelObject*>(self);
  const Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  if (nargs != 3 || kwnames != nullptr) {
    PyErr_SetString(PyExc_TypeError, "kernel(source, out, threads) takes 3 positional arguments");
    return nullptr;
  }
  const long threads_arg = PyLong_AsLong(args[2]);
  if (threads_arg == -1 && PyErr_Occurred()) return nullptr;
  Py_buffer in, out;
  if (PyObject_GetBuffer(args[0], &in, PyBUF_C_CONTIGUOUS) < 0) return nullptr;
  if (PyObject_GetBuffer(args[1], &out, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0) {
    PyBuffer_Release(&in);
    return nullptr;
  }
  const Entry& e = *k->entry;
  const Py_ssize_t n = in.len / e.in_size;
  if (in.len % e.in_size != 0 || out.len != n * e.out_size) {
    PyBuffer_Release(&in);
    PyBuffer_Release(&out);
    PyErr_Format(PyExc_ValueError, "%s: %zd source bytes do not match %zd output bytes", e.name,
                 in.len, out.len);
    return nullptr;
  }
  int threads = int(std::max(1L, std::min(threads_arg, 256L)));
  threads = int(std::min<Py_ssize_t>(threads, std::max<Py_ssize_t>(1, n / kMinPerThread)));
  if (n < kMinParallel) threads = 1;
  if (threads == 1 && n < 4096) {
    run_range(e, in.buf, out.buf, 0, size_t(n), k->params);  // not worth releasing the GIL
  } else {
    Py_BEGIN_ALLOW_THREADS;
    if (threads == 1) {
      run_range(e, in.buf, out.buf, 0, size_t(n), k->params);
    } else {
      run_parallel(e, in.buf, out.buf, size_t(n), k->params, threads);
    }
    Py_END_ALLOW_THREADS;
  }
  PyBuffer_Release(&in);
  PyBuffer_Release(&out);
  Py_RETURN_NONE;
}

PyObject* Kernel_new(PyTypeObject* type, PyObject*, PyObject*) {
  auto* k = reinterpret_cast<KernelObject*>(type->tp_alloc(type, 0));
  if (k == nullptr) return nullptr;
  k->vectorcall = Kernel_call;
  k->entry = nullptr;
  k->table = nullptr;
  return reinterpret_cast<PyObject*>(k);
}

PyObject* Kernel_tp_call(PyObject* self, PyObject* args, PyObject* kwargs) {
  return PyVectorcall_Call(self, args, kwargs);
}

PyObject* Kernel_get_name(PyObject* self, void*) {
  auto* k = reinterpret_cast<KernelObject*>(self);
  return PyUnicode_FromString(k->entry != nullptr ? k->entry->name : "?");
}

PyGetSetDef Kernel_getset[] = {
    {"name", Kernel_get_name, nullptr, "The kernel's family:source:target name.", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyMemberDef Kernel_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(KernelObject, vectorcall), READONLY, nullptr},
    {nullptr, 0, 0, 0, nullptr}};

PyType_Slot Kernel_slots[] = {
    {Py_tp_doc, const_cast<char*>("Kernel(name, *, table=None, ...): one native cast, ready to run.")},
    {Py_tp_dealloc, reinterpret_cast<void*>(Kernel_dealloc)},
    {Py_tp_init, reinterpret_cast<void*>(Kernel_init)},
    {Py_tp_new, reinterpret_cast<void*>(Kernel_new)},
    {Py_tp_call, reinterpret_cast<void*>(Kernel_tp_call)},
    {Py_tp_getset, Kernel_getset},
    {Py_tp_members, Kernel_members},
    {0, nullptr}};

PyType_Spec Kernel_spec = {"castlike._native.Kernel", int(sizeof(KernelObject)), 0,
                           Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL, Kernel_slots};

// -- module functions --------------------------------------------------------------------------

PyObject* kernel_names(PyObject*, PyObject*) {
  PyObject* out = PyList_New(Py_ssize_t(kEntryCount));
  if (out == nullptr) return nullptr;
  for (size_t i = 0; i < kEntryCount; ++i) {
    PyObject* name = PyUnicode_FromString(kEntries[i].name);
    if (name == nullptr) {
      Py_DECREF(out);
      return nullptr;
    }
    PyList_SET_ITEM(out, Py_ssize_t(i), name);
  }
  return out;
}

PyObject* cpu_features(PyObject*, PyObject*) {
  PyObject* out = PyDict_New();
  if (out == nullptr) return nullptr;
  auto put = [out](const char* name, bool value) {
    return PyDict_SetItemString(out, name, value ? Py_True : Py_False) == 0;
  };
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  // x86-64-v3 (AVX2, F16C, FMA, BMI2 ...) and x86-64-v4 (AVX-512 F/BW/CD/DQ/VL) are what the
  // avx2 and avx512 modules are compiled for.
  const bool ok = put("x86-64-v3", __builtin_cpu_supports("x86-64-v3")) &&
                  put("x86-64-v4", __builtin_cpu_supports("x86-64-v4")) &&
                  put("avx2", __builtin_cpu_supports("avx2")) &&
                  put("f16c", __builtin_cpu_supports("f16c")) &&
                  put("fma", __builtin_cpu_supports("fma")) &&
                  put("bmi2", __builtin_cpu_supports("bmi2")) &&
                  put("avx512f", __builtin_cpu_supports("avx512f")) &&
                  put("avx512bw", __builtin_cpu_supports("avx512bw")) &&
                  put("avx512vl", __builtin_cpu_supports("avx512vl")) &&
                  put("avx512dq", __builtin_cpu_supports("avx512dq"));
#elif defined(__aarch64__)
  const bool ok = put("neon", true);
#else
  const bool ok = true;
#endif
  if (!ok) {
    Py_DECREF(out);
    return nullptr;
  }
  return out;
}

//: Testing hook: set the calling thread's FTZ/DAZ flags and rounding mode (0 nearest, 1 down,
//: 2 up, 3 toward zero) as a hostile caller might; returns the previous control word, which
//: `_restore_fp_environment` puts back.  The kernels must give the same bits either way.
PyObject* set_fp_environment(PyObject*, PyObject* args) {
  int flush = 0, rounding = 0;
  if (!PyArg_ParseTuple(args, "pi", &flush, &rounding)) return nullptr;
  if (rounding < 0 || rounding > 3) {
    PyErr_SetString(PyExc_ValueError, "rounding must be 0, 1, 2 or 3");
    return nullptr;
  }
#if defined(CASTLIKE_FPENV_X86)
  const unsigned int saved = _mm_getcsr();
  unsigned int csr = (saved & ~0x8040u & ~0x6000u) | (unsigned(rounding) << 13);
  if (flush) csr |= 0x8040u;  // FTZ and DAZ
  _mm_setcsr(csr);
  return PyLong_FromUnsignedLongLong(saved);
#elif defined(CASTLIKE_FPENV_AARCH64)
  std::uint64_t saved;
  __asm__ __volatile__("mrs %0, fpcr" : "=r"(saved));
  // AArch64 RMode: 0 nearest, 1 up, 2 down, 3 toward zero.
  static const std::uint64_t kMode[] = {0, 2, 1, 3};
  std::uint64_t fpcr = (saved & ~(std::uint64_t{3} << 22)) | (kMode[rounding] << 22);
  if (flush) fpcr |= (std::uint64_t{1} << 24) | (std::uint64_t{1} << 19);
  __asm__ __volatile__("msr fpcr, %0" : : "r"(fpcr));
  return PyLong_FromUnsignedLongLong(saved);
#else
  (void)flush;
  PyErr_SetString(PyExc_NotImplementedError, "no control word on this architecture");
  return nullptr;
#endif
}

PyObject* restore_fp_environment(PyObject*, PyObject* arg) {
  const unsigned long long saved = PyLong_AsUnsignedLongLong(arg);
  if (PyErr_Occurred()) return nullptr;
#if defined(CASTLIKE_FPENV_X86)
  _mm_setcsr(static_cast<unsigned int>(saved));
#elif defined(CASTLIKE_FPENV_AARCH64)
  const std::uint64_t fpcr = saved;
  __asm__ __volatile__("msr fpcr, %0" : : "r"(fpcr));
#else
  (void)saved;
#endif
  Py_RETURN_NONE;
}

PyMethodDef kMethods[] = {
    {"_set_fp_environment", set_fp_environment, METH_VARARGS,
     "Testing hook: set FTZ/DAZ and the rounding mode of the calling thread."},
    {"_restore_fp_environment", restore_fp_environment, METH_O,
     "Testing hook: restore the control word _set_fp_environment returned."},
    {"kernel_names", kernel_names, METH_NOARGS, "Names of the kernels this module holds."},
    {"cpu_features", cpu_features, METH_NOARGS, "The CPU features the dispatcher looks at."},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef kModule = {PyModuleDef_HEAD_INIT,
                       "castlike._native._" CASTLIKE_STR(CASTLIKE_VARIANT),
                       "castlike's native cast kernels, compiled for one CPU level.",
                       -1,
                       kMethods,
                       nullptr,
                       nullptr,
                       nullptr,
                       nullptr};

}  // namespace
}  // namespace castlike

PyMODINIT_FUNC CASTLIKE_MODULE_INIT(CASTLIKE_VARIANT)() {
  using namespace castlike;
  PyObject* m = PyModule_Create(&kModule);
  if (m == nullptr) return nullptr;
  PyObject* type = PyType_FromSpec(&Kernel_spec);
  if (type == nullptr || PyModule_AddObject(m, "Kernel", type) < 0 ||
      PyModule_AddStringConstant(m, "variant", CASTLIKE_STR(CASTLIKE_VARIANT)) < 0) {
    Py_XDECREF(type);
    Py_DECREF(m);
    return nullptr;
  }
  return m;
}
