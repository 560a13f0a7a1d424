"""The transformation pipeline: a user function in, a ``Program`` of generated
functions out (the function's derivative plus the forward/backward pairs of the user
functions it calls), readable and ready to compile or lower.

Modes: ``combined`` generates ``f_grad(*args) -> (value, gradients)`` (forward and
backward in one body, used by ``grad`` and ``value_and_grad``); ``split`` generates
``f_forward(*args) -> (value, saved)`` and ``f_backward(saved, cotangent) ->
gradients`` (used by ``vjp`` and for called functions).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import operator
import weakref
from dataclasses import dataclass, field

import gast

from ppto.checkpoint import may_draw, random_states, replayed
from ppto.errors import GradError, ShapeError, TransformError
from ppto.ops.shape import ones_like
from ppto.transform import (
    aliases,
    fence,
    in_place,
    ir,
    lists,
    origins,
    rank_0_arguments,
    trees,
)
from ppto.transform.analyze import (
    UNKNOWN_LAYOUT,
    analyze,
    call_specialisation,
    check_reachable,
    holds_numbers,
    operand_rank,
    operand_shape,
)
from ppto.transform.defaults import (
    bind_defaults,
    changeable_defaults,
    is_literal,
    watched_defaults,
)
from ppto.transform.dicts import keys_read_once
from ppto.transform.emit import compile_source, render_function, rendered_functions
from ppto.transform.idioms import sort_by_permutation, stop_shift_gradients
from ppto.transform.local_functions import localised, specialisation
from ppto.transform.lower import raw_value
from ppto.transform.methods import (
    MethodCopies,
    methods_as_functions,
    own_object,
    watch_held_callees,
)
from ppto.transform.names import Namer, names_in
from ppto.transform.normalize import Normalizer, varied_names
from ppto.transform.objects import holds
from ppto.transform.optimize import (
    coalesce_copies,
    drop_default_arguments,
    drop_unit_factors,
    elide_broadcasts,
    fold_reduced_counts,
    remove_unused,
)
from ppto.transform.optimize_accumulators import write_distinct_slices
from ppto.transform.optimize_cse import eliminate_common_subexpressions
from ppto.transform.optimize_helpers import fold_shape_helpers
from ppto.transform.reverse import (
    Generator,
    References,
    assign,
    call,
    free_reads,
    name,
)
from ppto.transform.source import (
    RESULT_KEYS,
    ParsedFunction,
    enclosing_function,
    parse_function,
    signature,
)
from ppto.transform.ssa import rename
from ppto.transform.structure import (
    UNKNOWN_IS_SEQUENCE,
    lift_conditionals,
    loops,
    single_exit,
    unpack_in_steps,
)
from ppto.transform.trees import clone, function_definition, stores


@dataclass
class Program:
    """Generated functions sharing one namespace; ``entry`` is the one to call."""

    functions: list = field(default_factory=list)  # gast.FunctionDef, callees first
    refs: References | None = None
    namer: Namer | None = None
    entry: str = ""
    entries: tuple = ()
    callee_plans: dict = field(default_factory=dict)
    transforming: list = field(default_factory=list)  # functions, outermost first
    result_ranks: dict = field(default_factory=dict)
    layouts: dict = field(default_factory=dict)
    tangent_parameters: dict = field(default_factory=dict)  # jvp function -> names
    shapes: dict = field(default_factory=dict)  # of the entry function's arguments
    # the entry's parameters given callables: name -> the callable (see
    # local_functions.localised)
    statics: dict = field(default_factory=dict)
    dtypes: dict = field(default_factory=dict)  # of the entry function's arguments
    # the entry's parameters given tuples or lists of Python numbers: the alias
    # check takes their items for numbers (``h, w = size``), not rows of an array
    numbers: set = field(default_factory=set)
    # the entry's parameters given NumPy scalars (``np.float64(2.0)``): immutable,
    # as Python numbers are, where a 0-d array (of the same rank and dtype) is not
    scalars: set = field(default_factory=set)
    entry_function: object = None
    last_result_rank: int | None = None
    # generated function -> the image layout of its result, where the analysis
    # found one (nhwc for a conv2d's): vjp and jvp tag the entry's result with it
    result_layouts: dict = field(default_factory=dict)
    # generated forward function -> whether running it again may give other values
    # (it draws random numbers, reads an object's attribute, calls a function)
    reruns_differ: dict = field(default_factory=dict)
    value_shapes: dict = field(default_factory=dict)  # function -> known shapes
    # a call's specialisation -> (shape, dtype) of what the called function
    # returns (see _call_result)
    call_results: dict = field(default_factory=dict)
    # function -> likely shapes: the known ones, and a gradient's its value's (a
    # rule's result might still broadcast): fusion's choice of equivalent code only
    size_hints: dict = field(default_factory=dict)
    captured: list = field(default_factory=list)  # (function, {global: value read})
    watched: list | None = None  # (closure cell or globals dict, name, value read)
    # (object, attribute, function): a method differentiated as its function (a
    # method its class is given again, Layer.forward = other, makes this stale)
    methods: list = field(default_factory=list)
    # (object, its attribute, index or key, the value there): an object or
    # function reached through another to find a method (model.layer =
    # other_layer makes this stale), and (list, None, its items) for a loop
    # unrolled over them; objects here and in methods are held weakly once the
    # program is built (release)
    reached: list = field(default_factory=list)
    method_copies: MethodCopies = field(default_factory=MethodCopies)
    # the programs of a derivative differentiated again (grad(grad(f))): this one
    # calls their code, so it is stale when they are (f's global rebound)
    inner: list = field(default_factory=list)
    # the entry's parameters whose caller's array its code changes in place
    # (``a += ...``, ``a[i] = ...``, through a view) -> where: (file, line, the
    # user's text, the parameter as the user spells it); see ppto.shared_arguments
    written: dict = field(default_factory=dict)
    # (where it is) every parameter of the entry, in order -> as the user spells
    # it (``params[1]``), and the entry function's name
    spelled: dict = field(default_factory=dict)
    written_by: str = ""

    def still_current(self) -> bool:
        """Whether every global and closure value the transformed functions read is
        still what their scopes hold (a rebinding makes this program stale). Checked
        before every call of generated code, so made cheap: where each value lives
        is found once."""
        if self.watched is None:
            self.watched = list(_watched(self.captured))
        for place, variable, value in self.watched:
            if type(place) is dict:
                if place.get(variable, _MISSING) is not value:
                    return False
            elif _contents(place) is not value:
                return False
        for holder, attribute, function in self.methods:
            method = getattr(_referred(holder), attribute, None)
            if getattr(method, "__func__", None) is not function:
                return False
        for holder, key, value in self.reached:
            holder, value = _referred(holder), _referred(value)
            if holder is _MISSING or value is _MISSING:
                return False
            if not _still_holds(holder, key, value):
                return False
        return all(program.still_current() for program in self.inner)

    def values_read(self) -> list:
        """The global and closure values the program read."""
        if self.watched is None:
            self.watched = list(_watched(self.captured))
        return [value for _, _, value in self.watched]

    def release(self) -> None:
        """Let go of what only generating the code needed, and watch the objects
        reached weakly where they can be (an object gone: stale). A program is kept
        with the function it was made from while that lives (``ppto.api``), so it
        must not keep it alive (it did, with everything it read), nor the object
        whose method it differentiates (``ppto.grad(model.loss)``)."""
        self.watched = list(_watched(self.captured))
        self.captured, self.entry_function = [], None
        self.method_copies = MethodCopies()
        self.methods = [(_weakly(h), a, f) for h, a, f in self.methods]
        self.reached = [(_weakly(h), k, _weakly(v)) for h, k, v in self.reached]

    def generated_name(self, parsed: ParsedFunction, suffix: str) -> str:
        """A fresh name for a function generated from ``parsed``: ``f_grad``, and
        ``Layer_forward_backward`` for a method (see methods.py)."""
        written = self.method_copies.names.get(parsed.fn, parsed.name)
        return self.function_name(f"{written}{suffix}")

    def add(self, definition, activity, adjoints: dict | None = None) -> None:
        """Append a generated function, with the shapes its values are known to
        have (fusion does not join values of different shapes); ``adjoints`` maps
        values to their gradients' names."""
        self.functions.append(definition)
        self.value_shapes[definition.name] = activity.shapes
        hints = {n: s for n, s in activity.shapes.items() if s is not None}
        for value, adjoint in (adjoints or {}).items():
            if value in hints:
                hints.setdefault(adjoint, hints[value])
        # the entry's parameters given Python numbers (or tuples of them: a region
        # reading one as a number checks that it has no axes when it runs), so that
        # a region computes what numbers alone make once, as Python does
        # (``x * (n * n)``, see ``RegionWriter.number_values``)
        parameters = trees.named_parameters(definition.args)
        for number in self.numbers & set(parameters):
            hints.setdefault(number, ())
        self.size_hints[definition.name] = hints

    def function_name(self, preferred: str) -> str:
        return self.namer.fresh(preferred)

    def source(self) -> str:
        return "\n\n".join(render_function(f) for f in self.functions)

    def compile(self, label: str):
        namespace = dict(self.refs.namespace)
        source, table = rendered_functions(self.functions)
        compile_source(source, self.entry, namespace, label, table)
        return namespace


