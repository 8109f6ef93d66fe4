//! The live view on a terminal: indicatif's bars on stderr, one line per device (what it runs,
//! for how long) and two summary lines (candidates, the best time and its speedups; the LLM
//! requests in flight, dollars spent, time left to a deadline or why the run is ending), with
//! notable events as lines above them. Everything else that writes to that terminal while the
//! bars are up (tracing's stderr layer; with `--json`, the JSON lines when stdout is a terminal
//! too) goes through the bars' suspend, so that no line tears them.
//!
//! A terminal that goes away (a dropped ssh session) turns the bars off at the first failed
//! write: indicatif unwraps its own write errors in places, so the terminal it draws on never
//! reports one; the failure is noted once in kactors.log, and the run goes on.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::{self, IsTerminal, Write};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use actors::journal::{Event, JournalRecord};
use actors::model::DeviceId;
use actors::ports::ProgressSink;
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle, TermLike};

use super::board::{Board, Changed, short_duration, time_left};
use super::{JsonProgress, PlainProgress, note_dropped, plain_line};

/// Device lines beyond these are counted in one line: a terminal has only so many rows.
const MOST_DEVICE_LINES: usize = 16;
/// How often the "for how long" of each device line and the time left are redrawn.
const DEVICE_TICK: Duration = Duration::from_millis(100);
const COUNTDOWN_TICK: Duration = Duration::from_millis(500);
/// At most this many redraws a second, however busy the run.
const REDRAWS_PER_SECOND: u8 = 20;

/// What the process knows about where its output goes.
#[derive(Clone, Debug, Default)]
pub struct TerminalFacts {
    pub stderr_is_terminal: bool,
    pub stdout_is_terminal: bool,
    /// `TERM`.
    pub term: Option<OsString>,
    /// `NO_COLOR`.
    pub no_color: Option<OsString>,
}

/// Whether the bars are drawn in colour (and bold and dim) or in the terminal's plain text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Styling {
    Colour,
    Plain,
}

impl TerminalFacts {
    pub fn of_process() -> Self {
        TerminalFacts {
            stderr_is_terminal: io::stderr().is_terminal(),
            stdout_is_terminal: io::stdout().is_terminal(),
            term: std::env::var_os("TERM"),
            no_color: std::env::var_os("NO_COLOR"),
        }
    }

    /// Bars need a terminal on stderr that can move its cursor: not a pipe or a file, and not
    /// `TERM=dumb` or no `TERM` at all (an editor's shell, a CI log), as indicatif itself judges.
    /// `NO_COLOR` set to anything but the empty string takes colour and styling away.
    pub fn bars(&self) -> Option<Styling> {
        let cursor_moves = self
            .term
            .as_ref()
            .is_some_and(|term| !term.is_empty() && term != "dumb");
        if !self.stderr_is_terminal || !cursor_moves {
            return None;
        }
        Some(match &self.no_color {
            Some(value) if !value.is_empty() => Styling::Plain,
            _ => Styling::Colour,
        })
    }
}

/// How a run shows its progress: plain lines (or JSON alone), or the live view.
pub enum ProgressView {
    Lines,
    Bars(LiveView),
}

impl ProgressView {
    pub fn for_terminal(facts: &TerminalFacts) -> Self {
        match facts.bars() {
            None => ProgressView::Lines,
            Some(styling) => {
                ProgressView::Bars(LiveView::on_stderr(styling, facts.stdout_is_terminal))
            }
        }
    }

    /// Where tracing's stderr layer writes: through the bars when they are up.
    pub fn log_writer(&self) -> LogWriter {
        LogWriter {
            bars: match self {
                ProgressView::Lines => None,
                ProgressView::Bars(view) => Some(view.bars.clone()),
            },
        }
    }

