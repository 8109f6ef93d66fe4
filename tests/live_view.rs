//! Issue 13, a live view: on a terminal, bars on stderr (a line per device, a summary), plain
//! lines elsewhere, NO_COLOR honoured, JSON alone on stdout under `--json`, log lines that never
//! tear the bars, and a terminal that goes away mid-run. The real binary runs with stderr on a
//! pseudo-terminal; what reaches the terminal is replayed into a terminal emulator (vt100), so
//! the assertions are about the screen a person would see.

mod support;

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::os::fd::OwnedFd;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use nix::fcntl::{FcntlArg, FdFlag, fcntl};
use nix::pty::{Winsize, openpty};
use serde_json::Value;
use support::runs::only_run_in;
use support::{example, kactors};

/// The terminal kactors sees: wide enough that no line of a run's stderr wraps.
const ROWS: u16 = 40;
const COLUMNS: u16 = 400;
/// Wide enough for every JSON line of a short run (the longest carry a candidate's code).
const JSON_COLUMNS: u16 = 5000;
/// The emulator's rows: more than a short run's transcript, so nothing scrolls away.
const TRANSCRIPT_ROWS: u16 = 400;
/// A run of a few seconds; far more means kactors or the test hangs.
const GENEROUS: Duration = Duration::from_secs(120);

/// A short run: two simulated devices, the matvec example's replay candidates, one round.
fn short_run(dir: &Path) -> Command {
    std::fs::write(
        dir.join("live.yaml"),
        "platform: noop\nprovider: replay\nnum_workers: 2\nmax_rounds: 1\n\
         noop_eval_s: 0.2\nreplay_latency_s: 0.1\n",
    )
    .unwrap();
    let mut command = kactors(dir);
    command
        .args(["run", "--strategy", "live", "--config-dir", "."])
        .arg("--kernel-dir")
        .arg(example("optimize_01_matvec"))
        .env("TERM", "xterm-256color")
        .env_remove("NO_COLOR")
        .env_remove("CLICOLOR")
        .env_remove("CLICOLOR_FORCE");
    command
}

/// A pseudo-terminal of ROWS × `columns`: the master side to read, the slave side for the child.
fn terminal(columns: u16) -> (File, OwnedFd) {
    let size = Winsize {
        ws_row: ROWS,
        ws_col: columns,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    let pty = openpty(Some(&size), None).unwrap();
    // Unlike std's own descriptors, openpty's are inherited: a child holding the master side
    // would keep a hung-up terminal open, and another test's child this one's slave side.
    for side in [&pty.master, &pty.slave] {
        fcntl(side, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC)).unwrap();
    }
    (File::from(pty.master), pty.slave)
}

/// Starts `command` with stderr (and stdout too, with `columns` of JSON_COLUMNS) on a new terminal
/// and reads the terminal on a thread until the child's side closes (EOF, or EIO as Linux says
/// it); the chunks come back on the channel.
fn start_on_a_terminal(
    mut command: Command,
    columns: u16,
) -> (Child, mpsc::Receiver<Vec<Vec<u8>>>) {
    let (master, slave) = terminal(columns);
    if columns == JSON_COLUMNS {
        command.stdout(Stdio::from(slave.try_clone().unwrap()));
    }
    let child = command.stderr(Stdio::from(slave)).spawn().unwrap();
    // The Command holds the slave side too: only the child may keep it open.
    drop(command);
    let (sender, chunks) = mpsc::channel();
    std::thread::spawn(move || {
        let mut master = master;
        let mut read = Vec::new();
        let mut buffer = [0u8; 8192];
        while let Ok(count @ 1..) = master.read(&mut buffer) {
            read.push(buffer[..count].to_vec());
        }
        let _ = sender.send(read);
    });
    (child, chunks)
}

fn finish(mut child: Child, chunks: &mpsc::Receiver<Vec<Vec<u8>>>) -> (Option<i32>, Vec<Vec<u8>>) {
    let read = chunks.recv_timeout(GENEROUS).unwrap_or_else(|_| {
        let _ = child.kill();
        panic!("the terminal was not closed within {GENEROUS:?}");
    });
    (child.wait().unwrap().code(), read)
}

/// What the terminal showed: every screen the bars were drawn on (the rows above the cursor
/// after each chunk) and the whole transcript at the end. The emulator has rows to spare, so
/// nothing scrolls away; kactors' cursor moves are relative and never see the difference.
struct Screen {
    bar_rows: Vec<String>,
    transcript: Vec<String>,
}

