"""Bad input to every public function raises what MLX raises, with a message naming it.

One table: each public function that takes `stream=` (found by introspection, so a new one
is covered too) gets a valid call (the first of CANDIDATES that both libraries accept, or
its row in SPECIAL), and each MUTATION of that call is run on both mlx.core and
streamlet.core, evaluated.  Where MLX raises, streamlet raises the same exception type
(ValueError, TypeError, RuntimeError; an IndexError MLX raises for an axis is also a
ValueError here) and its message names the function, or names what MLX's message names
(MLX says `[broadcast_shapes]` for `add` of shapes that do not broadcast); where MLX
accepts the call, so does streamlet.  OTHER holds the functions without `stream=` (devices,
streams, eval, memory), each bad call with the exception MLX raises.
"""
import inspect
import re
import tempfile
import threading

import numpy as np
import pytest

import streamlet.core as mx

ml = pytest.importorskip("mlx.core")
pytestmark = pytest.mark.usefixtures("on_cpu")  # MLX's CPU build is the oracle

MODULES = (("", mx, ml), ("random.", mx.random, ml.random), ("linalg.", mx.linalg, ml.linalg),
           ("fft.", mx.fft, ml.fft))


def _arrays(m):
    a = m.array(np.arange(6, dtype=np.float32).reshape(2, 3) / 7 + 0.5)
    s = m.array(np.array([[4, 1, 0.5], [1, 3, 0.2], [0.5, 0.2, 2]], np.float32))
    i = m.array(np.arange(6, dtype=np.int32).reshape(2, 3))
    v = m.array(np.array([0.3, 0.6, 0.9], np.float32))
    b = m.array(np.array([[True, False, True], [False, True, True]]))
    return a, s, i, v, b


def CANDIDATES(m):
    """Argument tuples tried in order for a valid call (the same for both libraries)."""
    a, s, i, v, b = _arrays(m)
    return [(), (a,), (s,), (a, a), (s, s), (i,), (i, i), (a, 1), (a, 0), ((2, 3),), (3,),
            ([a, a],), (a, a, a), (b, a, a), (a, [0]), (a, (3, 2)), (s, 2), (v,), (v, v),
            (s, v), (a, v), (i, 1), ("ij->ji", a), (a, 0, 1), (s, 1, 1), (m.random.key(0),),
            (m.random.key(0), 2), (a, 2, 1), (v, 2)]


def _quantized(m):
    w = m.array(np.linspace(-1, 1, 32 * 64, dtype=np.float32).reshape(32, 64))
    return w, m.quantize(w)


_SAVED = tempfile.NamedTemporaryFile(suffix=".npy", delete=False).name
np.save(_SAVED, np.ones((2, 3), np.float32))

