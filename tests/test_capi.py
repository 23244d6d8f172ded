"""The C API (include/mlx/c, libstreamlet_c): small C programs compiled and run.

The library is built once per test session (per xdist worker) into a temporary
folder; each test compiles a C program against the headers and the library
with the system C compiler, runs it, and checks what it prints against values
computed here. The tests skip only where there is no C compiler or no cffi (the `capi`
extra, which `dev` includes: CI has it).
"""
import os
import pathlib
import re
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "capi"))
import gen  # noqa: E402

CC = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")

# a handler that records every message, and CHECK for calls that must succeed
PRELUDE = r"""
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mlx/c/mlx.h"

#define UNUSED __attribute__((unused))
static int n_errors = 0;
static char last_error[1024];
UNUSED static void record(const char* msg, void* data) {
  (void)data;
  n_errors++;
  snprintf(last_error, sizeof last_error, "%s", msg);
}
#define CHECK(call) do { if ((call) != 0) { \
  printf("FAILED %s: %s\n", #call, last_error); exit(3); } } while (0)
UNUSED static mlx_stream cpu_stream(void) {
  mlx_device d = mlx_device_new_type(MLX_CPU, 0);
  mlx_stream s = mlx_stream_new_device(d);
  mlx_device_free(d);
  return s;
}
UNUSED static void print_array(const char* name, mlx_array a) {
  mlx_array f = mlx_array_new();
  mlx_stream s = mlx_default_cpu_stream_new();
  CHECK(mlx_astype(&f, a, MLX_FLOAT64, s));
  CHECK(mlx_array_eval(f));
  const double* p = mlx_array_data_float64(f);
  printf("%s", name);
  for (size_t i = 0; i < mlx_array_size(f); i++) printf(" %.17g", p[i]);
  printf("\n");
  mlx_array_free(f);
  mlx_stream_free(s);
}
"""


class CApi:
    """Compiles and runs C programs against a freshly built libstreamlet_c."""

    def __init__(self, libdir):
        self.libdir = libdir
        self.n = 0

    def run(self, body, env=None, timeout=120):
        self.n += 1
        src = self.libdir / f"prog{self.n}.c"
        exe = self.libdir / f"prog{self.n}"
        src.write_text(PRELUDE + textwrap.dedent(body))
        cc = subprocess.run([CC, "-std=c11", "-Wall", "-Werror", "-o", str(exe), str(src),
                             f"-I{ROOT / 'include'}", f"-L{self.libdir}", "-lstreamlet_c",
                             f"-Wl,-rpath,{self.libdir}", "-lpthread", "-lm"],
                            capture_output=True, text=True, timeout=120)
        if cc.returncode:
            pytest.fail(f"{src} does not compile:\n{cc.stderr}")
        run_env = dict(os.environ, **(env or {}))
        return subprocess.run([str(exe)], capture_output=True, text=True, timeout=timeout,
                              env=run_env)


@pytest.fixture(scope="session")
def capi(tmp_path_factory):
    if CC is None:
        pytest.skip("no C compiler (cc, gcc or clang) on this machine")
    pytest.importorskip("cffi", reason="the capi extra (cffi) is not installed")
    import build

    libdir = tmp_path_factory.mktemp("capi")
    build.build(libdir)
    return CApi(libdir)


def values(out, name):
    """The numbers printed on the line that starts with `name`."""
    for line in out.splitlines():
        if line.split(" ", 1)[0] == name:
            return np.array([float(v) for v in line.split()[1:]])
    raise AssertionError(f"no line {name!r} in:\n{out}")


def c_floats(a):
    return "{" + ", ".join(repr(float(v)) + "f" for v in np.ravel(a)) + "}"


def test_headers_are_current():
    funcs, _ = gen.all_funcs()
    assert gen.write_headers(funcs, check=True) == []


def test_every_declared_function_links(capi):
    funcs, _ = gen.all_funcs()
    names = [f.name for f in funcs] + ["mlx_set_error_handler", "_mlx_error", "mlx_dtype_size",
                                       "mlx_array_new_data_managed",
                                       "mlx_array_new_data_managed_payload"]
    table = ",\n".join(f"  (void (*)(void)){n}" for n in names)
    r = capi.run(f"""
        static void (*fns[])(void) = {{
        {table}
        }};
        int main(void) {{
          int missing = 0;
          for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) missing += fns[i] == NULL;
          printf("functions %zu missing %d\\n", sizeof fns / sizeof fns[0], missing);
          return 0;
        }}
    """)
    assert r.returncode == 0, r.stderr
    assert f"functions {len(names)} missing 0" in r.stdout


