"""Module: the base class of layers and models, a dict of its arrays, submodules and containers."""
from __future__ import annotations

import os
import textwrap
from typing import Any, Callable, List, Optional, Union

import streamlet.core as mx
from streamlet.utils import tree_flatten, tree_unflatten

# Attribute values of these types live in the module's dict (and so in its trees); any other
# value is a plain Python attribute.
_TREE_TYPES = (mx.array, dict, list, tuple)


class Module(dict):
    """Base class of every layer and model.

    A module is a ``dict`` of its arrays, submodules and nested lists / dicts of them, set as
    attributes (``self.weight = ...``); other attributes (ints, callables) are plain Python
    attributes.  :meth:`parameters` gathers the arrays as a tree; arrays whose key starts with
    ``_`` are not parameters.  Parameters can be frozen (:meth:`freeze`), which keeps them out of
    :meth:`trainable_parameters` and so out of :func:`streamlet.nn.value_and_grad`'s gradients.

    >>> class MLP(nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.layers = [nn.Linear(2, 8), nn.Linear(8, 1)]
    ...     def __call__(self, x):
    ...         return self.layers[1](nn.relu(self.layers[0](x)))
    >>> model = MLP()
    >>> [k for k, _ in tree_flatten(model.parameters())]
    ['layers.0.weight', 'layers.0.bias', 'layers.1.weight', 'layers.1.bias']
    >>> model(mx.zeros((4, 2))).shape
    (4, 1)
    """

    __call__: Callable

    def __init__(self):
        """Subclasses must call this before setting attributes."""
        self._no_grad = set()
        self._training = True

    @property
    def training(self) -> bool:
        """Whether the module is in training mode (see :meth:`train`)."""
        return self._training

    @property
    def state(self) -> "Module":
        """The module itself, as the dict of everything it holds (a live reference, not a copy)."""
        return self

    # ---- attributes: tree values in the dict, the rest as Python attributes ----------------

    def __getattr__(self, key: str):
        value = self.get(key, None)
        if value is None:
            # Python calls this also when a property's getter raised AttributeError: look the
            # name up once more so that the error raised is the getter's own (naming what is
            # really missing), as in MLX
            return object.__getattribute__(self, key)
        return value

    def __setattr__(self, key: str, value: Any):
        if isinstance(value, _TREE_TYPES):
            # a plain attribute would hide the dict entry; a class attribute (a method, a
            # property) can't be deleted, so shadowing one raises AttributeError as in MLX
            if hasattr(self, key) and key not in self:
                delattr(self, key)
            self[key] = value
        else:
            object.__setattr__(self, key, value)
            self.pop(key, None)

    def __delattr__(self, key: str):
        if self.get(key, None) is not None:
            del self[key]
        else:
            object.__delattr__(self, key)

    def _extra_repr(self) -> str:
        return ""

    def __repr__(self):
        # the module's own line first: when both it and a child fail to print, the module's
        # error is the one raised, as in MLX
        head = f"{type(self).__name__}({self._extra_repr()}"
        children = tree_flatten(self.children(), is_leaf=self.is_module)
        lines = [textwrap.indent(f"({k}): {v!r}", "  ") for k, v in children]
        body = "".join("\n" + line for line in lines) + ("\n" if lines else "")
        return f"{head}{body})"

    # ---- filters: what counts as a child, a parameter, a trainable parameter ----------------

    @staticmethod
    def is_module(value) -> bool:
        """Whether ``value`` is a :class:`Module` (an ``is_leaf`` for module trees)."""
        return isinstance(value, Module)

    @staticmethod
    def valid_child_filter(module, key, value) -> bool:
        """Containers that may hold submodules."""
        return isinstance(value, (dict, list))

    @staticmethod
    def valid_parameter_filter(module, key, value) -> bool:
        """Arrays and containers whose key does not start with ``_``."""
        return isinstance(value, (dict, list, mx.array)) and not key.startswith("_")

    @staticmethod
    def trainable_parameter_filter(module, key, value) -> bool:
        """Valid parameters that are not frozen."""
        return Module.valid_parameter_filter(module, key, value) and key not in module._no_grad

    def filter_and_map(self, filter_fn: Callable[[Module, str, Any], bool],
                       map_fn: Optional[Callable] = None,
                       is_leaf_fn: Optional[Callable[[Module, str, Any], bool]] = None) -> dict:
        """The module's contents, recursively, kept where ``filter_fn(module, key, value)`` holds.

        Kept leaves (by default anything but modules, dicts and lists; else where
        ``is_leaf_fn(module, key, value)``) go through ``map_fn``.  Inside a container a value
        that is not kept becomes ``{}``, so lists keep their positions.

        >>> nn.Linear(2, 3).filter_and_map(lambda m, k, v: k == "bias", lambda v: v.shape)
        {'bias': (3,)}
        """
        map_fn = map_fn or (lambda x: x)
        is_leaf_fn = is_leaf_fn or (lambda m, k, v: not isinstance(v, (Module, dict, list)))
        return _walk(self, filter_fn, map_fn, is_leaf_fn)

    def parameters(self) -> dict:
        """Every array of the module and its submodules, as a tree of dicts and lists.

        >>> sorted(nn.Linear(2, 3).parameters())
        ['bias', 'weight']
        """
        return self.filter_and_map(self.valid_parameter_filter)

    def trainable_parameters(self) -> dict:
        """The parameters that are not frozen, as a tree of dicts and lists.

        >>> list(nn.Linear(2, 3).freeze(keys="bias").trainable_parameters())
        ['weight']
        """
        return self.filter_and_map(self.trainable_parameter_filter)

    def children(self) -> dict:
        """The direct submodules (inside their containers).

        >>> list(nn.Sequential(nn.ReLU()).children()["layers"][0].items())
        []
        """
        return self.filter_and_map(self.valid_child_filter,
                                   is_leaf_fn=lambda m, k, v: isinstance(v, Module))

    def leaf_modules(self) -> dict:
        """The submodules that contain no other module (inside their containers).

        >>> [k for k, _ in tree_flatten(nn.Sequential(nn.Linear(1, 1), nn.ReLU()).leaf_modules(),
        ...                              is_leaf=nn.Module.is_module)]
        ['layers.0', 'layers.1']
        """
        def is_leaf_module(m, k, v):
            return isinstance(v, Module) and not tree_flatten(v.children())

        return self.filter_and_map(self.valid_child_filter, is_leaf_fn=is_leaf_module)

    # ---- updating parameters and submodules -------------------------------------------------

    def update(self, parameters: dict, strict: bool = True) -> Module:
        """Replace parameters with the arrays of ``parameters`` (all or part of the tree).

        With ``strict``, every path of ``parameters`` must name an existing parameter and every
        new value must be an array (``ValueError`` otherwise).

        >>> m = nn.Linear(2, 2).update({"bias": mx.zeros((2,))})
        >>> m.bias.tolist()
        [0.0, 0.0]
        """
        _update_tree(self, parameters, strict, _set_parameter)
        return self

    def update_modules(self, modules: dict, strict: bool = True) -> Module:
        """Replace submodules with those of ``modules`` (all or part of the tree of modules).

        >>> m = nn.Sequential(nn.Linear(2, 2), nn.ReLU())
        >>> m.update_modules({"layers": [{}, nn.GELU()]}).layers[1]
        GELU()
        """
        _update_tree(self, modules, strict, _set_module)
        return self

    def apply(self, map_fn: Callable[[mx.array], mx.array],
              filter_fn: Optional[Callable[[Module, str, Any], bool]] = None) -> Module:
        """Replace each parameter (selected by ``filter_fn``) with ``map_fn(parameter)``.

        >>> nn.Linear(2, 2).apply(lambda x: x.astype(mx.float16)).weight.dtype
        mlx.core.float16
        """
        self.update(self.filter_and_map(filter_fn or Module.valid_parameter_filter, map_fn))
        return self

    def apply_to_modules(self, apply_fn: Callable[[str, Module], Any]) -> Module:
        """Call ``apply_fn(path, module)`` on this module (path ``""``) and every submodule.

        >>> m = nn.Sequential(nn.Linear(2, 2))
        >>> _ = m.apply_to_modules(lambda path, mod: print(repr(path), type(mod).__name__))
        '' Sequential
        'layers.0' Linear
        """
        stack = [("", self)]
        while stack:
            path, module = stack.pop()
            apply_fn(path, module)
            prefix = "." + path if path else ""
            stack.extend(tree_flatten(module.children(), prefix=prefix, is_leaf=self.is_module))
        return self

    def modules(self) -> List[Module]:
        """This module and all its submodules, in :meth:`apply_to_modules` order.

        >>> len(nn.Sequential(nn.Linear(2, 2), nn.ReLU()).modules())
        3
        """
        found = []
        self.apply_to_modules(lambda _, m: found.append(m))
        return found

    def named_modules(self) -> list:
        """``(path, module)`` for this module and all its submodules.

        >>> [k for k, _ in nn.Sequential(nn.Linear(2, 2)).named_modules()]
        ['', 'layers.0']
        """
        found = []
        self.apply_to_modules(lambda k, m: found.append((k, m)))
        return found

    # ---- freezing -----------------------------------------------------------------------

    def _validate_keys(self, keys, strict):
        keys = keys if isinstance(keys, list) else [keys]
        if strict:
            for k in keys:
                if k not in self:
                    raise KeyError(f"Module doesn't contain member {k}.")
        return keys

    def _validate_keys_recursive(self, keys):
        # a key such as "bias" need only exist somewhere in the model, not in every module
        modules = self.modules()
        for k in keys if isinstance(keys, list) else [keys]:
            if not any(k in m for m in modules):
                raise KeyError(f"Module doesn't contain member {k}.")

    def _each_module(self, recurse, keys, strict, fn):
        if recurse:
            if strict and keys is not None:
                self._validate_keys_recursive(keys)
                strict = False
            self.apply_to_modules(lambda _, m: fn(m, strict))
        else:
            fn(self, strict)
        return self

    def freeze(self, *, recurse: bool = True, keys: Optional[Union[str, List[str]]] = None,
               strict: bool = False) -> Module:
        """Freeze parameters: leave them out of :meth:`trainable_parameters` (idempotent).

        Args:
            recurse (bool): Freeze the submodules' parameters too. Default: ``True``.
            keys (str or list[str], optional): Only these parameter names (e.g. ``"bias"``);
                by default all of each module's own parameters.
            strict (bool): Raise ``KeyError`` for a key no module has. Default: ``False``.

        >>> m = nn.Linear(2, 2).freeze()
        >>> m.trainable_parameters()
        {}
        """
        def freeze_one(m, strict):
            local = keys
            if local is None:
                own = m.filter_and_map(lambda m, k, v: not isinstance(v, Module)
                                       and m.valid_parameter_filter(m, k, v))
                local = [k for k, _ in tree_flatten(own)]
            m._no_grad.update(m._validate_keys(local, strict))

        return self._each_module(recurse, keys, strict, freeze_one)

    def unfreeze(self, *, recurse: bool = True, keys: Optional[Union[str, List[str]]] = None,
                 strict: bool = False) -> Module:
        """Unfreeze parameters (all, or the named ``keys``); arguments as in :meth:`freeze`.

        >>> sorted(nn.Linear(2, 2).freeze().unfreeze(keys="bias").trainable_parameters())
        ['bias']
        """
        def unfreeze_one(m, strict):
            if keys is None:
                m._no_grad.clear()
            else:
                m._no_grad.difference_update(m._validate_keys(keys, strict))

        return self._each_module(recurse, keys, strict, unfreeze_one)

    # ---- modes and dtypes ------------------------------------------------------------------

    def _set_training_mode(self, mode: bool) -> None:
        self._training = mode

    def train(self, mode: bool = True) -> Module:
        """Put this module and its submodules in training (or, with ``False``, evaluation) mode.

        >>> nn.Dropout(0.5).train(False).training
        False
        """
        self.apply_to_modules(lambda _, m: m._set_training_mode(mode))
        return self

    def eval(self) -> Module:
        """Evaluation mode: ``train(False)``.

        >>> nn.Dropout(0.5).eval().training
        False
        """
        return self.train(False)

    def set_dtype(self, dtype: mx.Dtype,
                  predicate: Optional[Callable[[mx.Dtype], bool]] =
                  lambda x: mx.issubdtype(x, mx.floating)):
        """Cast the parameters whose dtype satisfies ``predicate`` (floating ones by default).

        >>> m = nn.Linear(2, 2); m.set_dtype(mx.bfloat16); m.weight.dtype
        mlx.core.bfloat16
        """
        predicate = predicate or (lambda _: True)
        self.apply(lambda x: x.astype(dtype) if predicate(x.dtype) else x)

    # ---- weights on disk -------------------------------------------------------------------

    def load_weights(self, file_or_weights, strict: bool = True) -> Module:
        """Load parameters from a ``.npz`` or ``.safetensors`` file or a list of (name, array).

        With ``strict`` the names and shapes must match the model's parameters exactly
        (``ValueError`` otherwise); without it only the given names are updated, unchecked.

        >>> m = nn.Linear(2, 2).load_weights([("bias", mx.ones((2,)))], strict=False)
        >>> m.bias.tolist()
        [1.0, 1.0]
        """
        weights = file_or_weights
        if isinstance(weights, (str, os.PathLike)):
            weights = list(mx.load(os.fspath(weights)).items())
        if strict:
            _check_weights(dict(weights), tree_flatten(self.parameters(), destination={}))
        if len(weights) != 0:
            self.update(tree_unflatten(weights), strict=False)
        return self

    def save_weights(self, file: str):
        """Save the parameters to ``file``: ``.npz`` (:func:`savez`) or ``.safetensors``."""
        flat = tree_flatten(self.parameters(), destination={})
        name = os.fspath(file)
        if name.endswith(".npz"):
            mx.savez(name, **flat)
        elif name.endswith(".safetensors"):
            mx.save_safetensors(name, flat)
        else:
            raise ValueError(f"Unsupported file extension for {name}. "
                             "Use '.npz' or '.safetensors'.")


