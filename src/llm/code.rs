//! Finds the kernel in a model's answer.

use actors::model::KernelSource;
use actors::ports::LlmReply;

/// The reply a kept reply's text stands for (`LlmProvider::kept_reply`): its code found as in
/// any answer, its accounting left to the process that paid for it.
pub fn kept_reply(text: String) -> LlmReply {
    LlmReply {
        code: extract_kernel_code(&text).map(KernelSource::new),
        text,
        truncated: false,
        usage: None,
        cost_usd: None,
    }
}

/// The Python code block that defines `kernel_function`: the last such block when the answer
/// has several (models often show a draft before the final version). Blocks fenced as
/// ```python, ```py, ```python3 or bare ``` count; a block left open (an answer cut at
/// max_tokens) does not. None when no block defines the function.
pub fn extract_kernel_code(reply: &str) -> Option<String> {
    fenced_blocks(reply)
        .into_iter()
        .rfind(|block| is_python_info(block.info) && defines_kernel_function(&block.code))
        .map(|block| block.code)
}

struct FencedBlock<'a> {
    info: &'a str,
    code: String,
}

/// Closed fenced code blocks in order. A fence is three or more backticks at the start of a
/// line (up to three spaces of indentation); it closes at a line of at least as many
/// backticks and nothing else.
fn fenced_blocks(text: &str) -> Vec<FencedBlock<'_>> {
    let mut blocks = Vec::new();
    let mut open: Option<(usize, &str, Vec<&str>)> = None;
    for line in text.lines() {
        let fence = fence_of(line);
        open = match (open, fence) {
            (None, Some((ticks, info))) => Some((ticks, info, Vec::new())),
            (None, None) => None,
            (Some((ticks, info, lines)), Some((closing_ticks, ""))) if closing_ticks >= ticks => {
                blocks.push(FencedBlock {
                    info,
                    code: lines.iter().map(|line| format!("{line}\n")).collect(),
                });
                None
            }
            (Some((ticks, info, mut lines)), _) => {
                lines.push(line);
                Some((ticks, info, lines))
            }
        };
    }
    blocks
}

/// (number of backticks, info string) when the line is a fence.
fn fence_of(line: &str) -> Option<(usize, &str)> {
    let indent = line.len() - line.trim_start_matches(' ').len();
    if indent > 3 {
        return None;
    }
    let rest = &line[indent..];
    let ticks = rest.len() - rest.trim_start_matches('`').len();
    if ticks < 3 {
        return None;
    }
    let info = rest[ticks..].trim();
    // A backtick in the info string means inline code, not a fence (CommonMark).
    (!info.contains('`')).then_some((ticks, info))
}

fn is_python_info(info: &str) -> bool {
    let language = info.split_whitespace().next().unwrap_or("");
    matches!(
        language.to_ascii_lowercase().as_str(),
        "" | "python" | "py" | "python3"
    )
}

fn defines_kernel_function(code: &str) -> bool {
    code.lines().any(|line| {
        let line = line.trim_start();
        let line = line.strip_prefix("async ").map_or(line, str::trim_start);
        line.strip_prefix("def ")
            .map(str::trim_start)
            .and_then(|rest| rest.strip_prefix("kernel_function"))
            .is_some_and(|rest| rest.trim_start().starts_with('('))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(reply: &str, expected: Option<&str>) {
        assert_eq!(extract_kernel_code(reply).as_deref(), expected, "{reply}");
    }

    #[test]
    fn python_block() {
        check(
            "Here is the kernel:\n```python\nimport triton\n\ndef kernel_function(x):\n    return x\n```\nDone.",
            Some("import triton\n\ndef kernel_function(x):\n    return x\n"),
        );
    }

    #[test]
    fn bare_and_other_python_fences() {
        check(
            "```\ndef kernel_function(x): return x\n```",
            Some("def kernel_function(x): return x\n"),
        );
        check(
            "```py\ndef kernel_function (x): return x\n```",
            Some("def kernel_function (x): return x\n"),
        );
        check(
            "```Python3 title=kernel.py\nasync def kernel_function(x): pass\n```",
            Some("async def kernel_function(x): pass\n"),
        );
    }

    #[test]
    fn the_last_defining_block_wins() {
        check(
            "Draft:\n```python\ndef kernel_function(x):\n    return 1\n```\n\
             Helper:\n```python\ndef helper(): pass\n```\n\
             Final:\n```python\ndef kernel_function(x):\n    return 2\n```\n\
             Usage:\n```python\nkernel_function(t)\n```\n",
            Some("def kernel_function(x):\n    return 2\n"),
        );
    }

    #[test]
    fn other_languages_do_not_count() {
        check(
            "```bash\ndef kernel_function(x): pass\n```\n```cuda\ndef kernel_function(): x\n```",
            None,
        );
    }

    #[test]
    fn no_code_or_no_kernel_function() {
        check("I cannot help with that.", None);
        check("```python\ndef kernel_fn(x): pass\n```", None);
        check("```python\ndef kernel_function_v2(x): pass\n```", None);
        check(
            "```python\n# def kernel_function(x) is below\nx = 1\n```",
            None,
        );
        check("", None);
    }

    #[test]
    fn an_unclosed_block_is_not_code() {
        check("```python\ndef kernel_function(x):\n    return", None);
        check(
            "```python\ndef kernel_function(x): return 1\n```\n```python\ndef kernel_function(x):\n    ret",
            Some("def kernel_function(x): return 1\n"),
        );
    }

    #[test]
    fn longer_fences_hold_shorter_ones() {
        check(
            "````python\nDOC = '''\n```\nexample\n```\n'''\ndef kernel_function(x): pass\n````",
            Some("DOC = '''\n```\nexample\n```\n'''\ndef kernel_function(x): pass\n"),
        );
    }

    #[test]
    fn windows_line_endings_and_indented_fences() {
        check(
            "  ```python\r\ndef kernel_function(x):\r\n    return x\r\n  ```\r\n",
            Some("def kernel_function(x):\n    return x\n"),
        );
        check(
            "    ```python\n    def kernel_function(x): pass\n    ```",
            None,
        );
    }
}