    /// The sink the Collector feeds: with `json`, JSON lines on stdout, each naming `strategy`
    /// (and the bars, if any, on stderr); otherwise the bars or plain lines. `deadline` is when a time limit ends the
    /// run: the bars count down to it. `total`: the candidates the run makes at most (the
    /// bars count "n of total").
    pub fn sink(
        &self,
        json: bool,
        deadline: Option<SystemTime>,
        total: u64,
        strategy: &str,
    ) -> Box<dyn ProgressSink> {
        match (self, json) {
            (ProgressView::Lines, true) => Box::new(JsonProgress::new(strategy)),
            (ProgressView::Lines, false) => Box::new(PlainProgress::new()),
            (ProgressView::Bars(view), json) => Box::new(LiveProgress::new(
                view.clone(),
                json.then(|| JsonProgress::new(strategy)),
                deadline,
                Some(total),
            )),
        }
    }

    /// Takes the bars off the terminal for good, before the run's last line.
    pub fn close(&self) {
        if let ProgressView::Bars(view) = self {
            let _ = view.bars.clear();
            view.bars.set_draw_target(ProgressDrawTarget::hidden());
        }
    }
}

/// The bars and the terminal they are drawn on.
#[derive(Clone)]
pub struct LiveView {
    bars: MultiProgress,
    terminal: Arc<TerminalFailure>,
    styling: Styling,
    /// Whether JSON lines on stdout would land on a terminal too (likely the same one).
    stdout_is_terminal: bool,
}

impl LiveView {
    fn on_stderr(styling: Styling, stdout_is_terminal: bool) -> Self {
        // indicatif asks `console` whether to colour, about stdout for a draw target of our own
        // (the terminal we watch): it is told outright, as the terminal's facts decided.
        let colour = styling == Styling::Colour;
        ::console::set_colors_enabled(colour);
        ::console::set_colors_enabled_stderr(colour);
        LiveView::drawn_on(
            ::console::Term::buffered_stderr(),
            styling,
            stdout_is_terminal,
        )
    }

    fn drawn_on(term: impl TermLike + 'static, styling: Styling, stdout_is_terminal: bool) -> Self {
        let terminal = Arc::new(TerminalFailure::default());
        let watched = WatchedTerminal {
            term,
            failure: terminal.clone(),
        };
        LiveView {
            bars: MultiProgress::with_draw_target(ProgressDrawTarget::term_like_with_hz(
                Box::new(watched),
                REDRAWS_PER_SECOND,
            )),
            terminal,
            styling,
            stdout_is_terminal,
        }
    }
}

/// The first write to the terminal that failed, if one did.
#[derive(Debug, Default)]
struct TerminalFailure(OnceLock<String>);

/// The terminal the bars are drawn on. The first failed write turns it off: after a hang-up
/// every later write would fail too. It reports no error to indicatif, which would panic in its
/// suspend, and logs nothing itself: it runs under the bars' lock, which a log line through
/// the bars would take again.
#[derive(Debug)]
struct WatchedTerminal<T> {
    term: T,
    failure: Arc<TerminalFailure>,
}

impl<T: TermLike> WatchedTerminal<T> {
    fn attempt(&self, write: impl FnOnce(&T) -> io::Result<()>) -> io::Result<()> {
        if self.failure.0.get().is_none()
            && let Err(error) = write(&self.term)
        {
            let _ = self.failure.0.set(error.to_string());
        }
        Ok(())
    }
}

impl<T: TermLike> TermLike for WatchedTerminal<T> {
    fn width(&self) -> u16 {
        self.term.width()
    }

    fn height(&self) -> u16 {
        self.term.height()
    }

    fn move_cursor_up(&self, n: usize) -> io::Result<()> {
        self.attempt(|term| term.move_cursor_up(n))
    }

    fn move_cursor_down(&self, n: usize) -> io::Result<()> {
        self.attempt(|term| term.move_cursor_down(n))
    }

    fn move_cursor_right(&self, n: usize) -> io::Result<()> {
        self.attempt(|term| term.move_cursor_right(n))
    }

    fn move_cursor_left(&self, n: usize) -> io::Result<()> {
        self.attempt(|term| term.move_cursor_left(n))
    }

    fn write_line(&self, s: &str) -> io::Result<()> {
        self.attempt(|term| term.write_line(s))
    }

    fn write_str(&self, s: &str) -> io::Result<()> {
        self.attempt(|term| term.write_str(s))
    }

