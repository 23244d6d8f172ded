/* streamlet's MLX-C: maps from strings to arrays and to strings. */
#ifndef MLX_MAP_H
#define MLX_MAP_H

#include "mlx/c/array.h"
#include "mlx/c/string.h"
#include "mlx/c/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/** get returns 2 when the key is absent; iterator_next returns 2 at the end. */
@DECLS@
#ifdef __cplusplus
}
#endif

#endif
