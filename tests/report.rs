//! Issue 13, "A report you can look at": report.md and report.html from the journal of a run,
//! finished, killed or still going. The plots' marks are counted by parsing the SVG and compared
//! with the journal's records, read here by key; one test (ignored unless Debian's chromium is
//! installed: .ci/run) looks at the page in headless Chromium.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};

mod support;

use support::runs::{journal, stderr};
use support::{example, kactors};

fn report(dir: &Path, args: &[&str]) -> Output {
    kactors(dir).arg("report").args(args).output().unwrap()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

fn of_type<'a>(records: &'a [Value], kind: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
    records.iter().filter(move |record| record["type"] == kind)
}

/// The page's plots as SVG documents, in order: best time, candidates, devices.
fn plots(html: &str) -> Vec<String> {
    html.split("<svg")
        .skip(1)
        .map(|rest| {
            let end = rest.find("</svg>").expect("every <svg> is closed");
            format!("<svg{}</svg>", &rest[..end])
        })
        .collect()
}

/// The elements of one class, each as its attributes.
fn marks(svg: &str, class: &str) -> Vec<BTreeMap<String, String>> {
    let document = roxmltree::Document::parse(svg).unwrap_or_else(|error| panic!("{error}: {svg}"));
    document
        .descendants()
        .filter(|node| node.attribute("class") == Some(class))
        .map(|node| {
            node.attributes()
                .map(|attribute| (attribute.name().to_string(), attribute.value().to_string()))
                .collect()
        })
        .collect()
}

fn attribute(mark: &BTreeMap<String, String>, name: &str) -> String {
    mark.get(name).cloned().unwrap_or_default()
}

fn seconds(mark: &BTreeMap<String, String>, name: &str) -> f64 {
    attribute(mark, name).parse().unwrap()
}

/// Candidates in the order their records say the best time fell: each verified one that beat
/// every one finished before it.
fn improvements(records: &[Value]) -> Vec<String> {
    let mut best = f64::INFINITY;
    let mut out = Vec::new();
    for record in of_type(records, "candidate_finished") {
        if let (true, Some(ms)) = (record["passed"] == true, record["time_ms"].as_f64())
            && ms < best
        {
            best = ms;
            out.push(record["candidate"].to_string());
        }
    }
    out
}

/// A record's `t`, in milliseconds since the epoch.
fn millis(record: &Value) -> f64 {
    let t = actors::journal::parse_utc_millis(record["t"].as_str().unwrap()).unwrap();
    t.duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
        * 1000.0
}

