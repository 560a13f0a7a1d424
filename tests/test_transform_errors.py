"""Every construct the transformer rejects raises ``ppto.TransformError`` naming the
construct, at the user's file and line, quoting the line with a caret under the
construct and saying what to write instead; gradients that cannot be taken raise
``ppto.GradError``. The offending functions live in tests/error_cases.py, each with a
``# <- error`` comment on the line the error must point at.
"""

from __future__ import annotations

import inspect
import io
import linecache
import warnings
from dataclasses import dataclass, field

import numpy as np
import pytest

import ppto
from tests import error_cases
from tests.test_golden import central_differences

MARKER = "# <- error"
VECTOR = np.array([0.5, 1.5, 2.5])


@dataclass(frozen=True)
class Case:
    """A rejected function: ``construct`` must appear in the message's first line and
    the caret must fall inside ``at``, a piece of the marked line."""

    function: object
    construct: str
    at: str
    args: tuple = (VECTOR,)
    wrt: object = 0
    marked_in: object = None  # the function holding the marker, if not ``function``
    known_problem: str = field(default="", compare=False)

    @property
    def id(self) -> str:
        return self.function.__name__


def marked_line(function) -> int:
    """The file line of ``function`` that carries the ``# <- error`` marker."""
    lines, first = inspect.getsourcelines(function)
    found = [
        first + i for i, line in enumerate(lines) if line.rstrip().endswith(MARKER)
    ]
    assert len(found) == 1, f"{function.__name__} must mark exactly one line"
    return found[0]


def transform(case: Case) -> ppto.TransformError:
    with pytest.raises(ppto.TransformError) as caught:
        ppto.show_grad(case.function, *case.args, wrt=case.wrt, file=io.StringIO())
    return caught.value


def check_error(case: Case) -> None:
    error = transform(case)
    assert isinstance(error, SyntaxError)
    lines = error.msg.splitlines()
    assert case.construct in lines[0]

    marker_owner = case.marked_in or case.function
    line = marked_line(marker_owner)
    assert error.filename == error_cases.__file__
    assert error.lineno == line
    text = linecache.getline(error_cases.__file__, line).rstrip("\n")
    assert error.text == text
    where = f'  File "{error_cases.__file__}", line {line}, column {error.offset}'
    assert lines[1] == where

    quoted, caret = lines[2], lines[3]
    assert quoted == "    " + text.strip()
    assert caret.strip() == "^"
    caret_column = caret.index("^") - 4 + (len(text) - len(text.lstrip()))
    assert caret_column == error.offset - 1
    start = text.index(case.at)
    assert start <= caret_column < start + len(case.at), (
        f"the caret points at column {caret_column + 1}, not at {case.at!r}"
    )

    suggestion = [part for part in lines if part.startswith("  Instead: ")]
    assert len(suggestion) == 1 and len(suggestion[0]) > len("  Instead: ")


def params(cases: list[Case]) -> list:
    return [
        pytest.param(
            case,
            id=case.id,
            marks=[pytest.mark.xfail(strict=True, reason=case.known_problem)]
            if case.known_problem
            else [],
        )
        for case in cases
    ]


