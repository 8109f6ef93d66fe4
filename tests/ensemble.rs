//! Issue 22: KernelAgent's ensemble keys through the binary. Two models on one loopback server,
//! each answering with code of its own, share the proposals 3 to 1, each prompt giving two
//! samples; the journal names each request's model, report.md compares the models, and a run
//! killed midway resumes with every candidate asked of the model it had.

mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::Value;
use support::journal::Journal;
use support::llm_server::{LlmServer, chat_completion, last_prompt};
use support::runs::{assert_exit, finish, only_run};
use support::{kactors, kernel_with_candidates};

const ABORT_AT: &str = "KACTORS_TEST_ABORT_AT";

/// Round 1 expands the initial kernel's two bottlenecks, later rounds the beam's two parents'
/// one each: 2 parents × 1 bottleneck × 2 models × 2 samples = 8 candidates a round. Prices make
/// model-b ten times dearer.
fn strategy(base_url: &str) -> String {
    format!(
        "platform: noop\nprovider: openai_compatible\nbase_url: {base_url}\nnoop_eval_s: 0.02\n\
         num_workers: 2\nmax_rounds: 2\nmax_refinements: 1\n\
         prices:\n  model-a: {{input_usd_per_mtok: 1.0, output_usd_per_mtok: 1.0}}\n  \
         model-b: {{input_usd_per_mtok: 10.0, output_usd_per_mtok: 10.0}}\n\
         strategy_config:\n  num_top_kernels: 2\n  num_bottlenecks: 1\n  samples_per_prompt: 2\n  \
         models:\n    - {{name: model-a, weight: 3}}\n    - {{name: model-b, weight: 1}}\n"
    )
}

/// A server whose every reply for code is new and names the model that wrote it; analyses
/// name no bottleneck, reflexions teach nothing.
fn serve() -> LlmServer {
    let count = AtomicU64::new(0);
    LlmServer::start(usize::MAX, move |body| {
        // A run killed while sending leaves a connection without its body: nobody reads the
        // answer, and the server must live on for the resumed run.
        let Ok(body) = serde_json::from_str::<Value>(body) else {
            return (400, String::new());
        };
        let model = body["model"].as_str().unwrap_or_default().replace('-', "_");
        let prompt = last_prompt(&body);
        let content = if prompt.starts_with("# Optimize") || prompt.starts_with("# Fix") {
            let n = count.fetch_add(1, Ordering::Relaxed);
            format!(
                "Mine.\n\n```python\ndef kernel_function(A, B):\n    {model} = {n}\n    return A @ B\n```\n"
            )
        } else if prompt.starts_with("# What did candidate") {
            String::new()
        } else {
            "no bottlenecks to report".into()
        };
        (200, chat_completion(&content))
    })
}

fn run_command(dir: &Path) -> Command {
    let mut command = kactors(dir);
    command
        .args(["run", "--strategy", "ensemble", "--config-dir", "."])
        .args(["--kernel-dir", "kernel"])
        .env("OPENAI_API_KEY", "sk-kactors-ensemble-test");
    command
}

fn workspace(server: &LlmServer) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    kernel_with_candidates(dir.path(), 0);
    std::fs::write(dir.path().join("ensemble.yaml"), strategy(&server.base_url)).unwrap();
    dir
}

/// Each candidate's model, as its `candidate_planned` record names it.
fn planned_models(journal: &Journal) -> BTreeMap<u64, String> {
    journal
        .of_type("candidate_planned")
        .map(|r| {
            let model = r["model"]
                .as_str()
                .expect("every candidate names its model");
            (r["candidate"].as_u64().unwrap(), model.to_string())
        })
        .collect()
}

/// The models of the prompts at positions 0, 1, 2, …: 3 to 1, spread out (a, a, b, a).
fn expected_model(candidate: u64) -> &'static str {
    let prompt = (candidate - 1) / 2;
    ["model-a", "model-a", "model-b", "model-a"][(prompt % 4) as usize]
}

/// Every request for code, proposal or refinement, went to its candidate's model.
fn assert_requests_follow_the_candidates(journal: &Journal) {
    let planned = planned_models(journal);
    for requested in journal.of_type("proposal_requested") {
        let candidate = requested["candidate"].as_u64().unwrap();
        assert_eq!(
            requested["model"].as_str(),
            Some(planned[&candidate].as_str()),
            "{requested}"
        );
    }
}

