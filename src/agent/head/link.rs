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

use actors::ports::EvaluatorStart;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use crate::agent::wire::{AgentMessage, AgentRequest, Hello, WireOutcome};
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
    pub started: Option<Box<EvaluatorStart>>,
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
    /// Set once the link is lost and its step is over (srun reaped, or cancelled): from then
    /// on the node's GPUs are free for an agent started again.
    ended: tokio::sync::watch::Sender<bool>,
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
            ended: tokio::sync::watch::Sender::new(false),
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

    pub(super) fn log(&self) -> PathBuf {
        self.log.borrow().clone()
    }

    /// Waits until the link is lost and its step is over.
    pub async fn ended(&self) {
        let mut ended = self.ended.subscribe();
        // The sender lives as long as the link, which `self` holds.
        let _ = ended.wait_for(|ended| *ended).await;
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
        self.ended.send_replace(true);
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
        self.ended.send_replace(true);
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
    link.ended.send_replace(true);
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::os::unix::fs::PermissionsExt;

    use super::*;
    use crate::agent::wire::WireOutcome;
    use crate::process::{Protocol, child_environment};

    const HELLO: &str = r#"{"type":"hello","node":"n2","host":"h2","step":"7.3","pid":1,"vendor":"nvidia","devices":[],"notes":[],"preflight":[]}"#;

    fn script(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{text}")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    /// A fake agent started as srun would be, and a fake scancel that records its arguments
    /// and, given KILL, kills the agent.
    fn fakes(dir: &Path, agent: &str) -> (ChildSpec, LinkSettings) {
        let agent = script(
            dir,
            "agent",
            &format!("echo $$ > {}/agent.pid\n{agent}", dir.display()),
        );
        let scancel = script(
            dir,
            "scancel",
            &format!(
                "echo \"$@\" >> {dir}/scancel.args\ncase \"$1\" in --signal=KILL) kill -9 $(cat {dir}/agent.pid);; esac\n",
                dir = dir.display()
            ),
        );
        let spec = ChildSpec {
            program: agent,
            args: Vec::new(),
            cwd: dir.to_path_buf(),
            env: child_environment(std::env::vars_os(), &BTreeMap::new(), &[]),
            log_path: dir.join("n2.log"),
            protocol: Protocol::Stdio,
            label: "node agent of n2".into(),
        };
        let settings = LinkSettings {
            scancel,
            log: dir.join("n2.log"),
            timeout: Duration::from_millis(300),
            grace: Duration::from_millis(100),
        };
        (spec, settings)
    }

    fn ping(id: u64) -> AgentRequest {
        AgentRequest::Ping { id }
    }

    /// Issue 14: an agent that stops answering is cancelled through Slurm, TERM then KILL on
    /// its step, and what waited on it fails saying so.
    #[test]
    fn an_agent_silent_past_its_timeout_is_cancelled_with_scancel_term_then_kill() {
        let dir = tempfile::tempdir().unwrap();
        // Says hello, then never answers, and outlives its stdin; TERM is ignored, as a hung
        // process does not act on it. Only KILL ends it.
        let (spec, settings) = fakes(
            dir.path(),
            &format!(
                "trap '' TERM\necho '{HELLO}'\nwhile read line; do :; done\nexec sleep 1000\n"
            ),
        );
        actix::System::new().block_on(async {
            let (link, hello) = AgentLink::launch("n2", &spec, settings, Duration::from_secs(10))
                .await
                .unwrap();
            assert_eq!(hello.step, "7.3");
            link.start_heartbeat();
            let started = Instant::now();
            let error = link.call(ping).await.unwrap_err();
            assert!(
                error.starts_with("the agent of node n2 stopped answering (nothing for 300ms); its step 7.3 was cancelled with scancel"),
                "{error}"
            );
            assert!(started.elapsed() < Duration::from_secs(5));
            // Later calls fail at once, as lost.
            assert_eq!(link.call(ping).await.unwrap_err(), error);
            // The cancel goes on after the link is lost: wait for srun's end.
            let args_file = dir.path().join("scancel.args");
            while !std::fs::read_to_string(&args_file)
                .unwrap_or_default()
                .contains("KILL")
            {
                assert!(started.elapsed() < Duration::from_secs(20), "no KILL sent");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            assert_eq!(
                std::fs::read_to_string(&args_file).unwrap(),
                "--signal=TERM 7.3\n--signal=KILL 7.3\n"
            );
        });
    }

    /// An agent whose step ends (srun exits: the node went down, the agent died) loses its
    /// link: what waited fails, naming the node and the end of its log.
    #[test]
    fn an_agent_whose_step_ends_fails_what_waits_on_it() {
        let dir = tempfile::tempdir().unwrap();
        let (spec, settings) = fakes(
            dir.path(),
            &format!("echo '{HELLO}'\nread line\necho 'node failure' >&2\nexit 1\n"),
        );
        actix::System::new().block_on(async {
            let (link, _) = AgentLink::launch("n2", &spec, settings, Duration::from_secs(10))
                .await
                .unwrap();
            let error = link.call(ping).await.unwrap_err();
            assert!(
                error.starts_with("the agent of node n2 ended (step 7.3, srun exit status: 1)"),
                "{error}"
            );
            assert!(error.ends_with("node failure"), "{error}");
            assert!(
                !dir.path().join("scancel.args").exists(),
                "nothing left to cancel"
            );
        });
    }

    /// A reply reaches the request of its id, whatever the order the agent answers in.
    #[test]
    fn replies_reach_their_requests_by_id() {
        let dir = tempfile::tempdir().unwrap();
        // Answers two requests in the reverse order, echoing each id.
        let reply = |id: &str| {
            format!(r#"echo '{{"type":"reply","id":'{id}',"outcome":{{"kind":"stopped"}}}}'"#)
        };
        let agent = format!(
            "echo '{HELLO}'\nread first\nread second\nid() {{ echo \"$1\" | sed 's/.*\"id\":\\([0-9]*\\).*/\\1/'; }}\n{}\n{}\nread rest\n",
            reply("$(id \"$second\")"),
            reply("$(id \"$first\")")
        );
        let (spec, settings) = fakes(dir.path(), &agent);
        actix::System::new().block_on(async {
            let (link, _) = AgentLink::launch("n2", &spec, settings, Duration::from_secs(10))
                .await
                .unwrap();
            let stop = |device| {
                move |id| AgentRequest::StopDevice {
                    id,
                    device: actors::model::DeviceId(device),
                    then: crate::agent::wire::NextDraws::Search,
                }
            };
            let (first, second) = tokio::join!(link.call(stop(0)), link.call(stop(1)));
            assert_eq!(first.unwrap().outcome, WireOutcome::Stopped);
            assert_eq!(second.unwrap().outcome, WireOutcome::Stopped);
            link.close().await;
        });
    }
}
