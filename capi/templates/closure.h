/* streamlet's MLX-C: closures, the functions that transforms take and give. */
#ifndef MLX_CLOSURE_H
#define MLX_CLOSURE_H

#include "mlx/c/array.h"
#include "mlx/c/map.h"
#include "mlx/c/optional.h"
#include "mlx/c/stream.h"
#include "mlx/c/types.h"
#include "mlx/c/vector.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * A closure wraps a C function of arrays (or, from mlx_value_and_grad, a
 * transformed one). The C function gets an empty result vector to set and
 * returns 0 on success. A payload's dtor runs when the last reference to the
 * closure goes. _mlx_closure_new_c and _mlx_closure_value_and_grad_new_c are
 * the library's own (kind 0: func, 1: func_payload, 2: unary, 3 and 4: the
 * value_and_grad forms).
 */
mlx_closure mlx_closure_new_func(int (*fun)(mlx_vector_array*, const mlx_vector_array));
mlx_closure mlx_closure_new_func_payload(
    int (*fun)(mlx_vector_array*, const mlx_vector_array, void*),
    void* payload,
    void (*dtor)(void*));
mlx_closure mlx_closure_new_unary(int (*fun)(mlx_array*, const mlx_array));
mlx_closure_value_and_grad mlx_closure_value_and_grad_new_func(
    int (*fun)(mlx_vector_array*, mlx_vector_array*, const mlx_vector_array));
mlx_closure_value_and_grad mlx_closure_value_and_grad_new_func_payload(
    int (*fun)(mlx_vector_array*, mlx_vector_array*, const mlx_vector_array, void*),
    void* payload,
    void (*dtor)(void*));
@DECLS@
#ifdef __cplusplus
}
#endif

#endif
