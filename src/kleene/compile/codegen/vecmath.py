"""Elementary functions for the CPU kernels' weight functions in plain arithmetic, so lane loops vectorize.

``#pragma omp simd`` loops that call libm's ``exp``/``log1p`` stay scalar (glibc declares its vector variants only
under ``-ffast-math``), which would cost the fused gates more than the separate torch passes they replace. These
cover exactly the arguments the gates need -- ``exp`` of a non-positive number and ``log1p`` of a number in
[0, 1] -- for float and double, within 2 ulp of libm, NaN in NaN out, and subnormal results kept.
"""

C_VECTOR_MATH = r"""
// exp(x) for x <= 0 (NaN in, NaN out; 0 below the subnormal range) in arithmetic only, so lane loops vectorize:
// x = n ln2 + r (|r| <= ln2/2; ln2 split so n ln2_hi is exact), e^r by its Taylor polynomial, 2^n as two
// exponent-field scales (the second may be subnormal).
static inline double kleene_exp_neg(double x) {
  const double xc = x < -746.0 ? -746.0 : x;
  const double shifter = 6755399441055744.0;  // 1.5 * 2^52: adding it rounds to an integer
  const double n = (xc * 1.4426950408889634 + shifter) - shifter;
  const double r = (xc - n * 6.93147180369123816490e-01) - n * 1.90821492927058770002e-10;
  double p = 1.0 / 6227020800.0;
  p = p * r + 1.0 / 479001600.0;
  p = p * r + 1.0 / 39916800.0;
  p = p * r + 1.0 / 3628800.0;
  p = p * r + 1.0 / 362880.0;
  p = p * r + 1.0 / 40320.0;
  p = p * r + 1.0 / 5040.0;
  p = p * r + 1.0 / 720.0;
  p = p * r + 1.0 / 120.0;
  p = p * r + 1.0 / 24.0;
  p = p * r + 1.0 / 6.0;
  p = p * r + 0.5;
  p = p * r + 1.0;
  p = p * r + 1.0;
  const int64_t k = static_cast<int64_t>(n == n ? n : 0.0);
  const int64_t k1 = k / 2, k2 = k - k1;
  const int64_t b1 = (k1 + 1023) << 52, b2 = (k2 + 1023) << 52;
  double s1, s2;
  std::memcpy(&s1, &b1, sizeof s1);
  std::memcpy(&s2, &b2, sizeof s2);
  return p * s1 * s2;
}
static inline float kleene_exp_neg(float x) {
  const float xc = x < -104.0f ? -104.0f : x;
  const float shifter = 12582912.0f;  // 1.5 * 2^23
  const float n = (xc * 1.44269504088896341f + shifter) - shifter;
  const float r = (xc - n * 0.693359375f) - n * -2.12194440e-4f;
  float p = 1.0f / 40320.0f;
  p = p * r + 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const int32_t k = static_cast<int32_t>(n == n ? n : 0.0f);
  const int32_t k1 = k / 2, k2 = k - k1;
  const int32_t b1 = (k1 + 127) << 23, b2 = (k2 + 127) << 23;
  float s1, s2;
  std::memcpy(&s1, &b1, sizeof s1);
  std::memcpy(&s2, &b2, sizeof s2);
  return p * s1 * s2;
}
// log(1 + e) for 0 <= e <= 1: 2 atanh(s) with s = e / (2 + e), or ln 2 + 2 atanh((e - 1) / (e + 3)) above
// sqrt 2 - 1, so |s| <= 0.172 and the series in s^2 converges to double precision in 12 terms
template <typename T> static inline T kleene_log1p_unit(T e) {
  const bool big = e > T(0.41421356237309503);
  const T s = big ? (e - T(1)) / (e + T(3)) : e / (e + T(2));
  const T s2 = s * s;
  T p = T(1.0 / 23);
  p = p * s2 + T(1.0 / 21);
  p = p * s2 + T(1.0 / 19);
  p = p * s2 + T(1.0 / 17);
  p = p * s2 + T(1.0 / 15);
  p = p * s2 + T(1.0 / 13);
  p = p * s2 + T(1.0 / 11);
  p = p * s2 + T(1.0 / 9);
  p = p * s2 + T(1.0 / 7);
  p = p * s2 + T(1.0 / 5);
  p = p * s2 + T(1.0 / 3);
  p = p * s2 + T(1);
  return (big ? T(0.69314718055994531) : T(0)) + T(2) * s * p;
}
"""
