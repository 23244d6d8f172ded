/* The hand-written C of libstreamlet_c: starting Python on the first call, the
 * error handler, and the few calls that need no Python. The generated wrappers
 * follow this file in the library's source. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "mlx/c/mlx.h"

#define MLX_C_EXPORT __attribute__((visibility("default")))

/* Start the interpreter of the Python that built the library (its venv, so
 * streamlet imports), unless this process already runs Python. STREAMLET_C_PYTHON
 * names another interpreter. cffi then imports the glue and releases the GIL
 * between calls. */
static pthread_once_t sl_once = PTHREAD_ONCE_INIT;

static void sl_start(void) {
  if (Py_IsInitialized()) {
    return;
  }
  const char* exe = getenv("STREAMLET_C_PYTHON");
  if (exe == NULL || *exe == '\0') {
    exe = SL_PYTHON;
  }
  PyConfig config;
  PyConfig_InitPythonConfig(&config);
  config.install_signal_handlers = 0;
  config.parse_argv = 0;
  PyStatus status = PyConfig_SetBytesString(&config, &config.program_name, exe);
  if (!PyStatus_Exception(status)) {
    status = PyConfig_SetBytesString(&config, &config.executable, exe);
  }
  if (!PyStatus_Exception(status)) {
    status = Py_InitializeFromConfig(&config);
  }
  PyConfig_Clear(&config);
  if (PyStatus_Exception(status)) {
    fprintf(stderr, "libstreamlet_c: cannot start Python %s: %s\n", exe,
            status.err_msg ? status.err_msg : "unknown error");
    return;
  }
  PyEval_SaveThread();
}

#define SL_BOOT() pthread_once(&sl_once, sl_start)

/* The error handler: global, as in MLX-C. */
static void sl_default_handler(const char* msg, void* data) {
  (void)data;
  fprintf(stderr, "MLX error: %s\n", msg);
  const char* quit = getenv("MLX_C_EXIT_ON_ERROR");
  if (quit != NULL && *quit != '\0') {
    exit(-1);
  }
}

static pthread_mutex_t sl_handler_lock = PTHREAD_MUTEX_INITIALIZER;
static mlx_error_handler_func sl_handler = sl_default_handler;
static void* sl_handler_data = NULL;
static void (*sl_handler_dtor)(void*) = NULL;

MLX_C_EXPORT void mlx_set_error_handler(
    mlx_error_handler_func handler,
    void* data,
    void (*dtor)(void*)) {
  pthread_mutex_lock(&sl_handler_lock);
  void* old_data = sl_handler_data;
  void (*old_dtor)(void*) = sl_handler_dtor;
  sl_handler = handler ? handler : sl_default_handler;
  sl_handler_data = data;
  sl_handler_dtor = dtor;
  pthread_mutex_unlock(&sl_handler_lock);
  if (old_dtor) {
    old_dtor(old_data);
  }
}

/* Called by the Python glue (without the GIL) with the message of a failed call. */
static void _sl_report(const char* msg) {
  pthread_mutex_lock(&sl_handler_lock);
  mlx_error_handler_func handler = sl_handler;
  void* data = sl_handler_data;
  pthread_mutex_unlock(&sl_handler_lock);
  handler(msg, data);
}

MLX_C_EXPORT void _mlx_error(const char* file, const int line, const char* fmt, ...) {
  va_list args, again;
  va_start(args, fmt);
  va_copy(again, args);
  int n = vsnprintf(NULL, 0, fmt, args);
  va_end(args);
  int m = snprintf(NULL, 0, " at %s:%d", file, line);
  char* msg = malloc((size_t)(n > 0 ? n : 0) + (size_t)m + 1);
  if (msg == NULL) {
    va_end(again);
    _sl_report(fmt);
    return;
  }
  vsnprintf(msg, (size_t)n + 1, fmt, again);
  va_end(again);
  snprintf(msg + n, (size_t)m + 1, " at %s:%d", file, line);
  _sl_report(msg);
  free(msg);
}

MLX_C_EXPORT size_t mlx_dtype_size(mlx_dtype dtype) {
  static const size_t sizes[] = {1, 1, 2, 4, 8, 1, 2, 4, 8, 2, 4, 8, 2, 8};
  if ((unsigned)dtype >= sizeof(sizes) / sizeof(sizes[0])) {
    _sl_report("[mlx_dtype_size] Invalid mlx_dtype.");
    return 0;
  }
  return sizes[dtype];
}

/* streamlet copies the data, so the caller's buffer is released at once. */
MLX_C_EXPORT mlx_array mlx_array_new_data_managed_payload(
    void* data,
    const int* shape,
    int dim,
    mlx_dtype dtype,
    void* payload,
    void (*dtor)(void*)) {
  mlx_array arr = mlx_array_new_data(data, shape, dim, dtype);
  if (dtor) {
    dtor(payload);
  }
  return arr;
}

MLX_C_EXPORT mlx_array mlx_array_new_data_managed(
    void* data,
    const int* shape,
    int dim,
    mlx_dtype dtype,
    void (*dtor)(void*)) {
  return mlx_array_new_data_managed_payload(data, shape, dim, dtype, data, dtor);
}
