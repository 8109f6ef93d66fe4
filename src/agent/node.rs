//! The node agent's side (`kactors agent`): one per node of the allocation, a Slurm step that
//! holds that node's GPUs. It locks them against other runs, makes the preflight's checks
//! there, says hello, and then serves the head's requests with kactors's own local platform:
//! one Python evaluator per device under its pin, the vendor's profiler, a Watchdog of its own
//! for their deadlines. Each device's requests run one at a time, in order; different devices
//! run at once; a ping is answered at once. When its stdin closes (the head ended, or its srun
//! died) or SIGTERM comes (scancel), it ends its children and exits; its children die with it
//! in any case (PR_SET_PDEATHSIG).

use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use actors::model::{DeviceId, Vendor};
use actors::ports::{DeviceEvaluator, EvaluatorFactory, EvaluatorStart, KernelProfiler};
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::{Notify, mpsc};

use super::wire::{
    AgentMessage, AgentRequest, Assignment, Hello, NextDraws, OfferedDevice, WireCheckLine,
    WireEvalError, WireOutcome, duration,
};
use crate::check::CheckLine;
use crate::config::RunSettings;
use crate::devices::{Device, GpuLock, HostEnvironment};
use crate::platform::{GpuPlatform, PreparedPlatform, Tools};
use crate::profiling::standalone_watchdog;
use crate::vendor::Platform;

/// Who this agent is: Slurm's name for its node, the host's own name, its step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeIdentity {
    pub node: String,
    pub host: String,
    /// `JOB.STEP`, as scancel takes it.
    pub step: String,
}

impl NodeIdentity {
    /// From the step's environment (SLURMD_NODENAME, SLURM_JOB_ID, SLURM_STEP_ID) and the
    /// kernel's host name.
    pub fn of_step(host: &HostEnvironment) -> Result<NodeIdentity, String> {
        let var = |name: &str| {
            host.var(name)
                .filter(|value| !value.is_empty())
                .map(str::to_string)
                .ok_or_else(|| {
                    format!("{name} is not set: `kactors agent` runs as a Slurm step, started by `kactors run` with launcher slurm")
                })
        };
        let node = var("SLURMD_NODENAME")?;
        let step = format!("{}.{}", var("SLURM_JOB_ID")?, var("SLURM_STEP_ID")?);
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|name| name.trim().to_string())
            .unwrap_or_else(|_| node.clone());
        Ok(NodeIdentity { node, host, step })
    }
}

/// One of the node's GPUs this agent holds: Slurm's index for it, the device, its lock.
#[derive(Debug)]
pub struct HeldDevice {
    pub index: u32,
    pub device: Device,
    pub lock: Option<GpuLock>,
}

/// Slurm's index of each selected device: the step's GPUs (SLURM_STEP_GPUS, Slurm's indices
/// in the order the runtime numbers them) paired in order with the devices by their index on
/// the node. Where Slurm names no GPUs, or a different number of them, a device keeps its own.
pub fn slurm_indices(devices: &[Device], step_gpus: Option<&str>) -> BTreeMap<u32, u32> {
    let slurm: Option<Vec<u32>> = step_gpus.and_then(|list| {
        list.split(',')
            .map(|entry| entry.trim().parse::<u32>().ok())
            .collect()
    });
    let mut ids: Vec<u32> = devices.iter().map(|device| device.id).collect();
    ids.sort_unstable();
    match slurm {
        Some(mut slurm) if slurm.len() == ids.len() => {
            slurm.sort_unstable();
            ids.into_iter().zip(slurm).collect()
        }
        _ => ids.into_iter().map(|id| (id, id)).collect(),
    }
}

/// The line that says whether the run directory the head chose is visible here: the head
/// wrote `token` into `file` there, and this node must read it back.
pub fn shared_folder_line(node: &str, file: &Path, token: &str) -> CheckLine {
    let folder = file.parent().unwrap_or(file).display().to_string();
    let what = format!("run directory {folder} is shared with node {node}");
    match std::fs::read_to_string(file) {
        Ok(read) if read.trim() == token => CheckLine::ok(what),
        Ok(_) => CheckLine::fail(
            what,
            format!(
                "{} holds another run's check: node {node} sees a different folder under that name; put --run-dir on a filesystem every node mounts",
                file.display()
            ),
        ),
        Err(error) => CheckLine::fail(
            what,
            format!(
                "node {node} cannot read {} ({error}): put --run-dir on a filesystem every node of the allocation mounts",
                file.display()
            ),
        ),
    }
}

