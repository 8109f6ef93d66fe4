//! Issue 10: no credential reaches a child. A whole run on a fake NVIDIA node and one on a fake
//! ROCm node, with API keys and other secrets in kactors' environment; every kind of child
//! kactors starts (nvidia-smi for the listing and for run.yaml's clocks and processes, amd-smi,
//! the `kactors check` probes of the preflight, ncu and rocprofv3, the profiled wrapper they
//! run, the per-device evaluator and the user's test.py) is a fake or a shim that writes its
//! environment to a file of its own before doing its work. No file may hold a variable named
//! like a credential (by kactors' own rule) or any secret's value, and every kind must have
//! run, so the test cannot pass by starting nothing.

mod support;

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

use kactors::process::may_carry_credential;
use support::standin_node::standin_kernel;
use support::{fixtures, write_executable};

/// What kactors' environment holds and no child may see: the providers' keys, a Hugging Face
/// token, and secrets under names of the user's own.
const SECRETS: [(&str, &str); 6] = [
    ("OPENAI_API_KEY", "sk-proj-canary-0c5f1e"),
    ("ANTHROPIC_API_KEY", "sk-ant-canary-7d2a94"),
    ("HF_TOKEN", "hf_canary_3b81c7"),
    ("MY_SERVICE_SECRET", "service-canary-9e4d02"),
    ("DEPLOY_TOKEN", "deploy-canary-51aa6f"),
    ("db_password", "password-canary-e07c33"),
];

/// One child's environment, as the fake that stood for it wrote it: `KIND.PID`, `env -0`.
struct Dump {
    kind: String,
    file: PathBuf,
    vars: Vec<(String, String)>,
}

/// A node: `bin/` with its vendor's listing tool and a shim for each other program, a kernel
/// directory with one candidate, a strategy, and `envs/` where every child writes.
struct Node {
    dir: tempfile::TempDir,
}