/// Every check of the plots against the journal: one mark per candidate, failures by reason,
/// the beam, the best time as it fell, PyTorch's references, and each device's steps with idle
/// spans filling the rest of its timeline.
fn check_plots_against_journal(records: &[Value], html: &str) {
    let plots = plots(html);
    assert_eq!(plots.len(), 4, "four plots: {html}");
    let (best, candidates, devices) = (&plots[0], &plots[1], &plots[2]);

    // Issue 22: the lineage has a node per candidate, joined to the parent its record names,
    // the fastest verified one marked best.
    let nodes = marks(&plots[3], "lineage-node");
    let lineage: BTreeSet<(String, String)> = nodes
        .iter()
        .map(|m| (attribute(m, "data-candidate"), attribute(m, "data-parent")))
        .collect();
    let parents: BTreeSet<(String, String)> = of_type(records, "candidate_finished")
        .map(|r| {
            let parent = if r["parent"].is_null() {
                String::new()
            } else {
                r["parent"].to_string()
            };
            (r["candidate"].to_string(), parent)
        })
        .collect();
    assert_eq!(lineage, parents, "each candidate joined to its parent");
    let best_node: Vec<String> = nodes
        .iter()
        .filter(|m| attribute(m, "data-best") == "true")
        .map(|m| attribute(m, "data-candidate"))
        .collect();
    let fastest = of_type(records, "candidate_finished")
        .filter(|r| r["passed"] == true)
        .min_by(|a, b| {
            a["time_ms"]
                .as_f64()
                .unwrap()
                .total_cmp(&b["time_ms"].as_f64().unwrap())
        })
        .map(|r| r["candidate"].to_string());
    assert_eq!(best_node, fastest.into_iter().collect::<Vec<_>>());

    let finished: Vec<&Value> = of_type(records, "candidate_finished").collect();
    let shown = marks(candidates, "candidate");
    assert_eq!(shown.len(), finished.len(), "one mark per candidate");
    let shown_ids: BTreeSet<String> = shown
        .iter()
        .map(|m| attribute(m, "data-candidate"))
        .collect();
    let finished_ids: BTreeSet<String> = finished
        .iter()
        .map(|r| r["candidate"].to_string())
        .collect();
    assert_eq!(shown_ids, finished_ids);
    let failed = finished.iter().filter(|r| r["passed"] == false).count();
    let crosses = shown
        .iter()
        .filter(|m| attribute(m, "data-fate") == "failed")
        .count();
    assert_eq!(crosses, failed, "every failure marked");
    let duplicates = finished
        .iter()
        .filter(|r| !r["duplicate_of"].is_null())
        .count();
    let marked_duplicates = shown
        .iter()
        .filter(|m| attribute(m, "data-reason") == "duplicate")
        .count();
    assert_eq!(marked_duplicates, duplicates, "duplicates marked as such");

    let beam: BTreeSet<String> = of_type(records, "beam_updated")
        .last()
        .map(|record| {
            record["beam"]
                .as_array()
                .unwrap()
                .iter()
                .map(|member| member["candidate"].to_string())
                .collect()
        })
        .unwrap_or_default();
    let ringed: BTreeSet<String> = marks(candidates, "beam")
        .iter()
        .map(|m| attribute(m, "data-candidate"))
        .collect();
    assert_eq!(ringed, beam, "the latest beam ringed");

    let points: Vec<String> = marks(best, "best")
        .iter()
        .map(|m| attribute(m, "data-candidate"))
        .collect();
    assert_eq!(points, improvements(records), "one point per improvement");
    let measured: BTreeSet<String> = of_type(records, "reference_timed")
        .filter(|r| r["time_ms"].is_number())
        .map(|r| r["which"].as_str().unwrap().to_string())
        .collect();
    let lines: BTreeSet<String> = marks(best, "reference")
        .iter()
        .map(|m| attribute(m, "data-which"))
        .collect();
    assert_eq!(
        lines, measured,
        "PyTorch's references as lines when measured"
    );

    let spans = marks(devices, "span");
    let mut steps_journaled: Vec<(String, String, String)> = of_type(records, "step_started")
        .map(|r| {
            (
                r["device"].to_string(),
                r["step"].as_str().unwrap().to_string(),
                r["candidate"].to_string(),
            )
        })
        .collect();
    let mut steps_drawn: Vec<(String, String, String)> = spans
        .iter()
        .filter(|m| !["idle", "down"].contains(&attribute(m, "data-step").as_str()))
        .map(|m| {
            (
                attribute(m, "data-device"),
                attribute(m, "data-step"),
                attribute(m, "data-candidate"),
            )
        })
        .collect();
    steps_journaled.sort();
    steps_drawn.sort();
    assert_eq!(steps_drawn, steps_journaled, "one span per step");
    let start = millis(&records[0]);
    let end = records.iter().map(millis).fold(start, f64::max);
    let wall = (end - start) / 1000.0;
    let down_journaled = down_stretches(records);
    let down: f64 = down_journaled.iter().map(|(from, to)| to - from).sum();
    for busy in marks(devices, "busy") {
        let device = attribute(&busy, "data-device");
        let mut covered: Vec<(f64, f64)> = spans
            .iter()
            .filter(|m| attribute(m, "data-device") == device)
            .map(|m| (seconds(m, "data-start"), seconds(m, "data-end")))
            .collect();
        covered.sort_by(|a, b| a.0.total_cmp(&b.0));
        let (mut cursor, mut total) = (0.0, 0.0);
        for (from, to) in covered {
            assert!(
                from <= cursor + 0.002,
                "device {device}: a gap at {cursor} s without an idle span"
            );
            if to > cursor {
                total += to - from.max(cursor);
                cursor = to;
            }
        }
        assert!(
            (total - wall).abs() < 0.01,
            "device {device}: its spans cover {total} s of {wall} s"
        );
        let idle: f64 = spans
            .iter()
            .filter(|m| {
                attribute(m, "data-device") == device && attribute(m, "data-step") == "idle"
            })
            .map(|m| seconds(m, "data-end") - seconds(m, "data-start"))
            .sum();
        let down_drawn: Vec<(f64, f64)> = spans
            .iter()
            .filter(|m| {
                attribute(m, "data-device") == device && attribute(m, "data-step") == "down"
            })
            .map(|m| (seconds(m, "data-start"), seconds(m, "data-end")))
            .collect();
        assert_eq!(down_drawn.len(), down_journaled.len(), "device {device}");
        for ((from, to), (start, stop)) in down_drawn.iter().zip(&down_journaled) {
            assert!((from - start).abs() < 0.002 && (to - stop).abs() < 0.002);
        }
        let fraction = seconds(&busy, "data-fraction");
        assert!(
            (fraction - (1.0 - idle / (wall - down))).abs() < 0.01,
            "device {device}: busy {fraction} with {idle} s idle of {wall} s, {down} s down"
        );
    }
}