    fn clear_line(&self) -> io::Result<()> {
        self.attempt(|term| term.clear_line())
    }

    fn flush(&self) -> io::Result<()> {
        self.attempt(|term| term.flush())
    }
}

thread_local! {
    /// Set while this thread writes with the bars suspended: the bars' lock is held then.
    static SUSPENDED: Cell<bool> = const { Cell::new(false) };
}

/// Runs `write` with the bars out of the way and draws them again after. From inside another
/// such write (the warning about a stdout that failed, say) it writes at once: the bars are
/// already out of the way, and their lock is not taken twice.
fn with_bars_suspended<R>(bars: &MultiProgress, write: impl FnOnce() -> R) -> R {
    if SUSPENDED.get() {
        return write();
    }
    bars.suspend(|| {
        SUSPENDED.set(true);
        let written = write();
        SUSPENDED.set(false);
        written
    })
}

/// tracing's stderr writer: each formatted event is written whole, with the bars suspended.
#[derive(Clone)]
pub struct LogWriter {
    bars: Option<MultiProgress>,
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogWriter {
    type Writer = LogWriter;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

impl Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let write = || io::stderr().lock().write_all(buf).map(|()| buf.len());
        match &self.bars {
            Some(bars) => with_bars_suspended(bars, write),
            None => write(),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        io::stderr().flush()
    }
}

/// The bars' look, in colour or plain.
struct Styles {
    device: ProgressStyle,
    figures: ProgressStyle,
    llm: ProgressStyle,
    /// The LLM line while the run goes on: the time it has taken, and the time left to its
    /// deadline if it has one.
    running: ProgressStyle,
    others: ProgressStyle,
}

impl Styles {
    fn new(styling: Styling, deadline: Option<SystemTime>) -> Self {
        let template = |colour: &str, plain: &str| {
            ProgressStyle::with_template(match styling {
                Styling::Colour => colour,
                Styling::Plain => plain,
            })
            .expect("the live view's templates are valid indicatif templates")
        };
        let started = Instant::now();
        let for_how_long = |state: &indicatif::ProgressState, out: &mut dyn std::fmt::Write| {
            let _ = write!(out, "for {}", short_duration(state.elapsed()));
        };
        Styles {
            device: template("{msg:.cyan} {for:.dim}", "{msg} {for}").with_key("for", for_how_long),
            figures: template("{wide_msg:.bold}", "{wide_msg}"),
            llm: template("{wide_msg}", "{wide_msg}"),
            running: template("{msg}{elapsed:.dim}{left:.yellow}", "{msg}{elapsed}{left}")
                .with_key(
                    "elapsed",
                    move |_: &indicatif::ProgressState, out: &mut dyn std::fmt::Write| {
                        let _ = write!(out, " · {} elapsed", short_duration(started.elapsed()));
                    },
                )
                .with_key(
                    "left",
                    move |_: &indicatif::ProgressState, out: &mut dyn std::fmt::Write| {
                        if let Some(deadline) = deadline {
                            let _ = out.write_str(&time_left(deadline, SystemTime::now()));
                        }
                    },
                ),
            others: template("{wide_msg:.dim}", "{wide_msg}"),
        }
    }
}

/// The live view's sink: the board, folded from the records, drawn as bars.
pub struct LiveProgress {
    view: LiveView,
    styles: Styles,
    board: Board,
    figures: ProgressBar,
    llm: ProgressBar,
    devices: BTreeMap<DeviceId, ProgressBar>,
    others: Option<ProgressBar>,
    json: Option<JsonProgress>,
    /// The LLM line counts the time elapsed (and left): until a limit, a signal or a failure
    /// ends the run.
    counting_down: bool,
    failure_noted: bool,
}

impl LiveProgress {
    fn new(
        view: LiveView,
        json: Option<JsonProgress>,
        deadline: Option<SystemTime>,
        total: Option<u64>,
    ) -> Self {
        let styles = Styles::new(view.styling, deadline);
        let board = Board::of_at_most(total);
        let figures = add_bar(&view.bars, &styles.figures, board.figures_line());
        let llm = add_bar(&view.bars, &styles.running, board.llm_line());
        llm.enable_steady_tick(COUNTDOWN_TICK);
        LiveProgress {
            view,
            styles,
            board,
            figures,
            llm,
            devices: BTreeMap::new(),
            others: None,
            json,
            counting_down: true,
            failure_noted: false,
        }
    }

