/* streamlet's MLX-C: strings owned by the library. */
#ifndef MLX_STRING_H
#define MLX_STRING_H

#include "mlx/c/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/** An owned string: mlx_string_data gives its characters while the handle lives. */
@DECLS@
#ifdef __cplusplus
}
#endif

#endif