/// The stretches no process ran, in seconds since the start: from the last record before each
/// `run_resumed` to it.
fn down_stretches(records: &[Value]) -> Vec<(f64, f64)> {
    let start = millis(&records[0]);
    let mut last = start;
    let mut stretches = Vec::new();
    for record in records {
        if record["type"] == "run_resumed" {
            stretches.push(((last - start) / 1000.0, (millis(record) - start) / 1000.0));
        }
        last = last.max(millis(record));
    }
    stretches
}

/// Nothing the page could fetch or run: no script, no external reference. Its only links are
/// to the candidates' folders beside it (issue 22), which nothing fetches until clicked.
fn assert_self_contained(html: &str) {
    for forbidden in ["<script", "src=", "url(", "@import", "http:", "https:"] {
        assert!(!html.contains(forbidden), "report.html holds {forbidden:?}");
    }
    for link in html.split("href=\"").skip(1) {
        let target = &link[..link.find('"').unwrap()];
        let id = target
            .strip_prefix("candidates/")
            .and_then(|rest| rest.strip_suffix('/'));
        assert!(
            id.is_some_and(|id| id.parse::<u64>().is_ok()),
            "a link to anything but a candidate's folder: {target}"
        );
    }
    assert!(
        html.contains("href=\"candidates/"),
        "each candidate links to its folder"
    );
    assert!(html.contains("Content-Security-Policy\" content=\"default-src 'none'"));
}

/// The matvec example with replay candidates that make a dry run's report busy: improvements, a
/// duplicate, and one without kernel_function, which the noop platform fails.
fn busy_kernel_dir(dir: &Path) -> PathBuf {
    let kernel = dir.join("matvec");
    let candidates = kernel.join("candidates");
    std::fs::create_dir_all(&candidates).unwrap();
    for file in ["input.py", "problem.py", "test.py"] {
        std::fs::copy(example("optimize_01_matvec").join(file), kernel.join(file)).unwrap();
    }
    let shipped = example("optimize_01_matvec").join("candidates");
    let first = read(&shipped.join("01_row_tiles.py"));
    std::fs::write(candidates.join("01.py"), &first).unwrap();
    std::fs::write(candidates.join("02.py"), &first).unwrap();
    std::fs::write(candidates.join("03.py"), "print('no kernel here')\n").unwrap();
    for (index, name) in [
        "02_split_k_reduce.py",
        "03_autotuned_tiles.py",
        "04_pipelined_streaming.py",
    ]
    .iter()
    .enumerate()
    {
        std::fs::copy(shipped.join(name), candidates.join(format!("1{index}.py"))).unwrap();
    }
    kernel
}

