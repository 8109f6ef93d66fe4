//! rocprofv3's CSV files, read by column name (profilers.md 1.5): columns were added, moved
//! and prefixed between releases (6.2, 6.3/6.4, 7.0+, and `rocpd convert` output with a leading
//! `Guid` or `Pid` column), so no column is ever found by position.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum RocprofCsvError {
    #[error("cannot read {}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("malformed CSV in {}", path.display())]
    Csv {
        path: PathBuf,
        #[source]
        source: csv::Error,
    },
    #[error(
        "{} is not a rocprofv3 {what}: no \"{column}\" column ({why})",
        path.display()
    )]
    MissingColumn {
        path: PathBuf,
        what: &'static str,
        column: &'static str,
        why: &'static str,
    },
    #[error(
        "{} line {line}: {column} is \"{value}\", expected a number",
        path.display()
    )]
    NotANumber {
        path: PathBuf,
        line: u64,
        column: &'static str,
        value: String,
    },
    #[error(
        "{} line {line}: dispatch of {kernel} ends ({end_ns}) before it starts ({start_ns})",
        path.display()
    )]
    EndBeforeStart {
        path: PathBuf,
        line: u64,
        kernel: String,
        start_ns: u64,
        end_ns: u64,
    },
}

/// One KERNEL_DISPATCH row of a kernel trace.
#[derive(Debug, Clone, PartialEq)]
pub struct KernelDispatch {
    pub kernel_name: String,
    /// Absent in the 6.2 trace, which has no Dispatch_Id column.
    pub dispatch_id: Option<u64>,
    pub start_ns: u64,
    pub end_ns: u64,
}

