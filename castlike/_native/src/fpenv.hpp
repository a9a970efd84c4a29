// A scoped floating-point environment in which the hardware conversions the kernels use are
// exactly the rules: round to nearest even, subnormals neither flushed (FTZ) nor read as zero
// (DAZ).  The caller's environment (numpy, a BLAS, `-ffast-math` code loaded in the process)
// may have set any of these; the guard restores it on exit.
#pragma once

#include <cfenv>
#include <cstdint>

#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__)
#include <xmmintrin.h>
#define CASTLIKE_FPENV_X86 1
#elif defined(__aarch64__)
#define CASTLIKE_FPENV_AARCH64 1
#endif

namespace castlike {

class FpEnvGuard {
 public:
  FpEnvGuard() {
#if defined(CASTLIKE_FPENV_X86)
    saved_ = _mm_getcsr();
    // 0x1F80: every exception masked, round to nearest, FTZ (bit 15) and DAZ (bit 6) off.
    _mm_setcsr(0x1F80u);
#elif defined(CASTLIKE_FPENV_AARCH64)
    std::uint64_t fpcr;
    __asm__ __volatile__("mrs %0, fpcr" : "=r"(fpcr));
    saved_ = fpcr;
    // Clear RMode (bits 22-23: round to nearest), FZ (24) and FZ16 (19).
    fpcr &= ~((std::uint64_t{3} << 22) | (std::uint64_t{1} << 24) | (std::uint64_t{1} << 19));
    __asm__ __volatile__("msr fpcr, %0" : : "r"(fpcr));
#else
    saved_round_ = std::fegetround();
    std::fesetround(FE_TONEAREST);
#endif
  }
  ~FpEnvGuard() {
#if defined(CASTLIKE_FPENV_X86)
    _mm_setcsr(saved_);
#elif defined(CASTLIKE_FPENV_AARCH64)
    __asm__ __volatile__("msr fpcr, %0" : : "r"(saved_));
#else
    std::fesetround(saved_round_);
#endif
  }
  FpEnvGuard(const FpEnvGuard&) = delete;
  FpEnvGuard& operator=(const FpEnvGuard&) = delete;

 private:
#if defined(CASTLIKE_FPENV_X86)
  unsigned int saved_;
#elif defined(CASTLIKE_FPENV_AARCH64)
  std::uint64_t saved_;
#else
  int saved_round_;
#endif
};

}  // namespace castlike
