/* Closures over C functions: the constructors that take function pointers, and
 * the trampoline that the Python side calls (without the GIL) to run one. */

typedef int (*sl_func)(mlx_vector_array*, const mlx_vector_array);
typedef int (*sl_func_payload)(mlx_vector_array*, const mlx_vector_array, void*);
typedef int (*sl_unary)(mlx_array*, const mlx_array);
typedef int (*sl_vag)(mlx_vector_array*, mlx_vector_array*, const mlx_vector_array);
typedef int (*sl_vag_payload)(
    mlx_vector_array*, mlx_vector_array*, const mlx_vector_array, void*);

/* Run closure `fun` of `kind` on the handle `in`; out[0] (and out[1]) are the
 * result handles' keys, updated with what the function set. */
static int _sl_apply_c(int kind, void* fun, void* payload, uintptr_t* out, uintptr_t in) {
  int rc = 1;
  if (kind == 2) {
    mlx_array res = {(void*)out[0]}, arg = {(void*)in};
    rc = ((sl_unary)fun)(&res, arg);
    out[0] = (uintptr_t)res.ctx;
    return rc;
  }
  mlx_vector_array r0 = {(void*)out[0]}, r1 = {(void*)out[1]}, arg = {(void*)in};
  switch (kind) {
    case 0: rc = ((sl_func)fun)(&r0, arg); break;
    case 1: rc = ((sl_func_payload)fun)(&r0, arg, payload); break;
    case 3: rc = ((sl_vag)fun)(&r0, &r1, arg); break;
    case 4: rc = ((sl_vag_payload)fun)(&r0, &r1, arg, payload); break;
  }
  out[0] = (uintptr_t)r0.ctx;
  out[1] = (uintptr_t)r1.ctx;
  return rc;
}

static void _sl_call_dtor(void* dtor, void* payload) {
  ((void (*)(void*))dtor)(payload);
}

MLX_C_EXPORT mlx_closure mlx_closure_new_func(sl_func fun) {
  return _mlx_closure_new_c(0, (void*)fun, NULL, NULL);
}

MLX_C_EXPORT mlx_closure mlx_closure_new_func_payload(
    sl_func_payload fun,
    void* payload,
    void (*dtor)(void*)) {
  return _mlx_closure_new_c(1, (void*)fun, payload, (void*)dtor);
}

MLX_C_EXPORT mlx_closure mlx_closure_new_unary(sl_unary fun) {
  return _mlx_closure_new_c(2, (void*)fun, NULL, NULL);
}

MLX_C_EXPORT mlx_closure_value_and_grad mlx_closure_value_and_grad_new_func(sl_vag fun) {
  return _mlx_closure_value_and_grad_new_c(3, (void*)fun, NULL, NULL);
}

MLX_C_EXPORT mlx_closure_value_and_grad mlx_closure_value_and_grad_new_func_payload(
    sl_vag_payload fun,
    void* payload,
    void (*dtor)(void*)) {
  return _mlx_closure_value_and_grad_new_c(4, (void*)fun, payload, (void*)dtor);
}
