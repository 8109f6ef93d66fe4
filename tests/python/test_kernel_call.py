"""templates/kernel_call.py, which the evaluator and the profiled wrapper both call a candidate
through (issue 12): how kernel_function's parameters are bound (inputs, model attributes by name
or, for positional-only parameters, by position), how a call is described and recorded, how the
dtype is chosen. Plain python3, no torch: tests/evaluator_python.rs runs it."""

import ast
import importlib.util
import json
import os
import sys
import tempfile
import types
import unittest
from pathlib import Path

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"
spec = importlib.util.spec_from_file_location("kernel_call", TEMPLATES / "kernel_call.py")
kernel_call = importlib.util.module_from_spec(spec)
spec.loader.exec_module(kernel_call)


class Module:
    """Enough of torch.nn.Module for the attribute lookup: plain attributes, parameters,
    buffers and submodules."""

    def __init__(self, attributes=None, parameters=None, buffers=None, children=()):
        self.__dict__.update(attributes or {})
        self._parameters = dict(parameters or {})
        self._buffers = dict(buffers or {})
        self._children = list(children)

    def __getattr__(self, name):
        for store in ("_parameters", "_buffers"):
            values = self.__dict__.get(store, {})
            if name in values:
                return values[name]
        raise AttributeError(name)

    def modules(self):
        yield self
        for child in self._children:
            yield from child.modules()


RMSNORM = Module(attributes={"eps": 1e-5, "num_features": 64}, parameters={"weight": "w"})


def call_of(function, input_count, model, inputs):
    """(args, kwargs) of a call as the evaluator and the wrapper make it."""
    return kernel_call.bind(function, input_count, model).arguments(inputs)


class Binding(unittest.TestCase):
    def test_parameters_after_the_inputs_come_by_name_from_the_model(self):
        def kernel_function(x, weight, eps=1e-6):
            return x

        self.assertEqual(
            call_of(kernel_function, 1, RMSNORM, ["x"]), (["x"], {"weight": "w", "eps": 1e-5})
        )

    def test_a_positional_only_parameter_comes_by_position(self):
        # Issue 12: the evaluator refused this signature, the wrapper passed weight by name,
        # which Python refuses: the two could not call it alike.
        def kernel_function(x, weight, /, eps):
            return x

        args, kwargs = call_of(kernel_function, 1, RMSNORM, ["x"])
        self.assertEqual((args, kwargs), (["x", "w"], {"eps": 1e-5}))
        described = kernel_call.describe_call(kernel_function, args, kwargs)
        self.assertEqual([bound["parameter"] for bound in described], ["x", "weight", "eps"])

    def test_a_positional_only_default_keeps_its_place_before_a_bound_one(self):
        def kernel_function(x, scale=2.0, weight=None, /, *, eps):
            return x

        self.assertEqual(
            call_of(kernel_function, 1, RMSNORM, ["x"]), (["x", 2.0, "w"], {"eps": 1e-5})
        )

    def test_trailing_positional_only_defaults_are_left_to_python(self):
        def kernel_function(x, weight, scale=2.0, /):
            return x

        self.assertEqual(call_of(kernel_function, 1, RMSNORM, ["x"]), (["x", "w"], {}))

    def test_the_inputs_fill_the_first_positional_parameters_whatever_their_names(self):
        def kernel_function(eps, weight, /, num_features):
            return eps

        self.assertEqual(
            call_of(kernel_function, 2, RMSNORM, ["a", "b"]), (["a", "b"], {"num_features": 64})
        )

    def test_star_args_takes_every_input(self):
        def kernel_function(*tensors, eps):
            return tensors

        self.assertEqual(
            call_of(kernel_function, 3, RMSNORM, ["a", "b", "c"]), (["a", "b", "c"], {"eps": 1e-5})
        )

    def test_a_parameter_without_an_attribute_or_a_default_is_refused(self):
        def kernel_function(x, alpha):
            return x

        with self.assertRaises(kernel_call.CallError) as caught:
            kernel_call.bind(kernel_function, 1, RMSNORM)
        self.assertEqual(
            str(caught.exception),
            "kernel_function parameter 'alpha' is neither one of the problem's 1 inputs nor an "
            "attribute of the model",
        )

    def test_too_few_positional_parameters_are_refused(self):
        # Only the evaluator counted them; the wrapper would have called with too many.
        def kernel_function(x, *, eps):
            return x

        with self.assertRaises(kernel_call.CallError) as caught:
            kernel_call.bind(kernel_function, 2, RMSNORM)
        self.assertEqual(
            str(caught.exception),
            "kernel_function takes 1 positional parameters, the problem has 2 inputs",
        )

    def test_underscore_names_are_never_model_attributes(self):
        model = Module(attributes={"_secret": 1})

        def takes_default(x, _secret=0):
            return x

        def takes_none(x, _secret):
            return x

        self.assertEqual(call_of(takes_default, 1, model, ["x"]), (["x"], {}))
        with self.assertRaises(kernel_call.CallError):
            kernel_call.bind(takes_none, 1, model)

    def test_attributes_are_the_models_then_its_first_submodules(self):
        inner = Module(attributes={"eps": 0.5}, buffers={"running_mean": "m"})
        later = Module(buffers={"running_mean": "n"})
        model = Module(attributes={"eps": 1e-5}, children=[inner, later])

        def kernel_function(x, eps, running_mean):
            return x

        self.assertEqual(
            call_of(kernel_function, 1, model, ["x"]), (["x"], {"eps": 1e-5, "running_mean": "m"})
        )

    def test_each_call_gets_its_own_arguments(self):
        def kernel_function(x, weight, /, eps):
            return x

        binding = kernel_call.bind(kernel_function, 1, RMSNORM)
        first, second = binding.arguments(["x"]), binding.arguments(["y"])
        self.assertEqual(second, (["y", "w"], {"eps": 1e-5}))
        self.assertIsNot(first[1], second[1])