# functions no candidate suits: (args, kwargs) from the module
SPECIAL = {
    "addmm": lambda m: ((m.zeros((2, 2)), _arrays(m)[0], _arrays(m)[0].T), {}),
    "astype": lambda m: ((_arrays(m)[0], m.int32), {}),
    "broadcast_to": lambda m: ((_arrays(m)[3], (2, 3)), {}),
    "conv1d": lambda m: ((m.ones((1, 5, 2)), m.ones((3, 2, 2))), {}),
    "conv2d": lambda m: ((m.ones((1, 5, 5, 2)), m.ones((3, 2, 2, 2))), {}),
    "conv3d": lambda m: ((m.ones((1, 4, 4, 4, 2)), m.ones((3, 2, 2, 2, 2))), {}),
    "conv_general": lambda m: ((m.ones((1, 5, 5, 2)), m.ones((3, 2, 2, 2))), {}),
    "conv_transpose1d": lambda m: ((m.ones((1, 5, 2)), m.ones((3, 2, 2))), {}),
    "conv_transpose2d": lambda m: ((m.ones((1, 5, 5, 2)), m.ones((3, 2, 2, 2))), {}),
    "conv_transpose3d": lambda m: ((m.ones((1, 4, 4, 4, 2)), m.ones((3, 2, 2, 2, 2))), {}),
    "dequantize": lambda m: (_quantized(m)[1], {}),
    "from_fp8": lambda m: ((m.array(np.array([56, 64], np.uint8)),), {"dtype": m.float32}),
    "full": lambda m: (((2, 3), 1.5), {}),
    "gather_qmm": lambda m: ((m.ones((2, 64)), _quantized(m)[1][0]),
                             {"scales": _quantized(m)[1][1], "biases": _quantized(m)[1][2]}),
    "linspace": lambda m: ((0, 1, 5), {}),
    "load": lambda m: ((_SAVED,), {}),
    "put_along_axis": lambda m: ((_arrays(m)[0], m.array([[0], [1]]), m.zeros((2, 1))),
                                 {"axis": 1}),
    "quantize": lambda m: ((_quantized(m)[0],), {}),
    "quantized_matmul": lambda m: ((m.ones((2, 64)), _quantized(m)[1][0]),
                                   {"scales": _quantized(m)[1][1],
                                    "biases": _quantized(m)[1][2]}),
    "segmented_mm": lambda m: ((m.ones((2, 4)), m.ones((4, 3)), m.array([[0, 2], [2, 4]])),
                               {}),
    "slice": lambda m: ((_arrays(m)[0], m.array([0]), [0], [1, 3]), {}),
    "slice_update": lambda m: ((_arrays(m)[0], m.zeros((1, 3)), m.array([1]), [0]), {}),
    "take_along_axis": lambda m: ((_arrays(m)[0], m.array([[0], [1]])), {"axis": 1}),
    "unflatten": lambda m: ((_arrays(m)[0], 1, (3, 1)), {}),
    "view": lambda m: ((_arrays(m)[0], m.int32), {}),
    "random.randint": lambda m: ((0, 10, (3,)), {}),
}
NOT_IN_MLX = {"random.bits"}  # streamlet's extra: checked against the same rules, alone
QQMM = {"qqmm"}  # MLX's CPU build has no nvfp4 kernels: nothing to compare against
# MLX returns the input itself for these valid calls, so it never looks at the stream; here
# the stream is checked (a bad one raises, naming the function), which MLX's users can't mind
MLX_IGNORES_STREAM = {"atleast_1d", "atleast_2d", "atleast_3d", "broadcast_arrays", "conj",
                      "conjugate", "flatten", "imag", "meshgrid", "positive", "real", "split",
                      "tile"}
# names a message may use for a function: the op it is another name of (as MLX's aliases)
ALIASES = {"acos": "arccos", "acosh": "arccosh", "asin": "arcsin", "asinh": "arcsinh",
           "atan": "arctan", "atan2": "arctan2", "atanh": "arctanh", "pow": "power",
           "conjugate": "conj", "bitwise_left_shift": "left_shift",
           "bitwise_right_shift": "right_shift", "concat": "concatenate", "empty": "zeros",
           "empty_like": "zeros_like", "permute_dims": "transpose",
           "cumulative_sum": "cumsum", "cumulative_prod": "cumprod",
           # MLX's own messages for every convolution say [conv]
           **{f"conv{k}": "[conv]" for k in ("1d", "2d", "3d", "_general", "_transpose1d",
                                              "_transpose2d", "_transpose3d")}}
# these make no op for the valid call here (their result is their input or a constant), so
# nothing runs on another thread's stream and there is nothing to refuse; MLX makes one
NO_OP_HERE = {"full_like", "squeeze"}


def _mlx_type(exc):
    """The exception type MLX means: its C++ casts and bounds checks leak as RuntimeError
    ("std::bad_cast", a wrong type) and IndexError ("SmallVector out of range", a wrong
    shape); what it means is TypeError and ValueError."""
    if isinstance(exc, RuntimeError) and "bad_cast" in str(exc):
        return TypeError
    if isinstance(exc, IndexError) and "SmallVector" in str(exc):
        return ValueError
    return type(exc)


def _run(f, args, kwargs, m):
    """None if the call and its evaluation succeed, else the exception."""
    try:
        m.eval(f(*args, **kwargs))
    except Exception as exc:  # the outcome under test
        return exc
    return None


