"""Cases a differential fuzz of function export/import, export_to_dot and array file io
against MLX 0.32.4 found: the error types of unreadable function files, of a function or
metadata of the wrong type, of non-array arguments to export_to_dot, and of the io
functions' bad files, names, keys and metadata values.  (MLX's RuntimeError
"std::bad_cast", its failed cast of an argument, is a TypeError here.)"""
from __future__ import annotations

import io

import pytest

import streamlet.core as mx
from parity import error_type


def _same_error(mlx, make):
    want = error_type(lambda: make(mlx))
    assert want is not None
    assert error_type(lambda: make(mx)) is want


# -- export_function / import_function ----------------------------------------------------------
@pytest.mark.parametrize("content", [b"", b"hello world" * 10, b"\x93NUMPY" + b"\x00" * 100])
def test_an_unreadable_function_file_is_a_runtime_error(mlx, tmp_path, content):
    path = tmp_path / "f.fn"
    path.write_bytes(content)
    _same_error(mlx, lambda m: m.import_function(str(path)))


def test_a_truncated_function_file_is_a_runtime_error(mlx, tmp_path):
    for m, name in ((mlx, "theirs.fn"), (mx, "ours.fn")):
        path = tmp_path / name
        m.export_function(str(path), lambda x: x + 1, m.array(1.0))
        path.write_bytes(path.read_bytes()[:-3])
    assert error_type(lambda: mlx.import_function(str(tmp_path / "theirs.fn"))) is RuntimeError
    assert error_type(lambda: mx.import_function(str(tmp_path / "ours.fn"))) is RuntimeError


@pytest.mark.parametrize("how", ["export_function", "exporter"])
def test_a_function_that_is_not_callable_is_a_type_error(mlx, tmp_path, how):
    path = str(tmp_path / "f.fn")

    def make(m):
        if how == "exporter":
            return m.exporter(path, 5)
        return m.export_function(path, 5, [1.0])  # the function is checked first
    _same_error(mlx, make)


@pytest.mark.parametrize("metadata", [5, b"bytes", ["x"]])
def test_metadata_of_the_wrong_type_is_refused_before_the_inputs(mlx, tmp_path, metadata):
    path = str(tmp_path / "f.fn")
    _same_error(mlx, lambda m: m.export_function(path, lambda x: x, [1.0], metadata=metadata))


# -- export_to_dot -------------------------------------------------------------------------------
@pytest.mark.parametrize("case", ["none", "int", "str", "dict_of_int", "numpy", "kw_int",
                                  "kw_none", "kw_tuple", "kw_dict", "kw_list", "file_none"])
def test_export_to_dot_refuses_what_mlx_refuses(mlx, case):
    import numpy as np

    def make(m):
        a = m.ones(2) + 1
        args, kwargs, file = {
            "none": ((None,), {}, io.StringIO()), "int": ((3,), {}, io.StringIO()),
            "str": (("s",), {}, io.StringIO()), "dict_of_int": (({"k": 1},), {}, io.StringIO()),
            "numpy": ((np.ones(2),), {}, io.StringIO()),
            "kw_int": ((a,), {"x": 1}, io.StringIO()),
            "kw_none": ((a,), {"x": None}, io.StringIO()),
            "kw_tuple": ((a,), {"x": (a,)}, io.StringIO()),
            "kw_dict": ((a,), {"x": {}}, io.StringIO()),
            "kw_list": ((a,), {"x": []}, io.StringIO()),
            "file_none": ((a,), {}, None)}[case]
        m.export_to_dot(file, *args, **kwargs)
    _same_error(mlx, make)


def test_export_to_dot_checks_the_arrays_before_the_file(mlx):
    _same_error(mlx, lambda m: m.export_to_dot(5, None))
    _same_error(mlx, lambda m: m.export_to_dot(5, m.ones(1), x=(m.ones(1),)))


# -- save / load ---------------------------------------------------------------------------------
@pytest.mark.parametrize("op", ["save", "save_gguf"])
def test_saving_into_a_missing_folder_is_a_runtime_error(mlx, tmp_path, op):
    path = str(tmp_path / "nope" / "x")

    def make(m):
        if op == "save":
            return m.save(path + ".npy", m.ones(2))
        return m.save_gguf(path + ".gguf", {"a": m.ones(2)}, {})
    _same_error(mlx, make)