    fn add_device_bars(&mut self) {
        for bar in self.devices.values().chain(&self.others) {
            bar.finish_and_clear();
        }
        let devices: Vec<DeviceId> = self.board.devices().collect();
        self.devices = devices
            .iter()
            .take(MOST_DEVICE_LINES)
            .map(|device| {
                let bar = add_bar(
                    &self.view.bars,
                    &self.styles.device,
                    self.board.device_line(*device),
                );
                bar.enable_steady_tick(DEVICE_TICK);
                (*device, bar)
            })
            .collect();
        self.others = self
            .board
            .other_devices_line(MOST_DEVICE_LINES)
            .map(|line| add_bar(&self.view.bars, &self.styles.others, line));
    }

    fn show_device(&mut self, device: DeviceId) {
        match self.devices.get(&device) {
            Some(bar) => {
                bar.reset_elapsed();
                bar.set_message(self.board.device_line(device));
            }
            None => {
                if let (Some(bar), Some(line)) = (
                    &self.others,
                    self.board.other_devices_line(MOST_DEVICE_LINES),
                ) {
                    bar.set_message(line);
                }
            }
        }
    }

    fn show_figures(&mut self) {
        self.figures.set_message(self.board.figures_line());
        if self.counting_down && !self.board.counts_down() {
            self.counting_down = false;
            self.llm.disable_steady_tick();
            self.llm.set_style(self.styles.llm.clone());
        }
        self.llm.set_message(self.board.llm_line());
    }

    /// The run is over: its figures stay on the terminal as a line, the bars go.
    fn finish(&mut self) {
        for bar in self.devices.values().chain(&self.others) {
            bar.finish_and_clear();
        }
        self.figures.finish_and_clear();
        self.llm.finish_and_clear();
        let _ = self.view.bars.println(self.board.final_line());
    }

    /// Logged here, on the Collector's thread, never under the bars' lock.
    fn note_a_dead_terminal(&mut self) {
        if self.failure_noted {
            return;
        }
        if let Some(error) = self.view.terminal.0.get() {
            self.failure_noted = true;
            note_dropped("stderr", error);
        }
    }
}

fn add_bar(bars: &MultiProgress, style: &ProgressStyle, message: String) -> ProgressBar {
    let bar = bars.add(ProgressBar::hidden());
    bar.set_style(style.clone());
    bar.set_message(message);
    bar
}

impl ProgressSink for LiveProgress {
    fn record(&mut self, record: &JournalRecord) {
        let new_best = self.board.is_new_best(&record.event);
        match self.board.observe(&record.event) {
            Changed::Devices => self.add_device_bars(),
            Changed::Device(device) => self.show_device(device),
            Changed::Figures => self.show_figures(),
        }
        // A step's start is on its device's line; other events scroll above the bars.
        if !matches!(record.event, Event::StepStarted { .. })
            && let Some(line) = plain_line(&record.event)
        {
            let mark = if new_best { " ★ new best" } else { "" };
            let _ = self.view.bars.println(format!("{line}{mark}"));
        }
        if let Some(json) = &mut self.json {
            if self.view.stdout_is_terminal {
                with_bars_suspended(&self.view.bars, || json.record(record));
            } else {
                json.record(record);
            }
        }
        if matches!(record.event, Event::RunFinished { .. }) {
            self.finish();
        }
        self.note_a_dead_terminal();
    }