_MISSING = object()


def _weakly(value):
    """A weak reference to ``value`` where it takes one, else a callable giving
    it (a list, a number, None), called as the weak reference is; a super object
    (``super().forward`` watched) is made again from its class and a weak
    reference to its object."""
    if type(value) is super and value.__self__ is not None:
        owner = _weakly(value.__self__)
        return functools.partial(_super_again, value.__thisclass__, owner)
    try:
        return weakref.ref(value)
    except TypeError:
        return functools.partial(_itself, value)


def _super_again(klass, owner):
    owner = _referred(owner)
    return _MISSING if owner is _MISSING else super(klass, owner)


def _itself(value):
    return value


def _referred(reference):
    """What ``_weakly``'s reference gives, or ``_MISSING`` where it is gone."""
    value = reference()
    if value is None and type(reference) is weakref.ref:
        return _MISSING
    return value


def _still_holds(holder, key, value) -> bool:
    """Whether ``holder`` still holds ``value`` (see ``Program.reached``): under an
    attribute, at an index or key, or (key None) as its items (a dict's: its
    keys)."""
    if key is None:
        return len(holder) == len(value) and all(map(operator.is_, holder, value))
    if type(holder) in (list, tuple, dict):  # (an index or a key: objects.holds)
        return holds(holder, key) and holder[key] is value
    return getattr(holder, key, _MISSING) is value


def _watched(captured: list):
    """``(place, name, value)`` for each value the program read: a closure variable's
    cell, or the globals dict a global is looked up in."""
    for function, values in captured:
        cells = dict(zip(function.__code__.co_freevars, function.__closure__ or ()))
        for variable, value in values.items():
            yield cells.get(variable, function.__globals__), variable, value


def _contents(cell):
    try:
        return cell.cell_contents
    except ValueError:  # emptied (``del`` of the variable)
        return _MISSING


def free_globals(parsed: ParsedFunction, local: set, names: list) -> dict:
    """User globals and closure values the function's text refers to: of its
    ``names`` (its Name nodes, in ``trees.walk``'s order), those read and not
    ``local`` (its parameters and the names it assigns)."""
    closure, module_globals = parsed.namespace.maps[0], parsed.namespace.maps[1]
    found = {}
    for node in names:
        if isinstance(node.ctx, gast.Load):
            if node.id in local:
                continue
            if node.id in closure:
                found[node.id] = closure[node.id]
            elif node.id in module_globals:
                found[node.id] = module_globals[node.id]
    return found


