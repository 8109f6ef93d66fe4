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
from kactors_evaluator import compiled, draws, protocol, snapshots, zygote  # noqa: E402

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


# Triton's PTX for a kernel `add_kernel` (lineinfo on), shortened: the file table, the line
# locations and the debug sections name the candidate's file and lines.
ADD_PTX = """//
// Generated by LLVM NVPTX Back-End
//

.version 8.7
.target sm_90a
.address_size 64

	// .globl	add_kernel              // -- Begin function add_kernel
                                        // @add_kernel
.visible .entry add_kernel(
	.param .u64 .ptr .global .align 1 add_kernel_param_0,
	.param .u64 .ptr .global .align 1 add_kernel_param_1,
	.param .u32 add_kernel_param_2
)
.reqntid 128
{
	.reg .pred 	%p<3>;
	.reg .b32 	%r<6>;
	.reg .b64 	%rd<5>;
	.loc	1 10 0                          // {FILE}:10:0
$L__func_begin0:
	.loc	1 10 0                          // {FILE}:10:0

// %bb.0:
	ld.param.u64 	%rd3, [add_kernel_param_0];
	ld.param.u64 	%rd4, [add_kernel_param_1];
$L__tmp0:
	.loc	1 {LOAD} 24                         // {FILE}:{LOAD}:24
	mov.u32 	%r1, %ctaid.x;
	.loc	1 {STORE} 20                         // {FILE}:{STORE}:20
	setp.lt.s32 	%p1, %r1, 4096;
	@%p1 bra 	$L__BB0_2;
	st.global.b32 	[%rd4], %r1;
$L__BB0_2:
	ret;
$L__tmp1:
$L__func_end0:
                                        // -- End function
}
	.file	1 "{FILE}"
	.section	.debug_abbrev
	{
.b8 1
.b8 17
	}
	.section	.debug_info
	{
.b32 70
.b8 {NAMEBYTES}
	}
	.section	.debug_macinfo	{	}
"""


def ptx(name, path, load, store, instruction="mov.u32"):
    text = ADD_PTX.replace("add_kernel", name).replace("{FILE}", path)
    text = text.replace("{LOAD}", str(load)).replace("{STORE}", str(store))
    text = text.replace("{NAMEBYTES}", ",".join(str(b) for b in name.encode()))
    return text.replace("mov.u32", instruction)


AMDGCN = """	.amdgcn_target "amdgcn-amd-amdhsa--gfx942"
	.text
	.globl	add_kernel                      ; -- Begin function add_kernel
	.p2align	8
	.type	add_kernel,@function
add_kernel:                             ; @add_kernel
.Lfunc_begin0:
	.file	1 "/runs/r/candidates/{N}/kernel.py"
	.loc	1 {LINE} 0 prologue_end
	s_load_dwordx2 s[0:1], s[0:1], 0x0
.Ltmp0:
	s_endpgm
.Lfunc_end0:
	.size	add_kernel, .Lfunc_end0-add_kernel
	.section	.debug_abbrev,"",@progbits
	.byte	1
	.section	.AMDGPU.csdata,"",@progbits
	.amdgpu_metadata
      .name:           add_kernel
      .symbol:         add_kernel.kd
	.end_amdgpu_metadata
"""


