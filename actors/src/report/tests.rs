use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, SystemTime};

use super::*;
use crate::journal::CandidateKind;

fn record(event: Event) -> JournalRecord {
    JournalRecord {
        t: SystemTime::UNIX_EPOCH,
        event,
    }
}

fn finished(candidate: u64, ms: f64) -> Event {
    Event::CandidateFinished {
        candidate: CandidateId(candidate),
        parent: None,
        round: 1,
        device: DeviceId(0),
        passed: true,
        time_ms: Some(ms),
        reason: None,
        simulated: false,
        duplicate_of: None,
    }
}

fn profiled(candidate: u64, ms: f64) -> Event {
    Event::ProfileRecorded {
        candidate: CandidateId(candidate),
        device: DeviceId(0),
        bottleneck: "memory".into(),
        duration_ms: Some(ms),
        analysis: String::new(),
        at_roofline: false,
        details: None,
    }
}

#[test]
fn an_event_time_more_than_ten_percent_from_the_profilers_is_flagged() {
    let mut summary = RunSummary::default();
    for event in [
        finished(1, 1.05),
        profiled(1, 1.00),
        finished(2, 1.25),
        profiled(2, 1.00),
    ] {
        summary.observe(&record(event));
    }
    let report = summary.render_markdown();
    assert!(
        report.contains("| 1 | 1.0500 | 1.0000 | 5.0% | ok |"),
        "{report}"
    );
    assert!(
        report.contains("| 2 | 1.2500 | 1.0000 | 25.0% | **flagged: more than 10% apart** |"),
        "{report}"
    );
}

#[test]
fn the_report_names_the_candidates_that_tampered_not_those_that_were_wrong() {
    let failed = |candidate: u64, reason: &str| Event::CandidateFinished {
        candidate: CandidateId(candidate),
        parent: Some(CandidateId::INITIAL),
        round: 1,
        device: DeviceId(0),
        passed: false,
        time_ms: None,
        reason: Some(reason.into()),
        simulated: false,
        duplicate_of: None,
    };
    let mut summary = RunSummary::default();
    for event in [
        failed(
            2,
            "verification failed: 2048 of 2048 output elements exceed atol=0.01",
        ),
        failed(
            3,
            "verification failed: tampered with the evaluator's state: torch.allclose was replaced",
        ),
        failed(
            5,
            "timing failed: evaluator rejected the request: tampered with the evaluator's state: it left Python threads running: Thread-1",
        ),
    ] {
        summary.observe(&record(event));
    }
    let report = summary.render_markdown();
    assert!(
        report.contains(
            "Tampered with the evaluator's state (rejected; the evaluator restarted): candidates 3, 5."
        ),
        "{report}"
    );
}

#[test]
fn the_disk_section_says_what_the_run_directory_holds_and_what_was_removed() {
    let mut summary = RunSummary::default();
    assert!(
        summary
            .render_markdown()
            .contains("## Disk\n\nThe run directory has not been measured yet. The caches of 0 candidate(s) that could no longer become parents were removed as the run went: 0 B (0 bytes).\n"),
    );
    for event in [
        Event::CachesRemoved {
            candidate: CandidateId(3),
            paths: vec!["candidates/3/triton-cache".into()],
            bytes: 1_200_000,
        },
        Event::CachesRemoved {
            candidate: CandidateId(5),
            paths: vec!["candidates/5/profile/ncu/ncu-report.csv".into()],
            bytes: 34_567,
        },
        Event::RunDirMeasured { bytes: 512 },
        Event::RunDirMeasured {
            bytes: 3_104_000_000,
        },
    ] {
        summary.observe(&record(event));
    }
    let report = summary.render_markdown();
    assert!(
        report.contains("## Disk\n\nThe run directory holds 3.10 GB (3104000000 bytes, measured 0.0 s after the start). The caches of 2 candidate(s) that could no longer become parents were removed as the run went: 1.23 MB (1234567 bytes).\n"),
        "{report}"
    );
}

