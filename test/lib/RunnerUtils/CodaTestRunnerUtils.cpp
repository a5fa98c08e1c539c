//===- CodaTestRunnerUtils.cpp - helpers for CPU execution tests ----------===//
//
// Functions that CPU differential tests call through mlir-runner (declared in
// MLIR with `attributes {llvm.emit_c_interface}`):
//   coda_fill_random_{f32,bf16,f16}(memref<*xT>, i64 seed)
//       deterministic pseudo-random values in [-1, 1);
//   coda_fill_random_{f8e4m3fn,f8e5m2}(memref<*xT>, i64 seed)
//       deterministic pseudo-random 8-bit floats of magnitude 1/8 to 8 (both
//       signs; every such encoding alike, never NaN or infinite);
//   coda_fill_random_{i32,i64}(memref<*xT>, i64 seed, i64 lo, i64 hi)
//       deterministic pseudo-random integers in [lo, hi);
//   coda_check_close_{f32,bf16,f16}(memref<*xT> actual, memref<*xT> expected,
//                               f32 rtol, f32 atol)
//       prints a one-line verdict and exits with status 1 when any element is
//       NaN or infinite, or differs by more than atol + rtol * |expected|;
//   coda_check_scaled_{f32,bf16,f16}(memref<*xT> actual, memref<*xT> expected,
//                                    f32 rtol, f32 atol, f32 floor)
//       the same with atol a fraction of the largest |expected|, and at least
//       `floor` (for generated programs, whose outputs' scales are not known
//       in advance, and whose outputs may cancel to less than the rounding
//       noise of their terms);
//   coda_check_{close,scaled}_{f8e4m3fn,f8e5m2}(...)
//       the same for 8-bit floats, where an element may also be the code next
//       to the expected one: a value that differs from the expected value in
//       its last f32 bits can round to the neighbouring code, 6-12 % away;
//   coda_check_norm_{f32,bf16,f16}(memref<*xT> actual, memref<*xT> expected,
//                              f32 tolerance)
//       the same verdict on the relative L2 error ||actual - expected|| /
//       ||expected|| (for results rounded to low precision at different
//       points), NaN never passing.
//
//===----------------------------------------------------------------------===//

#include "mlir/ExecutionEngine/CRunnerUtils.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

uint64_t splitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

