//! Fake nvidia-smi and amd-smi for tests: shell scripts that log each call, print a fixture for
//! the arguments kactors uses and fail for any other. They use only shell builtins, because
//! kactors runs them with nothing but the test's made-up environment.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::device::{Device, DeviceKind};
use super::environment::HostEnvironment;

pub(crate) fn fixture_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/devices")
        .join(name)
}

pub(crate) fn fixture_text(name: &str) -> String {
    let path = fixture_path(name);
    std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

/// Writes an executable `#!/bin/sh` script.
pub(crate) fn write_script(dir: &Path, name: &str, body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// A node's directories: `bin` (the PATH), a venv, and an empty stand-in for /opt/rocm/bin.
pub(crate) struct FakeNode {
    root: tempfile::TempDir,
}

impl FakeNode {
    pub(crate) fn new() -> Self {
        let node = Self {
            root: tempfile::tempdir().unwrap(),
        };
        std::fs::create_dir_all(node.bin()).unwrap();
        std::fs::create_dir_all(node.rocm_bin()).unwrap();
        node
    }

    pub(crate) fn bin(&self) -> PathBuf {
        self.root.path().join("bin")
    }

    pub(crate) fn rocm_bin(&self) -> PathBuf {
        self.root.path().join("rocm/bin")
    }

    pub(crate) fn venv_bin(&self) -> PathBuf {
        self.root.path().join("venv/bin")
    }

    /// Where the venv's python symlink points.
    pub(crate) fn python_target_dir(&self) -> PathBuf {
        self.root.path().join("python-install/bin")
    }

    fn calls_log(&self) -> PathBuf {
        self.root.path().join("calls.log")
    }

    /// Makes `venv/bin/python` a symlink to `python-install/bin/python3.12`.
    pub(crate) fn venv_with_symlinked_python(&self) -> PathBuf {
        let target = write_script(&self.python_target_dir(), "python3.12", "exit 0\n");
        std::fs::create_dir_all(self.venv_bin()).unwrap();
        std::os::unix::fs::symlink(target, self.venv_bin().join("python")).unwrap();
        self.venv_bin()
    }

    /// The node's environment: PATH is `bin` only, python is the venv's, plus `vars`.
    pub(crate) fn host(&self, vars: &[(&str, &str)]) -> HostEnvironment {
        let mut all = BTreeMap::from([("PATH".to_string(), self.bin().display().to_string())]);
        all.extend(
            vars.iter()
                .map(|(name, value)| (name.to_string(), value.to_string())),
        );
        HostEnvironment::new(all, self.venv_bin().join("python")).with_rocm_bin_dir(self.rocm_bin())
    }

    /// Every call of a fake tool so far, as "tool args".
    pub(crate) fn calls(&self) -> Vec<String> {
        std::fs::read_to_string(self.calls_log())
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// nvidia-smi in `bin`, printing `fixture` and exiting with `exit_code`.
    pub(crate) fn nvidia_smi(&self, fixture: &str, exit_code: i32) {
        self.tool(
            &self.bin(),
            "nvidia-smi",
            &[(
                "--query-gpu=index,name,uuid,pci.bus_id --format=csv",
                fixture,
                exit_code,
            )],
        );
    }

    /// amd-smi in `dir`; an empty `static_fixture` leaves `static --asic` unanswered.
    pub(crate) fn amd_smi(&self, dir: &Path, list_fixture: &str, static_fixture: &str) {
        let mut replies = vec![("list -e --json", list_fixture, 0)];
        if !static_fixture.is_empty() {
            replies.push(("static --asic --json", static_fixture, 0));
        }
        self.tool(dir, "amd-smi", &replies);
    }

    /// amd-smi in `dir` that lists the four MI300X of the amd-smi fixtures and describes them.
    pub(crate) fn four_mi300x_amd_smi(&self, dir: &Path) {
        self.amd_smi(
            dir,
            "amd-smi-list-e-4gpu.json",
            "amd-smi-static-asic-4gpu.json",
        );
    }

    fn tool(&self, dir: &Path, name: &str, replies: &[(&str, &str, i32)]) {
        let mut body = format!(
            "printf '%s\\n' \"{name} $*\" >> '{}'\n",
            self.calls_log().display()
        );
        for (args, fixture, exit_code) in replies {
            body.push_str(&format!(
                "if [ \"$*\" = '{args}' ]; then\n\
                 \x20 while IFS= read -r line || [ -n \"$line\" ]; do printf '%s\\n' \"$line\"; done < '{}'\n\
                 \x20 exit {exit_code}\n\
                 fi\n",
                fixture_path(fixture).display()
            ));
        }
        body.push_str("printf 'unexpected arguments: %s\\n' \"$*\" >&2\nexit 64\n");
        write_script(dir, name, &body);
    }
}

/// An H200 of index `id` (UUID `GPU-<id>`), as nvidia-smi would list it.
pub(crate) fn fake_h200(id: u32) -> Device {
    Device {
        id,
        name: "NVIDIA H200".into(),
        kind: DeviceKind::Nvidia {
            uuid: format!("GPU-{id}"),
            bus_id: format!("00000000:00:0{id}.0"),
        },
        spec: None,
    }
}