ec = error_cases
REJECTED = [
    Case(ec.lambda_stored, "lambda used other than called", "lambda v: v * 2.0"),
    Case(ec.local_function_returned, "helper used as a value", "helper"),
    Case(ec.local_function_passed_on, "helper used as a value", "helper"),
    Case(ec.local_function_recursive, "it calls itself", "power"),
    Case(ec.local_function_nonlocal, "writes an enclosing variable", "nonlocal"),
    Case(ec.default_reassigned_after_def, "reads scale, assigned again", "scale"),
    Case(
        ec.local_function_called_before_def,
        "before its definition",
        "twice",
        args=(VECTOR, True),
    ),
    Case(ec.local_function_defined_twice, "second definition", "def act"),
    Case(ec.local_function_decorated, "decorated local function", "def act"),
    Case(ec.class_inside, "class definition", "class Box:"),
    Case(ec.star_args_params, "*args", "def star_args_params"),
    Case(ec.star_kwargs_params, "**kwargs", "def star_kwargs_params"),
    Case(ec.star_args_and_kwargs_params, "**kwargs", "def star_args_and_kwargs"),
    Case(
        ec.star_args_and_kwargs_params,
        "**kwargs",
        "def star_args_and_kwargs",
        args=(VECTOR, VECTOR),
    ),
    Case(
        ec.async_function,
        "async functions",
        "async def",
    ),
    Case(
        ec.awaiting,
        "async functions",
        "async def",
    ),
    Case(ec.try_block, "try/except", "try:"),
    Case(ec.with_block, "with block", "with np.errstate"),
    # (was "a Match construct" with a general hint)
    Case(ec.match_statement, "a match statement", "match k:", args=(VECTOR, 1)),
    # (the names its patterns bind are no undefined names read)
    Case(ec.match_binding_names, "a match statement", "match x.shape:"),
    Case(ec.global_declaration, "global declaration of a variable", "global COUNTER"),
    Case(ec.nonlocal_declaration, "nonlocal declaration of a", "nonlocal calls"),
    Case(ec.delete_an_item, "del", "del items[0]"),
    Case(ec.delete_an_extended_slice, "del", "del items[::2]"),
    Case(ec.delete_a_slice_of_an_array, "del of a slice", "del y[1:3]"),
    Case(ec.delete_in_a_loop_reading_it, "del", "del y"),
    Case(ec.import_inside, "import", "import math"),
    Case(ec.import_from_inside, "import", "from math import pi"),
    Case(ec.yield_value, "yield", "yield np.sum(x)"),
    Case(ec.yield_from, "yield", "yield from"),
    Case(ec.starred_target, "starred unpacking", "*rest"),
    Case(ec.attribute_target, "assignment to attributes", "np.last_value"),
    Case(ec.annotation_without_value, "annotation without a value", "y: float"),
    Case(ec.starred_call_argument, "*-unpacking in a call", "*pair"),
    Case(ec.double_starred_call_argument, "**-unpacking in a call", "np.sum("),
    Case(
        ec.comprehension_in_while_condition,
        "comprehension in a while condition",
        "(np.sum(v) for v in (x, x))",
    ),
    Case(
        ec.comprehension_in_assert_message,
        "list comprehension here",
        "[float(v) for v in PAIR]",
    ),
    Case(
        ec.dict_comprehension_over_unknown_keys,
        "keys are not known when the code is made",
        "ks",
        args=(VECTOR, (1.0, 2.0)),
    ),
    Case(
        ec.dict_comprehension_keyed_by_a_value,
        "{k: value for k in keys} only",
        "{float(v): v for v in x}",
    ),
    Case(
        ec.dict_comprehension_read_at_unknown_key,
        "its key must be written out",
        "i",
        args=(VECTOR, 1),
    ),
    Case(ec.dict_comprehension_passed_on, "this use of parts", "parts"),
    Case(
        ec.dict_comprehension_over_a_parameter,
        "parts as a parameter and a dict",
        "parts = {k: x * k for k in range(2)}",
        args=(VECTOR, None),
    ),
    Case(
        ec.dict_comprehension_inside_a_call,
        "dict comprehension here",
        '{k: x for k in "ab"}',
    ),
    Case(
        ec.set_comprehension,
        "set comprehension",
        "{float(v) for v in PAIR}",
    ),
    Case(ec.dict_literal, "a dict", "{str(x.ndim): x}"),
    Case(ec.dict_inside_a_dict, "not as an item of another dict", '{"w": x}'),
    Case(
        ec.dict_chosen_in_a_conditional_expression,
        "this use of _keyed_twice(...), which returns a dict",
        "_keyed_twice(x)",
    ),
    Case(ec.set_literal, "a set", "{1.0, 2.0}"),
    Case(ec.walrus_after_a_use, ":=) to scale after scale is used", "scale := 3.0"),
    Case(ec.walrus_in_while_condition, ":=) in a while condition", "k := k + 1"),
    Case(ec.starred_in_list, "starred", "*PAIR"),
    Case(ec.shift_operator, "<<", "1 << 2"),
    Case(ec.shift_assignment, "<<", "scale <<= 2"),
    Case(ec.numpy_function_without_operator, "np.nancumprod", "np.nancumprod(x)"),
    Case(
        ec.average_with_too_many_positionals,
        "at most 4 positional arguments (a, axis, weights, returned)",
        "np.average(x, 0, x, False, True)",
    ),
    Case(
        ec.average_returned_not_written_out,
        "returned= decides what the call returns",
        "returned=pair",
        args=(VECTOR, True),
    ),
    Case(ec.slogdet_field_of_a_name, "attribute .logabsdet", "result.logabsdet"),
    Case(ec.method_without_operator, ".compress()", "x.compress("),
    Case(ec.attribute_without_operator, ".real", "x.real"),
    Case(ec.object_made_inside, "double is a value made inside", "double(x)"),
    Case(ec.non_differentiable_use, "int has no", "int(x.sum())"),
    Case(ec.opaque_call_into_list, "reversed has no ppto operator", "reversed(xs)"),
    Case(
        ec.differentiated_index,
        "an index",
        "position",
        args=(VECTOR, np.array(1.0)),
        wrt=(0, 1),
    ),
    Case(
        ec.differentiated_parameter,
        "'shape' argument of ppto.reshape",
        "shape)",
        args=(VECTOR, np.array([3.0, 1.0])),
        wrt=(0, 1),
    ),
    Case(
        ec.missing_operator_argument,
        "ppto.reshape needs the argument 'shape'",
        "ppto.reshape(x)",
    ),
    Case(ec.unknown_operator_keyword, "no argument 'axes'", "axes=0"),
    Case(ec.returns_nothing, "returns nothing", "def returns_nothing"),
    Case(
        ec.calls_rejected_helper,
        "lambda",
        "lambda v: v * 2.0",
        marked_in=ec.lambda_stored,
    ),
    Case(ec.subscript_as_loop_target, "this form of for loop", "for y[0] in"),
    # an opaque value reaching the result directly gave a zero gradient
    Case(ec.opaque_result_returned, "np.i0 has no ppto operator", "np."),
    Case(ec.opaque_result_squared, "np.i0 has no ppto operator", "np."),
    Case(ec.einsum_of_three, "np.einsum with 3 array(s)", "np.einsum"),
    # spacings are numbers ppto does not differentiate (np.gradient's taken by
    # position as one tuple, pointed at where they are written)
    Case(
        ec.gradient_spaced_by_a_differentiated_value,
        "'spacing' argument of ppto.gradient",
        "x[0] * 2.0",
    ),
    Case(
        ec.trapezoid_spaced_by_a_differentiated_value,
        "'spacing' argument of ppto.trapezoid",
        "x[0]",
    ),
    # a raw AttributeError from einsum's shape helpers folded at transform time
    Case(ec.ppto_einsum_in_numpys_order, "not the string 'i,i->'", '"i,i->"'),
    # the first opaque call, not the one named first alphabetically
    Case(ec.two_opaque_results, "np.i0 has no ppto operator", "np."),
    # writes NumPy makes visible through another name gave wrong values
    Case(ec.write_through_view, "shares its array with y", "rest *= 2.0"),
    Case(ec.write_through_alias, "shares its array with y", "z[0] = 0.0"),
    Case(ec.write_to_base_of_view, "shares its array with flipped", "y += 1.0"),
    Case(ec.write_to_list_element_in_loop, "shares its array with hs", "h[0] = 1.0"),
    Case(ec.write_through_chained_alias, "shares its array with", "z[0] = 0.0"),
    Case(ec.write_through_unpacked_alias, "shares its array with y", "a[0] = b"),
    Case(ec.write_through_loop_target, "shares its array with y", "row[0] = 0.0"),
    # += on a second name for an array argument, or for arithmetic on one
    Case(ec.add_into_argument_alias, "shares its array with x", "z += 1.0"),
    Case(ec.scale_alias_of_product, "shares its array with y", "z *= 3.0"),
    Case(ec.joined_lists, "joining lists with +", "[x[0]] + [x[1] * 2.0]"),  # crashed
    Case(ec.joined_list_names, "joining these lists with +", "both = first + second"),
    # np.dot of 3-d operands (or ndarray.dot) ran as np.matmul: a silently
    # different value and gradient; np.dot(a, 2.0) raised ppto.dot's ShapeError
    Case(
        ec.numpy_dot_of_stacks,
        "np.dot of a 3-d and a 3-d array",
        "np.dot(a, b)",
        args=(np.ones((2, 2, 3)), np.ones((2, 3, 2))),
    ),
    Case(
        ec.dot_method_of_stacks,
        "np.dot of a 2-d and a 3-d array",
        "a.dot(b)",
        args=(np.ones((2, 3)), np.ones((2, 3, 2))),
    ),
    Case(ec.numpy_dot_by_a_number, "np.dot with a 0-d operand", "np.dot(a, 2.0)"),
    # NumPy reads these as dtype: they were keepdims (a raw TypeError)
    Case(ec.numpy_dtype_by_position, ".var() takes its axis by position", "x.var("),
    Case(ec.numpy_function_dtype_by_position, "np.var takes its axis", "np.var("),
    Case(ec.list_after_a_literal, "joining these lists with +", "ys = [x[1]]"),
    Case(ec.repeated_by_a_name, "repeats the list or multiplies", "ys = [x] * n"),
    Case(ec.repeated_tuple_variable, "repeating the tuple pair", "pair * 2"),
    # aliases a fourth review found missed (each gave a wrong gradient)
    Case(
        ec.add_into_a_row_of_a_copy,
        "shares its array with copy",
        "row += 1.0",
        args=(np.ones((2, 3)),),
    ),
    Case(ec.add_into_a_name_for_a_reshape, "shares its array with", "again += 1.0"),
    Case(
        ec.add_into_an_unpacked_row,
        "shares its array with x",
        "first += 1.0",
        args=(np.ones((2, 3)),),
    ),
    Case(
        ec.add_into_an_unpacked_helper_result,
        "shares its array with",  # (square: either item may be the view)
        "row *= 2.0",
        args=(np.ones((2, 3)),),
    ),
    Case(ec.add_into_a_helper_result, "shares its array with y", "row *= 2.0"),
    Case(ec.add_into_a_named_helper_result, "shares its array with y", "row *= 2.0"),
    # items of a helper's result that share memory (``return t, t.reshape(-1)``)
    Case(
        ec.subtract_from_an_item_another_item_views,
        "shares its array with b",
        "a -= 0.5",
    ),
    Case(
        ec.subtract_from_the_view_of_another_item, "shares its array with a", "b -= 0.5"
    ),
    Case(
        ec.subtract_from_an_item_of_a_result_passed_on,
        "shares its array with b",
        "a -=",
    ),
    Case(
        ec.subtract_from_an_item_of_a_named_result, "shares its array with", "a -= 0.5"
    ),
    # the array named is the one the written name is a part of (z), not another
    # name bound beside it by the same loop or unpacking (a, y)
    Case(ec.write_into_a_row_zipped_with_another, "shares its array with z", "b[0]"),
    Case(ec.write_into_a_row_enumerated_in_a_zip, "shares its array with z", "b[0]"),
    Case(ec.write_through_an_annotated_name, "shares its array with z", "v *= 2.0"),
    Case(ec.write_into_a_name_of_a_loop_over_pairs, "shares its array with z", "a[0]"),
    Case(
        ec.write_into_an_unpacked_leaf_read_later,
        "shares its array with p[1]",  # (the user's spelling, not a leaf's name)
        "b *= 2.0",
        args=(VECTOR, (VECTOR, VECTOR)),
        wrt=1,
    ),
    Case(
        ec.write_into_an_unpacked_item_of_a_list_read_later,
        "shares its array with p",
        "b *= 2.0",
    ),
    Case(
        ec.add_into_the_argument_of_a_flat_view,
        "shares its array with flat",
        "y += 1.0",
    ),
    Case(
        ec.subtract_from_an_item_of_a_list_of_views,
        "writes into an item of views",
        "views[0] -= 0.5",
    ),
    Case(
        ec.subtract_from_an_item_of_a_returned_list_of_views,
        "writes into an item of views",
        "views[0] -= 0.5",
    ),
    Case(ec.add_into_a_sum_kept_twice, "shares its array with total", "kept += 1.0"),
    Case(ec.add_into_a_chained_name, "shares its array with b", "a += 1.0"),
    Case(ec.write_on_the_third_turn, "shares its array with", "c *= 2.0"),
    Case(ec.repeated_zero_times, "repeated 0 times", "ys"),
    Case(ec.alias_kept_by_break, "shares its array with z", "y += 1.0"),
    Case(ec.alias_kept_by_continue, "shares its array with z", "y += 1.0"),
    Case(
        ec.alias_kept_on_the_first_turn_of_an_endless_loop,
        "shares its array with z",
        "y += 1.0",
        args=(np.array([0.5, -1.5, 2.5]),),
    ),
    Case(ec.add_into_a_list_element, "shares its array with c", "a += 1.0"),
    Case(ec.add_into_a_tuple_item_in_a_loop, "shares its array with pair", "item"),
    Case(ec.add_into_an_appended_item, "shares its array with", "a += 1.0"),
    Case(ec.add_into_a_repeated_item, "shares its array with", "a += 1.0"),
    Case(ec.add_into_an_item_of_a_copy, "shares its array with c", "a += 1.0"),
    Case(ec.add_into_an_item_of_a_slice, "shares its array with c", "a += 1.0"),
    Case(ec.add_into_enumerated_items, "shares its array with c", "a += 1.0"),
    Case(ec.add_into_zipped_items, "shares its array with c", "a += b"),
    Case(ec.add_into_an_item_beside_a_number, "shares its array with", "a += 1.0"),
    Case(ec.add_into_a_listed_row, "shares its array with m", "a += 1.0"),
    Case(
        ec.opaque_value_in_a_list, "np.nancumprod has no ppto operator", "np.nancumprod"
    ),
    Case(ec.extended_list, "the list method .extend()", "hs.extend(gs)"),
    Case(ec.extend_through_second_name, "also named kept", "hs += [x * 2.0]"),
    Case(
        ec.array_added_a_comprehension,
        "appends items to a list or adds them to an array",
        "total += [v * 3.0 for v in x]",
    ),
    Case(
        ec.list_parameter_joined_with_comprehension,
        "hs is not made a list by every assignment",
        "hs += [x * k for k in range(2)]",
        args=(VECTOR, [VECTOR]),
    ),
    # a list changed through a second name for it: the gradient missed the change
    Case(ec.append_through_second_name, "also named hs", "gs.append(np.sin(x))"),
    Case(ec.append_to_the_first_name, "also named gs", "hs.append(x * 2.0)"),
    Case(ec.pop_through_second_name_in_a_loop, "also named hs", "rest.pop()"),
    # NumPy calls writing into an array in place: the derivative missed the change
    Case(ec.sine_into_out, "writes into an array in place", "np.sin(x, out=z)"),
    Case(ec.copied_into, "writes into an array in place", "np.copyto(z, x**2)"),
    Case(ec.written_item_of_an_item, "an item of an item", "y[0][1] = 5.0"),
    # np.r_ and np.c_ build arrays from their index, which gets no gradient (r_'s
    # gave a zero one)
    Case(ec.joined_by_r_, "np.r_ is not an array", "np.r_[x[:2], x[1:] * 2.0]"),
    Case(ec.joined_by_c_, "np.c_ is not an array", "np.c_[x, x**2]"),
    # (np.put was refused as a change of np, a module-level value)
    Case(ec.put_into, "writes into an array in place", "np.put(z, [0, 2]"),
    Case(ec.sorted_in_place, "writes into an array in place", "z.sort()"),
    Case(ec.multiplied_at_indices, "writes into an array in place", "np.multiply.at("),
    # (a module-level array: read as ``+=`` it would be a local, unbound)
    Case(ec.added_at_into_a_global, "writes into an array in place", "np.add.at("),
    Case(ec.filled, "writes into an array in place", "z.fill(2.0)"),
    # ... on a view or an item of it, or through the class or operator (each
    # gave the gradient of the value unchanged)
    Case(ec.filled_row, "writes into an array in place", "m[0].fill(0.0)"),
    Case(ec.sorted_tail, "writes into an array in place", "z[1:].sort()"),
    Case(ec.sorted_transposed, "writes into an array in place", "m.T.sort()"),
    Case(ec.sorted_item_of_a_list, "writes into an array in place", "hs[0].sort()"),
    Case(ec.filled_item_of_a_dict, "writes into an array in place", 'd["a"].fill'),
    Case(
        ec.filled_by_a_helper,
        "this changes m in place, which is (part of) the argument m",
        "m[0].fill(0.0)",
        marked_in=ec._zero_first_row,
    ),
    Case(
        ec.filled_through_the_class,
        "writes into an array in place",
        "np.ndarray.fill(z, 1.0)",
    ),
    Case(
        ec.item_set_by_operator,
        "writes into an array in place",
        "operator.setitem(z, 0, 9.0)",
    ),
    Case(
        ec.multiplied_by_operator,
        "writes into an array in place",
        "operator.imul(z, 3.0)",
    ),
    # the same where the spelling was not np.<name> or a method of the array (each
    # gave a wrong gradient)
    Case(ec.shuffled_in_place, "writes into an array in place", "np.random"),
    Case(ec.shuffled_by_a_generator, "writes into an array in place", "np.random"),
    Case(ec.list_shuffled_by_python, "writes into an array in place", "random"),
    Case(ec.copied_into_by_an_imported_name, "in place", "copyto(z, x**2)"),
    Case(ec.copied_into_through_another_module_name, "in place", "onp.copyto"),
    Case(ec.item_set_by_its_method, "writes into an array in place", "z.__setitem__"),
    # changes the caller's argument would see, made in a helper, or through what a
    # helper returned, or into rows of an array of unknown rank: each was missed
    Case(
        ec.helper_doubles_its_argument,
        "argument a of _doubled_in_place",
        "a *= 2.0",
        args=(np.ones(4),),
        marked_in=ec._doubled_in_place,
    ),
    Case(
        ec.helper_result_unused_changes_its_argument,
        "argument u of _shrunk_in_place",
        "u -= u**2",
        args=(np.ones(4),),
        marked_in=ec._shrunk_in_place,
    ),
    Case(
        ec.helper_measured_changes_its_argument,
        "argument u of _shrunk_in_place",
        "u -= u**2",
        args=(np.ones(4),),
        marked_in=ec._shrunk_in_place,
    ),
    Case(
        ec.helper_zeroes_an_item,
        "argument a of _first_zeroed",
        "a[0] = 0.0",
        marked_in=ec._first_zeroed,
    ),
    Case(
        ec.helper_appends_to_a_list,
        "argument items of _pushed",
        "items.append(",
        marked_in=ec._pushed,
    ),
    Case(ec.write_into_what_a_helper_returned, "shares its array with y", "z[0]"),
    Case(
        ec.add_into_rows_of_a_reshaped_copy,
        "shares its array with m",
        "row *= 2.0",
        args=(np.ones(4),),
    ),
    # module-level values changed in place: an UnboundLocalError in generated code
    Case(ec.write_into_a_module_array, "not a variable of", "_BUFFER[:] = x * 2.0"),
    Case(ec.append_to_a_module_list, "not a variable of", "_SEEN.append("),
    Case(ec.item_replaced_in_a_list_named_twice, "also named b", "a[0] = x[2] ** 2"),
    # second review: a list argument changed where the helper's result is unused,
    # a = b = [], np.copyto in an assignment, a method returning its argument
    Case(
        ec.helper_appends_to_a_list_its_result_unused,
        "argument hs of _cell",
        "hs.append(h)",
        marked_in=ec._cell,
    ),
    Case(ec.lists_named_in_one_statement, "also named gs", "hs.append(x[0] * 2.0)"),
    Case(ec.copied_into_in_an_assignment, "in place", "np.copyto(z, x * 2.0)"),
    Case(ec.write_into_what_a_method_returned, "shares its array with y", "z[0]"),
    # third review: += into an array of unknown rank a row of which is read later,
    # a method keeping or changing a differentiated value, *args helpers
    Case(
        ec.add_into_a_matrix_of_unknown_rank_after_a_row,
        "shares its array with row",
        "m += 1.0",
    ),
    Case(ec.method_keeps_a_value, "keeps an argument", "_TRACKER.record(h)"),
    Case(ec.function_keeps_a_value, "keeps an argument", "_record_into(_TRACKER, h)"),
    Case(
        ec.method_halves_its_argument,
        "argument a of halve",
        "a *= 0.5",
        marked_in=ec._Tracker.halve,
    ),
    Case(ec.helper_with_star_args, "*args or **kwargs", "_polynomial("),
    # fourth review: a checkpointed loop reading the list it changes, a list or an
    # item a helper returned changed, a method keeping a value read back later, a
    # helper appending to an inner list of its argument
    Case(ec.checkpointed_loop_reads_its_list, "reads the list hs it changes", "hs[-1]"),
    Case(ec.append_through_what_a_helper_returned, "also named hs", "ys.append("),
    Case(ec.add_into_an_item_a_helper_returned, "shares its array with hs", "a += 1.0"),
    Case(ec.method_appends_a_value_read_back, "keeps an argument", "_HISTORY.record("),
    Case(
        ec.helper_appends_to_an_inner_list,
        "argument rows of _add_to_first_row",
        "rows[0].append(v)",
        marked_in=ec._add_to_first_row,
    ),
    # fifth review: rows of an array of unknown rank kept otherwise than as
    # row = m[i]; a list read under another name before it changed; a method's
    # kept value read back through another method; an object ppto cannot see
    Case(ec.row_kept_in_a_branch_then_added_into, "shares its array", "m += 1.0"),
    Case(ec.rows_kept_by_a_loop_then_added_into, "shares its array with", "m += 1.0"),
    Case(ec.list_read_under_another_name_then_changed, "also named ys", "hs.append("),
    Case(ec.kept_value_read_back_by_a_method, "keeps an argument", "_KEEPER.keep(h)"),
    # what an object holds, changed: each gave a zero gradient (some a wrong value)
    Case(
        ec.attribute_appended_to,
        ".append() on self.acts",
        "self.acts.append(",
        marked_in=ec._Recorder.appended,
    ),
    Case(
        ec.attribute_extended,
        ".extend() on self.acts",
        "self.acts.extend(",
        marked_in=ec._Recorder.extended,
    ),
    Case(
        ec.attribute_appended_to_through_a_local_name,
        "(part of) self.acts, held by an object",
        "hs.append(",
        marked_in=ec._Recorder.appended_through_a_local_name,
    ),
    Case(
        ec.attribute_written_through_a_local_name,
        "(part of) self.w, held by an object",
        "b[:] = x**2",
        marked_in=ec._Recorder.written_through_a_local_name,
    ),
    Case(
        ec.attribute_added_into_through_a_local_name,
        "(part of) self.w, held by an object",
        "b += x**2",
        marked_in=ec._Recorder.added_into_through_a_local_name,
    ),
    Case(
        ec.attribute_item_replaced_through_a_local_name,
        "(part of) self.hs, held by an object",
        "hs[0] = x**2",
        marked_in=ec._Recorder.item_replaced_through_a_local_name,
    ),
    Case(
        ec.attribute_key_set_through_a_local_name,
        "(part of) self.buf, held by an object",
        'b["h"] = x**2',
        marked_in=ec._Recorder.key_set_through_a_local_name,
    ),
    Case(
        ec.attribute_set_by_setattr,
        "setattr() on differentiated values",
        "setattr(",
        marked_in=ec._Recorder.set_by_setattr,
    ),
    Case(
        ec.attribute_set_by_object_setattr,
        "object.__setattr__() on differentiated",
        "object.__setattr__(",
        marked_in=ec._Recorder.set_by_object_setattr,
    ),
    Case(
        ec.attribute_set_through_the_objects_dict,
        ".update() on self.__dict__",
        "self.__dict__.update(",
        marked_in=ec._Recorder.set_through_its_dict,
    ),
    Case(
        ec.attribute_dict_updated,
        ".update() on self.buf",
        "self.buf.update(",
        marked_in=ec._Recorder.buffer_updated,
    ),
    Case(
        ec.attribute_dict_item_set_by_its_method,
        ".__setitem__() on self.buf",
        "self.buf.__setitem__(",
        marked_in=ec._Recorder.buffer_item_set,
    ),
    Case(
        ec.argument_attribute_written_through_a_local_name,
        "(part of) k.w, held by an object",
        "b[:] = x**2",
        args=(VECTOR, ec._Weights()),
    ),
    Case(
        ec.attribute_updated_through_vars,
        ".update() on vars(self)",
        "vars(self).update(",
        marked_in=ec._Recorder.updated_through_vars,
    ),
    Case(
        ec.attribute_items_added_into_by_a_loop,
        "(part of) self.hs, held by an object",
        "h += x**2",
        marked_in=ec._Recorder.items_added_into_by_a_loop,
    ),
    Case(
        ec.attribute_written_through_getattr,
        "(part of) self.w, held by an object",
        "b[:] = x**2",
        marked_in=ec._Recorder.written_through_getattr,
    ),
    Case(
        ec.argument_attribute_added_into_through_a_local_name,
        "(part of) k.w, held by an object",
        "b += x**2",
        args=(VECTOR, ec._Weights()),
    ),
    Case(
        ec.attribute_item_set_by_operator,
        "operator.setitem() on self.buf",
        "operator.setitem(",
        marked_in=ec._Recorder.item_set_by_operator,
    ),
    Case(
        ec.attribute_updated_through_the_class,
        "dict.update() on self.buf",
        "dict.update(",
        marked_in=ec._Recorder.updated_through_the_class,
    ),
    Case(
        ec.attribute_added_into_by_operator,
        "operator.iadd() on self.w",
        "operator.iadd(",
        marked_in=ec._Recorder.added_into_by_operator,
    ),
    Case(ec.module_level_dict_updated, ".update() on _STATE", "_STATE.update("),
    Case(ec.method_of_a_local_name, "keeps an argument", "keeper.keep(h)"),
    Case(
        ec.method_of_a_local_name_chosen_when_run,
        "cannot tell what keeper is",
        "keeper.keep(h)",
    ),
    Case(
        ec.method_of_an_object_made_inside,
        "scaled is made inside the function",
        "scaled.apply(",
    ),
    # the same inside a branch or a loop, and into the rows of a matrix
    Case(
        ec.add_into_alias_in_a_branch,
        "shares its array with x",
        "z += 1.0",
        args=(VECTOR, True),
    ),
    Case(ec.add_into_alias_in_a_loop, "shares its array with x", "acc += 1.0"),
    Case(
        ec.add_into_rows,
        "shares its array with x",
        "row += 1.0",
        args=(np.ones((2, 3)),),
    ),
    # a list made an array on one path only
    Case(
        ec.list_made_an_array_in_one_branch,
        "xs as a list on one path and an array on another",
        "xs = np.stack(xs) * 3.0",
    ),
    Case(
        ec.list_made_an_array_in_a_loop,
        "xs as a list on one path and an array on another",
        "xs = np.stack(xs) * 3.0",
    ),
    Case(
        ec.list_made_an_array_in_a_while_loop,
        "xs as a list on one path and an array on another",
        "xs = np.stack(xs) * 3.0",
    ),
    # variables read or written by a name in a string
    Case(ec.read_by_eval, "eval()", 'eval("x ** 2")'),
    Case(ec.run_by_exec, "exec()", "exec("),
    Case(ec.read_from_locals, "locals()", "locals()"),
    Case(ec.read_from_vars, "vars()", "vars()"),
    Case(ec.written_into_globals, "globals()", "globals()"),
    Case(
        ec.eval_in_a_called_function,
        "eval()",
        'eval("x * 2.0")',
        marked_in=ec._evaluated,
    ),
    Case(ec.eval_by_a_global_alias, "eval() (as EVAL_ALIAS)", "EVAL_ALIAS("),
    Case(ec.eval_by_a_local_alias, "eval()", "eval"),
    Case(ec.eval_of_the_builtins_module, "eval() (as builtins.eval)", "builtins"),
    Case(ec.locals_by_a_global_alias, "locals() (as LOCALS_ALIAS)", "LOCALS_ALIAS"),
    Case(ec.eval_by_getattr, "eval() (as getattr(builtins, 'eval'))", "getattr("),
    Case(
        ec.eval_from_the_builtins_dict,
        "eval() (as builtins.__dict__['eval'])",
        "builtins.__dict__",
    ),
    Case(ec.eval_from_a_module_dict, "eval() (as CALLS['run'])", "CALLS["),
    Case(
        ec.eval_from_the_builtins_dict_by_a_local_alias,
        "eval() (as builtins.__dict__['eval'])",
        "builtins.__dict__",
    ),
    Case(
        ec.eval_held_by_an_object,
        "eval() (as self.run)",
        "self.run(",
        marked_in=ec._Evaluating.loss,
    ),
    # complex values inside a real function
    # writes a probe of silently wrong gradients found getting through
    Case(ec.exp_into_a_positional_out, "writes into an array in place", "np.exp("),
    Case(ec.divided_in_place_by_position, "writes into an array in place", "np."),
    Case(ec.cumsum_into_a_positional_out, "writes into an array in place", "np."),
    Case(ec.clipped_in_place_by_a_method, "writes into an array in place", "z.clip"),
    Case(
        ec.multiplied_at_by_a_ufunc_imported_by_name,
        "writes into an array in place",
        "numpy_multiply.at",
    ),
    Case(ec.diagonal_read_then_matrix_written, "shares its array with d", "z *="),
    Case(ec.global_rebound_by_a_helper, "it rebinds REBOUND", "_rebind("),
    Case(ec.complex_literal, "the complex number 1j", "1j"),
    Case(ec.complex_exponential, "the complex number 1j", "1j"),
    Case(ec.complex_made_by_a_call, "complex()", "complex(0.0, 2.0)"),
]


