//! The ports over the agents' links: the head's evaluators and profiler for devices that live
//! on other nodes. Each call goes to the agent of the device's node and comes back as the
//! local adapters' results would; a lost link makes every call fail as `DeviceLost`, and the
//! node's agent is started again within its budget (`super::restart`).

use std::collections::BTreeMap;
use std::path::Path;
use std::rc::Rc;
use std::time::Duration;

use actors::model::{DeviceId, Reference, TimeOutcome, VerifyOutcome};
use actors::ports::{
    AgentLoss, DeviceEvaluator, EvalError, EvalFuture, EvalJob, EvaluatorFactory, EvaluatorStart,
    KernelProfiler, LocalFuture, ProfileError, ProfileJob, ProfileSummary, ReferenceTiming,
    UserTestRun,
};

use super::link::{AgentLink, Reply};
use super::restart::NodeAgentHandle;
use crate::agent::wire::{AgentRequest, NextDraws, WireOutcome, WireProfileJob};

/// Which node's agent serves each device of the run, and how often a lost one is started
/// again.
#[derive(Clone)]
pub struct RemoteDevices {
    nodes: BTreeMap<DeviceId, Rc<NodeAgentHandle>>,
    restart_budget: u32,
}

impl RemoteDevices {
    pub fn new(nodes: BTreeMap<DeviceId, Rc<NodeAgentHandle>>, restart_budget: u32) -> Self {
        RemoteDevices {
            nodes,
            restart_budget,
        }
    }

    fn node(&self, device: DeviceId) -> Result<Rc<NodeAgentHandle>, String> {
        self.nodes
            .get(&device)
            .cloned()
            .ok_or_else(|| format!("no node agent serves device {device}"))
    }

    /// The link that serves `device` now (once a restart under way is over).
    async fn link(&self, device: DeviceId) -> Result<Rc<AgentLink>, String> {
        self.node(device)?.serving_link().await
    }

    /// The devices that fail with `device` when its agent is lost: its node's (itself
    /// included).
    fn on_the_node_of(&self, device: DeviceId) -> Vec<DeviceId> {
        let Some(node) = self.nodes.get(&device) else {
            return vec![device];
        };
        self.nodes
            .iter()
            .filter(|(_, other)| Rc::ptr_eq(node, other))
            .map(|(device, _)| *device)
            .collect()
    }
}

pub struct RemoteEvaluatorFactory(pub RemoteDevices);

impl EvaluatorFactory for RemoteEvaluatorFactory {
    fn start(&self, device: DeviceId) -> Box<dyn DeviceEvaluator> {
        Box::new(RemoteEvaluator {
            device,
            devices: self.0.clone(),
            node_devices: self.0.on_the_node_of(device),
            started: None,
            recheck: false,
        })
    }

    /// The agent's evaluator is replaced by one on new draws before the first request.
    fn start_recheck(&self, device: DeviceId) -> Box<dyn DeviceEvaluator> {
        Box::new(RemoteEvaluator {
            device,
            devices: self.0.clone(),
            node_devices: self.0.on_the_node_of(device),
            started: None,
            recheck: true,
        })
    }

    fn agent_lost(&self, devices: &[DeviceId], reason: &str) -> AgentLoss {
        match devices.first().map(|device| self.0.node(*device)) {
            Some(Ok(node)) => node.lost(reason, self.0.restart_budget),
            _ => AgentLoss::Retired {
                reason: reason.to_string(),
            },
        }
    }
}

/// One device's evaluator, which lives on the device's node, in its agent.
struct RemoteEvaluator {
    device: DeviceId,
    devices: RemoteDevices,
    /// The devices lost with this one when its agent is.
    node_devices: Vec<DeviceId>,
    started: Option<EvaluatorStart>,
    /// The agent is still to replace the device's evaluator by a re-check's.
    recheck: bool,
}

