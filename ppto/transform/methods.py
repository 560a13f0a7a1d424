"""Method calls differentiated as the functions they call.

``model.forward(x)``, where ``model`` is an object the function reads from its module
or a closure and ``forward`` a method its class defines in the user's code, becomes a
call of that function with the object first, ``Model_forward(model, x)``; the stages
after this one differentiate it as any function the user calls. Calling the object
itself, ``model(x)`` where its class defines ``__call__``, is the same call of
``__call__``.

Inside a method reached so, the object its ``self`` holds is known as well, so calls
through it are resolved alike: ``self.act(z)``, ``self.layer.forward(h)``,
``self.layer(h)`` and an attribute holding a function or NumPy's (``self.act =
np.tanh``): a model made of layers, as a PyTorch user writes one. Because what those
calls reach depends on the object, each method is differentiated once per object
it is called on, as a function object of its own (generated code is kept per
function object): two layers of one class get one derivative each.

``super().forward(x)`` in such a method is the call of the method the next class
in the object's MRO gives. A call of a method that only passes its call on (``def
__call__(self, *args, **kwargs): return self.forward(*args, **kwargs)``) is the
call of the method it passes it to (generated code takes no ``*args``). Local
names for layers (``layer = self.layer``), loops over layers and tests of
optional layers are settled first (``ppto.transform.layers``).

What this reads is watched (``Program.still_current``): the method found on the
object (``Layer.forward = other`` afterwards makes the program stale), each object
reached through another (``model.layer = other_layer``) and the layers of an
unrolled loop (``model.layers.append(layer)``).
"""

from __future__ import annotations

import inspect
import types

import gast

from ppto.runtime.tensor import Tensor
from ppto.transform import trees
from ppto.transform.fence import builtin_read_by_name, by_name_error
from ppto.transform.layers import (
    bound_to_a_layer,
    folded,
    holds_layers,
    inlined_aliases,
    loop_over_layers,
    unrolled,
)
from ppto.transform.objects import (
    MISSING,
    constant_key,
    read_value,
    spelled_as_reads,
    through_self,
)
from ppto.transform.resolve import classify, is_library, static_value
from ppto.transform.source import ParsedFunction, forwarded_method
from ppto.transform.trees import clone, stores


def methods_as_functions(parsed: ParsedFunction, program) -> set:
    """Rewrite the calls described in the module docstring in ``parsed``'s tree;
    returns the names the called functions are bound under (in its closure map)."""
    local = set(parsed.parameters) | stores(parsed.tree)
    own = own_object(parsed, program)
    labels: set = set()
    body = spelled_as_reads(parsed.tree.body, parsed, local, own, refuse=False)
    parsed.tree.body = inlined_aliases(body, parsed, local, own)
    local = set(parsed.parameters) | stores(parsed.tree)
    if own is not None:
        _refuse_tensors_through_self(parsed, local, own)
    parsed.tree.body = unrolled(parsed.tree.body, parsed, local, own, program)
    parsed.tree.body = folded(parsed.tree.body, parsed, local, own, program)
    parsed.tree.body = spelled_as_reads(parsed.tree.body, parsed, local, own)
    for node in trees.walk(parsed.tree):
        if not isinstance(node, gast.Call):
            continue
        _refuse_a_builtin_reading_by_name(node, parsed, local, own)
        call = _checkpointed_step(node, parsed, local, own, labels) or node
        forwarders: set = set()
        while _resolved(call, parsed, local, own, program, labels, forwarders):
            pass  # (a call of a forwarding method is resolved again as what it calls)
        if call is not node:  # ppto.checkpoint(Layer_forward)(layer, h)
            node.func.args[0] = call.func
            node.args = call.args
    return labels


def _refuse_a_builtin_reading_by_name(node: gast.Call, parsed, local: set, own):
    """Refuse a call reaching ``eval``, ``exec``, ``locals``, ``vars`` or
    ``globals`` through the object ``self`` holds (``self.run = eval``), which the
    fence (``fence.Fence.by_name``: names, attributes and items outside the
    function) cannot read: its result would be taken for a constant."""
    found, value = read_value(node.func, parsed, local, own, [])
    name = builtin_read_by_name(value) if found else None
    if name is not None and not (name == "vars" and node.args):  # (vars(obj))
        raise by_name_error(parsed.source, node, name)