/// Issue 14: the report says which devices were lost, when and why.
#[test]
fn the_report_names_the_devices_lost_with_their_nodes_and_when() {
    let (started, mut summary) = two_devices_of_n2();
    summary.observe(&record(started));
    summary.observe(&at_12_5_s(Event::DevicesLost {
        devices: vec![DeviceId(0), DeviceId(1)],
        reason: "the agent of node n2 stopped answering".into(),
    }));
    let report = summary.render_markdown();
    assert!(
        report.contains(
            "- 0 (NVIDIA H200 on n2:0), 1 (NVIDIA H200 on n2:1) at 1970-01-01T00:00:12.500Z (12.5 s into the run): the agent of node n2 stopped answering"
        ),
        "{report}"
    );
}

/// Issue 14: the report says which node's agent was started again, when, and after what.
#[test]
fn the_report_names_each_agent_restart_with_its_node_and_when() {
    let (started, mut summary) = two_devices_of_n2();
    summary.observe(&record(started));
    let devices = vec![DeviceId(0), DeviceId(1)];
    summary.observe(&record(Event::AgentRestarting {
        node: "n2".into(),
        devices: devices.clone(),
        reason: "the agent of node n2 ended".into(),
    }));
    summary.observe(&at_12_5_s(Event::AgentRestarted {
        node: "n2".into(),
        devices,
        restarts: 1,
        step: "7.4".into(),
    }));
    let report = summary.render_markdown();
    assert!(
        report.contains("## Agent restarts")
            && report.contains(
                "- node n2 (0 (NVIDIA H200 on n2:0), 1 (NVIDIA H200 on n2:1)) serving again at 1970-01-01T00:00:12.500Z (12.5 s into the run), restart 1, step 7.4, after: the agent of node n2 ended"
            ),
        "{report}"
    );
    assert!(!report.contains("## Devices lost"), "{report}");
}

fn at_12_5_s(event: Event) -> JournalRecord {
    JournalRecord {
        t: SystemTime::UNIX_EPOCH + std::time::Duration::from_millis(12_500),
        event,
    }
}

/// A run on two devices of node n2, and a summary to observe it.
fn two_devices_of_n2() -> (Event, RunSummary) {
    let device = |id: u32, index: u32| crate::journal::DeviceDescription {
        device: DeviceId(id),
        name: "NVIDIA H200".into(),
        uuid: None,
        node: Some("n2".into()),
        index: Some(index),
        step: Some("7.1".into()),
    };
    let started = Event::RunStarted {
        strategy: "nvidia".into(),
        platform: "nvidia".into(),
        simulated: false,
        search: "beam_search".into(),
        num_top_kernels: 1,
        num_bottlenecks: 2,
        max_rounds: 1,
        devices: vec![device(0, 0), device(1, 1)],
        initial_source: String::new(),
        sandbox: None,
    };
    (started, RunSummary::default())
}

/// Issue 18: a device with no row in data/gpu_specs.yaml has no speed of light: the report
/// says why, and no time is checked against a floor or reported as a share of one.
#[test]
fn a_device_without_a_bandwidth_row_has_no_floor_and_the_report_says_so() {
    let mut summary = RunSummary::default();
    summary.observe(&record(Event::EvaluatorStarted {
        device: DeviceId(0),
        ready: serde_json::json!({"atol": 0.01, "rtol": 0.01, "rel_l2": 0.01}),
        floor: Some(crate::speed_of_light::floor_of(
            &crate::speed_of_light::ProblemBytes {
                inputs_bytes: 1 << 30,
                outputs_bytes: 0,
                l2_bytes: 0,
                declared_min_bytes: None,
            },
            None,
        )),
    }));
    let report = summary.render_markdown();
    assert!(
        report.contains(
            "No speed of light: the device has no row in data/gpu_specs.yaml, so its peak memory bandwidth is unknown. No time was checked against a floor."
        ),
        "{report}"
    );
    assert!(
        report.contains("||a - e|| / ||e|| <= 0.01 over each output"),
        "{report}"
    );
}