def _own_names(parsed: ParsedFunction, captured: dict, program: Program) -> dict:
    """``captured`` (the globals and closure values ``parsed`` reads, by name), each
    under a name of its own in the program's shared namespace: a name another
    function of the program binds to another value (two closures of one factory,
    ``k`` = 2.0 and 5.0; globals of one name in two modules) is renamed in this
    function's text (``k_1``), which then reads its own value (it read the first
    function's)."""
    taken = program.refs.namespace
    renames = {
        key: program.namer.numbered(key)
        for key, value in captured.items()
        if key in taken and taken[key] is not raw_value(value)
    }
    if not renames:
        return captured
    for node in trees.walk(parsed.tree):
        if isinstance(node, gast.Name) and node.id in renames:
            node.id = renames[node.id]  # (loads only: captured names are not bound)
    closure = parsed.namespace.maps[0]  # where names resolve (calls, attributes)
    for original, renamed in renames.items():
        closure[renamed] = captured[original]
    return {renames.get(key, key): value for key, value in captured.items()}


def _generated(function) -> bool:
    """Whether ``function`` is code ppto generated (a derivative differentiated
    again): its source is registered under a name compile_source gives."""
    code = getattr(function, "__code__", None)
    return code is not None and code.co_filename.startswith("<ppto generated")


def _prepare(
    parsed: ParsedFunction,
    wrt: list[str],
    ranks: dict,
    program: Program,
    plan_reverse: bool = True,
    list_parameters=(),
    hints=None,
    described=None,
    numbers=(),
):
    """Normalize and analyze ``parsed`` and make its generator (``plan_reverse``:
    with the called functions' derivatives planned). ``described``: the shapes and
    dtypes its call gives its parameters (a called function's derivative is
    specialised on them, as the entry's is on its arguments'); ``numbers``: the
    parameters its call gives tuples or lists of numbers."""
    entry = parsed.fn is program.entry_function
    order = list(parsed.parameters)  # (as the caller passes them)
    parsed = bind_defaults(localised(parsed, program.statics if entry else None))
    fence.check(parsed)
    generated = _generated(parsed.fn)
    helper = not entry and not generated
    if helper and enclosing_function(parsed.fn) is parsed.fn:  # (not a lifted one)
        program.reached += watched_defaults(parsed.fn)
    code = getattr(parsed.fn, "__code__", None)
    if (
        code is not None
        and not generated
        and enclosing_function(parsed.fn) is parsed.fn
    ):
        # its text, which a reload may replace in the same function object
        # (IPython's autoreload sets f.__code__): generated code then is stale
        program.reached.append((parsed.fn, "__code__", code))
    # a function the differentiated one calls holds the caller's objects in the
    # parameters the call passes (the others have their defaults)
    passed = [name for name in parsed.parameters if name in ranks] if helper else ()
    if entry:
        numbers = program.numbers
    writes = {} if entry and not generated else None
    # (the entry's: a differentiated Python float has rank 0 too, but no dtype)
    # (a 0-d array, unlike a Python number or a NumPy scalar, which the key tells
    # by its dtype and ``scalars``, is written into by ``t = z; t += v``)
    zero_d = (
        {p for p in program.dtypes if ranks.get(p) == 0} - program.scalars
        if entry
        else ()
    )
    arrays = {
        name: None if name in zero_d and writes is not None else rank
        for name, rank in ranks.items()
    }
    aliases.check(
        parsed,
        arrays,
        passed,
        generated=generated,
        numbers=numbers,
        written=writes,
        zero_d=zero_d,
        defaults=changeable_defaults(parsed.fn) if helper else (),
        own=own_object(parsed, program),  # (what self's attributes hold)
    )
    for parameter, node in (writes or {}).items():
        line, _ = parsed.source.position(node)
        text = parsed.source.statement_text(node)
        spelled = parsed.spelled.get(parameter, parameter)  # (``params[1]``)
        program.written[parameter] = (parsed.source.filename, line, text, spelled)
    if writes:  # (the other parameter a refusal names)
        program.spelled = {p: parsed.spelled.get(p, p) for p in order}
        program.written_by = parsed.name
    # (after the check of what methods change or keep: it reads them as methods)
    methods = methods_as_functions(parsed, program)
    # (the tree as the methods' rewriting left it, read by the passes below, none
    # of which changes it: one walk serves them all)
    nodes = trees.nodes_by_kind(parsed.tree)
    stored, used, rebound = trees.function_names(parsed.tree, nodes)
    local = set(parsed.parameters) | stored
    watch_held_callees(parsed, program, local, nodes.get(gast.Call, ()))
    user_names = used | set(parsed.parameters)
    namer = Namer(user_names)
    program.namer.taken |= user_names
    captured = free_globals(parsed, local, nodes.get(gast.Name, ()))
    # (what is watched for rebinding: the object whose method is called, not the
    # name its function is bound under here)
    watched = {
        k: v
        for k, v in captured.items()
        if k not in methods and k not in parsed.stand_ins and k not in parsed.bound
    }
    watched.update(parsed.stand_ins.values())  # (helper: the function it stands for)
    program.captured.append((parsed.scope or enclosing_function(parsed.fn), watched))
    captured = _own_names(parsed, captured, program)
    for key, value in captured.items():
        # generated code computes on raw arrays: a module-level tensor (weights
        # made with ppto.tensor) is read as its array, as arguments are
        program.refs.bind(key, raw_value(value))
    written = parsed.name
    if written.startswith("__") and written.endswith("__"):
        written = written.strip("_")  # (__call__'s value is call)
    result = namer.fresh(written if written != "lambda_" else "result")
    body = unpack_in_steps(list(parsed.tree.body), namer)
    sequences = set(parsed.parameters)
    if not generated:
        sequences.add(UNKNOWN_IS_SEQUENCE)
    # iterating a dict gives its keys: a loop over one runs over list(d) (its
    # items read by position would be d[0], d[1], ...): a module-level dict, or a
    # parameter given no array (a dict, a list, ...), whose type the generated
    # code is not specialised on
    keyed = {name for name, value in captured.items() if isinstance(value, dict)}
    keyed |= {p for p in parsed.parameters if ranks.get(p) is None}
    keyed -= set(list_parameters)
    body = loops(body, namer, parsed.source, sequences=sequences, keyed=keyed)
    body = single_exit(body, result)
    body = lift_conditionals(body, namer)
    body, env = rename(body, parsed.parameters, namer, {result})
    if result not in env:
        raise parsed.source.error(
            parsed.tree,
            f"{parsed.name} returns nothing, so there is nothing to differentiate",
            "return a value",
        )
    final = gast.Return(name(env[result]))
    gast.copy_location(final, parsed.tree)
    body.append(final)
    local_names = set(parsed.parameters) | names_in(
        gast.Module(body=body, type_ignores=[])
    )
    # (the globals read before lifting: a conditional expression's branches moved
    # out of the tree, so np in ``np.sum(x) if c else y`` was taken for a local)
    local_names -= set(captured) | parsed.bound
    normalizer = Normalizer(
        parsed,
        varied_names(body, set(wrt)),
        namer,
        local_names,
        lambda value, preferred: program.refs.ref(value, preferred, local_names),
        generated,
    )
    # the caller passes lists there; a parameter the function rebinds may hold
    # something else after it (xs = np.stack(xs) on one path): not taken for a list
    normalizer.lists |= set(list_parameters) - rebound
    normalizer.numbers = set(numbers) & set(parsed.parameters)
    normalizer.body = body
    ir_body = stop_shift_gradients(normalizer.block(body), namer)
    ir_body = sort_by_permutation(ir_body, namer)
    if not generated:  # (a gradient differentiated again was checked as written)
        normalizer.refuse_lists_made_arrays(ir_body)
    shapes, dtypes = ({}, {}) if described is None else described
    if entry:
        shapes, dtypes = program.shapes, program.dtypes
    layouts = program.layouts if entry else _callee_layouts(parsed, program, hints)
    results = _call_result(program, normalizer.lists)
    try:
        activity = analyze(
            ir_body, wrt, ranks, parsed.source, layouts, shapes, dtypes, results
        )
    except TransformError as error:
        if generated:  # (the error would name the generated code's line)
            _refuse_replay(parsed, getattr(error, "opaque", None))
        raise
    if in_place.settle(ir_body, activity, parsed.source):  # (what it knew changed)
        activity = analyze(
            ir_body, wrt, ranks, parsed.source, layouts, shapes, dtypes, results
        )
    activity.numbers = set(numbers) & set(parsed.parameters)
    if not generated:  # (generated code differentiated again: its rules' helpers,
        # a percentile's quantile_weights, are piecewise constant, their derivative
        # zero; the user's own code was checked when its gradient was made)
        check_reachable(
            activity,
            wrt,
            parsed.source,
            lambda name: analyze(
                ir_body, [name], ranks, parsed.source, layouts, shapes, dtypes, results
            ),
        )
    _check_calls_run_as_written(ir_body, activity, normalizer, program)
    generator = Generator(
        parsed, activity, namer, program.refs, program_callee(program)
    )
    generator.user_names = set(parsed.parameters) | stores(parsed.tree.body)
    generator.lists = normalizer.lists
    generator.result_layouts = program.result_layouts
    generator.reruns_differ = program.reruns_differ
    generator.function_body = ir_body
    if plan_reverse:
        generator.forward(ir_body)  # a first pass plans called functions' derivatives
    return ir_body, activity, generator