    fn seed(&mut self, records: &[JournalRecord]) {
        self.board.seed(records.iter().map(|record| &record.event));
        self.add_device_bars();
        self.show_figures();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use actors::journal::Step;

    use super::super::test_records::{record, run_started, step_started};
    use super::*;

    fn facts(
        stderr_is_terminal: bool,
        term: Option<&str>,
        no_color: Option<&str>,
    ) -> TerminalFacts {
        TerminalFacts {
            stderr_is_terminal,
            stdout_is_terminal: false,
            term: term.map(OsString::from),
            no_color: no_color.map(OsString::from),
        }
    }

    #[test]
    fn bars_need_a_terminal_on_stderr_that_moves_its_cursor_and_no_color_takes_colour_away() {
        let check = |facts: TerminalFacts, expected: Option<Styling>| {
            assert_eq!(facts.bars(), expected, "{facts:?}");
        };
        check(
            facts(true, Some("xterm-256color"), None),
            Some(Styling::Colour),
        );
        check(facts(false, Some("xterm-256color"), None), None);
        check(facts(true, Some("dumb"), None), None);
        check(facts(true, None, None), None);
        check(facts(true, Some("xterm"), Some("1")), Some(Styling::Plain));
        check(facts(true, Some("xterm"), Some("")), Some(Styling::Colour));
    }

    /// A terminal that keeps each text drawn on it, or fails every write like a hung-up one.
    #[derive(Clone, Debug, Default)]
    struct FakeTerminal {
        drawn: Arc<Mutex<Vec<String>>>,
        hung_up: bool,
    }

    impl FakeTerminal {
        fn write(&self, text: &str) -> io::Result<()> {
            if self.hung_up {
                return Err(io::Error::from_raw_os_error(nix::libc::EIO));
            }
            // The padding to the terminal's width is no text.
            if !text.trim().is_empty() {
                self.drawn.lock().unwrap().push(text.trim_end().to_string());
            }
            Ok(())
        }

        fn drawn(&self) -> Vec<String> {
            self.drawn.lock().unwrap().clone()
        }
    }

    impl TermLike for FakeTerminal {
        fn width(&self) -> u16 {
            200
        }
        fn move_cursor_up(&self, _: usize) -> io::Result<()> {
            self.write("")
        }
        fn move_cursor_down(&self, _: usize) -> io::Result<()> {
            self.write("")
        }
        fn move_cursor_right(&self, _: usize) -> io::Result<()> {
            self.write("")
        }
        fn move_cursor_left(&self, _: usize) -> io::Result<()> {
            self.write("")
        }
        fn write_line(&self, s: &str) -> io::Result<()> {
            self.write(s)
        }
        fn write_str(&self, s: &str) -> io::Result<()> {
            self.write(s)
        }
        fn clear_line(&self) -> io::Result<()> {
            self.write("")
        }
        fn flush(&self) -> io::Result<()> {
            self.write("")
        }
    }

    fn interrupted() -> Event {
        Event::Interrupted {
            signal: "SIGINT".into(),
        }
    }

    fn run_finished() -> Event {
        Event::RunFinished {
            outcome: actors::journal::RunOutcome::Interrupted,
            reason: "interrupted by SIGINT".into(),
            best_candidate: None,
            best_ms: None,
            initial_ms: None,
            resume: None,
        }
    }

    /// A device verifying a candidate when SIGINT comes.
    fn verifying_then_interrupted() -> Vec<Event> {
        vec![
            run_started(1),
            step_started(1, 0, Step::Verify),
            interrupted(),
        ]
    }

    /// The live view on `fake`, fed `events`.
    fn shown_on(
        fake: &FakeTerminal,
        deadline: Option<SystemTime>,
        events: impl IntoIterator<Item = Event>,
    ) -> LiveProgress {
        let view = LiveView::drawn_on(fake.clone(), Styling::Plain, false);
        let mut live = LiveProgress::new(view, None, deadline, None);
        for event in events {
            live.record(&record(event));
        }
        live
    }

    /// Issue 22: the line of a candidate that beat every one before it is marked.
    #[test]
    fn a_new_best_is_marked_on_its_line() {
        let verified = |candidate: u64, ms: f64| -> Event {
            serde_json::from_value(serde_json::json!({
                "type": "candidate_finished", "candidate": candidate, "parent": null,
                "round": 1, "device": 0, "passed": true, "time_ms": ms, "reason": null,
                "simulated": false, "duplicate_of": null,
            }))
            .unwrap()
        };
        let fake = FakeTerminal::default();
        shown_on(
            &fake,
            None,
            [
                run_started(1),
                verified(0, 2.0),
                verified(1, 1.0),
                verified(2, 1.5),
            ],
        );
        let drawn = fake.drawn();
        for (line, marked) in [
            ("[device 0] candidate 0: 2.0000 ms", false),
            ("[device 0] candidate 1: 1.0000 ms", true),
            ("[device 0] candidate 2: 1.5000 ms", false),
        ] {
            let expected = if marked {
                format!("{line} ★ new best")
            } else {
                line.to_string()
            };
            assert!(drawn.contains(&expected), "{expected}: {drawn:#?}");
        }
    }

    #[test]
    fn the_bars_show_each_device_and_the_events_above_them() {
        let fake = FakeTerminal::default();
        shown_on(&fake, None, verifying_then_interrupted());
        let drawn = fake.drawn();
        assert!(
            drawn
                .iter()
                .any(|text| text.starts_with("[device 0] verifying candidate 1 (round 1) for ")),
            "{drawn:#?}"
        );
        assert!(
            drawn
                .iter()
                .any(|text| text == "interrupted by SIGINT: stopping"),
            "{drawn:#?}"
        );
        assert!(
            drawn.iter().any(|text| text
                == "LLM: 0 request(s) in flight, $0.00 spent · interrupted by SIGINT: stopping"),
            "{drawn:#?}"
        );
        // Without a deadline the time elapsed is shown until the run ends, and no time left.
        assert!(
            drawn.iter().any(|text| text.starts_with("LLM: ")
                && text.ends_with("s elapsed")
                && !text.contains(" left")),
            "{drawn:#?}"
        );
    }

    #[test]
    fn with_a_deadline_the_summary_counts_down_until_a_limit_winds_the_run_down() {
        let fake = FakeTerminal::default();
        let deadline = SystemTime::now() + Duration::from_secs(2 * 3600 + 30);
        let mut live = shown_on(&fake, Some(deadline), [run_started(1)]);
        // Issue 22: the time elapsed, then the time left.
        assert!(
            fake.drawn().iter().any(|text| {
                text.starts_with("LLM: 0 request(s) in flight, $0.00 spent · ")
                    && text.ends_with("s elapsed · 2h 00m left")
            }),
            "{:#?}",
            fake.drawn()
        );
        live.record(&record(Event::LimitReached {
            limit: "max_time".into(),
            reason: "max_time 2h reached".into(),
            evaluations_cancelled: false,
        }));
        assert_eq!(
            fake.drawn()
                .iter()
                .rfind(|text| text.starts_with("LLM: "))
                .map(String::as_str),
            Some(
                "LLM: 0 request(s) in flight, $0.00 spent · max_time reached: winding down, no new proposals"
            )
        );
    }

    #[test]
    fn the_end_of_the_run_leaves_its_figures_as_a_line_and_takes_the_bars_away() {
        let fake = FakeTerminal::default();
        let live = shown_on(
            &fake,
            None,
            verifying_then_interrupted()
                .into_iter()
                .chain([run_finished()]),
        );
        assert_eq!(
            fake.drawn().last().map(String::as_str),
            Some(
                "0 candidate(s) done, 0 failed · no verified kernel yet · $0.00 spent on LLM requests"
            )
        );
        assert!(
            live.devices
                .values()
                .chain([&live.figures, &live.llm])
                .all(ProgressBar::is_finished)
        );
    }

    #[test]
    fn a_hung_up_terminal_turns_the_bars_off_and_is_noted_once_without_a_panic() {
        let fake = FakeTerminal {
            hung_up: true,
            ..FakeTerminal::default()
        };
        let live = shown_on(
            &fake,
            None,
            verifying_then_interrupted()
                .into_iter()
                .chain([interrupted()]),
        );
        // indicatif's suspend unwraps the terminal's errors: the log's way through the bars.
        let view = ProgressView::Bars(live.view.clone());
        view.log_writer()
            .write_all(b"a log line through the bars of a hung-up terminal\n")
            .unwrap();
        view.close();
        assert!(live.view.terminal.0.get().is_some());
        assert!(live.failure_noted);
    }
}
