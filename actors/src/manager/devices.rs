//! The Manager's work on devices: a candidate's code written into its folder and evaluated by
//! its device's worker (restarted by the Supervisor when it died), a parent profiled, PyTorch's
//! references timed. Each ends as a record sent back as an input.

use std::sync::Arc;

use actix::prelude::*;

use crate::collector::PrepareCandidate;
use crate::gpu_worker::{Evaluate, GpuWorker, Profile, TimeReferences};
use crate::journal::Event;
use crate::model::{DeviceId, RankedKernel};
use crate::ports::{AgentLoss, EvalJob, ProfileError, ProfileJob};
use crate::search_state::{Evaluation, agent_restarted, profiled, unserved};
use crate::supervision::RestartWorker;

use super::{Input, Manager};

impl Manager {
    /// Writes the code evaluated as the candidate's kernel.py (its attempt's own file was kept
    /// with the reply that proposed it), then hands it to its device. A device no worker
    /// serves fails the attempt at once, by the record returned.
    pub(super) fn evaluate(
        &mut self,
        evaluation: Evaluation,
        ctx: &mut Context<Self>,
    ) -> Option<Event> {
        let Some(worker) = self.worker(evaluation.device) else {
            return Some(evaluation.failed(unserved(evaluation.device)));
        };
        let files = vec![(
            "kernel.py".to_string(),
            evaluation.source.text().to_string(),
        )];
        self.stopwatch.dispatched(&evaluation, self.clock.now());
        let collector = self.peers.collector.clone();
        let deadline = self.settings.step_deadline;
        self.share_timed_code();
        let timed_code = self.timed_code.subscribe();
        let job_of = evaluation.clone();
        let work = async move {
            let folder = collector
                .send(PrepareCandidate {
                    candidate: job_of.candidate,
                    files,
                })
                .await
                .map_err(|_| "the collector is gone".to_string())??;
            let job = EvalJob {
                candidate: job_of.candidate,
                source: job_of.source,
                folder,
                deadline,
            };
            let evaluate = Evaluate {
                job,
                parent: job_of.parent,
                round: job_of.round,
                timed_code,
            };
            Ok::<_, String>(worker.send(evaluate).await.map_err(|_| worker))
        };
        let me = ctx.address();
        let fills_the_disk = self.settings.evaluations_fill_the_disk;
        ctx.spawn(
            async move {
                let input = match work.await {
                    Err(reason) => Input::Record(evaluation.failed(reason)),
                    Ok(Ok(result)) => {
                        let returned = evaluation.returned(result, fills_the_disk);
                        if let Some((devices, reason)) = returned.lost {
                            me.do_send(Input::AgentLost { devices, reason });
                        }
                        returned.record.map_or_else(Input::DiskFull, Input::Record)
                    }
                    Ok(Err(dead)) => Input::WorkerDied { evaluation, dead },
                };
                me.do_send(input);
            }
            .into_actor(self),
        );
        None
    }

    /// Lets the workers see the compiled code of the candidates timed so far, as the search
    /// has it now.
    pub(super) fn share_timed_code(&self) {
        let now = self.state.timed_code();
        self.timed_code.send_if_modified(|shared| {
            let changed = !Arc::ptr_eq(shared, &now);
            *shared = now;
            changed
        });
    }

    /// A worker died under an evaluation: the Supervisor restarts it (within its budget) and
    /// the search decides whether the candidate is tried again.
    pub(super) fn worker_died(
        &mut self,
        evaluation: Evaluation,
        dead: Addr<GpuWorker>,
        ctx: &mut Context<Self>,
    ) {
        // A worker the run's own shutdown stopped (the end, a limit, Ctrl-C) did not die: its
        // evaluation stays in flight in the journal, for a resume to redo.
        if self.handed_over() {
            return;
        }
        self.record(evaluation.worker_died());
        let restart = self.supervisor.restart.send(RestartWorker {
            device: evaluation.device,
            dead,
        });
        ctx.spawn(restart.into_actor(self).map(move |answer, manager, ctx| {
            let restarted = answer
                .unwrap_or_else(|_| Err("the supervisor is gone".into()))
                .map(|worker| {
                    manager.peers.workers.insert(evaluation.device, worker);
                });
            manager.step(evaluation.after_restart(restarted), ctx);
        }));
    }