@pytest.mark.parametrize("case", params(REJECTED))
def test_rejected_construct_points_at_its_line(case: Case):
    check_error(case)


@pytest.mark.parametrize(
    "keywords", [{"bias": 1.5}, {"scale": 3.0, "bias": np.array(1.5)}, {}]
)
def test_args_and_kwargs_given_keywords_are_refused(keywords):
    # the gradient object called: a RecursionError (no keyword) or a TypeError
    # (a keyword given) from taking **options as a pytree of leaves, before
    gradient = ppto.grad(error_cases.star_args_and_kwargs_params)
    with pytest.raises(ppto.TransformError, match=r"\*args or \*\*kwargs"):
        gradient(VECTOR, VECTOR, **keywords)


def test_a_field_of_a_named_slogdet_result_says_how_to_write_it():
    # read from the call itself it is item 1 (the corpus's linear_systems)
    error = transform(Case(ec.slogdet_field_of_a_name, "", ""))
    assert "Instead: unpack the result where it is made, sign, logabsdet = " in str(
        error
    )


def test_a_dict_inside_a_dict_or_chosen_by_a_condition_says_how_to_write_it():
    """The rewrites the messages suggest are differentiated: see
    test_suggested_rewrites_match_central_differences in tests/test_dict_helpers.py."""
    nested = transform(Case(ec.dict_inside_a_dict, "", ""))
    assert 'join the keys (d = {"a_w": w})' in str(nested)
    assert 'own (a = {"w": w}) read as a["w"]' in str(nested)
    chosen = transform(Case(ec.dict_chosen_in_a_conditional_expression, "", ""))
    assert "choose in an if statement, a name for each dict" in str(chosen)


