//! The Slurm tests' side of the test cluster (scripts/slurm/cluster.sh): allocations made with
//! `salloc --no-shell` and cancelled when dropped, and what the tests ask Slurm about them.

use std::process::Command;
use std::time::{Duration, Instant};

/// A job holding `nodes` nodes with `gpus_per_node` placeholder GPUs each, cancelled on drop.
pub struct Allocation {
    pub job: String,
}

impl Allocation {
    pub fn new(nodes: u32, gpus_per_node: u32) -> Allocation {
        let output = Command::new("salloc")
            .args([
                format!("--nodes={nodes}"),
                format!("--gres=gpu:{gpus_per_node}"),
                "--no-shell".to_string(),
                "--job-name=kactors-test".to_string(),
            ])
            .output()
            .expect("salloc runs: is slurm-client installed and SLURM_CONF set?");
        let stderr = String::from_utf8_lossy(&output.stderr);
        let job = stderr
            .lines()
            .find_map(|line| line.split("Granted job allocation ").nth(1))
            .unwrap_or_else(|| panic!("salloc granted no allocation: {stderr}"))
            .trim()
            .to_string();
        Allocation { job }
    }

    /// `srun` in this allocation, sharing its resources with the steps already running.
    pub fn srun(&self, args: &[&str]) -> Command {
        let mut command = Command::new("srun");
        command
            .arg(format!("--jobid={}", self.job))
            .arg("--overlap")
            .args(args);
        command
    }

    /// The allocation's steps as `squeue --steps` lists them: (step id, name).
    pub fn steps(&self) -> Vec<(String, String)> {
        let output = Command::new("squeue")
            .args([
                "--steps",
                "--noheader",
                "--format=%i %j",
                "--jobs",
                &self.job,
            ])
            .output()
            .unwrap();
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .filter_map(|line| {
                let (id, name) = line.trim().split_once(' ')?;
                Some((id.to_string(), name.to_string()))
            })
            // Slurm lists the allocation's own extern and interactive steps too.
            .filter(|(id, _)| !id.ends_with(".extern") && !id.ends_with(".interactive"))
            .collect()
    }

    /// Waits up to `limit` for the allocation to have no step; answers whether it has none.
    pub fn no_steps_within(&self, limit: Duration) -> bool {
        self.steps_gone_within(limit, |_| true)
    }

    /// Whether the step `id` is gone from the allocation within `limit`.
    pub fn step_gone_within(&self, id: &str, limit: Duration) -> bool {
        self.steps_gone_within(limit, |step| step == id)
    }

    /// Whether every step whose id is `wanted` is gone within `limit`.
    fn steps_gone_within(&self, limit: Duration, wanted: impl Fn(&str) -> bool) -> bool {
        let give_up = Instant::now() + limit;
        loop {
            if !self.steps().iter().any(|(id, _)| wanted(id)) {
                return true;
            }
            if Instant::now() >= give_up {
                return false;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Allocation {
    fn drop(&mut self) {
        let _ = Command::new("scancel").arg(&self.job).status();
    }
}
