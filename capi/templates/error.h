/* streamlet's MLX-C: error handling. */
#ifndef MLX_ERROR_H
#define MLX_ERROR_H

#ifdef __cplusplus
extern "C" {
#endif

/** Called with the message of every failed call (which then returns non-zero). */
typedef void (*mlx_error_handler_func)(const char* msg, void* data);

/**
 * Replace the error handler; NULL restores the default. `dtor(data)` runs when
 * the handler is replaced again. The default handler prints "MLX error: msg"
 * to stderr and returns; it exits the process (as MLX-C's does) only when the
 * environment variable MLX_C_EXIT_ON_ERROR is set to a non-empty value.
 */
void mlx_set_error_handler(
    mlx_error_handler_func handler,
    void* data,
    void (*dtor)(void*));

/** Report a printf-style message (with " at file:line") through the handler. */
void _mlx_error(const char* file, const int line, const char* fmt, ...);

#define mlx_error(...) _mlx_error(__FILE__, __LINE__, __VA_ARGS__)

#ifdef __cplusplus
}
#endif

#endif
