//! `scontrol show job -d JOB`: which nodes an allocation holds and which GPUs of each, by GRES
//! index. The detail lines (`Nodes=n[1-2] CPU_IDs=0 Mem=0 GRES=gpu:4(IDX:0-3)`) are read key by
//! key; the node lists they carry are Slurm hostlist expressions, expanded by
//! `scontrol show hostnames` (see `allocation.rs`), never by a parser of our own.

/// What the job's details say, before the hostlists are expanded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobDetails {
    pub job_id: String,
    /// `NodeList`: every node of the allocation, as a hostlist expression.
    pub node_list: String,
    /// One per detail line: nodes that hold the same GPU indices.
    pub node_gpus: Vec<NodeGpus>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeGpus {
    /// A hostlist expression (`n[1-2]`).
    pub nodes: String,
    /// The GPUs' GRES indices on each of those nodes, ascending.
    pub gpus: Vec<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JobDetailsError {
    #[error("`scontrol show job -d` printed no {key}= (is this Slurm's output for one job?)")]
    Missing { key: &'static str },
    #[error("`scontrol show job -d` printed {key}={value:?}, which is not {expected}")]
    Invalid {
        key: &'static str,
        value: String,
        expected: &'static str,
    },
}

/// The most GPU indices one node may list: far above any node built, low enough that a
/// corrupted range (`IDX:0-4294967295`) cannot become a huge allocation.
const MAX_GPUS_PER_NODE: usize = 1024;

/// Reads the output of `scontrol show job -d JOB` for one job.
pub fn parse_job_details(text: &str) -> Result<JobDetails, JobDetailsError> {
    let fields = |line: &str| -> Vec<(String, String)> {
        line.split_whitespace()
            .filter_map(|token| {
                let (key, value) = token.split_once('=')?;
                Some((key.to_string(), value.to_string()))
            })
            .collect()
    };
    let mut job_id = None;
    let mut node_list = None;
    let mut node_gpus = Vec::new();
    for line in text.lines() {
        let fields = fields(line);
        let value_of = |wanted: &str| {
            fields
                .iter()
                .find(|(key, _)| key == wanted)
                .map(|(_, value)| value.clone())
        };
        // A detail line starts with `Nodes=`; `NodeList=` and `ReqNodeList=` are other keys.
        if fields.first().is_some_and(|(key, _)| key == "Nodes") {
            let nodes = value_of("Nodes").unwrap_or_default();
            // Slurm 22.05 onwards prints GRES=gpu:4(IDX:0-3); older releases GRES_IDX=gpu(IDX:0-3).
            let gres = value_of("GRES").or_else(|| value_of("GRES_IDX"));
            let gpus = match gres {
                Some(gres) => gpu_indices(&gres)?,
                None => Vec::new(),
            };
            node_gpus.push(NodeGpus { nodes, gpus });
            continue;
        }
        if job_id.is_none() {
            job_id = value_of("JobId");
        }
        if node_list.is_none() {
            node_list = value_of("NodeList");
        }
    }
    let job_id = job_id.ok_or(JobDetailsError::Missing { key: "JobId" })?;
    let node_list = node_list
        .filter(|list| !list.is_empty() && list != "(null)")
        .ok_or(JobDetailsError::Missing { key: "NodeList" })?;
    Ok(JobDetails {
        job_id,
        node_list,
        node_gpus,
    })
}

/// The GPU indices of one GRES value: `gpu:4(IDX:0-3)`, `gpu:h100:2(IDX:0,2)`,
/// `gpu:2(IDX:0-1),nic:1(IDX:0)`, `gpu(IDX:1)`. Entries of other GRES names are skipped.
fn gpu_indices(gres: &str) -> Result<Vec<u32>, JobDetailsError> {
    let invalid = || JobDetailsError::Invalid {
        key: "GRES",
        value: gres.to_string(),
        expected: "a list such as gpu:4(IDX:0-3)",
    };
    let mut indices = Vec::new();
    for entry in split_outside_parentheses(gres) {
        if entry.is_empty() || entry == "(null)" {
            continue;
        }
        let name = entry.split([':', '(']).next().unwrap_or_default();
        if name != "gpu" {
            continue;
        }
        let Some(open) = entry.find("(IDX:") else {
            return Err(invalid());
        };
        let list = entry[open + "(IDX:".len()..]
            .strip_suffix(')')
            .ok_or_else(invalid)?;
        // A GPU type with IDX:N/A means none of this type on the node.
        if list == "N/A" {
            continue;
        }
        indices.extend(index_list(list).ok_or_else(invalid)?);
        if indices.len() > MAX_GPUS_PER_NODE {
            return Err(invalid());
        }
    }
    indices.sort_unstable();
    indices.dedup();
    Ok(indices)
}

/// `0-3,5` → 0, 1, 2, 3, 5; None for anything else (or more than a node can hold).
fn index_list(list: &str) -> Option<Vec<u32>> {
    let mut indices = Vec::new();
    for part in list.split(',') {
        let (first, last) = match part.split_once('-') {
            Some((first, last)) => (first.parse::<u32>().ok()?, last.parse::<u32>().ok()?),
            None => {
                let index = part.parse::<u32>().ok()?;
                (index, index)
            }
        };
        if last < first || (last - first) as usize >= MAX_GPUS_PER_NODE {
            return None;
        }
        indices.extend(first..=last);
        if indices.len() > MAX_GPUS_PER_NODE {
            return None;
        }
    }
    Some(indices)
}

/// Splits on the commas that are not inside parentheses: `gpu:2(IDX:0,2),nic:1(IDX:0)`.
fn split_outside_parentheses(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (at, character) in text.char_indices() {
        match character {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(&text[start..at]);
                start = at + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> String {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/slurm")
            .join(name);
        std::fs::read_to_string(path).unwrap()
    }

    #[test]
    fn two_nodes_with_four_gpus_each_share_one_detail_line() {
        let details = parse_job_details(&fixture("scontrol-show-job-d-2x4.txt")).unwrap();
        assert_eq!(details.job_id, "3");
        assert_eq!(details.node_list, "n[1-2]");
        assert_eq!(
            details.node_gpus,
            [NodeGpus {
                nodes: "n[1-2]".into(),
                gpus: vec![0, 1, 2, 3]
            }]
        );
    }

    #[test]
    fn nodes_holding_different_gpus_get_a_line_each() {
        let details = parse_job_details(&fixture("scontrol-show-job-d-uneven.txt")).unwrap();
        assert_eq!(
            details.node_gpus,
            [
                NodeGpus {
                    nodes: "n1".into(),
                    gpus: vec![0, 2]
                },
                NodeGpus {
                    nodes: "n2".into(),
                    gpus: vec![0, 1]
                }
            ]
        );
    }

    #[test]
    fn gres_values_of_every_shape_give_the_gpu_indices() {
        let check = |gres: &str, expected: Result<Vec<u32>, ()>| {
            assert_eq!(gpu_indices(gres).map_err(|_| ()), expected, "{gres}");
        };
        check("gpu:4(IDX:0-3)", Ok(vec![0, 1, 2, 3]));
        check("gpu:h100:2(IDX:4,6)", Ok(vec![4, 6]));
        check("gpu:a100:1(IDX:0),gpu:v100:2(IDX:1-2)", Ok(vec![0, 1, 2]));
        check("nic:1(IDX:0),gpu:2(IDX:0-1)", Ok(vec![0, 1]));
        check("gpu(IDX:1)", Ok(vec![1]));
        check("gpu:h100:0(IDX:N/A)", Ok(vec![]));
        check("(null)", Ok(vec![]));
        check("", Ok(vec![]));
        check("gpu:4", Err(()));
        check("gpu:4(IDX:3-1)", Err(()));
        check("gpu:4(IDX:0-4294967295)", Err(()));
        check("gpu:4(IDX:x)", Err(()));
    }

    #[test]
    fn output_that_is_not_one_jobs_details_is_refused_naming_the_key() {
        assert_eq!(
            parse_job_details("slurm_load_jobs error: Invalid job id specified\n"),
            Err(JobDetailsError::Missing { key: "JobId" })
        );
        assert_eq!(
            parse_job_details("JobId=7 JobName=x\n   NodeList=(null)\n"),
            Err(JobDetailsError::Missing { key: "NodeList" })
        );
        let error =
            parse_job_details("JobId=7\n NodeList=n1\n Nodes=n1 GRES=gpu:1(IDX:a)\n").unwrap_err();
        assert_eq!(
            error.to_string(),
            "`scontrol show job -d` printed GRES=\"gpu:1(IDX:a)\", which is not a list such as gpu:4(IDX:0-3)"
        );
    }
}
