/* streamlet's MLX-C: every handle type, in one place so headers include in any order. */
#ifndef MLX_TYPES_H
#define MLX_TYPES_H

#ifdef __cplusplus
extern "C" {
#endif

@TYPES@
#ifdef __cplusplus
}
#endif

#endif