def _check_calls_run_as_written(
    ir_body: list, activity, normalizer, program: Program
) -> None:
    """Each call of a user's function on differentiated values gets the check a
    function gets where its derivative is made (``aliases.check`` above): one
    whose results no derivative needs (unused, or read through ``len``) runs as
    written, and a change it makes in place to an argument reaches the caller's
    value in NumPy, which the derivative would miss (``t = scaled_in_place(W)``,
    W read afterwards)."""
    for statement in ir.walk(ir_body):
        passive = isinstance(statement, ir.Passive)
        if passive and ir.expression_names(statement.node) & activity.varied:
            normalizer.check_calls_inside(statement.node)  # ``n = len(f(x))``
        if isinstance(statement, ir.While) and statement.reads & activity.varied:
            normalizer.check_calls_inside(statement.test)  # ``while f(x) > 0``
        if not isinstance(statement, ir.CallFunction) or _generated(
            statement.function.fn
        ):
            continue
        given = dict(zip(statement.function.parameters, statement.inputs))
        given.update(statement.keywords)
        if not any(ir.operand_names(o) & activity.varied for o in given.values()):
            continue
        ranks = {p: operand_rank(o, activity.ranks) for p, o in given.items()}
        numbers = [p for p, o in given.items() if holds_numbers(o, activity.numbers)]
        # (rank 0, perhaps a 0-d array: -> the write into it, check's to put)
        zero_d_writes = rank_0_arguments.maybe_zero_d(given, ranks, activity)
        aliases.check(
            statement.function,
            ranks,
            list(given),
            numbers=numbers,
            maybe_zero_d=zero_d_writes,
            own=own_object(statement.function, program),  # (a method's self)
        )
        rank_0_arguments.refuse_write_read_again(
            statement,
            given,
            zero_d_writes,
            ir_body,
            activity,
            normalizer.parsed.parameters,
            normalizer.source,
        )


def _callee_layouts(parsed: ParsedFunction, program: Program, hints) -> dict:
    """A called function's parameters' image layout hints: those its call gives
    (``hints``, specialising its derivative), else not known where the entry's
    arguments carry any other than NCHW's (code generated without its call)."""
    if hints is not None:
        return dict(hints)
    if not set(program.layouts.values()) - {"nchw"}:
        return {}
    return {name: UNKNOWN_LAYOUT for name in parsed.parameters}


def _forward_with_tapes(generator, ir_body) -> list:
    """The forward statements, after the backward pass decided what loops save."""
    forward = generator.forward(ir_body)
    tapes = [assign(tape, gast.List([], gast.Load())) for tape in generator.tapes]
    return tapes + forward


def _packed(body, result) -> bool:
    """Whether ``result`` is built as a tuple or list somewhere in ``body``."""
    for statement in body:
        if isinstance(statement, (ir.Pack, ir.ListNew)) and statement.target == result:
            return True
        if any(_packed(block, result) for block in ir.blocks(statement)):
            return True
    return False


