//! The head's start of a run on a Slurm allocation: one agent step per node that holds GPUs,
//! each started with `srun` and answering with its hello (its devices, locked; its preflight's
//! lines), then the run's device table (a dense id for each device, in node order), and the
//! `start` that tells each agent which of its devices the run uses and where the run
//! directory is. Must run on the actix System that drives the run: the links' pipes and tasks
//! belong to it.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Duration;

use actors::journal::DeviceDescription;
use actors::model::DeviceId;
use actors::ports::{EvaluatorFactory, KernelProfiler};

use super::link::{AgentLink, LinkSettings, NotLaunched};
use super::remote::{RemoteDevices, RemoteEvaluatorFactory, RemoteProfiler};
use super::restart::{AgentLaunch, NodeAgentHandle, start_run};
use crate::agent::wire::{Assignment, Hello};
use crate::check::CheckLine;
use crate::devices::{GpuSpec, spec_by_name};
use crate::process::{ChildEnv, ChildSpec, Protocol};
use crate::slurm::{AgentStep, Allocation, srun_args};

/// How the agents are started and watched.
pub struct AgentsPlan {
    pub allocation: Allocation,
    /// `srun`.
    pub srun: PathBuf,
    pub scancel: PathBuf,
    /// This kactors binary, on the filesystem the allocation shares.
    pub program: PathBuf,
    /// `agent --strategy …`: what each agent is started with.
    pub agent_args: Vec<OsString>,
    /// Each step's name: which kactors started it.
    pub step_name: String,
    /// srun's environment: the head's without credentials.
    pub env: ChildEnv,
    pub cwd: PathBuf,
    /// One log per node: srun's stderr, which carries the agent's log.
    pub log_dir: PathBuf,
    pub timeout: Duration,
    pub grace: Duration,
    /// How long an agent may take to say hello (its step may wait for resources; its
    /// preflight imports torch).
    pub start_limit: Duration,
}

/// The agents of a run, one per node with GPUs, in the allocation's node order.
pub struct Agents {
    pub nodes: Vec<Rc<NodeAgentHandle>>,
}

/// Starts every node's agent at once and waits for each hello. Answers the agents that said
/// hello and why the others did not (each naming its node); the caller decides.
pub async fn launch_agents(plan: &AgentsPlan) -> (Agents, Vec<NotLaunched>) {
    let launches = plan
        .allocation
        .nodes
        .iter()
        .filter(|node| !node.gpus.is_empty())
        .map(|node| {
            let args = srun_args(&AgentStep {
                job: &plan.allocation.job_id,
                node: &node.name,
                gpus: node.gpus.len(),
                name: &plan.step_name,
                program: &plan.program,
                agent_args: &plan.agent_args,
            });
            let log = plan.log_dir.join(format!("{}.log", node.name));
            let spec = ChildSpec {
                program: plan.srun.clone(),
                args,
                cwd: plan.cwd.clone(),
                env: plan.env.clone(),
                log_path: log.clone(),
                protocol: Protocol::Stdio,
                label: format!("node agent of {}", node.name),
            };
            let settings = LinkSettings {
                scancel: plan.scancel.clone(),
                log,
                timeout: plan.timeout,
                grace: plan.grace,
            };
            let name = node.name.clone();
            let launch = AgentLaunch {
                spec,
                settings,
                start_limit: plan.start_limit,
            };
            async move {
                let launched = AgentLink::launch(
                    &name,
                    &launch.spec,
                    launch.settings.clone(),
                    launch.start_limit,
                )
                .await;
                launched.map(|(link, hello)| NodeAgentHandle::new(link, hello, launch))
            }
        });
    let mut agents = Agents { nodes: Vec::new() };
    let mut failures = Vec::new();
    for launched in futures_util::future::join_all(launches).await {
        match launched {
            Ok(node) => agents.nodes.push(Rc::new(node)),
            Err(failure) => failures.push(failure),
        }
    }
    (agents, failures)
}