def test_arithmetic_on_cpu_streams(capi, rng):
    x = rng.standard_normal((2, 3)).astype(np.float32)
    y = rng.standard_normal((3, 4)).astype(np.float32)
    r = capi.run(f"""
        int main(void) {{
          mlx_set_error_handler(record, NULL, NULL);
          mlx_stream s = cpu_stream(), t = cpu_stream();
          float xd[] = {c_floats(x)}, yd[] = {c_floats(y)};
          int xs[] = {{2, 3}}, ys[] = {{3, 4}};
          mlx_array x = mlx_array_new_data(xd, xs, 2, MLX_FLOAT32);
          mlx_array y = mlx_array_new_data(yd, ys, 2, MLX_FLOAT32);
          mlx_array two = mlx_array_new_float(2.0f), r = mlx_array_new(), u = mlx_array_new();
          CHECK(mlx_multiply(&r, x, two, s));
          CHECK(mlx_exp(&u, r, t));            /* another stream, after s's work */
          print_array("exp2x", u);
          CHECK(mlx_matmul(&r, x, y, s));
          print_array("matmul", r);
          printf("shape %d %d ndim %zu dtype %d\\n", mlx_array_shape(r)[0], mlx_array_shape(r)[1],
                 mlx_array_ndim(r), (int)mlx_array_dtype(r));
          CHECK(mlx_sum_axis(&r, x, 1, false, s));
          print_array("sum1", r);
          int axes[] = {{0, 1}};
          CHECK(mlx_max_axes(&r, x, axes, 2, true, t));
          print_array("max", r);
          printf("max_shape %d %d\\n", mlx_array_shape(r)[0], mlx_array_shape(r)[1]);
          mlx_array a = mlx_array_new_int(7), b = mlx_array_new_int(3);
          CHECK(mlx_floor_divide(&r, a, b, s));
          int32_t q; CHECK(mlx_array_item_int32(&q, r));
          printf("floordiv %d\\n", q);
          CHECK(mlx_arange(&r, 0, 10, 2, MLX_INT32, s));
          CHECK(mlx_cumsum(&r, r, 0, false, true, s));
          print_array("cumsum", r);
          mlx_vector_array parts = mlx_vector_array_new();
          CHECK(mlx_split(&parts, y, 2, 1, s));
          mlx_array p1 = mlx_array_new();
          CHECK(mlx_vector_array_get(&p1, parts, 1));
          print_array("split1", p1);
          mlx_string str = mlx_string_new();
          CHECK(mlx_array_tostring(&str, two));
          printf("repr %s\\n", mlx_string_data(str));
          CHECK(mlx_synchronize(s));
          printf("errors %d\\n", n_errors);
          mlx_array_free(x); mlx_array_free(y); mlx_array_free(two); mlx_array_free(r);
          mlx_array_free(u); mlx_array_free(a); mlx_array_free(b); mlx_array_free(p1);
          mlx_vector_array_free(parts); mlx_string_free(str);
          mlx_stream_free(s); mlx_stream_free(t);
          return 0;
        }}
    """)
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    np.testing.assert_allclose(values(out, "exp2x"), np.exp(2 * x).ravel(), rtol=1e-6)
    np.testing.assert_allclose(values(out, "matmul"), (x @ y).ravel(), rtol=1e-5, atol=1e-6)
    assert "shape 2 4 ndim 2 dtype 10" in out  # MLX_FLOAT32
    np.testing.assert_allclose(values(out, "sum1"), x.sum(1), rtol=1e-6)
    np.testing.assert_allclose(values(out, "max"), [x.max()])
    assert "max_shape 1 1" in out
    assert "floordiv 2" in out
    np.testing.assert_array_equal(values(out, "cumsum"), np.cumsum(np.arange(0, 10, 2)))
    np.testing.assert_allclose(values(out, "split1"), y[:, 2:].ravel())
    assert "repr array(2, dtype=float32)" in out
    assert "errors 0" in out


def test_four_threads_each_with_a_thread_local_stream(capi):
    r = capi.run("""
        static mlx_stream_thread_local tls;
        static double results[4];
        static int indices[4];
        static void* work(void* arg) {
          int k = (int)(size_t)arg;
          mlx_stream s = mlx_stream_new();
          CHECK(mlx_stream_from_thread_local(&s, tls));
          CHECK(mlx_stream_get_index(&indices[k], s));
          mlx_array r = mlx_array_new(), m = mlx_array_new_float((float)(k + 1));
          for (int i = 0; i < 50; i++) {      /* many small ops, interleaved across threads */
            CHECK(mlx_arange(&r, 0, 1000, 1, MLX_FLOAT32, s));
            CHECK(mlx_multiply(&r, r, m, s));
            CHECK(mlx_sum(&r, r, false, s));
            CHECK(mlx_array_eval(r));
          }
          CHECK(mlx_synchronize_thread_local(tls));
          float v; CHECK(mlx_array_item_float32(&v, r));
          results[k] = v;
          mlx_stream again = mlx_stream_new();
          CHECK(mlx_stream_from_thread_local(&again, tls));
          if (!mlx_stream_equal(s, again)) printf("unstable\\n");
          mlx_array_free(r); mlx_array_free(m); mlx_stream_free(s); mlx_stream_free(again);
          return NULL;
        }
        int main(void) {
          mlx_set_error_handler(record, NULL, NULL);
          mlx_device d = mlx_device_new_type(MLX_CPU, 0);
          tls = mlx_stream_thread_local_new(d);
          mlx_stream mine = mlx_stream_new();
          CHECK(mlx_stream_from_thread_local(&mine, tls));
          int main_index; CHECK(mlx_stream_get_index(&main_index, mine));
          pthread_t th[4];
          for (size_t k = 0; k < 4; k++) pthread_create(&th[k], NULL, work, (void*)k);
          for (int k = 0; k < 4; k++) pthread_join(th[k], NULL);
          printf("results"); for (int k = 0; k < 4; k++) printf(" %.17g", results[k]);
          printf("\\nindices %d", main_index);
          for (int k = 0; k < 4; k++) printf(" %d", indices[k]);
          printf("\\nerrors %d\\n", n_errors);
          mlx_vector_stream all = mlx_vector_stream_new();
          CHECK(mlx_get_streams(&all));
          printf("streams %zu\\n", mlx_vector_stream_size(all));
          mlx_stream_thread_local_free(tls); mlx_device_free(d); mlx_stream_free(mine);
          mlx_vector_stream_free(all);
          return 0;
        }
    """)
    assert r.returncode == 0, r.stdout + r.stderr
    expect = [k * sum(range(1000)) for k in (1, 2, 3, 4)]
    np.testing.assert_array_equal(values(r.stdout, "results"), expect)
    idx = values(r.stdout, "indices")
    assert len(set(idx)) == 5  # main's and each thread's stream are distinct streams
    assert "errors 0" in r.stdout and "unstable" not in r.stdout
    assert values(r.stdout, "streams")[0] >= 5


