//! One node's agent as the head sees it: the link to the agent that serves now, how its step
//! was started, and what the run told it. A node whose agent is lost is started again (issue
//! 14), as the run started it: the same `srun` once the lost step is over (its GPU locks free),
//! the new agent's hello checked (the same node, the run's GPUs offered and locked, no preflight
//! line that stops a run, the shared run directory read back) and told the run's start again.
//! At most the restart budget times per node in this process; meanwhile calls to the node's
//! devices wait for it.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Duration;

use actors::ports::{AgentLoss, LocalFuture};
use futures_util::future::{FutureExt, Shared};

use super::link::{AgentLink, LinkSettings};
use crate::agent::wire::{AgentRequest, Assignment, Hello};
use crate::process::ChildSpec;

/// One node's agent, started; started again when it is lost.
pub struct NodeAgentHandle {
    /// The first agent's hello.
    pub hello: Hello,
    /// The link to the agent that serves now.
    pub(super) link: RefCell<Rc<AgentLink>>,
    /// How its step was started: an agent started again is started the same way.
    pub(super) launch: RefCell<AgentLaunch>,
    /// What the run told the agent at its start: told again to an agent started again.
    pub(super) run: RefCell<Option<(PathBuf, Vec<Assignment>)>>,
    pub(super) restart: RefCell<Restarts>,
}

/// What starts one node's agent step.
#[derive(Clone)]
pub struct AgentLaunch {
    pub spec: ChildSpec,
    pub settings: LinkSettings,
    pub start_limit: Duration,
}

impl NodeAgentHandle {
    pub(super) fn new(link: Rc<AgentLink>, hello: Hello, launch: AgentLaunch) -> Self {
        NodeAgentHandle {
            hello,
            link: RefCell::new(link),
            launch: RefCell::new(launch),
            run: RefCell::new(None),
            restart: RefCell::default(),
        }
    }

    /// The link to the agent that serves now.
    pub fn link(&self) -> Rc<AgentLink> {
        self.link.borrow().clone()
    }

    /// The agents' folder (srun's log, the shared-folder check) was moved into `folder`: the
    /// link's log and what an agent started again is given follow it.
    pub fn moved_to(&self, folder: &Path) {
        self.link().log_moved_to(folder);
        let mut launch = self.launch.borrow_mut();
        let Some(old) = launch.settings.log.parent().map(Path::to_path_buf) else {
            return;
        };
        let rebase = |path: &Path| {
            path.strip_prefix(&old)
                .map(|rest| folder.join(rest))
                .unwrap_or_else(|_| path.to_path_buf())
        };
        launch.settings.log = rebase(&launch.settings.log);
        launch.spec.log_path = rebase(&launch.spec.log_path);
        launch.spec.args = launch
            .spec
            .args
            .iter()
            .map(|arg| rebase(Path::new(arg)).into_os_string())
            .collect();
    }
}

/// Tells an agent which of its devices the run uses and where the run directory is.
pub(super) async fn start_run(
    link: &AgentLink,
    run_root: &Path,
    devices: Vec<Assignment>,
) -> Result<(), String> {
    let reply = link
        .call(|id| AgentRequest::Start {
            id,
            run_dir: run_root.to_path_buf(),
            devices,
        })
        .await?;
    reply.outcome.into_done()
}

/// A restart's answer: the new agent's step, or why it could not serve.
type Restart = Shared<LocalFuture<'static, Result<String, String>>>;

/// A node agent's restarts in this process.
#[derive(Default)]
pub struct Restarts {
    count: u32,
    /// The restart under way, or the last one when it failed (the node is out for good).
    pending: Option<Restart>,
}

impl NodeAgentHandle {
    /// The link to call now: once a restart under way is over; `Err` when it failed.
    pub(super) async fn serving_link(&self) -> Result<Rc<AgentLink>, String> {
        let pending = self.restart.borrow().pending.clone();
        if let Some(restart) = pending {
            restart.await?;
        }
        Ok(self.link())
    }