def _walk(module, filter_fn, map_fn, is_leaf_fn):
    """``filter_and_map`` of one module: its kept entries, each unwrapped."""
    return {k: _unwrap(module, k, v, filter_fn, map_fn, is_leaf_fn)
            for k, v in module.items() if filter_fn(module, k, v)}


def _unwrap(module, key, value, filter_fn, map_fn, is_leaf_fn):
    if is_leaf_fn(module, key, value):
        return map_fn(value)
    if isinstance(value, Module):
        return _walk(value, filter_fn, map_fn, is_leaf_fn)
    if isinstance(value, (dict, list)):
        # inside a container the filter sees the dotted key, relative to the module
        items = value.items() if isinstance(value, dict) else enumerate(value)
        out = {k: (_unwrap(module, f"{key}.{k}", v, filter_fn, map_fn, is_leaf_fn)
                   if filter_fn(module, f"{key}.{k}", v) else {}) for k, v in items}
        return out if isinstance(value, dict) else list(out.values())
    raise RuntimeError("Unexpected leaf found while traversing the module")


def _set_parameter(dst, key, current, new, strict):
    """One step of :meth:`Module.update`: True when ``dst[key]`` was a leaf (now replaced)."""
    if not isinstance(current, mx.array):
        return False
    if strict and not isinstance(new, mx.array):
        raise ValueError(f"Received invalid type: {type(new).__name__}.")
    dst[key] = new
    return True