pub fn wire_line(line: &CheckLine) -> WireCheckLine {
    WireCheckLine {
        ok: line.passed(),
        what: line.what().to_string(),
        fix: line.fix().map(str::to_string),
        stops_a_run: line.stops_a_run(),
    }
}

pub fn hello(
    identity: &NodeIdentity,
    vendor: Vendor,
    devices: &[HeldDevice],
    notes: Vec<String>,
    preflight: &[CheckLine],
) -> Hello {
    Hello {
        node: identity.node.clone(),
        host: identity.host.clone(),
        step: identity.step.clone(),
        pid: std::process::id(),
        vendor,
        devices: devices
            .iter()
            .map(|held| OfferedDevice {
                index: held.index,
                name: held.device.name.clone(),
                uuid: held.device.uuid().map(str::to_string),
                spec: held.device.spec.map(|spec| spec.name.clone()),
            })
            .collect(),
        notes,
        preflight: preflight.iter().map(wire_line).collect(),
    }
}

/// The agent's stdout: one writer thread, so that no request waits on the pipe and lines never
/// interleave. Dropping every clone ends the thread once it has written what it was given.
#[derive(Clone)]
pub struct Outbox(std::sync::mpsc::Sender<String>);

pub struct OutboxThread(std::thread::JoinHandle<()>);

impl Outbox {
    pub fn start() -> (Outbox, OutboxThread) {
        let (sender, receiver) = std::sync::mpsc::channel::<String>();
        let thread = std::thread::spawn(move || {
            let stdout = std::io::stdout();
            for line in receiver {
                let mut out = stdout.lock();
                // The head is gone when its end is closed: stdin closes too, and that ends us.
                if writeln!(out, "{line}").and_then(|()| out.flush()).is_err() {
                    return;
                }
            }
        });
        (Outbox(sender), OutboxThread(thread))
    }

    pub fn send(&self, message: &AgentMessage) {
        let _ = self.0.send(message.to_line());
    }
}

impl OutboxThread {
    /// Waits until every line sent has been written (every `Outbox` clone must be gone).
    pub fn finish(self) {
        let _ = self.0.join();
    }
}

/// stdin's lines on a thread of their own (a read cannot be cancelled), into a channel the
/// serving loop selects on; the channel closes at end of file.
fn stdin_lines() -> mpsc::UnboundedReceiver<String> {
    let (sender, receiver) = mpsc::unbounded_channel();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { return };
            if sender.send(line).is_err() {
                return;
            }
        }
    });
    receiver
}

/// Everything the agent serves with.
pub struct NodeAgent {
    pub settings: RunSettings,
    pub kernel_dir: PathBuf,
    pub identity: NodeIdentity,
    pub platform: Platform,
    pub devices: Vec<HeldDevice>,
}

/// How the agent stopped serving.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// stdin closed: the head ended the run (or died, and its srun with it).
    Closed,
    /// SIGTERM: the step was cancelled.
    Terminated,
}

/// Serves the head until stdin closes or SIGTERM comes, then ends every child. Runs an actix
/// System on the calling thread, which must be the main thread: the evaluators are spawned
/// from it (see `process::spawn` on the parent-death signal).
pub fn serve(agent: NodeAgent, outbox: Outbox) -> Ended {
    let incoming = stdin_lines();
    let system = actix::System::new();
    system.block_on(async move {
        let mut serving = Serving {
            cache_root: std::env::temp_dir().join(format!("kactors-agent-{}", agent.identity.step)),
            agent,
            outbox,
            devices: BTreeMap::new(),
        };
        let ended = serving.run(incoming).await;
        serving.end().await;
        ended
    })
}

