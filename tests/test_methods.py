"""Models written as objects, the way a PyTorch user writes them: methods calling
other methods and layers through ``self``, objects called (``__call__``), a layer's
activation held as a function. Derivatives against central differences (gradient,
forward mode, Hessian); what cannot be seen statically is refused at its line."""

import numpy as np
import pytest

import ppto
from tests.test_generated_code import assert_derivatives_match


class _Dense:
    def __init__(self, W, b, activation=np.tanh):
        self.W = W
        self.b = b
        self.activation = activation

    def __call__(self, x):
        return self.forward(x)

    def forward(self, x):
        return self.activation(x @ self.W + self.b)


class _SoftSign(_Dense):
    """Overrides forward: ``__call__`` of the base class reaches this one for its
    objects (the code generated for __call__ depends on the object)."""

    @staticmethod
    def squash(z):
        return z / (1.0 + np.abs(z))

    def forward(self, x):
        return self.squash(x @ self.W + self.b)


class _Net:
    def __init__(self, rng):
        self.hidden = _Dense(rng.standard_normal((3, 4)) * 0.5, rng.normal(size=4))
        self.out = _SoftSign(rng.standard_normal((4, 2)) * 0.5, np.zeros(2))

    def __call__(self, x):
        return self.out(self.hidden(x))

    def loss(self, x):
        return np.sum(self(x) ** 2) + np.sum(self.hidden.forward(x))

    def loss_of_flat(self, x):
        return self.loss(x.reshape(2, 3))


NET = _Net(np.random.default_rng(3))
SCALE = _Dense(np.diag([2.0, -1.0, 0.5]), np.zeros(3), activation=np.sin)


class _UsesAGlobalLayer:
    def forward(self, x):
        return SCALE(x) * 3.0


USES_SCALE = _UsesAGlobalLayer()


def net_loss(x):
    return NET.loss_of_flat(x)


def called_net(x):
    return np.sum(NET(x) * np.array([1.0, -2.0]))


def global_layer_in_a_method(x):
    return np.sum(USES_SCALE.forward(x) ** 2)


@pytest.mark.parametrize(
    "function, size", [(net_loss, 6), (called_net, 3), (global_layer_in_a_method, 3)]
)
def test_methods_and_layers_reached_through_self(function, size):
    # (refused before: "cannot differentiate the method .forward()")
    x = np.linspace(-0.8, 0.7, size)
    assert_derivatives_match(function, x)


def test_each_object_gets_the_code_of_its_own_methods():
    """``_Dense.__call__`` runs ``self.forward``: tanh for the hidden layer,
    _SoftSign's for the output. One derivative of __call__ for both would be
    wrong for one of them."""
    source = ppto.show_grad(called_net)
    for generated in ("_Dense_call", "_SoftSign_call", "_Dense_forward"):
        assert f"def {generated}_forward(" in source
    assert "def _SoftSign_forward_forward(" in source
    assert "forward = tanh(t2)" in source  # (self.activation is np.tanh)


def test_a_layer_or_function_given_again_is_differentiated_again(monkeypatch):
    from tests.test_checkpoint import central_differences

    x = np.linspace(-0.8, 0.7, 6)
    gradient = ppto.grad(net_loss)
    gradient(x)
    rng = np.random.default_rng(5)
    monkeypatch.setattr(NET, "out", _Dense(rng.normal(size=(4, 2)), np.ones(2)))
    expected = central_differences(net_loss, (x,), 0)
    np.testing.assert_allclose(gradient(x).numpy(), expected, rtol=1e-6)
    monkeypatch.setattr(NET.hidden, "activation", np.cos)
    expected = central_differences(net_loss, (x,), 0)
    np.testing.assert_allclose(gradient(x).numpy(), expected, rtol=1e-6)


class _Recursive:
    def forward(self, x, steps):
        if steps == 0:
            return x
        return self.forward(np.sin(x), steps - 1)


class _Sequential:
    def __init__(self, layers):
        self.layers = layers

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x

    def until_negative(self, x):
        for layer in self.layers:
            x = layer(x)
            if np.sum(x) < 0.0:
                break
        return x

    def skipping_until_negative(self, x):
        for layer in self.layers:
            if np.sum(x) > 9.0:
                continue
            x = layer(x)
            if np.sum(x) < 0.0:
                break
        return x


RECURSIVE = _Recursive()
SEQUENTIAL = _Sequential([SCALE, _Dense(np.eye(3), np.ones(3))])


def recursive(x):
    return np.sum(RECURSIVE.forward(x, 3))


def sequential(x):
    return np.sum(SEQUENTIAL.forward(x) ** 2)


def sequential_with_a_break(x):
    return np.sum(SEQUENTIAL.until_negative(x))


def sequential_with_break_and_continue(x):
    return np.sum(SEQUENTIAL.skipping_until_negative(x))


ACTIVATIONS = [np.tanh, np.sin]


def through_a_list_of_functions(x):
    y = x
    for activation in ACTIVATIONS:
        y = activation(y) * 2.0
    return np.sum(y)


def test_a_loop_over_layers_is_unrolled(monkeypatch):
    """``for layer in self.layers: x = layer(x)``, and over a module's list of
    functions: one copy of the body per item (refused before: no ppto operator);
    a layer added afterwards is seen."""
    from tests.test_checkpoint import central_differences

    x = np.array([0.3, -0.6, 0.8])
    assert_derivatives_match(sequential, x)
    assert_derivatives_match(through_a_list_of_functions, x)
    assert_derivatives_match(sequential_with_a_break, x)  # (refused before)
    gradient = ppto.grad(sequential)
    gradient(x)
    extra = _SoftSign(np.eye(3) * 0.7, np.full(3, 0.1))
    monkeypatch.setattr(SEQUENTIAL, "layers", SEQUENTIAL.layers + [extra])
    expected = central_differences(sequential, (x,), 0)
    np.testing.assert_allclose(gradient(x).numpy(), expected, rtol=1e-7)
    SEQUENTIAL.layers.append(SCALE)  # (the same list, one more layer)
    expected = central_differences(sequential, (x,), 0)
    np.testing.assert_allclose(gradient(x).numpy(), expected, rtol=1e-7)


class _IndexedAtRunTime(_Sequential):
    def __init__(self, layers):
        super().__init__(layers)
        self.k = 1

    def forward(self, x):
        return np.sum(self.layers[self.k](x))


INDEXED_AT_RUN_TIME = _IndexedAtRunTime([SCALE, SCALE])


