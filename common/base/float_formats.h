// Bit-exact conversions between IEEE binary16, bfloat16, fp8 (e4m3fn, e5m2) and float.
// Narrowing conversions round to nearest, ties to even, exactly as numpy and torch do.
#ifndef PARITY_COMMON_FLOAT_FORMATS_H_
#define PARITY_COMMON_FLOAT_FORMATS_H_

#include <cstdint>
#include <cstring>

namespace parity {

inline uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float BitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return BitsFloat(sign | 0x7f800000u | (mant << 13));  // inf / nan
  if (exp == 0) {
    if (mant == 0) return BitsFloat(sign);
    // Subnormal: value = mant * 2^-24.
    float v = static_cast<float>(mant) * 5.9604644775390625e-08f;
    return sign ? -v : v;
  }
  return BitsFloat(sign | ((exp + 112u) << 23) | (mant << 13));
}

inline uint16_t FloatToHalf(float f) {
  uint32_t x = FloatBits(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  x &= 0x7fffffffu;
  if (x >= 0x7f800000u) {  // inf or nan
    return static_cast<uint16_t>(sign | 0x7c00u | (x > 0x7f800000u ? 0x200u : 0u));
  }
  if (x >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (x < 0x38800000u) {  // below the smallest normal half (2^-14): subnormal or zero
    // value * 2^24 rounded to nearest even gives the subnormal mantissa.
    float a = BitsFloat(x);
    float scaled = a * 16777216.0f;  // exact (power of two scaling)
    // Round to nearest even integer.
    uint32_t i = static_cast<uint32_t>(scaled);
    float frac = scaled - static_cast<float>(i);
    if (frac > 0.5f || (frac == 0.5f && (i & 1u))) ++i;
    return static_cast<uint16_t>(sign | i);
  }
  // Normal: rebias exponent and round mantissa from 23 to 10 bits.
  uint32_t mant_round = x + 0xfffu + ((x >> 13) & 1u);
  uint32_t h = (mant_round >> 13) - (112u << 10);
  return static_cast<uint16_t>(sign | h);
}

// Rounds a float to the nearest binary16 value (the result of one half-precision operation
// evaluated in float32, which is correctly rounded for + - * /).
inline float RoundToHalf(float f) { return HalfToFloat(FloatToHalf(f)); }

inline float BFloat16ToFloat(uint16_t b) { return BitsFloat(static_cast<uint32_t>(b) << 16); }

inline uint16_t FloatToBFloat16(float f) {
  uint32_t x = FloatBits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // nan
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}
inline float RoundToBFloat16(float f) { return BFloat16ToFloat(FloatToBFloat16(f)); }

// fp8 e4m3fn: 1 sign, 4 exponent (bias 7), 3 mantissa; no infinities, 0x7f/0xff are NaN.
inline float Float8E4M3FNToFloat(uint8_t v) {
  const bool neg = v & 0x80u;
  const uint32_t exp = (v >> 3) & 0xfu;
  const uint32_t mant = v & 0x7u;
  float r;
  if (exp == 0xf && mant == 0x7) {
    r = BitsFloat(0x7fc00000u);
  } else if (exp == 0) {
    r = static_cast<float>(mant) * 0.001953125f;  // mant * 2^-9
  } else {
    r = BitsFloat(((exp + 120u) << 23) | (mant << 20));
  }
  return neg ? -r : r;
}

// fp8 e5m2: the top byte of a binary16.
inline float Float8E5M2ToFloat(uint8_t v) { return HalfToFloat(static_cast<uint16_t>(v) << 8); }

// Widens n fp8 values (e5m2 when `e5m2`, else e4m3fn) to float32, exactly, through a table.
inline void Float8ToFloats(bool e5m2, const char* in, int64_t n, float* out) {
  struct Tables {
    float t[2][256];
    Tables() {
      for (int i = 0; i < 256; ++i) {
        t[0][i] = Float8E4M3FNToFloat(static_cast<uint8_t>(i));
        t[1][i] = Float8E5M2ToFloat(static_cast<uint8_t>(i));
      }
    }
  };
  static const Tables tables;
  const float* t = tables.t[e5m2 ? 1 : 0];
  for (int64_t i = 0; i < n; ++i) out[i] = t[static_cast<uint8_t>(in[i])];
}

}  // namespace parity

#endif  // PARITY_COMMON_FLOAT_FORMATS_H_
