use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt;

use actors::model::DeviceId;
use serde::Serialize;

use crate::process::{ChildEnv, child_environment};

/// A device paired with the environment that confines a child to it: variables to set and
/// variables to remove. Only `Device::pin` makes one, so a pin is always its own device's, and
/// the device travels with it wherever it goes (the evaluators, the profilers, the checks'
/// probes). kactors never changes its own environment: a pin exists only in children's.
///
/// Everything that reads a pin goes through `device` and `child_environment`, never its fields.
/// A pin exists only on the machine whose GPU it names: under the Slurm launcher each node
/// agent pins its own node's devices (`Device::pin_as`, under the run's id for the device), and
/// the head reaches a device on another node by its id through that node's agent, never
/// through a pin of its own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Pin {
    device: DeviceId,
    set: BTreeMap<String, String>,
    unset: Vec<String>,
}

impl Pin {
    pub(super) fn new(device: DeviceId, set: BTreeMap<String, String>, unset: Vec<String>) -> Pin {
        Pin { device, set, unset }
    }

    /// The device this pin confines children to.
    pub fn device(&self) -> DeviceId {
        self.device
    }

    /// A child's environment: `parent` (usually `std::env::vars_os()`) without credentials,
    /// then `extra`, then this pin, which has the last word. A name the pin removes is removed
    /// from `parent` only: `extra` may set it again.
    pub fn child_environment(
        &self,
        parent: impl IntoIterator<Item = (OsString, OsString)>,
        extra: &[(&str, &str)],
    ) -> ChildEnv {
        let mut set: BTreeMap<String, String> = extra
            .iter()
            .map(|(name, value)| (name.to_string(), value.to_string()))
            .collect();
        set.extend(self.set.clone());
        child_environment(parent, &set, &self.unset)
    }
}

/// `CUDA_VISIBLE_DEVICES=GPU-… -ROCR_VISIBLE_DEVICES`: what the pin sets, then what it removes.
impl fmt::Display for Pin {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        let set = self
            .set
            .iter()
            .map(|(name, value)| format!("{name}={value}"));
        let unset = self.unset.iter().map(|name| format!("-{name}"));
        formatter.write_str(&set.chain(unset).collect::<Vec<_>>().join(" "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rocm_pin() -> Pin {
        Pin::new(
            DeviceId(3),
            BTreeMap::from([("HIP_VISIBLE_DEVICES".to_string(), "3".to_string())]),
            vec![
                "CUDA_VISIBLE_DEVICES".to_string(),
                "ROCR_VISIBLE_DEVICES".to_string(),
            ],
        )
    }

    fn vars(env: &ChildEnv) -> Vec<String> {
        let mut vars: Vec<String> = env
            .vars()
            .map(|(name, value)| format!("{}={}", name.display(), value.display()))
            .collect();
        vars.sort();
        vars
    }

    #[test]
    fn a_child_gets_the_pin_over_everything_and_no_credentials() {
        let parent = [
            ("PATH", "/usr/bin"),
            ("OPENAI_API_KEY", "sk-secret"),
            ("CUDA_VISIBLE_DEVICES", "0,1"),
            ("ROCR_VISIBLE_DEVICES", "0"),
            ("HIP_VISIBLE_DEVICES", "0,1,2,3"),
        ]
        .map(|(name, value)| (OsString::from(name), OsString::from(value)));
        let env =
            rocm_pin().child_environment(parent, &[("LC_ALL", "C"), ("HIP_VISIBLE_DEVICES", "7")]);
        assert_eq!(
            vars(&env),
            ["HIP_VISIBLE_DEVICES=3", "LC_ALL=C", "PATH=/usr/bin"]
        );
    }

    #[test]
    fn extra_variables_may_set_what_the_pin_removes_from_the_parent() {
        let parent = [("ROCR_VISIBLE_DEVICES", "0")]
            .map(|(name, value)| (OsString::from(name), OsString::from(value)));
        let env = rocm_pin().child_environment(parent, &[("ROCR_VISIBLE_DEVICES", "1")]);
        assert_eq!(
            vars(&env),
            ["HIP_VISIBLE_DEVICES=3", "ROCR_VISIBLE_DEVICES=1"]
        );
    }

    #[test]
    fn a_pin_reads_as_what_it_sets_then_what_it_removes() {
        assert_eq!(
            rocm_pin().to_string(),
            "HIP_VISIBLE_DEVICES=3 -CUDA_VISIBLE_DEVICES -ROCR_VISIBLE_DEVICES"
        );
        assert_eq!(
            Pin::new(DeviceId(0), BTreeMap::new(), Vec::new()).to_string(),
            ""
        );
    }
}