impl Agents {
    /// Every agent's preflight lines, each naming its node.
    pub fn preflight(&self) -> Vec<CheckLine> {
        self.nodes
            .iter()
            .flat_map(|node| {
                node.hello.preflight.iter().map(|line| {
                    CheckLine::on_node(
                        &node.hello.node,
                        line.ok,
                        &line.what,
                        line.fix.clone(),
                        line.stops_a_run,
                    )
                })
            })
            .collect()
    }

    /// What the agents had to say (GPUs another run holds, spec rows), each naming its node.
    pub fn notes(&self) -> Vec<String> {
        self.nodes
            .iter()
            .flat_map(|node| {
                node.hello
                    .notes
                    .iter()
                    .map(|note| format!("node {}: {note}", node.hello.node))
            })
            .collect()
    }

    /// Tells each agent which of its devices the run uses and where the run directory is; an
    /// agent none of whose devices the run uses is closed.
    pub async fn start(&self, run_root: &Path, table: &DeviceTable) -> Result<(), String> {
        for node in &self.nodes {
            let devices: Vec<Assignment> = table
                .rows
                .iter()
                .filter(|row| row.node == node.hello.node)
                .map(|row| Assignment {
                    index: row.index,
                    device: row.device,
                })
                .collect();
            if devices.is_empty() {
                node.link().close().await;
                continue;
            }
            *node.run.borrow_mut() = Some((run_root.to_path_buf(), devices.clone()));
            start_run(&node.link(), run_root, devices)
                .await
                .map_err(|reason| format!("node {}: {reason}", node.hello.node))?;
        }
        Ok(())
    }

    /// Ends every agent: stdin closed, its children ended, its step gone.
    pub async fn close(&self) {
        futures_util::future::join_all(
            self.nodes
                .iter()
                .map(|node| async move { node.link().close().await }),
        )
        .await;
    }
}

/// One device of the run: the run's id for it, where it is, what it is.
#[derive(Clone, Debug, PartialEq)]
pub struct TableRow {
    pub device: DeviceId,
    pub node: String,
    /// Slurm's index of the GPU on its node.
    pub index: u32,
    pub name: String,
    pub uuid: Option<String>,
    pub spec: Option<&'static GpuSpec>,
    /// The step of the agent that serves it.
    pub step: String,
}

/// The run's devices over every node: ids 0, 1, … in the allocation's node order and, on each
/// node, in Slurm's order.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct DeviceTable {
    pub rows: Vec<TableRow>,
}

impl DeviceTable {
    /// The devices the agents offered, the first `wanted` of them (all when `None`), with a
    /// note when that is not all.
    pub fn assign(hellos: &[&Hello], wanted: Option<u32>) -> (DeviceTable, Vec<String>) {
        let offered: Vec<(&Hello, &crate::agent::wire::OfferedDevice)> = hellos
            .iter()
            .flat_map(|hello| hello.devices.iter().map(move |device| (*hello, device)))
            .collect();
        let available = offered.len();
        let take = wanted.map_or(available, |wanted| (wanted as usize).min(available));
        let notes: Vec<String> =
            crate::devices::workers_note(wanted, available, "offered by the allocation's nodes")
                .into_iter()
                .collect();
        let rows = offered
            .into_iter()
            .take(take)
            .enumerate()
            .map(|(id, (hello, device))| TableRow {
                device: DeviceId(id as u32),
                node: hello.node.clone(),
                index: device.index,
                name: device.name.clone(),
                uuid: device.uuid.clone(),
                spec: device.spec.as_deref().and_then(spec_by_name),
                step: hello.step.clone(),
            })
            .collect();
        (DeviceTable { rows }, notes)
    }

    pub fn ids(&self) -> Vec<DeviceId> {
        self.rows.iter().map(|row| row.device).collect()
    }

    /// `run_started`'s device table.
    pub fn describe(&self) -> Vec<DeviceDescription> {
        self.rows
            .iter()
            .map(|row| DeviceDescription {
                device: row.device,
                name: row.name.clone(),
                uuid: row.uuid.clone(),
                node: Some(row.node.clone()),
                index: Some(row.index),
                step: Some(row.step.clone()),
            })
            .collect()
    }
}