@pytest.mark.parametrize(
    "function, message, line",
    [
        (recursive, "calls itself", "def forward(self, x, steps):"),
        (
            sequential_with_break_and_continue,
            "unrolls a loop over layers .* not both break and continue,",
            "x = layer(x)",
        ),
        (INDEXED_AT_RUN_TIME.forward, "known only when the code runs", "[self.k]"),
    ],
)
def test_what_cannot_be_resolved_is_refused_at_its_line(function, message, line):
    # (the loop with a break, and a layer indexed by self.k, said "layer has no
    # ppto operator", suggesting rules and operators)
    with pytest.raises(ppto.TransformError, match=message) as raised:
        ppto.grad(function)(np.linspace(-0.8, 0.7, 3))
    assert line in str(raised.value)
    assert "no ppto operator" not in str(raised.value)


class _Polynomial:
    def __init__(self, scale):
        self.scale = scale

    def value(self, x, power=2.0, *, offset=0.0):
        return np.sum((x + offset) ** power) * self.scale

    def cubic(self, x):
        return self.value(x, 3.0, offset=0.5)


POLYNOMIAL = _Polynomial(0.5)


def test_a_bound_method_is_differentiated_with_its_object():
    """``ppto.grad(model.loss)``: refused before (a bound method); the object is
    known, so the calls it makes through ``self`` are followed too."""
    x = np.linspace(-0.8, 0.7, 6)
    assert_derivatives_match(NET.loss_of_flat, x)
    assert_derivatives_match(POLYNOMIAL.cubic, x)
    gradient = ppto.grad(POLYNOMIAL.value)  # (its defaults, given or not)
    np.testing.assert_allclose(gradient(x).numpy(), 0.5 * 2 * x, rtol=1e-12)
    np.testing.assert_allclose(
        gradient(x, 4.0, offset=1.0).numpy(), 0.5 * 4 * (x + 1.0) ** 3, rtol=1e-12
    )


FORWARD = SCALE.forward


def through_a_bound_method_held_in_a_global(x):
    return np.sum(FORWARD(x) ** 2)


def test_a_bound_method_held_in_a_global_is_followed_and_watched(monkeypatch):
    from tests.test_checkpoint import central_differences

    x = np.linspace(-0.8, 0.7, 3)
    assert_derivatives_match(through_a_bound_method_held_in_a_global, x)
    gradient = ppto.grad(through_a_bound_method_held_in_a_global)
    gradient(x)
    monkeypatch.setitem(globals(), "FORWARD", _Dense(np.eye(3), np.ones(3)).forward)
    expected = central_differences(through_a_bound_method_held_in_a_global, (x,), 0)
    np.testing.assert_allclose(gradient(x).numpy(), expected, rtol=1e-7)


def test_a_method_called_on_an_argument_says_how_to_show_ppto_the_object():
    # (it said "use a ppto operator")
    with pytest.raises(ppto.TransformError, match="self is an argument") as raised:
        ppto.grad(_Net.loss, wrt=1)(NET, np.linspace(-0.8, 0.7, 6).reshape(2, 3))
    assert "ppto.grad(MODEL.loss)" in str(raised.value)


class _HoldsTensors:
    W = ppto.tensor(np.array([1.0, 2.0, 3.0]))  # (a class attribute)

    def __init__(self):
        self.V = ppto.tensor(np.array([1.0, 2.0, 3.0]))
        self.weights = [ppto.tensor(np.ones(3))]
        self.inner = _Polynomial(0.5)
        self.inner.W = ppto.tensor(np.ones(3))
        self.scale = 2.0

    def by_attribute(self, x):
        return np.sum(np.sin(x) * self.V)

    def by_class_attribute(self, x):
        return np.sum(np.sin(x) * self.W)

    def by_item(self, x):
        return np.sum(np.sin(x) * self.weights[0])

    def through_another_object(self, x):
        return np.sum(np.sin(x) * self.inner.W)

    def reads_no_tensor(self, x):
        return np.sum(np.sin(x) * self.scale)


HOLDS_TENSORS = _HoldsTensors()


def calls_a_method_reading_a_tensor(x):
    return HOLDS_TENSORS.by_attribute(x) * 2.0


@pytest.mark.parametrize(
    "method, read",
    [
        ("by_attribute", "self.V"),
        ("by_class_attribute", "self.W"),
        ("by_item", "self.weights[0]"),
        ("through_another_object", "self.inner.W"),
    ],
)
def test_a_tensor_read_through_self_is_refused_at_its_line(method, read):
    """Generated code reads what self holds when it runs, on raw arrays: a tensor
    there was an error from inside it (np.add.reduce ... has no ppto operator) or
    refused as "loss_of has no ppto operator", naming ppto's own wrapper."""
    x = np.linspace(-0.8, 0.7, 3)
    with pytest.raises(ppto.TransformError, match="is a ppto tensor") as raised:
        ppto.grad(getattr(HOLDS_TENSORS, method))(x)
    assert f"return np.sum(np.sin(x) * {read})" in str(raised.value)
    with pytest.raises(ppto.TransformError, match="self.V is a ppto tensor"):
        ppto.grad(calls_a_method_reading_a_tensor)(x)
    # (an object holding tensors it does not read is differentiated)
    gradient = ppto.grad(HOLDS_TENSORS.reads_no_tensor)(x)
    np.testing.assert_allclose(gradient.numpy(), 2.0 * np.cos(x), rtol=1e-12)


class _EncoderDecoder:
    def __init__(self, encoder, decoder):
        self.encoder = encoder
        self.decoder = decoder

    def forward(self, x):
        for layer in self.encoder:
            x = layer(x)
        x = x * 0.5
        for layer in self.decoder:  # (the same name: each loop is unrolled)
            x = layer(x)
        return np.sum(x**2)


ENCODER_DECODER = _EncoderDecoder(
    [SCALE, _Dense(np.eye(3) * 0.5, np.ones(3))], (_SoftSign(np.eye(3), np.zeros(3)),)
)


def test_two_loops_over_layers_may_share_their_name(monkeypatch):
    # (refused before: "layer has no ppto operator", the name counted as read
    # outside the loop)
    from tests.test_checkpoint import central_differences

    x = np.array([0.3, -0.6, 0.8])
    assert_derivatives_match(ENCODER_DECODER.forward, x)
    gradient = ppto.grad(ENCODER_DECODER.forward)
    gradient(x)
    monkeypatch.setattr(ENCODER_DECODER, "decoder", (SCALE, SCALE))
    expected = central_differences(ENCODER_DECODER.forward, (x,), 0)
    np.testing.assert_allclose(gradient(x).numpy(), expected, rtol=1e-7)


