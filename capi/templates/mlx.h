/* streamlet's MLX-C: everything. */
#ifndef MLX_ALL_H
#define MLX_ALL_H

#include "mlx/c/array.h"
#include "mlx/c/closure.h"
#include "mlx/c/device.h"
#include "mlx/c/error.h"
#include "mlx/c/fft.h"
#include "mlx/c/half.h"
#include "mlx/c/io.h"
#include "mlx/c/linalg.h"
#include "mlx/c/map.h"
#include "mlx/c/memory.h"
#include "mlx/c/ops.h"
#include "mlx/c/optional.h"
#include "mlx/c/random.h"
#include "mlx/c/stream.h"
#include "mlx/c/string.h"
#include "mlx/c/transforms.h"
#include "mlx/c/vector.h"
#include "mlx/c/version.h"

#endif