def test_thread_affine_stream_from_another_thread_fails_through_the_handler(capi):
    r = capi.run("""
        static mlx_stream affine, unsafe;
        static int status_affine, status_unsafe;
        static float got;
        static void* work(void* arg) {
          (void)arg;
          mlx_array a = mlx_array_new_float(2.0f), r = mlx_array_new();
          CHECK(mlx_add(&r, a, a, affine));          /* building is fine */
          status_affine = mlx_array_eval(r);          /* evaluating is not */
          status_unsafe = mlx_add(&r, a, a, unsafe) || mlx_array_eval(r);
          mlx_array_item_float32(&got, r);
          mlx_array_free(a); mlx_array_free(r);
          return NULL;
        }
        int main(void) {
          mlx_set_error_handler(record, NULL, NULL);
          mlx_device d = mlx_device_new_type(MLX_CPU, 0);
          affine = mlx_stream_new_device(d);
          unsafe = mlx_stream_new_thread_unsafe(d);
          int index; CHECK(mlx_stream_get_index(&index, affine));
          pthread_t th;
          pthread_create(&th, NULL, work, NULL);
          pthread_join(th, NULL);
          printf("index %d\\nstatus %d %d\\n", index, status_affine, status_unsafe);
          printf("unsafe %g\\n", got);
          printf("message %s\\n", last_error);
          mlx_array a = mlx_array_new_float(1.0f), r = mlx_array_new();
          CHECK(mlx_add(&r, a, a, affine));           /* the owner thread still may */
          CHECK(mlx_array_eval(r));
          printf("errors %d\\n", n_errors);
          mlx_array_free(a); mlx_array_free(r); mlx_device_free(d);
          mlx_stream_free(affine); mlx_stream_free(unsafe);
          return 0;
        }
    """)
    assert r.returncode == 0, r.stdout + r.stderr
    index = int(values(r.stdout, "index")[0])
    assert "status 1 0" in r.stdout
    assert "unsafe 4" in r.stdout
    assert f"message There is no Stream(cpu, {index}) in current thread." in r.stdout
    assert "errors 1" in r.stdout


def test_clear_streams(capi):
    r = capi.run("""
        int main(void) {
          mlx_set_error_handler(record, NULL, NULL);
          mlx_stream s = cpu_stream();
          mlx_stream d0 = mlx_default_cpu_stream_new();
          int si, d0i, d1i;
          CHECK(mlx_stream_get_index(&si, s));
          CHECK(mlx_stream_get_index(&d0i, d0));
          mlx_array a = mlx_array_new_float(3.0f), r = mlx_array_new();
          CHECK(mlx_square(&r, a, s));
          mlx_vector_array outs = mlx_vector_array_new_value(r);
          CHECK(mlx_async_eval(outs));                /* scheduled on s ... */
          CHECK(mlx_clear_streams());                 /* ... and finished before s goes */
          mlx_vector_array_free(outs);
          float v; CHECK(mlx_array_item_float32(&v, r));
          printf("before %g\\n", v);
          int st = mlx_square(&r, a, s) || mlx_array_eval(r);
          printf("reuse %d: %s\\n", st, last_error);
          mlx_stream d1 = mlx_default_cpu_stream_new();   /* a new default */
          CHECK(mlx_stream_get_index(&d1i, d1));
          CHECK(mlx_square(&r, a, d1));
          CHECK(mlx_array_item_float32(&v, r));
          printf("after %g new_default %d\\n", v, d1i != d0i);
          mlx_vector_stream all = mlx_vector_stream_new();
          CHECK(mlx_get_streams(&all));
          int found = 0;
          for (size_t i = 0; i < mlx_vector_stream_size(all); i++) {
            mlx_stream e = mlx_stream_new(); int ei;
            CHECK(mlx_vector_stream_get(&e, all, i));
            CHECK(mlx_stream_get_index(&ei, e));
            found += ei == si;
            mlx_stream_free(e);
          }
          printf("listed %d\\n", found);
          mlx_array_free(a); mlx_array_free(r); mlx_vector_stream_free(all);
          mlx_stream_free(s); mlx_stream_free(d0); mlx_stream_free(d1);
          return 0;
        }
    """)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "before 9" in r.stdout
    # (the op built on the destroyed stream is named: "[square] Stream(...) was destroyed")
    assert re.search(r"reuse 1: (\[\w+\] )?Stream\(Device\(cpu, 0\), \d+\) was destroyed",
                     r.stdout)
    assert "after 9 new_default 1" in r.stdout
    assert "listed 0" in r.stdout