    /// The node's agent was found lost, for `reason`: it is started again, unless that is
    /// under way or done already, or `budget` restarts were spent.
    pub(super) fn lost(self: &Rc<Self>, reason: &str, budget: u32) -> AgentLoss {
        let mut restarts = self.restart.borrow_mut();
        if restarts.pending.is_some() || self.link().lost().is_none() {
            return AgentLoss::Serving;
        }
        if restarts.count >= budget {
            return AgentLoss::Retired {
                reason: format!(
                    "{reason}; its agent was started again {budget} time(s), the restart budget"
                ),
            };
        }
        restarts.count += 1;
        let attempt = restarts.count;
        let node = self.clone();
        let restart: LocalFuture<'static, Result<String, String>> = Box::pin(async move {
            let link = node.start_again(attempt).await?;
            *node.link.borrow_mut() = link.clone();
            node.restart.borrow_mut().pending = None;
            Ok(link.step.clone())
        });
        let restart = restart.shared();
        restarts.pending = Some(restart.clone());
        AgentLoss::Restarting {
            node: self.hello.node.clone(),
            restarts: attempt,
            restarted: Box::pin(restart),
        }
    }

    /// A new agent step on the node, started as the first was and told the run's start.
    async fn start_again(&self, attempt: u32) -> Result<Rc<AgentLink>, String> {
        let node = self.hello.node.clone();
        let lost = self.link();
        lost.ended().await;
        let mut launch = self.launch.borrow().clone();
        let log = lost
            .log()
            .with_file_name(format!("{node}.restart{attempt}.log"));
        launch.spec.log_path = log.clone();
        launch.settings.log = log;
        tracing::warn!("starting node {node}'s agent again (restart {attempt})");
        let (link, hello) =
            AgentLink::launch(&node, &launch.spec, launch.settings, launch.start_limit)
                .await
                .map_err(|failed| {
                    format!(
                        "node {node}'s agent could not be started again: {}",
                        failed.reason
                    )
                })?;
        let run = self.run.borrow().clone();
        let started = match (self.fits(&hello), run) {
            (Err(reason), _) => Err(reason),
            (Ok(()), None) => Err("the run had not started on it".to_string()),
            (Ok(()), Some((run_dir, devices))) => start_run(&link, &run_dir, devices).await,
        };
        if let Err(reason) = started {
            link.close().await;
            return Err(format!(
                "node {node}'s agent, started again as step {}, cannot serve the run: {reason}",
                link.step
            ));
        }
        link.start_heartbeat();
        Ok(link)
    }

    /// Whether a new agent's hello lets it serve what the first served.
    fn fits(&self, hello: &Hello) -> Result<(), String> {
        if hello.node != self.hello.node {
            return Err(format!("it says it runs on node {}", hello.node));
        }
        if let Some(line) = hello
            .preflight
            .iter()
            .find(|line| line.stops_a_run && !line.ok)
        {
            return Err(format!("its preflight failed: {}", line.what));
        }
        let run = self.run.borrow();
        let wanted = run.iter().flat_map(|(_, devices)| devices);
        let missing: Vec<String> = wanted
            .filter(|wanted| !hello.devices.iter().any(|d| d.index == wanted.index))
            .map(|wanted| wanted.index.to_string())
            .collect();
        if !missing.is_empty() {
            return Err(format!(
                "it does not hold GPU(s) {} of the node (another run may hold them)",
                missing.join(", ")
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::os::unix::fs::PermissionsExt;

    use actors::model::DeviceId;

    use super::*;
    use crate::process::{Protocol, child_environment};

    /// A fake srun whose first agent says hello (step 7.1) and dies at once; each later one
    /// runs `later`, with `$n` its launch's number.
    fn node_agent_launch(dir: &Path, later: &str) -> AgentLaunch {
        let hello = r#"{"type":"hello","node":"n2","host":"h2","step":"7.'$n'","pid":1,"vendor":"nvidia","devices":[{"index":0,"name":"NVIDIA H200","uuid":null,"spec":null}],"notes":[],"preflight":[]}"#;
        let srun = dir.join("srun");
        std::fs::write(
            &srun,
            format!(
                "#!/bin/sh\nn=$(($(cat count 2>/dev/null || echo 0) + 1))\necho $n > count\nhello() {{ echo '{hello}'; }}\nif [ $n = 1 ]; then hello; exit 0; fi\n{later}\n"
            ),
        )
        .unwrap();
        std::fs::set_permissions(&srun, std::fs::Permissions::from_mode(0o755)).unwrap();
        let log = dir.join("n2.log");
        AgentLaunch {
            spec: ChildSpec {
                program: srun,
                args: Vec::new(),
                cwd: dir.to_path_buf(),
                env: child_environment(std::env::vars_os(), &BTreeMap::new(), &[]),
                log_path: log.clone(),
                protocol: Protocol::Stdio,
                label: "node agent of n2".into(),
            },
            settings: LinkSettings {
                scancel: dir.join("no-scancel"),
                log,
                timeout: Duration::from_secs(10),
                grace: Duration::from_millis(100),
            },
            start_limit: Duration::from_secs(10),
        }
    }

    /// The node's first agent, launched and lost, with the run started on its GPU 0.
    async fn lost_node(dir: &Path, later: &str) -> Rc<NodeAgentHandle> {
        let launch = node_agent_launch(dir, later);
        let (link, hello) = AgentLink::launch(
            "n2",
            &launch.spec,
            launch.settings.clone(),
            launch.start_limit,
        )
        .await
        .unwrap();
        let node = Rc::new(NodeAgentHandle::new(link, hello, launch));
        *node.run.borrow_mut() = Some((
            dir.to_path_buf(),
            vec![Assignment {
                index: 0,
                device: DeviceId(4),
            }],
        ));
        node.link().ended().await;
        node
    }

    /// Issue 14: a lost agent is started again as a new step, told the run's start, and serves;
    /// a loss past the restart budget retires the node.
    #[test]
    fn a_lost_agent_is_started_again_within_its_budget_then_retired() {
        let dir = tempfile::tempdir().unwrap();
        // Later agents answer the run's start, then die.
        let later = r#"hello
read line
id=$(echo "$line" | sed 's/.*"id":\([0-9]*\).*/\1/')
echo '{"type":"reply","id":'$id',"outcome":{"kind":"started"}}'"#;
        actix::System::new().block_on(async {
            let node = lost_node(dir.path(), later).await;
            let AgentLoss::Restarting {
                node: name,
                restarts,
                restarted,
            } = node.lost("the agent of node n2 ended", 1)
            else {
                panic!("not restarted");
            };
            assert_eq!((name.as_str(), restarts), ("n2", 1));
            assert!(
                matches!(node.lost("again", 1), AgentLoss::Serving),
                "one restart per loss"
            );
            assert_eq!(restarted.await, Ok("7.2".to_string()));
            assert_eq!(node.link().step, "7.2");
            assert!(dir.path().join("n2.restart1.log").is_file());
            node.link().ended().await;
            let AgentLoss::Retired { reason } = node.lost("the agent of node n2 ended", 1) else {
                panic!("not retired");
            };
            assert_eq!(
                reason,
                "the agent of node n2 ended; its agent was started again 1 time(s), the restart budget"
            );
        });
    }

    /// A node that is down (srun cannot start a step there) cannot come back: the restart
    /// fails saying why, and calls to its devices fail with that.
    #[test]
    fn a_restart_that_srun_refuses_fails_and_so_do_calls_to_the_node() {
        let dir = tempfile::tempdir().unwrap();
        let later = "echo 'srun: error: Required node not available (down)' >&2\nexit 1";
        actix::System::new().block_on(async {
            let node = lost_node(dir.path(), later).await;
            let AgentLoss::Restarting { restarted, .. } = node.lost("gone", 3) else {
                panic!("not restarted");
            };
            let reason = restarted.await.unwrap_err();
            assert!(
                reason.starts_with("node n2's agent could not be started again")
                    && reason.contains("Required node not available"),
                "{reason}"
            );
            assert_eq!(node.serving_link().await.err(), Some(reason));
        });
    }
}