def _checkpointed_step(node: gast.Call, parsed, local: set, own, labels: set):
    """For ``ppto.checkpoint(step)(h)``, the call ``step(h)`` to resolve as any
    (a method, ``layer.forward`` or ``self.layer``, becomes its function with the
    object first, checkpointed as a function is); else None. A method wrapped
    beforehand (``STEP = ppto.checkpoint(layer.forward)``, then ``STEP(h)``) is
    the call ``ppto.checkpoint(STEP.function)(h)`` first."""
    from ppto.checkpoint import Checkpointed, checkpoint

    wrapper = node.func
    found, value = read_value(wrapper, parsed, local, own, [])
    if found and isinstance(value, Checkpointed) and inspect.ismethod(value.function):
        label = _label(
            checkpoint, "checkpoint", parsed, local, parsed.namespace.maps[0]
        )
        labels.add(label)
        step = gast.Attribute(clone(wrapper), "function", gast.Load())
        wrapper = gast.Call(gast.Name(label, gast.Load(), None, None), [step], [])
        node.func = gast.copy_location(wrapper, node.func)
    if not isinstance(wrapper, gast.Call) or len(wrapper.args) != 1:
        return None
    found, value = read_value(wrapper.func, parsed, local, own, [])
    if not found or value is not checkpoint or wrapper.keywords:
        return None
    return gast.copy_location(
        gast.Call(wrapper.args[0], node.args, node.keywords), node
    )


def _resolved(node: gast.Call, parsed, local: set, own, program, labels, forwarders):
    """Resolve the call ``node`` (see ``methods_as_functions``), adding the names
    it binds to ``labels``; True where it was a call of a method forwarding its
    call (``def __call__(self, *args): return self.forward(*args)``), made the
    call of the method it forwards to (``self.forward(x)``): to resolve again."""
    closure = parsed.namespace.maps[0]  # where names resolve (see _own_names)
    holder = None  # (where the method is watched: its object, if None)
    found, callee, receiver, attribute, reached = _callee(node.func, parsed, local, own)
    if not found:
        found, holder, callee = _through_super(node.func, parsed, local, own)
        if not found:
            _refuse_what_self_cannot_call(node.func, parsed, local, own)
            _refuse_what_is_not_callable(node.func, parsed, local, own)
            _refuse_a_name_not_followed(node, parsed, local, own)
            _refuse_a_layer_not_known(node, parsed, local, own)
            return False
        receiver = gast.Name(own[0], gast.Load(), None, None)
        attribute, reached = node.func.attr, []
    if receiver is None:  # a function held by the object: called as it is
        label = _label(callee, attribute, parsed, local, closure)
        labels.add(label)
        program.reached.extend(reached)
        node.func = gast.Name(label, gast.Load(), None, None)
        return False
    method = _method(callee)
    if method is None:
        return False
    function = method.__func__
    program.reached.extend(reached)
    if attribute is not None:
        if holder is None:
            holder = method.__self__
        program.methods.append((holder, attribute, function))
    target = forwarded_method(function)
    if target is not None and function not in forwarders:
        forwarders.add(function)  # (one forwarding to itself: left as written)
        called = gast.Attribute(receiver, target, gast.Load())
        node.func = gast.copy_location(called, node.func)
        return True
    copy = program.method_copies.copy(function, method.__self__)
    label = _label(copy, program.method_copies.names[copy], parsed, local, closure)
    labels.add(label)
    node.args.insert(0, receiver)
    node.func = gast.Name(label, gast.Load(), None, None)
    return False


def _refuse_tensors_through_self(parsed: ParsedFunction, local: set, own) -> None:
    """Refuse, at its line, a read through ``self`` of a ppto tensor (``self.W``,
    ``self.inner.W``, ``self.weights[0]``, a class attribute) or of a list, tuple
    or dict holding one: generated code computes on raw arrays and reads what
    ``self`` holds when it runs, so it would get a tensor (an error from inside
    generated code, far from the user's line)."""
    for node in trees.walk(parsed.tree):
        if not isinstance(node, (gast.Attribute, gast.Subscript)):
            continue
        if not isinstance(node.ctx, gast.Load) or not through_self(node, own):
            continue
        found, value = read_value(node, parsed, local, own, [])
        if not found or not _holds_a_tensor(value):
            continue
        text = gast.unparse(node).strip()
        raise parsed.source.error(
            node,
            f"ppto cannot differentiate {parsed.name}: {text} is a ppto tensor, or "
            "holds one, and code generated for a method reads what self holds as "
            "arrays",
            f"hold NumPy arrays in the object ({text} = np.asarray(...)), or pass "
            "the tensor to the method as an argument",
        )