/// Issue 18: a run whose problem declares MIN_BYTES says it uses the smaller floor, and a
/// profiled call that read far less than it is flagged.
#[test]
fn a_declared_floor_is_named_and_a_profile_that_read_too_little_is_flagged() {
    use crate::profile::{Bottleneck, KernelProfile, Roofline};
    let floor = crate::speed_of_light::floor_of(
        &crate::speed_of_light::ProblemBytes {
            inputs_bytes: 4 << 30,
            outputs_bytes: 4096,
            l2_bytes: 0,
            declared_min_bytes: Some(1 << 30),
        },
        Some(("NVIDIA H200", 4800.0)),
    );
    let mut summary = RunSummary::default();
    summary.observe(&record(Event::EvaluatorStarted {
        device: DeviceId(0),
        ready: serde_json::json!({}),
        floor: Some(floor),
    }));
    summary.observe(&record(Event::ProfileRecorded {
        candidate: CandidateId(3),
        device: DeviceId(0),
        bottleneck: "memory".into(),
        duration_ms: Some(0.01),
        analysis: String::new(),
        at_roofline: false,
        details: Some(KernelProfile {
            vendor: crate::model::Vendor::Nvidia,
            kernels: vec!["memo".into()],
            duration_ms: 0.01,
            roofline: Roofline {
                bottleneck: Bottleneck::Memory,
                memory_sol_pct: 1.0,
                compute_sol_pct: None,
                efficiency_pct: 1.0,
                at_roofline: false,
            },
            counters: Default::default(),
            metrics: [("dram__bytes_read.sum".to_string(), 16_384.0)].into(),
            instruction_mix: None,
        }),
    }));
    let report = summary.render_markdown();
    assert!(
        report.contains("moving the 1.0 GiB problem.py declares as MIN_BYTES"),
        "{report}"
    );
    assert!(
        report.contains("**Flagged:** candidate 3's profiled call read 16.0 KiB from memory, but problem.py's MIN_BYTES is 1.0 GiB"),
        "{report}"
    );
}

/// Issue 22: report.html leads with the answer: the best kernel's speedups over the initial
/// kernel, PyTorch eager and torch.compile, its share of the speed of light, and its source,
/// coloured by CSS alone, before any plot.
#[test]
fn report_html_leads_with_the_best_kernel_its_speedups_and_its_source() {
    let best_source = "import triton\n\ndef kernel_function(a):  # faster\n    return a * 2\n";
    let mut summary = RunSummary::default();
    for event in [
        Event::RunStarted {
            strategy: "noop".into(),
            platform: "noop".into(),
            simulated: false,
            search: "beam_search".into(),
            num_top_kernels: 1,
            num_bottlenecks: 1,
            max_rounds: 1,
            devices: Vec::new(),
            initial_source: "def kernel_function(a):\n    return a + a\n".into(),
            sandbox: None,
        },
        finished(0, 2.0),
        Event::ProposalReceived {
            candidate: CandidateId(3),
            parent: CandidateId::INITIAL,
            round: 1,
            device: DeviceId(0),
            request_id: "r3".into(),
            attempt: 0,
            outcome: crate::journal::ReplyOutcome::Code,
            truncated: false,
            usage: None,
            cost_usd: None,
            error: None,
            code: Some(best_source.into()),
            reply: None,
            latency_s: None,
        },
        finished(3, 0.5),
        Event::ReferenceTimed {
            device: DeviceId(0),
            which: Reference::Eager,
            time_ms: Some(1.0),
            provenance: None,
            error: None,
        },
        Event::ReferenceTimed {
            device: DeviceId(0),
            which: Reference::Compile,
            time_ms: Some(0.8),
            provenance: None,
            error: None,
        },
    ] {
        summary.observe(&record(event));
    }
    let html = summary.render().html;
    let answer = html.find("<section class=\"answer\">").expect("an answer");
    assert!(
        answer < html.find("<figure>").unwrap(),
        "the answer comes first"
    );
    let answer = &html[answer..html[answer..].find("</section>").unwrap() + answer];
    for part in [
        "Candidate 3: 0.5000 ms (as the search timed it)",
        "<b>4.00×</b> the initial kernel",
        "<b>2.00×</b> PyTorch eager",
        "<b>1.60×</b> torch.compile",
        "of the speed of light",
        "<pre class=\"source\"><code><span class=\"kw\">import</span> triton",
        "<span class=\"com\"># faster</span>",
    ] {
        assert!(answer.contains(part), "{part} in {answer}");
    }
    assert!(
        !answer.contains("a + a"),
        "the initial kernel's source is not the answer"
    );
    assert!(!html.contains("<script"), "no script");
}

