//! The head's side of one node agent's channel: the `srun` child that carries it (a child of
//! kactors in its own group, dying with kactors), a writer and a reader task, the requests
//! waiting for their replies, and a heartbeat. A link is lost for good when the agent's step
//! ends (srun exits, its output closes) or when the agent leaves the heartbeat unanswered for
//! `agent_timeout_s`: then its step is cancelled with `scancel --signal=TERM`, and after the
//! grace `--signal=KILL`, and every request to its devices fails as `DeviceLost`.
//!
//! This is the one place besides the Watchdog where kactors ends something: a step on another
//! node is no process group of kactors's, so Slurm ends it.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::wire::{AgentMessage, AgentRequest, Hello, WireOutcome};
use crate::process::{ChildSpec, ProtocolPipes, ReplyReader, RunningChild, log_tail, spawn};
use crate::slurm::signal_step;

/// How a link watches and ends its agent.
#[derive(Clone, Debug)]
pub struct LinkSettings {
    /// Slurm's scancel.
    pub scancel: PathBuf,
    /// srun's stderr, which carries the agent's own log; scancel's output goes beside it.
    /// Read only until the agent says hello: the link keeps where it is since.
    pub log: PathBuf,
    /// How long the agent may stay silent before its step is cancelled.
    pub timeout: Duration,
    /// Between the TERM and the KILL to a step, and for an agent to end its children.
    pub grace: Duration,
}

/// How long scancel itself may take.
const SCANCEL_LIMIT: Duration = Duration::from_secs(20);

/// What came back for a request.
#[derive(Debug)]
pub struct Reply {
    /// An evaluator's `ready`, when one started during the request.
    pub started: Option<serde_json::Value>,
    pub outcome: WireOutcome,
}

struct LinkState {
    pending: HashMap<u64, oneshot::Sender<Reply>>,
    next_id: u64,
    /// Why the link is gone, once it is.
    lost: Option<String>,
    last_heard: Instant,
    outgoing: Option<mpsc::UnboundedSender<String>>,
    child: Option<RunningChild>,
    heartbeat: bool,
}

pub struct AgentLink {
    pub node: String,
    /// `JOB.STEP`.
    pub step: String,
    settings: LinkSettings,
    /// srun's log, where it is now: it moves into the run directory once that exists.
    log: RefCell<PathBuf>,
    state: RefCell<LinkState>,
}

/// Why an agent did not say hello.
#[derive(Debug)]
pub struct NotLaunched {
    pub reason: String,
    /// Every GPU of its node is held by another kactors run.
    pub busy: bool,
}

/// How a launched agent answered: its hello, or why there is none.
pub type Launched = Result<(Rc<AgentLink>, Hello), NotLaunched>;

impl AgentLink {
    /// Starts `srun` as `spec` says (its protocol on stdin and stdout) and waits up to
    /// `start_limit` for the agent's first line. Must run on the runtime that will drive the
    /// run (the pipes belong to it).
    pub async fn launch(
        node: &str,
        spec: &ChildSpec,
        settings: LinkSettings,
        start_limit: Duration,
    ) -> Launched {
        let failed = |reason: String| NotLaunched {
            reason,
            busy: false,
        };
        let mut child = spawn(spec).map_err(|error| failed(format!("node {node}: {error}")))?;
        let ProtocolPipes {
            requests,
            mut replies,
        } = child
            .protocol
            .take()
            .expect("srun is spawned with its protocol on stdin and stdout");
        let first = tokio::select! {
            line = replies.recv_line() => line.ok().flatten(),
            _ = child.wait() => None,
            () = tokio::time::sleep(start_limit) => {
                return Err(failed(format!(
                    "node {node}: the agent did not say hello within {start_limit:?} (is the step waiting for resources? see {})",
                    settings.log.display()
                )));
            }
        };
        let hello = match first.as_deref().map(serde_json::from_str::<AgentMessage>) {
            Some(Ok(AgentMessage::Hello(hello))) => hello,
            Some(Ok(AgentMessage::Refused { reason, busy })) => {
                return Err(NotLaunched { reason, busy });
            }
            Some(Ok(other)) => {
                return Err(failed(format!(
                    "node {node}: the agent's first line is not its hello: {other:?}"
                )));
            }
            Some(Err(error)) => {
                return Err(failed(format!(
                    "node {node}: the agent's first line is not JSON ({error}); see {}",
                    settings.log.display()
                )));
            }
            None => {
                let status = tokio::time::timeout(Duration::from_secs(1), child.wait())
                    .await
                    .ok()
                    .and_then(Result::ok)
                    .map(|status| format!(" ({status})"))
                    .unwrap_or_default();
                let tail = log_tail(&settings.log).await.unwrap_or_default();
                return Err(failed(format!(
                    "node {node}: srun ended before the agent said hello{status}; the end of {}:\n{}",
                    settings.log.display(),
                    tail.join("\n")
                )));
            }
        };
        let (outgoing, lines) = mpsc::unbounded_channel();
        let link = Rc::new(AgentLink {
            node: node.to_string(),
            step: hello.step.clone(),
            log: RefCell::new(settings.log.clone()),
            settings,
            state: RefCell::new(LinkState {
                pending: HashMap::new(),
                next_id: 0,
                lost: None,
                last_heard: Instant::now(),
                outgoing: Some(outgoing),
                child: Some(child),
                heartbeat: false,
            }),
        });
        tokio::task::spawn_local(write_lines(requests, lines));
        tokio::task::spawn_local(read_messages(link.clone(), replies));
        Ok((link, hello))
    }

