"""The C forms of elementwise ops: what a generated GPU kernel computes for each.

An op's row in the elementwise tables carries its `CForm` (`Primitive.cform`); a GPU
backend fuses the ops that have one into generated kernels (`backend.cuda_fuse`) and
runs the others alone.  A form is a C expression of the operands `{0}`, `{1}`, `{2}`,
already converted to the compute type `T`; `@f(` is a math function, spelled `ff(` when
`T` is float.
"""
from __future__ import annotations

import re

FLOATS = ("float", "double")
UNSIGNED = ("bool", "unsigned char", "unsigned short", "unsigned int", "unsigned long long")


class CForm:
    """One op's C expression, by the kind of its compute type.

    `signed` and `unsigned` (bool included) default to the float form; None where no
    form exists for that kind.  `float_only`: computed in a float type only (integer
    inputs are converted by the op's own dtype rule first).  `bool_ok`: False where NumPy
    special-cases bool inputs.  `cast`: a conversion (float -> int rounds as the CPU's,
    `cuda_fuse.X86_CASTS`).  `select`: the first operand is a condition, read as bool.
    """

    __slots__ = ("float", "signed", "unsigned", "float_only", "bool_ok", "cast", "select")

    def __init__(self, form, signed=..., unsigned=..., float_only=False, bool_ok=True,
                 cast=False, select=False):
        self.float = form
        self.signed = form if signed is ... else signed
        self.unsigned = self.signed if unsigned is ... else unsigned
        self.float_only, self.bool_ok, self.cast, self.select = float_only, bool_ok, cast, select

    def text(self, t):
        """The form for compute type `t` (a C type name), or None."""
        if t in FLOATS:
            return self.float
        return self.unsigned if t in UNSIGNED else self.signed

    def render(self, t, operands):
        """The C text computing the op in type `t` on `operands` (C expressions of type `t`)."""
        text = self.text(t).replace("(T)", f"({t})").format(*operands)
        return _MATH.sub(lambda m: m.group(1) + ("f(" if t == "float" else "("), text)

    def takes(self, compute):
        """Whether a kernel computing in C type `compute` has this op's form."""
        if self.float_only and compute not in FLOATS:
            return False
        if compute == "bool" and not self.bool_ok:
            return False
        return self.text(compute) is not None


_MATH = re.compile(r"@(\w+)\(")


def _float(form):
    return CForm(form, float_only=True)


UNARY = {
    "negative": CForm("-{0}", bool_ok=False), "positive": CForm("{0}"),
    "square": CForm("{0} * {0}", bool_ok=False),
    "sqrt": _float("@sqrt({0})"), "rsqrt": _float("(T)1 / @sqrt({0})"),
    "reciprocal": _float("(T)1 / {0}"), "exp": _float("@exp({0})"),
    "expm1": _float("@expm1({0})"), "log": _float("@log({0})"),
    "log1p": _float("@log1p({0})"), "log2": _float("@log2({0})"),
    "log10": _float("@log10({0})"), "sin": _float("@sin({0})"), "cos": _float("@cos({0})"),
    "tan": _float("@tan({0})"), "tanh": _float("@tanh({0})"), "sinh": _float("@sinh({0})"),
    "cosh": _float("@cosh({0})"), "arcsin": _float("@asin({0})"),
    "arccos": _float("@acos({0})"), "arctan": _float("@atan({0})"),
    "sigmoid": _float("(T)1 / ((T)1 + @exp(-{0}))"),
    "logical_not": CForm("!(bool){0}"),
    "abs": CForm("@fabs({0})", "({0} < 0 ? -{0} : {0})", "{0}"),
    "sign": CForm("(T)(({0} > 0) - ({0} < 0))", unsigned="(T)({0} > 0)",  # NaN's sign is 0
                  bool_ok=False),
    "floor": CForm("@floor({0})", "{0}"), "ceil": CForm("@ceil({0})", "{0}"),
    "trunc": CForm("@trunc({0})", "{0}"),
    "isnan": CForm("isnan({0})", "false"), "isinf": CForm("isinf({0})", "false"),
    "isfinite": CForm("isfinite({0})", "true"),
    "bitwise_invert": CForm(None, "~{0}", bool_ok=False),
}

BINARY = {
    "add": CForm("{0} + {1}"), "subtract": CForm("{0} - {1}"),
    "multiply": CForm("{0} * {1}"), "divide": _float("{0} / {1}"),
    "power": _float("@pow({0}, {1})"), "arctan2": _float("@atan2({0}, {1})"),
    "minimum": CForm("({0} < {1} || {0} != {0}) ? {0} : {1}"),
    "maximum": CForm("({0} > {1} || {0} != {0}) ? {0} : {1}"),
    "equal": CForm("{0} == {1}"), "not_equal": CForm("{0} != {1}"),
    "less": CForm("{0} < {1}"), "less_equal": CForm("{0} <= {1}"),
    "greater": CForm("{0} > {1}"), "greater_equal": CForm("{0} >= {1}"),
    "logical_and": CForm("(bool){0} && (bool){1}"),
    "logical_or": CForm("(bool){0} || (bool){1}"),
    "logical_xor": CForm("(bool){0} != (bool){1}"),
    "bitwise_and": CForm(None, "{0} & {1}"), "bitwise_or": CForm(None, "{0} | {1}"),
    "bitwise_xor": CForm(None, "{0} ^ {1}"),
}

ASTYPE = CForm("{0}", cast=True)
WHERE = CForm("{0} ? {1} : {2}", select=True)