def _holds_a_tensor(value) -> bool:
    """Whether ``value`` is a ppto tensor or a list, tuple or dict with one."""
    if isinstance(value, Tensor):
        return True
    if isinstance(value, dict):
        value = list(value.values())
    return type(value) in (list, tuple) and any(isinstance(v, Tensor) for v in value)


def watch_held_callees(parsed: ParsedFunction, program, local: set, calls) -> None:
    """Record in ``program.reached`` each link of the attribute chains through which
    ``parsed`` calls an operator or a function, which the code is the derivative of
    (``CONFIG.layers.act(x)``: ``CONFIG.layers`` and ``.act``), where the link is an
    object's attribute, not a module's, and reads the same object each time (not a
    bound method made anew, a property: methods are watched as such). (What else
    is called through an object is called when the code runs.) ``local``: its
    parameters and the names it assigns; ``calls``: its Call nodes in
    ``trees.walk``'s order."""
    for node in calls:
        found, callee = static_value(node.func, parsed.namespace, local)
        if not found or classify(callee).kind not in ("operator", "function"):
            continue
        link = node.func
        while isinstance(link, gast.Attribute):
            found, holder = static_value(link.value, parsed.namespace, local)
            if not found:
                break
            value = getattr(holder, link.attr, MISSING)
            if (
                not isinstance(holder, types.ModuleType)
                and value is not MISSING
                and getattr(holder, link.attr, None) is value
            ):
                program.reached.append((holder, link.attr, value))
            link = link.value


def own_object(parsed: ParsedFunction, program):
    """``(self's name, the object)`` where ``parsed`` is a method differentiated for
    one object and never rebinds ``self``; else None."""
    objects = program.method_copies.objects
    if parsed.fn not in objects or not parsed.parameters:
        return None
    name = parsed.parameters[0]
    if name in stores(parsed.tree):
        return None
    return name, objects[parsed.fn]


def _callee(func: gast.expr, parsed: ParsedFunction, local: set, own):
    """``(found, callee, receiver, attribute, reached)``: what a call of ``func``
    calls, the expression for the object a method is called on (None for a function
    an object holds), the method's name on it, and the ``(object, attribute,
    value)`` steps it went through."""
    reached: list = []
    found, value = read_value(func, parsed, local, own, reached)
    if not found:
        return False, None, None, None, None
    if inspect.ismethod(value) and isinstance(func, gast.Attribute):
        if value.__self__ is reached[-1][0]:  # a method of the object read
            reached.pop()  # (the method itself is watched as one: Program.methods)
            return True, value, func.value, func.attr, reached
    if (
        inspect.ismethod(value)
        and isinstance(func, (gast.Attribute, gast.Subscript))
        and not inspect.isclass(value.__self__)  # (a classmethod: refused)
    ):
        # a bound method held in an attribute or list (self.act = layer.forward,
        # self.steps = [a.forward, b.forward]): its own object is the one to
        # pass (not the holder), read back from it where the call runs; where it
        # is held is watched as holding that bound method
        receiver = gast.Attribute(clone(func), "__self__", gast.Load())
        return True, value, receiver, None, reached
    if inspect.ismethod(value) and isinstance(func, gast.Name):
        # a bound method held under a name (forward = LAYER.forward): the object is
        # read back from it where the call runs; what the name holds is watched
        # as any global's value, and its method cannot change (no attribute)
        receiver = gast.Attribute(gast.Name(func.id, gast.Load(), None, None),
                                  "__self__", gast.Load())  # fmt: skip
        return True, value, receiver, None, reached
    if (  # a function the object holds (self.act = np.tanh), or a list
        isinstance(func, (gast.Attribute, gast.Subscript))
        and (through_self(func, own) or isinstance(func, gast.Subscript))
        and classify(value).kind in ("function", "operator")
    ):
        return True, value, None, _held_name(func), reached
    call = inspect.getattr_static(type(value), "__call__", None)
    if inspect.isfunction(call) and not is_library(call):  # (a model called)
        return True, value.__call__, func, "__call__", reached
    return False, None, None, None, None