def test_a_parameter_named_eval_is_called_as_given():
    gradient = ppto.grad(ec.parameter_named_eval)(VECTOR, np.sin)
    np.testing.assert_allclose(np.asarray(gradient), np.cos(VECTOR))


def test_grad_raises_the_same_error_when_called():
    with pytest.raises(ppto.TransformError) as caught:
        ppto.grad(error_cases.lambda_stored)(VECTOR)
    assert caught.value.lineno == marked_line(error_cases.lambda_stored)
    assert "lambda" in caught.value.msg


# --- near misses and former rejections: these must be accepted ----------------------

ONE_HOT_MAX = np.array([0.0, 0.0, 1.0])
ACCEPTED = [
    (ec.for_loop, VECTOR, np.ones(3), ""),
    (ec.while_loop, VECTOR, np.full(3, 1 / 8), ""),
    (ec.subscript_assignment, VECTOR, [0.0, 2.0, 1.0], ""),
    (
        ec.floor_division_of_metadata,
        np.array([0.5, 1.5, 2.5, 3.0]),
        [2.5, 3, 0.5, 1.5],
        "",
    ),
    (ec.length_of_argument, VECTOR, np.full(3, 1 / 3), ""),
    (ec.float_in_condition, VECTOR, 2 * VECTOR, ""),
    (ec.integer_index_from_argmax, VECTOR, ONE_HOT_MAX, ""),
    (ec.argmax_index, VECTOR, ONE_HOT_MAX, ""),
    # a loop's else runs after it where it did not break (structure.py)
    (ec.for_else, VECTOR, np.full(3, 2.0), ""),
    (ec.while_else, VECTOR, np.full(3, 0.25), ""),
    # del of a name nothing reads again is dropped (source.py)
    (ec.delete, VECTOR, np.ones(3), ""),
    # written as loops and assignments now (comprehensions.py)
    (ec.walrus, VECTOR, 8.0 * VECTOR, ""),
    (ec.list_comprehension, VECTOR, np.full(3, 2.0), ""),
    (ec.generator_expression, VECTOR, np.full(3, 2.0), ""),
    # lifted out as functions of their own (local_functions.py)
    (ec.nested_def, VECTOR, np.full(3, 2.0), ""),
    (ec.lambda_inside, VECTOR, np.full(3, 2.0), ""),
    # vars(obj) reads an object, not the function's variables; a parameter named
    # eval is the caller's function
    (ec.read_from_vars_of_an_object, VECTOR, np.full(3, 3.0), ""),
]