def _table():
    rows = {}
    for prefix, ours, theirs in MODULES:
        for name in sorted(getattr(ours, "__all__", dir(ours))):
            f = getattr(ours, name)
            if name.startswith("_") or not callable(f) or inspect.isclass(f):
                continue
            try:
                params = inspect.signature(f).parameters
            except (TypeError, ValueError):
                continue
            if "stream" not in params and name != "arange":
                continue
            full = prefix + name
            g = getattr(theirs, name, None) if full not in NOT_IN_MLX else None
            names = list(params) if name != "arange" else ["start", "stop", "step", "dtype"]
            rows[full] = (f, g, names)
    return rows


TABLE = _table()


def _base(full, f, g):
    """A valid call: ((args, kwargs) for streamlet, the same for mlx), or None."""
    if full in SPECIAL:
        return SPECIAL[full](mx), (SPECIAL[full](ml) if g is not None else None)
    for ours, theirs in zip(CANDIDATES(mx), CANDIDATES(ml)):
        if _run(f, ours, {}, mx) is None and (g is None or _run(g, theirs, {}, ml) is None):
            return (ours, {}), (theirs, {}) if g is not None else None
    return None


def _other_threads_stream(m, destroyed):
    box = {}

    def make():
        box["s"] = m.new_stream(m.cpu)
        if destroyed:
            m.clear_streams()
    t = threading.Thread(target=make)
    t.start()
    t.join(30)
    return box["s"]


def _replace_first_array(args, m, value):
    out = list(args)
    for k, a in enumerate(out):
        if isinstance(a, m.array):
            out[k] = value
            return tuple(out)
    return None


def _second_array_reshaped(args, m):
    out = list(args)
    seen = 0
    for k, a in enumerate(out):
        if isinstance(a, m.array):
            seen += 1
            if seen == 2:
                out[k] = m.ones((4, 5), dtype=a.dtype)
                return tuple(out)
    return None


def _set(params, name, value):
    """A mutation setting argument `name`: in its place if the call passes it positionally."""
    index = params.index(name)

    def mutate(args, kwargs, m):
        if index < len(args):
            return args[:index] + (value,) + args[index + 1:], kwargs
        return args, {**kwargs, name: value}
    return mutate


def MUTATIONS(params):
    """name -> (args, kwargs, m) -> (args, kwargs) or None (does not apply)."""
    muts = {
        "stream of a wrong type": lambda a, k, m: (a, {**k, "stream": "cpu0"}),
        "stream destroyed by clear_streams": lambda a, k, m: (
            a, {**k, "stream": _other_threads_stream(m, destroyed=True)}),
        "stream of another thread": lambda a, k, m: (
            a, {**k, "stream": _other_threads_stream(m, destroyed=False)}),
        "array of a wrong type": lambda a, k, m: (
            None if _replace_first_array(a, m, object()) is None else
            (_replace_first_array(a, m, object()), k)),
        "shapes that do not fit": lambda a, k, m: (
            None if _second_array_reshaped(a, m) is None else (_second_array_reshaped(a, m), k)),
    }
    if not mx.is_available(mx.gpu):
        muts["absent device (gpu)"] = lambda a, k, m: (a, {**k, "stream": m.gpu})
    if "dtype" in params:
        muts["dtype of a wrong type"] = _set(params, "dtype", "float32")
    if "axis" in params:
        muts["axis out of range"] = _set(params, "axis", 7)
        muts["axis of a wrong type"] = _set(params, "axis", "0")
    if "shape" in params:
        muts["shape of a wrong type"] = _set(params, "shape", "23")
        muts["negative shape"] = _set(params, "shape", (2, -3))
    return muts


ALL_MUTATIONS = sorted({name for _, _, p in TABLE.values() for name in MUTATIONS(p)})
OTHER_THREAD = re.compile(r"There is no Stream\(cpu, \d+\) in current thread\.")


def _named(exc, full, theirs):
    """Our message names the function, or what MLX's own message for the case names."""
    text = str(exc)
    short = full.split(".")[-1]
    if short in text or ALIASES.get(short, "@") in text:
        return True
    named = re.findall(r"\[(\w+)(?:::\w+)?\]", str(theirs)) if theirs is not None else []
    return any(n in text for n in named)