class _Residual:
    """A block with an optional layer (ResNet's downsample), and a chain of
    blocks ending in None."""

    def __init__(self, downsample, next_block=None):
        self.layer = _Dense(np.eye(3) * 0.8, np.full(3, 0.1))
        self.downsample = downsample
        self.next_block = next_block

    def __call__(self, x):
        identity = x
        if self.downsample is not None:
            identity = self.downsample(x)
        y = self.layer(x) + identity
        if self.next_block is None:
            return y
        return self.next_block(y)


RESIDUAL = _Residual(None, _Residual(SCALE, _Residual(None)))


def residual(x):
    return np.sum(RESIDUAL(x) ** 2)


def test_an_optional_layer_tested_against_none_is_resolved(monkeypatch):
    """``if self.downsample is not None:`` takes its branch when the code is
    transformed: the call of the layer that is None was refused ("self.downsample
    has no ppto operator", or "self is an argument"); giving it a layer, or taking
    it away, is seen."""
    from tests.test_checkpoint import central_differences

    x = np.array([0.3, -0.6, 0.8])
    assert_derivatives_match(residual, x)
    gradient = ppto.grad(residual)
    gradient(x)
    monkeypatch.setattr(RESIDUAL, "downsample", _SoftSign(np.eye(3), np.ones(3)))
    monkeypatch.setattr(RESIDUAL.next_block, "downsample", None)
    monkeypatch.setattr(RESIDUAL.next_block, "next_block", None)
    expected = central_differences(residual, (x,), 0)
    np.testing.assert_allclose(gradient(x).numpy(), expected, rtol=1e-7)


class _Stack:
    """Layers applied in turn, an optional shortcut added to the first one's
    output only: the test of the optional layer joined with another."""

    def __init__(self, down):
        self.layers = [
            _Dense(np.eye(3) * 0.8, np.full(3, 0.1)),
            _Dense(np.diag([1.5, -0.5, 1.0]), np.zeros(3), activation=np.sin),
        ]
        self.down = down

    def __call__(self, x):
        h = x
        for i, layer in enumerate(self.layers):
            out = layer(h)
            if self.down is not None and i == 0:
                out = out + self.down(h)
            if not (self.down is None or i > 0):
                out = out * 1.5
            h = out
        return h


STACK = _Stack(None)


def stacked(x):
    return np.sum(STACK(x) ** 2)


def test_an_optional_layer_tested_with_another_condition_is_resolved(monkeypatch):
    """``if self.down is not None and i == 0:`` with no ``down`` was refused ("self.down
    is a NoneType, which cannot be called") where ``if self.down is not None:``
    took its branch: a test that the attribute's value settles alone is settled
    (``and``, ``or``, ``not``); with a layer there the rest is tested as written."""
    from tests.test_checkpoint import central_differences

    x = np.array([0.3, -0.6, 0.8])
    assert_derivatives_match(stacked, x)
    gradient = ppto.grad(stacked)
    np.testing.assert_allclose(
        gradient(x).numpy(), central_differences(stacked, (x,), 0), rtol=1e-7
    )
    monkeypatch.setattr(STACK, "down", _Dense(np.eye(3) * -0.3, np.ones(3)))
    expected = central_differences(stacked, (x,), 0)
    np.testing.assert_allclose(gradient(x).numpy(), expected, rtol=1e-7)
    assert_derivatives_match(stacked, x)


class _Scaled(_Dense):
    def forward(self, x):
        return super().forward(x) * 2.0


class _ScaledAgain(_Scaled):
    def __call__(self, x):
        return super().__call__(x) + super().forward(x) ** 2


SCALED_AGAIN = _ScaledAgain(np.diag([2.0, -1.0, 0.5]), np.ones(3), np.sin)


def through_super(x):
    return np.sum(SCALED_AGAIN(x))


def test_super_calls_the_next_class_method(monkeypatch):
    """``super().forward(x)`` runs the method of the class after the one defining
    the caller in the object's MRO (refused before: "cannot differentiate the
    method .forward()"); a base class's method given again is seen."""
    from tests.test_checkpoint import central_differences

    x = np.array([0.3, -0.6, 0.8])
    assert_derivatives_match(through_super, x)
    gradient = ppto.grad(through_super)
    gradient(x)
    monkeypatch.setattr(_Dense, "forward", lambda self, x: np.cos(x @ self.W))
    expected = central_differences(through_super, (x,), 0)
    np.testing.assert_allclose(gradient(x).numpy(), expected, rtol=1e-7)


class _HoldsBoundMethods:
    """Holds other layers' bound methods: a call of one runs on that layer, not
    on the object holding it (its own W and b are others)."""

    def __init__(self):
        self.W, self.b, self.activation = np.eye(3) * 5.0, np.zeros(3), np.tanh
        self.step = _Dense(np.diag([2.0, -1.0, 0.5]), np.ones(3)).forward
        self.steps = [SCALE.forward, _SoftSign(np.eye(3), np.zeros(3)).forward]

    def forward(self, x):
        return np.sum(self.step(x) ** 2)

    def through_the_list(self, x):
        for step in self.steps:
            x = step(x)
        return np.sum(self.steps[0](x) ** 2)


HOLDS_BOUND_METHODS = _HoldsBoundMethods()


def test_a_bound_method_held_by_an_object_runs_on_its_own_object(monkeypatch):
    """``self.step = layer.forward``: the call passed the holder as self, so
    the gradient was computed with the holder's W, silently wrong; a list of
    them was refused ("self.steps[0] has no ppto operator"). Another bound
    method put there, of another object of the same class, is seen."""
    from tests.test_checkpoint import central_differences

    x = np.array([0.3, -0.6, 0.8])
    assert_derivatives_match(HOLDS_BOUND_METHODS.forward, x)
    assert_derivatives_match(HOLDS_BOUND_METHODS.through_the_list, x)
    gradient = ppto.grad(HOLDS_BOUND_METHODS.forward)
    gradient(x)
    other = _Dense(np.eye(3) * 0.3, np.zeros(3), activation=np.sin)
    monkeypatch.setattr(HOLDS_BOUND_METHODS, "step", other.forward)
    expected = central_differences(HOLDS_BOUND_METHODS.forward, (x,), 0)
    np.testing.assert_allclose(gradient(x).numpy(), expected, rtol=1e-7)


