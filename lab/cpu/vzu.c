/* cblas_sgemm that runs OpenBLAS's and then clears the upper halves of the vector registers on
   the calling thread (vzeroupper), so later non-VEX SSE code on that thread pays no penalty. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
typedef void (*sgemm_t)(int, int, int, int, int, int, float, const float *, int, const float *, int,
                        float, float *, int);
static sgemm_t real;
void cblas_sgemm(int order, int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
                 const float *b, int ldb, float beta, float *c, int ldc) {
  if (!real) real = (sgemm_t)dlsym(dlopen(getenv("VZU_BLAS"), RTLD_NOW | RTLD_NOLOAD), "cblas_sgemm");
  real(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  __asm__ volatile("vzeroupper");
}
