//! `/proc/<pid>/stat`, the one file kactors must read by position: proc(5) gives it no field
//! names, only the order `pid (comm) state ppid pgrp session tty_nr tpgid flags minflt cminflt
//! majflt cmajflt utime stime cutime cstime priority nice num_threads itrealvalue starttime …`,
//! where comm is the executable's name and may itself hold spaces and parentheses. So the fields
//! are counted from the last `)`, here and nowhere else.

use std::fs;

/// The fields kactors reads of a process's stat file.
#[derive(Debug, PartialEq, Eq)]
pub struct ProcStat {
    state: char,
    pub process_group: i32,
    /// When the process started, in clock ticks after boot: with the pid, it names one process
    /// whatever the pid is reused for later.
    pub start_time: Option<u64>,
}

impl ProcStat {
    /// The process's stat now, or None once it is gone (or not ours to read).
    pub fn of(pid: impl std::fmt::Display) -> Option<ProcStat> {
        ProcStat::parse(&fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
    }

    pub fn parse(text: &str) -> Option<ProcStat> {
        let after_comm = &text[text.rfind(')')? + 1..];
        let fields: Vec<&str> = after_comm.split_whitespace().collect();
        // After comm: field 3 (state) is index 0, pgrp (5) index 2, starttime (22) index 19.
        Some(ProcStat {
            state: fields.first()?.chars().next()?,
            process_group: fields.get(2)?.parse().ok()?,
            start_time: fields.get(19).and_then(|field| field.parse().ok()),
        })
    }

    /// Z is a zombie; X (x on old kernels) is a process being torn down.
    pub fn is_running(&self) -> bool {
        !matches!(self.state, 'Z' | 'X' | 'x')
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str, expected: Option<(char, i32)>) {
        let parsed = ProcStat::parse(text).map(|stat| (stat.state, stat.process_group));
        assert_eq!(parsed, expected, "{text:?}");
    }

    #[test]
    fn stat_lines_are_read_from_after_the_command_name() {
        check(
            "4242 (python3) S 4240 4240 4240 0 -1 4194560 1939 0 0 0\n",
            Some(('S', 4240)),
        );
        check(
            "7 (sleep) Z 1 4240 4240 0 -1 4227084 0 0 0 0\n",
            Some(('Z', 4240)),
        );
        check("9 (a) b) (c) R 1 77 77 0 -1 0\n", Some(('R', 77)));
        check("10 (tmux: server) S 1 10 10 0 -1 0\n", Some(('S', 10)));
        let whole = "4242 (a (weird) name) S 1 4240 4240 0 -1 4194560 135 0 0 0 0 0 0 0 20 0 1 0 \
                     987654 5 6";
        assert_eq!(ProcStat::parse(whole).unwrap().start_time, Some(987654));
    }

    #[test]
    fn broken_stat_lines_are_not_read() {
        check("", None);
        check("4242 python3 S 4240 4240", None);
        check("4242 (python3) S 4240", None);
        check("4242 (python3) S 4240 group 4240", None);
    }

    #[test]
    fn zombies_and_dying_processes_are_not_running() {
        let running: Vec<bool> = ['R', 'S', 'D', 'T', 'Z', 'X']
            .into_iter()
            .map(|state| {
                ProcStat {
                    state,
                    process_group: 1,
                    start_time: None,
                }
                .is_running()
            })
            .collect();
        assert_eq!(running, [true, true, true, true, false, false]);
    }

    #[test]
    fn this_process_reads_as_running() {
        let own = ProcStat::of(std::process::id()).unwrap();
        assert!(own.is_running());
        assert_eq!(own.process_group, nix::unistd::getpgrp().as_raw());
        assert!(own.start_time.is_some());
    }
}
