/* streamlet's MLX-C: memory accounting. */
#ifndef MLX_MEMORY_H
#define MLX_MEMORY_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

@DECLS@
#ifdef __cplusplus
}
#endif

#endif
