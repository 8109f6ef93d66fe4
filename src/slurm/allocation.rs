//! The allocation kactors runs in: its job id from Slurm's environment, its nodes and the GPUs
//! of each from `scontrol show job -d`, hostlists expanded by `scontrol show hostnames`. Asked
//! once, before anything starts, so it blocks (each tool under a timeout).

use std::collections::BTreeMap;

use super::job_details::{JobDetails, JobDetailsError, parse_job_details};
use super::tools::{SlurmToolError, scontrol};
use crate::devices::HostEnvironment;

/// One node of the allocation and the GPUs it holds there, by Slurm's GRES index on that node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllocatedNode {
    pub name: String,
    pub gpus: Vec<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allocation {
    pub job_id: String,
    /// In the order of the job's NodeList.
    pub nodes: Vec<AllocatedNode>,
}

#[derive(Debug, thiserror::Error)]
pub enum AllocationError {
    #[error(
        "SLURM_JOB_ID is not set: launcher slurm runs inside a Slurm allocation (salloc, sbatch); use launcher: local elsewhere"
    )]
    NotInAllocation,
    #[error("SLURM_JOB_ID={0:?} is not a Slurm job id (digits, as salloc prints them)")]
    InvalidJobId(String),
    #[error(transparent)]
    Tool(#[from] SlurmToolError),
    #[error(transparent)]
    Details(#[from] JobDetailsError),
    #[error(
        "job {job} holds no GPU on any of its nodes ({nodes}): ask for GPUs (salloc --gpus-per-node=N or --gres=gpu:N)"
    )]
    NoGpus { job: String, nodes: String },
}

impl Allocation {
    /// The allocation this process runs in (`SLURM_JOB_ID` of `host`).
    pub fn discover(host: &HostEnvironment) -> Result<Allocation, AllocationError> {
        let job_id = job_id(host)?;
        let details = parse_job_details(&scontrol(host, &["show", "job", "-d", &job_id])?)?;
        assemble(details, |hostlist| {
            Ok(scontrol(host, &["show", "hostnames", hostlist])?
                .lines()
                .map(str::trim)
                .filter(|name| !name.is_empty())
                .map(str::to_string)
                .collect())
        })
    }

    /// Every GPU of the allocation.
    pub fn gpu_count(&self) -> usize {
        self.nodes.iter().map(|node| node.gpus.len()).sum()
    }
}

/// The job id of `host`'s environment: digits only, since it becomes part of command lines.
pub fn job_id(host: &HostEnvironment) -> Result<String, AllocationError> {
    let value = host
        .var("SLURM_JOB_ID")
        .ok_or(AllocationError::NotInAllocation)?;
    if value.is_empty() || !value.bytes().all(|byte| byte.is_ascii_digit()) {
        return Err(AllocationError::InvalidJobId(value.to_string()));
    }
    Ok(value.to_string())
}

/// The nodes of `details` in NodeList order, each with the GPUs its detail line gives.
fn assemble(
    details: JobDetails,
    mut expand: impl FnMut(&str) -> Result<Vec<String>, AllocationError>,
) -> Result<Allocation, AllocationError> {
    let mut gpus_by_node = BTreeMap::new();
    for line in &details.node_gpus {
        for node in expand(&line.nodes)? {
            gpus_by_node.insert(node, line.gpus.clone());
        }
    }
    let nodes: Vec<AllocatedNode> = expand(&details.node_list)?
        .into_iter()
        .map(|name| AllocatedNode {
            gpus: gpus_by_node.remove(&name).unwrap_or_default(),
            name,
        })
        .collect();
    let allocation = Allocation {
        job_id: details.job_id,
        nodes,
    };
    if allocation.gpu_count() == 0 {
        return Err(AllocationError::NoGpus {
            job: allocation.job_id,
            nodes: details.node_list,
        });
    }
    Ok(allocation)
}

/// Whether a node name may go on a command line and into a file name as it is.
pub fn is_plain_node_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 255
        && name
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.'))
        && !name.starts_with('.')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slurm::job_details::NodeGpus;

    fn expand_fixture(hostlist: &str) -> Result<Vec<String>, AllocationError> {
        Ok(match hostlist {
            "n[1-2]" => vec!["n1".into(), "n2".into()],
            "n[1-3]" => vec!["n1".into(), "n2".into(), "n3".into()],
            other => vec![other.to_string()],
        })
    }

    #[test]
    fn each_node_of_the_node_list_gets_the_gpus_of_its_detail_line() {
        let details = JobDetails {
            job_id: "12".into(),
            node_list: "n[1-3]".into(),
            node_gpus: vec![
                NodeGpus {
                    nodes: "n[1-2]".into(),
                    gpus: vec![0, 1],
                },
                NodeGpus {
                    nodes: "n3".into(),
                    gpus: vec![],
                },
            ],
        };
        let allocation = assemble(details, expand_fixture).unwrap();
        assert_eq!(allocation.job_id, "12");
        let nodes: Vec<(&str, &[u32])> = allocation
            .nodes
            .iter()
            .map(|node| (node.name.as_str(), node.gpus.as_slice()))
            .collect();
        assert_eq!(nodes, [("n1", &[0, 1][..]), ("n2", &[0, 1]), ("n3", &[])]);
        assert_eq!(allocation.gpu_count(), 4);
    }

    #[test]
    fn an_allocation_without_gpus_is_refused_saying_how_to_ask_for_them() {
        let details = JobDetails {
            job_id: "12".into(),
            node_list: "n[1-2]".into(),
            node_gpus: vec![],
        };
        let error = assemble(details, expand_fixture).unwrap_err();
        assert_eq!(
            error.to_string(),
            "job 12 holds no GPU on any of its nodes (n[1-2]): ask for GPUs (salloc --gpus-per-node=N or --gres=gpu:N)"
        );
    }

    #[test]
    fn the_job_id_comes_from_slurms_environment_and_is_digits() {
        assert_eq!(
            job_id(&HostEnvironment::of_vars(&[("SLURM_JOB_ID", "4711")])).unwrap(),
            "4711"
        );
        assert!(matches!(
            job_id(&HostEnvironment::of_vars(&[])),
            Err(AllocationError::NotInAllocation)
        ));
        assert_eq!(
            job_id(&HostEnvironment::of_vars(&[(
                "SLURM_JOB_ID",
                "1; rm -rf /"
            )]))
            .unwrap_err()
            .to_string(),
            "SLURM_JOB_ID=\"1; rm -rf /\" is not a Slurm job id (digits, as salloc prints them)"
        );
    }

    #[test]
    fn node_names_that_could_escape_a_command_line_or_a_folder_are_not_plain() {
        for plain in ["n1", "gpu-a01.cluster", "node_7"] {
            assert!(is_plain_node_name(plain), "{plain}");
        }
        for odd in ["", "..", "../x", "a b", "n1;reboot", "/n1"] {
            assert!(!is_plain_node_name(odd), "{odd}");
        }
    }
}