def _refuse_what_self_cannot_call(func, parsed: ParsedFunction, local: set, own):
    """Refuse, saying why, a call through the known ``self`` of what no object
    gives (``self.child.forward()`` where ``self.child`` is None) or of a
    classmethod (later stages would say "self is an argument": it is not)."""
    if not isinstance(func, gast.Attribute) or not through_self(func, own):
        return
    found, holder = read_value(func.value, parsed, local, own, [])
    if not found:
        return
    text = gast.unparse(func).strip()
    held = gast.unparse(func.value).strip()
    if not hasattr(holder, func.attr):
        what = "None" if holder is None else f"a {type(holder).__name__}"
        raise parsed.source.error(
            func,
            f"ppto cannot differentiate the call {text}(): {held} is {what}, "
            f"which has no {func.attr}",
            f"test it first (if {held} is not None: is followed when the code is "
            "transformed), or give the object what it calls",
        )
    value = getattr(holder, func.attr)
    if inspect.ismethod(value) and inspect.isclass(value.__self__):
        if not is_library(value.__func__):
            raise parsed.source.error(
                func,
                f"ppto cannot differentiate the call {text}(): {func.attr} is a "
                "classmethod, whose first argument is its class",
                "make it a staticmethod or a method",
            )


def _refuse_what_is_not_callable(func, parsed: ParsedFunction, local: set, own):
    """Refuse at its line the call of an object read through a known object that
    cannot be called (``self.layers[0](x)`` of a layer whose class has no
    ``__call__``): left as it is, generated code raised Python's TypeError."""
    if not isinstance(func, (gast.Attribute, gast.Subscript)):
        return
    found, value = read_value(func, parsed, local, own, [])
    if not found or callable(value):
        return
    text = gast.unparse(func).strip()
    raise parsed.source.error(
        func,
        f"ppto cannot differentiate the call {text}(): {text} is a "
        f"{type(value).__name__}, which cannot be called",
        f"call one of its methods ({text}.forward(...)), or give its class a __call__",
    )


def _refuse_a_name_not_followed(call: gast.Call, parsed, local: set, own) -> None:
    """Refuse at its line the call, on values the function computes, of a local
    name given a layer, method or function of the user's code where
    ``inlined_aliases`` cannot replace it by what it reads (bound more than once
    or in a branch: which one a call reaches is known only when it runs),
    suggesting the call where it is held (it said "has no ppto operator"). (A
    call on constants alone is left to run as written.)"""
    func = call.func
    if not isinstance(func, gast.Name) or func.id not in local:
        return
    arguments = [*call.args, *(keyword.value for keyword in call.keywords)]
    if not any(_reads_a_local(argument, local) for argument in arguments):
        return
    for statement in trees.walk(parsed.tree):
        bound = bound_to_a_layer(statement, parsed, local, own)
        if bound is None or bound[0] != func.id:
            continue
        _, value = read_value(bound[1], parsed, local, own, [])
        if classify(value).kind == "operator":
            continue  # (np.tanh or np.sin, chosen in a branch: refused later)
        held = gast.unparse(bound[1]).strip()
        raise parsed.source.error(
            func,
            f"ppto cannot differentiate the call {func.id}(): ppto follows a local "
            f"name to the layer or function it holds ({held}) only where it is "
            "bound once, in the function's own block, before it is read, and the "
            "function assigns to no attribute or item of an object",
            f"call it where it is held ({held}(...)), or bind {func.id} once at "
            "the top of the function",
        )


def _refuse_a_layer_not_known(call: gast.Call, parsed, local: set, own) -> None:
    """Refuse at its line the call, on values the function computes, of an item
    of a list or dict of layers whose index is known only when the code runs
    (``self.layers[self.k](x)``), or of a loop's layer where the loop could not
    be unrolled (one with ``break``), saying what ppto follows (it said "has no
    ppto operator")."""
    arguments = [*call.args, *(keyword.value for keyword in call.keywords)]
    if not any(_reads_a_local(argument, local) for argument in arguments):
        return
    func = call.func
    if isinstance(func, gast.Attribute):  # (layer.forward(x))
        func = func.value
    if isinstance(func, gast.Subscript):
        found, held = read_value(func.value, parsed, local, own, [])
        if found and holds_layers(held):
            text = gast.unparse(func).strip()
            listed = gast.unparse(func.value).strip()
            raise parsed.source.error(
                func,
                f"ppto cannot differentiate the call of {text}: which layer of "
                f"{listed} it is is known only when the code runs, and ppto "
                "generates code for the layer called",
                f"index {listed} by a constant, or loop over it (for layer in "
                f"{listed}:, or over range(len({listed})): unrolled, one copy per "
                "layer)",
            )
    if not isinstance(func, gast.Name) or func.id not in local:
        return
    for loop in trees.walk(parsed.tree):
        if not loop_over_layers(loop, parsed, local, own):
            continue
        if func.id not in {n.id for n in trees.walk(loop.target) if hasattr(n, "id")}:
            continue
        raise parsed.source.error(
            func,
            f"ppto cannot differentiate the call of {func.id}: ppto unrolls a loop "
            "over layers (one copy of its body per layer) only where it has no "
            "return and not both break and continue, and its names are read "
            "only inside it",
            "move the exit out of the loop (compute what it tests after it), or "
            "call the layers one by one",
        )


