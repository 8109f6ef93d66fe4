//! Reading the two LLM replies that are not code: a parent's bottleneck analysis and a
//! candidate's reflexion. Both are read tolerantly, as pure functions: a reply that says nothing
//! usable (the replay provider's "no analysis available", prose, broken JSON) yields no
//! bottleneck or no lesson, never an error, and the search goes on without them.

use serde::{Deserialize, Serialize};

use crate::text::cut;

/// One bottleneck of a parent kernel, as its analysis named it: a proposal made from the parent
/// attacks it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AnalyzedBottleneck {
    pub title: String,
    pub causes: Vec<String>,
    pub fixes: Vec<String>,
}

/// The longest lesson kept from a reflexion: it travels in every later optimization prompt.
pub const MAX_LESSON_CHARS: usize = 400;

/// The distinct bottlenecks of an analysis reply, in the order the reply gives them.
///
/// The JSON is taken from the first fenced code block (```json or any other fence) that parses
/// and names a bottleneck, else from the first balanced `{...}` object in the text that does. Accepted shapes:
/// `{"bottlenecks": [...]}`, a bare list, or one bottleneck object. A bottleneck needs a
/// non-empty `title`; `causes` and `fixes` are lists of strings (a single string counts as a
/// list of one). A title seen before (ignoring case and spacing) is dropped, so that two
/// proposals never take the same bottleneck.
pub fn parse_bottlenecks(reply: &str) -> Vec<AnalyzedBottleneck> {
    fenced_blocks(reply)
        .into_iter()
        .chain(balanced_objects(reply))
        .filter_map(|text| serde_json::from_str::<serde_json::Value>(text.trim()).ok())
        .map(|document| bottlenecks_of(&document))
        .find(|bottlenecks| !bottlenecks.is_empty())
        .unwrap_or_default()
}

fn bottlenecks_of(document: &serde_json::Value) -> Vec<AnalyzedBottleneck> {
    let items = match document {
        serde_json::Value::Array(items) => items.as_slice(),
        serde_json::Value::Object(object) => match object.get("bottlenecks") {
            Some(serde_json::Value::Array(items)) => items.as_slice(),
            Some(_) => return Vec::new(),
            None => std::slice::from_ref(document),
        },
        _ => return Vec::new(),
    };
    let mut seen = Vec::new();
    let mut bottlenecks = Vec::new();
    for item in items {
        let Some(bottleneck) = bottleneck_of(item) else {
            continue;
        };
        let key = normalized(&bottleneck.title);
        if seen.contains(&key) {
            continue;
        }
        seen.push(key);
        bottlenecks.push(bottleneck);
    }
    bottlenecks
}

/// The lesson of a reflexion reply: its first line that starts with `avoid:` or `try:` (after
/// list markers, quotes or emphasis), else its first non-empty line; cut to
/// `MAX_LESSON_CHARS`. An empty reply (the replay provider's) teaches nothing.
pub fn parse_lesson(reply: &str) -> Option<String> {
    let lines: Vec<&str> = reply
        .lines()
        .filter(|line| !line.trim_start().starts_with("```"))
        .map(strip_decoration)
        .filter(|line| !line.is_empty())
        .collect();
    let tagged = lines.iter().find_map(|line| {
        ["avoid:", "try:"].iter().find_map(|tag| {
            let head = line.get(..tag.len())?;
            if !head.eq_ignore_ascii_case(tag) {
                return None;
            }
            let said = line[tag.len()..].trim_start_matches(['*', '_', ' ']).trim();
            (!said.is_empty()).then(|| format!("{tag} {said}"))
        })
    });
    let lesson = tagged.or_else(|| lines.first().map(|line| line.to_string()))?;
    Some(cut(&lesson, MAX_LESSON_CHARS))
}

fn strip_decoration(line: &str) -> &str {
    line.trim()
        .trim_start_matches(['-', '*', '>', '•'])
        .trim()
        .trim_matches(['"', '\'', '`', '*', '_'])
        .trim()
}

fn bottleneck_of(item: &serde_json::Value) -> Option<AnalyzedBottleneck> {
    let object = item.as_object()?;
    let title = object.get("title")?.as_str()?.trim();
    if title.is_empty() {
        return None;
    }
    Some(AnalyzedBottleneck {
        title: title.to_string(),
        causes: strings(object.get("causes")),
        fixes: strings(object.get("fixes")),
    })
}

fn strings(value: Option<&serde_json::Value>) -> Vec<String> {
    let values = match value {
        Some(serde_json::Value::Array(values)) => values.as_slice(),
        Some(single @ serde_json::Value::String(_)) => std::slice::from_ref(single),
        _ => return Vec::new(),
    };
    values
        .iter()
        .filter_map(|value| value.as_str())
        .map(str::trim)
        .filter(|text| !text.is_empty())
        .map(str::to_string)
        .collect()
}