@pytest.mark.parametrize(
    "function, argument, expected",
    [
        pytest.param(
            function,
            argument,
            expected,
            id=function.__name__,
            marks=[pytest.mark.xfail(strict=True, reason=problem)] if problem else [],
        )
        for function, argument, expected, problem in ACCEPTED
    ],
)
def test_near_miss_is_differentiated(function, argument, expected):
    gradient = ppto.grad(function)(argument)
    np.testing.assert_allclose(np.asarray(gradient), expected)


# --- gradient errors ------------------------------------------------------------------


def test_wrt_an_integer_argument():
    with pytest.raises(ppto.GradError, match=r"'n': it is the integer 3.*3\.0"):
        ppto.grad(ec.scale, wrt=1)(VECTOR, 3)


def test_wrt_a_bool_argument():
    with pytest.raises(ppto.GradError, match="'n'"):
        ppto.grad(ec.scale, wrt="n")(VECTOR, True)


@pytest.mark.parametrize(
    "array", [np.arange(3), np.array([True, False])], ids=["int", "bool"]
)
def test_wrt_an_integer_or_boolean_array(array):
    with pytest.raises(ppto.GradError, match=rf"'x'.*{array.dtype}.*astype"):
        ppto.grad(ec.scale)(array, 2.0)


def test_wrt_an_integer_tensor():
    with pytest.raises(ppto.GradError, match="int64"):
        ppto.grad(ec.scale)(ppto.tensor(np.arange(3)), 2.0)