class Records(unittest.TestCase):
    def test_values_are_described_alike_in_any_process(self):
        self.assertEqual(kernel_call.describe_value(1e-5), {"type": "float", "repr": "1e-05"})
        self.assertEqual(
            kernel_call.describe_value((1, None)),
            {
                "type": "tuple",
                "items": [{"type": "int", "repr": "1"}, {"type": "NoneType", "repr": "None"}],
            },
        )
        self.assertEqual(
            kernel_call.describe_value(Module()), {"type": f"{__name__}.Module"}
        )

    def test_a_call_is_described_as_python_binds_it(self):
        def kernel_function(x, *rest, eps, **options):
            return x

        described = kernel_call.describe_call(kernel_function, [1, 2], {"eps": 0.5, "mode": "a"})
        self.assertEqual(
            [(bound["parameter"], bound["value"]) for bound in described],
            [
                ("x", {"type": "int", "repr": "1"}),
                ("rest", {"type": "tuple", "items": [{"type": "int", "repr": "2"}]}),
                ("eps", {"type": "float", "repr": "0.5"}),
                ("options", {"type": "dict", "items": {"mode": {"type": "str", "repr": "'a'"}}}),
            ],
        )

    def test_a_call_python_would_refuse_cannot_be_recorded(self):
        def kernel_function(x, weight, /):
            return x

        with self.assertRaises(TypeError):
            kernel_call.describe_call(kernel_function, ["x"], {"weight": "w"})

    def test_each_side_appends_its_call_when_asked(self):
        def kernel_function(x, weight, /, eps):
            return x

        with tempfile.TemporaryDirectory() as scratch:
            candidate = Path(scratch) / "kernel.py"
            candidate.write_text("def kernel_function(x, weight, /, eps): ...\n")
            record = Path(scratch) / "calls.jsonl"
            args, kwargs = call_of(kernel_function, 1, RMSNORM, [3])
            previous = os.environ.pop(kernel_call.RECORD_VARIABLE, None)
            try:
                kernel_call.record_call("evaluator", candidate, kernel_function, args, kwargs)
                self.assertFalse(record.exists(), "nothing is recorded unless asked")
                os.environ[kernel_call.RECORD_VARIABLE] = str(record)
                kernel_call.record_call("evaluator", candidate, kernel_function, args, kwargs)
                kernel_call.record_call("profile_wrapper", candidate, kernel_function, args, kwargs)
            finally:
                os.environ.pop(kernel_call.RECORD_VARIABLE, None)
                if previous is not None:
                    os.environ[kernel_call.RECORD_VARIABLE] = previous
            lines = [json.loads(line) for line in record.read_text().splitlines()]
        self.assertEqual([line["side"] for line in lines], ["evaluator", "profile_wrapper"])
        self.assertEqual(lines[0]["arguments"], lines[1]["arguments"])
        self.assertEqual(lines[0]["source_sha256"], lines[1]["source_sha256"])
        self.assertEqual(
            lines[0]["arguments"],
            [
                {"parameter": "x", "value": {"type": "int", "repr": "3"}},
                {"parameter": "weight", "value": {"type": "str", "repr": "'w'"}},
                {"parameter": "eps", "value": {"type": "float", "repr": "1e-05"}},
            ],
        )


