"""Build libstreamlet_c, the MLX-C API over streamlet, with cffi's embedding mode.

    python capi/build.py [OUTDIR]     # default build/capi; ./dev capi runs this

Writes OUTDIR/libstreamlet_c.so (and refreshes the headers in include/mlx/c).
The library starts the interpreter of the Python that built it on its first
call, so build it with the Python whose environment has streamlet (the repo's
.venv); STREAMLET_C_PYTHON=/path/to/python picks another at run time. Compile
a program against it with

    cc prog.c -Iinclude -LOUTDIR -lstreamlet_c -Wl,-rpath,OUTDIR
"""
from __future__ import annotations

import pathlib
import sys
import sysconfig

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import gen  # noqa: E402

MODULE = "_streamlet_c"
INIT = f"""\
import sys
if not getattr(sys, "argv", None):
    sys.argv = ["libstreamlet_c"]
from {MODULE} import ffi, lib
"""


def c_string(text):
    """`text` as a C string literal."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def build(out=None, quiet=True):
    """Generate the glue and compile the library; return the path of the .so."""
    import cffi

    out = pathlib.Path(out or gen.ROOT / "build" / "capi").resolve()
    out.mkdir(parents=True, exist_ok=True)
    funcs, _ = gen.all_funcs()
    gen.write_headers(funcs)
    cdef, wrappers, glue = gen.glue(funcs)
    ffi = cffi.FFI()
    ffi.embedding_api("")
    ffi.cdef(cdef + "void _sl_report(const char*);\n"
             "int _sl_apply_c(int, void*, void*, uintptr_t*, uintptr_t);\n"
             "void _sl_call_dtor(void*, void*);\n")
    source = "\n".join((gen.CAPI / name).read_text() for name in ("boot.c", "closure.c"))
    source += "\n" + wrappers
    libdir = sysconfig.get_config_var("LIBDIR")
    ffi.set_source(
        MODULE, source,
        include_dirs=[str(gen.ROOT / "include")],
        define_macros=[("SL_PYTHON", c_string(sys.executable))],
        extra_compile_args=["-O1", "-Wno-unused-variable", "-Wno-unused-function"],
        extra_link_args=["-Wl,-soname,libstreamlet_c.so"] + ([f"-Wl,-rpath,{libdir}"]
                                                             if libdir else []))
    runtime = (gen.CAPI / "runtime.py").read_text()
    ffi.embedding_init_code(INIT + runtime + "\n" + glue)
    ffi.compile(tmpdir=str(out), target="libstreamlet_c.so", verbose=not quiet)
    return out / "libstreamlet_c.so"


if __name__ == "__main__":
    path = build(sys.argv[1] if len(sys.argv) > 1 else None, quiet=False)
    print(path)