impl KernelDispatch {
    pub fn duration_ns(&self) -> u64 {
        self.end_ns - self.start_ns
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct KernelTrace {
    pub path: PathBuf,
    pub dispatches: Vec<KernelDispatch>,
}

/// One row of a kernel_stats file: a mean over every launch of the kernel in the process
/// (warm-up and autotune included), so never the measured call's duration.
#[derive(Debug, Clone, PartialEq)]
pub struct KernelStatsRow {
    pub name: String,
    pub calls: Option<u64>,
    pub total_duration_ns: Option<f64>,
    pub average_ns: Option<f64>,
}

/// One row of a counter_collection file: one counter of one dispatch.
#[derive(Debug, Clone, PartialEq)]
pub struct CounterSample {
    pub dispatch_id: u64,
    pub kernel_name: String,
    pub counter: String,
    pub value: f64,
}

#[cfg(test)]
impl KernelDispatch {
    /// A dispatch of `kernel_name` from `start_ns` to `end_ns`, with its id when the trace has
    /// one.
    pub(crate) fn new(
        kernel_name: &str,
        dispatch_id: Option<u64>,
        start_ns: u64,
        end_ns: u64,
    ) -> Self {
        KernelDispatch {
            kernel_name: kernel_name.to_owned(),
            dispatch_id,
            start_ns,
            end_ns,
        }
    }
}

#[cfg(test)]
impl CounterSample {
    /// `counter` = `value` in dispatch `dispatch_id` of `kernel_name`.
    pub(crate) fn new(dispatch_id: u64, kernel_name: &str, counter: &str, value: f64) -> Self {
        CounterSample {
            dispatch_id,
            kernel_name: kernel_name.to_owned(),
            counter: counter.to_owned(),
            value,
        }
    }
}

pub fn read_kernel_trace(path: &Path) -> Result<KernelTrace, RocprofCsvError> {
    parse_kernel_trace(&read(path)?, path)
}

pub fn read_kernel_stats(path: &Path) -> Result<Vec<KernelStatsRow>, RocprofCsvError> {
    parse_kernel_stats(&read(path)?, path)
}

pub fn read_counter_collection(path: &Path) -> Result<Vec<CounterSample>, RocprofCsvError> {
    parse_counter_collection(&read(path)?, path)
}

/// Rows of another Kind (should a release mix them in) are skipped; a file without a Kind
/// column is taken as all dispatches.
pub fn parse_kernel_trace(text: &str, path: &Path) -> Result<KernelTrace, RocprofCsvError> {
    const WHAT: &str = "kernel trace";
    let mut table = Table::new(text, path)?;
    let kind = table.optional("Kind");
    let name = table.required("Kernel_Name", WHAT, "dispatches cannot be named")?;
    let start = table.required("Start_Timestamp", WHAT, "dispatches cannot be timed")?;
    let end = table.required("End_Timestamp", WHAT, "dispatches cannot be timed")?;
    let dispatch_id = table.optional("Dispatch_Id");
    let mut dispatches = Vec::new();
    for row in table.rows() {
        let row = row?;
        if kind.is_some_and(|kind| row.text(kind) != "KERNEL_DISPATCH") {
            continue;
        }
        let kernel_name = row.text(name).to_owned();
        let start_ns = row.integer(start, "Start_Timestamp")?;
        let end_ns = row.integer(end, "End_Timestamp")?;
        if end_ns < start_ns {
            return Err(RocprofCsvError::EndBeforeStart {
                path: path.to_owned(),
                line: row.line,
                kernel: kernel_name,
                start_ns,
                end_ns,
            });
        }
        let dispatch_id = dispatch_id
            .map(|column| row.integer(column, "Dispatch_Id"))
            .transpose()?;
        dispatches.push(KernelDispatch {
            kernel_name,
            dispatch_id,
            start_ns,
            end_ns,
        });
    }
    Ok(KernelTrace {
        path: path.to_owned(),
        dispatches,
    })
}

/// A stats file must have AverageNs or TotalDurationNs: without them it is not a profile.
pub fn parse_kernel_stats(text: &str, path: &Path) -> Result<Vec<KernelStatsRow>, RocprofCsvError> {
    const WHAT: &str = "kernel statistics file";
    let mut table = Table::new(text, path)?;
    let name = table.required("Name", WHAT, "rows cannot be named")?;
    let calls = table.optional("Calls");
    let total = table.optional("TotalDurationNs");
    let average = table.optional("AverageNs");
    if total.is_none() && average.is_none() {
        return Err(RocprofCsvError::MissingColumn {
            path: path.to_owned(),
            what: WHAT,
            column: "AverageNs",
            why: "nor a TotalDurationNs column: it holds no durations",
        });
    }
    let mut rows = Vec::new();
    for row in table.rows() {
        let row = row?;
        rows.push(KernelStatsRow {
            name: row.text(name).to_owned(),
            calls: calls
                .map(|column| row.integer(column, "Calls"))
                .transpose()?,
            total_duration_ns: total
                .map(|column| row.number(column, "TotalDurationNs"))
                .transpose()?,
            average_ns: average
                .map(|column| row.number(column, "AverageNs"))
                .transpose()?,
        });
    }
    Ok(rows)
}

/// Values come as `16384.000000`, `0.00000000e+00` or `65536` depending on the release;
/// Agent_Id as `1` or `"Agent 1"` is not needed (Dispatch_Id is unique in the process).
pub fn parse_counter_collection(
    text: &str,
    path: &Path,
) -> Result<Vec<CounterSample>, RocprofCsvError> {
    const WHAT: &str = "counter collection";
    let mut table = Table::new(text, path)?;
    let name = table.required(
        "Kernel_Name",
        WHAT,
        "counters cannot be attributed to a kernel",
    )?;
    let dispatch_id = table.required(
        "Dispatch_Id",
        WHAT,
        "the measured dispatch cannot be told from warm-up ones",
    )?;
    let counter = table.required("Counter_Name", WHAT, "values cannot be named")?;
    let value = table.required("Counter_Value", WHAT, "it holds no values")?;
    let mut samples = Vec::new();
    for row in table.rows() {
        let row = row?;
        samples.push(CounterSample {
            dispatch_id: row.integer(dispatch_id, "Dispatch_Id")?,
            kernel_name: row.text(name).to_owned(),
            counter: row.text(counter).to_owned(),
            value: row.number(value, "Counter_Value")?,
        });
    }
    Ok(samples)
}

fn read(path: &Path) -> Result<String, RocprofCsvError> {
    fs::read_to_string(path).map_err(|source| RocprofCsvError::Io {
        path: path.to_owned(),
        source,
    })
}

struct Table<'a> {
    path: &'a Path,
    reader: csv::Reader<&'a [u8]>,
    columns: HashMap<String, usize>,
}

impl<'a> Table<'a> {
    fn new(text: &'a str, path: &'a Path) -> Result<Self, RocprofCsvError> {
        let mut reader = csv::ReaderBuilder::new()
            .flexible(true)
            .trim(csv::Trim::All)
            .from_reader(text.as_bytes());
        let columns = reader
            .headers()
            .map_err(|source| RocprofCsvError::Csv {
                path: path.to_owned(),
                source,
            })?
            .iter()
            .enumerate()
            .map(|(index, name)| (name.to_owned(), index))
            .collect();
        Ok(Self {
            path,
            reader,
            columns,
        })
    }