    /// Devices found lost with their node's agent. Each evaluation that was on them reports
    /// them: the first takes them out of service, by `agent_restarting` while their agent is
    /// started again (then `agent_restarted`, or `devices_lost` when it could not start), or
    /// by `devices_lost` when its restart budget is spent.
    pub(super) fn agent_lost(
        &mut self,
        devices: Vec<DeviceId>,
        reason: String,
        ctx: &mut Context<Self>,
    ) {
        // A run being handed over starts no agent again: its agents are about to be closed.
        if !self.state.any_in_service(&devices) || self.handed_over() {
            return;
        }
        match self.supervisor.evaluators.agent_lost(&devices, &reason) {
            AgentLoss::Serving => {}
            AgentLoss::Retired { reason } => self.step(Event::DevicesLost { devices, reason }, ctx),
            AgentLoss::Restarting {
                node,
                restarts,
                restarted,
            } => {
                self.step(
                    Event::AgentRestarting {
                        node: node.clone(),
                        devices: devices.clone(),
                        reason,
                    },
                    ctx,
                );
                ctx.spawn(restarted.into_actor(self).map(move |answer, manager, ctx| {
                    manager.step(agent_restarted(node, devices, restarts, answer), ctx);
                }));
            }
        }
    }

    /// A kernel is profiled once, when it first becomes a parent, on its round-robin device.
    /// A device no worker serves fails the profile at once, by the record returned.
    pub(super) fn profile(
        &mut self,
        parent: RankedKernel,
        device: DeviceId,
        round: u32,
        ctx: &mut Context<Self>,
    ) -> Option<Event> {
        let candidate = parent.id;
        let Some(worker) = self.worker(device) else {
            let error = ProfileError::Failed(unserved(device));
            return Some(profiled(candidate, device, Err(error)));
        };
        let collector = self.peers.collector.clone();
        let work = async move {
            let folder = collector
                .send(PrepareCandidate {
                    candidate,
                    files: Vec::new(),
                })
                .await
                .map_err(|_| ProfileError::Failed("the collector is gone".into()))?
                .map_err(ProfileError::Failed)?;
            let job = ProfileJob {
                candidate,
                kernel_names: parent.launched_kernels,
                source: parent.source,
                folder,
                device,
            };
            worker
                .send(Profile { job, round })
                .await
                .unwrap_or_else(|_| {
                    Err(ProfileError::Failed(
                        "the worker stopped while profiling".into(),
                    ))
                })
        };
        let me = ctx.address();
        ctx.spawn(
            async move {
                me.do_send(Input::Record(profiled(candidate, device, work.await)));
            }
            .into_actor(self),
        );
        None
    }

    /// PyTorch eager and torch.compile, timed once per run while round 1's proposals are asked
    /// for; prompts carry the times once they are known (a device no worker serves times
    /// nothing, and the prompts go without them).
    pub(super) fn time_references(&mut self, device: DeviceId, ctx: &mut Context<Self>) {
        let Some(worker) = self.worker(device) else {
            return;
        };
        // torch.compile's first call compiles: allow it several steps' time.
        let times = worker.send(TimeReferences {
            deadline: self.settings.step_deadline * 4,
        });
        let me = ctx.address();
        ctx.spawn(
            async move {
                for event in times.await.unwrap_or_default() {
                    me.do_send(Input::Record(event));
                }
            }
            .into_actor(self),
        );
    }

    /// The worker of a device, when one serves it: a device the run does not have is an
    /// input to answer, never a panic.
    pub(super) fn worker(&self, device: DeviceId) -> Option<Addr<GpuWorker>> {
        self.peers.workers.get(&device).cloned()
    }
}