@pytest.mark.parametrize("op, file", [("save", "int"), ("save_safetensors", "int"),
                                      ("save_safetensors", "none"), ("save_gguf", "int"),
                                      ("save_gguf", "bytesio")])
def test_a_file_that_is_neither_a_path_nor_a_file_object(mlx, op, file):
    def make(m):
        target = {"int": 3, "none": None, "bytesio": io.BytesIO()}[file]
        if op == "save":
            m.save(target, m.ones(2))
        elif op == "save_safetensors":
            m.save_safetensors(target, {"a": m.ones(2)})
        else:
            m.save_gguf(target, {"a": m.ones(2)}, {})
    _same_error(mlx, make)


@pytest.mark.parametrize("op, case", [
    ("save_safetensors", "key_int"), ("save_safetensors", "key_none"),
    ("save_safetensors", "meta_list"), ("save_gguf", "arrays_list"), ("save_gguf", "key_int"),
    ("save_gguf", "key_none"), ("save_gguf", "meta_list")])
def test_arrays_and_metadata_of_the_wrong_type(mlx, tmp_path, op, case):
    path = str(tmp_path / "w")

    def make(m):
        a = m.ones(2)
        arrays, meta = {"arrays_list": ([a], None), "key_int": ({1: a}, None),
                        "key_none": ({None: a}, None),
                        "meta_list": ({"a": a}, [("k", "v")])}[case]
        if op == "save_safetensors":
            return m.save_safetensors(path, arrays, meta)
        return m.save_gguf(path, arrays, meta if meta is not None else {})
    _same_error(mlx, make)


@pytest.mark.parametrize("value", ["int", "float", "bool", "list_int", "list_mixed", "bytes",
                                   "dict", "list_array", "key_int"])
def test_gguf_metadata_values_mlx_cannot_cast(mlx, tmp_path, value):
    path = str(tmp_path / "m.gguf")

    def make(m):
        meta = {"int": {"k": 3}, "float": {"k": 1.5}, "bool": {"k": True},
                "list_int": {"k": [1, 2]}, "list_mixed": {"k": ["a", 1]}, "bytes": {"k": b"x"},
                "dict": {"k": {"a": "b"}}, "list_array": {"k": [m.ones(1)]},
                "none": {"k": None}, "key_int": {1: "v"}}[value]
        m.save_gguf(path, {"a": m.ones(2)}, meta)
    _same_error(mlx, make)


def test_a_non_array_in_savez_is_refused_before_a_name_clash(mlx, tmp_path):
    import numpy as np
    path = str(tmp_path / "z.npz")
    _same_error(mlx, lambda m: m.savez(path, np.ones(2), arr_0=m.ones(2)))
    _same_error(mlx, lambda m: m.savez_compressed(path, [1, 2], arr_0=m.ones(2)))


def test_loading_gguf_from_a_file_object_or_a_folder(mlx, tmp_path):
    path = str(tmp_path / "w.gguf")
    mlx.save_gguf(path, {"a": mlx.ones(2)}, {})
    for fmt in (None, "gguf"):
        def make(m):
            with open(path, "rb") as f:
                return m.load(f, format=fmt) if fmt else m.load(f)
        _same_error(mlx, make)
    _same_error(mlx, lambda m: m.load(str(tmp_path), format="gguf"))
    _same_error(mlx, lambda m: m.load(str(tmp_path / "missing.gguf")))


def test_loading_from_a_file_opened_in_text_mode(mlx, tmp_path):
    path = str(tmp_path / "a.npy")
    mlx.save(path, mlx.arange(3))
    for fmt in (None, "npy"):
        def make(m):
            with open(path) as f:
                return m.load(f, format=fmt)
        _same_error(mlx, make)


def test_savez_to_no_file_is_refused_before_a_name_clash(mlx):
    for op in ("savez", "savez_compressed"):
        _same_error(mlx, lambda m: getattr(m, op)(None, m.ones(2), arr_0=m.ones(2)))


def test_save_gguf_checks_the_file_before_the_metadata_keys(mlx):
    _same_error(mlx, lambda m: m.save_gguf(io.BytesIO(), {"a": m.ones(2)}, {None: "v"}))