/// A dry run with two simulated devices, its run directory.
fn dry_run(dir: &Path) -> PathBuf {
    let kernel = busy_kernel_dir(dir);
    std::fs::write(
        dir.join("busy.yaml"),
        "platform: noop\nprovider: replay\nnum_workers: 2\nmax_refinements: 0\nmax_rounds: 3\n\
         strategy_config:\n  num_top_kernels: 2\n  num_bottlenecks: 2\nnoop_eval_s: 0.02\n",
    )
    .unwrap();
    let output = kactors(dir)
        .args([
            "run",
            "--strategy",
            "busy",
            "--config-dir",
            ".",
            "--kernel-dir",
        ])
        .arg(&kernel)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let runs: Vec<PathBuf> = std::fs::read_dir(dir.join("runs"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    assert_eq!(runs.len(), 1, "{runs:?}");
    runs.into_iter().next().unwrap()
}

#[test]
fn the_collectors_report_html_plots_every_candidate_step_and_improvement_of_a_dry_run() {
    let dir = tempfile::tempdir().unwrap();
    let run = dry_run(dir.path());
    let records = journal(&run);
    let failed = of_type(&records, "candidate_finished")
        .filter(|r| r["passed"] == false)
        .count();
    assert!(failed >= 2, "the dry run has failures to mark: {failed}");
    let html = read(&run.join("report.html"));
    check_plots_against_journal(&records, &html);
    assert_self_contained(&html);
    assert!(html.contains("<h2>Rounds</h2>"), "report.md's tables");
    assert!(
        !html.contains("down (killed, not yet resumed)"),
        "no down legend for a run never resumed"
    );
}

#[test]
fn kactors_report_renders_a_finished_runs_report_as_the_collector_did() {
    let dir = tempfile::tempdir().unwrap();
    let run = dry_run(dir.path());
    let collectors = (read(&run.join("report.md")), read(&run.join("report.html")));
    std::fs::remove_file(run.join("report.md")).unwrap();
    std::fs::remove_file(run.join("report.html")).unwrap();
    let output = report(dir.path(), &[run.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_same(&read(&run.join("report.md")), &collectors.0);
    assert_same(&read(&run.join("report.html")), &collectors.1);
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        format!(
            "{}\n{}\n",
            run.join("report.md").display(),
            run.join("report.html").display()
        )
    );
    let elsewhere = dir.path().join("elsewhere");
    let output = report(
        dir.path(),
        &[
            run.to_str().unwrap(),
            "--out",
            elsewhere.to_str().unwrap(),
            "--json",
        ],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let answer: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(answer["type"], "report");
    assert_eq!(answer["finished"], true);
    assert_eq!(answer["torn_line"], Value::Null);
    assert_eq!(answer["records"], journal(&run).len());
    assert_same(&read(&elsewhere.join("report.html")), &collectors.1);
}

/// Two renderings that must be equal; a difference is shown as the first tag or line that differs.
fn assert_same(rendered: &str, expected: &str) {
    let pieces = |text: &str| {
        text.replace('>', ">\n")
            .lines()
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    let difference = pieces(rendered)
        .into_iter()
        .zip(pieces(expected))
        .find(|(left, right)| left != right);
    assert!(
        rendered == expected,
        "the renderings differ first at {difference:?}"
    );
}

/// A record of the synthetic journal: `v` 2, the time `seconds` (under an hour) after 10:00:00.
fn record(seconds: f64, kind: &str, fields: Value) -> Value {
    let mut record = json!({
        "v": 2,
        "t": format!(
            "2026-12-02T10:{:02}:{:06.3}Z",
            (seconds / 60.0) as u32,
            seconds % 60.0
        ),
        "type": kind,
    });
    record
        .as_object_mut()
        .unwrap()
        .extend(fields.as_object().unwrap().clone());
    record
}

fn candidate(id: u64, round: u32, device: u32) -> Value {
    json!({
        "candidate": id,
        "parent": if id == 0 { Value::Null } else { json!(0) },
        "round": round,
        "device": device,
    })
}

fn with(mut base: Value, fields: Value) -> Value {
    base.as_object_mut()
        .unwrap()
        .extend(fields.as_object().unwrap().clone());
    base
}

/// A step of half a second on a device, and half a second after it.
fn step(records: &mut Vec<Value>, clock: &mut f64, id: u64, round: u32, device: u32, name: &str) {
    records.push(record(
        *clock,
        "step_started",
        with(candidate(id, round, device), json!({"step": name})),
    ));
    records.push(record(
        *clock + 0.5,
        "step_finished",
        with(
            candidate(id, round, device),
            json!({"step": name, "provenance": "measured", "verdict": null, "time_ms": null, "error": null}),
        ),
    ));
    *clock += 1.0;
}

/// A journal cut off while a run went on: every failure reason, both references, a step still
/// open on device 1, and a torn last line.
fn killed_run_journal() -> (Vec<Value>, String) {
    let mut records = vec![record(
        0.0,
        "run_started",
        json!({
            "strategy": "beam_search", "platform": "nvidia", "simulated": false,
            "search": "beam_search", "num_top_kernels": 2, "num_bottlenecks": 4, "max_rounds": 5,
            "devices": [
                {"device": 0, "name": "NVIDIA H200", "uuid": "GPU-0"},
                {"device": 1, "name": "NVIDIA H200", "uuid": "GPU-1"},
            ],
            "initial_source": "def kernel_function(): pass",
        }),
    )];
    let mut clock = 0.5;
    step(&mut records, &mut clock, 0, 0, 0, "verify");
    step(&mut records, &mut clock, 0, 0, 0, "time");
    records.push(record(
        clock,
        "candidate_finished",
        with(
            candidate(0, 0, 0),
            json!({"passed": true, "time_ms": 8.0, "reason": null, "simulated": false, "duplicate_of": null}),
        ),
    ));
    step(&mut records, &mut clock, 0, 0, 1, "reference");
    for (which, ms) in [("eager", 6.0), ("compile", 3.0)] {
        records.push(record(
            clock,
            "reference_timed",
            json!({"device": 1, "which": which, "time_ms": ms, "provenance": "measured", "error": null}),
        ));
    }
    // Each candidate of round 1: its device, its evaluation's outcome (none: never evaluated),
    // its time if verified, its reason if not.
    let outcomes = [
        json!({"candidate": 1, "device": 0, "outcome": "verified", "time_ms": 5.0}),
        json!({"candidate": 2, "device": 1, "outcome": "wrong_output",
               "reason": "output differs from the reference"}),
        json!({"candidate": 3, "device": 0, "outcome": "failed",
               "reason": "verification failed: tampered with the evaluator's state: torch.allclose was replaced"}),
        json!({"candidate": 4, "device": 1, "outcome": "failed",
               "reason": "crashed: <script>alert(1)</script> | in a table"}),
        json!({"candidate": 5, "device": 0, "outcome": "worker_died",
               "reason": "the worker of device 0 died"}),
        json!({"candidate": 6, "device": 1, "outcome": "unstartable",
               "reason": "the problem's inputs do not fit"}),
        json!({"candidate": 7, "device": 0, "reason": "identical to candidate 1", "duplicate_of": 1}),
        json!({"candidate": 8, "device": 1, "reason": "the reply had no code"}),
    ];
    for outcome in outcomes {
        let id = outcome["candidate"].as_u64().unwrap();
        let device = outcome["device"].as_u64().unwrap() as u32;
        let (time_ms, reason) = (&outcome["time_ms"], &outcome["reason"]);
        if outcome["outcome"].is_string() {
            step(&mut records, &mut clock, id, 1, device, "verify");
            records.push(record(
                clock,
                "evaluated",
                with(
                    candidate(id, 1, device),
                    json!({"attempt": 0, "outcome": outcome["outcome"], "time_ms": time_ms,
                           "provenance": "measured", "reason": reason, "launched_kernels": []}),
                ),
            ));
        }
        records.push(record(
            clock,
            "candidate_finished",
            with(
                candidate(id, 1, device),
                json!({"passed": time_ms.is_number(), "time_ms": time_ms, "reason": reason,
                       "simulated": false, "duplicate_of": outcome["duplicate_of"]}),
            ),
        ));
    }
    records.push(record(
        clock,
        "beam_updated",
        json!({"round": 1, "beam": [{"candidate": 1, "time_ms": 5.0}, {"candidate": 0, "time_ms": 8.0}]}),
    ));
    records.push(record(
        clock,
        "round_finished",
        json!({"round": 1, "proposed": 8, "verified": 1, "failed": 7, "duplicates": 1,
               "failures": ["4: crashed: <script>alert(1)</script>"], "best_candidate": 1, "best_ms": 5.0}),
    ));
    records.push(record(
        clock + 0.25,
        "step_started",
        with(candidate(9, 2, 1), json!({"step": "verify"})),
    ));
    records.push(record(
        clock + 0.75,
        "round_started",
        json!({"round": 2, "parents": [1, 0]}),
    ));
    let mut text: String = records.iter().map(|r| format!("{r}\n")).collect();
    let torn = record(clock + 1.0, "candidate_finished", candidate(9, 2, 1)).to_string();
    text.push_str(&torn[..torn.len() / 2]);
    (records, text)
}

/// The folder of a run that was killed: its journal, and the report.md its Collector left after
/// the last round.
fn killed_run(dir: &Path) -> (PathBuf, Vec<Value>) {
    let run = dir.join("beam_search-20261202T100000Z");
    std::fs::create_dir_all(&run).unwrap();
    let (records, text) = killed_run_journal();
    std::fs::write(run.join("journal.jsonl"), text).unwrap();
    std::fs::write(run.join("report.md"), "the Collector's report\n").unwrap();
    (run, records)
}

#[test]
fn a_killed_runs_report_marks_every_failure_by_reason_and_leaves_the_collectors_alone() {
    let dir = tempfile::tempdir().unwrap();
    let (run, records) = killed_run(dir.path());
    let output = report(dir.path(), &[run.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let warnings: Vec<String> = stderr(&output)
        .lines()
        .filter(|line| line.contains("warning"))
        .map(str::to_string)
        .collect();
    assert_eq!(warnings.len(), 1, "one warning: {warnings:?}");
    let torn_line = format!("line {} is torn", records.len() + 1);
    assert!(
        warnings[0].contains(&torn_line) && warnings[0].contains("left out"),
        "{}",
        warnings[0]
    );
    assert_eq!(read(&run.join("report.md")), "the Collector's report\n");
    assert!(!run.join("report.html").exists());
    let markdown = read(&run.join("report.live.md"));
    assert!(markdown.contains("Still going, or killed"), "{markdown}");
    let html = read(&run.join("report.live.html"));
    check_plots_against_journal(&records, &html);
    assert_self_contained(&html);

    let candidates = &plots(&html)[1];
    let reasons: BTreeMap<String, String> = marks(candidates, "candidate")
        .iter()
        .filter(|m| attribute(m, "data-fate") == "failed")
        .map(|m| (attribute(m, "data-candidate"), attribute(m, "data-reason")))
        .collect();
    let expected: BTreeMap<String, String> = [
        ("2", "wrong_output"),
        ("3", "tampered"),
        ("4", "crashed"),
        ("5", "worker_died"),
        ("6", "unstartable"),
        ("7", "duplicate"),
        ("8", "not_evaluated"),
    ]
    .into_iter()
    .map(|(id, reason)| (id.to_string(), reason.to_string()))
    .collect();
    assert_eq!(reasons, expected);
    let open: Vec<String> = marks(&plots(&html)[2], "span")
        .iter()
        .filter(|m| m.contains_key("data-open"))
        .map(|m| {
            format!(
                "{}:{}",
                attribute(m, "data-device"),
                attribute(m, "data-candidate")
            )
        })
        .collect();
    assert_eq!(
        open,
        ["1:9"],
        "the step still running when the journal ends"
    );
}

/// The killed run's journal (its whole lines) resumed 100 s after the death: the verification
/// the death interrupted is taken up again, max_time is reached and the evaluations in flight
/// cancelled after their grace, and the run ends.
fn resumed_run_journal() -> Vec<Value> {
    let (mut records, _) = killed_run_journal();
    let death =
        records.iter().map(millis).fold(0.0, f64::max) / 1000.0 - millis(&records[0]) / 1000.0;
    let mut clock = death + 100.0;
    records.push(record(
        clock,
        "run_resumed",
        json!({"previous_end": "killed", "gap_s": 100.0, "in_flight": [9],
               "pending_requests": ["r1-2", "r1-3"], "recovered": ["r1-2"],
               "orphans_ended": 1, "torn_line": true}),
    ));
    clock += 0.5;
    step(&mut records, &mut clock, 9, 2, 1, "verify");
    step(&mut records, &mut clock, 10, 2, 0, "verify");
    for cancelled in [false, true] {
        records.push(record(
            clock,
            "limit_reached",
            json!({"limit": "max_time", "reason": "max_time (2m) reached",
                   "evaluations_cancelled": cancelled}),
        ));
        clock += 0.5;
    }
    records.push(record(
        clock,
        "run_finished",
        json!({"outcome": "completed", "reason": "max_time (2m) reached", "best_candidate": 1,
               "best_ms": 5.0, "initial_ms": 8.0}),
    ));
    records
}

#[test]
fn a_resumed_runs_report_shows_the_resume_and_leaves_the_time_no_process_ran_out() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("beam_search-20261202T100000Z");
    std::fs::create_dir_all(&run).unwrap();
    let records = resumed_run_journal();
    let text: String = records.iter().map(|r| format!("{r}\n")).collect();
    std::fs::write(run.join("journal.jsonl"), text).unwrap();

    let output = report(dir.path(), &[run.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let html = read(&run.join("report.html"));
    check_plots_against_journal(&records, &html);
    // Issue 22: the "down" legend, only where a run was resumed.
    assert!(html.contains("down (killed, not yet resumed)"));
    let spans = marks(&plots(&html)[2], "span");
    assert!(
        spans.iter().all(|m| !m.contains_key("data-open")),
        "the step the death interrupted ends with the dead process"
    );
    let [(from, to)] = down_stretches(&records)[..] else {
        panic!("one resume")
    };
    let markdown = read(&run.join("report.md"));
    let wall = (records.iter().map(millis).fold(0.0, f64::max) - millis(&records[0])) / 1000.0;
    assert!(
        markdown.contains(&format!(
            "wall time {:.1} s, not counting {:.1} s between a death and its resume (1 resume(s))",
            wall - (to - from),
            to - from
        )),
        "{markdown}"
    );
    assert!(markdown.contains("## Resumes"), "{markdown}");
    assert!(
        markdown.contains(&format!(
            "| {to:.1} | killed | {:.1} | 1 | 2 | 1 | 1 | cut off | – |",
            to - from
        )),
        "{markdown}"
    );
    assert_eq!(
        markdown.matches("Limit reached").count(),
        1,
        "one line for the limit, reached then its evaluations cancelled: {markdown}"
    );
    assert!(
        markdown.contains("**max_time** (max_time (2m) reached); the evaluations still in flight after their grace were cancelled."),
        "{markdown}"
    );
}

#[test]
fn a_folder_without_a_kactors_journal_exits_2_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-run");
    let output = report(dir.path(), &[missing.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("is not a run directory"),
        "{}",
        stderr(&output)
    );

    let other = dir.path().join("other");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join("journal.jsonl"), "{\"event\": \"login\"}\n{}\n").unwrap();
    let output = report(dir.path(), &[other.to_str().unwrap(), "--json"]);
    assert_eq!(output.status.code(), Some(2));
    let error: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(error["type"], "error");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("line 1 of the journal is not a kactors record"),
        "{error}"
    );
    let names: Vec<String> = std::fs::read_dir(&other)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["journal.jsonl"]);
}

#[test]
fn a_report_that_cannot_be_written_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let (run, _) = killed_run(dir.path());
    let blocked = dir.path().join("a-file");
    std::fs::write(&blocked, "").unwrap();
    let output = report(
        dir.path(),
        &[run.to_str().unwrap(), "--out", blocked.to_str().unwrap()],
    );
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("failed to write the report into"),
        "{}",
        stderr(&output)
    );
}

/// What a screenshot holds: its distinct colours, the share of its pixels that are not white,
/// and the share that are coloured (not grey: the plots' lines, points and spans, not text).
fn colours_ink_and_colour(png: &Path) -> (usize, f64, f64) {
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(png).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut pixels = vec![0; reader.output_buffer_size().unwrap()];
    let frame = reader.next_frame(&mut pixels).unwrap();
    let channels = frame.color_type.samples();
    let pixels = &pixels[..frame.buffer_size()];
    let mut colours = BTreeSet::new();
    let (mut ink, mut coloured) = (0, 0);
    for pixel in pixels.chunks(channels) {
        let rgb = &pixel[..3.min(channels)];
        colours.insert(rgb.to_vec());
        if rgb.iter().any(|&value| value < 240) {
            ink += 1;
        }
        let (low, high) = (rgb.iter().min().unwrap(), rgb.iter().max().unwrap());
        if high - low > 60 {
            coloured += 1;
        }
    }
    let count = (pixels.len() / channels) as f64;
    (colours.len(), ink as f64 / count, coloured as f64 / count)
}

/// Headless chromium on `page` with `what` (a screenshot, the DOM), bounded so that a browser
/// that hangs fails the test rather than the CI run.
fn chromium(profile: &Path, what: &str, page: &Path) -> Output {
    Command::new("timeout")
        .args([
            "120",
            "chromium",
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--window-size=1200,900",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(what)
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("Debian's chromium is installed (apt-get install -y chromium)")
}

/// Issue 22: report.html of a dry run as the browser builds it holds the lineage (a node per
/// candidate, an edge to each one's parent) and the best kernel's source, coloured without a
/// script.
#[test]
#[ignore = "needs Debian's chromium; .ci/run installs it and runs this"]
fn report_html_shows_the_lineage_and_the_best_source_in_headless_chromium() {
    let dir = tempfile::tempdir().unwrap();
    let run = dry_run(dir.path());
    let profile = tempfile::tempdir().unwrap();
    let page = std::path::absolute(run.join("report.html")).unwrap();
    let output = chromium(profile.path(), "--dump-dom", &page);
    let dom = String::from_utf8_lossy(&output.stdout);
    let nodes = dom.matches("class=\"lineage-node\"").count();
    let edges = dom.matches("class=\"lineage-edge\"").count();
    assert!(
        nodes >= 4 && edges >= 3,
        "{nodes} lineage nodes, {edges} edges: {}",
        stderr(&output)
    );
    let source = dom
        .split("<pre class=\"source\">")
        .nth(1)
        .and_then(|rest| rest.split("</pre>").next())
        .expect("the best kernel's source block");
    assert!(
        source.contains("kernel_function") && source.contains("<span class="),
        "the source block, uncoloured: {source}"
    );
    assert!(!dom.contains("<script"), "a script in the page");
}

#[test]
#[ignore = "needs Debian's chromium; .ci/run installs it and runs ignored tests"]
fn report_html_shows_its_plots_in_headless_chromium() {
    let dir = tempfile::tempdir().unwrap();
    let (run, _) = killed_run(dir.path());
    let output = report(dir.path(), &[run.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let profile = tempfile::tempdir().unwrap();
    let screenshot = dir.path().join("report.png");
    let page = std::path::absolute(run.join("report.live.html")).unwrap();
    let output = chromium(
        profile.path(),
        &format!("--screenshot={}", screenshot.display()),
        &page,
    );
    assert!(screenshot.is_file(), "no screenshot: {}", stderr(&output));
    let (colours, ink, coloured) = colours_ink_and_colour(&screenshot);
    assert!(colours >= 16, "{colours} distinct colours: a blank page");
    assert!(ink > 0.02, "{:.1}% of the pixels not white", ink * 100.0);
    assert!(
        coloured > 0.001,
        "{:.2}% of the pixels coloured: no plot shows",
        coloured * 100.0
    );
}
