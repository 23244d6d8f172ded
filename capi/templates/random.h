/* streamlet's MLX-C: random operations; each takes the stream it runs on. */
#ifndef MLX_RANDOM_H
#define MLX_RANDOM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mlx/c/array.h"
#include "mlx/c/map.h"
#include "mlx/c/optional.h"
#include "mlx/c/stream.h"
#include "mlx/c/string.h"
#include "mlx/c/vector.h"

#ifdef __cplusplus
extern "C" {
#endif

@DECLS@
#ifdef __cplusplus
}
#endif

#endif