    /// srun's log was moved into `folder` (under the same name).
    pub fn log_moved_to(&self, folder: &Path) {
        let mut log = self.log.borrow_mut();
        if let Some(name) = log.file_name() {
            *log = folder.join(name);
        }
    }

    fn log(&self) -> PathBuf {
        self.log.borrow().clone()
    }

    /// Why the link is gone, if it is.
    pub fn lost(&self) -> Option<String> {
        self.state.borrow().lost.clone()
    }

    /// Sends the request `make` builds with its id and waits for its reply; `Err` with the
    /// reason when the link is or becomes lost.
    pub async fn call(&self, make: impl FnOnce(u64) -> AgentRequest) -> Result<Reply, String> {
        let receiver = {
            let mut state = self.state.borrow_mut();
            if let Some(reason) = &state.lost {
                return Err(reason.clone());
            }
            let id = state.next_id;
            state.next_id += 1;
            let (sender, receiver) = oneshot::channel();
            state.pending.insert(id, sender);
            let line = make(id).to_line();
            let sent = state
                .outgoing
                .as_ref()
                .is_some_and(|outgoing| outgoing.send(line).is_ok());
            if !sent {
                state.pending.remove(&id);
                return Err(format!(
                    "the channel to node {}'s agent is closed",
                    self.node
                ));
            }
            receiver
        };
        match receiver.await {
            Ok(reply) => Ok(reply),
            Err(_) => Err(self
                .lost()
                .unwrap_or_else(|| format!("the agent of node {} went away", self.node))),
        }
    }

    /// Starts pinging the agent: from now on an agent silent for `timeout` is cancelled. Call
    /// it on the runtime that drives the run, once it runs: a runtime that is not polled
    /// would read the agent's answers late and take it for hung.
    pub fn start_heartbeat(self: &Rc<Self>) {
        {
            let mut state = self.state.borrow_mut();
            if state.heartbeat || state.lost.is_some() {
                return;
            }
            state.heartbeat = true;
            state.last_heard = Instant::now();
        }
        tokio::task::spawn_local(heartbeat(self.clone()));
    }

    /// The run is over: closes the agent's stdin, so that it ends its children and exits, and
    /// waits for its srun; an agent that does not end within the grace (and some seconds for
    /// its evaluators) is cancelled.
    pub async fn close(&self) {
        let child = {
            let mut state = self.state.borrow_mut();
            state.outgoing = None;
            if state.lost.is_none() {
                state.lost = Some(format!("the run closed node {}'s agent", self.node));
            }
            state.pending.clear();
            state.child.take()
        };
        let Some(mut child) = child else { return };
        let limit = self.settings.grace * 2 + Duration::from_secs(10);
        if tokio::time::timeout(limit, child.wait()).await.is_err() {
            tracing::warn!(
                "node {}'s agent did not end within {limit:?} after its stdin closed: cancelling step {}",
                self.node,
                self.step
            );
            self.cancel_step(&mut child).await;
        }
    }

    /// Ends the link: every waiting request fails with `reason`, nothing more is sent.
    fn lose(&self, reason: String) {
        let mut state = self.state.borrow_mut();
        if state.lost.is_some() {
            return;
        }
        tracing::warn!("{reason}");
        state.lost = Some(reason);
        state.outgoing = None;
        // Dropping the senders wakes every caller, which reads the reason.
        state.pending.clear();
    }

