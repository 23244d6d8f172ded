/* streamlet's MLX-C: version. */
#ifndef MLX_VERSION_H
#define MLX_VERSION_H

#include "mlx/c/string.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The version of the MLX API streamlet follows (MLX's version string). */
@DECLS@
#ifdef __cplusplus
}
#endif

#endif