def test_grad_of_a_non_scalar_result():
    with pytest.raises(ppto.GradError, match=r"elementwise_square.*\(3,\).*vjp"):
        ppto.grad(ec.elementwise_square)(VECTOR)


def test_grad_of_a_list_built_in_a_loop():
    # a list has no size: it was taken for a scalar, and a gradient came back
    for grad in (ppto.grad, ppto.value_and_grad):
        with pytest.raises(ppto.GradError, match=r"list_built_in_a_loop.*list of 2"):
            grad(ec.list_built_in_a_loop)(np.ones((2, 3)))


def test_value_and_grad_of_a_non_scalar_result():
    with pytest.raises(ppto.GradError, match="scalar"):
        ppto.value_and_grad(ec.elementwise_square)(VECTOR)


@pytest.mark.parametrize("wrt", ["y", (0, "m")])
def test_wrt_a_name_that_is_not_a_parameter(wrt):
    with pytest.raises(ppto.GradError, match=r"no parameter named.*x, n"):
        ppto.grad(ec.scale, wrt=wrt)


def test_wrt_a_position_out_of_range():
    with pytest.raises(ppto.GradError, match=r"wrt=2.*\(x, n\)"):
        ppto.grad(ec.scale, wrt=2)


@pytest.mark.parametrize("wrt", [True, False, (0, True)])
def test_wrt_a_bool_is_refused(wrt):
    """A bool is an int to Python (True was taken as position 1): refused, as
    JAX refuses argnums=True, by grad, value_and_grad and jacobian alike."""
    for transform in (ppto.grad, ppto.value_and_grad, ppto.jacobian):
        with pytest.raises(ppto.GradError, match=r"wrt=(True|False) is a bool"):
            transform(ec.scale, wrt=wrt)


