# kactors' questions to the configured Python before a run (`kactors check`, and `kactors run`'s
# preflight): src/check/probe.rs passes this file's text as `python -c TEXT MODE [ARG]`.
# Each mode prints one `KACTORS_CHECK {json}` line; a failure inside is part of the answer.
#   environment        the Python version, torch's and triton's versions (or import errors)
#   device             the devices torch sees under the device pin the child was given
#   problem KERNEL_DIR whether problem.py imports and defines Model, get_inputs, get_init_inputs

import json
import sys
import traceback

sys.dont_write_bytecode = True


def failure(error):
    return "".join(traceback.format_exception_only(type(error), error)).strip()


def imported(name):
    try:
        module = __import__(name)
    except BaseException as error:
        return None, {"error": failure(error)}
    return module, {"version": str(getattr(module, "__version__", "unknown"))}


def environment():
    answer = {"python": sys.version.split()[0], "executable": sys.executable}
    torch, answer["torch"] = imported("torch")
    if torch is not None:
        answer["torch"]["cuda"] = getattr(torch.version, "cuda", None)
        answer["torch"]["hip"] = getattr(torch.version, "hip", None)
    answer["triton"] = imported("triton")[1]
    return answer


def device():
    try:
        import torch
        count = torch.cuda.device_count()
        answer = {"count": count}
        if count:
            properties = torch.cuda.get_device_properties(0)
            answer["name"] = properties.name
            answer["uuid"] = str(getattr(properties, "uuid", "") or "")
        return answer
    except BaseException as error:
        return {"error": failure(error)}


def problem(kernel_dir):
    sys.path.insert(0, kernel_dir)
    try:
        import problem
    except BaseException as error:
        return {"error": failure(error)}
    wanted = ("Model", "get_inputs", "get_init_inputs")
    return {"missing": [name for name in wanted if not callable(getattr(problem, name, None))]}


mode = sys.argv[1]
if mode == "environment":
    answer = environment()
elif mode == "device":
    answer = device()
else:
    answer = problem(sys.argv[2])
print("KACTORS_CHECK " + json.dumps(answer), flush=True)