def test_every_public_function_has_a_valid_call():
    missing = [full for full, (f, g, _) in TABLE.items()
               if full not in QQMM and _base(full, f, g) is None]
    assert not missing, f"no valid call in CANDIDATES or SPECIAL for {missing}"
    for full in SPECIAL:  # each SPECIAL call is valid in both libraries
        f, g, _ = TABLE[full]
        ours, theirs = _base(full, f, g)
        assert _run(f, *ours, mx) is None and (g is None or _run(g, *theirs, ml) is None), full
    assert len(TABLE) > 240


@pytest.mark.parametrize("mutation", ALL_MUTATIONS)
def test_bad_input_raises_as_mlx_naming_the_function(mutation):
    problems = []
    checked = 0
    for full, (f, g, params) in TABLE.items():
        mut = MUTATIONS(params).get(mutation)
        if mut is None or full in QQMM:
            continue
        base = _base(full, f, g)
        ours_call = mut(*base[0], mx)
        if ours_call is None:
            continue
        ours = _run(f, *ours_call, mx)
        theirs = _run(g, *mut(*base[1], ml), ml) if g is not None else None
        if g is None:  # streamlet's extra: an error of the kinds MLX would raise
            theirs_type = type(ours) if isinstance(ours, (ValueError, TypeError,
                                                         RuntimeError)) else None
        else:
            theirs_type = None if theirs is None else _mlx_type(theirs)
        checked += 1
        if mutation.startswith(("stream", "absent")) and full in MLX_IGNORES_STREAM:
            theirs_type = type(ours) if ours is not None else None
        if mutation == "stream of another thread" and full in NO_OP_HERE and ours is None:
            continue
        if mutation == "stream destroyed by clear_streams" and full == "synchronize":
            continue  # deliberately stricter than MLX: STRICTER below checks it
        if theirs_type is None:
            if ours is not None:
                problems.append(f"{full}: mlx accepts it, streamlet raised {ours!r}")
            continue
        if ours is None:
            problems.append(f"{full}: mlx raised {theirs_type.__name__}, streamlet accepted it")
        elif not isinstance(ours, theirs_type):
            problems.append(f"{full}: streamlet raised {ours!r}, mlx {theirs_type.__name__}")
        elif mutation == "stream of another thread":
            if not OTHER_THREAD.fullmatch(str(ours)):  # MLX's words, naming the stream
                problems.append(f"{full}: {ours!r}")
        elif mutation == "absent device (gpu)" and "[default_stream]" in str(ours):
            pass  # MLX's words: "[default_stream] Cannot get gpu stream without gpu backend."
        elif not _named(ours, full, theirs):
            problems.append(f"{full}: the message does not name it: {ours!r}")
    assert checked > 0
    assert not problems, f"{len(problems)} of {checked}:\n" + "\n".join(problems)


def _with_stream(m, s):
    with m.stream(s):
        pass


def _destroyed(m):
    return _other_threads_stream(m, destroyed=True)


# functions without `stream=`: name -> bad call (the same program on both libraries)
OTHER = {
    "new_stream": lambda m: m.new_stream("cpu"),
    "new_thread_unsafe_stream": lambda m: m.new_thread_unsafe_stream("cpu"),
    "new_thread_local_stream": lambda m: m.new_thread_local_stream("cpu"),
    "default_stream": lambda m: m.default_stream("cpu"),
    "set_default_device": lambda m: m.set_default_device("cpu"),
    "set_default_stream": lambda m: m.set_default_stream(3),
    "synchronize": lambda m: m.synchronize("cpu"),
    "stream": lambda m: _with_stream(m, "cpu"),
    "stream None": lambda m: _with_stream(m, None),
    "device_count": lambda m: m.device_count("cpu"),
    "is_available": lambda m: m.is_available("cpu"),
    "device_info": lambda m: m.device_info("cpu"),
    "eval": lambda m: m.eval(object()),
    "async_eval": lambda m: m.async_eval(object()),
    "array": lambda m: m.array(object()),
    "array dtype": lambda m: m.array([1, 2], dtype="int32"),
    "set_memory_limit": lambda m: m.set_memory_limit("1"),
    "set_cache_limit": lambda m: m.set_cache_limit("1"),
    "set_wired_limit": lambda m: m.set_wired_limit("1"),
    "clear_streams": lambda m: m.clear_streams(3),
    "grad": lambda m: m.grad(3),
    "value_and_grad": lambda m: m.value_and_grad(3),
    "vmap": lambda m: m.vmap(3),
    "compile": lambda m: m.compile(3),
    "jvp": lambda m: m.jvp(3, [m.ones(2)], [m.ones(2)]),
    "vjp": lambda m: m.vjp(3, [m.ones(2)], [m.ones(2)]),
    "save": lambda m: m.save(_SAVED, object()),
    "savez": lambda m: m.savez(_SAVED + ".npz", a=object()),
    "load": lambda m: m.load(_SAVED + ".missing.npy"),
    "broadcast_shapes": lambda m: m.broadcast_shapes((2, 3), (4, 5)),
    "issubdtype": lambda m: m.issubdtype("float32", m.floating),
}
if not mx.is_available(mx.gpu):
    OTHER.update({
        "new_stream on the gpu": lambda m: m.new_stream(m.gpu),
        "default_stream on the gpu": lambda m: m.default_stream(m.gpu),
        "set_default_device to the gpu": lambda m: m.set_default_device(m.gpu),
    })