class TorchDtype:
    """Stands for a torch dtype, which prints as `torch.<name>`."""

    def __init__(self, name):
        self.name = name

    def __str__(self):
        return f"torch.{self.name}"


class Dtype(unittest.TestCase):
    torch = types.SimpleNamespace(
        bfloat16="torch.bfloat16", float16="torch.float16", float32="torch.float32"
    )

    def test_the_configured_dtype_wins_then_the_problems_then_bfloat16(self):
        problem = types.SimpleNamespace(DTYPE="fp16")
        self.assertEqual(kernel_call.resolve_dtype(self.torch, "fp32", problem), "torch.float32")
        self.assertEqual(kernel_call.resolve_dtype(self.torch, None, problem), "torch.float16")
        self.assertEqual(
            kernel_call.resolve_dtype(self.torch, None, types.SimpleNamespace()), "torch.bfloat16"
        )
        float32 = TorchDtype("float32")
        self.assertIs(
            kernel_call.resolve_dtype(self.torch, None, types.SimpleNamespace(DTYPE=float32)),
            float32,
        )

    def test_a_dtype_outside_the_three_is_refused_by_name(self):
        with self.assertRaises(kernel_call.CallError) as caught:
            kernel_call.resolve_dtype(self.torch, None, types.SimpleNamespace(DTYPE="int8"))
        self.assertIn("problem.py DTYPE 'int8' is not one of", str(caught.exception))
        with self.assertRaises(kernel_call.CallError) as caught:
            int8 = types.SimpleNamespace(DTYPE=TorchDtype("int8"))
            kernel_call.resolve_dtype(self.torch, None, int8)
        self.assertEqual(
            str(caught.exception), "problem.py DTYPE torch.int8 is not bfloat16, float16 or float32"
        )


class OneModuleForBoth(unittest.TestCase):
    SHARED = {
        "bind_model_attributes",
        "model_attribute_kwargs",
        "model_attribute",
        "install_launch_hook",
        "load_module",
        "resolve_dtype",
    }

    def test_the_evaluator_and_the_wrapper_call_through_kernel_call(self):
        # Both import the kernel_call beside them; neither keeps a binding of its own.
        sys.path.insert(0, str(TEMPLATES))
        try:
            loaded = importlib.util.spec_from_file_location(
                "profile_wrapper", TEMPLATES / "profile_wrapper.py"
            )
            module = importlib.util.module_from_spec(loaded)
            loaded.loader.exec_module(module)
            self.assertEqual(Path(module.kernel_call.__file__), TEMPLATES / "kernel_call.py")
            own = {name for name, value in vars(module).items() if callable(value)}
            self.assertFalse(own & self.SHARED, "profile_wrapper")
            # The evaluator's modules need torch to import: read what each defines instead.
            package = TEMPLATES / "kactors_evaluator"
            importers = []
            for path in sorted(package.glob("*.py")) + [TEMPLATES / "evaluator.py"]:
                tree = ast.parse(path.read_text(encoding="utf-8"))
                defined = {
                    node.name
                    for node in ast.walk(tree)
                    if isinstance(node, (ast.FunctionDef, ast.ClassDef))
                }
                self.assertFalse(defined & self.SHARED, path.name)
                if any(
                    isinstance(node, ast.Import) and any(a.name == "kernel_call" for a in node.names)
                    for node in tree.body
                ):
                    importers.append(path.name)
            self.assertIn("core.py", importers)
            self.assertIn("verify.py", importers)
        finally:
            sys.path.remove(str(TEMPLATES))


if __name__ == "__main__":
    unittest.main()