def _result_operand(ir_body):
    returns = [s for s in ir_body if isinstance(s, ir.Return)]
    return returns[-1].value


def _gradient_exprs(generator, wrt, initialized, refs):
    """Each parameter's adjoint; a zero one where nothing reached it, item by item
    where its kind is not known (the tuple of values a gradient saves, taken
    apart when it is differentiated again: ``zeros_like`` of ``(cond, u)`` fails)."""
    exprs = []
    for parameter in wrt:
        if parameter in initialized:
            exprs.append(name(generator.adjoint_name(parameter)))
        else:
            exprs.append(generator.zero_of_item(parameter))
    return exprs


def _arguments(generator):
    """The parameters of the function ``generator`` was made for, as the generated
    function declares them: its defaults the values the user's ``def`` bound (see
    defaults.py; the tree as ``_prepare`` left it)."""
    return clone(generator.parsed.tree.args)


def combined(parsed: ParsedFunction, wrt: list[str], ranks: dict, program: Program):
    """``<name>_grad(*args) -> (value, gradients)``."""
    ir_body, activity, generator = _prepare(parsed, wrt, ranks, program)
    result = _result_operand(ir_body)
    from ppto.transform.inline import operand_expr

    dict_result = parsed.fn in RESULT_KEYS  # (its code returns the list of values)
    if dict_result or _packed(ir_body, result):
        kind = "a dict" if dict_result else "a tuple or list"
        raise GradError(
            f"ppto.grad needs a function with a scalar result, but "
            f"{parsed.name} returns {kind}: use ppto.vjp for several results"
        )
    initialized: set = set()
    seed = []
    if activity.active(result):
        ones = generator.ref(ones_like, "ones_like")
        seed = [assign(generator.adjoint_name(result), call(ones, name(result)))]
        initialized.add(result)
        origins.mark(seed, _returned_origins(generator, ir_body, result))
    backward = generator.backward(ir_body, initialized)
    forward = _forward_with_tapes(generator, ir_body)
    gradients = _gradient_exprs(generator, wrt, initialized, program.refs)
    packed = gradients[0] if len(gradients) == 1 else gast.Tuple(gradients, gast.Load())
    body = forward + seed + backward
    body.append(gast.Return(gast.Tuple([operand_expr(result), packed], gast.Load())))
    body = _cleanup(body, generator)
    unbound = _maybe_unbound(body, parsed.parameters, generator.refs.namespace)
    body[:0] = [assign(n, gast.Constant(None, None)) for n in unbound]
    function_name = program.generated_name(parsed, "_grad")
    definition = function_definition(function_name, _arguments(generator), body)
    program.add(definition, activity, generator.adjoints)
    return function_name


_ENDS_BLOCK = (gast.Return, gast.Raise, gast.Break, gast.Continue)


def _maybe_unbound(body: list, parameters, namespace: dict) -> list:
    """The values whose zero adjoint ``body`` may make where no assignment of them
    has run, sorted: they start as None, as ``split``'s saved values do. The zero
    adjoint of a value one branch of an ``if`` assigns (or a loop body) is made on
    the other path too (``if use: y = ...``, then ``if use: s = s + y``: ``dy =
    zeros_like(y)`` for the other branch), where Python left it unbound; the
    user's own reads of it run only where it is assigned."""
    from ppto.ops.shape import zeros_like

    if not any(isinstance(s, (gast.If, gast.For, gast.While)) for s in body):
        return []  # (straight-line code runs every assignment before what follows)
    zeros = (zeros_like, lists.zeros_like_list, lists.zeros_like_items)

    def zeros_of(node) -> set:
        return {
            argument.id
            for call in trees.walk(node)
            if isinstance(call, gast.Call)
            and isinstance(call.func, gast.Name)
            and any(namespace.get(call.func.id) is zero for zero in zeros)
            for argument in call.args
            if isinstance(argument, gast.Name)
        }

    found: set = set()

    def visit(block, defined: set) -> set | None:
        """The names surely assigned after ``block`` (None: it never ends)."""
        for statement in block:
            if isinstance(statement, gast.If):
                after = [visit(statement.body, set(defined))]
                after.append(visit(statement.orelse, set(defined)))
                after = [names for names in after if names is not None]
                if not after:
                    return None
                defined = set.intersection(*after)
            elif isinstance(statement, (gast.For, gast.While)):
                target = getattr(statement, "target", [])
                visit(statement.body, defined | stores(target))
                visit(statement.orelse, set(defined))
            else:
                found.update(zeros_of(statement) - defined)
                defined = defined | stores(statement)
                if isinstance(statement, _ENDS_BLOCK):
                    return None
        return defined

    visit(body, set(parameters))
    assigned = stores(body)
    return sorted(found & assigned - set(parameters))


def _returned_origins(generator, ir_body: list, result: str) -> tuple | None:
    """The user's return lines (as the gradient's: the seed is the result's
    adjoint), of every statement assigning ``result`` (the function's single exit
    is ppto's own, at its def line)."""
    found = {}
    for statement in ir.walk(ir_body):
        if result in ir.writes(statement):
            for origin in generator.origin_of(statement, origins.GRADIENT) or ():
                found[origin] = None
    return tuple(found) or None


