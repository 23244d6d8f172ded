/* streamlet's MLX-C: fft operations; each takes the stream it runs on. */
#ifndef MLX_FFT_H
#define MLX_FFT_H

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

/** Normalization of a transform. */
typedef enum mlx_fft_norm_ {
  MLX_FFT_NORM_BACKWARD,
  MLX_FFT_NORM_ORTHO,
  MLX_FFT_NORM_FORWARD
} mlx_fft_norm;

@DECLS@
#ifdef __cplusplus
}
#endif

#endif
