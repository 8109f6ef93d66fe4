"""kactors' per-device evaluator, as modules shipped beside evaluator.py into a run's tools/.

- protocol: the errors, the --config object, reply fields, the request loop. No torch.
- zygote: the process kactors starts, which forks, relays to and replaces evaluator children.
  No torch.
- allowlist, draws, snapshots: the allowlist, how many draws fit, state snapshots compared.
  No torch.
- gpu: the device, its memory, sticky errors, the aten recorder.
- checks: the comparison with the reference and the rules a candidate's work is judged by.
- verify, timing: a candidate's verification and its timing (and PyTorch's).
- audit: after every candidate call, what the child keeps and depends on, checked.
- core: the evaluator child's state and its requests.
"""