#[test]
fn two_models_share_the_proposals_by_weight_and_the_report_compares_them() {
    let server = serve();
    let dir = workspace(&server);
    let output = finish(run_command(dir.path()));
    assert_exit(&output, 0);
    let run = only_run(dir.path());
    let journal = Journal::read(&run);

    let planned = planned_models(&journal);
    assert_eq!(planned.len(), 16, "two rounds of 2 × 1 × 2 × 2");
    for (candidate, model) in &planned {
        assert_eq!(model, expected_model(*candidate), "candidate {candidate}");
    }
    let share = |name: &str| planned.values().filter(|m| *m == name).count();
    assert_eq!((share("model-a"), share("model-b")), (12, 4));
    assert_requests_follow_the_candidates(&journal);
    for analysis in journal.of_type("analysis_requested") {
        assert_eq!(analysis["model"], "model-a", "the first model analyses");
    }

    // What the server saw: each model asked its share, and each prompt twice (its samples).
    let bodies: Vec<Value> = server
        .bodies()
        .iter()
        .map(|b| serde_json::from_str(b).unwrap())
        .collect();
    let mut optimize: BTreeMap<(String, String), usize> = BTreeMap::new();
    for body in &bodies {
        let prompt = last_prompt(body);
        if prompt.starts_with("# Optimize") {
            let model = body["model"].as_str().unwrap().to_string();
            *optimize.entry((model, prompt)).or_default() += 1;
        }
    }
    let asked = |name: &str| -> usize {
        optimize
            .iter()
            .filter(|((model, _), _)| model == name)
            .map(|(_, n)| n)
            .sum()
    };
    assert_eq!((asked("model-a"), asked("model-b")), (12, 4));
    assert!(
        optimize.values().all(|n| n % 2 == 0),
        "each rendered prompt went out once per sample: {:?}",
        optimize.values().collect::<Vec<_>>()
    );
    for received in journal.of_type("proposal_received") {
        let candidate = received["candidate"].as_u64().unwrap();
        let writer = planned[&candidate].replace('-', "_");
        if let Some(code) = received["code"].as_str() {
            assert!(code.contains(&writer), "candidate {candidate}: {code}");
        }
    }

    // report.md's comparison, against the journal's own figures.
    let report = std::fs::read_to_string(run.join("report.md")).unwrap();
    assert!(report.contains("## Models"), "{report}");
    let html = std::fs::read_to_string(run.join("report.html")).unwrap();
    assert!(
        html.contains("Models</h2>") && html.contains("<td>model-b</td>"),
        "report.html shows the same table"
    );
    let fates = journal.fates();
    for name in ["model-a", "model-b"] {
        let verified = planned
            .iter()
            .filter(|(c, m)| *m == name && fates.get(c).is_some_and(|f| f.0))
            .count();
        let mine = |r: &&Value| {
            if r["type"] == "analysis_received" {
                return name == "model-a";
            }
            r["candidate"]
                .as_u64()
                .is_some_and(|c| planned.get(&c).is_some_and(|m| m == name))
        };
        let dollars: f64 = journal
            .0
            .iter()
            .filter(|r| {
                [
                    "proposal_received",
                    "analysis_received",
                    "reflexion_received",
                ]
                .contains(&r["type"].as_str().unwrap_or_default())
            })
            .filter(mine)
            .filter_map(|r| r["cost_usd"].as_f64())
            .sum();
        assert!(dollars > 0.0);
        let row = format!("| {name} | {} | {verified} | ", share(name));
        let line = report
            .lines()
            .find(|line| line.starts_with(&row))
            .unwrap_or_else(|| panic!("no row starting {row} in {report}"));
        assert!(line.ends_with(&format!(" | {dollars:.4} |")), "{line}");
    }
}

#[test]
fn a_run_killed_midway_resumes_with_each_candidate_asked_of_its_model() {
    let server = serve();
    let dir = workspace(&server);
    let mut command = run_command(dir.path());
    command.env(ABORT_AT, "proposal_received:6");
    let killed = finish(command);
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&killed.status),
        Some(9),
        "the abort hook kills the run"
    );
    let run = only_run(dir.path());
    let mut resume = kactors(dir.path());
    resume
        .arg("resume")
        .arg(&run)
        .env("OPENAI_API_KEY", "sk-kactors-ensemble-test");
    assert_exit(&finish(resume), 0);

    let journal = Journal::read(&run);
    assert_eq!(journal.of_type("run_resumed").count(), 1);
    let planned = planned_models(&journal);
    assert_eq!(planned.len(), 16);
    for (candidate, model) in &planned {
        assert_eq!(model, expected_model(*candidate), "candidate {candidate}");
    }
    assert_requests_follow_the_candidates(&journal);
}

/// One model's provider refusing its key takes only that model out: its candidates fail with
/// the reason, the other model's go on, and the run ends as planned.
#[test]
fn a_model_whose_key_is_refused_is_out_and_the_other_goes_on() {
    let server = LlmServer::start(usize::MAX, move |body| {
        if body.contains("\"model\":\"model-b\"") {
            return (401, r#"{"error":{"message":"bad key"}}"#.to_string());
        }
        (
            200,
            chat_completion(&format!(
                "```python\ndef kernel_function(A, B):\n    n = {}\n    return A @ B\n```\n",
                body.len()
            )),
        )
    });
    let dir = workspace(&server);
    let output = finish(run_command(dir.path()));
    assert_exit(&output, 0);
    let journal = Journal::read(&only_run(dir.path()));
    let planned = planned_models(&journal);
    let refused: Vec<&Value> = journal
        .of_type("proposal_received")
        .filter(|r| planned[&r["candidate"].as_u64().unwrap()] == "model-b")
        .collect();
    assert!(!refused.is_empty());
    for record in &refused {
        assert_eq!(record["outcome"], "failed", "{record}");
        assert!(
            record["error"]
                .as_str()
                .is_some_and(|e| e.contains("model model-b is out of the run")),
            "{record}"
        );
    }
    assert!(
        journal
            .of_type("proposal_received")
            .any(|r| r["outcome"] == "code"),
        "model-a's proposals came"
    );
    assert_eq!(planned.len(), 16, "both rounds ran");
}