struct DeviceHandle {
    queue: mpsc::UnboundedSender<AgentRequest>,
    abort: Rc<Notify>,
    done: tokio::task::JoinHandle<()>,
}

struct Serving {
    agent: NodeAgent,
    outbox: Outbox,
    /// The devices the run uses, once it started.
    devices: BTreeMap<DeviceId, DeviceHandle>,
    /// Node-local: Triton's caches, one folder per device, removed at the end.
    cache_root: PathBuf,
}

impl Serving {
    async fn run(&mut self, mut incoming: mpsc::UnboundedReceiver<String>) -> Ended {
        let mut terminate = match signal(SignalKind::terminate()) {
            Ok(terminate) => Some(terminate),
            Err(error) => {
                tracing::warn!("cannot listen for SIGTERM: {error}");
                None
            }
        };
        loop {
            let line = tokio::select! {
                line = incoming.recv() => line,
                Some(()) = async { match terminate.as_mut() { Some(t) => t.recv().await, None => std::future::pending().await } } => {
                    tracing::info!("SIGTERM: ending the devices' children");
                    return Ended::Terminated;
                }
            };
            let Some(line) = line else {
                tracing::info!("stdin closed: ending the devices' children");
                return Ended::Closed;
            };
            self.take(&line);
        }
    }

    fn reply(&self, id: u64, outcome: WireOutcome) {
        self.outbox.send(&AgentMessage::Reply {
            id,
            started: None,
            outcome,
        });
    }

    fn take(&mut self, line: &str) {
        let request: AgentRequest = match serde_json::from_str(line) {
            Ok(request) => request,
            Err(error) => {
                let id = serde_json::from_str::<serde_json::Value>(line)
                    .ok()
                    .and_then(|value| value.get("id").and_then(serde_json::Value::as_u64));
                tracing::warn!("a request this agent cannot read: {error}: {line}");
                if let Some(id) = id {
                    self.reply(
                        id,
                        WireOutcome::Refused {
                            reason: format!("not a request this agent reads: {error}"),
                        },
                    );
                }
                return;
            }
        };
        match request {
            AgentRequest::Ping { id } => self.outbox.send(&AgentMessage::Pong { id }),
            AgentRequest::Start {
                id,
                run_dir,
                devices,
            } => {
                let outcome = match self.start(&run_dir, &devices) {
                    Ok(()) => WireOutcome::Started,
                    Err(reason) => WireOutcome::Refused { reason },
                };
                self.reply(id, outcome);
            }
            request => {
                let id = request.id();
                let device = request
                    .device()
                    .expect("every other request names a device");
                let Some(handle) = self.devices.get(&device) else {
                    self.reply(
                        id,
                        WireOutcome::Refused {
                            reason: format!(
                                "device {device} is not one node {} serves in this run",
                                self.agent.identity.node
                            ),
                        },
                    );
                    return;
                };
                if matches!(request, AgentRequest::StopDevice { .. }) {
                    handle.abort.notify_waiters();
                }
                let _ = handle.queue.send(request);
            }
        }
    }

