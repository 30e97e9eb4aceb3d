cdef double eisner_decode(const double* scores, int n1, int* heads, void* work) noexcept nogil
cdef size_t eisner_work_bytes(int n1) noexcept nogil
cdef double eisner2_decode(const double* A, const double* B, const double* F, int n1, int* heads,
                           void* work) noexcept nogil
cdef size_t eisner2_work_bytes(int n1) noexcept nogil