impl RemoteEvaluator {
    async fn call(
        &mut self,
        make: impl FnOnce(u64) -> AgentRequest,
    ) -> Result<WireOutcome, EvalError> {
        let lost = |reason| EvalError::DeviceLost {
            reason,
            devices: self.node_devices.clone(),
        };
        let link = self.devices.link(self.device).await.map_err(lost)?;
        if self.recheck {
            let device = self.device;
            let stopped = link
                .call(|id| AgentRequest::StopDevice {
                    id,
                    device,
                    then: NextDraws::Recheck,
                })
                .await
                .map_err(lost)?;
            stopped.outcome.into_done().map_err(|reason| {
                EvalError::Start(format!(
                    "the node agent could not start the re-check's evaluator: {reason}"
                ))
            })?;
            self.recheck = false;
        }
        let Reply { started, outcome } = link.call(make).await.map_err(lost)?;
        if started.is_some() {
            self.started = started.map(|start| *start);
        }
        Ok(outcome)
    }
}

impl DeviceEvaluator for RemoteEvaluator {
    fn verify<'a>(&'a mut self, job: &'a EvalJob) -> EvalFuture<'a, VerifyOutcome> {
        Box::pin(async move {
            let device = self.device;
            self.call(|id| AgentRequest::Verify {
                id,
                device,
                job: job.into(),
            })
            .await?
            .into_verified()
        })
    }

    fn time<'a>(&'a mut self, job: &'a EvalJob) -> EvalFuture<'a, TimeOutcome> {
        Box::pin(async move {
            let device = self.device;
            self.call(|id| AgentRequest::Time {
                id,
                device,
                job: job.into(),
            })
            .await?
            .into_timed()?
            .ok_or_else(|| EvalError::Crashed {
                reason: "the node agent timed nothing".into(),
            })
        })
    }

    fn time_reference(&mut self, which: Reference, deadline: Duration) -> ReferenceTiming<'_> {
        Box::pin(async move {
            let device = self.device;
            self.call(|id| AgentRequest::TimeReference {
                id,
                device,
                which,
                deadline_s: deadline.as_secs_f64(),
            })
            .await?
            .into_timed()
        })
    }

    fn run_user_test<'a>(&'a mut self, folder: &'a Path, deadline: Duration) -> UserTestRun<'a> {
        Box::pin(async move {
            let device = self.device;
            self.call(|id| AgentRequest::UserTest {
                id,
                device,
                folder: folder.to_path_buf(),
                deadline_s: deadline.as_secs_f64(),
            })
            .await?
            .into_user_test()
        })
    }

    fn take_started(&mut self) -> Option<EvaluatorStart> {
        self.started.take()
    }

    fn shutdown(&mut self) -> LocalFuture<'_, ()> {
        Box::pin(async move {
            let device = self.device;
            if let Ok(outcome) = self
                .call(|id| AgentRequest::StopDevice {
                    id,
                    device,
                    then: NextDraws::Search,
                })
                .await
                && let Err(reason) = outcome.into_done()
            {
                tracing::warn!("device {device}: {reason}");
            }
        })
    }
}

/// The vendor's profiler, run by the agent of the profiled device's node.
pub struct RemoteProfiler(pub RemoteDevices);

impl KernelProfiler for RemoteProfiler {
    fn profile(
        self: Rc<Self>,
        job: ProfileJob,
    ) -> LocalFuture<'static, Result<ProfileSummary, ProfileError>> {
        Box::pin(async move {
            let lost = |reason| ProfileError::Failed(format!("device lost: {reason}"));
            let link = self.0.link(job.device).await.map_err(lost)?;
            let device = job.device;
            let wire = WireProfileJob::from(&job);
            let reply = link
                .call(|id| AgentRequest::Profile {
                    id,
                    device,
                    job: wire,
                })
                .await
                .map_err(lost)?;
            reply.outcome.into_profiled()
        })
    }
}