fn screen_of(chunks: &[Vec<u8>], columns: u16) -> Screen {
    let size = |cells: u16| std::num::NonZeroU16::new(cells).unwrap();
    let mut emulator = vt100::Parser::new(size(TRANSCRIPT_ROWS), size(columns), 0);
    let mut bar_rows = Vec::new();
    for chunk in chunks {
        emulator.process(chunk);
        let screen = emulator.screen();
        let (cursor_row, _) = screen.cursor_position();
        let first = cursor_row.saturating_sub(8);
        bar_rows.extend(
            screen
                .rows(0, columns)
                .skip(usize::from(first))
                .take(usize::from(cursor_row - first) + 1),
        );
    }
    let transcript = emulator
        .screen()
        .rows(0, columns)
        .map(|row| row.trim_end().to_string())
        .filter(|row| !row.is_empty())
        .collect();
    Screen {
        bar_rows,
        transcript,
    }
}

/// "[device 1] verifying candidate 3 (round 1) for 0.1s": a device line in mid-step.
fn is_busy_device_line(row: &str) -> bool {
    let Some(rest) = row.trim_end().strip_prefix("[device ") else {
        return false;
    };
    ["] verifying candidate ", "] timing candidate "]
        .iter()
        .any(|step| rest.contains(step))
        && rest.contains(" (round 1) for ")
        && rest.ends_with('s')
}

/// "3 candidate(s) done, 1 failed · best 0.0123 ms (candidate 2): 1.50× the initial kernel".
fn is_figures_line_with_a_best(row: &str) -> bool {
    row.contains(" candidate(s) done, ")
        && row.contains(" failed · best ")
        && row.contains(" ms (candidate ")
        && row.contains("× the initial kernel")
}

/// Select Graphic Rendition, `ESC [ … m`: colours, bold, dim. Cursor movement (`ESC [ n A`),
/// erasing a line (`ESC [ 2K`) and carriage returns are how bars are drawn, not colour.
fn colour_escapes(raw: &[u8]) -> usize {
    raw.windows(2)
        .enumerate()
        .filter(|(_, pair)| pair == b"\x1b[")
        .filter(|(start, _)| {
            let parameters = raw[start + 2..]
                .iter()
                .position(|byte| !(byte.is_ascii_digit() || *byte == b';'));
            parameters.is_some_and(|length| raw.get(start + 2 + length) == Some(&b'm'))
        })
        .count()
}

fn assert_ends_with_the_final_line(screen: &Screen) {
    let last = screen.transcript.last().unwrap();
    assert!(
        last.starts_with("kactors: run completed ("),
        "the run's usual last line comes last: {:#?}",
        screen.transcript
    );
    let before_last = &screen.transcript[screen.transcript.len() - 2];
    assert!(
        is_figures_line_with_a_best(before_last),
        "the run's figures stay above it: {:#?}",
        screen.transcript
    );
    assert!(
        !screen.transcript.iter().any(|row| {
            (row.starts_with("[device ") && row.contains(" for "))
                || row.starts_with("LLM: ")
                || row.ends_with("no verified kernel yet")
        }),
        "no bar is left on the screen: {:#?}",
        screen.transcript
    );
}

#[test]
fn a_terminal_shows_a_line_per_device_and_a_summary_then_the_usual_last_line() {
    let dir = tempfile::tempdir().unwrap();
    let mut command = short_run(dir.path());
    command.stdout(Stdio::null());
    let (child, chunks) = start_on_a_terminal(command, COLUMNS);
    let (code, read) = finish(child, &chunks);
    assert_eq!(code, Some(0));
    let screen = screen_of(&read, COLUMNS);
    assert!(
        screen.bar_rows.iter().any(|row| is_busy_device_line(row)),
        "a device line names its step and candidate: {:#?}",
        screen.bar_rows
    );
    assert!(
        screen
            .bar_rows
            .iter()
            .any(|row| is_figures_line_with_a_best(row)),
        "{:#?}",
        screen.bar_rows
    );
    assert!(
        screen
            .bar_rows
            .iter()
            .any(|row| row.starts_with("LLM: ")
                && row.contains(" request(s) in flight, $0.00 spent")),
        "{:#?}",
        screen.bar_rows
    );
    assert_ends_with_the_final_line(&screen);
    assert!(
        colour_escapes(&read.concat()) > 0,
        "without NO_COLOR the bars are in colour"
    );
}

#[test]
fn no_color_takes_every_colour_escape_away_and_keeps_the_bars() {
    let dir = tempfile::tempdir().unwrap();
    let mut command = short_run(dir.path());
    command.stdout(Stdio::null()).env("NO_COLOR", "1");
    let (child, chunks) = start_on_a_terminal(command, COLUMNS);
    let (code, read) = finish(child, &chunks);
    assert_eq!(code, Some(0));
    let screen = screen_of(&read, COLUMNS);
    assert!(screen.bar_rows.iter().any(|row| is_busy_device_line(row)));
    assert_eq!(colour_escapes(&read.concat()), 0);
    assert_ends_with_the_final_line(&screen);
}