/// A run's platform under the Slurm launcher: the agents, and which one serves each device.
pub struct AgentPlatform {
    pub agents: Rc<Agents>,
    pub table: DeviceTable,
    pub profiler_enabled: bool,
}

impl AgentPlatform {
    /// The remote evaluators and profiler, once the run's System runs; from now on each agent
    /// is watched by its heartbeat.
    /// A lost agent is started again at most `restart_budget` times.
    pub fn work_ports(
        &self,
        restart_budget: u32,
    ) -> (Rc<dyn EvaluatorFactory>, Option<Rc<dyn KernelProfiler>>) {
        let mut nodes = BTreeMap::new();
        for row in &self.table.rows {
            if let Some(node) = self
                .agents
                .nodes
                .iter()
                .find(|node| node.hello.node == row.node)
            {
                node.link().start_heartbeat();
                nodes.insert(row.device, node.clone());
            }
        }
        let devices = RemoteDevices::new(nodes, restart_budget);
        let profiler: Option<Rc<dyn KernelProfiler>> = self
            .profiler_enabled
            .then(|| Rc::new(RemoteProfiler(devices.clone())) as Rc<dyn KernelProfiler>);
        (Rc::new(RemoteEvaluatorFactory(devices)), profiler)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::wire::OfferedDevice;

    fn hello(node: &str, indices: &[u32]) -> Hello {
        Hello {
            node: node.into(),
            host: format!("host-{node}"),
            step: format!("7.{}", node.len()),
            pid: 1,
            vendor: actors::model::Vendor::Nvidia,
            devices: indices
                .iter()
                .map(|index| OfferedDevice {
                    index: *index,
                    name: "NVIDIA H200".into(),
                    uuid: Some(format!("GPU-{node}-{index}")),
                    spec: Some("NVIDIA H200".into()),
                })
                .collect(),
            notes: vec![],
            preflight: vec![],
        }
    }

    fn locations(table: &DeviceTable) -> Vec<String> {
        table
            .describe()
            .iter()
            .map(|row| format!("{}={}", row.device, row.location()))
            .collect()
    }

    #[test]
    fn devices_are_numbered_over_the_nodes_in_order_and_named_node_index() {
        let (n1, n2) = (hello("n1", &[0, 2]), hello("n2", &[0, 1, 3]));
        let (table, notes) = DeviceTable::assign(&[&n1, &n2], None);
        assert_eq!(
            locations(&table),
            ["0=n1:0", "1=n1:2", "2=n2:0", "3=n2:1", "4=n2:3"]
        );
        assert!(notes.is_empty());
        assert_eq!(table.rows[3].uuid.as_deref(), Some("GPU-n2-1"));
        assert_eq!(
            table.rows[3].spec.map(|spec| spec.name.as_str()),
            Some("NVIDIA H200")
        );
        assert_eq!(table.describe()[3].step.as_deref(), Some("7.2"));
    }

    #[test]
    fn num_workers_takes_the_first_devices_and_says_so() {
        let (n1, n2) = (hello("n1", &[0, 1]), hello("n2", &[0, 1]));
        let (table, notes) = DeviceTable::assign(&[&n1, &n2], Some(3));
        assert_eq!(locations(&table), ["0=n1:0", "1=n1:1", "2=n2:0"]);
        assert_eq!(
            notes,
            [
                "using 3 of the 4 devices offered by the allocation's nodes (num_workers or \
                 --workers): 1 left unused; without either, a run uses every one"
            ]
        );
        let (table, notes) = DeviceTable::assign(&[&n1, &n2], Some(9));
        assert_eq!(table.rows.len(), 4);
        assert_eq!(
            notes,
            [
                "9 workers were asked for but 4 device(s) are offered by the allocation's nodes: \
                 using 4"
            ]
        );
    }
}