/// Issue 22: the lineage names each candidate's parent and the bottleneck it addressed, and a
/// tree of 200 candidates fits on one screen.
#[test]
fn the_lineage_of_200_candidates_fits_on_one_screen_and_names_the_bottleneck_addressed() {
    let mut summary = RunSummary::default();
    summary.observe(&record(finished(0, 10.0)));
    summary.observe(&record(Event::AnalysisReceived {
        candidate: CandidateId::INITIAL,
        round: 1,
        request_id: "a0".into(),
        requested: 2,
        returned: 2,
        bottlenecks: ["uncoalesced loads", "low occupancy"]
            .map(|title| crate::analysis::AnalyzedBottleneck {
                title: title.into(),
                causes: Vec::new(),
                fixes: Vec::new(),
            })
            .to_vec(),
        outcome: crate::journal::ReplyOutcome::Answered,
        usage: None,
        cost_usd: None,
        error: None,
        reply: None,
    }));
    for id in 1..=200_u64 {
        summary.observe(&record(Event::CandidatePlanned {
            candidate: CandidateId(id),
            parent: CandidateId::INITIAL,
            round: 1,
            proposal_index: (id % 2) as u32,
            device: DeviceId(0),
            kind: CandidateKind::Proposal,
            model: None,
        }));
        let mut done = finished(id, 5.0 + id as f64 / 100.0);
        if let Event::CandidateFinished { parent, .. } = &mut done {
            *parent = Some(CandidateId::INITIAL);
        }
        summary.observe(&record(done));
    }
    let svg = super::lineage::lineage(&summary);
    let height: f64 = svg
        .split("height=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap()
        .parse()
        .unwrap();
    assert!(height <= 700.0, "{height}");
    assert_eq!(svg.matches("class=\"lineage-node\"").count(), 201);
    assert_eq!(svg.matches("class=\"lineage-edge\"").count(), 200);
    assert!(
        svg.contains(
            "<title>candidate 2 from 0 (round 1), addressing uncoalesced loads: 5.0200 ms</title>"
        ),
        "{svg}"
    );
    assert!(svg.contains("addressing low occupancy: 5.0100 ms"));
}

/// A step's `step_started`, or its `step_finished` with nothing but its place.
pub(super) fn step_event(
    candidate: CandidateId,
    parent: Option<CandidateId>,
    round: u32,
    device: DeviceId,
    step: Step,
    finished: bool,
) -> Event {
    if finished {
        Event::StepFinished {
            candidate,
            parent,
            round,
            device,
            step,
            provenance: None,
            verdict: None,
            time_ms: None,
            error: None,
        }
    } else {
        Event::StepStarted {
            candidate,
            parent,
            round,
            device,
            step,
        }
    }
}

/// One plot of a rendered page, by its class (`plot candidates`, `plot devices`, …).
fn plot<'a>(html: &'a str, class: &str) -> &'a str {
    let start = html
        .find(&format!("<svg class=\"{class}\""))
        .unwrap_or_else(|| panic!("no {class} in the page"));
    let end = start + html[start..].find("</svg>").expect("the plot ends") + "</svg>".len();
    &html[start..end]
}

/// Each element of the class in an SVG, as its attributes.
fn marks_of(svg: &str, class: &str) -> Vec<BTreeMap<String, String>> {
    let document = roxmltree::Document::parse(svg).expect("the plot is well-formed SVG");
    document
        .descendants()
        .filter(|node| node.attribute("class") == Some(class))
        .map(|node| {
            node.attributes()
                .map(|a| (a.name().to_string(), a.value().to_string()))
                .collect()
        })
        .collect()
}

fn number(mark: &BTreeMap<String, String>, name: &str) -> f64 {
    mark[name]
        .parse()
        .unwrap_or_else(|_| panic!("{name} of {mark:?}"))
}

