/* streamlet's MLX-C: evaluation and function transforms. */
#ifndef MLX_TRANSFORMS_H
#define MLX_TRANSFORMS_H

#include "mlx/c/array.h"
#include "mlx/c/closure.h"
#include "mlx/c/vector.h"

#ifdef __cplusplus
extern "C" {
#endif

@DECLS@
#ifdef __cplusplus
}
#endif

#endif