class _SquaredError:
    def __init__(self, model, target):
        self.model = model
        self.target = target

    def __call__(self, x):
        return np.sum((self.model(x) - self.target) ** 2)


SQUARED_ERROR = _SquaredError(NET, np.array([0.5, -0.5]))


def test_an_object_called_is_differentiated_as_its_call():
    """``ppto.grad(loss)`` where ``loss`` is an object whose class defines
    ``__call__`` (refused before: "is not a Python function")."""
    x = np.linspace(-0.8, 0.7, 3)
    assert_derivatives_match(SQUARED_ERROR, x)


class _Counted:
    def __init__(self, depth):
        self.child = _Counted(depth - 1) if depth else None
        self.depth = depth

    @classmethod
    def squash(cls, x):
        return np.tanh(x)

    def forward(self, x):
        if self.depth == 0:  # (not a test of self.child: not followed)
            return np.sin(x)
        return self.child.forward(x) * 2.0

    def squashed(self, x):
        return np.sum(self.squash(x))


COUNTED = _Counted(1)


def counted(x):
    return np.sum(COUNTED.forward(x))


@pytest.mark.parametrize(
    "function, message, line",
    [
        (counted, "self.child is None, which has no forward", "self.child.forward"),
        (COUNTED.squashed, "squash is a classmethod", "self.squash(x)"),
    ],
)
def test_what_self_cannot_call_is_refused_saying_why(function, message, line):
    # (both said "self is an argument, so ppto cannot tell which object it is")
    with pytest.raises(ppto.TransformError, match=message) as raised:
        ppto.grad(function)(np.linspace(-0.8, 0.7, 3))
    assert line in str(raised.value)
    assert "self is an argument" not in str(raised.value)


class _Weighted:
    def __init__(self, layers, weights):
        self.layers = layers
        self.weights = weights

    def enumerated(self, x):
        for depth, layer in enumerate(self.layers):
            x = layer(x) * (depth + 1.0)
        return np.sum(x**2)

    def zipped(self, x):
        for layer, weight in zip(self.layers, self.weights):
            x = layer(x) * weight
        return np.sum(x**2)

    def indexed(self, x):
        for i in range(len(self.layers)):
            x = self.layers[i](x) * self.weights[i]
        return np.sum(x**2)

    def enumerated_pairs(self, x):
        for depth, (layer, weight) in enumerate(zip(self.layers, self.weights)):
            x = layer(x) * weight + depth
        return np.sum(x**2)

    def with_else(self, x):
        for layer in self.layers:
            x = layer(x)
        else:  # (no break: it always runs)
            x = x * 2.0
        return np.sum(x**2)


def test_loops_over_enumerate_and_zip_of_layers_are_unrolled():
    """``for i, layer in enumerate(self.layers)`` and ``for layer, weight in
    zip(self.layers, self.weights)`` (refused before: "layer has no ppto
    operator"); a layer added to the list, or another weight, is seen."""
    _assert_weighted_loops_unrolled_and_watched("enumerated", "zipped")


def test_loops_over_layers_enumerating_pairs_or_with_an_else_are_unrolled():
    """``for i, (layer, weight) in enumerate(zip(...))`` and a loop over layers
    with an ``else`` (each read as a loop over a list of layers: "layer has no
    ppto operator"); a layer added to the list is seen."""
    _assert_weighted_loops_unrolled_and_watched("enumerated_pairs", "with_else")


def _assert_weighted_loops_unrolled_and_watched(*names):
    """The derivatives of ``_Weighted``'s methods ``names`` match central
    differences, and their grads see a layer added and a weight changed."""
    from tests.test_checkpoint import central_differences

    weighted = _Weighted([SCALE, _SoftSign(np.eye(3), np.ones(3))], [0.5, -2.0, 3.0])
    x = np.array([0.3, -0.6, 0.8])
    methods = [getattr(weighted, name) for name in names]
    for method in methods:
        assert_derivatives_match(method, x)
    gradients = [ppto.grad(method) for method in methods]
    for gradient in gradients:
        gradient(x)
    weighted.layers.append(SCALE)
    weighted.weights[2] = 0.25  # (now zipped with a layer)
    for method, gradient in zip(methods, gradients):
        expected = central_differences(method, (x,), 0)
        np.testing.assert_allclose(gradient(x).numpy(), expected, rtol=1e-7)


class _NotBuilt:
    def __init__(self):
        self.built = False

    @property
    def kernel(self):
        raise ValueError("call build() first")

    def forward(self, x):
        if self.built:
            return np.sum(self.kernel * x)
        return np.sum(np.sin(2.0 * x))


def test_a_property_that_raises_is_left_to_when_the_code_runs():
    """Reading what a method's self holds (to find tensors) ran the property when
    the code was transformed, and its ValueError ended the transformation."""
    x = np.linspace(-0.8, 0.7, 3)
    np.testing.assert_allclose(
        ppto.grad(_NotBuilt().forward)(x).numpy(), 2.0 * np.cos(2.0 * x), rtol=1e-12
    )


def test_a_loop_over_no_layers_is_no_turn():
    """A ``Sequential`` with no layers yet is the identity (refused before: "layer
    has no ppto operator", the loop left as written); one added is seen."""
    from tests.test_checkpoint import central_differences

    empty = _Sequential([])

    def loss(x):
        return np.sum(empty.forward(x) ** 2)

    x = np.array([0.3, -0.6, 0.8])
    gradient = ppto.grad(loss)
    np.testing.assert_allclose(gradient(x).numpy(), 2.0 * x, rtol=1e-12)
    empty.layers.append(SCALE)
    expected = central_differences(loss, (x,), 0)
    np.testing.assert_allclose(gradient(x).numpy(), expected, rtol=1e-7)


def test_a_loop_over_the_indices_of_layers_is_unrolled():
    """``for i in range(len(self.layers)): x = self.layers[i](x)`` (refused
    before: "self.layers[i] has no ppto operator"); a layer added is seen."""
    from tests.test_checkpoint import central_differences

    weighted = _Weighted([SCALE, _SoftSign(np.eye(3), np.ones(3))], [0.5, -2.0, 3.0])
    x = np.array([0.3, -0.6, 0.8])
    assert_derivatives_match(weighted.indexed, x)
    gradient = ppto.grad(weighted.indexed)
    gradient(x)
    weighted.layers.append(SCALE)
    expected = central_differences(weighted.indexed, (x,), 0)
    np.testing.assert_allclose(gradient(x).numpy(), expected, rtol=1e-7)