#[test]
fn with_json_stdout_carries_only_json_lines_and_the_bars_stay_on_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let mut command = short_run(dir.path());
    command.arg("--json").stdout(Stdio::piped());
    let (mut child, chunks) = start_on_a_terminal(command, COLUMNS);
    let mut stdout = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    let (code, read) = finish(child, &chunks);
    assert_eq!(code, Some(0));
    let events: Vec<Value> = stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{line:?}: {e}")))
        .collect();
    assert!(events.iter().all(|event| event["type"].is_string()));
    assert_eq!(events.first().unwrap()["type"], "run_started");
    assert_eq!(events.last().unwrap()["type"], "run_finished");
    let screen = screen_of(&read, COLUMNS);
    assert!(screen.bar_rows.iter().any(|row| is_busy_device_line(row)));
    assert_ends_with_the_final_line(&screen);
}

#[test]
fn with_json_on_the_same_terminal_every_event_is_a_whole_line_and_no_bar_tears() {
    let dir = tempfile::tempdir().unwrap();
    let mut command = short_run(dir.path());
    command.arg("--json");
    let (child, chunks) = start_on_a_terminal(command, JSON_COLUMNS);
    let (code, read) = finish(child, &chunks);
    assert_eq!(code, Some(0));
    let screen = screen_of(&read, JSON_COLUMNS);
    assert!(screen.bar_rows.iter().any(|row| is_busy_device_line(row)));
    let events: Vec<Value> = screen
        .transcript
        .iter()
        .filter(|row| row.starts_with('{'))
        .map(|row| {
            serde_json::from_str(row).unwrap_or_else(|e| panic!("a torn event {row:?}: {e}"))
        })
        .collect();
    let run = only_run_in(&dir.path().join("runs"));
    let journal = std::fs::read_to_string(run.join("journal.jsonl")).unwrap();
    assert_eq!(
        events.len(),
        journal.lines().count(),
        "every event, each whole"
    );
    assert_ends_with_the_final_line(&screen);
}

#[test]
fn a_log_line_while_the_bars_are_up_comes_whole_on_its_own_row() {
    // `--json | head -3` on a terminal: stdout closes, and the warning that says so is logged to
    // stderr while the bars are drawn there.
    let dir = tempfile::tempdir().unwrap();
    let mut command = short_run(dir.path());
    command.arg("--json").stdout(Stdio::piped());
    let (mut child, chunks) = start_on_a_terminal(command, COLUMNS);
    let mut events = BufReader::new(child.stdout.take().unwrap());
    for _ in 0..3 {
        let mut line = String::new();
        assert!(events.read_line(&mut line).unwrap() > 0);
    }
    drop(events);
    let (code, read) = finish(child, &chunks);
    assert_eq!(code, Some(0));
    let screen = screen_of(&read, COLUMNS);
    let warnings: Vec<&String> = screen
        .transcript
        .iter()
        .filter(|row| row.contains("progress on stdout can no longer be written"))
        .collect();
    assert_eq!(warnings.len(), 1, "{:#?}", screen.transcript);
    assert!(
        warnings[0].contains(" WARN ")
            && warnings[0].ends_with("the journal and report are unaffected"),
        "the warning is whole: {:#?}",
        screen.transcript
    );
    assert!(
        warnings[0].starts_with(|c: char| c.is_ascii_digit()),
        "it starts its row with its timestamp, not after a bar: {:#?}",
        screen.transcript
    );
    assert_ends_with_the_final_line(&screen);
}

#[test]
fn a_terminal_that_goes_away_mid_run_drops_the_bars_and_the_run_ends_as_planned() {
    // The terminal hangs up first; then stdout closes too, and the warning that says so is
    // logged through the bars of the dead terminal.
    let dir = tempfile::tempdir().unwrap();
    let mut command = short_run(dir.path());
    let (master, slave) = terminal(COLUMNS);
    let mut child = command
        .arg("--json")
        .stdout(Stdio::piped())
        .stderr(Stdio::from(slave))
        .spawn()
        .unwrap();
    drop(command);
    let mut reader = BufReader::new(master);
    let mut seen = Vec::new();
    while !String::from_utf8_lossy(&seen).contains("candidate(s) done") {
        let mut line = Vec::new();
        assert!(reader.read_until(b'\r', &mut line).unwrap() > 0);
        seen.extend(line);
    }
    drop(reader);
    drop(child.stdout.take());
    let (sender, exited) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = sender.send(child.wait().unwrap().code());
    });
    assert_eq!(exited.recv_timeout(GENEROUS).unwrap(), Some(0));
    let run = only_run_in(&dir.path().join("runs"));
    let journal = std::fs::read_to_string(run.join("journal.jsonl")).unwrap();
    let last: Value = serde_json::from_str(journal.lines().last().unwrap()).unwrap();
    assert_eq!(
        (last["type"].as_str(), last["outcome"].as_str()),
        (Some("run_finished"), Some("completed"))
    );
    let log = std::fs::read_to_string(run.join("kactors.log")).unwrap();
    for stream in ["stderr", "stdout"] {
        assert_eq!(
            log.matches(&format!("progress on {stream} can no longer be written"))
                .count(),
            1,
            "the dropped {stream} is noted once: {log}"
        );
    }
}