    /// The run starts on `assignments`: the other devices' locks are freed, and each assigned
    /// device gets its evaluator (started at its first request) and a queue of its own.
    fn start(&mut self, run_dir: &Path, assignments: &[Assignment]) -> Result<(), String> {
        if !self.devices.is_empty() {
            return Err("the run has started already".into());
        }
        let Platform::Vendor(vendor) = self.agent.platform else {
            return Err("the noop platform runs nothing on a node".into());
        };
        let mut assigned = Vec::new();
        for assignment in assignments {
            let held = self
                .agent
                .devices
                .iter()
                .find(|held| held.index == assignment.index)
                .ok_or_else(|| {
                    format!(
                        "node {} holds no GPU of Slurm index {}",
                        self.agent.identity.node, assignment.index
                    )
                })?;
            assigned.push((assignment.device, held.device.clone()));
        }
        let kept: Vec<u32> = assignments.iter().map(|a| a.index).collect();
        self.agent.devices.retain(|held| kept.contains(&held.index));
        std::fs::create_dir_all(&self.cache_root)
            .map_err(|error| format!("cannot create {}: {error}", self.cache_root.display()))?;
        let devices: Vec<(DeviceId, &Device)> =
            assigned.iter().map(|(id, device)| (*id, device)).collect();
        let gpu = GpuPlatform::new(
            vendor,
            run_dir,
            &self.agent.settings,
            &Tools::of_run(run_dir),
            &devices,
            &self.agent.kernel_dir,
            Some(&self.cache_root),
        )
        .map_err(|error| {
            format!(
                "cannot prepare the devices' folders in {}: {error}",
                run_dir.display()
            )
        })?;
        let watchdog = standalone_watchdog(std::time::Duration::from_secs_f64(
            self.agent.settings.kill_grace_s,
        ));
        let (factory, profiler) = PreparedPlatform::Gpu(Box::new(gpu)).work_ports(watchdog);
        let identity = Rc::new(self.agent.identity.clone());
        for (device, _) in &assigned {
            let (queue, requests) = mpsc::unbounded_channel();
            let abort = Rc::new(Notify::new());
            let done = tokio::task::spawn_local(serve_device(DeviceService {
                device: *device,
                evaluator: factory.start(*device),
                factory: factory.clone(),
                profiler: profiler.clone(),
                requests,
                abort: abort.clone(),
                outbox: self.outbox.clone(),
                identity: identity.clone(),
            }));
            self.devices
                .insert(*device, DeviceHandle { queue, abort, done });
        }
        tracing::info!(
            "serving devices {:?} of node {}",
            assignments,
            self.agent.identity.node
        );
        Ok(())
    }

    /// Abandons what the devices are doing, ends their evaluators, removes the node-local
    /// caches, and frees the GPUs.
    async fn end(&mut self) {
        let handles = std::mem::take(&mut self.devices);
        for handle in handles.values() {
            handle.abort.notify_waiters();
        }
        // Every device's evaluator ends at once: each may take the grace.
        futures_util::future::join_all(handles.into_values().map(|handle| {
            drop(handle.queue);
            handle.done
        }))
        .await;
        let _ = std::fs::remove_dir_all(&self.cache_root);
        self.agent.devices.clear();
    }
}

struct DeviceService {
    device: DeviceId,
    evaluator: Box<dyn DeviceEvaluator>,
    /// Where the re-check's evaluator comes from.
    factory: Rc<dyn EvaluatorFactory>,
    profiler: Option<Rc<dyn KernelProfiler>>,
    requests: mpsc::UnboundedReceiver<AgentRequest>,
    abort: Rc<Notify>,
    outbox: Outbox,
    identity: Rc<NodeIdentity>,
}

/// One device's requests, one at a time: a stop abandons the request at hand (its reply says
/// so) and ends the evaluator; the queue's end ends it too.
async fn serve_device(mut service: DeviceService) {
    while let Some(request) = service.requests.recv().await {
        let id = request.id();
        let outcome = match request {
            AgentRequest::StopDevice { then, .. } => {
                service.evaluator.shutdown().await;
                if then == NextDraws::Recheck {
                    service.evaluator = service.factory.start_recheck(service.device);
                }
                WireOutcome::Stopped
            }
            request => {
                let work = perform(
                    service.device,
                    &mut *service.evaluator,
                    service.profiler.as_ref(),
                    request,
                );
                tokio::select! {
                    outcome = work => outcome,
                    () = service.abort.notified() => WireOutcome::EvalFailed {
                        error: WireEvalError::Rejected {
                            reason: format!("the head stopped device {}", service.device),
                        },
                    },
                }
            }
        };
        let started = service.evaluator.take_started().map(|start| {
            Box::new(EvaluatorStart {
                ready: located(start.ready, &service.identity),
                floor: start.floor,
            })
        });
        service.outbox.send(&AgentMessage::Reply {
            id,
            started,
            outcome,
        });
    }
    service.evaluator.shutdown().await;
}