def _set_module(dst, key, current, new, strict):
    """One step of :meth:`Module.update_modules`: True when the entry needs no descent."""
    if isinstance(current, Module) and isinstance(new, Module):
        dst[key] = new
        return True
    if isinstance(current, (dict, list)):
        return False
    if strict and new != {}:
        raise ValueError(f"Received invalid type: {type(new).__name__}.")
    return True


def _update_tree(dst, src, strict, set_leaf):
    """Walk ``src`` over ``dst``; ``set_leaf`` replaces entries or says to descend."""
    what = "parameter" if set_leaf is _set_parameter else "sub-module"
    if isinstance(src, dict):
        for k, new in src.items():
            if k in dst:
                if not set_leaf(dst, k, dst[k], new, strict):
                    _update_tree(dst[k], new, strict, set_leaf)
            elif strict:
                raise ValueError(f'Module does not have {what} named "{k}".')
    elif isinstance(src, list):
        for i, new in enumerate(src):
            if i >= len(dst):
                if strict:
                    raise ValueError(f"List index {i} is out of bounds for destination of "
                                     f"length {len(dst)}.")
                continue
            if not set_leaf(dst, i, dst[i], new, strict):
                _update_tree(dst[i], new, strict, set_leaf)
    elif strict:
        raise ValueError(f"Received invalid type: {type(src).__name__}.")


def _check_weights(new, current):
    """``load_weights(strict=True)``: same names, arrays of the same shapes."""
    if extras := new.keys() - current.keys():
        raise ValueError(f"Received {len(extras)} parameters not in model: \n"
                         + ",\n".join(sorted(extras)) + ".")
    if missing := current.keys() - new.keys():
        raise ValueError(f"Missing {len(missing)} parameters: \n" + ",\n".join(sorted(missing))
                         + ".")
    for k, v in current.items():
        if not isinstance(new[k], mx.array):
            raise ValueError(f"Expected mx.array but received {type(new[k])} for parameter {k}")
        if new[k].shape != v.shape:
            raise ValueError(f"Expected shape {v.shape} but received shape {new[k].shape} "
                             f"for parameter {k}")