class CompiledFingerprints(unittest.TestCase):
    def digest(self, text, name, key="ptx"):
        return compiled.assembly_digest({key: text}, name)

    def test_kernels_differing_only_in_names_and_line_order_are_the_same_code(self):
        first = ptx("add_kernel", "/runs/r/candidates/1/kernel.py", 12, 13)
        # Renamed, its independent lines swapped in the source (their locations swap), and in
        # another candidate's folder.
        second = ptx("sum_rows", "/runs/r/candidates/7/kernel.py", 13, 12)
        self.assertNotEqual(first, second)
        self.assertEqual(self.digest(first, "add_kernel"), self.digest(second, "sum_rows"))

    def test_a_different_instruction_is_different_code(self):
        first = ptx("add_kernel", "/k/1.py", 12, 13)
        other = ptx("add_kernel", "/k/1.py", 12, 13, instruction="mov.b32")
        self.assertNotEqual(self.digest(first, "add_kernel"), self.digest(other, "add_kernel"))

    def test_a_kernel_named_like_an_instruction_keeps_its_instructions(self):
        normalized = compiled.normalized_assembly(ptx("mov", "/k.py", 1, 2), "mov", "//")
        self.assertIn("mov.u32 %r1, %ctaid.x;", normalized)
        self.assertIn(".visible .entry __kactors_kernel__(", normalized)
        self.assertIn("[__kactors_kernel___param_0]", normalized)
        self.assertNotIn(".loc", normalized)
        self.assertNotIn("debug", normalized)

    def test_amdgcn_is_normalized_alike(self):
        first = AMDGCN.replace("{N}", "1").replace("{LINE}", "4")
        second = first.replace("add_kernel", "row_sum").replace("/1/", "/9/").replace(" 4 0", " 6 0")
        self.assertEqual(
            self.digest(first, "add_kernel", "amdgcn"), self.digest(second, "row_sum", "amdgcn")
        )
        normalized = compiled.normalized_assembly(first, "add_kernel", ";")
        self.assertIn(".symbol: __kactors_kernel__.kd", normalized)
        self.assertNotIn(".byte 1", normalized)

    def test_a_recording_fingerprints_launches_in_order_with_their_grids_and_configs(self):
        class Metadata:
            num_warps, num_ctas, shared = 4, 1, 1024

        class Kernel:
            """Triton before 3.4: the launcher is the instance's `run`."""

            def __init__(self, name, text):
                self.name, self.asm, self.metadata = name, {"ptx": text}, Metadata()
                self.ran = []
                self.run = lambda g0, g1, g2, *rest: self.ran.append((g0, g1, g2))

        class PropertyKernel:
            """Triton 3.4 and later: `run` is a property over `_run`."""

            def __init__(self, name, text):
                self.name, self.asm, self.metadata = name, {"ptx": text}, Metadata()
                self.ran = []
                self._run = lambda g0, g1, g2, *rest: self.ran.append((g0, g1, g2))

            @property
            def run(self):
                return self._run

        class Jit:
            def __init__(self, kernels):
                self.device_caches = {0: ({"key": k for k in kernels}, "target", "backend", None)}

        class Autotuner:
            def __init__(self, fn):
                self.fn = fn

        def call(namespace, kernel, grids, ops):
            with compiled.recording(namespace) as record:
                for grid in grids:
                    kernel.run(*grid, "stream")
            self.assertEqual(kernel.ran[-len(grids):], grids, "the launches still ran")
            return compiled.call_fingerprint(record, len(grids), ops)

        add = Kernel("add_kernel", ptx("add_kernel", "/a.py", 1, 2))
        renamed = PropertyKernel("sum_rows", ptx("sum_rows", "/b.py", 2, 1))
        grids = [(16, 1, 1), (1, 1, 1)]
        ops = ["aten.empty.memory_format"]
        first = call({"add_kernel": Autotuner(Jit([add])), "torch": None}, add, grids, ops)
        self.assertEqual(len(first), 64)
        self.assertEqual(call({"k": Jit([renamed])}, renamed, grids, ops), first)
        self.assertIsInstance(type(renamed).run, property, "its property is left alone")
        self.assertNotEqual(call({"k": Jit([add])}, add, [(8, 1, 1), (1, 1, 1)], ops), first)
        self.assertNotEqual(call({"k": Jit([add])}, add, grids, ops + ["aten.add.Tensor"]), first)
        # The launcher is the kernel's own again after the call.
        add.run(1, 1, 1, "stream")
        self.assertEqual(add.ran[-1], (1, 1, 1))
        # A launch of a kernel it did not find: no fingerprint rather than a wrong one.
        with compiled.recording({}) as record:
            add.run(1, 1, 1, "stream")
        self.assertIsNone(compiled.call_fingerprint(record, 1, ops))


if __name__ == "__main__":
    unittest.main()