/// An evaluator's `ready` with the node and the host it runs on, for the journal.
fn located(ready: serde_json::Value, identity: &NodeIdentity) -> serde_json::Value {
    match ready {
        serde_json::Value::Object(mut object) => {
            object.insert("node".into(), identity.node.clone().into());
            object.insert("host".into(), identity.host.clone().into());
            serde_json::Value::Object(object)
        }
        other => other,
    }
}

async fn perform(
    device: DeviceId,
    evaluator: &mut dyn DeviceEvaluator,
    profiler: Option<&Rc<dyn KernelProfiler>>,
    request: AgentRequest,
) -> WireOutcome {
    let refused = |reason: String| WireOutcome::Refused { reason };
    match request {
        AgentRequest::Verify { job, .. } => match job.into_job() {
            Ok(job) => WireOutcome::verified(evaluator.verify(&job).await),
            Err(reason) => refused(reason),
        },
        AgentRequest::Time { job, .. } => match job.into_job() {
            Ok(job) => WireOutcome::timed(evaluator.time(&job).await.map(Some)),
            Err(reason) => refused(reason),
        },
        AgentRequest::TimeReference {
            which, deadline_s, ..
        } => match duration("deadline_s", deadline_s) {
            Ok(deadline) => WireOutcome::timed(evaluator.time_reference(which, deadline).await),
            Err(reason) => refused(reason),
        },
        AgentRequest::UserTest {
            folder, deadline_s, ..
        } => match duration("deadline_s", deadline_s) {
            Ok(deadline) => {
                WireOutcome::user_test(evaluator.run_user_test(&folder, deadline).await)
            }
            Err(reason) => refused(reason),
        },
        AgentRequest::Profile { job, .. } => match profiler {
            Some(profiler) => {
                WireOutcome::profiled(profiler.clone().profile(job.into_job(device)).await)
            }
            None => WireOutcome::ProfileFailed {
                unavailable: true,
                error: "the strategy turns profiling off".into(),
            },
        },
        AgentRequest::Start { .. }
        | AgentRequest::Ping { .. }
        | AgentRequest::StopDevice { .. } => refused("not a request for a device's queue".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::devices::fake_h200;

    #[test]
    fn slurms_indices_pair_with_the_nodes_devices_in_order() {
        let devices = [fake_h200(2), fake_h200(0), fake_h200(1)];
        assert_eq!(
            slurm_indices(&devices, Some("4,6,5")),
            BTreeMap::from([(0, 4), (1, 5), (2, 6)])
        );
        assert_eq!(
            slurm_indices(&devices, Some("4,5")),
            BTreeMap::from([(0, 0), (1, 1), (2, 2)]),
            "a different count: each keeps its own"
        );
        assert_eq!(
            slurm_indices(&devices, None),
            BTreeMap::from([(0, 0), (1, 1), (2, 2)])
        );
        assert_eq!(
            slurm_indices(&devices, Some("0,x,2")),
            BTreeMap::from([(0, 0), (1, 1), (2, 2)])
        );
    }

    #[test]
    fn the_run_directory_is_shared_when_the_node_reads_back_the_heads_token() {
        let folder = tempfile::tempdir().unwrap();
        let file = folder.path().join("check");
        std::fs::write(&file, "token-1\n").unwrap();
        let shared = shared_folder_line("n2", &file, "token-1");
        assert!(shared.passed(), "{shared}");
        let other = shared_folder_line("n2", &file, "token-2");
        assert!(other.stops_a_run(), "{other}");
        let missing = shared_folder_line("n2", &folder.path().join("absent"), "token-1");
        assert!(
            missing
                .to_string()
                .contains("put --run-dir on a filesystem every node of the allocation mounts"),
            "{missing}"
        );
    }

    #[test]
    fn an_evaluators_ready_message_gets_its_node_and_host() {
        let identity = NodeIdentity {
            node: "n2".into(),
            host: "gpu-b07".into(),
            step: "12.3".into(),
        };
        let ready = serde_json::json!({"type": "ready", "device": {"uuid": "GPU-1"}});
        let located = located(ready, &identity);
        assert_eq!(located["node"], "n2");
        assert_eq!(located["host"], "gpu-b07");
        assert_eq!(located["device"]["uuid"], "GPU-1");
    }
}