impl Node {
    fn new() -> Node {
        let node = Node {
            dir: tempfile::tempdir().unwrap(),
        };
        for folder in ["bin", "envs", "kernel/candidates"] {
            std::fs::create_dir_all(node.path(folder)).unwrap();
        }
        standin_kernel(
            node.dir.path(),
            &[(
                "01.py",
                "# standin: pass time_ms=1.5\ndef kernel_function(x):\n    return x * 1\n",
            )],
        );
        node.shim(
            "python-shim",
            "case \"$1\" in\n  *evaluator.py) kind=evaluator;;\n  *profile_wrapper.py) kind=profile-wrapper;;\n  test.py) kind=user-test;;\n  -c) kind=check-probe;;\n  *) kind=python;;\nesac",
            &fixtures().join("standin-python"),
        );
        node
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The shell line that writes this process's environment to `envs/$kind.$$`.
    fn dump_line(&self) -> String {
        format!(
            "/usr/bin/env -0 > '{}'/\"$kind.$$\"",
            self.path("envs").display()
        )
    }

    /// `bin/NAME`: sets `kind` with the shell code `classify`, writes its environment, then
    /// runs the shell code `body`.
    fn fake(&self, name: &str, classify: &str, body: &str) {
        write_executable(
            &self.path("bin").join(name),
            &format!("#!/bin/sh\n{classify}\n{}\n{body}\n", self.dump_line()),
        );
    }

    /// A fake that hands over to `program` once it has written its environment.
    fn shim(&self, name: &str, classify: &str, program: &Path) {
        self.fake(
            name,
            classify,
            &format!("exec '{}' \"$@\"", program.display()),
        );
    }

    /// The fakes write the environment they got into the node's folder, which no sandboxed
    /// child may write: the sandbox is off here, and tests/sandbox.rs covers it.
    fn strategy(&self, text: &str) {
        std::fs::write(
            self.path("strategy.yaml"),
            format!(
                "{text}provider: replay\nnum_workers: 1\nmax_rounds: 1\nmax_refinements: 0\n\
                 test_timeout_s: 30\nkill_grace_s: 0.3\nstrategy_config:\n  num_top_kernels: 1\n  \
                 num_bottlenecks: 1\nsandbox: off\n"
            ),
        )
        .unwrap();
    }

    /// `kactors run` with the secrets in its environment; every child writes into `envs/`.
    fn run(&self, env: &[(&str, &str)]) -> Vec<Dump> {
        let mut command = Command::new(env!("CARGO_BIN_EXE_kactors"));
        command
            .current_dir(self.dir.path())
            .args(["run", "--strategy", "strategy", "--config-dir", "."])
            .args(["--kernel-dir", "kernel"])
            .arg("--python")
            .arg(self.path("bin/python-shim"))
            .env(
                "PATH",
                format!("{}:/usr/bin:/bin", self.path("bin").display()),
            )
            .env("KACTORS_LOCK_DIR", self.path("locks"));
        for name in [
            "CUDA_VISIBLE_DEVICES",
            "HIP_VISIBLE_DEVICES",
            "ROCR_VISIBLE_DEVICES",
        ] {
            command.env_remove(name);
        }
        command.envs(SECRETS).envs(env.iter().copied());
        let output = command.output().unwrap();
        assert_eq!(
            output.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        self.dumps()
    }

    fn dumps(&self) -> Vec<Dump> {
        std::fs::read_dir(self.path("envs"))
            .unwrap()
            .map(|entry| {
                let file = entry.unwrap().path();
                let name = file.file_name().unwrap().to_string_lossy().into_owned();
                let kind = name.rsplit_once('.').unwrap().0.to_string();
                let bytes = std::fs::read(&file).unwrap();
                let vars = bytes
                    .split(|byte| *byte == 0)
                    .filter(|entry| !entry.is_empty())
                    .map(|entry| {
                        let entry = String::from_utf8_lossy(entry);
                        let (name, value) = entry.split_once('=').unwrap_or((&entry, ""));
                        (name.to_string(), value.to_string())
                    })
                    .collect();
                Dump { kind, file, vars }
            })
            .collect()
    }
}

/// Every kind in `expected` ran, and no child saw a credential's name or a secret's value.
fn check(dumps: &[Dump], expected: &[&str]) {
    let kinds: BTreeSet<&str> = dumps.iter().map(|dump| dump.kind.as_str()).collect();
    for kind in expected {
        assert!(
            kinds.contains(kind),
            "no {kind} ran; children seen: {kinds:?}"
        );
    }
    for dump in dumps {
        assert!(
            dump.vars.iter().any(|(name, _)| name == "PATH"),
            "{} holds no environment",
            dump.file.display()
        );
        for (name, value) in &dump.vars {
            assert!(
                !may_carry_credential(OsStr::new(name)),
                "the {} child saw {name} ({})",
                dump.kind,
                dump.file.display()
            );
            for (secret_name, secret) in SECRETS {
                assert!(
                    !value.contains(secret),
                    "the {} child saw the value of {secret_name} in {name} ({})",
                    dump.kind,
                    dump.file.display()
                );
            }
        }
    }
}

#[test]
fn no_child_of_an_nvidia_run_sees_a_credential() {
    let node = Node::new();
    node.fake(
        "nvidia-smi",
        "case \"$1\" in\n  --query-gpu=index,name,*) kind=nvidia-smi-listing;;\n  --query-gpu=*) kind=nvidia-smi-gpu-state;;\n  --query-compute-apps=*) kind=nvidia-smi-gpu-processes;;\n  *) kind=nvidia-smi;;\nesac",
        "case \"$1\" in\n  --query-gpu=index,name,uuid,pci.bus_id) echo 'index, name, uuid, pci.bus_id'; echo '0, NVIDIA H200, GPU-aaaaaaaa-0000-0000-0000-000000000000, 00000000:00:06.0';;\n  --query-gpu=*) echo 'index, uuid, name'; echo '0, GPU-aaaaaaaa-0000-0000-0000-000000000000, NVIDIA H200';;\n  --query-compute-apps=*) echo 'gpu_uuid, pid, process_name, used_gpu_memory [MiB]';;\n  *) exit 2;;\nesac\n",
    );
    node.shim(
        "ncu",
        "case \"$1\" in --version) kind=ncu-probe;; *) kind=ncu;; esac",
        &fixtures().join("nvidia/fake-ncu"),
    );
    node.strategy(&format!(
        "platform: nvidia\nplatform_kwargs:\n  ncu_bin_path: {}\n",
        node.path("bin/ncu").display()
    ));
    let dumps = node.run(&[]);
    check(
        &dumps,
        &[
            "nvidia-smi-listing",
            "nvidia-smi-gpu-state",
            "nvidia-smi-gpu-processes",
            "check-probe",
            "ncu-probe",
            "ncu",
            "profile-wrapper",
            "evaluator",
            "user-test",
        ],
    );
}

#[test]
fn no_child_of_a_rocm_run_sees_a_credential() {
    let node = Node::new();
    let devices = fixtures().join("devices");
    node.fake(
        "amd-smi",
        "kind=amd-smi",
        &format!(
            "case \"$*\" in\n  'list -e --json') exec /bin/cat '{}';;\n  'static --asic --json') exec /bin/cat '{}';;\n  *) echo \"unexpected: $*\" >&2; exit 2;;\nesac\n",
            devices.join("amd-smi-list-e-4gpu.json").display(),
            devices.join("amd-smi-static-asic-4gpu.json").display()
        ),
    );
    node.shim(
        "rocprofv3",
        "kind=rocprofv3",
        &fixtures().join("rocm/fake-rocprofv3"),
    );
    node.strategy(&format!(
        "platform: rocm\nplatform_kwargs:\n  rocprof_bin_path: {}\n",
        node.path("bin/rocprofv3").display()
    ));
    let dumps = node.run(&[("STANDIN_TORCH_BUILD", "rocm")]);
    check(
        &dumps,
        &[
            "amd-smi",
            "check-probe",
            "rocprofv3",
            "profile-wrapper",
            "evaluator",
            "user-test",
        ],
    );
}