class _Recurrent:
    """Reads its weights through ``self`` in a helper called in a loop, and in
    the loss itself."""

    def __init__(self):
        self.W = np.array([[0.9, -0.4], [0.3, 0.7]])
        self.b = np.array([0.1, -0.2])

    def step(self, h):
        return np.tanh(h @ self.W + self.b)

    def loss(self, x):
        h = x
        for _ in range(3):
            h = self.step(h) * self.W[0]
        return np.sum(h * self.W[1])


def test_a_pullback_uses_the_weights_its_forward_pass_read():
    """``ppto.vjp(model.loss, x)`` and then ``model.W = ...`` before the pullback:
    the backward pass re-read ``self.W`` (in the loss, in a loop and in the helper
    it calls), so the gradient mixed the new weights with the old activations."""
    from tests.test_checkpoint import central_differences

    model = _Recurrent()
    x = np.array([0.3, -0.6])
    expected = central_differences(model.loss, (x,), 0)
    out, pullback = ppto.vjp(model.loss, x)
    model.W = model.W * 3.0
    model.b = model.b - 1.0
    (gradient,) = pullback(1.0)
    np.testing.assert_allclose(gradient.numpy(), expected, rtol=1e-7)


class _Block:
    """A layer without ``__call__``: models call its ``forward`` (or misspell it)."""

    def __init__(self, W):
        self.W = W

    def forward(self, x):
        return np.tanh(x @ self.W)


class _Blocks:
    def __init__(self, blocks):
        self.blocks = blocks

    def forward(self, x):
        for block in self.blocks:
            x = block.forward(x) + x
        return np.sum(x**2)

    def called(self, x):
        x = self.blocks[0](x)
        return np.sum(self.blocks[1](x))


def test_a_loop_over_layers_calling_their_methods_is_unrolled():
    """``for block in self.blocks: x = block.forward(x)`` of layers whose class has
    no ``__call__`` (refused before: "cannot differentiate the method .forward()");
    calling such a layer is refused at its line (was Python's TypeError from
    generated code)."""
    from tests.test_checkpoint import central_differences

    rng = np.random.default_rng(5)
    blocks = _Blocks([_Block(rng.standard_normal((3, 3)) * 0.5) for _ in range(2)])
    x = np.array([0.3, -0.6, 0.8])
    assert_derivatives_match(blocks.forward, x)
    gradient = ppto.grad(blocks.forward)
    gradient(x)
    blocks.blocks.append(_Block(np.eye(3)))
    expected = central_differences(blocks.forward, (x,), 0)
    np.testing.assert_allclose(gradient(x).numpy(), expected, rtol=1e-7)
    with pytest.raises(ppto.TransformError, match="cannot be called") as raised:
        ppto.grad(blocks.called)(x)
    assert "x = self.blocks[0](x)" in str(raised.value)


class _Tower:
    """Layers read by a negative index, a slice and dict keys."""

    def __init__(self):
        self.layers = [SCALE, _Dense(np.eye(3) * 0.5, np.ones(3))]
        self.layers.append(_SoftSign(np.eye(3), np.zeros(3)))
        self.blocks = {"enc": SCALE, "dec": _Dense(np.eye(3) * 0.5, np.ones(3))}
        self.acts = {"squash": np.tanh}

    def last(self, x):
        return np.sum(self.layers[-1](x) ** 2) + np.sum(self.layers[-3](x))

    def sliced(self, x):
        h = self.layers[0](x)
        for layer in self.layers[1:]:
            h = layer(h) * 2.0
        for layer in self.layers[::-2]:
            h = layer(h)
        return np.sum(h**2)

    def keyed(self, x):
        return np.sum(self.acts["squash"](self.blocks["dec"](x)) ** 2)

    def items(self, x):
        for name, block in self.blocks.items():
            x = block(x) * (2.0 if name == "enc" else 0.5)
        return np.sum(x**2)

    def values(self, x):
        for block in self.blocks.values():
            x = block(x)
        for name in self.blocks:
            x = self.blocks[name](x) + x
        return np.sum(x**2)


class _Counted(_Tower):
    def counted(self, x):
        h = x
        for i in range(1, len(self.layers)):
            h = h + self.layers[i](x)
        for i in range(len(self.layers) - 1):
            h = h + self.layers[i](x) * (i + 1.0)
        for layer in reversed(self.layers[1:]):
            h = layer(h)
        return np.sum(h**2)


def test_loops_over_some_indices_of_layers_or_reversed_layers_are_unrolled():
    """``range(1, len(self.layers))``, ``range(len(self.layers) - 1)`` and
    ``reversed(self.layers)`` (refused before: "self.layers[i] has no ppto
    operator"); a layer added is seen."""
    from tests.test_checkpoint import central_differences

    model = _Counted()
    x = np.array([0.3, -0.6, 0.8])
    assert_derivatives_match(model.counted, x)
    gradient = ppto.grad(model.counted)
    gradient(x)
    model.layers.append(_Dense(np.eye(3) * 0.3, np.ones(3), activation=np.sin))
    expected = central_differences(model.counted, (x,), 0)
    np.testing.assert_allclose(gradient(x).numpy(), expected, rtol=1e-6, atol=1e-9)


class _Neighbours(_Tower):
    def residual(self, x):
        h = x
        for i in range(1, len(self.layers)):
            h = self.layers[i - 1](h) + self.layers[i](h) * 0.5
        return np.sum(h**2) + np.sum(self.layers[2 * 1 - 3](x))

    def counted_from_one(self, x):
        for i, layer in enumerate(self.layers, 1):
            x = layer(x) * i
        for i, layer in enumerate(self.layers[1:], -2):
            x = x + layer(x) * i
        for i, (layer, other) in enumerate(zip(self.layers, self.layers[1:]), 2):
            x = layer(x) * i + other(x)
        return np.sum(x**2)


def test_layers_read_by_an_index_computed_from_an_unrolled_count():
    """``self.layers[i - 1]`` in a loop over ``range(1, len(self.layers))`` reads
    ``self.layers[1 - 1]`` once unrolled, a constant index (refused before as
    "known only when the code runs")."""
    model = _Neighbours()
    assert_derivatives_match(model.residual, np.array([0.3, -0.6, 0.8]))


def test_loops_over_enumerate_of_layers_from_another_start_are_unrolled():
    """``enumerate(self.layers, 1)`` counts from its start, of pairs of layers
    too (refused before: "layer has no ppto operator")."""
    model = _Neighbours()
    assert_derivatives_match(model.counted_from_one, np.array([0.3, -0.6, 0.8]))


