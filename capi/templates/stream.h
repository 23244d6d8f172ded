/* streamlet's MLX-C: streams (DESIGN.md section 2). */
#ifndef MLX_STREAM_H
#define MLX_STREAM_H

#include <stdbool.h>
#include <stddef.h>

#include "mlx/c/device.h"
#include "mlx/c/string.h"
#include "mlx/c/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * mlx_stream_new_device makes a thread-affine stream: evaluating on it from
 * another thread fails ("There is no Stream(cpu, 3) in current thread.").
 * mlx_stream_new_thread_unsafe makes one usable from any thread; the library
 * serializes nothing between threads on it. An mlx_stream_thread_local names
 * a distinct stream in every thread (mlx_stream_from_thread_local gives this
 * thread's). Default streams are per thread. mlx_clear_streams destroys the
 * streams the calling thread made.
 */
@DECLS@
#ifdef __cplusplus
}
#endif

#endif