def test_result_depending_only_through_floor():
    with pytest.raises(ppto.GradError, match=r"'x' only through ppto.floor"):
        ppto.grad(ec.through_floor)(VECTOR)
    with pytest.raises(ppto.GradError, match=r"'x' only through ppto.floor_divide"):
        ppto.grad(ec.floor_division)(VECTOR)


def test_remainder_and_floor_division_are_operators():
    # // and % on differentiated values were refused; % is differentiable (its
    # gradient in b is -(a // b)) and // is piecewise constant, like floor
    from tests.corpus.checks import central_differences

    x, y = np.array([0.3, 1.7, -2.2]), np.array([0.9, -0.4, 2.5])
    grads = ppto.grad(ec.remainder_and_floor_division, wrt=(0, 1))(x, y)
    for position, gradient in enumerate(grads):
        expected = central_differences(
            ec.remainder_and_floor_division, [x, y], position
        )
        np.testing.assert_allclose(np.asarray(gradient), expected, rtol=1e-6)
    tensor = ppto.tensor(x)
    for result, expected in [
        (tensor // 0.5, x // 0.5),
        (tensor % 1.5, x % 1.5),
        (3.0 % tensor, 3.0 % x),
        (2.0 // tensor, 2.0 // x),
        (np.mod(tensor, 1.5), np.mod(x, 1.5)),
    ]:
        assert isinstance(result, ppto.Tensor)
        np.testing.assert_array_equal(result.numpy(), expected)


def product_of_mismatched(x):
    y = np.tanh(x)
    return np.sum(y @ x)


def test_a_shape_mismatch_is_a_shape_error_at_the_users_line():
    # NumPy's ValueError came from the generated code's line
    with pytest.raises(ppto.ShapeError) as caught:
        ppto.grad(product_of_mismatched)(np.ones((3, 4)))
    message = str(caught.value)
    assert "K is 4 in one argument and 3 in another" in message
    line = inspect.getsourcelines(product_of_mismatched)[1] + 2
    assert f"line {line}" in message and "return np.sum(y @ x)" in message


def reads_an_undefined_name(x):
    return np.sum(x * not_defined_anywhere)  # noqa: F821 (what this tests)


def test_an_undefined_name_is_a_transform_error_at_its_line():
    # the generated code raised NameError from its own line
    with pytest.raises(ppto.TransformError) as caught:
        ppto.grad(reads_an_undefined_name)(np.ones(3))
    message = str(caught.value)
    assert "not_defined_anywhere is not defined" in message
    line = inspect.getsourcelines(reads_an_undefined_name)[1] + 1
    assert f"line {line}" in message


def test_a_complex_argument_is_refused_as_complex():
    # the message said integer and boolean arrays have no gradient
    with pytest.raises(ppto.GradError, match="real .floating point. arrays only"):
        ppto.grad(product_of_mismatched)(np.ones((3, 3), complex))


def tanh_squares(x, y):
    return np.sum(np.tanh(x * y) ** 2)


MASKED = np.ma.array([[1.0, 2.0], [3.0, 4.0]], mask=[[False, True], [False, False]])

ARRAYS_OF_OTHER_SEMANTICS = {
    "grad of a masked array": lambda: ppto.grad(tanh_squares)(MASKED, np.ones((2, 2))),
    "a masked array held constant": lambda: ppto.grad(tanh_squares)(
        np.ones((2, 2)), MASKED
    ),
    "in a list": lambda: ppto.vjp(lambda x, ys: np.sum(x * ys[0]), 1.0, [MASKED]),
    "jvp": lambda: ppto.jvp(tanh_squares, (MASKED, MASKED.data), (MASKED.data, None)),
    "np.matrix": lambda: ppto.grad(tanh_squares)(np.matrix(MASKED.data), MASKED.data),
    # a masked tangent gave 14.0 (its data: 18.0, filled with zeros: 12.0), an
    # np.matrix one a (1, 1) tangent of a 0-d value
    "a masked tangent": lambda: ppto.jvp(
        tanh_squares, (MASKED.data, MASKED.data), (MASKED, None)
    ),
    "an np.matrix tangent": lambda: ppto.jvp(
        tanh_squares, (MASKED.data, MASKED.data), (None, np.matrix(MASKED.data))
    ),
    "a masked cotangent": lambda: ppto.vjp(np.tanh, MASKED.data)[1](MASKED),
    "an np.matrix cotangent": lambda: ppto.vjp(np.tanh, MASKED.data)[1](
        np.matrix(MASKED.data)
    ),
}


@pytest.mark.filterwarnings("ignore:the matrix subclass:PendingDeprecationWarning")
@pytest.mark.parametrize("way", sorted(ARRAYS_OF_OTHER_SEMANTICS))
def test_a_masked_array_or_a_matrix_argument_is_refused(way):
    # a masked array's value was 28 for NumPy's 26, its masked entry had a gradient
    with pytest.raises(ppto.GradError, match="operators differ from a plain array's"):
        ARRAYS_OF_OTHER_SEMANTICS[way]()


def test_other_array_subclasses_are_differentiated_as_their_data():
    class Marked(np.ndarray):
        pass

    x, y = np.array([[0.3, -0.8], [1.1, 0.4]]), np.array([[0.5, 0.2], [-0.7, 0.9]])
    gradient = ppto.grad(tanh_squares)(x.view(Marked), y)
    expected = np.zeros_like(x)
    for index in np.ndindex(x.shape):
        step = np.zeros_like(x)
        step[index] = 1e-6
        up, down = tanh_squares(x + step, y), tanh_squares(x - step, y)
        expected[index] = (up - down) / 2e-6
    np.testing.assert_allclose(np.asarray(gradient), expected, rtol=1e-6)


PHASES = np.array([1j, 1.0 + 1.0j, -2.0j])


def times_complex_constant(x):
    return np.sum(np.abs(x * PHASES) ** 2)


def made_complex_then_scaled(x):
    return np.sum(np.abs(x.astype(np.complex128) * PHASES) ** 2)


COMPLEX_AT_RUN_TIME = {
    "grad": lambda f, x: ppto.grad(f)(x),
    "vjp": lambda f, x: ppto.vjp(f, x)[1](1.0),
    "jvp": lambda f, x: ppto.jvp(f, (x,), (np.ones(3),)),
    # (the gradient code these call was run without the check: a wrong Hessian)
    "hessian": lambda f, x: ppto.hessian(f)(x),
    "jacfwd(grad)": lambda f, x: ppto.jacfwd(ppto.grad(f))(x),
    "jacrev(grad)": lambda f, x: ppto.jacrev(ppto.grad(f))(x),
    "jvp(grad)": lambda f, x: ppto.jvp(ppto.grad(f), (x,), (np.ones(3),)),
}


@pytest.mark.parametrize("way", sorted(COMPLEX_AT_RUN_TIME))
@pytest.mark.parametrize("function", [times_complex_constant, made_complex_then_scaled])
def test_a_complex_value_made_at_run_time_is_refused(function, way):
    # the complex gradient was cast to float64 with a ComplexWarning: wrong values
    x = np.array([0.3, 1.7, -0.4])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (no ComplexWarning on the way)
        with pytest.raises(ppto.GradError, match="real computations only"):
            COMPLEX_AT_RUN_TIME[way](function, x)


def dot_of_a_reshape(x, b, shape):
    a = x.reshape(shape)  # (its number of axes is not known when generating code)
    return np.sum(np.dot(a, b) ** 2)


def test_numpy_dot_of_operands_of_unknown_rank_checks_them_when_it_runs():
    # np.dot of 3-d operands ran as np.matmul: a silently different value and
    # gradient; where their ranks are known the transform refuses it (REJECTED)
    b = np.arange(12.0).reshape(2, 3, 2) / 10.0
    with pytest.raises(ppto.PptoError, match="np.dot of a 3-d and a 3-d array"):
        ppto.grad(dot_of_a_reshape)(np.arange(12.0) / 10.0, b, (2, 2, 3))
    x, w = np.linspace(-1.0, 1.0, 12), np.linspace(0.5, -0.5, 8).reshape(4, 2)
    gradient = np.asarray(ppto.grad(dot_of_a_reshape)(x, w, (3, 4)))
    expected = 2.0 * np.dot(x.reshape(3, 4) @ w, w.T).reshape(-1)
    np.testing.assert_allclose(gradient, expected, rtol=1e-12)


def joined_flattened(x, y):
    return np.sum(np.concatenate([x, y], axis=None) ** 2)


def test_concatenate_with_axis_none_names_what_has_no_gradient():
    # the gradient rule indexed a shape with None: a raw TypeError
    arguments = (np.ones((2, 2)), np.ones(3))
    with pytest.raises(ppto.GradError, match="concat with axis=None"):
        ppto.grad(joined_flattened)(*arguments)
    _, pushed = ppto.jvp(joined_flattened, arguments, (np.ones((2, 2)), None))
    assert float(pushed) == 8.0


def test_sorting_in_place_suggests_np_sort():
    # np.sort is an operator: the suggestion is the differentiable spelling
    with pytest.raises(ppto.TransformError) as caught:
        ppto.grad(ec.sorted_in_place)(np.array([0.3, -1.0, 2.0]))
    assert "z = np.sort(z), not z.sort()" in str(caught.value)


_COUNTED = 0


def _count_call():
    global _COUNTED
    _COUNTED += 1


def _near_refused_writes(x):
    """What the refusals above must leave alone: positional axes (not outputs),
    np.diag of a vector (a new array), a helper rebinding a global this function
    does not read."""
    _count_call()
    total = np.sum(np.cumsum(x, 0) * 2.0) + np.sum(x.reshape(2, 2).sum(0))
    total = total + np.sum(np.diag(x) @ np.arange(4.0)) + np.sum(np.clip(x, -1, 1))
    return total + np.sum(np.exp(x).clip(0.0, 3.0))


def test_neighbours_of_the_refused_writes_are_differentiated():
    x = np.array([0.3, -1.2, 2.5, 0.7])
    counted = _COUNTED
    gradient = np.asarray(ppto.grad(_near_refused_writes)(x))
    assert _COUNTED == counted + 1  # the helper ran, as in Python
    expected = central_differences(_near_refused_writes, [x], 0)
    np.testing.assert_allclose(gradient, expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(
    "function, instead",
    [
        (ec.filled_row, "m[0] = 0.0, not m[0].fill(0.0)"),
        (ec.sorted_tail, "z[1:] = np.sort(z[1:]), not z[1:].sort()"),
    ],
)
def test_an_in_place_method_on_a_part_suggests_assigning_into_it(function, instead):
    with pytest.raises(ppto.TransformError) as caught:
        ppto.grad(function)(np.array([0.3, -1.0, 2.0]))
    assert instead in str(caught.value)


def _row_assigned(x):  # (filled_row as suggested)
    m = np.stack([x, x]) * 1.0
    m[0] = 0.0
    return np.sum(m * x)


def _tail_sorted_by_assignment(x):  # (sorted_tail as suggested)
    z = x * 1.0
    z[1:] = np.sort(z[1:])
    return np.sum(z * np.arange(3))


@pytest.mark.parametrize("function", [_row_assigned, _tail_sorted_by_assignment])
def test_the_suggested_assignment_into_a_part_is_differentiated(function):
    from tests.test_checkpoint import central_differences

    x = np.array([0.3, -1.0, 2.0])
    expected = central_differences(function, (x,), 0)
    np.testing.assert_allclose(ppto.grad(function)(x).numpy(), expected, atol=1e-8)