# where streamlet refuses what MLX lets pass, on purpose: case -> (bad call, exception)
STRICTER = {
    # DESIGN §2: a stream destroyed by clear_streams raises RuntimeError when used again;
    # MLX's synchronize of it returns
    "synchronize of a destroyed stream": (lambda m: m.synchronize(_destroyed(m)),
                                          RuntimeError),
}
if not mx.is_available(mx.gpu):
    # refused when it is made, like new_stream(gpu); MLX refuses it at its first use
    STRICTER["new_thread_local_stream on the gpu"] = (
        lambda m: m.new_thread_local_stream(m.gpu), ValueError)


@pytest.mark.parametrize("case", list(OTHER))
def test_bad_call_of_a_function_without_stream(case):
    name = case.split()[0]
    call = OTHER[case]

    def outcome(m):
        try:
            call(m)
        except Exception as exc:  # the outcome under test
            return exc
        return None
    theirs, ours = outcome(ml), outcome(mx)
    if theirs is None:
        assert ours is None, f"mlx accepts it, streamlet raised {ours!r}"
        return
    assert isinstance(ours, _mlx_type(theirs)), f"streamlet {ours!r}, mlx {theirs!r}"
    assert _named(ours, name, theirs) or "[default_stream]" in str(ours), repr(ours)


@pytest.mark.parametrize("case", list(STRICTER))
def test_bad_call_refused_where_mlx_lets_it_pass(case):
    call, expected = STRICTER[case]
    with pytest.raises(expected, match=re.escape(case.split()[0])):
        call(mx)
    call(ml)  # MLX: no error


BITWISE_CALLS = [
    lambda m: m.bitwise_and(m.array([1.0]), 1), lambda m: m.left_shift(m.array([1]), 1.5),
    lambda m: m.right_shift(m.array([1], m.int8), m.array([1], m.uint64)),
    lambda m: m.bitwise_xor(m.array([1j]), m.array([1j])),
    lambda m: m.array([True]) & 2.0, lambda m: m.array([1]) | m.array([2.0]),
    lambda m: m.array([1]) >> 1.0, lambda m: ~m.array([1.0], m.bfloat16),
    lambda m: m.array([1.0]).__ixor__(1), lambda m: m.array([1], m.uint8) << 3,
    lambda m: m.array([5]) & True]


@pytest.mark.parametrize("call", BITWISE_CALLS)
def test_bitwise_refusals_as_mlx(call):
    """MLX's bitwise functions refuse a float or complex promotion with RuntimeError naming
    both dtypes; its operators refuse a float operand first, with ValueError."""
    outcomes = []
    for m in (ml, mx):
        try:
            r = call(m)
            m.eval(r)
            outcomes.append(("ok", r.dtype.size, r.tolist()))
        except (ValueError, RuntimeError) as exc:  # the type, and what the message names
            text = str(exc)  # MLX's own messages vary: "[right_shift] ... float32 and
            # float32" for int8 and uint64, "not allowed bitwise xor" for `^=`
            named = text.split("]")[0] if text.startswith("[") else text.split(" ")[-2:]
            outcomes.append((type(exc).__name__, named))
    assert outcomes[0] == outcomes[1]