def test_errors_reach_the_handler(capi):
    r = capi.run("""
        static int dtor_calls = 0;
        static void dtor(void* p) { (void)p; dtor_calls++; }
        int main(void) {
          int tag = 0;
          mlx_set_error_handler(record, &tag, dtor);
          mlx_stream s = cpu_stream();
          mlx_array a = mlx_array_new_float(1.0f), r = mlx_array_new();
          int xs[] = {2}, ys[] = {3};
          float xd[] = {1, 2}, yd[] = {1, 2, 3};
          mlx_array x = mlx_array_new_data(xd, xs, 1, MLX_FLOAT32);
          mlx_array y = mlx_array_new_data(yd, ys, 1, MLX_FLOAT32);
          printf("broadcast %d %s\\n", mlx_add(&r, x, y, s), last_error);
          printf("empty %d %s\\n", mlx_add(&r, a, mlx_array_empty, s), last_error);
          printf("nostream %d %s\\n", mlx_add(&r, a, a, mlx_stream_new()), last_error);
          float m[] = {0, 0, 0, 0}; int ms[] = {2, 2};
          mlx_array z = mlx_array_new_data(m, ms, 2, MLX_FLOAT32);
          CHECK(mlx_linalg_inv(&r, z, s));            /* fails when it runs */
          printf("singular %d %s\\n", mlx_array_eval(r), last_error);
          printf("again %d\\n", mlx_array_eval(r));   /* every later read fails too */
          int32_t i;
          printf("item %d %s\\n", mlx_array_item_int32(&i, a), last_error);
          printf("badtype %d %s\\n", mlx_zeros(&r, xs, 1, (mlx_dtype)99, s), last_error);
          mlx_error("custom %d", 42);
          printf("custom %s\\n", last_error);
          printf("count %d dtor %d\\n", n_errors, dtor_calls);
          mlx_set_error_handler(NULL, NULL, NULL);    /* the default: prints, returns */
          printf("default %d dtor %d\\n", mlx_add(&r, x, y, s), dtor_calls);
          printf("still here\\n");
          mlx_array_free(a); mlx_array_free(r); mlx_array_free(x); mlx_array_free(y);
          mlx_array_free(z); mlx_stream_free(s);
          return 0;
        }
    """)
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    assert re.search(r"broadcast 1 .*\(2,\).*\(3,\)", out)
    assert "empty 1 [mlx_add] expected a non-empty mlx_array" in out
    assert "nostream 1 [mlx_add] expected a non-empty mlx_stream" in out
    assert "singular 1 [linalg.inv]" in out
    assert "again 1" in out
    assert "item 1 [mlx_array_item_int32] The array has dtype" in out
    assert "badtype 1 Invalid mlx_dtype 99." in out
    assert re.search(r"custom custom 42 at .*prog\d+\.c:\d+", out)
    assert "count 8 dtor 0" in out
    assert "default 1 dtor 1" in out and "still here" in out
    assert "MLX error:" in r.stderr


def test_default_handler_exits_only_when_asked(capi):
    body = """
        int main(void) {
          mlx_array r = mlx_array_new();
          mlx_stream s = mlx_default_cpu_stream_new();
          int st = mlx_add(&r, mlx_array_empty, mlx_array_empty, s);
          printf("returned %d\\n", st);
          return 0;
        }
    """
    r = capi.run(body)
    assert r.returncode == 0 and "returned 1" in r.stdout
    assert "MLX error: [mlx_add] expected a non-empty mlx_array" in r.stderr
    r = capi.run(body, env={"MLX_C_EXIT_ON_ERROR": "1"})
    assert r.returncode == 255 and "returned" not in r.stdout