def test_layers_read_by_a_negative_index_a_slice_or_a_dict_key(monkeypatch):
    """``self.layers[-1](x)``, ``for layer in self.layers[1:]``,
    ``self.blocks["enc"](x)`` and loops over a dict's items, values and keys
    (refused before: "self.layers[-1] has no ppto operator", "layer has no ppto
    operator", "this form of for loop"); a layer given again or added is seen."""
    from tests.test_checkpoint import central_differences

    tower = _Tower()
    x = np.array([0.3, -0.6, 0.8])
    methods = tower.last, tower.sliced, tower.keyed, tower.items, tower.values
    for method in methods:
        assert_derivatives_match(method, x)
    gradients = [ppto.grad(method) for method in methods]
    for gradient in gradients:
        gradient(x)
    tower.layers.append(_Dense(np.eye(3) * 0.3, np.ones(3), activation=np.sin))
    monkeypatch.setitem(tower.blocks, "dec", _SoftSign(np.eye(3), np.ones(3)))
    tower.blocks["extra"] = SCALE
    monkeypatch.setitem(tower.acts, "squash", np.sin)
    for method, gradient in zip(methods, gradients):
        expected = central_differences(method, (x,), 0)
        np.testing.assert_allclose(gradient(x).numpy(), expected, rtol=1e-6, atol=1e-9)


class _Aliased:
    """Calls a layer, an activation and a method through local names."""

    def __init__(self):
        self.layer = SCALE
        self.act = np.tanh
        self.layers = [_Dense(np.eye(3) * 0.5, np.ones(3)), SCALE]

    def forward(self, x):
        layer = self.layer
        f = self.act
        step = self.layers[-1].forward
        layers = self.layers
        h = f(layer(x)) * 2.0
        for inner in layers:
            h = inner(h) + step(h)
        return np.sum(h**2)

    def chosen(self, x):
        layer = self.layers[0]
        if np.sum(x) > 0.0:
            layer = self.layer
        return np.sum(layer(x))

    def chosen_for_constants(self, x):
        reduce = np.max
        if np.sum(x) > 0.0:
            reduce = np.min
        return np.sum(self.layer(x)) * reduce(np.array([2.0, 3.0]))


def test_a_layer_or_method_called_through_a_local_name(monkeypatch):
    """``layer = self.layer; h = layer(x)``, ``f = self.act``, ``step =
    self.layers[-1].forward``, a loop over a local name for the list (refused
    before: "layer has no ppto operator"); another layer there is seen. A name
    bound twice is refused at the call, saying what to write."""
    from tests.test_checkpoint import central_differences

    aliased = _Aliased()
    x = np.array([0.3, -0.6, 0.8])
    assert_derivatives_match(aliased.forward, x)
    gradient = ppto.grad(aliased.forward)
    gradient(x)
    monkeypatch.setattr(aliased, "layer", _SoftSign(np.eye(3), np.ones(3)))
    monkeypatch.setattr(aliased, "act", np.sin)
    aliased.layers.append(SCALE)
    expected = central_differences(aliased.forward, (x,), 0)
    np.testing.assert_allclose(gradient(x).numpy(), expected, rtol=1e-6)
    with pytest.raises(ppto.TransformError, match="bound once") as raised:
        ppto.grad(aliased.chosen)(x)
    assert "return np.sum(layer(x))" in str(raised.value)
    assert "call it where it is held (self.layers[0](...))" in str(raised.value)
    # (a function chosen so, called on constants alone, runs as written)
    constants = aliased.chosen_for_constants
    expected = central_differences(constants, (x,), 0)
    np.testing.assert_allclose(ppto.grad(constants)(x).numpy(), expected, rtol=1e-7)


class _Masked:
    """A layer whose ``__call__`` passes ``*args, **kwargs`` on to ``forward``,
    which takes an optional mask and a keyword."""

    def __init__(self, W):
        self.W = W

    def __call__(self, *args, **kwargs):
        """Runs forward."""
        return self.forward(*args, **kwargs)

    def forward(self, x, mask=None, *, scale=1.0):
        h = np.tanh(x @ self.W) * scale
        if mask is not None:
            h = h * mask
        return h


class _MaskedModel:
    def __init__(self):
        W = np.array([[0.9, -0.4, 0.2], [0.3, 0.7, -0.5], [0.1, 0.2, 0.6]])
        self.inner = _Masked(W)
        self.mask = np.array([1.0, 0.0, 1.0])

    def __call__(self, *args):
        return self.loss(*args)

    def loss(self, x):
        h = self.inner(x) + self.inner(x, self.mask)
        return np.sum(self.inner(h, mask=self.mask, scale=2.0) ** 2)


def _sine_forward(self, x, mask=None, *, scale=1.0):
    return np.sin(x @ self.W) * scale


def test_a_call_passed_on_with_args_reaches_the_method_it_calls(monkeypatch):
    """``def __call__(self, *args, **kwargs): return self.forward(*args,
    **kwargs)`` called as ``self.inner(x, mask=m, scale=2.0)``, and
    ``ppto.grad(model)`` of a model whose ``__call__`` does that (refused
    before: "it takes *args or **kwargs parameters"); forward's defaults and
    keywords are given or not. Another forward given to the class is seen."""
    from tests.test_checkpoint import central_differences

    model = _MaskedModel()
    x = np.array([0.3, -0.6, 0.8])
    assert_derivatives_match(model, x)
    assert_derivatives_match(model.loss, x)
    gradient = ppto.grad(model.loss)
    gradient(x)
    monkeypatch.setattr(_Masked, "forward", _sine_forward)
    expected = central_differences(model.loss, (x,), 0)
    np.testing.assert_allclose(gradient(x).numpy(), expected, rtol=1e-7)


class _ScaledLoss(_ScaledAgain):
    def loss(self, x):
        return np.sum(self(x))