    fn optional(&self, column: &str) -> Option<usize> {
        self.columns.get(column).copied()
    }

    fn required(
        &self,
        column: &'static str,
        what: &'static str,
        why: &'static str,
    ) -> Result<usize, RocprofCsvError> {
        self.optional(column)
            .ok_or_else(|| RocprofCsvError::MissingColumn {
                path: self.path.to_owned(),
                what,
                column,
                why,
            })
    }

    fn rows(&mut self) -> impl Iterator<Item = Result<Row<'a>, RocprofCsvError>> + '_ {
        let path = self.path;
        self.reader
            .records()
            .filter(|record| record.as_ref().map_or(true, |record| !is_blank(record)))
            .map(move |record| {
                let record = record.map_err(|source| RocprofCsvError::Csv {
                    path: path.to_owned(),
                    source,
                })?;
                let line = record.position().map_or(0, csv::Position::line);
                Ok(Row { path, record, line })
            })
    }
}

fn is_blank(record: &csv::StringRecord) -> bool {
    record.iter().all(str::is_empty)
}

struct Row<'a> {
    path: &'a Path,
    record: csv::StringRecord,
    line: u64,
}

impl Row<'_> {
    /// A short row (the reader is flexible) reads as empty, which the number parsers reject.
    fn text(&self, column: usize) -> &str {
        self.record.get(column).unwrap_or_default()
    }

    fn number(&self, column: usize, name: &'static str) -> Result<f64, RocprofCsvError> {
        let text = self.text(column);
        text.parse::<f64>()
            .ok()
            .filter(|value| value.is_finite())
            .ok_or_else(|| self.not_a_number(name, text))
    }

    /// Integers may be written as `12.000000` by a release that formats every number alike.
    fn integer(&self, column: usize, name: &'static str) -> Result<u64, RocprofCsvError> {
        let text = self.text(column);
        text.parse::<u64>()
            .ok()
            .or_else(|| {
                let value = text.parse::<f64>().ok()?;
                (value >= 0.0 && value.fract() == 0.0 && value < u64::MAX as f64)
                    .then_some(value as u64)
            })
            .ok_or_else(|| self.not_a_number(name, text))
    }

    fn not_a_number(&self, column: &'static str, value: &str) -> RocprofCsvError {
        RocprofCsvError::NotANumber {
            path: self.path.to_owned(),
            line: self.line,
            column,
            value: value.to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path() -> &'static Path {
        Path::new("run_kernel_trace.csv")
    }

    /// profilers.md 5.1, verbatim vendor sample (7.x, 22 columns) plus the synthetic Triton row.
    const TRACE_7X: &str = r#""Kind","Agent_Id","Queue_Id","Stream_Id","Thread_Id","Dispatch_Id","Kernel_Id","Kernel_Name","Correlation_Id","Start_Timestamp","End_Timestamp","LDS_Block_Size","Scratch_Size","VGPR_Count","Accum_VGPR_Count","SGPR_Count","Workgroup_Size_X","Workgroup_Size_Y","Workgroup_Size_Z","Grid_Size_X","Grid_Size_Y","Grid_Size_Z"
"KERNEL_DISPATCH","Agent 4",1,1,834304,1,10,"void addition_kernel<float>(float*, float const*, float const*, int, int)",1,1550151853029637,1550151853042437,0,0,8,0,16,64,1,1,1024,1024,1
"KERNEL_DISPATCH","Agent 4",1,1,834304,4,11,"divide_kernel(float*, float const*, float const*, int, int)",4,1550151853064037,1550151853075237,0,0,12,4,16,64,1,1,1024,1024,1
"KERNEL_DISPATCH","Agent 1",1,1,4242,7,12,"add_kernel",7,1000000000,1000045000,0,0,24,0,32,256,1,1,4194304,1,1
"#;

    /// profilers.md 5.2, ROCm 6.2 kernel trace (no Dispatch_Id).
    const TRACE_62: &str = r#""Kind","Agent_Id","Queue_Id","Kernel_Id","Kernel_Name","Correlation_Id","Start_Timestamp","End_Timestamp","Private_Segment_Size","Group_Segment_Size","Workgroup_Size_X","Workgroup_Size_Y","Workgroup_Size_Z","Grid_Size_X","Grid_Size_Y","Grid_Size_Z"
"KERNEL_DISPATCH",1,139690710949888,15,"matrixTranspose(float*, float*, int)",0,671599758568,671599825328,0,0,4,4,1,1024,1024,1
"#;

    /// 6.3/6.4 column order (Thread_Id and Dispatch_Id added, integer Agent_Id).
    const TRACE_64: &str = r#""Kind","Agent_Id","Queue_Id","Thread_Id","Dispatch_Id","Kernel_Id","Kernel_Name","Correlation_Id","Start_Timestamp","End_Timestamp","Private_Segment_Size","Group_Segment_Size","Workgroup_Size_X","Workgroup_Size_Y","Workgroup_Size_Z","Grid_Size_X","Grid_Size_Y","Grid_Size_Z"
"KERNEL_DISPATCH",1,1,4242,3,12,"add_kernel",3,2000,2500,0,0,256,1,1,4096,1,1
"#;

    /// `rocpd convert` output: a leading Guid column, otherwise the 7.x columns [SRC S11].
    const TRACE_ROCPD: &str = r#""Guid","Kind","Agent_Id","Queue_Id","Stream_Id","Thread_Id","Dispatch_Id","Kernel_Id","Kernel_Name","Correlation_Id","Start_Timestamp","End_Timestamp","LDS_Block_Size","Scratch_Size","VGPR_Count","Accum_VGPR_Count","SGPR_Count","Workgroup_Size_X","Workgroup_Size_Y","Workgroup_Size_Z","Grid_Size_X","Grid_Size_Y","Grid_Size_Z"
"0f3c2a",KERNEL_DISPATCH,"Agent 1",1,1,4242,9,12,"add_kernel",9,5000,5600,0,0,24,0,32,256,1,1,4194304,1,1
"#;

    #[test]
    fn kernel_trace_of_every_layout() {
        let check = |text: &str, expected: Vec<KernelDispatch>| {
            assert_eq!(
                parse_kernel_trace(text, path()).unwrap().dispatches,
                expected
            );
        };
        check(
            TRACE_7X,
            vec![
                KernelDispatch::new(
                    "void addition_kernel<float>(float*, float const*, float const*, int, int)",
                    Some(1),
                    1550151853029637,
                    1550151853042437,
                ),
                KernelDispatch::new(
                    "divide_kernel(float*, float const*, float const*, int, int)",
                    Some(4),
                    1550151853064037,
                    1550151853075237,
                ),
                KernelDispatch::new("add_kernel", Some(7), 1000000000, 1000045000),
            ],
        );
        check(
            TRACE_62,
            vec![KernelDispatch::new(
                "matrixTranspose(float*, float*, int)",
                None,
                671599758568,
                671599825328,
            )],
        );
        check(
            TRACE_64,
            vec![KernelDispatch::new("add_kernel", Some(3), 2000, 2500)],
        );
        check(
            TRACE_ROCPD,
            vec![KernelDispatch::new("add_kernel", Some(9), 5000, 5600)],
        );
    }

    #[test]
    fn kernel_trace_rows_of_another_kind_are_skipped() {
        let text = "\"Kind\",\"Kernel_Name\",\"Start_Timestamp\",\"End_Timestamp\"\n\
                    \"MEMORY_COPY\",\"\",1,2\n\"KERNEL_DISPATCH\",\"k\",3,5\n";
        let trace = parse_kernel_trace(text, path()).unwrap();
        assert_eq!(trace.dispatches, vec![KernelDispatch::new("k", None, 3, 5)]);
        assert_eq!(trace.dispatches[0].duration_ns(), 2);
    }

    #[test]
    fn kernel_trace_broken_forms() {
        let error =
            parse_kernel_trace("\"Kind\",\"Kernel_Name\",\"End_Timestamp\"\n", path()).unwrap_err();
        assert!(
            error.to_string().contains("no \"Start_Timestamp\" column"),
            "{error}"
        );
        let error = parse_kernel_trace(
            "\"Kernel_Name\",\"Start_Timestamp\",\"End_Timestamp\"\n\"k\",abc,5\n",
            path(),
        )
        .unwrap_err();
        assert_eq!(
            error.to_string(),
            "run_kernel_trace.csv line 2: Start_Timestamp is \"abc\", expected a number"
        );
        let error = parse_kernel_trace(
            "\"Kernel_Name\",\"Start_Timestamp\",\"End_Timestamp\"\n\"k\",9,5\n",
            path(),
        )
        .unwrap_err();
        assert!(matches!(error, RocprofCsvError::EndBeforeStart { .. }));
        let error = parse_kernel_trace(
            "\"Kernel_Name\",\"Start_Timestamp\",\"End_Timestamp\"\n\"k\",1\n",
            path(),
        )
        .unwrap_err();
        assert!(
            matches!(error, RocprofCsvError::NotANumber { .. }),
            "{error}"
        );
    }

    /// profilers.md 5.3, verbatim vendor sample of the stats layout, and the synthetic row.
    const STATS: &str = r#""Name","Calls","TotalDurationNs","AverageNs","Percentage","MinNs","MaxNs","StdDev"
"hipStreamCreateWithFlags",4,262497406,65624351.500000,85.15,3991286,249121840,122332531.343496
"hipGetDeviceCount",1,32505687,32505687.000000,10.54,32505687,32505687,0.00000000e+00
"add_kernel",3,135680,45226.666667,58.93,44320,46400,1072.400000
"#;

    #[test]
    fn kernel_stats() {
        let rows = parse_kernel_stats(STATS, Path::new("run_kernel_stats.csv")).unwrap();
        assert_eq!(rows.len(), 3);
        assert_eq!(
            rows[2],
            KernelStatsRow {
                name: "add_kernel".to_owned(),
                calls: Some(3),
                total_duration_ns: Some(135680.0),
                average_ns: Some(45226.666667),
            }
        );
    }

    #[test]
    fn kernel_stats_without_durations_is_not_a_profile() {
        let error = parse_kernel_stats(
            "\"Name\",\"Calls\",\"Percentage\"\n\"add_kernel\",3,58.93\n",
            Path::new("run_kernel_stats.csv"),
        )
        .unwrap_err();
        assert_eq!(
            error.to_string(),
            "run_kernel_stats.csv is not a rocprofv3 kernel statistics file: no \"AverageNs\" \
             column (nor a TotalDurationNs column: it holds no durations)"
        );
        let only_total = parse_kernel_stats(
            "\"Name\",\"TotalDurationNs\"\n\"k\",10\n",
            Path::new("s.csv"),
        )
        .unwrap();
        assert_eq!(only_total[0].total_duration_ns, Some(10.0));
        assert_eq!(only_total[0].average_ns, None);
    }

    /// profilers.md 5.2: 7.x vendor sample (verbatim), 6.4 real row, 6.2 documented row.
    const COUNTERS_7X: &str = r#""Correlation_Id","Dispatch_Id","Agent_Id","Queue_Id","Process_Id","Thread_Id","Grid_Size","Kernel_Id","Kernel_Name","Workgroup_Size","LDS_Block_Size","Scratch_Size","VGPR_Count","Accum_VGPR_Count","SGPR_Count","Counter_Name","Counter_Value","Start_Timestamp","End_Timestamp"
1,1,"Agent 1",1,15606,15606,1048576,17,"void addition_kernel<float>(float*, float const*, float const*, int, int)",64,0,0,8,0,16,"SQ_WAVES",16384.000000,3200098838431081,3200098838483232
2,2,"Agent 1",1,15606,15606,1048576,20,"subtract_kernel(float*, float const*, float const*, int, int)",64,0,0,8,0,16,"SQ_WAVES",16384.000000,3200098838589014,3200098838638794
"#;
    const COUNTERS_64: &str = r#""Correlation_Id","Dispatch_Id","Agent_Id","Queue_Id","Process_Id","Thread_Id","Grid_Size","Kernel_Id","Kernel_Name","Workgroup_Size","LDS_Block_Size","Scratch_Size","VGPR_Count","Accum_VGPR_Count","SGPR_Count","Counter_Name","Counter_Value","Start_Timestamp","End_Timestamp"
1,1,1,1,15309,15309,256,7,"__amd_rocclr_initHeap",256,0,0,16,0,128,"MemUnitBusy",0.00000000e+00,1203600088247,1203600094327
"#;
    const COUNTERS_62: &str = r#""Correlation_Id","Dispatch_Id","Agent_Id","Queue_Id","Process_Id","Thread_Id","Grid_Size","Kernel_Name","Workgroup_Size","LDS_Block_Size","Scratch_Size","VGPR_Count","SGPR_Count","Counter_Name","Counter_Value"
0,1,1,139892123975680,5619,5619,1048576,"matrixTranspose(float*, float*, int)",16,0,0,8,16,"SQ_WAVES",65536
"#;
    const COUNTERS_ROCPD: &str = r#""Pid","Correlation_Id","Dispatch_Id","Agent_Id","Queue_Id","Process_Id","Thread_Id","Grid_Size","Kernel_Id","Kernel_Name","Workgroup_Size","LDS_Block_Size","Scratch_Size","VGPR_Count","Accum_VGPR_Count","SGPR_Count","Counter_Name","Counter_Value","Start_Timestamp","End_Timestamp"
4242,5,5,"Agent 1",1,4242,4242,4096,12,"add_kernel",256,0,0,24,0,32,"FETCH_SIZE",4096.000000,10,20
"#;

    #[test]
    fn counter_collection_of_every_layout() {
        let check = |text: &str, expected: Vec<CounterSample>| {
            let path = Path::new("run_counter_collection.csv");
            assert_eq!(parse_counter_collection(text, path).unwrap(), expected);
        };
        check(
            COUNTERS_7X,
            vec![
                CounterSample::new(
                    1,
                    "void addition_kernel<float>(float*, float const*, float const*, int, int)",
                    "SQ_WAVES",
                    16384.0,
                ),
                CounterSample::new(
                    2,
                    "subtract_kernel(float*, float const*, float const*, int, int)",
                    "SQ_WAVES",
                    16384.0,
                ),
            ],
        );
        check(
            COUNTERS_64,
            vec![CounterSample::new(
                1,
                "__amd_rocclr_initHeap",
                "MemUnitBusy",
                0.0,
            )],
        );
        check(
            COUNTERS_62,
            vec![CounterSample::new(
                1,
                "matrixTranspose(float*, float*, int)",
                "SQ_WAVES",
                65536.0,
            )],
        );
        check(
            COUNTERS_ROCPD,
            vec![CounterSample::new(5, "add_kernel", "FETCH_SIZE", 4096.0)],
        );
    }

    #[test]
    fn counter_collection_without_kernel_column_cannot_be_attributed() {
        let text = "\"Correlation_Id\",\"Dispatch_Id\",\"Counter_Name\",\"Counter_Value\"\n\
                    1,1,\"SQ_WAVES\",16384.000000\n";
        let error =
            parse_counter_collection(text, Path::new("run_counter_collection.csv")).unwrap_err();
        assert_eq!(
            error.to_string(),
            "run_counter_collection.csv is not a rocprofv3 counter collection: no \
             \"Kernel_Name\" column (counters cannot be attributed to a kernel)"
        );
    }

    #[test]
    fn counter_values_must_be_finite_numbers() {
        let text = "\"Dispatch_Id\",\"Kernel_Name\",\"Counter_Name\",\"Counter_Value\"\n\
                    1,\"k\",\"SQ_WAVES\",nan\n";
        let error = parse_counter_collection(text, Path::new("c.csv")).unwrap_err();
        assert!(
            matches!(error, RocprofCsvError::NotANumber { .. }),
            "{error}"
        );
    }

    #[test]
    fn integers_written_as_decimals_are_accepted() {
        let text = "\"Kernel_Name\",\"Dispatch_Id\",\"Start_Timestamp\",\"End_Timestamp\"\n\
                    \"k\",12.000000,100,250\n";
        let trace = parse_kernel_trace(text, path()).unwrap();
        assert_eq!(
            trace.dispatches,
            vec![KernelDispatch::new("k", Some(12), 100, 250)]
        );
    }
}
