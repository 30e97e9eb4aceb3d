"""float16 -> float32: the conversion (exact for every value, in software or with the F16C
instruction where the CPU has it) and the row adds that scoring a float16 table uses.
Declarations and inline C only: frozen.pyx compiles it in and chooses the conversion at import."""
from libc.stdint cimport uint16_t


cdef extern from *:
    """
    #include <string.h>
    #include <stdint.h>
    /* IEEE 754 binary16 -> binary32, exact for every one of the 65,536 values (NaN payloads
       kept as they are, as numpy keeps them), and branchless: the subnormal case renormalizes
       with one exact float subtraction, then a select picks it. */
    static inline float structperc_half_to_float(uint16_t h) {
        uint32_t o = ((uint32_t)h & 0x7fffu) << 13;
        uint32_t exp = o & 0x0f800000u;
        uint32_t bits, sub_bits;
        float sub, out;
        o += 0x38000000u;                                        /* rebias: (127 - 15) << 23 */
        bits = o + (exp == 0x0f800000u ? 0x38000000u : 0u);      /* inf and NaN: exponent 255 */
        sub_bits = o + 0x00800000u;                              /* 2^-14 * (1 + m / 1024) */
        memcpy(&sub, &sub_bits, sizeof(sub));
        sub -= 6.103515625e-05f;                                 /* - 2^-14 = m * 2^-24, exact */
        memcpy(&sub_bits, &sub, sizeof(sub));
        bits = (exp == 0 ? sub_bits : bits) | (((uint32_t)h & 0x8000u) << 16);
        memcpy(&out, &bits, sizeof(out));
        return out;
    }

    /* out[cols[e]] += half_to_float(h[e]) for e in [lo, hi): the float16 row add. */
    static void structperc_add_f16_soft(const uint16_t* h, const void* cols, int wide,
                                        size_t lo, size_t hi, float* out) {
        size_t e;
        if (wide) {
            const uint16_t* c = (const uint16_t*)cols;
            for (e = lo; e < hi; e++) out[c[e]] += structperc_half_to_float(h[e]);
        } else {
            const uint8_t* c = (const uint8_t*)cols;
            for (e = lo; e < hi; e++) out[c[e]] += structperc_half_to_float(h[e]);
        }
    }

    #if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
    #include <immintrin.h>
    /* The same with the F16C instruction, for CPUs that have it (chosen at import, so a wheel
       still runs on CPUs without it). VCVTPH2PS quiets signalling NaNs, which the software
       conversion (and numpy) keep: those inputs take the software path, so the two agree on
       all 65,536 values. */
    __attribute__((target("f16c")))
    static float structperc_half_to_float_f16c(uint16_t h) {
        if (__builtin_expect((h & 0x7fffu) > 0x7c00u, 0)) return structperc_half_to_float(h);
        return _cvtsh_ss(h);
    }

    /* Sparse entries added with F16C. No NaN check: VCVTPH2PS quiets a signalling NaN, but
       the add quiets it anyway (keeping the payload), so the sums are the software path's. */
    __attribute__((target("f16c")))
    static void structperc_add_f16_f16c(const uint16_t* h, const void* cols, int wide,
                                        size_t lo, size_t hi, float* out) {
        size_t e;
        if (wide) {
            const uint16_t* c = (const uint16_t*)cols;
            for (e = lo; e < hi; e++) out[c[e]] += _cvtsh_ss(h[e]);
        } else {
            const uint8_t* c = (const uint8_t*)cols;
            for (e = lo; e < hi; e++) out[c[e]] += _cvtsh_ss(h[e]);
        }
    }

    /* Classes c .. c + 8w - 1 of a run: w sums of eight held in registers (w is a constant
       where it is called, so the loops unroll and the array is registers). */
    __attribute__((target("f16c"), always_inline))
    static inline void structperc_add_rows_block(const uint16_t* const* rows, int k, float* out,
                                                 int c, const int w) {
        __m256 a[8];
        int i, j;
        #pragma GCC unroll 8
        for (i = 0; i < w; i++) a[i] = _mm256_loadu_ps(out + c + 8 * i);
        for (j = 0; j < k; j++) {
            const uint16_t* r = rows[j] + c;
            #pragma GCC unroll 8
            for (i = 0; i < w; i++)
                a[i] = _mm256_add_ps(a[i], _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(r + 8 * i))));
        }
        #pragma GCC unroll 8
        for (i = 0; i < w; i++) _mm256_storeu_ps(out + c + 8 * i, a[i]);
    }

    /* out[c] += rows[0][c], then rows[1][c], ... (each add rounded as a row-by-row add rounds
       it) for full float16 rows, with the sums of up to 64 classes held in registers for the
       whole run of rows: one load and store of out per class for the run, and one pointer
       load per row and 64 classes. No NaN check: VCVTPH2PS quiets a signalling NaN, but the
       add quiets it anyway (keeping the payload), so the sums are those of every other path. */
    __attribute__((target("f16c")))
    static void structperc_add_full_rows_f16c(const uint16_t* const* rows, int k, float* out, int n) {
        int c = 0, j;
        for (; c + 64 <= n; c += 64)
            structperc_add_rows_block(rows, k, out, c, 8);
        for (; c + 32 <= n; c += 32)
            structperc_add_rows_block(rows, k, out, c, 4);
        for (; c + 8 <= n; c += 8)
            structperc_add_rows_block(rows, k, out, c, 1);
        if (c + 4 <= n) {
            __m128 a0 = _mm_loadu_ps(out + c);
            for (j = 0; j < k; j++)
                a0 = _mm_add_ps(a0, _mm_cvtph_ps(_mm_loadl_epi64((const __m128i*)(rows[j] + c))));
            _mm_storeu_ps(out + c, a0);
            c += 4;
        }
        for (; c < n; c++) {
            float a = out[c];
            for (j = 0; j < k; j++) a += _cvtsh_ss(rows[j][c]);
            out[c] = a;
        }
    }

    /* out[c] += half_to_float(h[c]) for a full row (every class stored, in class order): the
       run kernel with one row. */
    __attribute__((target("f16c")))
    static void structperc_add_full_f16_f16c(const uint16_t* h, float* out, int n) {
        structperc_add_full_rows_f16c(&h, 1, out, n);
    }

    static int structperc_cpu_has_f16c(void) {
        __builtin_cpu_init();
        return __builtin_cpu_supports("f16c") != 0;
    }
    #else
    static float structperc_half_to_float_f16c(uint16_t h) { return structperc_half_to_float(h); }
    static void structperc_add_f16_f16c(const uint16_t* h, const void* cols, int wide,
                                        size_t lo, size_t hi, float* out) {
        structperc_add_f16_soft(h, cols, wide, lo, hi, out);
    }
    static void structperc_add_full_f16_f16c(const uint16_t* h, float* out, int n) {
        int c;
        for (c = 0; c < n; c++) out[c] += structperc_half_to_float(h[c]);
    }
    static int structperc_cpu_has_f16c(void) { return 0; }
    static void structperc_add_full_rows_f16c(const uint16_t* const* rows, int k, float* out, int n) {
        int j;
        for (j = 0; j < k; j++) structperc_add_full_f16_f16c(rows[j], out, n);
    }
    #endif

    static void structperc_add_full_f16_soft(const uint16_t* h, float* out, int n) {
        int c;
        for (c = 0; c < n; c++) out[c] += structperc_half_to_float(h[c]);
    }

    /* out[c] += w[c] for a dense row (vectorized by the compiler). */
    static void structperc_add_dense(const float* w, float* out, int n) {
        int c;
        for (c = 0; c < n; c++) out[c] += w[c];
    }
    """
    float half_to_float_soft "structperc_half_to_float"(uint16_t h) noexcept nogil
    float half_to_float_f16c "structperc_half_to_float_f16c"(uint16_t h) noexcept nogil
    void add_f16_soft "structperc_add_f16_soft"(const uint16_t* h, const void* cols, int wide,
                                                size_t lo, size_t hi, float* out) noexcept nogil
    void add_f16_f16c "structperc_add_f16_f16c"(const uint16_t* h, const void* cols, int wide,
                                                size_t lo, size_t hi, float* out) noexcept nogil
    void add_full_rows_f16c "structperc_add_full_rows_f16c"(const uint16_t* const* rows, int k, float* out,
                                                            int n) noexcept nogil
    int cpu_has_f16c "structperc_cpu_has_f16c"() noexcept nogil
    void add_dense "structperc_add_dense"(const float* w, float* out, int n) noexcept nogil
    void add_full_f16_f16c "structperc_add_full_f16_f16c"(const uint16_t* h, float* out, int n) noexcept nogil
    void add_full_f16_soft "structperc_add_full_f16_soft"(const uint16_t* h, float* out, int n) noexcept nogil