    /// The agent stopped answering: the link is lost, and its step cancelled through Slurm.
    async fn unresponsive(&self) {
        let reason = format!(
            "the agent of node {} stopped answering (nothing for {:?}); its step {} was cancelled with scancel",
            self.node, self.settings.timeout, self.step
        );
        self.lose(reason);
        let child = self.state.borrow_mut().child.take();
        if let Some(mut child) = child {
            self.cancel_step(&mut child).await;
        }
    }

    /// `scancel --signal=TERM` on the step, the grace for srun to end, then `--signal=KILL`;
    /// srun's own group goes last (Slurm cancels a step whose srun is killed, too).
    async fn cancel_step(&self, srun: &mut RunningChild) {
        let log = self.log().with_extension("scancel.log");
        for (signal, wait) in [
            ("TERM", self.settings.grace),
            ("KILL", Duration::from_secs(5)),
        ] {
            tracing::warn!(
                "scancel --signal={signal} {} (node {})",
                self.step,
                self.node
            );
            if let Err(error) = signal_step(
                &self.settings.scancel,
                &self.step,
                signal,
                &log,
                SCANCEL_LIMIT,
            )
            .await
            {
                tracing::warn!("{error}");
            }
            if tokio::time::timeout(wait, srun.wait()).await.is_ok() {
                return;
            }
        }
        let _ = srun.group().kill();
    }
}

/// Sends each queued line; ends (closing the agent's stdin) when the link drops its sender.
async fn write_lines(
    mut requests: crate::process::RequestWriter,
    mut lines: mpsc::UnboundedReceiver<String>,
) {
    while let Some(line) = lines.recv().await {
        if requests.send_line(&line).await.is_err() {
            return;
        }
    }
}

/// Every message of the agent after its hello, each reply to its waiting request; at the end
/// of its output the link is lost.
async fn read_messages(link: Rc<AgentLink>, mut replies: ReplyReader) {
    let ended = loop {
        let line = match replies.recv_line().await {
            Ok(Some(line)) => line,
            Ok(None) => break None,
            Err(error) => break Some(format!("its output broke off: {error}")),
        };
        let message = match serde_json::from_str::<AgentMessage>(&line) {
            Ok(message) => message,
            Err(error) => {
                break Some(format!(
                    "it wrote a line that is not a message ({error}): {line}"
                ));
            }
        };
        let mut state = link.state.borrow_mut();
        state.last_heard = Instant::now();
        match message {
            AgentMessage::Reply {
                id,
                started,
                outcome,
            } => {
                if let Some(waiting) = state.pending.remove(&id) {
                    let _ = waiting.send(Reply { started, outcome });
                }
            }
            AgentMessage::Pong { .. } | AgentMessage::Hello(_) | AgentMessage::Refused { .. } => {}
        }
    };
    if link.lost().is_some() {
        return;
    }
    let child = link.state.borrow_mut().child.take();
    let status = match child {
        Some(mut child) => {
            let status = tokio::time::timeout(Duration::from_secs(2), child.wait())
                .await
                .ok()
                .and_then(Result::ok);
            if status.is_none() {
                // srun is still there without its agent's output: end the step for good.
                link.cancel_step(&mut child).await;
            }
            status
                .map(|status| format!(", srun {status}"))
                .unwrap_or_default()
        }
        None => String::new(),
    };
    let log = link.log();
    let tail = log_tail(&log).await.unwrap_or_default();
    let why = ended.map(|why| format!(": {why}")).unwrap_or_default();
    link.lose(format!(
        "the agent of node {} ended (step {}{status}){why}; the end of {}:\n{}",
        link.node,
        link.step,
        log.display(),
        tail.join("\n")
    ));
}

/// Pings the agent every third of its timeout; when nothing came back for the whole timeout,
/// its step is cancelled.
async fn heartbeat(link: Rc<AgentLink>) {
    let interval =
        (link.settings.timeout / 3).clamp(Duration::from_millis(50), Duration::from_secs(5));
    loop {
        tokio::time::sleep(interval).await;
        let silent_for = {
            let state = link.state.borrow();
            if state.lost.is_some() {
                return;
            }
            state.last_heard.elapsed()
        };
        if silent_for > link.settings.timeout {
            link.unresponsive().await;
            return;
        }
        // The pong needs no waiting request: any message from the agent counts as life.
        let ping = {
            let mut state = link.state.borrow_mut();
            let id = state.next_id;
            state.next_id += 1;
            state
                .outgoing
                .as_ref()
                .map(|outgoing| outgoing.send(AgentRequest::Ping { id }.to_line()))
        };
        if !matches!(ping, Some(Ok(()))) {
            return;
        }
    }
}