def split(
    parsed: ParsedFunction,
    wrt: list[str],
    ranks: dict,
    program: Program,
    called: bool = True,
    list_parameters=(),
    hints=None,
    described=None,
    numbers=(),
):
    """``<name>_forward`` and ``<name>_backward``; returns their names and the
    parameters the backward takes from the call site (only when ``called`` from
    generated code: the entry point's backward takes just ``saved`` and the
    cotangent)."""
    from ppto.transform.inline import operand_expr

    ir_body, activity, generator = _prepare(
        parsed,
        wrt,
        ranks,
        program,
        list_parameters=list_parameters,
        hints=hints,
        described=described,
        numbers=numbers,
    )
    result = _result_operand(ir_body)
    program.last_result_rank = operand_rank(result, activity.ranks)
    namer = generator.namer
    cotangent = namer.fresh("d" + (result if isinstance(result, str) else "out"))
    initialized: set = set()
    if activity.active(result):
        generator.adjoints[result] = cotangent
        initialized.add(result)
    backward = generator.backward(ir_body, initialized)
    if activity.active(result) and result in generator.lists:
        # a list written out and returned (return [a, b]) pops its items' adjoints:
        # from a list of the cotangent's (the caller's array of them, or a tuple)
        backward.insert(0, assign(cotangent, call("list", name(cotangent))))
    forward = _forward_with_tapes(generator, ir_body)
    gradients = _gradient_exprs(generator, wrt, initialized, program.refs)
    packed = gradients[0] if len(gradients) == 1 else gast.Tuple(gradients, gast.Load())
    backward = _cleanup(backward + [gast.Return(packed)], generator)
    defined = set(parsed.parameters)
    for statement in forward:
        for node in trees.walk(statement):
            if isinstance(node, gast.Name) and isinstance(node.ctx, gast.Store):
                defined.add(node.id)
    saved_names = sorted(free_reads(backward) & defined)
    # Parameters not differentiated (an axis, integer labels) come from the call site
    # rather than through the saved tuple, so that differentiating the generated code
    # again sees them as the constants they are.
    passed = [
        n for n in saved_names if called and n not in wrt and _passable(parsed, n)
    ]
    saved_names = [n for n in saved_names if n not in passed]
    # A value saved from one branch (or a loop body) may be unbound on the path
    # taken: it starts as None so that the saved tuple can always be built.
    always = set(parsed.parameters) | {
        node.id
        for statement in forward
        if not isinstance(statement, (gast.If, gast.For, gast.While))
        for node in trees.walk(statement)
        if isinstance(node, gast.Name) and isinstance(node.ctx, gast.Store)
    }
    unbound = [n for n in saved_names if n not in always]
    forward[:0] = [assign(n, gast.Constant(None, None)) for n in unbound]
    saved = namer.fresh("saved")
    saved_tuple = gast.Tuple([name(n) for n in saved_names], gast.Load())
    forward.append(
        gast.Return(gast.Tuple([operand_expr(result), saved_tuple], gast.Load()))
    )
    forward = _cleanup(forward, generator)
    if saved_names:
        store = gast.Tuple([name(n, True) for n in saved_names], gast.Store())
        backward.insert(0, gast.Assign([store], name(saved), None))
    forward_name = program.generated_name(parsed, "_forward")
    backward_name = program.generated_name(parsed, "_backward")
    program.result_layouts[forward_name] = _layout_of(result, activity)
    program.reruns_differ[forward_name] = _reruns_differ(generator, program, ir_body)
    program.add(
        function_definition(forward_name, _arguments(generator), forward), activity
    )
    backward_parameters = [saved, cotangent, *passed]
    program.add(
        function_definition(backward_name, backward_parameters, backward),
        activity,
        generator.adjoints,
    )
    return forward_name, backward_name, passed


def _refuse_replay(parsed: ParsedFunction, passive) -> None:
    """Where a derivative differentiated again fails at its replay of a
    checkpointed call's random draws (``ppto.checkpoint.replayed``), the
    refusal at the user's line that made the call."""
    if passive is None:
        return
    called = [
        parsed.namespace.get(node.func.id)
        for node in gast.walk(passive.node)
        if isinstance(node, gast.Call) and isinstance(node.func, gast.Name)
    ]
    if not any(f is replayed or f is random_states for f in called):
        return
    found = origins.origin_of(parsed, passive.node)
    if not found:
        return
    raise origins.error_at(
        found[0],
        "a checkpointed call whose step may draw random numbers (or read an "
        "object's state) is run again from the random generators' states in "
        "its gradient, and ppto cannot differentiate that replay again: no "
        "second derivatives (ppto.hessian, jacfwd/jacrev/jvp of ppto.grad, "
        "grad of grad) through it",
        "call the step without ppto.checkpoint for second derivatives, or draw "
        "the random numbers outside the step and pass them in (mask = rng.random"
        "(shape) > p; ppto.checkpoint(step)(x, mask))",
    ) from None


def _reruns_differ(generator, program: Program, ir_body: list) -> bool:
    """Whether running the function's forward again may give other values (a
    checkpointed call of it then replays the random generators' states, which
    generated code cannot be differentiated through): it reads an object's state
    or draws random numbers itself, calls a function whose generated forward may
    (a function of the user's differentiated), or one run as written that may
    draw (see ``ppto.checkpoint.may_draw``)."""
    for x in ir.walk(ir_body):
        if isinstance(x, ir.Passive) and (
            x.rereads if x.differs is None else x.differs
        ):
            return True
        if isinstance(x, ir.CallFunction):
            plan = generator.call_plan(x)
            if plan is None:
                if may_draw(x.function.fn):
                    return True
            elif program.reruns_differ.get(plan[0], True):
                return True
    return False


def _layout_of(result, activity) -> str | tuple | None:
    """The layout the analysis found for the function's result, if it told one; a
    tuple of them (or None) for a tuple built in the function."""
    if not isinstance(result, str):
        return None
    items = activity.item_layouts.get(result)
    if items is not None:
        return tuple(layout if layout in ("nchw", "nhwc") else None for layout in items)
    layout = activity.layouts.get(result)
    return layout if layout in ("nchw", "nhwc") else None


def _passable(parsed: ParsedFunction, parameter: str) -> bool:
    """Whether the call site can always supply ``parameter``: it is a parameter whose
    default, if any, is a literal."""
    if parameter not in parsed.parameters:
        return False
    default = signature(parsed.fn).parameters[parameter].default
    return default is inspect.Parameter.empty or is_literal(default)