def test_a_grad_of_a_bound_method_made_each_step_reuses_its_code(builds):
    """``ppto.grad(model.loss)`` made anew on every training step (a new wrapper
    per bound method, transformed again each time) reuses the code generated for
    the first while what it read is unchanged, sees a layer given again, and
    keeps no model alive once the user drops it."""
    import gc
    import weakref

    from tests.test_checkpoint import central_differences

    model = _Net(np.random.default_rng(7))
    x = np.linspace(-0.8, 0.7, 6).reshape(2, 3)
    for _ in range(3):
        ppto.grad(model.loss)(x)
        ppto.grad(model.loss_of_flat)(x.ravel())
    assert len(builds) == 2
    model.out = _Dense(np.eye(4)[:, :2] * 0.5, np.ones(2))
    expected = central_differences(model.loss, (x,), 0)
    np.testing.assert_allclose(ppto.grad(model.loss)(x).numpy(), expected, rtol=1e-7)
    assert len(builds) == 3
    other = _Net(np.random.default_rng(8))  # (another object: its own code)
    expected = central_differences(other.loss, (x,), 0)
    np.testing.assert_allclose(ppto.grad(other.loss)(x).numpy(), expected, rtol=1e-7)
    alive = weakref.ref(model)
    del model
    gc.collect()
    assert alive() is None
    # (one whose methods call super(): the super object watched held it)
    scaled = _ScaledLoss(np.diag([2.0, -1.0, 0.5]), np.ones(3), np.sin)
    ppto.grad(scaled.loss)(x[0])
    alive = weakref.ref(scaled)
    del scaled
    gc.collect()
    assert alive() is None


class _Logged(_Masked):
    def __call__(self, *args):
        h = self.forward(*args)
        return h


def test_a_call_of_a_method_taking_args_that_does_more_is_refused_by_its_name():
    """A ``__call__(self, *args)`` doing more than passing its call on cannot be
    followed: refused naming the method as written (it said ``_Logged_call``,
    ppto's name for its copy) and how to write it."""
    logged = _Logged(np.eye(3))
    with pytest.raises(ppto.TransformError, match="_Logged.__call__") as raised:
        ppto.grad(lambda x: np.sum(logged(x)))(np.linspace(-0.8, 0.7, 3))
    assert "return self.forward(*args, **kwargs)" in str(raised.value)
    assert "np.sum(logged(x))" in str(raised.value)


class _ScaledByDefault:
    def forward(self, x, scale=1.0):
        return np.sum(x**2) * scale

    def __call__(self, x, scale=3.0, *args):
        return self.forward(x, scale, *args)


class _ScaledByKeyword(_ScaledByDefault):
    def __call__(self, *args, scale=3.0):
        return self.forward(*args, scale=scale)


@pytest.mark.parametrize("model", [_ScaledByDefault(), _ScaledByKeyword()])
def test_a_method_passing_its_call_on_with_defaults_of_its_own_is_refused(model):
    """A ``__call__`` passing its call on to ``forward`` with defaults of its own
    (scale=3.0 where forward's is 1.0) is not that call of forward: followed as
    one, model(x) was differentiated with forward's default (gradient 2x, not
    6x). Refused at the user's line, saying why."""
    x = np.array([1.0, 2.0])
    with pytest.raises(ppto.TransformError, match="without defaults of its own"):
        ppto.grad(lambda v: model(v))(x)


def test_grad_of_a_model_whose_call_takes_args_and_is_not_followed_says_why():
    """``ppto.grad(model)`` where ``__call__`` takes ``*args`` and cannot be
    followed: a GradError naming the method (it said "__call__(x, scale,
    args=3.0): missing a required argument", a signature ppto made up)."""
    x = np.array([1.0, 2.0])
    with pytest.raises(ppto.GradError, match=r"_ScaledByDefault.__call__: .*\*args"):
        ppto.grad(_ScaledByDefault())(x)


class _DefaultScale:
    def loss(self, x, scale=1.0):
        return np.sum(x**2) * scale


def test_grad_of_a_method_made_again_sees_defaults_reassigned():
    """The wrapper kept per object and method copies the method's defaults:
    reassigned (``_DefaultScale.loss.__defaults__``), a grad made again used the
    old ones (gradient 2x where the method now computes 4x)."""
    model, x = _DefaultScale(), np.array([1.0, 2.0])
    np.testing.assert_allclose(ppto.grad(model.loss)(x).numpy(), 2.0 * x)
    original = _DefaultScale.loss.__defaults__
    try:
        _DefaultScale.loss.__defaults__ = (2.0,)
        np.testing.assert_allclose(ppto.grad(model.loss)(x).numpy(), 4.0 * x)
    finally:
        _DefaultScale.loss.__defaults__ = original


BLOCKS_ATTRIBUTE = "blocks"
STAGE_ATTRIBUTES = ("layers",)


class _Gated:
    """Blocks read through .get, getattr with names known when the code is made,
    and loops over layers that leave with break or continue, or count from a
    start known only when the code runs."""

    def __init__(self, rng):
        self.blocks = {
            "enc": _Dense(rng.standard_normal((3, 3)) * 0.5, rng.normal(size=3)),
            "dec": _Dense(rng.standard_normal((3, 3)) * 0.5, rng.normal(size=3)),
        }
        self.layers = [
            _Dense(rng.standard_normal((3, 3)) * 0.5, rng.normal(size=3))
            for _ in range(4)
        ]

    def read_by_name(self, x):
        h = self.blocks.get("enc")(x)
        h = getattr(self, "blocks")["dec"](h)  # noqa: B009 (the spelling tested)
        name = "layers"
        h = getattr(self, name)[0](h)
        h = getattr(self, BLOCKS_ATTRIBUTE).get("enc").forward(h)
        return np.sum(h**2)

    def through_named_blocks(self, x):
        h = x
        for name in ("dec", "enc"):
            h = self.blocks[name](h) * 0.5 + h
        for name in STAGE_ATTRIBUTES:
            h = getattr(self, name)[1](h) * len(name)
        for attribute in ["blocks"]:
            h = getattr(self, attribute)["dec"](h)
        return np.sum(h**2)

    def leave_early(self, x):
        h = x
        for layer in self.layers:
            h = layer(h)
            if np.sum(h) > 1.65:  # (taken on some inputs: see the test)
                break
        else:
            h = h * 2.0
        for layer in self.layers[1:]:
            if np.sum(h) < -1.0:
                continue
            h = layer(h) + h
        return np.sum(h**2)

    def counted_from(self, x, first=2):
        h = x
        for i, layer in enumerate(self.layers, first):
            if i == first + 2:
                break
            h = layer(h) * i
        for i, outer in enumerate(self.layers[:2], first):  # (nested: two starts)
            for j, inner in enumerate(self.layers[2:], i * 2):
                h = inner(h) * j + outer(h) * i
        return np.sum(h**2) / 1000.0


def test_layers_read_through_get_and_getattr_of_known_names():
    """``self.blocks.get("enc")``, ``getattr(self, "blocks")["dec"]`` and
    ``getattr(self, name)`` of a name given a string once or a module-level
    string (refused before: ppto could not follow them to the layer)."""
    model = _Gated(np.random.default_rng(11))
    assert_derivatives_match(model.read_by_name, np.array([0.3, -0.6, 0.8]))
    # (loops over names written out or held in a module: unrolled, one per name)
    assert_derivatives_match(model.through_named_blocks, np.array([0.3, -0.6, 0.8]))