/// Issue 24: report.html stays usable at 100,000 candidates. Past the marks limit the
/// candidates plot counts them in cells, each candidate once, by fate and reason, and only the
/// beam and each new best keep a mark; each device's row becomes columns whose shares cover
/// its wall time; the lineage draws the survivors' ancestry. The page stays small.
#[test]
fn past_the_marks_limit_report_html_counts_every_candidate_in_a_page_that_stays_small() {
    const CANDIDATES: u64 = 12_000;
    let start = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let at = |ms: u64, event: Event| JournalRecord {
        t: start + Duration::from_millis(ms),
        event,
    };
    let mut summary = RunSummary::default();
    summary.observe(&at(
        0,
        Event::RunStarted {
            strategy: "noop".into(),
            platform: "noop".into(),
            simulated: true,
            search: "beam_search".into(),
            num_top_kernels: 4,
            num_bottlenecks: 5,
            max_rounds: 600,
            devices: Vec::new(),
            initial_source: "def kernel_function(a):\n    return a\n".into(),
            sandbox: None,
        },
    ));
    let (mut verified, mut duplicates) = (0, 0);
    for id in 0..CANDIDATES {
        let (round, device) = ((id / 20) as u32, DeviceId((id % 4) as u32));
        let parent = (id > 0).then(|| CandidateId(id.saturating_sub(20) / 20 * 20));
        let t = 10 * id;
        for (offset, step) in [(0, Step::Verify), (4, Step::Time)] {
            let step_of =
                |finished| step_event(CandidateId(id), parent, round, device, step, finished);
            summary.observe(&at(t + offset, step_of(false)));
            summary.observe(&at(t + offset + 3, step_of(true)));
        }
        let duplicate = id % 7 == 3;
        let time_ms = 1.0 + ((id * 7919) % 1000) as f64 / 100.0 - id as f64 / CANDIDATES as f64;
        summary.observe(&at(
            t + 8,
            Event::CandidateFinished {
                candidate: CandidateId(id),
                parent,
                round,
                device,
                passed: !duplicate,
                time_ms: (!duplicate).then_some(time_ms),
                reason: duplicate.then(|| "identical to an earlier candidate".into()),
                simulated: true,
                duplicate_of: duplicate.then_some(CandidateId(0)),
            },
        ));
        if duplicate {
            duplicates += 1;
        } else {
            verified += 1;
        }
    }
    let beam: Vec<u64> = vec![11_982, 11_960, 11_940, 11_981];
    summary.observe(&at(
        10 * CANDIDATES,
        Event::BeamUpdated {
            round: 599,
            beam: beam
                .iter()
                .map(|&id| crate::journal::BeamMember {
                    candidate: CandidateId(id),
                    time_ms: 0.5,
                })
                .collect(),
        },
    ));
    let html = summary.render().html;
    assert!(
        html.len() < 2_000_000,
        "report.html is {} bytes for {CANDIDATES} candidates",
        html.len()
    );

    let candidates = plot(&html, "plot candidates");
    let cells = marks_of(candidates, "candidate-cell");
    let counted = |fate: &str| -> f64 {
        cells
            .iter()
            .filter(|cell| cell["data-fate"] == fate)
            .map(|cell| number(cell, "data-count"))
            .sum()
    };
    assert_eq!(
        counted("verified"),
        f64::from(verified),
        "every verified one counted once"
    );
    assert_eq!(
        counted("failed"),
        f64::from(duplicates),
        "every failure counted once"
    );
    assert!(
        cells
            .iter()
            .filter(|cell| cell["data-fate"] == "failed")
            .all(|cell| cell["data-reason"] == "duplicate"),
        "failures counted by their reason"
    );
    let alone = marks_of(candidates, "candidate");
    assert!(alone.len() < 200, "{} candidates drawn alone", alone.len());
    let ringed: BTreeSet<String> = marks_of(candidates, "beam")
        .iter()
        .map(|mark| mark["data-candidate"].clone())
        .collect();
    let beam_ids: BTreeSet<String> = beam.iter().map(u64::to_string).collect();
    assert_eq!(ringed, beam_ids, "the beam still ringed");

    let devices = plot(&html, "plot devices");
    let shares = marks_of(devices, "span-share");
    let wall = summary.end_seconds();
    for device in 0..4 {
        let covered: f64 = shares
            .iter()
            .filter(|share| share["data-device"] == device.to_string())
            .map(|share| number(share, "data-seconds"))
            .sum();
        assert!(
            (covered - wall).abs() < 0.01 * wall,
            "device {device}: its shares cover {covered} s of {wall} s"
        );
    }
    assert!(
        marks_of(devices, "span").is_empty(),
        "no span drawn one by one"
    );

    let lineage = plot(&html, "plot lineage");
    let nodes = marks_of(lineage, "lineage-node");
    assert!(!nodes.is_empty() && nodes.len() <= super::plots::MARKS_LIMIT);
    let best = summary.best().map(|(id, _)| id.to_string());
    assert!(
        nodes
            .iter()
            .any(|node| Some(&node["data-candidate"]) == best.as_ref()),
        "the best is in the lineage"
    );
}