def _cleanup(body, generator):
    removable = set(generator.namer.taken) - set(generator.parsed.parameters)
    shapes, dtypes = generator.activity.shapes, generator.activity.dtypes
    body = fold_reduced_counts(body, generator.refs.namespace, shapes, dtypes)
    generated = set(generator.namer.taken) - generator.user_names
    body = fold_shape_helpers(body, generator.refs.namespace, shapes, dtypes, generated)
    body = elide_broadcasts(body, generator.refs.namespace, shapes, dtypes)
    body = drop_unit_factors(body, generator.refs.namespace, generator.activity)
    body = write_distinct_slices(body, generator.refs.namespace, generator.ref)
    body = eliminate_common_subexpressions(body, generator.refs.namespace, generated)
    body = remove_unused(body, keep=set(), removable=removable)
    body = coalesce_copies(body, generated)
    return drop_default_arguments(body, generator.refs.namespace)


def jvp(
    parsed: ParsedFunction,
    wrt: list[str],
    ranks: dict,
    program: Program,
    list_parameters=(),
    hints=None,
    described=None,
    numbers=(),
) -> str:
    """``<name>_jvp(*args, *tangents) -> (value, tangent)``; one tangent per ``wrt``."""
    from ppto.transform.forward import TangentGenerator
    from ppto.transform.inline import operand_expr

    ir_body, activity, generator = _prepare(
        parsed, wrt, ranks, program, False, list_parameters, hints, described, numbers
    )
    result = _result_operand(ir_body)
    program.last_result_rank = operand_rank(result, activity.ranks)
    tangents = TangentGenerator(generator, program_jvp_callee(program))
    tangent_parameters = [tangents.tangent_name(parameter) for parameter in wrt]
    body = tangents.block(ir_body)
    tangent_out = tangents.materialised(result)
    body.append(
        gast.Return(gast.Tuple([operand_expr(result), tangent_out], gast.Load()))
    )
    body = _cleanup(body, generator)
    arguments = _arguments(generator)
    for tangent in tangent_parameters:  # keyword-only: parameters may have defaults
        arguments.kwonlyargs.append(gast.Name(tangent, gast.Param(), None, None))
        arguments.kw_defaults.append(None)
    function_name = program.generated_name(parsed, "_jvp")
    program.result_layouts[function_name] = _layout_of(result, activity)
    program.tangent_parameters[function_name] = tangent_parameters
    program.add(function_definition(function_name, arguments, body), activity)
    return function_name


def primal(parsed: ParsedFunction, wrt, ranks: dict, program: Program) -> str:
    """The function itself, normalized (every parameter treated as differentiated so
    that all its operations are explicit): what fusion sees of a forward pass."""
    from ppto.transform.inline import operand_expr

    ir_body, activity, generator = _prepare(parsed, parsed.parameters, ranks, program)
    body = generator.forward(ir_body)
    body.append(gast.Return(operand_expr(_result_operand(ir_body))))
    function_name = program.generated_name(parsed, "")
    program.add(
        function_definition(function_name, _arguments(generator), body), activity
    )
    return function_name


def _call_plan(
    parsed: ParsedFunction,
    positions,
    keywords,
    ranks,
    by_name=None,
    listed=(),
    hinted=(),
    described=(),
    numbered=(),
):
    """What a call of ``parsed`` specialises it on: ``(wrt, key, rank_map, lists,
    hints, shapes and dtypes, numbers)``, the parameters differentiated, the key of
    its plan, the parameters' ranks (``by_name``: those passed by keyword), those it
    is passed lists for (``listed``: positions, names), its parameters' image layout
    hints (``hinted``: by position or name), their shapes and dtypes where known
    (``described``: (position or name, shape, dtype)) and those it is passed tuples
    or lists of numbers for (``numbered``: positions, names)."""
    parameters = parsed.parameters
    wrt = [parameters[p] for p in positions if p < len(parameters)] + list(keywords)
    if len(wrt) != len(positions) + len(keywords):
        raise GradError(f"{parsed.name} was called with more arguments than it has")
    by_name = by_name or {}
    # (the function, not its code: closures of one factory hold different values;
    # the shapes too: code specialised on some shapes is wrong for others)
    key = (parsed.fn, tuple(wrt), tuple(ranks), tuple(sorted(by_name.items())))
    key += (listed, hinted, described, numbered, specialisation(parsed))
    rank_map = {parameters[i]: r for i, r in enumerate(ranks) if i < len(parameters)}
    rank_map.update(by_name)

    def parameter(where):
        return parameters[where] if isinstance(where, int) else where

    def given(where) -> bool:
        return not isinstance(where, int) or where < len(parameters)

    lists = {parameter(p) for p in listed if given(p)}
    numbers = {parameter(p) for p in numbered if given(p)}
    hints = {parameter(p): hint for p, hint in hinted if given(p)}
    shapes = {parameter(p): shape for p, shape, _ in described if given(p)}
    dtypes = {parameter(p): dtype for p, _, dtype in described if given(p)}
    passed = set(parameters[: len(ranks)]) | set(by_name)
    for omitted in _number_defaults(parsed):
        if omitted not in passed:  # (a Python number: 0-d, its dtype weak)
            shapes[omitted] = ()
    return wrt, key, rank_map, lists, hints, (shapes, dtypes), numbers


def _number_defaults(parsed: ParsedFunction) -> list:
    """The parameters whose default is a Python number (not a bool: a flag)."""
    return [
        parameter
        for parameter, described in signature(parsed.fn).parameters.items()
        if isinstance(described.default, (int, float))
        and not isinstance(described.default, bool)
    ]


def _call_result(program: Program, lists: set):
    """``Activity.call_result`` for a function of ``program`` whose lists are
    ``lists``: the shape and dtype of what a call returns, found by analyzing the
    called function on the shapes and dtypes of the call's arguments (every
    parameter taken as differentiated, as ``primal`` does: its operations are then
    all explicit), once per specialisation. Not known (None) where no argument's
    shape is, where the function is being transformed already (a recursion, refused
    when its derivative is planned) or where it cannot be analyzed so (its
    derivative's own analysis then says why)."""

    def result(statement: ir.CallFunction, activity):
        parsed = statement.function
        ranks, by_name, listed, hinted, described, numbered = call_specialisation(
            statement, activity, lists
        )
        if not described or parsed.fn in program.transforming:
            return None
        _, key, rank_map, listed_names, hints, given, numbers = _call_plan(
            parsed, [], [], ranks, by_name, listed, hinted, described, numbered
        )
        if key not in program.call_results:
            found = None
            with contextlib.suppress(TransformError, GradError, ShapeError):
                with _transforming(parsed, program):
                    found = _analyzed_result(
                        parsed, rank_map, program, listed_names, hints, given, numbers
                    )
            program.call_results[key] = found
        return program.call_results[key]

    return result