def test_loops_over_layers_with_break_continue_and_a_start_known_when_run():
    """A ``break`` (with the loop's ``else``) or ``continue`` in a loop over
    ``self.layers``, and ``enumerate(self.layers, first)`` of an argument: each
    unrolled (they were refused), on inputs that take the exits and that do
    not."""
    model = _Gated(np.random.default_rng(12))
    broke = []
    for x in (np.array([0.3, -0.6, 0.8]), np.array([-0.9, -0.8, -0.7])):
        assert_derivatives_match(model.leave_early, x)
        h = x
        for layer in model.layers:
            h = layer(h)
            if np.sum(h) > 1.65:
                break
        broke.append(bool(np.sum(h) > 1.65))
    assert broke == [False, True]
    x = np.array([0.3, -0.6, 0.8])
    assert_derivatives_match(model.counted_from, x)
    from tests.corpus.checks import central_differences

    for first in (0, 3):  # (one code for both: the start is read when it runs)
        expected = central_differences(model.counted_from, [x, first], 0)
        gradient = ppto.grad(model.counted_from)(x, first)
        np.testing.assert_allclose(gradient.numpy(), expected, rtol=1e-6)


class _BothExits(_Gated):
    def loss(self, x):
        h = x
        for layer in self.layers:
            if np.sum(h) > 5.0:
                continue
            h = layer(h)
            if np.sum(h) > 9.0:
                break
        return np.sum(h)


def test_a_loop_over_layers_with_break_and_continue_is_refused():
    model = _BothExits(np.random.default_rng(13))
    with pytest.raises(ppto.TransformError, match="not both break and continue"):
        ppto.grad(model.loss)(np.array([0.3, -0.6, 0.8]))


class _SlotDense:
    __slots__ = ("W",)

    def __init__(self, W):
        self.W = W

    def __call__(self, x):
        return np.tanh(x @ self.W)


class _SlotNet:
    __slots__ = ("layers", "scale")

    def __init__(self, rng):
        self.layers = [_SlotDense(rng.standard_normal((3, 3))) for _ in range(2)]
        self.scale = 2.0

    def loss(self, x):
        h = x
        for layer in self.layers:
            h = layer(h)
        return np.sum(h**2) * self.scale


def test_a_model_with_slots_reuses_its_code_and_is_not_held_for_ever(builds):
    """A model whose ``__slots__`` has no ``__weakref__``: ``ppto.grad(model.loss)``
    made on each step reuses the code made for it (it was transformed again on
    every step), and only the last ``STRONGLY_HELD_OBJECTS`` such models are
    held."""
    from ppto import api
    from tests.corpus.checks import central_differences

    model = _SlotNet(np.random.default_rng(14))
    x = np.linspace(-0.8, 0.7, 6).reshape(2, 3)
    expected = central_differences(model.loss, [x], 0)
    for _ in range(3):
        np.testing.assert_allclose(
            ppto.grad(model.loss)(x).numpy(), expected, rtol=1e-7
        )
    assert len(builds) == 1
    model.scale = 3.0  # (an attribute changed: the gradient follows it)
    np.testing.assert_allclose(
        ppto.grad(model.loss)(x).numpy(), expected * 1.5, rtol=1e-7
    )
    for seed in range(api.STRONGLY_HELD_OBJECTS + 2):
        ppto.grad(_SlotNet(np.random.default_rng(seed)).loss)(x)
    assert len(api._STRONGLY_HELD) == api.STRONGLY_HELD_OBJECTS
    assert all(entry[0] is not model for entry in api._STRONGLY_HELD.values())


class _NamedAtRunTime(_Gated):
    def loss(self, x, name):
        return np.sum(getattr(self, name)["enc"](x))

    def missing(self, x):
        return np.sum(self.blocks.get("mid", self.layers[0])(x))


def test_getattr_of_a_name_known_when_run_and_get_of_a_missing_key_are_refused():
    model = _NamedAtRunTime(np.random.default_rng(15))
    x = np.array([0.3, -0.6, 0.8])
    with pytest.raises(ppto.TransformError, match="known only when the code runs"):
        ppto.grad(model.loss)(x, "blocks")
    with pytest.raises(ppto.TransformError, match="has no key 'mid'"):
        ppto.grad(model.missing)(x)


class _Buffers:
    """State read, copied or rebound without being changed: what the refusals of
    changes to an object's attributes (tests/error_cases.py, _Recorder) must
    still accept."""

    def __init__(self):
        self.w = np.array([0.5, -1.0, 2.0])
        self.hs = [np.array([1.0, 2.0, 3.0])]
        self.scale = 2.0
        self.seen = []

    def read_through_a_local_name(self, x):
        b = self.w
        return np.sum((b + x) ** 2)

    def rebound_after_reading(self, x):
        b = self.w
        b = b + x**2  # (a new array: self.w is unchanged)
        return np.sum(b * self.w)

    def number_added_into(self, x):
        s = self.scale
        s += 1.0  # (a float: += rebinds s)
        return np.sum(x**2 * s)

    def copy_written_into(self, x):
        b = self.w.copy()
        b[1:] = x[1:] ** 2
        return np.sum(b * self.w)

    def list_copied_then_appended_to(self, x):
        hs = list(self.hs)
        hs.append(x**2)
        return np.sum(hs[-1] * hs[0])

    def constants_kept(self, x):
        self.seen.append(3)  # (no differentiated value: runs as written)
        return np.sum(np.sin(x) * self.w) * len(self.seen)


@pytest.mark.parametrize(
    "method",
    [
        "read_through_a_local_name",
        "rebound_after_reading",
        "number_added_into",
        "copy_written_into",
        "list_copied_then_appended_to",
        "constants_kept",
    ],
)
def test_an_objects_state_read_copied_or_rebound_is_differentiated(method):
    from tests.test_checkpoint import central_differences

    x = np.array([0.3, -1.2, 2.5])
    gradient = ppto.grad(getattr(_Buffers(), method))(x).numpy()
    # (a fresh object per call: constants_kept's list grows each time)
    expected = central_differences(
        lambda v: getattr(_Buffers(), method)(v), (x.astype(np.float64),), 0
    )
    np.testing.assert_allclose(gradient, expected, rtol=1e-6, atol=1e-8)