float randomValue(uint64_t seed, int64_t index) {
  uint64_t bits = splitMix64(seed * 0x100000001B3ull + uint64_t(index));
  // 24 random bits -> [0, 1) -> [-1, 1).
  return float(bits >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

float bf16ToFloat(uint16_t bits) {
  uint32_t word = uint32_t(bits) << 16;
  float value;
  std::memcpy(&value, &word, sizeof(value));
  return value;
}

uint16_t floatToBF16(float value) {
  uint32_t word;
  std::memcpy(&word, &value, sizeof(word));
  // Round to nearest even; the inputs here are never NaN.
  word += 0x7FFF + ((word >> 16) & 1);
  return uint16_t(word >> 16);
}

float f16ToFloat(uint16_t bits) {
  uint32_t sign = uint32_t(bits & 0x8000) << 16;
  uint32_t exponent = (bits >> 10) & 0x1F, mantissa = bits & 0x3FF;
  if (exponent == 0) {
    float magnitude = std::ldexp(float(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  uint32_t word = exponent == 31
                      ? sign | 0x7F800000u | mantissa << 13
                      : sign | (exponent + 112) << 23 | mantissa << 13;
  float value;
  std::memcpy(&value, &word, sizeof(value));
  return value;
}

uint16_t floatToF16(float value) {
  uint32_t word;
  std::memcpy(&word, &value, sizeof(word));
  uint32_t sign = (word >> 16) & 0x8000, magnitude = word & 0x7FFFFFFF;
  // The inputs here are never NaN and far below f16's largest value.
  if (magnitude < 0x38800000) {
    // Below 2^-14: a subnormal, round(|value| * 2^24) to nearest even.
    float scaled;
    std::memcpy(&scaled, &magnitude, sizeof(scaled));
    return uint16_t(sign | uint32_t(std::nearbyint(scaled * 16777216.0f)));
  }
  // Round to nearest even at bit 13, then rebias the exponent (127 -> 15).
  magnitude += 0xFFF + ((magnitude >> 13) & 1);
  return uint16_t(sign | (magnitude - 0x38000000u) >> 13);
}

/// An 8-bit float's value: `mantissaBits` of mantissa, exponent bias `bias`;
/// `finite` for e4m3fn, whose only non-finite codes are NaNs (all ones).
float fp8ToFloat(uint8_t bits, int mantissaBits, int bias, bool finite) {
  int exponentMask = (1 << (7 - mantissaBits)) - 1;
  int exponent = (bits >> mantissaBits) & exponentMask;
  int mantissa = bits & ((1 << mantissaBits) - 1);
  float sign = bits & 0x80 ? -1.0f : 1.0f;
  if (finite ? (bits & 0x7F) == 0x7F : exponent == exponentMask)
    return finite || mantissa ? NAN : sign * INFINITY;
  if (exponent == 0)
    return sign * std::ldexp(float(mantissa), 1 - bias - mantissaBits);
  return sign * std::ldexp(float((1 << mantissaBits) | mantissa),
                           exponent - bias - mantissaBits);
}

float f8e4m3fnToFloat(uint8_t bits) { return fp8ToFloat(bits, 3, 7, true); }
float f8e5m2ToFloat(uint8_t bits) { return fp8ToFloat(bits, 2, 15, false); }

/// A sign-magnitude code as an integer ordered like the values (both zeros
/// 0), so that neighbouring values differ by one.
int orderedCode(uint8_t bits) {
  return bits & 0x80 ? -int(bits & 0x7F) : int(bits & 0x7F);
}

template <typename T>
std::vector<int64_t> shapeOf(DynamicMemRefType<T> &memref) {
  return std::vector<int64_t>(memref.sizes, memref.sizes + memref.rank);
}

/// Visits every element of a strided memref in row-major order.
template <typename T, typename Fn>
void forEachElement(DynamicMemRefType<T> &memref, Fn &&fn) {
  int64_t count = 1;
  for (int64_t d = 0; d < memref.rank; ++d)
    count *= memref.sizes[d];
  std::vector<int64_t> index(memref.rank, 0);
  for (int64_t linear = 0; linear < count; ++linear) {
    int64_t offset = memref.offset;
    for (int64_t d = 0; d < memref.rank; ++d)
      offset += index[d] * memref.strides[d];
    fn(linear, memref.data[offset]);
    for (int64_t d = memref.rank - 1; d >= 0; --d) {
      if (++index[d] < memref.sizes[d])
        break;
      index[d] = 0;
    }
  }
}

/// With `neighbours` (8-bit codes), an element one code from the expected one
/// passes too.
template <typename T, typename ToFloat>
void checkClose(UnrankedMemRefType<T> *actualDesc,
                UnrankedMemRefType<T> *expectedDesc, float rtol, float atol,
                ToFloat toFloat, bool scaled = false, float floor = 0.0f,
                bool neighbours = false) {
  DynamicMemRefType<T> actual(*actualDesc), expected(*expectedDesc);
  if (shapeOf(actual) != shapeOf(expected)) {
    std::printf("coda-check FAILED: shapes differ (rank %" PRId64 " vs %" PRId64
                ")\n",
                actual.rank, expected.rank);
    std::fflush(stdout);
    std::exit(1);
  }
  std::vector<float> expectedValues;
  std::vector<T> expectedCodes;
  forEachElement(expected, [&](int64_t, T value) {
    expectedValues.push_back(toFloat(value));
    expectedCodes.push_back(value);
  });
  if (scaled) {
    double largest = 0.0;
    for (float value : expectedValues)
      if (std::isfinite(value))
        largest = std::max(largest, double(std::fabs(value)));
    atol = std::max(atol * float(largest), floor);
  }
  double maxAbs = 0.0, maxRel = 0.0;
  int64_t mismatches = 0;
  forEachElement(actual, [&](int64_t linear, T value) {
    double got = toFloat(value), want = expectedValues[linear];
    double err = std::fabs(got - want);
    // Infinities are overflow, never a match (inf - inf is NaN, which would
    // compare as within any tolerance).
    bool bad = !std::isfinite(got) || !std::isfinite(want) ||
               err > atol + rtol * std::fabs(want);
    if constexpr (sizeof(T) == 1)
      bad &= !(neighbours && std::isfinite(got) && std::isfinite(want) &&
               std::abs(orderedCode(value) -
                        orderedCode(expectedCodes[linear])) <= 1);
    if (std::isfinite(err)) {
      maxAbs = std::fmax(maxAbs, err);
      if (want != 0.0)
        maxRel = std::fmax(maxRel, err / std::fabs(want));
    }
    if (bad && mismatches++ < 5)
      std::printf("coda-check mismatch at linear index %" PRId64
                  ": got %.8g, expected %.8g\n",
                  linear, got, want);
  });
  if (mismatches) {
    std::printf("coda-check FAILED: %" PRId64 " of %zu elements differ "
                "(rtol %g, atol %g)\n",
                mismatches, expectedValues.size(), rtol, atol);
    std::fflush(stdout);
    std::exit(1);
  }
  std::printf("coda-check ok: %zu elements, max abs error %.3g, max rel "
              "error %.3g\n",
              expectedValues.size(), maxAbs, maxRel);
  std::fflush(stdout);
}

template <typename T>
void fillRandomIntegers(UnrankedMemRefType<T> *desc, int64_t seed, int64_t lo,
                        int64_t hi) {
  DynamicMemRefType<T> memref(*desc);
  uint64_t span = hi > lo ? uint64_t(hi - lo) : 1;
  forEachElement(memref, [&](int64_t linear, T &value) {
    value = T(lo + int64_t(splitMix64(uint64_t(seed) * 0x100000001B3ull +
                                      uint64_t(linear)) %
                           span));
  });
}

template <typename T, typename ToFloat>
void checkNorm(UnrankedMemRefType<T> *actualDesc,
               UnrankedMemRefType<T> *expectedDesc, float tolerance,
               ToFloat toFloat) {
  DynamicMemRefType<T> actual(*actualDesc), expected(*expectedDesc);
  if (shapeOf(actual) != shapeOf(expected)) {
    std::printf("coda-check FAILED: shapes differ\n");
    std::fflush(stdout);
    std::exit(1);
  }
  std::vector<double> want;
  forEachElement(expected,
                 [&](int64_t, T value) { want.push_back(toFloat(value)); });
  double diff = 0.0, norm = 0.0;
  bool sawNaN = false;
  forEachElement(actual, [&](int64_t linear, T value) {
    double got = toFloat(value);
    sawNaN |= !std::isfinite(got) || !std::isfinite(want[linear]);
    diff += (got - want[linear]) * (got - want[linear]);
    norm += want[linear] * want[linear];
  });
  double relative = norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
  if (sawNaN || !(relative <= tolerance)) {
    std::printf("coda-check FAILED: %zu elements, relative L2 error %.3g "
                "(tolerance %g)%s\n",
                want.size(), relative, tolerance,
                sawNaN ? ", NaN or infinity seen" : "");
    std::fflush(stdout);
    std::exit(1);
  }
  std::printf("coda-check ok: %zu elements, relative L2 error %.3g\n",
              want.size(), relative);
  std::fflush(stdout);
}

} // namespace

// The FP8 checks of one type: close and scaled, neighbouring codes passing.
#define CODA_FP8_CHECKS(NAME)                                                  \
  void _mlir_ciface_coda_check_close_##NAME(                                   \
      UnrankedMemRefType<uint8_t> *actual,                                     \
      UnrankedMemRefType<uint8_t> *expected, float rtol, float atol) {         \
    checkClose(actual, expected, rtol, atol, NAME##ToFloat, false, 0.0f,       \
               true);                                                          \
  }                                                                            \
  void _mlir_ciface_coda_check_scaled_##NAME(                                  \
      UnrankedMemRefType<uint8_t> *actual,                                     \
      UnrankedMemRefType<uint8_t> *expected, float rtol, float atol,           \
      float floor) {                                                           \
    checkClose(actual, expected, rtol, atol, NAME##ToFloat, true, floor,       \
               true);                                                          \
  }

extern "C" {

void _mlir_ciface_coda_fill_random_f32(UnrankedMemRefType<float> *desc,
                                       int64_t seed) {
  DynamicMemRefType<float> memref(*desc);
  forEachElement(memref, [&](int64_t linear, float &value) {
    value = randomValue(uint64_t(seed), linear);
  });
}

void _mlir_ciface_coda_fill_random_bf16(UnrankedMemRefType<uint16_t> *desc,
                                        int64_t seed) {
  DynamicMemRefType<uint16_t> memref(*desc);
  forEachElement(memref, [&](int64_t linear, uint16_t &value) {
    value = floatToBF16(randomValue(uint64_t(seed), linear));
  });
}

/// A random 8-bit float with `mantissaBits` mantissa bits and exponent bias
/// `bias`: a random sign and mantissa, an exponent for magnitudes in
/// [1/8, 8). These are exact encodings, so nothing rounds.
static uint8_t randomFp8(uint64_t seed, int64_t index, int mantissaBits,
                         int bias) {
  uint64_t bits = splitMix64(seed * 0x100000001B3ull + uint64_t(index));
  uint64_t sign = bits & 1, mantissa = (bits >> 1) & ((1u << mantissaBits) - 1);
  uint64_t exponent = bias - 3 + (bits >> 8) % 6;
  return uint8_t(sign << 7 | exponent << mantissaBits | mantissa);
}

void _mlir_ciface_coda_fill_random_f8e4m3fn(UnrankedMemRefType<uint8_t> *desc,
                                            int64_t seed) {
  DynamicMemRefType<uint8_t> memref(*desc);
  forEachElement(memref, [&](int64_t linear, uint8_t &value) {
    value = randomFp8(uint64_t(seed), linear, /*mantissaBits=*/3, /*bias=*/7);
  });
}

void _mlir_ciface_coda_fill_random_f8e5m2(UnrankedMemRefType<uint8_t> *desc,
                                          int64_t seed) {
  DynamicMemRefType<uint8_t> memref(*desc);
  forEachElement(memref, [&](int64_t linear, uint8_t &value) {
    value = randomFp8(uint64_t(seed), linear, /*mantissaBits=*/2, /*bias=*/15);
  });
}

void _mlir_ciface_coda_fill_random_i32(UnrankedMemRefType<int32_t> *desc,
                                       int64_t seed, int64_t lo, int64_t hi) {
  fillRandomIntegers(desc, seed, lo, hi);
}

void _mlir_ciface_coda_fill_random_i64(UnrankedMemRefType<int64_t> *desc,
                                       int64_t seed, int64_t lo, int64_t hi) {
  fillRandomIntegers(desc, seed, lo, hi);
}

void _mlir_ciface_coda_fill_random_f16(UnrankedMemRefType<uint16_t> *desc,
                                       int64_t seed) {
  DynamicMemRefType<uint16_t> memref(*desc);
  forEachElement(memref, [&](int64_t linear, uint16_t &value) {
    value = floatToF16(randomValue(uint64_t(seed), linear));
  });
}

void _mlir_ciface_coda_check_close_f32(UnrankedMemRefType<float> *actual,
                                       UnrankedMemRefType<float> *expected,
                                       float rtol, float atol) {
  checkClose(actual, expected, rtol, atol, [](float v) { return v; });
}

void _mlir_ciface_coda_check_close_bf16(UnrankedMemRefType<uint16_t> *actual,
                                        UnrankedMemRefType<uint16_t> *expected,
                                        float rtol, float atol) {
  checkClose(actual, expected, rtol, atol, bf16ToFloat);
}

void _mlir_ciface_coda_check_close_f16(UnrankedMemRefType<uint16_t> *actual,
                                       UnrankedMemRefType<uint16_t> *expected,
                                       float rtol, float atol) {
  checkClose(actual, expected, rtol, atol, f16ToFloat);
}

void _mlir_ciface_coda_check_scaled_f32(UnrankedMemRefType<float> *actual,
                                        UnrankedMemRefType<float> *expected,
                                        float rtol, float atol, float floor) {
  checkClose(
      actual, expected, rtol, atol, [](float v) { return v; }, true, floor);
}

void _mlir_ciface_coda_check_scaled_bf16(UnrankedMemRefType<uint16_t> *actual,
                                         UnrankedMemRefType<uint16_t> *expected,
                                         float rtol, float atol, float floor) {
  checkClose(actual, expected, rtol, atol, bf16ToFloat, true, floor);
}

void _mlir_ciface_coda_check_scaled_f16(UnrankedMemRefType<uint16_t> *actual,
                                        UnrankedMemRefType<uint16_t> *expected,
                                        float rtol, float atol, float floor) {
  checkClose(actual, expected, rtol, atol, f16ToFloat, true, floor);
}

void _mlir_ciface_coda_check_norm_f32(UnrankedMemRefType<float> *actual,
                                      UnrankedMemRefType<float> *expected,
                                      float tolerance) {
  checkNorm(actual, expected, tolerance, [](float v) { return v; });
}

void _mlir_ciface_coda_check_norm_bf16(UnrankedMemRefType<uint16_t> *actual,
                                       UnrankedMemRefType<uint16_t> *expected,
                                       float tolerance) {
  checkNorm(actual, expected, tolerance, bf16ToFloat);
}

void _mlir_ciface_coda_check_norm_f16(UnrankedMemRefType<uint16_t> *actual,
                                      UnrankedMemRefType<uint16_t> *expected,
                                      float tolerance) {
  checkNorm(actual, expected, tolerance, f16ToFloat);
}

CODA_FP8_CHECKS(f8e4m3fn)
CODA_FP8_CHECKS(f8e5m2)

} // extern "C"