fn normalized(title: &str) -> String {
    title
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

/// The bodies of the reply's fenced code blocks, in order; an unclosed fence runs to the end.
fn fenced_blocks(reply: &str) -> Vec<&str> {
    let mut blocks = Vec::new();
    let mut rest = reply;
    while let Some(open) = rest.find("```") {
        let after_fence = &rest[open + 3..];
        let body_start = after_fence.find('\n').map_or(after_fence.len(), |n| n + 1);
        let body = &after_fence[body_start..];
        match body.find("```") {
            Some(close) => {
                blocks.push(&body[..close]);
                rest = &body[close + 3..];
            }
            None => {
                blocks.push(body);
                break;
            }
        }
    }
    blocks
}

/// Every balanced `{...}` span of the text, outermost first, in order of their opening brace.
/// Braces inside JSON strings do not count.
fn balanced_objects(text: &str) -> Vec<&str> {
    let mut objects = Vec::new();
    let bytes = text.as_bytes();
    let mut start = 0;
    while let Some(offset) = text[start..].find('{') {
        let open = start + offset;
        let mut depth = 0usize;
        let mut in_string = false;
        let mut escaped = false;
        let mut close = None;
        for (index, &byte) in bytes.iter().enumerate().skip(open) {
            if in_string {
                match byte {
                    _ if escaped => escaped = false,
                    b'\\' => escaped = true,
                    b'"' => in_string = false,
                    _ => {}
                }
                continue;
            }
            match byte {
                b'"' => in_string = true,
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        close = Some(index);
                        break;
                    }
                }
                _ => {}
            }
        }
        match close {
            Some(close) => {
                objects.push(&text[open..=close]);
                start = open + 1;
            }
            None => break,
        }
    }
    objects
}

#[cfg(test)]
mod tests {
    use super::*;

    fn titles(reply: &str) -> Vec<String> {
        parse_bottlenecks(reply)
            .into_iter()
            .map(|b| b.title)
            .collect()
    }

    #[test]
    fn a_fenced_json_block_gives_its_bottlenecks_in_order() {
        let reply = r#"Looking at the metrics, the kernel starves the SMs.

```json
{"bottlenecks": [
  {"title": "Too few programs", "causes": ["32 programs for 132 SMs"], "fixes": ["split K", "smaller BLOCK_M"]},
  {"title": "Uncoalesced loads of B", "causes": "B is read with stride K", "fixes": []}
]}
```
"#;
        assert_eq!(
            parse_bottlenecks(reply),
            vec![
                AnalyzedBottleneck {
                    title: "Too few programs".into(),
                    causes: vec!["32 programs for 132 SMs".into()],
                    fixes: vec!["split K".into(), "smaller BLOCK_M".into()],
                },
                AnalyzedBottleneck {
                    title: "Uncoalesced loads of B".into(),
                    causes: vec!["B is read with stride K".into()],
                    fixes: vec![],
                },
            ]
        );
    }

    #[test]
    fn the_json_may_stand_in_the_text_without_a_fence() {
        let reply = r#"Here it is: {"bottlenecks": [{"title": "L2 thrashing {tiles}", "causes": ["a \"quoted\" } brace"], "fixes": ["swizzle"]}]} Done."#;
        assert_eq!(titles(reply), vec!["L2 thrashing {tiles}"]);
        assert_eq!(
            parse_bottlenecks(reply)[0].causes,
            vec!["a \"quoted\" } brace"]
        );
    }

    #[test]
    fn a_bare_list_and_a_single_object_are_accepted() {
        assert_eq!(
            titles("```\n[{\"title\": \"a\"}, {\"title\": \"b\"}]\n```"),
            vec!["a", "b"]
        );
        assert_eq!(
            titles("{\"title\": \"one\", \"fixes\": [\"x\"]}"),
            vec!["one"]
        );
    }

    #[test]
    fn a_fence_that_does_not_parse_gives_way_to_the_next_candidate() {
        let reply = "```python\nx = {1: 2}\n```\nThen {\"bottlenecks\": [{\"title\": \"t\"}]}";
        assert_eq!(titles(reply), vec!["t"]);
    }

    #[test]
    fn repeated_titles_and_items_without_a_title_are_dropped() {
        let reply = r#"{"bottlenecks": [
            {"title": "Memory  bound"}, {"causes": ["no title"]}, {"title": "  "},
            {"title": "memory bound"}, "not an object", {"title": "Occupancy"}]}"#;
        assert_eq!(titles(reply), vec!["Memory  bound", "Occupancy"]);
    }

    #[test]
    fn replies_without_usable_json_give_no_bottleneck() {
        for reply in [
            "no analysis available",
            "",
            "```json\n{\"bottlenecks\": [\n",
            "{\"bottlenecks\": \"memory\"}",
            "{\"bottlenecks\": [{\"title\": 3}]}",
            "42",
            "{ unbalanced",
            "}{",
        ] {
            assert_eq!(parse_bottlenecks(reply), vec![], "{reply:?}");
        }
    }

    #[test]
    fn a_lesson_is_the_tagged_line() {
        let check = |reply: &str, expected: Option<&str>| {
            assert_eq!(parse_lesson(reply).as_deref(), expected, "{reply:?}");
        };
        check(
            "The split-K version was slower.\nAvoid: split K below 4 chunks; the atomics dominate.",
            Some("avoid: split K below 4 chunks; the atomics dominate."),
        );
        check(
            "- **try:** a persistent grid",
            Some("try: a persistent grid"),
        );
        check("\"TRY: num_warps=8\"", Some("try: num_warps=8"));
        check(
            "```text\n\nsmaller blocks were slower\n```",
            Some("smaller blocks were slower"),
        );
        check("avoid:\ntry: fewer stages", Some("try: fewer stages"));
        check("", None);
        check("  \n\n", None);
    }

    #[test]
    fn a_long_lesson_is_cut_at_a_character_boundary() {
        let lesson = parse_lesson(&format!("try: {}", "é".repeat(1000))).unwrap();
        assert_eq!(lesson.chars().count(), MAX_LESSON_CHARS + 1);
        assert!(lesson.ends_with('…'));
    }
}
