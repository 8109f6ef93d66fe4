"""The parts of the evaluator (templates/kactors_evaluator) that need neither torch nor a GPU (issue 11 and issue 10's
memory item): how many draws fit, what a snapshot comparison reports, and the zygote's handling
of descendants. Run by tests/evaluator_python.rs with plain python3."""

import os
import subprocess
import sys
import types
import unittest
from pathlib import Path

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"
sys.dont_write_bytecode = True
sys.path.insert(0, str(TEMPLATES))
from kactors_evaluator import draws, protocol, snapshots, zygote  # noqa: E402

GIB = 1 << 30
# The matvec example: A is 2048 x 1048576 bf16 (4 GiB), drawn as float32 first (8 GiB more).
MATVEC = {
    "inputs_bytes": 4 * GIB + 2 * (1 << 20),
    "outputs_bytes": 4096,
    "first_draw_peak_bytes": 12 * GIB + 2 * (1 << 20),
    "flush_bytes": 256 << 20,
}


class DrawsThatFit(unittest.TestCase):
    def test_all_three_draws_when_they_fit(self):
        keep, needed = draws.plan_draws(3, MATVEC, 139 * GIB, "NVIDIA H200")
        self.assertEqual(keep, 3)
        self.assertEqual(len(needed), 3)
        # Three draws peak while timing: 3 draws kept, 4 copies of the inputs, the flush buffer.
        self.assertGreater(needed[2], 28 * GIB)
        self.assertLess(needed[2], 32 * GIB)

    def test_two_draws_on_a_card_where_three_do_not_fit(self):
        keep, needed = draws.plan_draws(3, MATVEC, 24 * GIB, "NVIDIA A10")
        self.assertEqual(keep, 2)
        self.assertLessEqual(needed[1], 24 * GIB)
        self.assertGreater(needed[2], 24 * GIB)

    def test_never_fewer_than_two(self):
        with self.assertRaises(protocol.InputsDoNotFit) as caught:
            draws.plan_draws(3, MATVEC, 16 * GIB, "NVIDIA A10")
        needed = draws.bytes_needed(2, MATVEC)
        self.assertEqual(
            str(caught.exception),
            f"the problem's inputs do not fit on NVIDIA A10: {needed / GIB:.1f} GiB needed, "
            "16.0 GiB free",
        )

    def test_one_seed_asked_for_is_one_kept(self):
        keep, _ = draws.plan_draws(1, MATVEC, 139 * GIB, "NVIDIA H200")
        self.assertEqual(keep, 1)

    def test_the_margin_is_at_least_a_gibibyte(self):
        small = dict(inputs_bytes=1, outputs_bytes=1, first_draw_peak_bytes=2, flush_bytes=0)
        self.assertGreaterEqual(draws.bytes_needed(3, small), GIB)


def section(items, additions_count=False):
    return (additions_count, dict(items))


class StateChanges(unittest.TestCase):
    def test_a_replaced_function_is_named(self):
        def allclose():
            pass

        def fake():
            pass

        module = types.SimpleNamespace(allclose=allclose, ones=len)
        before = {"torch.": section(snapshots.namespace_keys(module, True))}
        module.allclose = fake
        after = {"torch.": section(snapshots.namespace_keys(module, True))}
        self.assertEqual(snapshots.state_changes(before, after), ["torch.allclose was replaced"])

    def test_a_code_object_swapped_in_place_is_a_replacement(self):
        def compare():
            return 1

        before = {
            "evaluator.": section(
                snapshots.namespace_keys(types.SimpleNamespace(compare=compare), True)
            )
        }
        compare.__code__ = (lambda: 0).__code__
        after = {
            "evaluator.": section(
                snapshots.namespace_keys(types.SimpleNamespace(compare=compare), True)
            )
        }
        self.assertEqual(snapshots.state_changes(before, after), ["evaluator.compare was replaced"])

    def test_additions_count_where_they_shadow(self):
        before = {"torch.Tensor.": section({"add": (1,)}, True), "torch.": section({"add": (1,)})}
        after = {
            "torch.Tensor.": section({"add": (1,), "clone": (2,)}, True),
            "torch.": section({"add": (1,), "lazily_added": (3,)}),
        }
        self.assertEqual(snapshots.state_changes(before, after), ["torch.Tensor.clone was added"])

    def test_settings_say_how_they_changed(self):
        before = {"setting ": section({"torch.backends.cuda.matmul.allow_tf32": "False"}, True)}
        after = {"setting ": section({"torch.backends.cuda.matmul.allow_tf32": "True"}, True)}
        self.assertEqual(
            snapshots.state_changes(before, after),
            ["setting torch.backends.cuda.matmul.allow_tf32 changed from False to True"],
        )

    def test_numbers_compare_by_value_not_identity(self):
        a, b = 10**20, int("1" + "0" * 20)
        self.assertIsNot(a, b)
        self.assertEqual(snapshots.identity_key(a), snapshots.identity_key(b))

    def test_many_changes_are_counted_past_the_limit(self):
        before = {"x.": section({str(i): (i,) for i in range(12)})}
        after = {"x.": section({})}
        changes = snapshots.state_changes(before, after, limit=8)
        self.assertEqual(len(changes), 9)
        self.assertEqual(changes[-1], "and 4 more changes")


class Descendants(unittest.TestCase):
    def test_children_of_finds_a_child_and_its_child(self):
        child = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "import subprocess, sys, time\n"
                "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)'])\n"
                "print(p.pid, flush=True)\n"
                "time.sleep(30)\n",
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            grandchild = int(child.stdout.readline())
            self.assertIn(child.pid, zygote.children_of(os.getpid()))
            self.assertEqual(zygote.children_of(child.pid), {grandchild})
            self.assertEqual(zygote.children_by_scan(child.pid), {grandchild})
        finally:
            os.kill(grandchild, 9)
            child.kill()
            child.wait()

    def test_describe_status(self):
        self.assertEqual(zygote.describe_status(139 << 8), "exit status 139")
        self.assertEqual(zygote.describe_status(11), "killed by signal 11")


class Lines(unittest.TestCase):
    def test_a_line_over_the_limit_is_an_error(self):
        read, write = os.pipe()
        reader = zygote.LineReader(read, limit=16)
        os.write(write, b"x" * 40)
        reader.read_some()
        with self.assertRaises(protocol.EvaluatorError):
            reader.line()
        os.close(read)
        os.close(write)

    def test_lines_come_whole_and_eof_is_seen(self):
        read, write = os.pipe()
        reader = zygote.LineReader(read, limit=1 << 20)
        os.write(write, b'{"a": 1}\n{"b"')
        reader.read_some()
        self.assertEqual(reader.line(), b'{"a": 1}')
        self.assertIsNone(reader.line())
        os.close(write)
        reader.read_some()
        self.assertTrue(reader.closed)
        os.close(read)


if __name__ == "__main__":
    unittest.main()
