/* streamlet's MLX-C: vectors of arrays, ints, strings and streams. */
#ifndef MLX_VECTOR_H
#define MLX_VECTOR_H

#include <stddef.h>

#include "mlx/c/array.h"
#include "mlx/c/string.h"
#include "mlx/c/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Vectors hold values: set and the *_data calls copy; get gives a new reference. */
@DECLS@
#ifdef __cplusplus
}
#endif

#endif