def _reads_a_local(node, local: set) -> bool:
    return any(
        isinstance(name, gast.Name) and name.id in local for name in trees.walk(node)
    )


def _through_super(func: gast.expr, parsed: ParsedFunction, local: set, own):
    """``(found, the super object, its bound method)`` for ``super().forward`` in
    a method whose object is known: the method the classes after the one defining
    this method in the object's MRO give (read through the super object again
    when the program is checked: a base class's method given again is seen)."""
    if own is None or not isinstance(func, gast.Attribute):
        return False, None, None
    call = func.value
    if not (
        trees.called(call, "super")
        and not call.args
        and not call.keywords
        and "super" not in local
        and parsed.namespace.get("super", super) is super
    ):
        return False, None, None
    code = parsed.fn.__code__
    if "__class__" not in code.co_freevars:
        return False, None, None
    cell = parsed.fn.__closure__[code.co_freevars.index("__class__")]
    through = super(cell.cell_contents, own[1])
    method = getattr(through, func.attr, None)
    return inspect.ismethod(method), through, method


def _held_name(func: gast.expr) -> str:
    """A name for a function held in an object, list or dict, after where it is
    held: ``activation`` for ``self.activation``, ``layers_0`` for
    ``self.layers[0]``, ``layers_last_1`` for ``self.layers[-1]``, ``acts_relu``
    for ``self.acts["relu"]`` (not the function's own, ``tanh``: that is the name
    of ppto's operator)."""
    if isinstance(func, gast.Attribute):
        return func.attr
    holder = func.value
    held = getattr(holder, "attr", None) or getattr(holder, "id", "function")
    key = constant_key(func)
    if type(key) is int and key < 0:
        key = f"last_{-key}"
    name = f"{held}_{key}"
    return name if name.isidentifier() else f"{held}_item"


def _method(method):
    """The bound method to differentiate as its function, or None: a method of
    the user's code on an object (not a class: a classmethod's first argument is its
    class). (Tensors read through its self are refused in its copy, at their line:
    _refuse_tensors_through_self.)"""
    if not inspect.ismethod(method) or is_library(method.__func__):
        return None
    if not inspect.isfunction(method.__func__) or inspect.isclass(method.__self__):
        return None
    return method


def _label(value, label: str, parsed: ParsedFunction, local: set, closure) -> str:
    """A name to bind ``value`` under in the function's closure map (``label``, a
    method's copy's name, ``Layer_forward``, or the attribute a function is held
    in, ``activation``), not hiding a global of that name or a local."""
    while parsed.namespace.get(label, value) is not value or label in local:
        label += "_"
    closure[label] = value
    return label


class MethodCopies:
    """Each method's function as a function object of its own per object it is
    differentiated for (see the module docstring): the object its ``self`` holds,
    and the name of the functions generated for it (``Layer_forward``: the class's
    and the method's; error messages name the method as written)."""

    def __init__(self) -> None:
        self._copies: dict = {}  # (function, id of the object) -> its copy
        self.objects: dict = {}  # copy -> the object (kept alive: ids stay unique)
        self.names: dict = {}  # copy -> the name for generated functions

    def copy(self, function: types.FunctionType, owner) -> types.FunctionType:
        key = (function, id(owner))
        if key not in self._copies:
            copy = types.FunctionType(
                function.__code__,
                function.__globals__,
                function.__name__,
                function.__defaults__,
                function.__closure__,
            )
            copy.__kwdefaults__ = function.__kwdefaults__
            copy.__qualname__ = function.__qualname__
            copy.__module__ = function.__module__
            written = function.__name__  # (a lambda's is no identifier)
            written = written.strip("_") if written.isidentifier() else "lambda"
            name = f"{type(owner).__name__}_{written}"
            self._copies[key] = copy
            self.objects[copy] = owner
            self.names[copy] = name if name.isidentifier() else "method"
        return self._copies[key]
