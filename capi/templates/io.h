/* streamlet's MLX-C: loading and saving (.npy and .safetensors files). */
#ifndef MLX_IO_H
#define MLX_IO_H

#include "mlx/c/array.h"
#include "mlx/c/map.h"
#include "mlx/c/stream.h"
#include "mlx/c/string.h"

#ifdef __cplusplus
extern "C" {
#endif

@DECLS@
#ifdef __cplusplus
}
#endif

#endif
