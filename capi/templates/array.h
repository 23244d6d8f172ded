/* streamlet's MLX-C: arrays. */
#ifndef MLX_ARRAY_H
#define MLX_ARRAY_H

#include <float.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <complex.h>
typedef float _Complex mlx_complex64_t;

#include "mlx/c/half.h"
#include "mlx/c/string.h"
#include "mlx/c/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/** An empty array handle (its ctx is NULL), as mlx_array_new() gives. */
#if defined(__GNUC__)
__attribute__((unused))
#endif
static mlx_array mlx_array_empty;

/** Element types, in MLX-C's order. */
typedef enum mlx_dtype_ {
  MLX_BOOL,
  MLX_UINT8,
  MLX_UINT16,
  MLX_UINT32,
  MLX_UINT64,
  MLX_INT8,
  MLX_INT16,
  MLX_INT32,
  MLX_INT64,
  MLX_FLOAT16,
  MLX_FLOAT32,
  MLX_FLOAT64,
  MLX_BFLOAT16,
  MLX_COMPLEX64,
} mlx_dtype;

/** Size in bytes of one element of `dtype`. */
size_t mlx_dtype_size(mlx_dtype dtype);

/**
 * Arrays are lazy: the data and item accessors evaluate the array first if
 * needed. An accessor whose type differs from the array's dtype fails through
 * the error handler (MLX-C reinterprets the bytes). Data pointers stay valid
 * until the handle is freed or set to another array.
 */
@DECLS@
/**
 * An array over `data` that the library owns from now on: streamlet copies the
 * data and calls `dtor(data)` (or `dtor(payload)`) before returning.
 */
mlx_array mlx_array_new_data_managed(
    void* data,
    const int* shape,
    int dim,
    mlx_dtype dtype,
    void (*dtor)(void*));
mlx_array mlx_array_new_data_managed_payload(
    void* data,
    const int* shape,
    int dim,
    mlx_dtype dtype,
    void* payload,
    void (*dtor)(void*));

#ifdef __cplusplus
}
#endif

#endif