def test_random_linalg_fft_against_the_oracle(capi, mlx, rng):
    a = rng.standard_normal((3, 3)).astype(np.float32) + 3 * np.eye(3, dtype=np.float32)
    sig = rng.standard_normal(8).astype(np.float32)
    r = capi.run(f"""
        int main(void) {{
          mlx_set_error_handler(record, NULL, NULL);
          mlx_stream s = cpu_stream();
          mlx_array key = mlx_array_new(), r = mlx_array_new(), lo = mlx_array_new_float(-1.0f);
          mlx_array hi = mlx_array_new_float(1.0f), k1 = mlx_array_new(), k2 = mlx_array_new();
          CHECK(mlx_random_key(&key, 42));
          int shape[] = {{5}};
          CHECK(mlx_random_uniform(&r, lo, hi, shape, 1, MLX_FLOAT32, key, s));
          print_array("uniform", r);
          CHECK(mlx_random_split(&k1, &k2, key, s));
          CHECK(mlx_random_normal(&r, shape, 1, MLX_FLOAT32, 0.0f, 1.0f, k2, s));
          print_array("normal", r);
          CHECK(mlx_random_randint(&r, lo, hi, shape, 1, MLX_INT32, k1, s));
          print_array("randint", r);
          float ad[] = {c_floats(a)}, sd[] = {c_floats(sig)};
          int as[] = {{3, 3}}, ss[] = {{8}};
          mlx_array m = mlx_array_new_data(ad, as, 2, MLX_FLOAT32);
          mlx_array v = mlx_array_new_data(sd, ss, 1, MLX_FLOAT32);
          CHECK(mlx_linalg_inv(&r, m, s));
          print_array("inv", r);
          mlx_array q = mlx_array_new(), rr = mlx_array_new();
          CHECK(mlx_linalg_qr(&q, &rr, m, s));
          CHECK(mlx_matmul(&r, q, rr, s));
          print_array("qr", r);
          int axes[] = {{0, 1}};
          CHECK(mlx_linalg_norm_matrix(&r, m, "fro", axes, 2, false, s));
          print_array("fro", r);
          CHECK(mlx_fft_rfft(&r, v, 8, 0, MLX_FFT_NORM_BACKWARD, s));
          CHECK(mlx_abs(&r, r, s));
          print_array("rfft", r);
          printf("errors %d\\n", n_errors);
          return 0;
        }}
    """)
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    key = mlx.random.key(42)
    k1, k2 = mlx.random.split(key)
    np.testing.assert_array_equal(
        values(out, "uniform"), np.array(mlx.random.uniform(-1, 1, (5,), key=key)))
    np.testing.assert_allclose(values(out, "normal"), np.array(mlx.random.normal((5,), key=k2)),
                               rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(values(out, "randint"),
                                  np.array(mlx.random.randint(-1, 1, (5,), key=k1)))
    np.testing.assert_allclose(values(out, "inv"), np.linalg.inv(a).ravel(), rtol=1e-4,
                               atol=1e-5)
    np.testing.assert_allclose(values(out, "qr"), a.ravel(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(values(out, "fro"), [np.linalg.norm(a)], rtol=1e-6)
    np.testing.assert_allclose(values(out, "rfft"), np.abs(np.fft.rfft(sig)), rtol=1e-4,
                               atol=1e-5)
    assert "errors 0" in out


def test_devices_strings_vectors_maps_and_io(capi, tmp_path):
    r = capi.run(f"""
        int main(void) {{
          mlx_set_error_handler(record, NULL, NULL);
          mlx_stream s = cpu_stream();
          mlx_device d = mlx_device_new(), c = mlx_device_new_type(MLX_CPU, 0);
          CHECK(mlx_stream_get_device(&d, s));
          mlx_device_type type; int index, count; bool avail;
          CHECK(mlx_device_get_type(&type, d)); CHECK(mlx_device_get_index(&index, d));
          CHECK(mlx_device_count(&count, MLX_CPU)); CHECK(mlx_device_is_available(&avail, c));
          printf("device %d %d %d %d %d\\n", type, index, count, avail, mlx_device_equal(c, d));
          mlx_device_info info = mlx_device_info_new();
          CHECK(mlx_device_info_get(&info, c));
          const char* name; size_t mem = 0; bool has;
          CHECK(mlx_device_info_get_string(&name, info, "architecture"));
          CHECK(mlx_device_info_has_key(&has, info, "device_name"));
          int missing = mlx_device_info_get_size(&mem, info, "no such key");
          printf("info %s %d %d\\n", name, has, missing);
          mlx_string str = mlx_string_new();
          CHECK(mlx_stream_tostring(&str, s)); printf("stream %s\\n", mlx_string_data(str));
          CHECK(mlx_device_tostring(&str, c)); printf("dev %s\\n", mlx_string_data(str));
          CHECK(mlx_version(&str)); printf("version %s\\n", mlx_string_data(str));
          int iv[] = {{4, 5}};
          mlx_vector_int vi = mlx_vector_int_new_data(iv, 2);
          CHECK(mlx_vector_int_append_value(vi, 6));
          int third; CHECK(mlx_vector_int_get(&third, vi, 2));
          printf("vint %zu %d\\n", mlx_vector_int_size(vi), third);
          const char* words[] = {{"a", "bc"}};
          mlx_vector_string vs = mlx_vector_string_new_data(words, 2);
          char* w; CHECK(mlx_vector_string_get(&w, vs, 1));
          printf("vstr %s\\n", w);
          mlx_map_string_to_array params = mlx_map_string_to_array_new();
          mlx_map_string_to_string meta = mlx_map_string_to_string_new();
          float xd[] = {{1, 2, 3}}; int xs[] = {{3}};
          mlx_array x = mlx_array_new_data(xd, xs, 1, MLX_FLOAT32), y = mlx_array_new();
          CHECK(mlx_map_string_to_array_insert(params, "weight", x));
          CHECK(mlx_map_string_to_string_insert(meta, "format", "test"));
          CHECK(mlx_save_safetensors("{tmp_path}/w.safetensors", params, meta));
          mlx_map_string_to_array p2 = mlx_map_string_to_array_new();
          mlx_map_string_to_string m2 = mlx_map_string_to_string_new();
          CHECK(mlx_load_safetensors(&p2, &m2, "{tmp_path}/w.safetensors", s));
          CHECK(mlx_map_string_to_array_get(&y, p2, "weight"));
          print_array("loaded", y);
          const char* fmt; CHECK(mlx_map_string_to_string_get(&fmt, m2, "format"));
          printf("meta %s absent %d\\n", fmt, mlx_map_string_to_array_get(&y, p2, "nope"));
          mlx_map_string_to_array_iterator it = mlx_map_string_to_array_iterator_new(p2);
          const char* k; int n = 0;
          while (mlx_map_string_to_array_iterator_next(&k, &y, it) == 0) n++;
          printf("iterated %d\\n", n);
          CHECK(mlx_save("{tmp_path}/x.npy", x));
          CHECK(mlx_load(&y, "{tmp_path}/x.npy", s));
          print_array("npy", y);
          size_t active; CHECK(mlx_get_active_memory(&active));
          printf("errors %d\\n", n_errors);
          mlx_map_string_to_array_iterator_free(it);
          return 0;
        }}
    """)
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    assert "device 0 0 1 1 1" in out
    assert re.search(r"info \S+ 1 2", out)
    assert re.search(r"stream Stream\(Device\(cpu, 0\), \d+\)", out)
    assert "dev Device(cpu, 0)" in out
    assert re.search(r"version \d+\.\d+", out)
    assert "vint 3 6" in out and "vstr bc" in out
    np.testing.assert_array_equal(values(out, "loaded"), [1, 2, 3])
    assert "meta test absent 2" in out and "iterated 1" in out
    np.testing.assert_array_equal(values(out, "npy"), [1, 2, 3])
    assert "errors 0" in out
    assert np.load(tmp_path / "x.npy").tolist() == [1, 2, 3]


def test_closures_and_function_transforms(capi):
    r = capi.run("""
        static mlx_stream s;
        static int dtor_calls = 0;
        static void dtor(void* p) { (void)p; dtor_calls++; }
        static int sum_squares(mlx_vector_array* res, const mlx_vector_array in) {
          mlx_array x = mlx_array_new(), y = mlx_array_new();
          if (mlx_vector_array_get(&x, in, 0) || mlx_square(&y, x, s)
              || mlx_sum(&y, y, false, s)) return 1;
          mlx_vector_array_set_value(res, y);
          mlx_array_free(x); mlx_array_free(y);
          return 0;
        }
        static int scaled_product(mlx_vector_array* res, const mlx_vector_array in, void* p) {
          mlx_array x = mlx_array_new(), y = mlx_array_new(), k = mlx_array_new_float(*(float*)p);
          if (mlx_vector_array_get(&x, in, 0) || mlx_vector_array_get(&y, in, 1)
              || mlx_multiply(&x, x, y, s) || mlx_multiply(&x, x, k, s)) return 1;
          mlx_vector_array_set_value(res, x);
          mlx_array_free(x); mlx_array_free(y); mlx_array_free(k);
          return 0;
        }
        static int cube(mlx_array* res, const mlx_array x) {
          return mlx_power(res, x, mlx_array_new_float(3.0f), s);
        }
        static int failing(mlx_vector_array* res, const mlx_vector_array in) {
          (void)res; (void)in; return 7;
        }
        static mlx_array vec(float a, float b, float c) {
          float d[] = {a, b, c}; int shape[] = {3};
          return mlx_array_new_data(d, shape, 1, MLX_FLOAT32);
        }
        static void print_vec(const char* name, mlx_vector_array v, size_t i) {
          mlx_array a = mlx_array_new();
          CHECK(mlx_vector_array_get(&a, v, i));
          print_array(name, a);
          mlx_array_free(a);
        }
        int main(void) {
          mlx_set_error_handler(record, NULL, NULL);
          s = cpu_stream();
          mlx_closure f = mlx_closure_new_func(sum_squares);
          mlx_closure_value_and_grad vag = mlx_closure_value_and_grad_new();
          int argnums[] = {0};
          CHECK(mlx_value_and_grad(&vag, f, argnums, 1));
          mlx_vector_array in = mlx_vector_array_new_value(vec(1, 2, 3));
          mlx_vector_array v = mlx_vector_array_new(), g = mlx_vector_array_new();
          CHECK(mlx_closure_value_and_grad_apply(&v, &g, vag, in));
          print_vec("value", v, 0);
          print_vec("grad", g, 0);
          float scale = 2.0f;
          mlx_closure h = mlx_closure_new_func_payload(scaled_product, &scale, dtor);
          mlx_vector_array primals = mlx_vector_array_new();
          CHECK(mlx_vector_array_append_value(primals, vec(1, 2, 3)));
          CHECK(mlx_vector_array_append_value(primals, vec(4, 5, 6)));
          mlx_vector_array cot = mlx_vector_array_new_value(vec(1, 1, 1));
          CHECK(mlx_vjp(&v, &g, h, primals, cot));
          print_vec("vjp_out", v, 0);
          print_vec("vjp_x", g, 0);
          print_vec("vjp_y", g, 1);
          mlx_vector_array tan = mlx_vector_array_new();
          CHECK(mlx_vector_array_append_value(tan, vec(1, 0, 0)));
          CHECK(mlx_vector_array_append_value(tan, vec(0, 0, 1)));
          CHECK(mlx_jvp(&v, &g, h, primals, tan));
          print_vec("jvp", g, 0);
          CHECK(mlx_closure_apply(&v, h, primals));
          print_vec("apply", v, 0);
          mlx_closure u = mlx_closure_new_unary(cube);
          CHECK(mlx_closure_apply(&v, u, in));
          print_vec("cube", v, 0);
          mlx_closure bad = mlx_closure_new_func(failing);
          printf("failing %d %s\\n", mlx_closure_apply(&v, bad, in), last_error);
          CHECK(mlx_closure_free(h));
          printf("dtor %d errors %d\\n", dtor_calls, n_errors);
          return 0;
        }
    """)
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    x, y = np.array([1.0, 2, 3]), np.array([4.0, 5, 6])
    np.testing.assert_allclose(values(out, "value"), [14])
    np.testing.assert_allclose(values(out, "grad"), 2 * x)
    np.testing.assert_allclose(values(out, "vjp_out"), 2 * x * y)
    np.testing.assert_allclose(values(out, "vjp_x"), 2 * y)
    np.testing.assert_allclose(values(out, "vjp_y"), 2 * x)
    np.testing.assert_allclose(values(out, "jvp"), 2 * (np.array([1, 0, 0]) * y
                                                       + x * np.array([0, 0, 1])))
    np.testing.assert_allclose(values(out, "apply"), 2 * x * y)
    np.testing.assert_allclose(values(out, "cube"), x ** 3)
    assert "failing 1 [mlx_closure] The closure's C function returned 7." in out
    assert "dtor 1 errors 1" in out


def test_ops_with_every_kind_of_parameter(capi, mlx):
    """Optional, nullable, string, int64-list, vector and two-result parameters."""
    r = capi.run("""
        static mlx_array vec(const float* d, int n) {
          int shape[] = {n};
          return mlx_array_new_data(d, shape, 1, MLX_FLOAT32);
        }
        int main(void) {
          mlx_set_error_handler(record, NULL, NULL);
          mlx_stream s = cpu_stream();
          float xd[] = {1.0f, -2.0f, 3.0f, -4.0f, 5.0f, -6.0f};
          int shape23[] = {2, 3};
          mlx_array x = mlx_array_new_data(xd, shape23, 2, MLX_FLOAT32), r = mlx_array_new();
          mlx_array lo = mlx_array_new_float(-1.5f), nanv = mlx_array_new_float(0.0f);
          CHECK(mlx_clip(&r, x, lo, mlx_array_empty, s));          /* a null bound */
          print_array("clip", r);
          CHECK(mlx_divide(&nanv, nanv, nanv, s));                  /* nan */
          mlx_optional_float none = {0.0f, false}, big = {9.0f, true};
          CHECK(mlx_nan_to_num(&r, nanv, 7.0f, big, none, s));
          print_array("nan_to_num", r);
          int sh[] = {3}; int64_t st[] = {2};
          CHECK(mlx_as_strided(&r, x, sh, 1, st, 1, 1, s));
          print_array("as_strided", r);
          CHECK(mlx_linalg_norm(&r, x, 2.0, NULL, 0, false, s));   /* a null axis list */
          print_array("norm", r);
          mlx_vector_array ops = mlx_vector_array_new_value(x);
          CHECK(mlx_vector_array_append_value(ops, x));
          CHECK(mlx_einsum(&r, "ij,ij->i", ops, s));
          print_array("einsum", r);
          int axes[] = {1}, low[] = {1}, high[] = {2};
          CHECK(mlx_pad(&r, x, axes, 1, low, 1, high, 1, lo, "constant", s));
          print_array("pad", r);
          printf("pad_shape %d %d\\n", mlx_array_shape(r)[0], mlx_array_shape(r)[1]);
          mlx_vector_array grids = mlx_vector_array_new();
          float ad[] = {1, 2}, bd[] = {3, 4, 5};
          mlx_vector_array ab = mlx_vector_array_new_value(vec(ad, 2));
          CHECK(mlx_vector_array_append_value(ab, vec(bd, 3)));
          CHECK(mlx_meshgrid(&grids, ab, false, "ij", s));
          mlx_array g1 = mlx_array_new();
          CHECK(mlx_vector_array_get(&g1, grids, 1));
          print_array("meshgrid", g1);
          int start[] = {0, 1}, stop[] = {2, 3}, strides[] = {1, 1};
          CHECK(mlx_slice(&r, x, start, 2, stop, 2, strides, 2, s));
          print_array("slice", r);
          mlx_array ten = mlx_array_new_float(10.0f);
          CHECK(mlx_slice_update_add(&r, x, ten, start, 2, stop, 2, strides, 2, s));
          print_array("slice_add", r);
          CHECK(mlx_slice_update(&r, x, ten, start, 2, stop, 2, strides, 2, s));
          print_array("slice_set", r);
          print_array("x_unchanged", x);
          CHECK(mlx_topk_axis(&r, x, 2, 1, s));
          CHECK(mlx_sort_axis(&r, r, 1, s));
          print_array("topk", r);
          CHECK(mlx_cumsum(&r, x, 1, true, false, s));
          print_array("cumsum_rev_excl", r);
          CHECK(mlx_softmax_axis(&r, x, 0, false, s));
          print_array("softmax", r);
          int ta[] = {1}, tb[] = {1};
          CHECK(mlx_tensordot(&r, x, x, ta, 1, tb, 1, s));
          print_array("tensordot", r);
          float w[] = {1, 0, -1}; int wshape[] = {1, 3, 1}, ishape[] = {1, 6, 1};
          mlx_array wt = mlx_array_new_data(w, wshape, 3, MLX_FLOAT32);
          mlx_array in = mlx_array_new_data(xd, ishape, 3, MLX_FLOAT32);
          CHECK(mlx_conv1d(&r, in, wt, 1, 0, 1, 1, s));
          print_array("conv1d", r);
          mlx_array q = mlx_array_new(), rr = mlx_array_new();
          CHECK(mlx_divmod(&grids, x, lo, s));
          CHECK(mlx_vector_array_get(&q, grids, 0));
          CHECK(mlx_vector_array_get(&rr, grids, 1));
          print_array("divmod_q", q);
          print_array("divmod_r", rr);
          mlx_array u1 = mlx_array_new(), u2 = mlx_array_new();
          mlx_array zero = mlx_array_new_float(0.0f), one = mlx_array_new_float(1.0f);
          CHECK(mlx_random_seed(7));
          CHECK(mlx_random_uniform(&u1, zero, one, sh, 1, MLX_FLOAT32, mlx_array_empty, s));
          CHECK(mlx_random_seed(7));
          CHECK(mlx_random_uniform(&u2, zero, one, sh, 1, MLX_FLOAT32, mlx_array_empty, s));
          CHECK(mlx_array_equal(&r, u1, u2, false, s));
          bool same; CHECK(mlx_array_item_bool(&same, r));
          printf("seeded %d\\n", same);
          int axes01[] = {0, 1};
          CHECK(mlx_fft_fft2(&r, x, shape23, 2, axes01, 2, MLX_FFT_NORM_ORTHO, s));
          CHECK(mlx_abs(&r, r, s));
          print_array("fft2", r);
          mlx_complex64_t c;
          CHECK(mlx_fft_fft(&r, vec(xd, 6), 6, 0, MLX_FFT_NORM_BACKWARD, s));
          CHECK(mlx_sum(&r, r, false, s));
          CHECK(mlx_array_item_complex64(&c, r));
          printf("fftsum %g %g\\n", crealf(c), cimagf(c));
          float wd[128]; int wshape2[] = {2, 64};
          for (int i = 0; i < 128; i++) wd[i] = (float)((i * 37) % 23) / 7.0f - 1.5f;
          mlx_array wq = mlx_array_new_data(wd, wshape2, 2, MLX_FLOAT32);
          mlx_vector_array qs = mlx_vector_array_new();
          mlx_optional_int g64 = {64, true}, b4 = {4, true};
          mlx_optional_dtype f32 = {MLX_FLOAT32, true};
          CHECK(mlx_quantize(&qs, wq, g64, b4, "affine", mlx_array_empty, s));
          mlx_array qw = mlx_array_new(), sc = mlx_array_new(), bi = mlx_array_new();
          CHECK(mlx_vector_array_get(&qw, qs, 0));
          CHECK(mlx_vector_array_get(&sc, qs, 1));
          CHECK(mlx_vector_array_get(&bi, qs, 2));
          CHECK(mlx_dequantize(&r, qw, sc, bi, g64, b4, "affine", mlx_array_empty, f32, s));
          printf("quantized %zu dtype %d\\n", mlx_vector_array_size(qs), (int)mlx_array_dtype(r));
          print_array("dequantized", r);
          return 0;
        }
    """)
    assert r.stdout.count("FAILED") == 0, r.stdout + r.stderr
    out = r.stdout
    x = np.array([[1.0, -2, 3], [-4, 5, -6]], dtype=np.float32)
    np.testing.assert_array_equal(values(out, "clip"), np.maximum(x, -1.5).ravel())
    np.testing.assert_array_equal(values(out, "nan_to_num"), [7])
    np.testing.assert_array_equal(values(out, "as_strided"), x.ravel()[1::2][:3])
    np.testing.assert_allclose(values(out, "norm"), [np.linalg.norm(x, 2)], rtol=1e-5)
    np.testing.assert_allclose(values(out, "einsum"), (x * x).sum(1))
    np.testing.assert_array_equal(values(out, "pad"),
                                  np.pad(x, ((0, 0), (1, 2)), constant_values=-1.5).ravel())
    assert "pad_shape 2 6" in out
    np.testing.assert_array_equal(values(out, "meshgrid"),
                                  np.meshgrid([1, 2], [3, 4, 5], indexing="ij")[1].ravel())
    np.testing.assert_array_equal(values(out, "slice"), x[0:2, 1:3].ravel())
    added, assigned = x.copy(), x.copy()
    added[0:2, 1:3] += 10
    assigned[0:2, 1:3] = 10
    np.testing.assert_array_equal(values(out, "slice_add"), added.ravel())
    np.testing.assert_array_equal(values(out, "slice_set"), assigned.ravel())
    np.testing.assert_array_equal(values(out, "x_unchanged"), x.ravel())
    np.testing.assert_array_equal(values(out, "topk"), np.sort(x, 1)[:, 1:].ravel())
    rev_excl = np.flip(np.cumsum(np.flip(x, 1), 1), 1) - x
    np.testing.assert_allclose(values(out, "cumsum_rev_excl"), rev_excl.ravel())
    e = np.exp(x - x.max(0))
    np.testing.assert_allclose(values(out, "softmax"), (e / e.sum(0)).ravel(), rtol=1e-6)
    np.testing.assert_allclose(values(out, "tensordot"), (x @ x.T).ravel())
    xv = x.ravel()
    np.testing.assert_allclose(values(out, "conv1d"), xv[:-2] - xv[2:])
    np.testing.assert_array_equal(values(out, "divmod_q"), np.floor_divide(x, -1.5).ravel())
    np.testing.assert_allclose(values(out, "divmod_r"), np.remainder(x, -1.5).ravel())
    assert "seeded 1" in out
    np.testing.assert_allclose(values(out, "fft2"),
                               np.abs(np.fft.fft2(x, norm="ortho")).ravel(), rtol=1e-5, atol=1e-5)
    f = np.fft.fft(xv).sum()
    np.testing.assert_allclose(values(out, "fftsum"), [f.real, f.imag], atol=1e-4)
    w = np.array([((i * 37) % 23) / 7.0 - 1.5 for i in range(128)], np.float32).reshape(2, 64)
    ref = mlx.dequantize(*mlx.quantize(mlx.array(w), group_size=64, bits=4), group_size=64,
                         bits=4)
    assert "quantized 3 dtype 10" in out
    np.testing.assert_allclose(values(out, "dequantized"), np.array(ref).ravel(), rtol=1e-6)
    assert r.returncode == 0
