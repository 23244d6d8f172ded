/* streamlet's MLX-C: devices. */
#ifndef MLX_DEVICE_H
#define MLX_DEVICE_H

#include <stdbool.h>
#include <stddef.h>

#include "mlx/c/string.h"
#include "mlx/c/types.h"
#include "mlx/c/vector.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Device type. */
typedef enum mlx_device_type_ { MLX_CPU, MLX_GPU } mlx_device_type;

/**
 * mlx_device_info holds key-value pairs from device_info(): at least
 * `device_name` and `architecture` (strings) and memory sizes (size_t).
 * The get_string/get_size calls return 2 when the key is absent or of the
 * other kind.
 */
@DECLS@
#ifdef __cplusplus
}
#endif

#endif