def _analyzed_result(parsed, ranks, program, lists, hints, described, numbers):
    # (on a copy of its tree: preparing rewrites statements in place, and the
    # derivative made from it next saw ``for _ in steps`` this left, with no
    # ``steps = range(3)`` before it)
    parsed = dataclasses.replace(parsed, tree=clone(parsed.tree))
    ir_body, activity, _ = _prepare(
        parsed,
        parsed.parameters,
        ranks,
        program,
        False,
        lists,
        hints,
        described,
        numbers,
    )
    result = _result_operand(ir_body)
    shape = operand_shape(result, activity.shapes, activity.dtypes)
    if shape is None:
        return None
    dtype = activity.dtypes.get(result) if isinstance(result, str) else None
    return tuple(shape), dtype


def _shapes_if_they_fit(generate, described):
    """``generate(described)``, or ``generate(None)`` (no shapes known) where the
    called function's analysis finds its statements do not fit the shapes given: a
    call on a path that is never taken (``helper(x.T, W)`` in the branch for
    other shapes) is no error, and one that is taken fails when it runs, as
    before."""
    try:
        return generate(described)
    except ShapeError:
        if not any(described):
            raise
        return generate(None)


def program_jvp_callee(program: Program):
    def plan(parsed, positions, keywords, *call, **named):  # (as _call_plan's)
        wrt, key, rank_map, lists, hints, shapes, numbers = _call_plan(
            parsed, positions, keywords, *call, **named
        )
        key = ("jvp",) + key
        if key not in program.callee_plans:
            with _transforming(parsed, program):
                jvp_name = _shapes_if_they_fit(
                    lambda given: jvp(
                        parsed, wrt, rank_map, program, lists, hints, given, numbers
                    ),
                    shapes,
                )
            program.callee_plans[key] = (jvp_name, program.tangent_parameters[jvp_name])
        return program.callee_plans[key]

    return plan


def program_callee(program: Program):
    def plan(parsed, positions, keywords, *call, **named):  # (as _call_plan's)
        wrt, key, rank_map, lists, hints, shapes, numbers = _call_plan(
            parsed, positions, keywords, *call, **named
        )
        if key not in program.callee_plans:
            with _transforming(parsed, program):
                forward_name, backward_name, passed = _shapes_if_they_fit(
                    lambda given: split(
                        parsed,
                        wrt,
                        rank_map,
                        program,
                        list_parameters=lists,
                        hints=hints,
                        described=given,
                        numbers=numbers,
                    ),
                    shapes,
                )
            order = list(positions) + list(keywords)
            program.callee_plans[key] = (forward_name, backward_name, order, passed)
            program.result_ranks[key] = program.last_result_rank
        return program.callee_plans[key] + (program.result_ranks[key],)

    return plan


def build(
    fn,
    wrt: list[str],
    ranks: dict,
    mode: str,
    layouts=None,
    shapes=None,
    dtypes=None,
    statics=None,
    numbers=(),
    scalars=(),
) -> Program:
    """Transform ``fn`` (see the module docstring). ``ranks``, ``layouts`` and
    ``shapes`` and ``dtypes`` describe the arguments (axes, image layout hint, shape,
    dtype) where known; ``statics`` the callables passed (the code is specialised
    on them); ``numbers`` the parameters given tuples or lists of numbers;
    ``scalars`` those given NumPy scalars."""
    with keys_read_once():
        return _build(
            fn, wrt, ranks, mode, layouts, shapes, dtypes, statics, numbers, scalars
        )


def _build(
    fn, wrt, ranks, mode, layouts, shapes, dtypes, statics, numbers, scalars
) -> Program:
    parsed = parse_function(fn)
    program = Program(
        namer=Namer(set()),
        layouts=dict(layouts or {}),
        shapes=dict(shapes or {}),
        dtypes=dict(dtypes or {}),
        statics=dict(statics or {}),
        numbers=set(numbers),
        scalars=set(scalars),
        entry_function=parsed.fn,
    )
    program.refs = References(program.namer)
    try:
        with _transforming(parsed, program):
            _transform(parsed, wrt, ranks, mode, program)
    except RecursionError:  # each call generates its callees' code first
        raise TransformError(
            f"{parsed.fn.__qualname__} calls itself, directly or through the functions "
            "it calls: ppto generates code for every function called and cannot for "
            "recursion; rewrite it as a loop"
        ) from None
    program.release()
    return program


@contextlib.contextmanager
def _transforming(parsed: ParsedFunction, program: Program):
    """Code for ``parsed`` being generated; refused where it already is (a call of a
    function by itself, directly or through the functions it calls: each call
    generates its callee's code first, so a recursion would never end)."""
    if parsed.fn in program.transforming:
        raise parsed.source.error(
            parsed.tree,
            f"ppto cannot differentiate {parsed.name}: it calls itself, directly or "
            "through the functions it calls (code is generated for each function "
            "called)",
            "rewrite the recursion as a loop",
        )
    program.transforming.append(parsed.fn)
    try:
        yield
    finally:
        program.transforming.pop()


def _transform(parsed, wrt, ranks, mode: str, program: Program) -> None:
    if mode == "combined":
        program.entry = combined(parsed, wrt, ranks, program)
        program.entries = (program.entry,)
    elif mode == "primal":
        program.entry = primal(parsed, wrt, ranks, program)
        program.entries = (program.entry,)
    elif mode == "jvp":
        program.entry = jvp(parsed, wrt, ranks, program)
        program.entries = (program.entry,)
    else:
        program.entries = split(parsed, wrt, ranks, program, called=False)[:2]
        program.entry = program.entries[0]
